#!/usr/bin/env bash
# Measures the legacy binary gateway client with `tern bench --legacy` against the in-process simulator's gateway
# (TLS with a client certificate from the simulator's CA).
#
#   scripts/bench-legacy.sh                  # 1,000,000 notifications, 3 runs per case
#   COUNT=200000 RUNS=5 scripts/bench-legacy.sh
#
# Cases, interleaved run by run so each sees the same machine noise: frame format on 1 connection, enhanced format
# on 1 connection, frame format on 2 connections. Prints one table row per case (medians) and every run's figures.
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-1000000}
RUNS=${RUNS:-3}
SCRATCH=${SCRATCH:-.build}

echo "building tern (release)…" >&2
swift build -c release --scratch-path "$SCRATCH" --product tern >&2
TERN="$SCRATCH/release/tern"

# tern bench --legacy FORMAT CONNECTIONS → "settled-rate gateway-rate peak-rss"; warns unless all were delivered.
bench() {
  local out
  out=$("$TERN" bench --legacy --legacy-format "$1" --connections "$2" -n "$COUNT" 2>/dev/null) || true
  echo "$out" >&2
  if ! grep -q "delivered $(sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$COUNT")  rejected 0  errors 0" <<<"$out"; then
    echo "tern bench --legacy did not deliver everything" >&2
  fi
  local settled gateway rss
  settled=$(awk '/^throughput/ {gsub(",", "", $2); print $2}' <<<"$out")
  gateway=$(awk '/^gateway/ {gsub(",", "", $2); print $2}' <<<"$out")
  rss=$(awk '/^peak RSS/ {print $3}' <<<"$out")
  echo "$settled $gateway $rss"
}

source scripts/lib/stats.sh

cases=("frame 1" "enhanced 1" "frame 2")
declare -A results=()
for i in $(seq 1 "$RUNS"); do
  for c in "${cases[@]}"; do
    echo "── $c connection(s), run $i of $RUNS" >&2
    results[$c]+="$(bench $c)"$'\n'
  done
done

echo
echo "| format, connections | gateway took (notifications/s, median) | runs | settled incl. last replay window (median) | runs | peak RSS (MiB) |"
echo "|---|---|---|---|---|---|"
for c in "${cases[@]}"; do
  r=$(grep . <<<"${results[$c]}")
  printf '| %s | %.0f | %s | %.0f | %s | %s |\n' "${c/ /, }" "$(column 2 "$r")" \
    "$(awk '{printf "%s%s", (NR>1 ? ", " : ""), $2}' <<<"$r")" "$(column 1 "$r")" \
    "$(awk '{printf "%s%s", (NR>1 ? ", " : ""), $1}' <<<"$r")" "$(maximum 3 "$r")"
done
