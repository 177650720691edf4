#!/usr/bin/env bash
# Measures Tern's APNs client with `tern bench`, beside h2load against a `tern simulator` in the same run, so the
# ratio client ÷ h2load is visible.
#
#   scripts/bench-client.sh                  # 1,000,000 notifications, 3 runs per case
#   COUNT=200000 RUNS=5 scripts/bench-client.sh
#
# Per run, with 4 connections:
#   - `tern bench` with its in-process simulator (the default: client and simulator share the process);
#   - `tern bench --host …` against a separate `tern simulator` process (the client has its process to itself);
#   - h2load -c 4 -m 100 against that same `tern simulator`, same payload (76 bytes), same headers.
# Then one run of each with 1 connection. Needs h2load (Debian: nghttp2-client); installs it when missing.
# Everything runs on loopback and stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-1000000}
RUNS=${RUNS:-3}
CONNS=${CONNS:-4}
SCRATCH=${SCRATCH:-.build}

source scripts/lib/tools.sh
install_missing h2load:nghttp2-client

echo "building tern (release)…" >&2
swift build -c release --scratch-path "$SCRATCH" --product tern >&2
TERN="$SCRATCH/release/tern"

work=$(mktemp -d)
sim_pid=""
cleanup() {
  [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# A separate simulator for h2load and `tern bench --host`: production environment (APNs' answers carry only
# apns-id), demo key, the same arrival-log size as tern bench's in-process simulator.
"$TERN" simulator --port 0 --control-port 0 --environment production --log-capacity 10000 \
  --state-dir "$work/state" --log-level warning >"$work/sim.out" 2>"$work/sim.err" &
sim_pid=$!
for _ in $(seq 1 100); do
  grep -q 'APNs HTTP/2 API' "$work/sim.out" 2>/dev/null && break
  sleep 0.1
done
sim_port=$(grep -o 'https://127.0.0.1:[0-9]*' "$work/sim.out" | head -1 | sed 's/.*://')
[ -n "$sim_port" ] || { echo "the simulator did not start:" >&2; cat "$work/sim.err" >&2; exit 1; }
key="$work/state/SIMKEY0001.p8"
jwt=$("$TERN" token --key-file "$key" --key-id SIMKEY0001 --team-id SIMTEAM001)

# The payload tern bench sends (APNsPayload renders the same 76 bytes, keys sorted).
token_hex=$(printf 'ab%.0s' $(seq 1 32))
printf '{"aps":{"alert":{"body":"Benchmark notification","title":"Tern"},"badge":1}}' >"$work/payload.json"

# h2load CONNECTIONS → requests/s; warns when any request was not answered 200.
h2rate() {
  local out
  out=$(h2load -n "$COUNT" -c "$1" -m 100 -d "$work/payload.json" -H 'apns-topic: com.example.app' \
    -H 'apns-push-type: alert' -H "authorization: bearer $jwt" "https://127.0.0.1:$sim_port/3/device/$token_hex" 2>&1)
  if ! grep -q "status codes: $COUNT 2xx, 0 3xx, 0 4xx, 0 5xx" <<<"$out" || ! grep -q "0 errored, 0 timeout" <<<"$out"; then
    echo "h2load got unexpected answers:" >&2
    grep -E 'requests:|status codes' <<<"$out" >&2
  fi
  grep -o 'finished in [^,]*, [0-9.]* req/s' <<<"$out" | awk '{print $(NF-1)}'
}

# tern bench CONNECTIONS [extra args…] → "rate p50 p99 p99.9 max rss" (ms, MiB); warns unless all were delivered.
bench() {
  local conns=$1; shift
  local out
  out=$("$TERN" bench -n "$COUNT" --connections "$conns" "$@" 2>"$work/bench.err") || true
  if ! grep -q "delivered $(sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$COUNT")  rejected 0  errors 0" <<<"$out"; then
    echo "tern bench did not deliver everything:" >&2
    echo "$out" >&2
    tail -3 "$work/bench.err" >&2
  fi
  echo "$out" >&2
  local rate lat rss
  rate=$(awk '/^throughput/ {gsub(",", "", $2); print $2}' <<<"$out")
  lat=$(awk '/^latency/ {print $3, $6, $9, $12}' <<<"$out")
  rss=$(awk '/^peak RSS/ {print $3}' <<<"$out")
  echo "$rate $lat $rss"
}

source scripts/lib/stats.sh

# One table row: LABEL RESULTS(one "rate p50 p99 p99.9 max rss" line per run) H2LOAD-MEDIAN
row() {
  local label=$1 results=$2 h2=$3
  local rate runs
  rate=$(column 1 "$results")
  runs=$(awk '{printf "%s%s", (NR>1 ? ", " : ""), $1}' <<<"$results")
  printf '| %s | %.0f | %s | %s | %s | %s | %s | %s | %.0f | %.0f%% |\n' "$label" "$rate" "$runs" \
    "$(column 2 "$results")" "$(column 3 "$results")" "$(column 4 "$results")" "$(column 5 "$results")" \
    "$(maximum 6 "$results")" "$h2" "$(echo "100*$rate/$h2" | bc -l)"
}

external=(--host 127.0.0.1 --port "$sim_port" --ca-file "$work/state/ca.pem" --key-file "$key" --key-id SIMKEY0001 --team-id SIMTEAM001)
declare -A results=() h2=()
for conns in "$CONNS" 1; do
  runs=$RUNS
  [ "$conns" = 1 ] && runs=1
  for i in $(seq 1 "$runs"); do
    echo "── $conns connection(s), run $i of $runs" >&2
    # Interleaved, so each case sees the same machine noise.
    results[in$conns]+="$(bench "$conns")"$'\n'
    h2[$conns]+="$(h2rate "$conns") "
    results[ext$conns]+="$(bench "$conns" "${external[@]}")"$'\n'
  done
done

echo
echo "| case | notifications/s (median) | runs | p50 (ms) | p99 (ms) | p99.9 (ms) | max (ms) | peak RSS (MiB) | h2load req/s, same simulator | client ÷ h2load |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for conns in "$CONNS" 1; do
  h2median=$(tr ' ' '\n' <<<"${h2[$conns]}" | grep . | median)
  row "tern bench, in-process simulator, $conns conn" "$(grep . <<<"${results[in$conns]}")" "$h2median"
  row "tern bench → tern simulator, $conns conn" "$(grep . <<<"${results[ext$conns]}")" "$h2median"
  echo "  h2load runs ($conns × 100): ${h2[$conns]}" >&2
done
