#!/usr/bin/env bash
# Measures `tern serve` on its embedded defaults (SQLite, built-in simulator):
#   1. device registration throughput and latency with wrk (PUT /v1/apps/demo/devices/{id}, app key);
#   2. one push to a tag audience of N registered devices, end to end (POST …/pushes?wait=…), with the server's
#      peak RSS.
#
#   scripts/bench-serve.sh                    # 100,000 devices, 30 s of registrations
#   DEVICES=20000 DURATION=10 scripts/bench-serve.sh
#   DATABASE=postgres scripts/bench-serve.sh  # on a throwaway PostgreSQL (installed when missing) instead of SQLite
#   DATABASE=postgres NODES=2 scripts/bench-serve.sh   # phase 2 with a second node on the same database
#   LATENCY_MS=20 TERN_DELIVERY_CONCURRENCY=50 …      # the simulator answers the push in 20 ms, 50 in flight per chunk
#   DEAD=10000 …                              # that many of the devices' tokens answer 410 Unregistered: pruned by the push
#   TERN=/path/to/tern …                      # another build (an earlier version, say) instead of building
#
# Needs wrk (Debian: wrk); installs it when missing. Everything runs on loopback and stops by itself; KEEP=1 keeps
# the data folder (its path is printed) to look at the database afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

DEVICES=${DEVICES:-100000}
DURATION=${DURATION:-30}
CONNECTIONS=${CONNECTIONS:-32}
SCRATCH=${SCRATCH:-.build}
DATABASE=${DATABASE:-sqlite}
NODES=${NODES:-1}
[ "$NODES" = 1 ] || [ "$DATABASE" = postgres ] || { echo "NODES=$NODES needs DATABASE=postgres" >&2; exit 64; }

source scripts/lib/tools.sh
install_missing wrk

if [ -z "${TERN:-}" ]; then
  echo "building tern (release)…" >&2
  swift build -c release --scratch-path "$SCRATCH" --product tern >&2
  TERN="$(cd "$SCRATCH" && pwd)/release/tern"  # SCRATCH may be relative or absolute
fi

work=$(mktemp -d)
pid=""
pid2=""
# Every node shares the server key (it seals the apps' credentials).
export TERN_SERVER_KEY=$(head -c 32 /dev/urandom | base64)
export TERN_ADMIN_TOKEN=bench-admin-token-0123456789
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  [ -n "$pid2" ] && kill "$pid2" 2>/dev/null || true
  [ "$DATABASE" = postgres ] && postgres_stop
  rm -rf "$work"
}
if [ "$DATABASE" = postgres ]; then
  source scripts/lib/postgres.sh
  postgres_start
fi
trap cleanup EXIT
[ -n "${KEEP:-}" ] && trap 'kill "$pid" 2>/dev/null || true; echo "kept $work" >&2' EXIT

# A fresh database for a phase: for PostgreSQL, a new database on the server (TERN_DATABASE_URL).
fresh_database() {
  rm -f "$work"/tern.db*
  if [ "$DATABASE" = postgres ]; then
    local name="bench_$1"
    psql "$TERN_POSTGRES_URL" -q -c "DROP DATABASE IF EXISTS $name WITH (FORCE)" -c "CREATE DATABASE $name"
    export TERN_DATABASE_URL="${TERN_POSTGRES_URL/\/postgres?//$name?}"
  fi
}

fresh_database registrations
(cd "$work" && exec "$TERN" serve --port 0 --log-level warning >serve.out 2>serve.err) &
pid=$!
for _ in $(seq 1 300); do
  grep -q 'pushes?wait' "$work/serve.out" 2>/dev/null && break
  sleep 0.1
done
url=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.out" | head -1)
app_key=$(grep 'app key' "$work/serve.out" | awk '{print $3}')
master=$(grep 'master secret' "$work/serve.out" | awk '{print $3}')
[ -n "$url" ] && [ -n "$app_key" ] || { echo "tern serve did not start:" >&2; cat "$work/serve.err" >&2; exit 1; }
echo "tern serve at $url (pid $pid, data in $work)" >&2

# Each wrk thread registers its own devices (scripts/lib/register.lua). With QUOTA set (phase 2) exactly
# QUOTA × threads devices end up registered if wrk runs long enough (its duration comes from phase 1's rate, with a
# margin); phase 1 runs for DURATION without a quota.
cp scripts/lib/register.lua "$work/register.lua"

echo "── registrations: wrk -t2 -c$CONNECTIONS -d${DURATION}s" >&2
reg=$(cd "$work" && APP_KEY=$app_key wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s register.lua "$url")
echo "$reg" >&2
reg_rate=$(awk '/Requests\/sec/ {print $2}' <<<"$reg")
reg_p50=$(awk '$1=="50%" {print $2}' <<<"$reg")
reg_p99=$(awk '$1=="99%" {print $2}' <<<"$reg")
non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$reg")

# Phase 2: a fresh server state for an exact audience of DEVICES devices.
kill -INT "$pid"; wait "$pid" || true
fresh_database push
(cd "$work" && exec "$TERN" serve --port 0 --log-level warning >serve.out 2>serve.err) &
pid=$!
for _ in $(seq 1 300); do
  grep -q 'pushes?wait' "$work/serve.out" 2>/dev/null && break
  sleep 0.1
