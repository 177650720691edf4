# One `tern serve` at a time for the benchmark scripts and the nginx example's check, on SQLite in a folder of its own.
# Source this file.
#   TERN                the binary: taken as given, or built (release, in SCRATCH, default .build) if unset
#   work                a temporary folder, deleted on exit with the server stopped
#   start_server DIR    `tern serve --port 0` in DIR (its tern.db), until it says it serves; sets url and pid
#   stop_server         SIGINT, and waits for the graceful stop
# The server key and admin token are made up for the run (TERN_SERVER_KEY, TERN_ADMIN_TOKEN).
if [ -z "${TERN:-}" ]; then
  echo "building tern (release)…" >&2
  swift build -c release --scratch-path "${SCRATCH:-.build}" --product tern >&2
  TERN="$(cd "${SCRATCH:-.build}" && pwd)/release/tern"
fi

work=$(mktemp -d)
pid=""
export TERN_SERVER_KEY=$(head -c 32 /dev/urandom | base64)
export TERN_ADMIN_TOKEN=bench-admin-token-0123456789
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

start_server() { # folder
  : >"$1/serve.out"
  (cd "$1" && exec "$TERN" serve --port 0 --log-level info >serve.out 2>serve.err) &
  pid=$!
  for _ in $(seq 1 600); do
    grep -q 'Tern is serving' "$1/serve.out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { echo "tern serve stopped:" >&2; cat "$1/serve.err" >&2; exit 1; }
    sleep 0.05
  done
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$1/serve.out" | head -1)
}
stop_server() { kill -INT "$pid"; wait "$pid" || true; pid=""; }
