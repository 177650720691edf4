# A push stored and followed to completion, for the benchmark scripts. Source this file after serve.sh, with
# `master` set to the demo app's master secret.
#   store_push BODY     POST …/pushes (202, not waited for) → the new push's id
#   follow_push ID T0   → seconds from T0 (`date +%s.%N`) to the push's completion, read every 50 ms
#   timed_push NAME BODY EXPECTED
#                       stores the push and follows it → seconds from the request to completion; exits the script
#                       unless exactly EXPECTED recipients accepted it
#   wrk_figures OUTPUT  sets rate, requests, p50, p99 and non2xx from wrk's --latency output
store_push() { # body → id
  curl -sf -X POST "$url/v1/apps/demo/pushes" -H "Authorization: Bearer $master" -H 'Content-Type: application/json' -d "$1" |
    grep -o '"id":"[^"]*"' | head -1 | cut -d'"' -f4
}
follow_push() { # id t0 → seconds
  local json=""
  until grep -q '"status":"completed"' <<<"$json"; do
    sleep 0.05
    json=$(curl -sf "$url/v1/apps/demo/pushes/$1" -H "Authorization: Bearer $master")
  done
  awk -v a="$2" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}'
}
timed_push() { # name body expected → seconds
  local t0 id seconds accepted
  t0=$(date +%s.%N)
  id=$(store_push "$2")
  [ -n "$id" ] || { echo "the $1 push was not accepted" >&2; exit 1; }
  seconds=$(follow_push "$id" "$t0")
  accepted=$(curl -sf "$url/v1/apps/demo/pushes/$id" -H "Authorization: Bearer $master" | grep -o '"accepted":[0-9]*' | cut -d: -f2)
  [ "$accepted" = "$3" ] || { echo "the $1 push reached $accepted, not $3" >&2; exit 1; }
  echo "$seconds"
}
wrk_figures() { # wrk's output → rate requests p50 p99 non2xx
  rate=$(awk '/Requests\/sec/ {print $2}' <<<"$1")
  requests=$(awk '/requests in/ {print $1}' <<<"$1")
  p50=$(awk '$1=="50%" {print $2}' <<<"$1")
  p99=$(awk '$1=="99%" {print $2}' <<<"$1")
  non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$1")
}
