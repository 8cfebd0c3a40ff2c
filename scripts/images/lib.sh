# Shared by the scripts in scripts/images/ (sourced, not run): how an image build knows it can be skipped, and how a
# Debian root folder becomes an image. Each image is tagged twice: its plain name (what the project uses) and
# <name>-<hash of its inputs> (what tells an up-to-date build), so a build is skipped when that second tag exists.

# inputs_hash FILE...: the first 12 hex digits of the sha256 over the files' names and contents.
inputs_hash() {
  local file
  for file in "$@"; do
    printf '%s\0' "$file"
    sha256sum <"$file"
  done | sha256sum | cut -c1-12
}

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# import_root FOLDER IMAGE [docker import --change ...]: the folder's tree as a one-layer image. Owners, modes and
# links are kept (numeric ids: the folder's own /etc/passwd is what counts inside).
import_root() {
  local folder="$1" image="$2"
  shift 2
  tar --numeric-owner --xattrs -C "$folder" -c . | docker import "$@" - "$image" >/dev/null
}

# debian_root FOLDER SUITE MIRROR PACKAGE...: debootstrap's minbase into FOLDER, then apt-get installs the packages;
# package lists, caches, documentation and the host's resolver are left out. Downloads are kept in the machine's
# package cache (CLAWGYM_RUNTIME_CACHE's packages/, shared with scripts/build-runtime.sh under its lock), so a rebuild
# fetches nothing it has. Needs root.
debian_root() {
  local folder="$1" suite="$2" mirror="$3"
  shift 3
  local cache="${CLAWGYM_RUNTIME_CACHE:-/var/cache/clawgym/runtime}/packages"
  mkdir -p "$cache/debootstrap" "$cache/apt/partial"
  (
    flock 8
    debootstrap --variant=minbase --cache-dir="$(cd "$cache/debootstrap" && pwd)" "$suite" "$folder" "$mirror"
    mount -t proc proc "$folder/proc"
    mount --bind "$cache/apt" "$folder/var/cache/apt/archives"
    trap 'umount "$folder/var/cache/apt/archives" "$folder/proc" 2>/dev/null || true' EXIT
    printf '#!/bin/sh\nexit 101\n' >"$folder/usr/sbin/policy-rc.d"
    chmod 0755 "$folder/usr/sbin/policy-rc.d"
    DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 chroot "$folder" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 chroot "$folder" apt-get install -y -qq --no-install-recommends "$@"
  ) 8>"$cache/.lock"
  rm -f "$folder/usr/sbin/policy-rc.d" "$folder/etc/resolv.conf" "$folder/etc/hostname"
  rm -f "$folder"/var/cache/apt/archives/*.deb
  rm -rf "$folder"/var/lib/apt/lists/* "$folder"/var/cache/apt/*.bin "$folder"/usr/share/man/* "$folder"/usr/share/info/*
  find "$folder/usr/share/doc" -type f ! -name copyright -delete
}
