#!/usr/bin/env bash
# ClawGym checker entry: run check.py, show its sub-scores, print their mean as the last line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
scores="$(python3 "$here/check.py")"
printf '%s\n' "$scores"
printf '%s' "$scores" | python3 -c 'import json, sys
s = json.load(sys.stdin)
v = [float(x) for x in s.values()]
print(round(sum(v) / len(v), 6) if v else 0.0)'
