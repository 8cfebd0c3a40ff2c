#!/usr/bin/env bash
# clawgym/postgres-standin:15 and clawgym/redis-standin:7: PostgreSQL and Redis from Debian's packages, on
# clawgym/base:bookworm, for the compose test where the official images (postgres:16, redis:7) cannot be pulled.
# A real deployment pulls the official ones (README, "Deploying"). Debian bookworm ships PostgreSQL 15 (the app
# needs 14 or later) and Redis 7.0. Built from the packages downloaded on the host (packages_image, packages.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/images/lib.sh
source scripts/images/packages.sh

packages_image postgres clawgym/postgres-standin:15 postgresql-15
packages_image redis clawgym/redis-standin:7 redis-server
