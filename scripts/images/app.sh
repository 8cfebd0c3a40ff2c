#!/usr/bin/env bash
# clawgym/app:latest: the web app, the workers and the scheduler (Dockerfile), on clawgym/base:bookworm.
# No package index is assumed reachable from inside a build: the wheels of requirements.txt (and, --no-deps,
# requirements-nodeps.txt) are fetched here on the host with the project's pip (its own index settings:
# a local index or PyPI) into deploy/.build/wheels/, and the Dockerfile installs them with --no-index.
#
# CLAWGYM_GPU_IMAGE=1 builds clawgym/app-gpu:latest too (the gpu worker: requirements-training.txt, torch first).
# Which torch that is depends on the host's pip: PyPI gives the CUDA build, this machine's local index the CPU one.
#
# Skipped when clawgym/app:latest-<hash> exists, the hash taken over the build's inputs: the base image's id, the
# sources (what git tracks or would track), the requirements. Docker's layer cache keeps the wheels' layer when only
# the sources changed.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/images/lib.sh

PY=${PY:-.venv/bin/python}
image=clawgym/app:latest
gpu_image=clawgym/app-gpu:latest
base=clawgym/base:bookworm
image_exists "$base" || { echo "the base image $base is missing: run scripts/images/base.sh first" >&2; exit 1; }

# Every file the build context takes (.dockerignore leaves out the rest, git leaves out what it ignores).
mapfile -d '' sources < <(git ls-files -z --cached --others --exclude-standard | sort -z)
existing=()
for file in "${sources[@]}"; do [ -f "$file" ] && existing+=("$file"); done
hash="$( { docker image inspect -f '{{.Id}}' "$base"; printf 'gpu=%s\n' "${CLAWGYM_GPU_IMAGE:-0}";
           inputs_hash "${existing[@]}"; } | sha256sum | cut -c1-12)"
hashed="$image-$hash"
if image_exists "$hashed" && { [ "${CLAWGYM_GPU_IMAGE:-0}" != 1 ] || image_exists "$gpu_image-$hash"; }; then
  docker tag "$hashed" "$image"
  echo "image $image is up to date ($hashed)"
  exit 0
fi

started=$(date +%s)
wheels=deploy/.build/wheels
training_wheels=deploy/.build/wheels-training
mkdir -p "$wheels" "$training_wheels"
# The wheels are resolved by the image's own interpreter, not the host's: markers differ between micro versions (redis
# needs async-timeout before Python 3.11.3; bookworm has 3.11.2, this host may have another). So pip runs in a
# throw-away container of the base image on the host's network, with the host's pip settings and the local
# indexes they name mounted read-only; the build itself then needs no network. pip reuses what the folder holds.
pip_mounts=()
for conf in /etc/pip.conf "$HOME/.pip/pip.conf" "$HOME/.config/pip/pip.conf"; do
  [ -f "$conf" ] || continue
  case "$conf" in
    /etc/*) pip_mounts+=(-v "$conf:$conf:ro") ;;
    *) pip_mounts+=(-v "$conf:/root/${conf#"$HOME"/}:ro") ;;
  esac
  for dir in $(grep -oE '(file://)?/[^ ,]+' "$conf" | sed 's|^file://||'); do
    [ "$(basename "$dir")" = simple ] && dir="$(dirname "$dir")"  # a local index's pages link files beside them
    if [ -e "$dir" ]; then pip_mounts+=(-v "$dir:$dir:ro"); fi  # folders, and files such as a CA bundle
  done
done
download() {  # download FOLDER PIP-ARGS...: pip download, by the base image's Python, into FOLDER (under deploy/.build)
  local folder="$1"
  shift
  docker run --rm --network host -v "$PWD:/src:ro" -v "$PWD/$folder:/dest" "${pip_mounts[@]}" -w /src "$base" \
    bash -c 'python3 -m venv /tmp/pip && /tmp/pip/bin/pip download --disable-pip-version-check --only-binary=:all: --dest /dest "$@" \
               >/tmp/log 2>&1 || { grep -v "^WARNING: Location" /tmp/log >&2; exit 1; }' download "$@"
}
download "$wheels" -r requirements.txt pip
download "$wheels" --no-deps -r requirements-nodeps.txt
if [ "${CLAWGYM_GPU_IMAGE:-0}" = 1 ]; then
  download "$training_wheels" --no-deps "$(grep -E '^torch==' requirements-training.txt)"
  download "$training_wheels" --find-links /dest -r requirements-training.txt
fi
docker build --quiet --build-arg BASE_IMAGE="$base" -t "$hashed" . >/dev/null
docker tag "$hashed" "$image"
if [ "${CLAWGYM_GPU_IMAGE:-0}" = 1 ]; then
  docker build --quiet --build-arg BASE_IMAGE="$base" --build-arg TRAINING=1 -t "$gpu_image-$hash" . >/dev/null
  docker tag "$gpu_image-$hash" "$gpu_image"
fi
docker run --rm --network none -e SECRET_KEY=image-check "$image" python manage.py check >/dev/null
echo "image $image built ($hashed, $(docker image inspect -f '{{.Size}}' "$image" | numfmt --to=iec), $(($(date +%s) - started)) s)"
