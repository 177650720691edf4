#!/usr/bin/env bash
# Pushes to a Live Activity's update tokens (`audience.activity`, `apns.pushType` liveactivity): what paging an
# activity's tokens (activity_tokens joined to devices, by device id) costs a push, next to an alert push to the same
# devices' device tokens; and how many activity tokens one `tern serve` takes a second
# (`PUT …/devices/{id}/activities/{activityId}`).
#
#   scripts/bench-activity.sh                       # 100,000 devices, half of them in activity match-1; 3 rounds; 15 s of PUTs
#   DEVICES=300000 ROUNDS=5 scripts/bench-activity.sh
#   TERN=/path/to/tern scripts/bench-activity.sh    # another build instead of building
#
# What it does (release build, SQLite, the built-in simulator, everything on loopback):
#   1. `tern serve` registers one device over HTTP (the template) and stops; the script copies that row DEVICES times
#      in SQL, and gives every other device (the even ones) a token for activity match-1, started now, also in SQL.
#   2. `tern serve` again: ROUNDS rounds of one alert push to everyone (DEVICES device tokens) and one update of
#      match-1 (DEVICES / 2 activity tokens), each timed from the request to completion and checked to have reached
#      exactly those.
#   3. wrk, CONNECTIONS connections for DURATION seconds: each request sets one device's token for activity match-2 to
#      one of its own (scripts/lib/device-call.lua), each device once in turn. Then the match-2 tokens kept are counted
#      in the database, and match-1's checked untouched.
# Needs wrk and sqlite3 (Debian packages); installs them when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

DEVICES=${DEVICES:-100000}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-15}
CONNECTIONS=${CONNECTIONS:-32}
SCRATCH=${SCRATCH:-.build}

source scripts/lib/tools.sh
install_missing wrk sqlite3

source scripts/lib/serve.sh
source scripts/lib/seed.sh
source scripts/lib/push.sh

# ── 1. the audience, every device with the template's secret, every other one with a token for match-1
seed_audience "$DEVICES"
# Started now (ms): a token older than ActivityTokenRecord.lifetime (12 h) would be purged as an ended activity.
now=$(( $(date +%s%N) / 1000000 ))
sqlite3 "$work/tern.db" <<SQL
INSERT INTO activity_tokens (app_id, activity_id, device_id, token, started_at, registered_at)
  WITH RECURSIVE seq(n) AS (SELECT 2 UNION ALL SELECT n + 2 FROM seq WHERE n + 2 <= $DEVICES)
  SELECT 'demo', 'match-1', '6f1c1f9e-8d7a-4d44-9d2e-' || printf('%012x', n), printf('%056x%08x', 3, n), $now, $now FROM seq;
SQL
in_match1=$(sqlite3 "$work/tern.db" "SELECT COUNT(*) FROM activity_tokens WHERE activity_id = 'match-1'")
[ "$in_match1" = $((DEVICES / 2)) ] || { echo "seeded $in_match1 match-1 tokens, not $((DEVICES / 2))" >&2; exit 1; }

# ── 2. alert pushes to everyone and updates of match-1, alternating
start_server "$work"
alert='{"audience": {"all": true}, "notification": {"title": "Flash sale"}}'
update='{"audience": {"activity": "match-1"}, "apns": {"pushType": "liveactivity"},
  "payload": {"aps": {"event": "update", "timestamp": 1764585600, "content-state": {"score": "2-1"}}}}'
alerts=() updates=()
for round in $(seq 1 "$ROUNDS"); do
  for kind in alert activity; do
    body=$alert expected=$DEVICES
    [ "$kind" = activity ] && body=$update expected=$((DEVICES / 2))
    seconds=$(timed_push "$kind" "$body" "$expected")
    echo "round $round: $kind push to $expected tokens in $seconds s" >&2
    if [ "$kind" = activity ]; then updates+=("$seconds"); else alerts+=("$seconds"); fi
  done
done

# ── 3. devices setting their tokens for match-2
echo "── activity tokens set: wrk -t2 -c$CONNECTIONS -d${DURATION}s" >&2
cp scripts/lib/device-call.lua "$work/device-call.lua"
prefix=$(printf '%056x' 4)  # each device's match-2 token: this, then its number (%08x), unlike the seeded ones
out=$(cd "$work" && APP_KEY=$app_key SECRET=$secret METHOD=PUT CALL=activities/match-2 BODY="{\"token\":\"$prefix%08x\"}" \
  DEVICES=$DEVICES THREADS=2 wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s device-call.lua "$url")
echo "$out" >&2
stop_server
wrk_figures "$out"
set_tokens=$(sqlite3 "$work/tern.db" "SELECT COUNT(*) FROM activity_tokens WHERE activity_id = 'match-2' AND token LIKE '$prefix%'")
in_match1=$(sqlite3 "$work/tern.db" "SELECT COUNT(*) FROM activity_tokens WHERE activity_id = 'match-1'")
least=$(( requests < DEVICES ? requests : DEVICES ))
most=$(( requests + CONNECTIONS < DEVICES ? requests + CONNECTIONS : DEVICES ))

echo
echo "| measurement ($DEVICES devices, $((DEVICES / 2)) in activity match-1; $ROUNDS rounds) | result |"
echo "|---|---|"
echo "| alert push to everyone ($DEVICES device tokens), POST to completed | ${alerts[*]} s |"
echo "| update of match-1 ($((DEVICES / 2)) activity tokens), POST to completed | ${updates[*]} s |"
echo "| match-2 tokens set, \`wrk -t2 -c$CONNECTIONS -d${DURATION}s\` | ${rate} requests/s, p50 $p50, p99 $p99, non-2xx ${non2xx:-0}; $set_tokens kept ($least answered, up to $most made) |"
[ "${non2xx:-0}" = 0 ] && [ "$set_tokens" -ge "$least" ] && [ "$set_tokens" -le "$most" ] && [ "$in_match1" = $((DEVICES / 2)) ] ||
  { echo "wrong: non-2xx ${non2xx:-0}, kept $set_tokens, not $least-$most; match-1 has $in_match1, not $((DEVICES / 2))" >&2; exit 1; }
