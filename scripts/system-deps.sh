#!/usr/bin/env bash
# Installs the Debian packages ClawGym's tests and sandbox need, when they are missing and we may.
# (What runs inside the sandbox comes from its own runtime, scripts/build-runtime.sh, not from these.)
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
# The unisolated `process` backend sets rlimits with the host's prlimit (util-linux, essential on Debian).
command -v prlimit >/dev/null 2>&1 || missing+=(util-linux)
# The sandbox's size-limited workspaces are ext4 images made by mke2fs; its runtime is built with debootstrap.
command -v mke2fs >/dev/null 2>&1 || [ -x /usr/sbin/mke2fs ] || [ -x /sbin/mke2fs ] || missing+=(e2fsprogs)
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
# The tutorials (docs/tutorials/, walked by demo/tests/test_tutorial_*.py) read commands' JSON with jq and call the
# REST API with curl.
command -v jq >/dev/null 2>&1 || missing+=(jq)
command -v curl >/dev/null 2>&1 || missing+=(curl)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "missing system packages: ${missing[*]} (run as root, or: sudo apt-get install -y ${missing[*]})" >&2
  exit 1
fi
echo "installing ${missing[*]} with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}" >/dev/null
