#!/usr/bin/env bash
# Fan-out: how fast `tern serve` delivers one push to a very large audience, against the bare APNs client's rate
# measured in the same run.
#
#   scripts/bench-fanout.sh                       # 1,000,000 devices; then 100,000 of them with APNs answering in 50 ms
#   DEVICES=200000 RUNS=1 scripts/bench-fanout.sh
#   TERN=/path/to/tern scripts/bench-fanout.sh    # another build (an earlier version, say) instead of building
#   PAYLOAD=bench scripts/bench-fanout.sh         # the push sends `tern bench`'s payload (below)
#   PAYLOAD=localized scripts/bench-fanout.sh     # the notification in two more languages, a third of the devices each
#   PAYLOAD=filtered scripts/bench-fanout.sh      # the notification to the devices audience.filters keeps (all of them)
#
# What it does (release build, everything on loopback, the built-in simulator in the server's process):
#   1. `tern serve` on a fresh SQLite folder registers one device over HTTP (the template), stops, and the script
#      copies that row DEVICES times in SQL (sqlite3), tagged `all`; the first 100,000 also get the tag `first`.
#      Registration speed is bench-serve.sh's business; here only the push is timed.
#   2. RUNS times, interleaved: `tern bench -n DEVICES --connections CONNS` (the client alone, against a simulator in
#      its process), then `tern serve` with `apns.connections` CONNS pushes to tag `all` (POST …/pushes?wait=…),
#      timed from the request to the completed answer, with the server's RSS sampled every 0.5 s; and one more
#      `tern bench` after the last push. Each push is compared with the mean of the client's rates just before and
#      just after it: the machine's speed drifts by a third within an hour, and the client measured on both sides
#      of a push follows that drift, where the one before it alone does not.
#   3. RUNS times: the simulator answers every request after LATENCY_MS (50), and one push to tag `first`.
# Prints a Markdown table of the medians, and every run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/seed.sh

DEVICES=${DEVICES:-1000000}
SLOW_DEVICES=${SLOW_DEVICES:-100000}
LATENCY_MS=${LATENCY_MS:-50}
RUNS=${RUNS:-3}
CONNS=${CONNS:-4}
SCRATCH=${SCRATCH:-.build}
LOG_LEVEL=${LOG_LEVEL:-warning}     # debug shows the in-flight limit as it moves (in the data folder's serve.err)
FAST_RUNS=${FAST_RUNS:-$RUNS}       # FAST_RUNS=0: only the slow-APNs case
# What the push sends. notification (default): a title and a body, to which the server adds the push's id
# (`tern.pushId`), 128 bytes in all. bench: `tern bench`'s own payload as a raw payload (the same JSON, 76 bytes), so
# that the push and the client alone send the same notifications but for the push's headers (its apns-collapse-id).
# localized: the notification with `localizations` in Korean and Chinese, and the devices' locales ko-KR, zh-Hans-CN and
# en-US, a third each: what a push in several languages costs (one more read per chunk, a payload per language).
# filtered: the notification, with `audience.filters` on the app version and three languages that every seeded device
# meets (locales as for localized, version 2.4.1): what the filter's read costs a chunk, with the same audience.
PAYLOAD=${PAYLOAD:-notification}
filters=""
case "$PAYLOAD" in
  notification) content='"notification": {"title": "Fan-out", "body": "one push to every device"}' ;;
  bench) content='"payload": {"aps":{"alert":{"title":"Tern","body":"Benchmark notification"},"badge":1}}' ;;
  localized) content='"notification": {"title": "Fan-out", "body": "one push to every device", "localizations": {"ko": {"title": "팬아웃", "body": "모든 기기에 한 번에"}, "zh-Hans": {"title": "扇出", "body": "一次推送到每台设备"}}}' ;;
  filtered)
    content='"notification": {"title": "Fan-out", "body": "one push to every device"}'
    filters=', "filters": {"appVersion": {"atLeast": "2.3", "below": "3"}, "languages": ["ko", "zh-Hans", "en"]}' ;;
  *) echo "PAYLOAD is notification, bench, localized or filtered, not $PAYLOAD" >&2; exit 2 ;;
esac

source scripts/lib/tools.sh
install_missing sqlite3

if [ -z "${TERN:-}" ]; then
  echo "building tern (release)…" >&2
  swift build -c release --scratch-path "$SCRATCH" --product tern >&2
  TERN="$(cd "$SCRATCH" && pwd)/release/tern"
fi

