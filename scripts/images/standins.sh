#!/usr/bin/env bash
# clawgym/postgres-standin:15 and clawgym/redis-standin:7: PostgreSQL and Redis from Debian's packages, on
# clawgym/base:bookworm, for the compose test where the official images (postgres:16, redis:7) cannot be pulled.
# A real deployment pulls the official ones (README, "Deploying"). Debian bookworm ships PostgreSQL 15 (the app
# needs 14 or later) and Redis 7.0.
#
# The .debs are downloaded on the host by its apt: `apt-get install --download-only` against the base image's own
# package status, so exactly what the image lacks is fetched, into deploy/.build/<name>/debs/; the build installs
# them with no network. Skipped when <image>-<hash> exists (hash: this script, the stand-in's folder, the base id).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/images/lib.sh

base=clawgym/base:bookworm
image_exists "$base" || { echo "the base image $base is missing: run scripts/images/base.sh first" >&2; exit 1; }

# standin NAME IMAGE PACKAGE...: builds deploy/NAME/ as IMAGE with the packages installed.
standin() {
  local name="$1" image="$2"
  shift 2
  local hashed
  hashed="$image-$( { docker image inspect -f '{{.Id}}' "$base"; inputs_hash scripts/images/standins.sh deploy/"$name"/*; } |
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

standin postgres clawgym/postgres-standin:15 postgresql-15
standin redis clawgym/redis-standin:7 redis-server
