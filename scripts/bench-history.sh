#!/usr/bin/env bash
# Pushes to one user with a long history: how long `tern serve` takes to deliver a one-device push, one after
# another, when the app has HISTORY completed pushes kept (within `delivery.pushRetention`, 30 days by default: a
# backend pushing to one user at a time, a push a second, keeps 2.6 million).
#
#   scripts/bench-history.sh                      # 300,000 kept pushes, 500 pushes timed
#   HISTORY=0 scripts/bench-history.sh            # the same with nothing kept, to compare
#   SCHEDULED=100000 scripts/bench-history.sh     # and 100,000 pushes scheduled for tomorrow besides
#   THROTTLED=1000 scripts/bench-history.sh       # and 1,000 throttled pushes whose next chunk is due tomorrow
#   TERN=/path/to/tern scripts/bench-history.sh   # another build (an earlier version, say) instead of building
#
# What it does (release build, SQLite, the built-in simulator, everything on loopback):
#   1. `tern serve` on a fresh folder: one device, one push to it (completed), then it stops. The script copies that
#      push (and its chunk) HISTORY times in SQL (sqlite3), finished a day ago, and SCHEDULED times as a push
#      scheduled (`sendAt`) for a day later, not yet sent, and THROTTLED times as a throttled push being sent
#      (`ratePerSecond` 1) whose next chunk is due a day later.
#   2. `tern serve` on that database: PUSHES pushes to the device, one after another, each waiting for its outcome
#      (`?wait=10`); the script prints their latencies and rate.
set -euo pipefail
cd "$(dirname "$0")/.."

HISTORY=${HISTORY:-300000}
SCHEDULED=${SCHEDULED:-0}
THROTTLED=${THROTTLED:-0}
PUSHES=${PUSHES:-500}

source scripts/lib/tools.sh
install_missing sqlite3

source scripts/lib/serve.sh

device=6f1c1f9e-8d7a-4d44-9d2e-000000000001
push() { # → "seconds status" of one push to the device, waited for
  curl -s -o /dev/null -w '%{time_total} %{http_code}\n' -X POST "$url/v1/apps/demo/pushes?wait=10" \
    -H "Authorization: Bearer $master" -H 'Content-Type: application/json' \
    -d "{\"audience\": {\"devices\": [\"$device\"]}, \"notification\": {\"title\": \"Order shipped\", \"body\": \"It arrives tomorrow\"}}"
}

# ── 1. the history
start_server "$work"
app_key=$(grep 'app key' "$work/serve.out" | awk '{print $3}')
master=$(grep 'master secret' "$work/serve.out" | awk '{print $3}')
curl -sf -X PUT "$url/v1/apps/demo/devices/$device" -H "Authorization: Bearer $app_key" -H 'Content-Type: application/json' \
  -d "{\"token\": \"$(printf 'ab%.0s' $(seq 1 32))\", \"environment\": \"production\"}" >/dev/null
[ "$(push | cut -d' ' -f2)" = 201 ] || { echo "the template push did not complete" >&2; exit 1; }
stop_server
if [ "$HISTORY" -gt 0 ]; then
  echo "── copying the push $HISTORY times, finished a day ago" >&2
  copy() { # table, the column naming the push, its copy's expression → a SELECT list
    sqlite3 "$work/tern.db" "SELECT group_concat(CASE name WHEN '$2' THEN '$3' WHEN 'finished_at' THEN 'finished_at - 86400000'
      WHEN 'idempotency_key' THEN 'NULL' WHEN 'ordinal' THEN 'ordinal + n' ELSE name END, ', ') FROM pragma_table_info('$1')"
  }
  push_columns=$(sqlite3 "$work/tern.db" "SELECT group_concat(name, ', ') FROM pragma_table_info('pushes')")
  chunk_columns=$(sqlite3 "$work/tern.db" "SELECT group_concat(name, ', ') FROM pragma_table_info('push_chunks')")
  sqlite3 "$work/tern.db" <<SQL
