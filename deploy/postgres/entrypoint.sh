#!/bin/bash
# The stand-in's entry point: on an empty PGDATA, initdb with POSTGRES_USER / POSTGRES_PASSWORD (password logins
# from the network, scram-sha-256) and create POSTGRES_DB; then run the server in the foreground.
set -euo pipefail
bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)"
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  [ -n "${POSTGRES_PASSWORD:-}" ] || { echo "POSTGRES_PASSWORD is not set" >&2; exit 1; }
  "$bin/initdb" -D "$PGDATA" -U "$user" -E UTF8 --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 \
    --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") >/dev/null
  echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    echo "CREATE DATABASE \"$db\" OWNER \"$user\";" | "$bin/postgres" --single -D "$PGDATA" -j postgres >/dev/null
  fi
  echo "database $db initialised in $PGDATA"
fi
exec "$bin/postgres" -D "$PGDATA"
