#!/usr/bin/env bash
# Measures what a SIGKILL in the middle of a push costs: `tern serve` (SQLite, release build) is killed at a random
# moment of a push to N devices, started again, and finishes the push; a `tern simulator` in its own process counts
# what each device received. Per run it prints:
#   repeats   notifications a device got twice: duplicates in the simulator's arrival log, which takes a
#             notification when it answers it (as APNs hands it to the device);
#   re-sent   every notification sent more than once: requests the simulator received in all, minus N (this adds
#             those that were on the wire when the server died, whose answers it never read);
#   lost      recipients that never got it (must be 0);
# then the medians.
#
#   scripts/bench-crash.sh                      # 5,000 and 100,000 devices, 5 runs each
#   SIZES="5000" RUNS=3 scripts/bench-crash.sh
#   LATENCY_MS=5 scripts/bench-crash.sh         # the simulator answers after 5 ms (default 20, as APNs over the internet)
#
# The kill lands at a uniformly random moment between 10 % and 90 % of the push's duration, measured first by one
# push that is not killed; a run whose push had reached every device before the kill is shown but not counted, and
# another run takes its place (RUNS counted runs, at most 6 × RUNS tries). Defaults are tern serve's (delivery.concurrency 1000, chunks of 2,000). Needs wrk and
# python3; installs wrk when missing. Everything runs on loopback and stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=${SIZES:-"5000 100000"}
RUNS=${RUNS:-5}
LATENCY_MS=${LATENCY_MS:-20}
SCRATCH=${SCRATCH:-.build}
source scripts/lib/stats.sh

source scripts/lib/tools.sh
install_missing wrk
echo "building tern (release)…" >&2
swift build -c release --scratch-path "$SCRATCH" --product tern >&2
TERN="$(cd "$SCRATCH" && pwd)/release/tern"  # SCRATCH may be relative or absolute

