#!/usr/bin/env bash
# How long the admin's app listing (`GET /v1/apps`) takes with many apps on PKCS#12 bundles, whose certificate the
# listing reads (its end, its environments and topics).
#
#   scripts/bench-app-views.sh                     # 30 apps, 20 listings, on a release build it makes
#   TERN=/path/to/tern APPS=50 scripts/bench-app-views.sh
#
# Each app gets its own certificate from `tern simulator issue-cert`, bundled by openssl with a passphrase, on a custom
# endpoint nothing listens on (the listing sends nothing). Prints each listing's time and their median.
set -euo pipefail
cd "$(dirname "$0")/.."

APPS=${APPS:-30}
ROUNDS=${ROUNDS:-20}
SCRATCH=${SCRATCH:-.build}
if [ -z "${TERN:-}" ]; then
  echo "building tern (release)…" >&2
  swift build -c release --scratch-path "$SCRATCH" --product tern >&2
  TERN="$(cd "$SCRATCH" && pwd)/release/tern"
fi
source scripts/lib/tools.sh
install_missing openssl

work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
export TERN_SERVER_KEY=$(head -c 32 /dev/urandom | base64)
export TERN_ADMIN_TOKEN=bench-admin-token-0123456789
(cd "$work" && exec "$TERN" serve --port 0 --no-demo --log-level warning >serve.out 2>serve.err) &
pid=$!
for _ in $(seq 1 300); do
  grep -q 'Tern is serving' "$work/serve.out" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/serve.err" >&2; exit 1; }
  sleep 0.1
done
url=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.out" | head -1)

echo "── $APPS apps on PKCS#12 bundles" >&2
for i in $(seq 1 "$APPS"); do
  topic="com.example.app$i"
  "$TERN" simulator issue-cert --topic "$topic" --state-dir "$work/ca" >/dev/null
  openssl pkcs12 -export -in "$work/ca/$topic.pem" -inkey "$work/ca/$topic-key.pem" -passout pass:secret -out "$work/$i.p12"
  body="{\"id\": \"app$i\", \"topic\": \"$topic\", \"environment\": \"custom\", \"endpoint\": {\"host\": \"127.0.0.1\", \"port\": 9},
    \"credentials\": {\"type\": \"pkcs12\", \"base64\": \"$(base64 -w0 "$work/$i.p12")\", \"passphrase\": \"secret\"}}"
  curl -sf -o /dev/null -X POST "$url/v1/apps" -H "Authorization: Bearer $TERN_ADMIN_TOKEN" -H 'Content-Type: application/json' -d "$body"
done

times=()
for _ in $(seq 1 "$ROUNDS"); do
  times+=("$(curl -sf -o /dev/null -w '%{time_total}' "$url/v1/apps" -H "Authorization: Bearer $TERN_ADMIN_TOKEN")")
done
source scripts/lib/stats.sh
echo "GET /v1/apps with $APPS PKCS#12 apps, $ROUNDS times: median $(printf '%s\n' "${times[@]}" | median) s (first ${times[0]} s)"
echo "all: ${times[*]}"
