# Devices for the benchmark scripts, copied in SQL from one registered over HTTP: registration speed is
# bench-serve.sh's business, so an audience of a million takes seconds. Source this file; needs sqlite3.
#   seed_devices DB COUNT TEMPLATE   copies device TEMPLATE's row COUNT times in DB (device ids
#                                    6f1c1f9e-8d7a-4d44-9d2e-<n as 12 hex digits>, tokens <n as 64 hex digits>, n = 1…COUNT;
#                                    every other column, the device secret's hash included, the template's), then deletes
#                                    the template, in one transaction.
seed_devices() { # db count template
  local db=$1 count=$2 template=$3
  local columns copied
  columns=$(sqlite3 "$db" "SELECT group_concat(name, ', ') FROM pragma_table_info('devices')")
  copied=$(sqlite3 "$db" "SELECT group_concat(CASE name WHEN 'device_id' THEN
      '''6f1c1f9e-8d7a-4d44-9d2e-'' || printf(''%012x'', n)' WHEN 'token' THEN 'printf(''%056x%08x'', 0, n)' ELSE name END, ', ')
    FROM pragma_table_info('devices')")
  sqlite3 "$db" <<SQL
BEGIN;
INSERT INTO devices ($columns)
  WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < $count)
  SELECT $copied FROM seq, devices WHERE device_id = '$template';
DELETE FROM devices WHERE device_id = '$template';
COMMIT;
SQL
}

# seed_audience COUNT   after serve.sh: `tern serve` in $work registers the template device over HTTP and stops, and
#                       seed_devices copies it COUNT times; sets app_key, master (the demo app's secrets) and secret
#                       (the device secret every seeded device shares).
seed_audience() { # count
  local template=6f1c1f9e-8d7a-4d44-9d2e-000000000000
  start_server "$work"
  app_key=$(grep 'app key' "$work/serve.out" | awk '{print $3}')
  master=$(grep 'master secret' "$work/serve.out" | awk '{print $3}')
  secret=$(curl -sf -X PUT "$url/v1/apps/demo/devices/$template" -H "Authorization: Bearer $app_key" -H 'Content-Type: application/json' \
    -d "{\"token\": \"$(printf 'ab%.0s' $(seq 1 32))\", \"environment\": \"production\"}" | grep -o '"deviceSecret":"[^"]*"' | cut -d'"' -f4)
  stop_server
  echo "── seeding $1 devices in SQL" >&2
  seed_devices "$work/tern.db" "$1" "$template"
}
