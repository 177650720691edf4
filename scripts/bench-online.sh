#!/usr/bin/env bash
# The online channel: how fast `tern serve` delivers pushes over the devices' own connections, end to end.
#
#   scripts/bench-online.sh                      # 2,000 devices, 5 pushes each
#   DEVICES=5000 PUSHES=3 RUNS=1 scripts/bench-online.sh
#
# What it does (release build, everything on loopback, one machine):
#   1. `tern serve` on a fresh SQLite folder (the demo app).
#   2. `tern device --count DEVICES --tag load --messages DEVICES*PUSHES`: that many devices register, connect and
#      acknowledge what they get, in one process.
#   3. Once all are connected, PUSHES pushes to tag `load` with `"delivery": "online"`, one after another, timed from
#      the first POST until `tern device` counted every message (it exits then).
# Prints each run and the median: messages/s end to end, and the server's RSS before and after.
set -euo pipefail
cd "$(dirname "$0")/.."

DEVICES=${DEVICES:-2000}
PUSHES=${PUSHES:-5}
RUNS=${RUNS:-3}
SCRATCH=${SCRATCH:-.build}

echo "building tern (release)…" >&2
swift build -c release --scratch-path "$SCRATCH" --product tern >&2
TERN="$(cd "$SCRATCH" && pwd)/release/tern"
source scripts/lib/stats.sh

work=$(mktemp -d)
server=""
devices=""
cleanup() {
  [ -n "$devices" ] && kill "$devices" 2>/dev/null || true
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

rates=()
for run in $(seq 1 "$RUNS"); do
  rm -rf "$work/data" && mkdir -p "$work/data"
  (cd "$work/data" && exec "$TERN" serve --port 0 --log-level warning >serve.out 2>serve.err) &
  server=$!
  for _ in $(seq 1 300); do grep -q 'pushes?wait' "$work/data/serve.out" 2>/dev/null && break; sleep 0.1; done
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/data/serve.out" | head -1)
  app_key=$(grep 'app key' "$work/data/serve.out" | awk '{print $3}')
  master=$(grep 'master secret' "$work/data/serve.out" | awk '{print $3}')

  total=$((DEVICES * PUSHES))
  "$TERN" device --url "$url" --app-key "$app_key" --count "$DEVICES" --tag load --messages "$total" --timeout 600 \
    >"$work/devices.out" 2>"$work/devices.err" &
  devices=$!
  # Every device registered and connected.
  until grep -q "connected $DEVICES " "$work/devices.out" 2>/dev/null; do
    kill -0 "$devices" 2>/dev/null || { echo "tern device stopped:" >&2; cat "$work/devices.err" >&2; exit 1; }
    sleep 0.2
  done
  rss_before=$(awk '/VmRSS/ {print $2}' "/proc/$server/status")
  t0=$(date +%s.%N)
  for push in $(seq 1 "$PUSHES"); do
    curl -sf -X POST "$url/v1/apps/demo/pushes" -H "Authorization: Bearer $master" -H 'Content-Type: application/json' \
      -d "{\"audience\": {\"tags\": [\"load\"]}, \"notification\": {\"title\": \"online $push\"}, \"delivery\": \"online\"}" >/dev/null
  done
  wait "$devices" || { echo "tern device did not get every message:" >&2; tail -3 "$work/devices.out" >&2; exit 1; }
  devices=""
  seconds=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}')
  rss_after=$(awk '/VmRSS/ {print $2}' "/proc/$server/status")
  rate=$(awk -v n="$total" -v s="$seconds" 'BEGIN {printf "%.0f", n / s}')
  rates+=("$rate")
  echo "run $run: $DEVICES devices × $PUSHES pushes = $total messages in $seconds s = $rate/s; $(tail -1 "$work/devices.out"); server RSS $((rss_before / 1024)) → $((rss_after / 1024)) MiB"
  kill -INT "$server"; wait "$server" || true; server=""
done
echo "median: $(printf '%s\n' "${rates[@]}" | median) messages/s delivered online and acknowledged ($DEVICES devices, $PUSHES pushes)"
