#!/bin/bash
# The front's entry point: writes the two settings nginx cannot read from the environment into /tmp/clawgym-front/,
# which /etc/clawgym-front/nginx.conf includes, then runs nginx in the foreground.
#
#   CLAWGYM_FRONT_TRUSTED_PROXIES  comma-separated addresses or networks whose X-Forwarded-For (and
#                                  X-Forwarded-Proto) is believed: a TLS proxy in front of this one. `host` is the
#                                  address this host's own connections arrive from (the container's gateway: a
#                                  port published on the host's loopback is reached only from the host). Default:
#                                  none, every client is the address it connects from.
#   CLAWGYM_FRONT_UPSTREAM         where the web app listens (default unix:/run/clawgym-web/web.sock)
#   CLAWGYM_FRONT_LISTEN           where this listens (default 8000: every address of the container, port 8000)
set -euo pipefail
conf=/tmp/clawgym-front
mkdir -p "$conf"

# The default route's gateway, from /proc/net/route (its hex is the address's bytes in reverse order).
gateway() {
  local hex
  hex=$(awk '$2 == "00000000" { print $3; exit }' /proc/net/route)
  [ -n "$hex" ] || { echo "clawgym-front: CLAWGYM_FRONT_TRUSTED_PROXIES names host, but there is no default route" >&2; exit 1; }
  printf '%d.%d.%d.%d\n' "0x${hex:6:2}" "0x${hex:4:2}" "0x${hex:2:2}" "0x${hex:0:2}"
}

: >"$conf/trusted.conf"
: >"$conf/trusted-geo.conf"
IFS=, read -r -a trusted <<<"${CLAWGYM_FRONT_TRUSTED_PROXIES:-}"
for item in "${trusted[@]}"; do
  item="${item// /}"
  [ -n "$item" ] || continue
  [ "$item" = host ] && item="$(gateway)"
  # An address or a network, nothing that could end the directive.
  if [[ ! "$item" =~ ^[0-9A-Fa-f.:]+(/[0-9]+)?$ ]]; then
    echo "clawgym-front: CLAWGYM_FRONT_TRUSTED_PROXIES: $item is neither an address nor a network" >&2
    exit 1
  fi
  echo "set_real_ip_from $item;" >>"$conf/trusted.conf"
  echo "$item 1;" >>"$conf/trusted-geo.conf"
  echo "clawgym-front: X-Forwarded-For is believed from $item"
done

upstream="${CLAWGYM_FRONT_UPSTREAM:-unix:/run/clawgym-web/web.sock}"
listen="${CLAWGYM_FRONT_LISTEN:-8000}"
address='^[][A-Za-z0-9_.:/-]+$'  # host:port, [v6]:port, port, unix:/path
for value in "$upstream" "$listen"; do
  if [[ ! "$value" =~ $address ]]; then
    echo "clawgym-front: $value is not an address nginx can use" >&2
    exit 1
  fi
done
echo "server $upstream;" >"$conf/upstream.conf"
echo "listen $listen;" >"$conf/listen.conf"

nginx -e stderr -t -q -c /etc/clawgym-front/nginx.conf
exec nginx -e stderr -c /etc/clawgym-front/nginx.conf -g 'daemon off;'
