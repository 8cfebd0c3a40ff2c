#!/usr/bin/env bash
# Starts the web server (uvicorn, ASGI) and the worker (django-q2 cluster, or Celery), and with CLAWGYM_DEMO_MODELS=1
# the demo models' server; stops them all, and everything they started, on Ctrl-C and on SIGTERM (what systemd and
# `docker stop` send) alike.
#
# Stopping: each child gets SIGTERM and CLAWGYM_STOP_GRACE_SECONDS (default 8, under Docker's 10 s) to exit on its
# own; then whatever is left of its process group (a django-q2 worker still busy with a job, its sandbox) is
# killed. A job cut short that way is left "running" with a dead worker and is re-queued by the next worker that
# starts on this machine (jobs.runner.recover_lost).
set -euo pipefail
PY=${PY:-.venv/bin/python}
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
GRACE=${CLAWGYM_STOP_GRACE_SECONDS:-8}

# Job control: every child runs in a process group of its own (its pid), so one signal reaches all it started.
# (It also means Ctrl-C reaches only this script, which stops the children the same way as for SIGTERM.)
set -m
pids=()

alive() {  # any process left in the groups of the children?
  local pid
  for pid in "${pids[@]}"; do
    kill -0 -- "-$pid" 2>/dev/null && return 0
  done
  return 1
}

stop() {
  trap - INT TERM EXIT
  [ ${#pids[@]} -eq 0 ] && return 0
  echo "Stopping web and worker (${GRACE} s to finish, then killed)" >&2
  kill -TERM "${pids[@]}" 2>/dev/null || true
  local deadline=$((SECONDS + GRACE))
  while alive && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
  local pid
  for pid in "${pids[@]}"; do
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
}
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
trap stop EXIT

if [ "${CLAWGYM_JOB_ENGINE:-django_q}" = "django_q" ]; then
  "$PY" manage.py schedule_periodic  # the periodic jobs' django-q2 schedules (jobs/periodic.py); idempotent
  "$PY" manage.py qcluster &
  pids+=($!)
else
  "$PY" -m celery -A clawgym_site worker -Q default,sandbox,gpu --loglevel INFO &
  pids+=($!)
  "$PY" -m celery -A clawgym_site beat --loglevel INFO &  # the periodic jobs (jobs/periodic.py); exactly one beat
  pids+=($!)
fi
# CLAWGYM_DEMO_MODELS=1 (`make demo`): the demo models' server too (scripted agents, judge and generator; demo/),
# which registers their endpoints at its address and disables them when it stops.
if [ "${CLAWGYM_DEMO_MODELS:-0}" = 1 ]; then
  "$PY" manage.py demo_models &
  pids+=($!)
fi
echo "ClawGym on http://$HOST:$PORT/ (Ctrl-C stops web and worker)"
"$PY" -m uvicorn clawgym_site.asgi:application --host "$HOST" --port "$PORT" &
pids+=($!)
# `wait -n` returns when either child exits (then the EXIT trap stops the other) or a signal arrives (its trap runs).
wait -n "${pids[@]}"
