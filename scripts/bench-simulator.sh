#!/usr/bin/env bash
# Measures the APNs simulator with h2load, beside nghttpd measured with the same h2load flags in the same run,
# and records the simulator's memory while it serves millions of requests.
#
#   scripts/bench-simulator.sh                 # 200k requests per run, 3 runs per case
#   REQUESTS=500000 RUNS=5 scripts/bench-simulator.sh
#
# Needs h2load and nghttpd (Debian: nghttp2-client, nghttp2-server); installs them when missing.
# Everything runs on loopback and stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${REQUESTS:-200000}
RUNS=${RUNS:-3}
SOAK_REQUESTS=${SOAK_REQUESTS:-1000000}
SOAK_ROUNDS=${SOAK_ROUNDS:-3}
SCRATCH=${SCRATCH:-.build}

source scripts/lib/tools.sh
install_missing h2load:nghttp2-client nghttpd:nghttp2-server

echo "building tern (release)…" >&2
swift build -c release --scratch-path "$SCRATCH" --product tern >&2
TERN="$SCRATCH/release/tern"

work=$(mktemp -d)
sim_pid=""
ng_pid=""
cleanup() {
  [ -n "$sim_pid" ] && kill "$sim_pid" 2>/dev/null || true
  [ -n "$ng_pid" ] && kill "$ng_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The simulator, on free ports, with its demo key; production environment is APNs' throughput case,
# development adds an apns-unique-id header to every answer (both are measured).
start_simulator() {
  "$TERN" simulator --port 0 --control-port 0 --environment "$1" --state-dir "$work/state" --log-level warning \
    >"$work/sim.out" 2>"$work/sim.err" &
  sim_pid=$!
  for _ in $(seq 1 100); do
    grep -q 'APNs HTTP/2 API' "$work/sim.out" 2>/dev/null && break
    sleep 0.1
  done
  sim_port=$(grep -o 'https://127.0.0.1:[0-9]*' "$work/sim.out" | head -1 | sed 's/.*://')
  [ -n "$sim_port" ] || { echo "the simulator did not start:" >&2; cat "$work/sim.err" >&2; exit 1; }
}
stop_simulator() { kill "$sim_pid" 2>/dev/null; wait "$sim_pid" 2>/dev/null || true; sim_pid=""; }

token_hex=$(printf 'ab%.0s' $(seq 1 32))
printf '{"aps":{"alert":{"title":"Tern","body":"Benchmark notification"},"badge":1}}' >"$work/payload.json"

# nghttpd serves the same path: an empty file (200, no body, like an APNs success) and, for the literal
# "same flags" case, a path it does not have (404 with a small HTML body).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$work/ng.key" \
  -out "$work/ng.crt" -days 2 -subj /CN=localhost 2>/dev/null
mkdir -p "$work/htdocs/3/device"
: >"$work/htdocs/3/device/$token_hex"
nghttpd -d "$work/htdocs" 0 "$work/ng.key" "$work/ng.crt" >/dev/null 2>&1 &
ng_pid=$!
sleep 0.5
ng_port=$(ss -ltnp 2>/dev/null | grep "pid=$ng_pid," | grep -o '127.0.0.1:[0-9]*\|\*:[0-9]*\|0.0.0.0:[0-9]*\|\[::\]:[0-9]*' | head -1 | sed 's/.*://')
[ -n "$ng_port" ] || { echo "nghttpd did not start" >&2; exit 1; }

# rate URL CONNECTIONS EXPECTED-STATUS-CLASS [extra h2load args…] → requests/s; warns when any request got
# another answer than expected (2xx from the simulator and nghttpd's file, 4xx from nghttpd's missing path).
rate() {
  local url=$1 conns=$2 expected=$3; shift 3
  local out
  out=$(h2load -n "$REQUESTS" -c "$conns" -m 100 -d "$work/payload.json" \
    -H 'apns-topic: com.example.app' -H 'apns-push-type: alert' "$@" "$url" 2>&1)
  local want="status codes: $REQUESTS 2xx, 0 3xx, 0 4xx, 0 5xx"
  [ "$expected" = 4xx ] && want="status codes: 0 2xx, 0 3xx, $REQUESTS 4xx, 0 5xx"
  if ! grep -q "$want" <<<"$out" || ! grep -q "0 errored, 0 timeout" <<<"$out"; then
    echo "h2load got unexpected answers from $url:" >&2
    grep -E 'requests:|status codes' <<<"$out" >&2
  fi
  grep -o 'finished in [^,]*, [0-9.]* req/s' <<<"$out" | awk '{print $(NF-1)}'
}
source scripts/lib/stats.sh

echo "| conns × streams | simulator (production) | simulator (development) | nghttpd 200 (empty file) | nghttpd 404 (same path) | simulator ÷ nghttpd 200 | simulator ÷ nghttpd 404 |"
echo "|---|---|---|---|---|---|---|"
for conns in 1 4; do
  declare -A runs=()
  for env in production development; do
    start_simulator "$env"
    jwt=$("$TERN" token --key-file "$work/state/SIMKEY0001.p8" --key-id SIMKEY0001 --team-id SIMTEAM001)
    for _ in $(seq 1 "$RUNS"); do
      runs[$env]+="$(rate "https://127.0.0.1:$sim_port/3/device/$token_hex" "$conns" 2xx -H "authorization: bearer $jwt") "
      # Interleave nghttpd runs with the simulator's so both see the same machine noise.
      if [ "$env" = production ]; then
        runs[ng200]+="$(rate "https://127.0.0.1:$ng_port/3/device/$token_hex" "$conns" 2xx) "
        runs[ng404]+="$(rate "https://127.0.0.1:$ng_port/3/device/cd$token_hex" "$conns" 4xx) "
      fi
    done
    stop_simulator
  done
  prod=$(tr ' ' '\n' <<<"${runs[production]}" | grep . | median)
  dev=$(tr ' ' '\n' <<<"${runs[development]}" | grep . | median)
  n200=$(tr ' ' '\n' <<<"${runs[ng200]}" | grep . | median)
  n404=$(tr ' ' '\n' <<<"${runs[ng404]}" | grep . | median)
  printf '| %d × 100 | %.0f | %.0f | %.0f | %.0f | %.0f%% | %.0f%% |\n' "$conns" "$prod" "$dev" "$n200" "$n404" \
    "$(echo "100*$prod/$n200" | bc -l)" "$(echo "100*$prod/$n404" | bc -l)"
  echo "  runs: production [${runs[production]}] development [${runs[development]}] nghttpd-200 [${runs[ng200]}] nghttpd-404 [${runs[ng404]}]" >&2
  unset runs
done

# Memory while serving millions of requests: the arrival log is a bounded ring, so RSS must level off.
start_simulator production
jwt=$("$TERN" token --key-file "$work/state/SIMKEY0001.p8" --key-id SIMKEY0001 --team-id SIMTEAM001)
echo
echo "| requests served | simulator RSS (MiB) | peak RSS (MiB) |"
echo "|---|---|---|"
total=0
for _ in $(seq 1 "$SOAK_ROUNDS"); do
  h2load -n "$SOAK_REQUESTS" -c 4 -m 100 -d "$work/payload.json" -H 'apns-topic: com.example.app' \
    -H "authorization: bearer $jwt" "https://127.0.0.1:$sim_port/3/device/$token_hex" >/dev/null 2>&1
  total=$((total + SOAK_REQUESTS))
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$sim_pid/status")
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$sim_pid/status")
  printf '| %d | %.1f | %.1f |\n' "$total" "$(echo "$rss/1024" | bc -l)" "$(echo "$hwm/1024" | bc -l)"
done
stop_simulator
