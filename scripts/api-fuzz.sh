#!/usr/bin/env bash
# Fuzzes the API against its contract: schemathesis (PyPI) reads GET /openapi.json from a live `tern serve` (debug
# build, SQLite, built-in simulator, in a throwaway folder) and sends every operation generated valid and invalid
# input, with the secrets each operation takes. Checks: no 5xx, status codes and content types the contract names,
# answers that match their schemas. Exit status 0 only with no failure.
#
#   scripts/api-fuzz.sh                 # 25 examples per operation and secret (about a minute)
#   EXAMPLES=500 scripts/api-fuzz.sh    # a longer run
#
# scripts/test.sh runs it. It installs schemathesis into .build/schemathesis (a virtualenv) the first time.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

EXAMPLES=${EXAMPLES:-25}
VENV=.build/schemathesis
TERN=${TERN:-$(swift build --show-bin-path)/tern}
[ -x "$TERN" ] || swift build --product tern >&2

if [ ! -x "$VENV/bin/schemathesis" ]; then
  echo "installing schemathesis into $VENV…" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q 'schemathesis>=4.3,<5' >&2
fi

work=$(mktemp -d)
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
export TERN_ADMIN_TOKEN=fuzz-admin-token-0123456789
(cd "$work" && exec "$TERN" serve --port 0 --log-level error >serve.out 2>serve.err) &
pid=$!
for _ in $(seq 1 300); do grep -q 'pushes?wait' "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
url=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.out" | head -1)
master=$(grep 'master secret' "$work/serve.out" | awk '{print $3}')
app_key=$(grep 'app key' "$work/serve.out" | awk '{print $3}')
[ -n "$url" ] && [ -n "$master" ] || { echo "tern serve did not start:" >&2; cat "$work/serve.err" >&2; exit 1; }

# Operations run on the demo app and one of its devices (random ids would only meet 401 and 404), registered by the
# backend; the app-key run presents that device's secret.
device=6f1c1f9e-8d7a-4d44-9d2e-00000000f022
registered=$(curl -sf -X PUT "$url/v1/apps/demo/devices/$device" -H "Authorization: Bearer $master" \
  -d '{"token": "abababababababababababababababababababababababababababababab0f22", "environment": "production", "alias": "fuzz", "tags": ["fuzz"]}')
device_secret=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["deviceSecret"])' "$registered")
cat >"$work/schemathesis.toml" <<TOML
[parameters]
"path.app" = "demo"
"path.deviceId" = "$device"
"query.deviceId" = "$device"
TOML

status=0
fuzz() {  # fuzz LABEL TAG [HEADER…]
  local label=$1 tag=$2
  shift 2
  local headers=()
  for header in "$@"; do headers+=(-H "$header"); done
  echo "── schemathesis: $label operations" >&2
  # shellcheck disable=SC2086 (EXCLUDE is words); run in the throwaway folder, where it keeps its cache.
  (cd "$work" && exec "$root/$VENV/bin/schemathesis" --config-file "$work/schemathesis.toml" run "$url/openapi.json" --url "$url" --include-tag "$tag" "${headers[@]}" ${EXCLUDE:-} \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
    --mode all --max-examples "$EXAMPLES" --seed 1 --generation-deterministic --no-color) >"$work/fuzz-$tag.log" 2>&1 || status=1
  tail -n 25 "$work/fuzz-$tag.log"
}
# Last the admin run: it may rotate the demo app's secrets or delete it.
fuzz "system" system
# The app-key run leaves out rotating and deleting the device: after either, its secret no longer proves anything.
EXCLUDE="--exclude-operation-id rotateDeviceSecret --exclude-operation-id deleteDevice" \
  fuzz "device (app key and the device's secret)" device "Authorization: Bearer $app_key" "X-Tern-Device-Secret: $device_secret"
fuzz "device (master secret)" device "Authorization: Bearer $master"
fuzz "backend (master secret)" backend "Authorization: Bearer $master"
fuzz "admin" admin "Authorization: Bearer $TERN_ADMIN_TOKEN"
if grep -q 'Server error\|server_error' "$work/serve.err" 2>/dev/null; then status=1; fi
[ "$status" = 0 ] && echo "api-fuzz: no failures" >&2 || echo "api-fuzz: failures above" >&2
exit "$status"
