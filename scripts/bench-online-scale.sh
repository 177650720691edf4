#!/usr/bin/env bash
# The online channel at scale: many idle connections on one node, a push to 10,000 of them, and all of them
# reconnecting at once.
#
#   scripts/bench-online-scale.sh                       # 15,000 connections, 10,000 of them pushed to
#   IDLE=5000 PUSHED=5000 scripts/bench-online-scale.sh
#
# What it does (release build, SQLite, everything on loopback, one machine; each process may open 20,000 files):
#   1. `tern serve` on a fresh folder and a fixed free port; its RSS once started.
#   2. PUSHED devices tagged `pushed` and IDLE more tagged `idle` register (`tern device --register-only`), and the
#      server's RSS is read; then two `tern device --devices` processes connect them all, and once every one is
#      connected (and 3 s more), the RSS again: the difference ÷ connections is what an idle connection costs (the
#      registrations' own memory, SQLite's page cache and the HTTP requests, is left out). Then the server's CPU over
#      IDLE_SECONDS with nothing to do but keep the connections (pings every 30 s), and the RSS once more at the end of
#      them: what an idle connection costs once the connect storm's garbage is given back (the server returns the
#      allocator's free memory every 10 s).
#   3. A push to tag `pushed` with `"delivery": "online"`: the time from the POST until 99% and until all of the
#      PUSHED acknowledgements are stored (`tern_channel_acks_total` in /metrics, counted once the acks are written;
#      polled every 20 ms, so within 20 ms), then the push's own counts are checked; and the server's CPU meanwhile.
#      (The push's counts are not what is polled: counting a push's 10,000 rows 50 times a second on SQLite's one
#      connection slows what is measured.)
#   4. The same devices through APNs (the built-in simulator), `"delivery": "apns"`: the time to the push's
#      completion, for comparison.
#   5. The server stops (Ctrl-C: every connection is closed with 1001) and starts again on the same port and data:
#      the time from its start until every device is connected again (`tern_channel_connections` in /metrics), and
#      the server's warnings and errors meanwhile.
set -euo pipefail
cd "$(dirname "$0")/.."

PUSHED=${PUSHED:-10000}
IDLE=${IDLE:-5000}
IDLE_SECONDS=${IDLE_SECONDS:-20}
SCRATCH=${SCRATCH:-.build}

echo "building tern (release)…" >&2
swift build -c release --scratch-path "$SCRATCH" --product tern >&2
TERN="$(cd "$SCRATCH" && pwd)/release/tern"

work=$(mktemp -d)
server=""
fleet=()
cleanup() {
  for pid in "${fleet[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.3f", b - a}'; }
rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url="http://127.0.0.1:$port"
total=$((PUSHED + IDLE))

start_server() {
  : >"$work/serve.out"
  (cd "$work" && exec "$TERN" serve --port "$port" --log-level warning >>serve.out 2>>serve.err) &
  server=$!
  for _ in $(seq 1 300); do grep -q 'Tern is serving' "$work/serve.out" 2>/dev/null && return; sleep 0.05; done
  echo "tern serve did not start:" >&2; cat "$work/serve.err" >&2; exit 1
}
connections() { curl -s "$url/metrics" | awk '$1 == "tern_channel_connections" {printf "%d", $2}'; }
acks_stored() { curl -s "$url/metrics" | awk '$1 == "tern_channel_acks_total" {printf "%d", $2} END {if (NR == 0) printf "0"}'; }

start_server
app_key=$(grep 'app key' "$work/serve.out" | awk '{print $3}')
master=$(grep 'master secret' "$work/serve.out" | awk '{print $3}')
rss_start=$(rss_kib "$server")

echo "── $total devices register ($PUSHED tagged pushed, $IDLE idle)" >&2
"$TERN" device --url "$url" --app-key "$app_key" --count "$PUSHED" --tag pushed --save-devices "$work/pushed.devices" --register-only 2>"$work/register.err"
"$TERN" device --url "$url" --app-key "$app_key" --count "$IDLE" --tag idle --save-devices "$work/idle.devices" --register-only 2>>"$work/register.err"
rss_registered=$(rss_kib "$server")

