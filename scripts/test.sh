#!/usr/bin/env bash
# Runs Tern's whole test suite: `scripts/test.sh` (extra arguments go to `swift test`, e.g. --filter Simulator).
# It installs what the tests need when it is missing, so it works the same on a fresh machine and in CI.
#
#   scripts/test.sh --fast   the fast tier for your own loop: every in-process suite, in parallel, without the API
#                            fuzzing and the `tern` process tests (TernCLITests); a few minutes.
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
if [ "$fast" = 1 ]; then
  # In parallel: no test here starts a process, so the descriptor problem below does not arise.
  exec swift test --skip-build --parallel --skip TernCLITests "$@"
fi
# The API against its contract (docs: scripts/api-fuzz.sh), before the suite so the suite's summary ends the log.
scripts/api-fuzz.sh
# One test at a time, though that takes about twice as long: run in parallel, the suites hold 1,300-1,450
# descriptors at once (simulators, servers, SQLite files), and Foundation's Process, which the CLI tests use to start
# `tern`, reads past its /proc/self/fd listing once that listing fills glibc's 32 KiB directory buffer; it crashed the
# test process with SIGSEGV in about one run in six. One at a time, the process stays under 250 descriptors.
# The output goes to a log too: a failing run ends by repeating what failed, so the tail of a long CI log names it.
log="$(mktemp "${TMPDIR:-/tmp}/tern-test.XXXXXX")"
status=0
swift test --skip-build --no-parallel "$@" 2>&1 | tee "$log" || status=$?
if [ "$status" -ne 0 ]; then
  echo
  echo "== what failed (exit $status) =="
  grep -E '✘|↳|error:|Fatal error|Test Suite .* failed' "$log" | grep -v ' started\.$' | tail -n 60 || true
fi
rm -f "$log"
exit "$status"
