#!/usr/bin/env bash
# Pushes to the devices' VoIP tokens (`apns.pushType` voip to everyone): what reading each chunk's VoIP tokens costs a
# push, next to an alert push to the same devices' device tokens; and how many VoIP tokens one `tern serve` takes a
# second (`PUT …/devices/{id}/push-tokens/voip`).
#
#   scripts/bench-voip.sh                       # 100,000 devices, half of them with a VoIP token; 3 rounds; 15 s of PUTs
#   DEVICES=300000 ROUNDS=5 scripts/bench-voip.sh
#   TERN=/path/to/tern scripts/bench-voip.sh    # another build instead of building
#
# What it does (release build, SQLite, the built-in simulator, everything on loopback):
#   1. `tern serve` registers one device over HTTP (the template) and stops; the script copies that row DEVICES times
#      in SQL, and gives every other device (the even ones) a VoIP token, also in SQL.
#   2. `tern serve` again: ROUNDS rounds of one alert push to everyone (DEVICES device tokens) and one VoIP push to
#      everyone (DEVICES / 2 VoIP tokens, the other devices passed over), each timed from the request to completion and
#      checked to have reached exactly those.
#   3. wrk, CONNECTIONS connections for DURATION seconds: each request sets one device's VoIP token to one of its own
#      (scripts/lib/device-call.lua), each device once in turn. Then the tokens kept are counted in the database.
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

# ── 1. the audience, every device with the template's secret, every other one with a VoIP token
seed_audience "$DEVICES"
sqlite3 "$work/tern.db" <<SQL
INSERT INTO device_push_tokens (app_id, device_id, kind, token, registered_at)
  WITH RECURSIVE seq(n) AS (SELECT 2 UNION ALL SELECT n + 2 FROM seq WHERE n + 2 <= $DEVICES)
  SELECT 'demo', '6f1c1f9e-8d7a-4d44-9d2e-' || printf('%012x', n), 'voip', printf('%056x%08x', 1, n), 0 FROM seq;
SQL

# ── 2. alert and VoIP pushes to everyone, alternating
start_server "$work"
alert='{"audience": {"all": true}, "notification": {"title": "Flash sale"}}'
voip='{"audience": {"all": true}, "notification": {"title": "Incoming call"}, "apns": {"pushType": "voip"}}'
alerts=() voips=()
for round in $(seq 1 "$ROUNDS"); do
  for kind in alert voip; do
    body=$alert expected=$DEVICES
    [ "$kind" = voip ] && body=$voip expected=$((DEVICES / 2))
    seconds=$(timed_push "$kind" "$body" "$expected")
    echo "round $round: $kind push to $expected tokens in $seconds s" >&2
    if [ "$kind" = voip ]; then voips+=("$seconds"); else alerts+=("$seconds"); fi
  done
done

# ── 3. devices setting their VoIP tokens
echo "── VoIP tokens set: wrk -t2 -c$CONNECTIONS -d${DURATION}s" >&2
cp scripts/lib/device-call.lua "$work/device-call.lua"
prefix=$(printf '%056x' 2)  # each device's new token: this, then its number (%08x), unlike the seeded ones
out=$(cd "$work" && APP_KEY=$app_key SECRET=$secret METHOD=PUT CALL=push-tokens/voip BODY="{\"token\":\"$prefix%08x\"}" \
  DEVICES=$DEVICES THREADS=2 wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s device-call.lua "$url")
echo "$out" >&2
stop_server
wrk_figures "$out"
set_tokens=$(sqlite3 "$work/tern.db" "SELECT COUNT(*) FROM device_push_tokens WHERE token LIKE '$prefix%'")
least=$(( requests < DEVICES ? requests : DEVICES ))
most=$(( requests + CONNECTIONS < DEVICES ? requests + CONNECTIONS : DEVICES ))

echo
echo "| measurement ($DEVICES devices, $((DEVICES / 2)) with a VoIP token; $ROUNDS rounds) | result |"
echo "|---|---|"
echo "| alert push to everyone ($DEVICES device tokens), POST to completed | ${alerts[*]} s |"
echo "| VoIP push to everyone ($((DEVICES / 2)) VoIP tokens, the others passed over) | ${voips[*]} s |"
echo "| VoIP tokens set, \`wrk -t2 -c$CONNECTIONS -d${DURATION}s\` | ${rate} requests/s, p50 $p50, p99 $p99, non-2xx ${non2xx:-0}; $set_tokens kept ($least answered, up to $most made) |"
[ "${non2xx:-0}" = 0 ] && [ "$set_tokens" -ge "$least" ] && [ "$set_tokens" -le "$most" ] ||
  { echo "wrong: non-2xx ${non2xx:-0}, kept $set_tokens, not $least-$most" >&2; exit 1; }
