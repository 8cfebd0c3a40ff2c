#!/usr/bin/env bash
# `make docker`: a Docker engine for the Docker sandbox backend, the project's images and the compose test.
#
#   scripts/docker-engine.sh start    install docker.io where dockerd is missing (apt-get), start dockerd where no
#                                     engine answers, and wait until `docker info` does; does nothing when one answers
#   scripts/docker-engine.sh stop     stop the dockerd this script started (its pid file), and only that one
#   scripts/docker-engine.sh status   exit 0 when an engine answers, 1 otherwise, and say which
#
# The engine listens where the Docker SDK and CLI look unconfigured: DOCKER_HOST when it is a unix:// address,
# /var/run/docker.sock otherwise. It gets its own data root, pid file and log, so it never mixes with an engine
# someone else runs here, and no systemd is needed (dockerd runs in the background, in its own session).
# A tcp:// DOCKER_HOST is somebody else's engine: `start` only checks that it answers.
#   CLAWGYM_DOCKER_DATA_ROOT  images and containers (default /var/lib/clawgym-docker)
#   CLAWGYM_DOCKER_WAIT       seconds to wait for the engine to answer (default 60)
set -euo pipefail

data_root="${CLAWGYM_DOCKER_DATA_ROOT:-/var/lib/clawgym-docker}"
pidfile=/run/clawgym-dockerd.pid
logfile=/var/log/clawgym-dockerd.log
wait_seconds="${CLAWGYM_DOCKER_WAIT:-60}"
address="${DOCKER_HOST:-unix:///var/run/docker.sock}"

answers() { docker info --format '{{.ServerVersion}}' >/dev/null 2>&1; }
our_pid() {
  # The pid in our pid file, when that process is still a dockerd (a recycled pid is never signalled).
  local pid
  pid="$(cat "$pidfile" 2>/dev/null)" || return 1
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ] && echo "$pid"
}

install_engine() {
  command -v dockerd >/dev/null 2>&1 && command -v docker >/dev/null 2>&1 && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "docker-engine: dockerd is not installed and installing it needs root: sudo $0 start" >&2
    exit 1
  fi
  echo "docker-engine: installing docker.io with apt-get" >&2
  # Without systemd the package's service start fails; a policy-rc.d that says no keeps it from trying.
  local policy_added=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 0755 /usr/sbin/policy-rc.d
    policy_added=1
  fi
  {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io; }
  } >/dev/null
  [ "$policy_added" -eq 1 ] && rm -f /usr/sbin/policy-rc.d
  command -v dockerd >/dev/null 2>&1 || { echo "docker-engine: apt-get gave no dockerd" >&2; exit 1; }
}

wait_until_answers() {
  local deadline=$((SECONDS + wait_seconds)) pid="${1:-}"
  until answers; do
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      echo "docker-engine: dockerd exited while starting; the end of $logfile:" >&2
      tail -n 20 "$logfile" >&2
      exit 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "docker-engine: no engine answered at $address within $wait_seconds s; the end of $logfile:" >&2
      tail -n 20 "$logfile" >&2 || true
      exit 1
    fi
    sleep 0.5
  done
}

start() {
  if answers; then
    echo "docker-engine: an engine answers at $address ($(docker info --format '{{.ServerVersion}}'))"
    return 0
  fi
  case "$address" in
    unix://*) socket="${address#unix://}" ;;
    *)
      echo "docker-engine: DOCKER_HOST=$address does not answer, and this script starts engines on unix sockets only" >&2
      exit 1
      ;;
  esac
  install_engine
  if [ "$(id -u)" -ne 0 ]; then
    echo "docker-engine: starting dockerd needs root: sudo $0 start" >&2
    exit 1
  fi
  exec 9>/run/clawgym-dockerd.lock
  flock 9  # two callers starting at once: the second waits, then finds it answering
  if answers; then
    echo "docker-engine: an engine answers at $address"
    return 0
  fi
  local pid
  if pid="$(our_pid)"; then
    # Ours, still starting (or stuck): wait for it rather than start a second one on the same socket.
    wait_until_answers "$pid"
    echo "docker-engine: dockerd $pid answers at $address"
    return 0
  fi
  mkdir -p "$data_root" "$(dirname "$socket")"
  # A socket left by a dockerd that died would make the new one fail to listen.
  [ -S "$socket" ] && rm -f "$socket"
  # It must not inherit the lock (fd 9), or every later start would wait on it for ever.
  # The exec root (container state, plugin sockets) beside the pid file, not /var/run/docker: another engine's.
  setsid dockerd \
    --host "unix://$socket" \
    --data-root "$data_root" \
    --exec-root /run/clawgym-docker \
    --pidfile "$pidfile" \
    >>"$logfile" 2>&1 </dev/null 9>&- &
  pid=$!
  wait_until_answers "$pid"
  echo "docker-engine: started dockerd $pid at $address (data root $data_root, log $logfile)"
}

stop() {
  local pid
  if ! pid="$(our_pid)"; then
    echo "docker-engine: no dockerd started by this script is running (pid file $pidfile)"
    rm -f "$pidfile"
    return 0
  fi
  kill -TERM "$pid"
  # dockerd stops its containers first (up to their stop timeouts), so give it time before insisting.
  for _ in $(seq 1 120); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "docker-engine: dockerd $pid did not stop within 60 s; killing it" >&2
    kill -KILL "$pid"
  fi
  rm -f "$pidfile"
  echo "docker-engine: stopped dockerd $pid"
}

status() {
  if answers; then
    local pid owner="not started by this script"
    pid="$(our_pid)" && owner="dockerd $pid, started by this script"
    echo "docker-engine: an engine answers at $address ($(docker info --format '{{.ServerVersion}}'), $owner)"
    return 0
  fi
  echo "docker-engine: no engine answers at $address"
  return 1
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *)
    echo "usage: $0 start|stop|status" >&2
    exit 2
    ;;
esac
