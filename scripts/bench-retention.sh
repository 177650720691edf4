#!/usr/bin/env bash
# Push retention: how long `tern serve` takes to delete a backlog of completed pushes past `delivery.pushRetention`
# (the first sweep after an upgrade from a version that kept every push), and what registrations cost meanwhile.
#
#   scripts/bench-retention.sh                        # 300,000 pushes, one of them with 100,000 failures
#   PUSHES=50000 FAILURES=10000 scripts/bench-retention.sh
#
# What it does (release build, SQLite, the built-in simulator, everything on loopback):
#   1. `tern serve` on a fresh folder: one device, one push to it (completed), then it stops. The script copies that
#      push (and its chunk) PUSHES times in SQL (sqlite3), finished 40 days ago, and gives one copy FAILURES failures.
#   2. `tern serve` with the default retention (30 days) on a copy of that database: its first sweep, at start,
#      deletes the backlog. Meanwhile one client registers devices of a new app one after another; the script
#      prints how long until the server logs the deletion, and the registrations' latencies.
#   3. The same number of registrations on another copy with `delivery.pushRetention` 0 (nothing deleted), to compare.
set -euo pipefail
cd "$(dirname "$0")/.."

PUSHES=${PUSHES:-300000}
FAILURES=${FAILURES:-100000}

source scripts/lib/tools.sh
install_missing sqlite3

source scripts/lib/serve.sh

# ── 1. the backlog
mkdir "$work/seed"
start_server "$work/seed"
app_key=$(grep 'app key' "$work/seed/serve.out" | awk '{print $3}')
master=$(grep 'master secret' "$work/seed/serve.out" | awk '{print $3}')
device=6f1c1f9e-8d7a-4d44-9d2e-000000000001
curl -sf -X PUT "$url/v1/apps/demo/devices/$device" -H "Authorization: Bearer $app_key" -H 'Content-Type: application/json' \
  -d "{\"token\": \"$(printf 'ab%.0s' $(seq 1 32))\", \"environment\": \"production\"}" >/dev/null
curl -sf -X POST "$url/v1/apps/demo/pushes?wait=10" -H "Authorization: Bearer $master" -H 'Content-Type: application/json' \
  -d "{\"audience\": {\"devices\": [\"$device\"]}, \"notification\": {\"title\": \"Order shipped\", \"body\": \"It arrives tomorrow\"}}" \
  | grep -q '"status":"completed"' || { echo "the template push did not complete" >&2; exit 1; }
stop_server
echo "── copying the push $PUSHES times, finished 40 days ago, one copy with $FAILURES failures" >&2
copy() { # table, the expression for push_id/id, the other columns' overrides → a SELECT list
  sqlite3 "$work/seed/tern.db" "SELECT group_concat(CASE name WHEN '$2' THEN '$3' WHEN 'finished_at' THEN 'finished_at - 40 * 86400000'
    WHEN 'idempotency_key' THEN 'NULL' WHEN 'ordinal' THEN 'NULL' ELSE name END, ', ') FROM pragma_table_info('$1')"
}
push_columns=$(sqlite3 "$work/seed/tern.db" "SELECT group_concat(name, ', ') FROM pragma_table_info('pushes')")
chunk_columns=$(sqlite3 "$work/seed/tern.db" "SELECT group_concat(name, ', ') FROM pragma_table_info('push_chunks')")
sqlite3 "$work/seed/tern.db" <<SQL
BEGIN;
CREATE TEMP TABLE seq (n INTEGER PRIMARY KEY);
WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < $PUSHES) INSERT INTO seq SELECT n FROM s;
INSERT INTO pushes ($push_columns) SELECT $(copy pushes id "id || ''-'' || n") FROM pushes, seq;
INSERT INTO push_chunks ($chunk_columns) SELECT $(copy push_chunks push_id "push_id || ''-'' || n") FROM push_chunks, seq WHERE push_id NOT LIKE '%-%-%-%-%-%';
WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < $FAILURES)
  INSERT INTO push_failures (push_id, device_id, token, status, reason, failed_at)
  SELECT (SELECT id || '-1' FROM pushes WHERE id NOT LIKE '%-%-%-%-%-%'), 'device-' || n, printf('%064x', n), 410, 'Unregistered', 0 FROM s;
COMMIT;
SQL
echo "seeded $(sqlite3 "$work/seed/tern.db" "SELECT COUNT(*) FROM pushes") pushes, $(sqlite3 "$work/seed/tern.db" "SELECT COUNT(*) FROM push_failures") failures" >&2

register() { # n → "seconds status" of one registration of device n of app probe
  curl -s -o /dev/null -w '%{time_total} %{http_code}\n' -X PUT "$url/v1/apps/probe/devices/6f1c1f9e-8d7a-4d44-9d2e-$(printf '%012x' "$1")" \
    -H "Authorization: Bearer $probe_key" -H 'Content-Type: application/json' \
    -d "{\"token\": \"$(printf '%064x' "$1")\", \"environment\": \"production\"}"
}
run() { # folder → starts a server on a copy of the backlog and makes app probe
  mkdir "$work/$1"
  cp "$work/seed/tern.db" "$work/$1/"
  start_server "$work/$1"
  probe_key=$(curl -s -X POST "$url/v1/apps" -H "Authorization: Bearer $TERN_ADMIN_TOKEN" -H 'Content-Type: application/json' \
    -d '{"id": "probe", "topic": "com.example.probe", "environment": "simulator", "userBinding": "open"}' \
    | grep -o '"appKey":"[^"]*"' | cut -d'"' -f4)
}
latencies() { # file → median, p99 and max, and the statuses
  sort -n "$1" | awk '{a[NR] = $1; s[$2]++} END {
    printf "%d registrations: median %.1f ms, p99 %.1f ms, max %.1f ms; statuses", NR, a[int((NR + 1) / 2)] * 1000, a[int(NR * 0.99 + 0.5)] * 1000, a[NR] * 1000
    for (k in s) printf " %s × %d", k, s[k]; printf "\n" }'
}

# ── 2. the first sweep deletes the backlog
started=$(date +%s.%N)
run sweep
n=0
: >"$work/during"
while ! grep -q 'pushes past delivery.pushRetention deleted' "$work/sweep/serve.err"; do
  n=$((n + 1))
  register "$n" >>"$work/during"
done
took=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
line=$(grep -o 'failures=[0-9]* pushes=[0-9]*' "$work/sweep/serve.err")
left=$(sqlite3 "$work/sweep/tern.db" "SELECT COUNT(*) FROM pushes")
stop_server

# ── 3. the same registrations with nothing to delete
export TERN_DELIVERY_PUSH_RETENTION=0
run keep
: >"$work/quiet"
for i in $(seq 1 "$n"); do register "$i" >>"$work/quiet"; done
stop_server

echo
echo "the backlog ($PUSHES pushes, $FAILURES failures) deleted in $took s from the start ($line; $left push left: the template, not past the retention)"
echo "during the deletion: $(latencies "$work/during")"
echo "with nothing to delete: $(latencies "$work/quiet")"
