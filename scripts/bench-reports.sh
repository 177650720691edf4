#!/usr/bin/env bash
# Devices' reports of a large push: how many opens (`POST …/devices/{id}/opens {"pushId"}`) one `tern serve` takes a
# second, as after a broadcast when its audience taps it, and what they cost.
#
#   scripts/bench-reports.sh                      # 100,000 devices, one push to all of them, then 20 s of opens
#   DEVICES=300000 DURATION=30 scripts/bench-reports.sh
#   TERN=/path/to/tern scripts/bench-reports.sh   # another build (an earlier version, say) instead of building
#   WEBHOOK_OPENS=1 scripts/bench-reports.sh      # the app's webhook asks for opens: each is also an event posted to a
#                                                 # receiver on loopback (python3), which must get every one
#
# What it does (release build, SQLite, the built-in simulator, everything on loopback):
#   1. `tern serve` registers one device over HTTP (the template) and stops; the script copies that row DEVICES times
#      in SQL (sqlite3), so every copy has the template's device secret.
#   2. `tern serve` again: one push to every device, timed to completion (its chunks' counts are what a read of the
#      push adds up).
#   3. wrk, CONNECTIONS connections for DURATION seconds: each request is one device's open of that push, each device
#      once in turn (scripts/lib/device-call.lua); the first round is new opens, any after it repeats (each answered 204,
#      counted once). Then the push's `opened` is read back and checked against the opens wrk made.
#   4. Two more pushes to all of them, timed from the request to completion: one alone, and one while wrk sends its
#      devices' opens of it from the moment it is stored (a broadcast's first taps come while it is still going out;
#      a device not sent it yet is answered 404).
# Needs wrk and sqlite3 (Debian packages); installs them when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

DEVICES=${DEVICES:-100000}
DURATION=${DURATION:-20}
CONNECTIONS=${CONNECTIONS:-32}
SCRATCH=${SCRATCH:-.build}

source scripts/lib/tools.sh
install_missing wrk sqlite3

source scripts/lib/serve.sh
source scripts/lib/seed.sh
source scripts/lib/push.sh

# ── 1. the audience, every device with the template's secret
seed_audience "$DEVICES"

sale='{"audience": {"all": true}, "notification": {"title": "Flash sale", "body": "tap me"}}'
opens() { # push seconds → wrk's output
  (cd "$work" && APP_KEY=$app_key SECRET=$secret BODY="{\"pushId\":\"$1\"}" DEVICES=$DEVICES THREADS=2 \
    wrk -t2 -c"$CONNECTIONS" -d"$2s" --latency -s device-call.lua "$url")
}
cp scripts/lib/device-call.lua "$work/device-call.lua"

# ── 2. one push to all of them
receiver=""
if [ "${WEBHOOK_OPENS:-0}" = 1 ]; then
  # Answers 204 to every post and counts the opens' events in them.
  cat >"$work/receiver.py" <<'PY'
import http.server, json, sys
class Receiver(http.server.BaseHTTPRequestHandler):
    events = 0
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body.get("type") == "push.opened":
            Receiver.events += len(body["events"])
            with open(sys.argv[2], "w") as out: out.write(str(Receiver.events))
        self.send_response(204); self.end_headers()
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Receiver).serve_forever()
PY
  receiver_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  echo 0 >"$work/posted"
  python3 "$work/receiver.py" "$receiver_port" "$work/posted" &
  receiver=$!
  trap 'kill "$receiver" 2>/dev/null || true; cleanup' EXIT
  export TERN_WEBHOOKS_ALLOW_PRIVATE_NETWORKS=true
fi
start_server "$work"
if [ -n "$receiver" ]; then
  curl -sf -X PATCH "$url/v1/apps/demo" -H "Authorization: Bearer $TERN_ADMIN_TOKEN" -H 'Content-Type: application/json' \
    -d "{\"webhookURL\": \"http://127.0.0.1:$receiver_port/hook\", \"webhookEvents\": [\"token.deactivated\", \"push.opened\"]}" >/dev/null ||
    { echo "the app's webhook could not be set" >&2; exit 1; }
fi
t0=$(date +%s.%N)
push_id=$(store_push "$sale")
[ -n "$push_id" ] || { echo "the push was refused" >&2; exit 1; }
push_seconds=$(follow_push "$push_id" "$t0")
chunks=$(sqlite3 "$work/tern.db" "SELECT COUNT(*) FROM push_chunks WHERE push_id = '$push_id'")
echo "push $push_id to $DEVICES devices: completed in $push_seconds s, $chunks chunks" >&2

# ── 3. the opens
echo "── opens: wrk -t2 -c$CONNECTIONS -d${DURATION}s" >&2
out=$(opens "$push_id" "$DURATION")
echo "$out" >&2
wrk_figures "$out"
opened=$(curl -sf "$url/v1/apps/demo/pushes/$push_id" -H "Authorization: Bearer $master" | grep -o '"opened":[0-9]*' | cut -d: -f2)
# wrk counts the answers it read; the requests still in flight when it stopped (one per connection at most) were
# made all the same.
least=$(( requests < DEVICES ? requests : DEVICES ))
most=$(( requests + CONNECTIONS < DEVICES ? requests + CONNECTIONS : DEVICES ))
echo
echo "| measurement ($DEVICES devices, one push to all in $push_seconds s, $chunks chunks) | result |"
echo "|---|---|"
echo "| opens answered, \`wrk -t2 -c$CONNECTIONS -d${DURATION}s\` | ${rate} requests/s, p50 $p50, p99 $p99, non-2xx ${non2xx:-0} |"
echo "| the push's \`opened\` afterwards | $opened (devices that reported: $least answered, up to $most made) |"
[ "${non2xx:-0}" = 0 ] && [ "$opened" -ge "$least" ] && [ "$opened" -le "$most" ] ||
  { echo "wrong: non-2xx ${non2xx:-0}, opened $opened, not $least-$most" >&2; exit 1; }
if [ -n "$receiver" ]; then
  # Every open counted is an event, posted once: wait for the receiver to have them all.
  t0=$(date +%s.%N)
  for _ in $(seq 1 1200); do [ "$(cat "$work/posted")" -ge "$opened" ] && break; sleep 0.05; done
  posted=$(cat "$work/posted")
  caught_up=$(awk "BEGIN {print $(date +%s.%N) - $t0}")
  echo "| opens posted to the webhook (\`push.opened\`) | $posted, the last $(printf '%.1f' "$caught_up") s after wrk stopped |"
  [ "$posted" = "$opened" ] || { echo "wrong: the webhook got $posted opens, not $opened" >&2; exit 1; }
fi

# ── 4. a push while its devices report opening it, as a broadcast's first taps come while it is still going out
t0=$(date +%s.%N)
alone=$(store_push "$sale")
alone_seconds=$(follow_push "$alone" "$t0")
t0=$(date +%s.%N)
loaded=$(store_push "$sale")
opens "$loaded" "$DURATION" >"$work/during.out" &
reporting=$!
loaded_seconds=$(follow_push "$loaded" "$t0")
wait "$reporting"
during_rate=$(awk '/Requests\/sec/ {print $2}' "$work/during.out")
echo "| another push to all of them, alone | $alone_seconds s |"
echo "| another, while its devices report opening it (wrk as above, from its start) | $loaded_seconds s; ${during_rate} reports/s over the ${DURATION} s (404 for those not yet sent it) |"
