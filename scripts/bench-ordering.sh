#!/usr/bin/env bash
# Measures per-device ordering in `tern serve` (SQLite, built-in simulator):
#   1. DEVICES devices × PUSHES rapid pushes each, badge "+1" and an inbox message, sent by SENDERS clients (each one
#      device's pushes back to back), with the simulator answering after 0-50 ms and 4 connections: badge inversions
#      in the simulator's arrival log, duplicates, messages in the inboxes — with ordering on (the default) and off;
#   2. the cost of ordering for pushes to distinct devices: one push to a tag of TAGGED devices, three times each with
#      ordering on and off (same database), medians.
#
#   scripts/bench-ordering.sh                       # 1,000 × 20, then 20,000 tagged devices
#   DEVICES=100 PUSHES=5 TAGGED=2000 scripts/bench-ordering.sh
set -euo pipefail
cd "$(dirname "$0")/.."

DEVICES=${DEVICES:-1000}
PUSHES=${PUSHES:-20}
# Clients sending the pushes: each sends one device's pushes back to back, so with few clients a device's pushes
# are in the dispatcher at the same time (what ordering is for).
SENDERS=${SENDERS:-4}
TAGGED=${TAGGED:-20000}
SCRATCH=${SCRATCH:-.build}

echo "building tern (release)…" >&2
swift build -c release --scratch-path "$SCRATCH" --product tern >&2
TERN="$(cd "$SCRATCH" && pwd)/release/tern"  # SCRATCH may be relative or absolute

work=$(mktemp -d)
pid=""
app_key=""
master=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# start ORDERING DATA_DIR: a server on the folder's database; sets url, master, app_key, control.
start() {
  mkdir -p "$2"
  (cd "$2" && exec env TERN_ADMIN_TOKEN=bench-admin-token-0123456789 TERN_DELIVERY_ORDERING="$1" TERN_APNS_CONNECTIONS=4 \
    "$TERN" serve --port 0 --log-level warning >serve.out 2>serve.err) &
  pid=$!
  for _ in $(seq 1 300); do
    grep -q 'control API' "$2/serve.out" 2>/dev/null && break
    sleep 0.1
  done
  sleep 0.5
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$2/serve.out" | head -1 || true)
  control=$(grep -o 'control API http://127.0.0.1:[0-9]*' "$2/serve.out" | awk '{print $3}' || true)
  # The demo app's secrets are printed on the folder's first start only.
  if grep -q 'app key' "$2/serve.out"; then
    app_key=$(grep 'app key' "$2/serve.out" | awk '{print $3}')
    master=$(grep 'master secret' "$2/serve.out" | awk '{print $3}')
  fi
  [ -n "$url" ] && [ -n "$app_key" ] && [ -n "$control" ] || { echo "tern serve did not start:" >&2; cat "$2/serve.err" >&2; exit 1; }
}
stop() { kill -INT "$pid"; wait "$pid" || true; pid=""; }

for ordering in true false; do
  echo "── $DEVICES devices × $PUSHES rapid pushes, ordering $ordering" >&2
  start "$ordering" "$work/rapid-$ordering"
  result=$(python3 scripts/bench_ordering.py rapid "$url" "$master" "$app_key" "$control" "$DEVICES" "$PUSHES" "$SENDERS")
  echo "$result" >&2
  eval "rapid_$ordering='$result'"
  stop
done

echo "── registering $TAGGED devices tagged 'wide'" >&2
start true "$work/wide"
python3 scripts/bench_ordering.py register "$url" "$app_key" "$TAGGED" wide >&2
stop
for ordering in true false; do
  times=()
  start "$ordering" "$work/wide"
  for run in 1 2 3; do
    result=$(python3 scripts/bench_ordering.py push "$url" "$master" wide)
    echo "ordering $ordering run $run: $result" >&2
    times+=("$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["seconds"])' "$result")")
  done
  stop
  median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 2p)
  eval "wide_$ordering=$median"
done

field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
echo
echo "| measurement | ordering on | ordering off |"
echo "|---|---|---|"
echo "| notifications arrived (of $((DEVICES * PUSHES))) | $(field "$rapid_true" arrived) | $(field "$rapid_false" arrived) |"
echo "| badge inversions (devices with any) | $(field "$rapid_true" inversions) ($(field "$rapid_true" devicesWithInversions)) | $(field "$rapid_false" inversions) ($(field "$rapid_false" devicesWithInversions)) |"
echo "| notifications sent twice | $(field "$rapid_true" duplicates) | $(field "$rapid_false" duplicates) |"
echo "| messages in the inboxes | $(field "$rapid_true" messagesInInboxes) | $(field "$rapid_false" messagesInInboxes) |"
echo "| seconds to create / to deliver all | $(field "$rapid_true" secondsToCreate) / $(field "$rapid_true" secondsToDeliver) | $(field "$rapid_false" secondsToCreate) / $(field "$rapid_false" secondsToDeliver) |"
echo "| push to $TAGGED distinct devices, median of 3 (s) | $wide_true | $wide_false |"
python3 -c 'import sys; on, off = float(sys.argv[1]), float(sys.argv[2]); print("| cost of ordering for distinct devices | %+.1f%% | |" % ((on / off - 1) * 100))' "$wide_true" "$wide_false"
