#!/usr/bin/env bash
# Runs Tern's whole test suite: `scripts/test.sh` (extra arguments go to `swift test`, e.g. --filter Simulator).
# It installs what the tests need when it is missing, so it works the same on a fresh machine and in CI.
#
#   scripts/test.sh          everything, as CI runs it: the API fuzzing, the console in a browser, the in-process suites
#                            in parallel, then the suites that start processes one test at a time, then TernKit's
#                            (Clients/TernKit)
#   scripts/test.sh --fast   the fast tier for your own loop: the in-process suites in parallel, nothing else (about
#                            a minute on two cores once built)
set -euo pipefail
cd "$(dirname "$0")/.."

fast=0
if [ "${1:-}" = "--fast" ]; then
  fast=1
  shift
fi

# The control-API tests talk to the simulator with curl.
if ! command -v curl >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq curl >/dev/null
fi

# The store's conformance suite runs against PostgreSQL too: a throwaway server (installed when missing) unless
# TERN_TEST_POSTGRES_URL names one already (the tests create and drop databases there; the database-restart test
# runs only with TERN_TEST_POSTGRES_RESTART, a command that restarts that server).
source scripts/lib/postgres.sh
if [ -z "${TERN_TEST_POSTGRES_URL:-}" ]; then
  postgres_start
  export TERN_TEST_POSTGRES_URL="$TERN_POSTGRES_URL" TERN_TEST_POSTGRES_RESTART="$TERN_POSTGRES_RESTART"
fi

swift build --build-tests

# Foundation's Process (the `tern` command tests start `tern` with it; a client suite and the app-certificate suite
# run openssl for a PKCS#12 bundle) reads past its /proc/self/fd listing once that listing fills glibc's 32 KiB
# directory buffer, and crashed the test process with
# SIGSEGV in about one run in six when every suite ran in parallel (1,300-1,450 descriptors at once: simulators,
# servers, SQLite files). So the suites that start processes run one test at a time, with the process under 250
# descriptors; the in-process suites, which start none, run in parallel.
serial=(--filter TernCLITests --filter CertificateAuth --filter AppCertificate)
parallel=(--skip TernCLITests --skip CertificateAuth --skip AppCertificate)
# The in-process suites run 32 tests at a time rather than all ~700 at once: with every one started together on two
# cores, a PostgreSQL call waited up to 13 s to be resumed and a fresh schema took 10 s, so tests failed on deadlines
# that are not what they check (one CI run did). At 32 the slowest call took 4 s and the tier a few seconds longer.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-32}"
if [ "$fast" = 1 ]; then
  # Not exec: the throwaway PostgreSQL is stopped by this script's EXIT trap.
  status=0
  swift test --skip-build --parallel "${parallel[@]}" "$@" || status=$?
  exit "$status"
fi
# The API against its contract (docs: scripts/api-fuzz.sh), the console in headless Chromium against a real
# `tern serve` (scripts/console-browser-test.sh), and the deployment guide's nginx example in front of one
# (scripts/nginx-example-test.sh), before the suite so the suite's summary ends the log.
scripts/api-fuzz.sh
scripts/console-browser-test.sh
scripts/nginx-example-test.sh
# The output goes to a log too: a failing run ends by repeating what failed, so the tail of a long CI log names it.
log="$(mktemp "${TMPDIR:-/tmp}/tern-test.XXXXXX")"
status=0
if [ "$#" -gt 0 ]; then
  # A selection of tests: one at a time, whichever suites they are in.
  swift test --skip-build --no-parallel "$@" 2>&1 | tee "$log" || status=$?
else
  swift test --skip-build --parallel "${parallel[@]}" 2>&1 | tee "$log" || status=$?
  swift test --skip-build --no-parallel "${serial[@]}" 2>&1 | tee -a "$log" || status=$?
  # TernKit, the apps' SDK: a package of its own (the library has no dependencies; its tests reach the online channel
  # through a SwiftNIO WebSocket client), built and tested here too, against this build's `tern serve`.
  TERN_BINARY="${TERN_BINARY:-$PWD/.build/debug/tern}" swift test --package-path Clients/TernKit 2>&1 | tee -a "$log" || status=$?
fi
if [ "$status" -ne 0 ]; then
  echo
  echo "== what failed (exit $status) =="
  grep -E '✘|↳|error:|Fatal error|Test Suite .* failed' "$log" | grep -v ' started\.$' | tail -n 60 || true
fi
rm -f "$log"
exit "$status"
