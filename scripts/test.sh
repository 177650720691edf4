#!/usr/bin/env bash
# Runs Tern's whole test suite: `scripts/test.sh` (extra arguments go to `swift test`, e.g. --filter Simulator).
# It installs what the tests need when it is missing, so it works the same on a fresh machine and in CI.
set -euo pipefail
cd "$(dirname "$0")/.."

# The control-API tests talk to the simulator with curl.
if ! command -v curl >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq curl >/dev/null
fi

swift build --build-tests
swift test --skip-build "$@"