work=$(mktemp -d)
pid=""
sampler=""
export TERN_SERVER_KEY=$(head -c 32 /dev/urandom | base64)
export TERN_ADMIN_TOKEN=bench-admin-token-0123456789
export TERN_APNS_CONNECTIONS=$CONNS
cleanup() {
  [ -n "$sampler" ] && kill "$sampler" 2>/dev/null || true
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

start_server() {
  : >"$work/serve.out"
  (cd "$work" && exec "$TERN" serve --port 0 --log-level "$LOG_LEVEL" >serve.out 2>serve.err) &
  pid=$!
  for _ in $(seq 1 600); do
    grep -q 'Tern is serving' "$work/serve.out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { echo "tern serve stopped:" >&2; cat "$work/serve.err" >&2; exit 1; }
    sleep 0.1
  done
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.out" | head -1)
  control=$(grep -o 'control API http://127.0.0.1:[0-9]*' "$work/serve.out" | awk '{print $3}' || true)
}
stop_server() { kill -INT "$pid"; wait "$pid" || true; pid=""; }

# ── 1. the audience
start_server
app_key=$(grep 'app key' "$work/serve.out" | awk '{print $3}')
master=$(grep 'master secret' "$work/serve.out" | awk '{print $3}')
template=6f1c1f9e-8d7a-4d44-9d2e-000000000000
curl -sf -X PUT "$url/v1/apps/demo/devices/$template" -H "Authorization: Bearer $app_key" -H 'Content-Type: application/json' \
  -d "{\"token\": \"$(printf 'ab%.0s' $(seq 1 32))\", \"environment\": \"production\"}" >/dev/null
stop_server
echo "── seeding $DEVICES devices in SQL" >&2
seed_devices "$work/tern.db" "$DEVICES" "$template"
sqlite3 "$work/tern.db" <<SQL
BEGIN;
INSERT INTO device_tags (app_id, device_id, tag) SELECT app_id, device_id, 'all' FROM devices WHERE app_id = 'demo';
INSERT INTO device_tags (app_id, device_id, tag)
  SELECT app_id, device_id, 'first' FROM devices WHERE app_id = 'demo' ORDER BY device_id LIMIT $SLOW_DEVICES;
$([ "$PAYLOAD" = localized ] || [ "$PAYLOAD" = filtered ] && echo "UPDATE devices SET locale = CASE rowid % 3 WHEN 0 THEN 'ko-KR' WHEN 1 THEN 'zh-Hans-CN' ELSE 'en-US' END;")
$([ "$PAYLOAD" = filtered ] && echo "UPDATE devices SET app_version = '2.4.1';")
COMMIT;
SQL
echo "seeded $(sqlite3 "$work/tern.db" "SELECT COUNT(*) FROM devices") devices" >&2

push() { # tag → prints "seconds status accepted peakRSS(KiB) maxRSS-sampled(KiB) startRSS(KiB)"
  local tag=$1
  local start_rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
  (while kill -0 "$pid" 2>/dev/null; do awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null; sleep 0.5; done >"$work/rss.$tag") &
  sampler=$!
  local t0=$(date +%s.%N)
  local json=$(curl -s -X POST "$url/v1/apps/demo/pushes?wait=60" -H "Authorization: Bearer $master" \
    -H 'Content-Type: application/json' \
    -d "{\"audience\": {\"tags\": [\"$tag\"]$filters}, $content}")
  local id=$(grep -o '"id":"[^"]*"' <<<"$json" | head -1 | cut -d'"' -f4)
  # `wait` covers 60 s at most; a longer push is followed until it completes.
  while [ -n "$id" ] && ! grep -q '"status":"completed"' <<<"$json"; do
    sleep 0.05
    json=$(curl -s "$url/v1/apps/demo/pushes/$id" -H "Authorization: Bearer $master")
  done
  local seconds=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}')
  kill "$sampler" 2>/dev/null || true; sampler=""
  local status=$(grep -o '"status":"[a-z]*"' <<<"$json" | cut -d'"' -f4)
  local accepted=$(grep -o '"accepted":[0-9]*' <<<"$json" | cut -d: -f2)
  local peak=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  echo "$seconds ${status:-none} ${accepted:-0} $peak $(sort -n "$work/rss.$tag" | tail -1) $start_rss"
}

source scripts/lib/stats.sh

