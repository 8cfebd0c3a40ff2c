#!/usr/bin/env bash
# Builds the sandbox runtime that sandbox/runtime/packages.txt defines into .runtime/<version>/ (git-ignored), once.
#
#   scripts/build-runtime.sh             build it unless it is already there (the stamp /etc/clawgym-runtime inside)
#   scripts/build-runtime.sh --version   print the runtime's version and exit
#
# The folder is a Debian root: debootstrap's variant from the manifest, then apt-get installs the listed packages
# inside it. It is built under a temporary name and renamed when complete, so a half-built runtime is never used;
# a lock keeps two builds of the same folder from racing. Needs root (debootstrap, chroot, mount) and the mirror.
# The machine keeps what a build made in CLAWGYM_RUNTIME_CACHE (default /var/cache/clawgym/runtime): the downloaded
# packages, so a rebuild (a changed manifest) fetches only what is new, and a copy of each runtime built (hard
# links where it can), so another checkout of the project on the same machine (a fresh clone, CI) has it in seconds
# instead of building it again for minutes. A copy counts only with its stamp, written last, and is copied under a temporary name like a build.
# CLAWGYM_RUNTIME_DIR: the folder holding runtimes (default .runtime in the project).
# The folder is also the Docker backend's image: scripts/images/sandbox.sh imports it as clawgym/sandbox:<version>.
set -euo pipefail
cd "$(dirname "$0")/.."
manifest=sandbox/runtime/packages.txt

field() { awk -v key="$1" '$1 == key { print $2; exit }' "$manifest"; }
series="$(field version)"
version="clawgym-runtime-${series}-$(sha256sum "$manifest" | cut -c1-12)"
if [ "${1:-}" = "--version" ]; then
  echo "$version"
  exit 0
fi
suite="$(field suite)"
mirror="$(field mirror)"
variant="$(field variant)"
packages=($(awk '$1 == "package" { print $2 }' "$manifest"))
commands=($(awk '$1 == "package" { for (i = 3; i <= NF; i++) if ($i ~ /^commands=/) print substr($i, 10) }' "$manifest" | tr ',' ' '))
modules="$(awk '$1 == "package" { for (i = 3; i <= NF; i++) if ($i ~ /^modules=/) print substr($i, 9) }' "$manifest" | paste -sd, -)"

root_dir="${CLAWGYM_RUNTIME_DIR:-.runtime}"
mkdir -p "$root_dir"
root_dir="$(cd "$root_dir" && pwd)"
target="$root_dir/$version"
stamped() { [ -f "$1/etc/clawgym-runtime" ] && [ "$(head -n1 "$1/etc/clawgym-runtime")" = "$version" ]; }
built() { stamped "$target"; }
built && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "building the sandbox runtime $version needs root (debootstrap, chroot): run 'sudo make runtime' once" >&2
  exit 1
fi
exec 9>"$root_dir/.build.lock"
flock 9
built && exit 0  # another build finished while we waited for the lock
if ! command -v debootstrap >/dev/null 2>&1; then
  echo "installing debootstrap with apt-get" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

started=$(date +%s)
machine_cache="${CLAWGYM_RUNTIME_CACHE:-/var/cache/clawgym/runtime}"
cache="$machine_cache/packages"
mkdir -p "$cache/debootstrap" "$cache/apt/partial"
kept="$machine_cache/$version"
# The package cache is the machine's: one build (or image build, scripts/images/lib.sh) uses it at a time.
exec 7>"$cache/.lock"
flock 7
# Hard links where the cache and the folder share a filesystem (no file of a runtime is ever changed in place: the
# sandbox shows it read-only), a plain copy where they do not.
link_copy() { cp -al "$1" "$2" 2>/dev/null || { rm -rf --one-file-system "$2"; cp -a "$1" "$2"; }; }
mounts=(proc var/cache/apt/archives)
# A process that looks into the folder while it is built (a search over the project, say) keeps /proc busy for a
# moment: a lazy unmount detaches the mount at once and lets go when that process does.
unmount() { umount "$1" 2>/dev/null || umount -l "$1"; }
remove_build() {
  local dir="$1" still_mounted=0
  for m in "${mounts[@]}"; do
    if mountpoint -q "$dir/$m" 2>/dev/null; then unmount "$dir/$m" || still_mounted=1; fi
  done
  # Never delete through a mount that is still there (the package cache, /proc).
  if [ -d "$dir" ] && [ "$still_mounted" -eq 0 ]; then rm -rf --one-file-system "$dir"; fi
}
# Builds that were killed on the way (we hold the lock, so none is running).
for stale in "$root_dir"/.build-*; do
  [ -d "$stale" ] && remove_build "$stale"
