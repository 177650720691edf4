# A push stored and followed to completion, for the benchmark scripts. Source this file after serve.sh, with
# `master` set to the demo app's master secret.
#   store_push BODY     POST …/pushes (202, not waited for) → the new push's id
#   follow_push ID T0   → seconds from T0 (`date +%s.%N`) to the push's completion, read every 50 ms
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
