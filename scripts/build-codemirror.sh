#!/usr/bin/env bash
# Build the vendored CodeMirror 6 bundle: static/vendor/codemirror/codemirror.js (one IIFE setting window.CM).
#
# The built bundle is committed, so a checkout needs no npm; run this only to change the versions below.
# Needs node and npm (any registry mirror npm is set up for). Works in a temporary folder; writes nothing else.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/static/vendor/codemirror"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# Exact versions, so that a rebuild gives the same bundle.
PACKAGES=(
  "codemirror@6.0.1"
  "@codemirror/state@6.5.2"
  "@codemirror/view@6.38.1"
  "@codemirror/commands@6.8.1"
  "@codemirror/search@6.5.11"
  "@codemirror/language@6.11.2"
  "@codemirror/lang-python@6.2.1"
  "@codemirror/lang-json@6.0.2"
  "esbuild@0.25.8"
)

cd "$WORK"
npm init -y >/dev/null
npm install --no-audit --no-fund --save-exact "${PACKAGES[@]}" >/dev/null

cat > entry.js <<'JS'
// What static/review/editor.js uses, under one global.
export { EditorView, basicSetup } from "codemirror";
export { EditorState, Compartment, StateEffect, StateField, RangeSetBuilder } from "@codemirror/state";
export { Decoration, keymap, lineNumbers } from "@codemirror/view";
export { indentWithTab } from "@codemirror/commands";
export { openSearchPanel, search, searchKeymap } from "@codemirror/search";
export { python } from "@codemirror/lang-python";
export { json } from "@codemirror/lang-json";
JS

mkdir -p "$OUT"
npx esbuild entry.js --bundle --minify --format=iife --global-name=CM --target=es2019 \
  --legal-comments=eof --outfile="$OUT/codemirror.js"
{
  echo "CodeMirror 6, bundled by scripts/build-codemirror.sh (MIT licence; see the licence comments at the end of"
  echo "codemirror.js). Versions:"
  for p in "${PACKAGES[@]}"; do echo "  $p"; done
} > "$OUT/VERSIONS.txt"
echo "wrote $OUT/codemirror.js ($(wc -c < "$OUT/codemirror.js") bytes)"