done
url=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.out" | head -1)
app_key=$(grep 'app key' "$work/serve.out" | awk '{print $3}')
master=$(grep 'master secret' "$work/serve.out" | awk '{print $3}')

echo "── registering $DEVICES devices" >&2
seconds=$(awk -v n="$DEVICES" -v r="$reg_rate" 'BEGIN {printf "%d", n / (r * 0.5) + 10}')
(cd "$work" && QUOTA=$((DEVICES / 2)) APP_KEY=$app_key wrk -t2 -c"$CONNECTIONS" -d"${seconds}s" -s register.lua "$url" >&2)
rss_before=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
if [ "$NODES" = 2 ]; then
  mkdir -p "$work/b"
  (cd "$work/b" && exec "$TERN" serve --port 0 --log-level warning --no-demo >serve.out 2>serve.err) &
  pid2=$!
  for _ in $(seq 1 300); do grep -q 'Tern is serving' "$work/b/serve.out" 2>/dev/null && break; sleep 0.1; done
  echo "second node: $(head -1 "$work/b/serve.out")" >&2
fi

if [ -n "${LATENCY_MS:-}" ]; then
  # Slow APNs: every node sends the demo app's pushes to its own built-in simulator, and each of those answers
  # every request after LATENCY_MS.
  for out in "$work/serve.out" "$work/b/serve.out"; do
    [ -f "$out" ] || continue
    control=$(grep -o 'control API http://127.0.0.1:[0-9]*' "$out" | awk '{print $3}' || true)
    if [ -z "$control" ]; then
      echo "LATENCY_MS needs the built-in simulator's control API, and $out names none" >&2
      exit 2
    fi
    curl -sf -X PUT "$control/scenario/latency" -d "{\"fixedMilliseconds\": $LATENCY_MS}" >/dev/null
    echo "simulator latency: $LATENCY_MS ms at $control" >&2
  done
fi

if [ -n "${DEAD:-}" ]; then
  # Dead tokens: every node's built-in simulator answers 410 for the first DEAD devices' tokens (both wrk threads'
  # in turn, as register.lua numbers them), dead since a minute from now, so after their registration.
  for out in "$work/serve.out" "$work/b/serve.out"; do
    [ -f "$out" ] || continue
    control=$(grep -o 'control API http://127.0.0.1:[0-9]*' "$out" | awk '{print $3}')
    python3 - "$control" "$DEAD" <<'PY'
import http.client, sys, time, urllib.parse
address, dead = urllib.parse.urlparse(sys.argv[1]), int(sys.argv[2])
connection = http.client.HTTPConnection(address.hostname, address.port)
timestamp = int((time.time() + 60) * 1000)
for n in range(dead):
    token = "%056x%08x" % (n % 2, n // 2 + 1)
    connection.request("POST", f"/tokens/{token}/unregister", body=f'{{"timestamp": {timestamp}}}')
    answer = connection.getresponse()
    answer.read()
    assert answer.status == 204, answer.status
PY
    echo "dead tokens: $DEAD at $control" >&2
  done
fi

echo "── one push to tag 'bench'" >&2
push=$(curl -s -w '\n%{time_total}' -X POST "$url/v1/apps/demo/pushes?wait=60" -H "Authorization: Bearer $master" \
  -H 'Content-Type: application/json' -d '{"audience": {"tags": ["bench"]}, "notification": {"title": "Benchmark", "body": "one push to every device"}}')
push_time=$(tail -1 <<<"$push")
push_json=$(head -1 <<<"$push")
echo "$push_json" | head -c 400 >&2; echo >&2
targeted=$(grep -o '"targeted":[0-9]*' <<<"$push_json" | cut -d: -f2)
accepted=$(grep -o '"accepted":[0-9]*' <<<"$push_json" | cut -d: -f2)
pruned=$(grep -o '"pruned":[0-9]*' <<<"$push_json" | cut -d: -f2)
status=$(grep -o '"status":"[a-z]*"' <<<"$push_json" | cut -d'"' -f4)
peak=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
chunks=""
if [ "$DATABASE" = postgres ]; then
  # How the push's chunks were shared out: the count each node sent, largest first.
  chunks=$(psql "$TERN_DATABASE_URL" -Atc \
    "SELECT string_agg(n::text, ' / ' ORDER BY n DESC) FROM (SELECT COUNT(*) AS n FROM push_chunks GROUP BY owner) c")
fi

echo
echo "| measurement ($DATABASE, $NODES node(s) for the push${LATENCY_MS:+, APNs answering in $LATENCY_MS ms}) | result |"
echo "|---|---|"
echo "| registrations/s (wrk, $CONNECTIONS connections, ${DURATION} s) | $reg_rate |"
echo "| registration latency p50 / p99 | $reg_p50 / $reg_p99 |"
echo "| registrations answered non-2xx | ${non2xx:-0} |"
echo "| push to the $targeted devices of a tag (of $DEVICES registered), POST to completed | ${push_time} s ($status; accepted $accepted, pruned $pruned) |"
echo "| server RSS before the push / peak | $((rss_before / 1024)) MiB / $((peak / 1024)) MiB |"
[ -z "$chunks" ] || echo "| chunks sent by each node | $chunks |"