BEGIN;
CREATE TEMP TABLE seq (n INTEGER PRIMARY KEY);
WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < $HISTORY) INSERT INTO seq SELECT n FROM s;
INSERT INTO pushes ($push_columns) SELECT $(copy pushes id "id || ''-'' || n") FROM pushes, seq;
INSERT INTO push_chunks ($chunk_columns) SELECT $(copy push_chunks push_id "push_id || ''-'' || n") FROM push_chunks, seq;
COMMIT;
SQL
fi
# The template push copied COUNT times as a push not yet (fully) sent: its id with SUFFIX and a number, the columns
# in CASES (`WHEN 'column' THEN 'expression'` clauses) set as they say, no progress, and ordinals after OFFSET.
copy_waiting() { # suffix, count, offset, cases
  local select
  select=$(sqlite3 "$work/tern.db" "SELECT group_concat(CASE name WHEN 'id' THEN 'id || ''-$1'' || n' $4
    WHEN 'chunks' THEN '0' WHEN 'cursor_key' THEN 'NULL' WHEN 'started_at' THEN 'NULL' WHEN 'finished_at' THEN 'NULL'
    WHEN 'targeted' THEN '0' WHEN 'accepted' THEN '0' WHEN 'idempotency_key' THEN 'NULL' WHEN 'ordinal' THEN 'ordinal + $3 + n'
    ELSE name END, ', ') FROM pragma_table_info('pushes')")
  sqlite3 "$work/tern.db" <<SQL
BEGIN;
CREATE TEMP TABLE seq (n INTEGER PRIMARY KEY);
WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < $2) INSERT INTO seq SELECT n FROM s;
INSERT INTO pushes ($(sqlite3 "$work/tern.db" "SELECT group_concat(name, ', ') FROM pragma_table_info('pushes')"))
  SELECT $select FROM pushes, seq WHERE id NOT LIKE '%-%-%-%-%-%';
COMMIT;
SQL
}
if [ "$SCHEDULED" -gt 0 ]; then
  echo "── copying the push $SCHEDULED times, scheduled for tomorrow" >&2
  copy_waiting s "$SCHEDULED" "$HISTORY" "WHEN 'status' THEN '''scheduled''' WHEN 'send_at' THEN 'created_at + 86400000' WHEN 'handed_out' THEN '1'"
fi
if [ "$THROTTLED" -gt 0 ]; then
  echo "── copying the push $THROTTLED times, throttled, its next chunk due tomorrow" >&2
  copy_waiting t "$THROTTLED" "$((HISTORY + SCHEDULED))" "WHEN 'status' THEN '''sending''' WHEN 'rate_per_second' THEN '1'
    WHEN 'next_chunk_at' THEN 'created_at + 86400000' WHEN 'handed_out' THEN '0'"
fi
echo "kept: $(sqlite3 "$work/tern.db" "SELECT status, COUNT(*) FROM pushes GROUP BY status" | tr '\n' ' ')" >&2

# ── 2. one push after another
start_server "$work"
push >/dev/null  # the first one warms the APNs connection
: >"$work/latencies"
started=$(date +%s.%N)
for _ in $(seq 1 "$PUSHES"); do push >>"$work/latencies"; done
took=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}')
stop_server

echo
sort -n "$work/latencies" | awk -v history="$HISTORY" -v scheduled="$SCHEDULED" -v throttled="$THROTTLED" -v took="$took" '{a[NR] = $1; s[$2]++} END {
  printf "%d pushes to one device, one after another, with %d kept, %d scheduled and %d throttled waiting: %.1f pushes/s; median %.1f ms, p99 %.1f ms, max %.1f ms; statuses",
    NR, history, scheduled, throttled, NR / took, a[int((NR + 1) / 2)] * 1000, a[int(NR * 0.99 + 0.5)] * 1000, a[NR] * 1000
  for (k in s) printf " %s × %d", k, s[k]; printf "\n" }'
