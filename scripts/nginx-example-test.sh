#!/usr/bin/env bash
# The deployment guide's nginx example, run as written in front of a real `tern serve` (the built .build/debug/tern,
# started by scripts/lib/serve.sh)
# with `http.trustedProxies` naming nginx: it checks what the guide says the example does.
#   - /health answers through it, and /metrics is denied;
#   - wrong admin tokens are counted per client (nginx's X-Forwarded-For), not per balancer: a guesser is held at 429
#     while another client is answered, and a guesser writing its own X-Forwarded-For is still counted as itself;
#   - PUTs of a device are limited per client address (burst 60), and another address is not; so are the PUTs of a
#     device's activity tokens.
# Clients are told apart by the loopback address curl sends from (127.0.0.2, 127.0.0.3…).
#
#   scripts/nginx-example-test.sh      (about 10 s; installs Debian's nginx-light when nginx is missing)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v nginx >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null
fi
if [ ! -x .build/debug/tern ]; then
  swift build --product tern
fi
TERN="$(pwd)/.build/debug/tern"
# One `tern serve` in a temporary folder ($work), trusting nginx, which reaches it from 127.0.0.1.
export TERN_HTTP_TRUSTED_PROXIES=127.0.0.1
source scripts/lib/serve.sh
trap 'nginx -c "$work/nginx.conf" -s stop 2>/dev/null || true; cleanup' EXIT
start_server "$work"
tern_port=${url##*:}
admin=$TERN_ADMIN_TOKEN
app_key=$(grep 'app key' "$work/serve.out" | awk '{print $3}')
nginx_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
failed=0
check() { # what, expected, got
  if [ "$2" = "$3" ]; then echo "  ok: $1 ($3)"; else echo "  FAILED: $1: expected $2, got $3" >&2; failed=1; fi
}

# The example as the guide has it, on loopback: no TLS, and both upstreams the one node.
awk '/^```nginx/ {inside = 1; next} /^```/ {if (inside) exit} inside' docs/deployment.md \
  | sed -e "s/listen 443 ssl;/listen 127.0.0.1:$nginx_port;/" \
        -e "s/server 10\.0\.0\.11:8080; server 10\.0\.0\.12:8080;/server 127.0.0.1:$tern_port;/g" >"$work/site.conf"
grep -q "127.0.0.1:$tern_port" "$work/site.conf" || { echo "the guide's nginx example has changed its upstreams" >&2; exit 1; }
cat >"$work/nginx.conf" <<EOF
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events {}
http { access_log off; include $work/site.conf; }
EOF
nginx -t -q -c "$work/nginx.conf"
nginx -c "$work/nginx.conf"
url="http://127.0.0.1:$nginx_port"
status() { curl -s -o /dev/null -w '%{http_code}' "$@"; }

echo "nginx example: through nginx to tern serve"
check "GET /health" 200 "$(status "$url/health")"
check "GET /metrics is denied at the balancer" 403 "$(status "$url/metrics")"

wrong=()
for _ in $(seq 1 10); do wrong+=("$(status --interface 127.0.0.2 -H 'Authorization: Bearer wrong-guess-0123456789' "$url/v1/apps")"); done
check "ten wrong admin tokens from one client" "401 401 401 401 401 401 401 401 401 401" "${wrong[*]}"
check "then the right one from that client" 429 "$(status --interface 127.0.0.2 -H "Authorization: Bearer $admin" "$url/v1/apps")"
check "the right one from another client" 200 "$(status --interface 127.0.0.3 -H "Authorization: Bearer $admin" "$url/v1/apps")"
check "the guesser writing its own X-Forwarded-For" 429 \
  "$(status --interface 127.0.0.2 -H 'X-Forwarded-For: 127.0.0.9' -H "Authorization: Bearer $admin" "$url/v1/apps")"

register() { # from-address n
  status --interface "$1" -X PUT -H "Authorization: Bearer $app_key" -H 'Content-Type: application/json' \
    -d "{\"token\": \"$(printf '%056x%08x' 7 "$2")\", \"environment\": \"production\"}" \
    "$url/v1/apps/demo/devices/$(printf '6f1c1f9e-8d7a-4d44-9d2e-%012x' "$2")"
}
answers=$(for n in $(seq 1 100); do register 127.0.0.4 "$n"; echo; done | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}')
accepted=$(grep -o '200:[0-9]*' <<<"$answers" | cut -d: -f2 || true)
limited=$(grep -o '429:[0-9]*' <<<"$answers" | cut -d: -f2 || true)
check "100 registrations at once from one client: the burst of 60 taken" yes "$([ "${accepted:-0}" -ge 60 ] && echo yes || echo "no: $answers")"
check "and the rest limited" yes "$([ "${limited:-0}" -ge 1 ] && [ "$(( ${accepted:-0} + ${limited:-0} ))" = 100 ] && echo yes || echo "no: $answers")"
check "a registration from another client meanwhile" 200 "$(register 127.0.0.5 1000)"
check "a GET from the limited client" 200 "$(status --interface 127.0.0.4 "$url/health")"

# A device's activity tokens share the limit: one device rewriting them from one address is held at 429 too.
secret=$(curl -s --interface 127.0.0.6 -X PUT -H "Authorization: Bearer $app_key" -H 'Content-Type: application/json' \
  -d "{\"token\": \"$(printf '%056x%08x' 8 1)\", \"environment\": \"production\"}" \
  "$url/v1/apps/demo/devices/$(printf '6f1c1f9e-8d7a-4d44-9d2e-%012x' 2000)" | grep -o '"deviceSecret":"[^"]*"' | cut -d'"' -f4)
activity_answers=$(for n in $(seq 1 100); do
  status --interface 127.0.0.6 -X PUT -H "Authorization: Bearer $app_key" -H "X-Tern-Device-Secret: $secret" \
    -H 'Content-Type: application/json' -d "{\"token\": \"$(printf '%056x%08x' 9 "$n")\"}" \
    "$url/v1/apps/demo/devices/$(printf '6f1c1f9e-8d7a-4d44-9d2e-%012x' 2000)/activities/match-$n"
  echo
done | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}')
check "100 activity tokens at once from one device: some limited" yes \
  "$(grep -q '429:' <<<"$activity_answers" && grep -q '200:' <<<"$activity_answers" && echo yes || echo "no: $activity_answers")"

if [ "$failed" != 0 ]; then
  echo "nginx example: FAILED; tern's log:" >&2
  tail -20 "$work/serve.err" >&2
  exit 1
fi
echo "nginx example: every check passed"
