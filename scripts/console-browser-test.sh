#!/usr/bin/env bash
# The operator's console in a real browser: starts `tern serve` (the built .build/debug/tern) in a temporary folder
# on a free port and drives headless Chromium through it with Selenium (Tests/Browser/console_browser_test.py):
# sign-in (a wrong secret refused), a new app, a device found, a push composed, sent and seen completed, a broadcast
# sent from a channel's page.
#
#   scripts/console-browser-test.sh                 the test (about 30 s)
#   scripts/console-browser-test.sh --screenshots   also saves every page at 1280 and 390 px into docs/console/
#
# It installs what it needs when it is missing: Debian's chromium and chromium-driver, and Python's selenium.
set -euo pipefail
cd "$(dirname "$0")/.."

shots=""
if [ "${1:-}" = "--screenshots" ]; then
  shots="$(pwd)/docs/console"
  mkdir -p "$shots"
fi

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
if ! python3 -c "import selenium" >/dev/null 2>&1; then
  python3 -m pip install -q selenium 2>/dev/null || python3 -m pip install -q --break-system-packages selenium
fi
if [ ! -x .build/debug/tern ]; then
  swift build --product tern
fi
tern="$(pwd)/.build/debug/tern"

folder="$(mktemp -d "${TMPDIR:-/tmp}/tern-console.XXXXXX")"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$folder"
}
trap cleanup EXIT

(cd "$folder" && exec "$tern" serve --port "$port" --log-level warning >banner.txt 2>server.log) &
server=$!
for _ in $(seq 1 300); do
  if grep -q 'pushes?wait' "$folder/banner.txt" 2>/dev/null; then break; fi
  if ! kill -0 "$server" 2>/dev/null; then cat "$folder/server.log" >&2; echo "tern serve did not start" >&2; exit 1; fi
  sleep 0.1
done
admin="$(awk '$1 == "admin" && $2 == "token" { print $3 }' "$folder/banner.txt")"
control="$(grep -o 'control API http://[0-9.:]*' "$folder/banner.txt" | awk '{ print $3 }')"
if [ -z "$admin" ] || [ -z "$control" ] || ! grep -q "console          http://127.0.0.1:$port/console" "$folder/banner.txt"; then
  cat "$folder/banner.txt" >&2
  echo "the banner has no admin token, simulator or console URL" >&2
  exit 1
fi

TERN_URL="http://127.0.0.1:$port" TERN_ADMIN_TOKEN="$admin" TERN_SIMULATOR_CONTROL="$control" TERN_CONSOLE_SCREENSHOTS="$shots" \
  timeout 180 python3 Tests/Browser/console_browser_test.py
