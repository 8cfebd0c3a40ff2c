#!/usr/bin/env bash
# clawgym/base:bookworm: a minimal Debian bookworm with Python, the base of the project's other images (the app
# image, the PostgreSQL and Redis stand-ins). No registry is assumed reachable, so it is made from Debian's packages:
# debootstrap's minbase into a temporary folder, the packages below, then `docker import`.
#
# What is in it: python3 with venv (ensurepip: `python3 -m venv` gives a pip that installs wheels with --no-index),
# CA certificates and time zones. apt works in it once `apt-get update` has fetched the lists (left out here).
# Skipped when clawgym/base:bookworm-<hash of this script and lib.sh> exists. Needs root and the Debian mirror.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/images/lib.sh

suite=bookworm
mirror=http://deb.debian.org/debian
packages=(python3 python3-venv ca-certificates tzdata)
image=clawgym/base:bookworm
hashed="$image-$(inputs_hash scripts/images/base.sh scripts/images/lib.sh)"

if image_exists "$hashed"; then
  docker tag "$hashed" "$image"
  echo "image $image is up to date ($hashed)"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "building $image needs root (debootstrap, chroot): sudo $0" >&2
  exit 1
fi
command -v debootstrap >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null

started=$(date +%s)
mkdir -p .runtime
build="$(mktemp -d "$(pwd)/.runtime/.image-base-XXXXXX")"
log="$build.log"
cleanup() {
  for m in var/cache/apt/archives proc; do
    if mountpoint -q "$build/$m" 2>/dev/null; then umount "$build/$m" || return; fi
  done
  rm -rf --one-file-system "$build"
}
trap cleanup EXIT

echo "building $image (debootstrap $suite, ${packages[*]})" >&2
debian_root "$build" "$suite" "$mirror" "${packages[@]}" >"$log" 2>&1 || {
  tail -n 20 "$log" >&2
  exit 1
}
chmod 0755 "$build"
import_root "$build" "$hashed" \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]'
docker tag "$hashed" "$image"
rm -f "$log"
docker run --rm --network none "$image" python3 -c 'import venv, ssl, zoneinfo; zoneinfo.ZoneInfo("Europe/Paris")'
echo "image $image built ($hashed, $(docker image inspect -f '{{.Size}}' "$image" | numfmt --to=iec), $(($(date +%s) - started)) s)"
