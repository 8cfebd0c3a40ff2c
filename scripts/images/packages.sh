# Sourced (after lib.sh) by the scripts of images made of Debian packages on the base image: standins.sh, front.sh.
# Apart from lib.sh because lib.sh is an input of the base and sandbox images: a change here rebuilds only these.

# packages_image NAME IMAGE PACKAGE...: deploy/NAME/ (its Dockerfile and what it copies) built as IMAGE on
# clawgym/base:bookworm, with the packages' .debs downloaded here by the host's apt: `apt-get install --download-only`
# against the base image's own package status, so exactly what the image lacks is fetched, into
# deploy/.build/NAME/debs/; the build installs them with no network. Skipped when IMAGE-<hash> exists (hash: the
# calling script, this file, deploy/NAME/*, the base image's id).
packages_image() {
  local name="$1" image="$2" base=clawgym/base:bookworm
  shift 2
  image_exists "$base" || { echo "the base image $base is missing: run scripts/images/base.sh first" >&2; exit 1; }
  local hashed
  hashed="$image-$( { docker image inspect -f '{{.Id}}' "$base"; inputs_hash "scripts/images/$(basename "$0")" scripts/images/packages.sh deploy/"$name"/*; } |
                    sha256sum | cut -c1-12)"
  if image_exists "$hashed"; then
    docker tag "$hashed" "$image"
    echo "image $image is up to date ($hashed)"
    return
  fi
  local started context
  started=$(date +%s)
  context="deploy/.build/$name"
  rm -rf "$context"
  mkdir -p "$context/debs/partial"
  docker run --rm --network none "$base" cat /var/lib/dpkg/status >"$context/status"
  # The host's package lists may be old or missing (a fresh machine): one `apt-get update`, then try again.
  fetch() {
    apt-get install -qq --download-only --no-install-recommends -o Debug::NoLocking=1 \
      -o Dir::State::status="$context/status" -o Dir::Cache::archives="$PWD/$context/debs" "$@" >/dev/null
  }
  fetch "$@" 2>/dev/null || { apt-get update -qq >/dev/null && fetch "$@"; }
  rm -rf "$context/debs/partial" "$context/debs/lock" "$context/status"
  cp deploy/"$name"/* "$context/"
  docker build --quiet --build-arg BASE_IMAGE="$base" -t "$hashed" "$context" >/dev/null
  docker tag "$hashed" "$image"
  echo "image $image built ($hashed, $(docker image inspect -f '{{.Size}}' "$image" | numfmt --to=iec), $(($(date +%s) - started)) s)"
}
