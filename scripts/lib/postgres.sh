# A throwaway PostgreSQL for tests and benchmarks. Source this file, then:
#   postgres_start      # installs the Debian package `postgresql` if needed, starts a server in a temporary folder
#                       # on a free port and sets TERN_POSTGRES_URL (trust auth, user tern, database postgres)
#   postgres_stop       # stops it and deletes the folder (postgres_start registers this on EXIT too)
# The server runs without fsync: it holds test data only.

postgres_bin() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  if [ -z "$dir" ] || [ ! -x "$dir/initdb" ]; then
    echo "installing postgresql…" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    dir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  fi
  echo "$dir"
}

postgres_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

postgres_start() {
  local bin port
  bin=$(postgres_bin)
  POSTGRES_DIR=$(mktemp -d /tmp/tern-postgres.XXXXXX)
  port=$(postgres_free_port)
  # initdb and postgres refuse to run as root: as root, the server runs as the package's `postgres` user.
  local as=()
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql postgres
    chown postgres "$POSTGRES_DIR"
    as=(runuser -u postgres --)
  fi
  "${as[@]}" "$bin/initdb" -D "$POSTGRES_DIR/data" -U tern --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$POSTGRES_DIR/initdb.log" 2>&1 \
    || { cat "$POSTGRES_DIR/initdb.log" >&2; return 1; }
  "${as[@]}" "$bin/pg_ctl" -D "$POSTGRES_DIR/data" -l "$POSTGRES_DIR/server.log" -w -t 60 \
    -o "-p $port -k $POSTGRES_DIR -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
    start >/dev/null || { cat "$POSTGRES_DIR/server.log" >&2; return 1; }
  POSTGRES_PG_CTL=("${as[@]}" "$bin/pg_ctl" -D "$POSTGRES_DIR/data")
  export TERN_POSTGRES_URL="postgres://tern@127.0.0.1:$port/postgres?sslmode=disable"
  # How to restart it (the failure tests restart the database in the middle of a push). The restarted server
  # outlives the command, so it must not inherit the caller's descriptors: a parent waiting for a pipe or socket
  # to close (as Foundation's Process does) would wait for as long as the server runs.
  export TERN_POSTGRES_RESTART="python3 -c 'import os, sys; os.closerange(3, 65536); os.execvp(sys.argv[1], sys.argv[1:])' ${as[*]} $bin/pg_ctl -D $POSTGRES_DIR/data -l $POSTGRES_DIR/server.log -w -t 60 -m fast restart"
  trap postgres_stop EXIT
  echo "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (data in $POSTGRES_DIR)" >&2
}

postgres_stop() {
  [ -n "${POSTGRES_DIR:-}" ] || return 0
  "${POSTGRES_PG_CTL[@]}" stop -m immediate >/dev/null 2>&1 || true
  rm -rf "$POSTGRES_DIR"
  POSTGRES_DIR=""
}
