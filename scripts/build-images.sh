#!/usr/bin/env bash
# `make images`: the project's Docker images, built from local packages only (no registry is assumed reachable).
# Each step is idempotent: it skips its build when an image for the current inputs exists already.
#   clawgym/base:bookworm          Debian bookworm from debootstrap (scripts/images/base.sh)
#   clawgym/sandbox:<runtime>      the sandbox runtime + the OpenClaw harness (scripts/images/sandbox.sh)
#   clawgym/app:latest             the web app and workers (scripts/images/app.sh)
#   clawgym/front:latest           the compose deployment's front, nginx from Debian's packages (scripts/images/front.sh)
#   clawgym/postgres-standin:15, clawgym/redis-standin:7
#                                  stand-ins for the official images, from Debian's packages (scripts/images/standins.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/docker-engine.sh start
for step in base sandbox app front standins; do
    echo "== image: $step =="
    "scripts/images/$step.sh"
done
