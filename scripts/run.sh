#!/usr/bin/env bash
# Starts the web server (uvicorn, ASGI) and the django-q2 worker cluster; Ctrl-C stops both.
set -euo pipefail
PY=${PY:-.venv/bin/python}
HOST=${HOST:-127.0.0.1}
# The proxy URL agents are given (CLAWGYM_PROXY_PUBLIC_URL) follows PORT unless set: the worker must see it too.
export PORT=${PORT:-8000}
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM
if [ "${CLAWGYM_JOB_ENGINE:-django_q}" = "django_q" ]; then
  "$PY" manage.py qcluster &
  pids+=($!)
else
  "$PY" -m celery -A clawgym_site worker -Q default,sandbox,gpu --loglevel INFO &
  pids+=($!)
fi
echo "ClawGym on http://$HOST:$PORT/ (Ctrl-C stops web and worker)"
# --http: uvicorn's protocol with a request-header deadline (clawgym_site/http_timeouts.py: slow-loris and silent
# connections are closed); idle keep-alive connections close after 5 s.
"$PY" -m uvicorn clawgym_site.asgi:application --host "$HOST" --port "$PORT" \
  --http clawgym_site.http_timeouts:HttpToolsProtocol --timeout-keep-alive 5 &
pids+=($!)
wait -n "${pids[@]}"
