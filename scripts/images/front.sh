#!/usr/bin/env bash
# clawgym/front:latest: the compose deployment's front (deploy/front/: nginx from Debian's packages, its config and
# start script), the one published port: it bounds requests before they reach the web app and is the only client
# whose X-Forwarded-For the web app believes. Built from the packages downloaded on the host (packages.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/images/lib.sh
source scripts/images/packages.sh

packages_image front clawgym/front:latest nginx