# ── 2. the client alone, then the server's push, interleaved
client_rates=()
serve_rates=()
ratios=()
before_ratios=()
push_lines=()
runs_text=""
client_bench() { # → the client's rate, notifications/s
  "$TERN" bench -n "$DEVICES" --connections "$CONNS" 2>/dev/null | grep -o 'throughput *[0-9,]*' | awk '{print $2}' | tr -d ,
}
for run in $(seq 1 "$FAST_RUNS"); do
  echo "── run $run: tern bench -n $DEVICES --connections $CONNS" >&2
  client_rates+=("$(client_bench)")
  echo "── run $run: push to $DEVICES devices (apns.connections $CONNS)" >&2
  start_server
  read -r seconds status accepted peak sampled start_rss <<<"$(push all)"
  stop_server
  [ "$status" = completed ] && [ "$accepted" = "$DEVICES" ] || { echo "push: $status, accepted $accepted of $DEVICES" >&2; exit 1; }
  serve_rate=$(awk -v n="$DEVICES" -v s="$seconds" 'BEGIN {printf "%.0f", n / s}')
  serve_rates+=("$serve_rate")
  push_lines+=("push $seconds s = $serve_rate/s; RSS $((start_rss / 1024)) MiB before, $((sampled / 1024)) MiB most sampled, $((peak / 1024)) MiB peak")
  echo "run $run: client ${client_rates[-1]}/s; ${push_lines[-1]}" >&2
done
if [ "$FAST_RUNS" -gt 0 ]; then
  echo "── after run $FAST_RUNS: tern bench -n $DEVICES --connections $CONNS" >&2
  client_rates+=("$(client_bench)")
fi
for ((i = 0; i < FAST_RUNS; i++)); do
  before=${client_rates[i]}
  after=${client_rates[i + 1]}
  ratio=$(awk -v a="${serve_rates[i]}" -v b="$before" -v c="$after" 'BEGIN {printf "%.2f", a / ((b + c) / 2)}')
  ratios+=("$ratio")
  before_ratios+=("$(awk -v a="${serve_rates[i]}" -v b="$before" 'BEGIN {printf "%.2f", a / b}')")
  runs_text+="run $((i + 1)): client $before/s before, $after/s after; ${push_lines[i]}; ÷ client $ratio (÷ the one before ${before_ratios[i]})"$'\n'
done

# ── 3. slow APNs
slow_times=()
for run in $(seq 1 "$RUNS"); do
  start_server
  [ -n "$control" ] || { echo "no control API in the banner" >&2; exit 2; }
  curl -sf -X PUT "$control/scenario/latency" -d "{\"fixedMilliseconds\": $LATENCY_MS}" >/dev/null
  echo "── run $run: push to $SLOW_DEVICES devices, APNs answering in $LATENCY_MS ms" >&2
  read -r seconds status accepted peak sampled start_rss <<<"$(push first)"
  stop_server
  [ "$status" = completed ] && [ "$accepted" = "$SLOW_DEVICES" ] || { echo "push: $status, accepted $accepted" >&2; exit 1; }
  slow_times+=("$seconds")
  [ "$LOG_LEVEL" != debug ] || { grep -o 'in-flight limit.*' "$work/serve.err" "$work/serve.out" | tail -5 >&2 || echo 'the limit did not move' >&2; }
  runs_text+="slow run $run: $SLOW_DEVICES devices at $LATENCY_MS ms in $seconds s"$'\n'
done

client=$(printf '%s\n' "${client_rates[@]}" | median)
serve=$(printf '%s\n' "${serve_rates[@]}" | median)
ratio=$(printf '%s\n' "${ratios[@]}" | median)
before_ratio=$(printf '%s\n' "${before_ratios[@]}" | median)
slow=$(printf '%s\n' "${slow_times[@]}" | median)
echo
echo "| measurement (medians of $FAST_RUNS runs; $RUNS at $LATENCY_MS ms) | result |"
echo "|---|---|"
echo "| \`tern bench -n $DEVICES --connections $CONNS\` (${#client_rates[@]} runs, one before each push and one after the last) | $client notifications/s |"
echo "| \`tern serve\`, one push to $DEVICES devices (\`apns.connections\` $CONNS), POST to completed | $serve notifications/s |"
# Each run's push against the mean of the client's rates just before and after it; against the one before alone (as
# the script measured until 2026-11-27); and the two medians against each other.
echo "| the push's rate ÷ the client's in the same run | $ratio (runs ${ratios[*]}); against the client before it alone $before_ratio; the medians' ratio $(awk -v a="$serve" -v b="$client" 'BEGIN {printf "%.2f", a / b}') |"
echo "| one push to $SLOW_DEVICES devices, APNs answering in $LATENCY_MS ms | $slow s |"
echo
printf '%s' "$runs_text"