echo "── the $total devices connect" >&2
"$TERN" device --url "$url" --app-key "$app_key" --devices "$work/pushed.devices" --timeout 3600 >"$work/pushed.out" 2>"$work/pushed.err" &
fleet+=($!)
"$TERN" device --url "$url" --app-key "$app_key" --devices "$work/idle.devices" --timeout 3600 >"$work/idle.out" 2>"$work/idle.err" &
fleet+=($!)
t0=$(now)
until [ "$(connections)" = "$total" ]; do
  for pid in "${fleet[@]}"; do kill -0 "$pid" 2>/dev/null || { echo "tern device stopped:" >&2; tail -3 "$work"/*.err >&2; exit 1; }; done
  sleep 0.2
done
connect_seconds=$(since "$t0")
# Settled: the last connections' first reads of the store are done.
sleep 3
rss_connected=$(rss_kib "$server")
ticks0=$(cpu_ticks "$server")
sleep "$IDLE_SECONDS"
ticks1=$(cpu_ticks "$server")
rss_idle=$(rss_kib "$server")
hz=$(getconf CLK_TCK)
idle_cpu=$(awk -v t="$((ticks1 - ticks0))" -v hz="$hz" -v s="$IDLE_SECONDS" 'BEGIN {printf "%.1f", 100 * t / hz / s}')
per_connection=$(awk -v a="$rss_registered" -v b="$rss_connected" -v n="$total" 'BEGIN {printf "%.1f", (b - a) / n}')
per_idle_connection=$(awk -v a="$rss_registered" -v b="$rss_idle" -v n="$total" 'BEGIN {printf "%.1f", (b - a) / n}')
fds=$(ls "/proc/$server/fd" | wc -l)

echo "── a push to $PUSHED connected devices, online" >&2
acks0=$(acks_stored)
acks0=${acks0:-0}
push_ticks0=$(cpu_ticks "$server")
t0=$(now)
id=$(curl -sf -X POST "$url/v1/apps/demo/pushes" -H "Authorization: Bearer $master" \
  -d '{"audience": {"tags": ["pushed"]}, "notification": {"title": "online"}, "delivery": "online"}' | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
p99_target=$(( (PUSHED * 99 + 99) / 100 ))
p99=""
while :; do
  # (grep, not a JSON parser: a Python start every 20 ms would take a good part of a core from what is measured)
  acked=$(acks_stored)
  acked=$(( ${acked:-0} - acks0 ))
  [ -z "$p99" ] && [ "$acked" -ge "$p99_target" ] && p99=$(since "$t0")
  [ "$acked" -ge "$PUSHED" ] && break
  [ "$(since "$t0" | cut -d. -f1)" -ge 60 ] && { echo "only $acked of $PUSHED acknowledged after 60 s" >&2; exit 1; }
  sleep 0.02
done
all_acked=$(since "$t0")
push_cpu=$(awk -v t="$(( $(cpu_ticks "$server") - push_ticks0 ))" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", t / hz}')
counted=$(curl -s "$url/v1/apps/demo/pushes/$id" -H "Authorization: Bearer $master" | grep -o '"acked":[0-9]*' | cut -d: -f2)
[ "${counted:-0}" = "$PUSHED" ] || { echo "the online push counts ${counted:-0} acknowledgements, not $PUSHED" >&2; exit 1; }

echo "── the same devices through APNs (the built-in simulator)" >&2
t0=$(now)
status=$(curl -sf -X POST "$url/v1/apps/demo/pushes?wait=60" -H "Authorization: Bearer $master" \
  -d '{"audience": {"tags": ["pushed"]}, "notification": {"title": "through APNs"}}' \
  | python3 -c 'import json, sys; p = json.load(sys.stdin); print(p["status"], p["counts"]["accepted"])')
apns_seconds=$(since "$t0")
[ "$status" = "completed $PUSHED" ] || { echo "the APNs push: $status" >&2; exit 1; }

echo "── the server restarts: every device reconnects at once" >&2
kill -INT "$server"; wait "$server" || true
errors_before=$(grep -cE ' (warning|error|critical) ' "$work/serve.err" || true)
start_server
t0=$(now)
until [ "$(connections)" = "$total" ]; do
  [ "$(since "$t0" | cut -d. -f1)" -ge 120 ] && { echo "only $(connections) of $total reconnected after 120 s" >&2; exit 1; }
  sleep 0.05
done
reconnect_seconds=$(since "$t0")
errors_after=$(grep -cE ' (warning|error|critical) ' "$work/serve.err" || true)
# Connections the server refused (not the "Connection refused" of connecting while it was down, which is expected).
refused=$(cat "$work"/pushed.err "$work"/idle.err | grep -c 'the server refused' || true)

cat <<EOF

| measurement | result |
|---|---|
| connections on one node (all registered and connected in ${connect_seconds} s) | $total (server descriptors: $fds) |
| server RSS at start / with the $total devices registered / connected / after ${IDLE_SECONDS} s idle | $((rss_start / 1024)) / $((rss_registered / 1024)) / $((rss_connected / 1024)) / $((rss_idle / 1024)) MiB: ${per_connection} KiB per connection just connected, **${per_idle_connection} KiB per idle connection** |
| server CPU with the connections idle (${IDLE_SECONDS} s) | ${idle_cpu}% of a core |
| push to $PUSHED connected devices, \`online\`: POST to 99% / all acknowledged | **${p99} s** / ${all_acked} s (server CPU ${push_cpu} s) |
| the same $PUSHED devices through APNs (simulator), POST to completed | ${apns_seconds} s |
| server restart: start to all $total reconnected | **${reconnect_seconds} s**; server warnings/errors during it: $((errors_after - errors_before)); connections the server refused: $refused |
EOF