done
build="$root_dir/.build-$version-$$"
trap 'remove_build "$build"' EXIT

if stamped "$kept"; then
  link_copy "$kept" "$build"
  stamped "$build" || { echo "the copy of $kept has no stamp" >&2; exit 1; }
  rm -rf --one-file-system "$target"
  mv "$build" "$target"
  echo "sandbox runtime $version copied into $target from the machine's $kept ($(($(date +%s) - started)) s)" >&2
  exit 0
fi

echo "building the sandbox runtime $version ($suite, ${#packages[@]} packages) into $target" >&2
debootstrap --variant="$variant" --cache-dir="$cache/debootstrap" "$suite" "$build" "$mirror" >"$root_dir/.build.log" 2>&1 || {
  tail -n 20 "$root_dir/.build.log" >&2
  exit 1
}
mount -t proc proc "$build/proc"
mount --bind "$cache/apt" "$build/var/cache/apt/archives"
# No service may start inside the folder while packages are installed.
printf '#!/bin/sh\nexit 101\n' >"$build/usr/sbin/policy-rc.d"
chmod 0755 "$build/usr/sbin/policy-rc.d"
in_root() { DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 chroot "$build" "$@"; }
{
  in_root apt-get update -qq
  in_root apt-get install -y -qq --no-install-recommends "${packages[@]}"
} >>"$root_dir/.build.log" 2>&1 || {
  tail -n 20 "$root_dir/.build.log" >&2
  exit 1
}

# Every listed command and module must be there before the folder counts as built.
for command in "${commands[@]}"; do
  in_root /bin/sh -c "command -v '$command'" >/dev/null || { echo "runtime check: no command $command" >&2; exit 1; }
done
in_root python -c "import ${modules}" || { echo "runtime check: a listed Python module does not import" >&2; exit 1; }

# Leave out what only the build needed: package lists and caches, the host's resolver, documentation.
rm -f "$build/usr/sbin/policy-rc.d" "$build/etc/resolv.conf" "$build/etc/hostname"
rm -rf "$build"/var/lib/apt/lists/* "$build"/var/cache/apt/*.bin "$build"/usr/share/man/* "$build"/usr/share/info/*
find "$build/usr/share/doc" -type f ! -name copyright -delete
in_root dpkg-query -W -f '${Package} ${Version}\n' | sort >"$build/etc/clawgym-runtime.packages"
for m in "${mounts[@]}"; do unmount "$build/$m"; done
rm -f "$build"/var/cache/apt/archives/*.deb  # debootstrap's own downloads, under the cache's bind mount until now
chmod 0755 "$build"
# The stamp goes last: its presence means the folder is complete.
printf '%s\n' "$version" >"$build/etc/clawgym-runtime"
rm -rf --one-file-system "$target"
mv "$build" "$target"
echo "sandbox runtime $version ready in $target ($(du -sh "$target" | cut -f1), $(($(date +%s) - started)) s)" >&2
# The machine's copy, for the next checkout: written under a temporary name, renamed when whole.
if ! stamped "$kept"; then
  copying="$machine_cache/.copy-$version-$$"
  # -T: where another checkout's copy landed first, this one is dropped rather than moved inside it.
  if ! { link_copy "$target" "$copying" && mv -T "$copying" "$kept" 2>/dev/null; }; then
    rm -rf --one-file-system "$copying"
    stamped "$kept" || echo "could not keep a copy in $machine_cache (the next checkout builds its own)" >&2
  fi
fi
