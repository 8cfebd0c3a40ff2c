#!/usr/bin/env bash
# `make deploy-test`: the compose deployment brought up and tested (deploy/tests/test_compose.py): the stack of
# docker-compose.yml with the Debian stand-ins for PostgreSQL and Redis, health, the example tasks imported through
# the API, sanity checks and rollouts on the sandbox workers against a scripted model on this host, a worker container
# restarted mid-rollout, two sandbox worker hosts sharing a batch while one is killed, sign-in lockouts per client
# behind the published port, the sandbox workers without SECRET_KEY on their own database role; then everything torn
# down, volumes included. Exit 0 only when every step passed. The stack gets none of the caller's shell (Stack.env).
#
# Needs root (the Docker engine, apt-get for docker-compose where it is missing) and `make images` (the Makefile
# target runs it first; the test runs scripts/build-images.sh again, which only checks the images are up to date).
# CI=true turns anything missing into a failure instead of a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
scripts/docker-engine.sh start
if ! command -v docker-compose >/dev/null 2>&1; then
  echo "installing docker-compose with apt-get" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null
fi
SECONDS=0
CI=${CI:-true} "$PY" -m pytest deploy/tests/test_compose.py -q -rA -s "$@"
echo "deploy test: ${SECONDS}s"