work=$(mktemp -d)
serve_pid=""
sim_pid=""
cleanup() {
  [ -n "$serve_pid" ] && kill -9 "$serve_pid" 2>/dev/null || true
  [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
export TERN_ADMIN_TOKEN=bench-admin-token-0123456789

# The simulator, with a log large enough for every notification of the largest push and its repeats.
"$TERN" simulator --port 0 --control-port 0 --legacy-port 0 --feedback-port 0 --state-dir "$work/sim" --log-capacity 400000 \
  >"$work/sim.out" 2>"$work/sim.err" &
sim_pid=$!
for _ in $(seq 1 200); do grep -q 'Press Ctrl-C' "$work/sim.out" 2>/dev/null && break; sleep 0.1; done
sim_port=$(grep -o 'APNs HTTP/2 API  https://127.0.0.1:[0-9]*' "$work/sim.out" | grep -o '[0-9]*$')
control="http://127.0.0.1:$(grep -o 'control API      http://127.0.0.1:[0-9]*' "$work/sim.out" | grep -o '[0-9]*$')"
curl -sf -X PUT "$control/scenario/latency" -d "{\"fixedMilliseconds\": $LATENCY_MS}" >/dev/null

start_serve() {
  (cd "$work/serve" && exec "$TERN" serve --port 0 --log-level warning --no-demo >serve.out 2>serve.err) &
  serve_pid=$!
  for _ in $(seq 1 300); do grep -q 'Tern is serving' "$work/serve/serve.out" 2>/dev/null && break; sleep 0.05; done
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve/serve.out" | head -1)
  [ -n "$url" ] || { echo "tern serve did not start:" >&2; cat "$work/serve/serve.err" >&2; exit 1; }
}

# Counts what the simulator received since the log was emptied: "<notifications> <distinct tokens>".
received() {
  python3 - "$control" <<'PY'
import json, sys, urllib.request
control, after, total, tokens = sys.argv[1], 0, 0, set()
while True:
    page = json.load(urllib.request.urlopen(f"{control}/notifications?after={after}&limit=10000"))
    if not page["items"]:
        break
    total += len(page["items"])
    tokens.update(item["token"] for item in page["items"])
    after = page["next"]
print(total, len(tokens))
PY
}

# How many requests the simulator has received since it started.
requests() { curl -sf "$control/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])'; }

# One push to tag "bench"; prints its id.
push() {
  curl -sf -X POST "$url/v1/apps/shop/pushes" -H "Authorization: Bearer $master" -H 'Content-Type: application/json' \
    -d '{"audience": {"tags": ["bench"]}, "notification": {"title": "Crash test"}}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}

wait_completed() {
  for _ in $(seq 1 1200); do
    state=$(curl -s "$url/v1/apps/shop/pushes/$1" -H "Authorization: Bearer $master")
    grep -q '"status":"completed"' <<<"$state" && return 0
    sleep 0.1
  done
  echo "push $1 did not complete: $state" >&2
  exit 1
}

echo "| devices | run | killed after (devices reached by then) | repeats | re-sent | lost |"
echo "|---|---|---|---|---|---|"
for size in $SIZES; do
  rm -rf "$work/serve"; mkdir -p "$work/serve"
  start_serve
  key_pem=$(python3 -c 'import json,sys; print(json.dumps(open(sys.argv[1]).read()))' "$work/sim/SIMKEY0001.p8")
  ca_pem=$(python3 -c 'import json,sys; print(json.dumps(open(sys.argv[1]).read()))' "$work/sim/ca.pem")
  created=$(curl -sf -X POST "$url/v1/apps" -H "Authorization: Bearer $TERN_ADMIN_TOKEN" -d "{\"id\": \"shop\", \"topic\": \"com.example.app\",
    \"environment\": \"custom\", \"endpoint\": {\"host\": \"127.0.0.1\", \"port\": $sim_port, \"caPEM\": $ca_pem},
    \"credentials\": {\"type\": \"token\", \"keyPEM\": $key_pem, \"keyID\": \"SIMKEY0001\", \"teamID\": \"SIMTEAM001\"}}")
  app_key=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["appKey"])' "$created")
  master=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["masterSecret"])' "$created")
  cp scripts/lib/register.lua "$work/register.lua"
  echo "── registering $size devices" >&2
  (cd "$work" && APP=shop QUOTA=$((size / 2)) APP_KEY=$app_key wrk -t2 -c32 -d$((size / 1000 + 20))s -s register.lua "$url" >/dev/null)

  # The push's duration, unkilled: POST until completed, as the server says (?wait polls every 20 ms). The second of
  # two: the first also opens the APNs connections.
  curl -sf -X DELETE "$control/notifications" >/dev/null
  for _ in 1 2; do duration=$(curl -s -o /dev/null -w '%{time_total}' -X POST "$url/v1/apps/shop/pushes?wait=60" -H "Authorization: Bearer $master" \
    -H 'Content-Type: application/json' -d '{"audience": {"tags": ["bench"]}, "notification": {"title": "Calibration"}}'); done
  echo "── $size devices: an unkilled push takes ${duration} s" >&2

  repeats_all=()
  resent_all=()
  run=0
  while [ "${#repeats_all[@]}" -lt "$RUNS" ] && [ "$run" -lt $((RUNS * 6)) ]; do
    run=$((run + 1))
    curl -sf -X DELETE "$control/notifications" >/dev/null
    requests_before=$(requests)
    delay=$(awk -v d="$duration" -v r="$RANDOM" 'BEGIN {printf "%.3f", d * (0.1 + 0.8 * r / 32767)}')
    id=$(push)
    sleep "$delay"
    kill -9 "$serve_pid"; wait "$serve_pid" 2>/dev/null || true
    # How far the push had got: the devices that had it when the server died.
    read -r _ reached < <(received)
    start_serve
    wait_completed "$id"
    read -r total distinct < <(received)
    repeats=$((total - distinct))
    resent=$(( $(requests) - requests_before - size ))
    lost=$((size - distinct))
    if [ "$reached" -ge "$size" ]; then
      echo "| $size | $run | ${delay} s | (the push had finished: not counted) | | $lost |"
      continue
    fi
    repeats_all+=("$repeats")
    resent_all+=("$resent")
    echo "| $size | $run | ${delay} s ($reached reached) | $repeats | $resent | $lost |"
  done
  kill -INT "$serve_pid"; wait "$serve_pid" 2>/dev/null || true; serve_pid=""
  echo "── $size devices: repeats ${repeats_all[*]} (median $(printf '%s\n' "${repeats_all[@]}" | median)); re-sent ${resent_all[*]} (median $(printf '%s\n' "${resent_all[@]}" | median))" >&2
done
