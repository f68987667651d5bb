#!/usr/bin/env bash
# The upgrade test (docs/database.md, Upgrading): `txhub migrate` of this
# build run against a 0.4.0 database while a 0.4.0 hub keeps working on it,
# RUNS times in a row, each from the same 0.4.0 database again.
#
#   tests/upgrade/run.sh TXHUB_BINARY [RUNS]        (RUNS: 10)
#
# It runs itself under tests/with-services.sh with a durable PostgreSQL (fsync
# on, as in production) and `txhub devbroker` (or TXHUB_TEST_BROKERS), builds
# txhub 0.4.0 (commit 810e4c5) once into a cache directory
# (TXHUB_UPGRADE_CACHE, default ~/.cache/txhub-upgrade; ccache helps),
# migrates a database with 0.4.0 and fills it with TXHUB_UPGRADE_ROWS
# messages (1,000,000), and then, per run:
# a copy of that database (CREATE DATABASE ... TEMPLATE), `txhub bench` at
# TXHUB_UPGRADE_RATE transactions per second (200) for TXHUB_UPGRADE_SECONDS
# (30) with a 0.4.0 hub (forward.mode TXHUB_UPGRADE_MODE, at_least_once), and
# once the hub is applying the bench's records, `txhub migrate` of
# TXHUB_BINARY. A run passes when
#   - migrate exits 0 and the schema is at its latest version, every index
#     of schema txhub valid;
#   - the bench was still producing when migrate finished (the load covered
#     the whole migration) and reports nothing lost (exit 0: every committed
#     transaction forwarded, no rolled-back one);
#   - no statement of the hub waited for a lock behind migrate longer than
#     TXHUB_UPGRADE_MAX_WAIT_MS (2000): PostgreSQL logs every lock wait over
#     deadlock_timeout (1 s, log_lock_waits) with its length, the lock's
#     holders and its queue; a wait of the hub's (or the bench's) sessions
#     counts when migrate's session held the lock or was queued ahead of it
#     (tests/upgrade/lock_waits.awk). The longest wait of any cause (a
#     0.4.0 hub's sessions also wait for each other) is reported. It also logs every
#     statement of the hub's (and the bench's) sessions over 100 ms
#     (log_min_duration_statement through PGOPTIONS): the longest and how
#     many are reported, not checked (a 0.4.0 hub's forward scans read the
#     whole table through the view of migration 0012);
#   - PostgreSQL logged no deadlock that migrate's session was part of (those
#     among the hub's own sessions are reported).
# The figures of each run go to standard error and, one JSON line per run, to
# standard output; the logs stay in TXHUB_UPGRADE_KEEP when that is set.
# Exit status: 0 every run passed, 1 a run failed, 2 it could not be set up.
set -euo pipefail
txhub=$(realpath "$1")
runs=${2:-10}
src=$(cd "$(dirname "$0")/../.." && pwd)
cache=${TXHUB_UPGRADE_CACHE:-$HOME/.cache/txhub-upgrade}
rows=${TXHUB_UPGRADE_ROWS:-1000000}
rate=${TXHUB_UPGRADE_RATE:-200}
seconds=${TXHUB_UPGRADE_SECONDS:-30}
mode=${TXHUB_UPGRADE_MODE:-at_least_once}
max_wait_ms=${TXHUB_UPGRADE_MAX_WAIT_MS:-2000}
old_commit=810e4c5
say() { echo "upgrade: $*" >&2; }
if [ -z "${TXHUB_TEST_PGLOG:-}" ]; then
  # durable (fsync and synchronous_commit as shipped); the log names each
  # session's process and application, and every lock wait over 1 s
  TXHUB_TEST_PG_DURABLE=1 TXHUB_TEST_PG_OPTIONS="-c shared_buffers=256MB -c max_wal_size=4GB \
    -c log_line_prefix='%m [%p] %a: ' -c log_lock_waits=on" \
    exec "$src/tests/with-services.sh" "$txhub" "$0" "$@"
fi

# ---- txhub 0.4.0 ----
old_src=$cache/txhub-$old_commit
old=$old_src/build/txhub
if [ ! -x "$old" ]; then
  say "building txhub 0.4.0 ($old_commit) in $old_src"
  rm -rf "$old_src"
  mkdir -p "$old_src"
  git -C "$src" archive "$old_commit" | tar -x -C "$old_src" ||
    { say "cannot read commit $old_commit from $src (a clone with its history is needed)"; exit 2; }
  (cd "$old_src" && meson setup build >build.log 2>&1 && ninja -C build txhub >>build.log 2>&1) ||
    { tail -n 30 "$old_src/build.log" >&2; exit 2; }
fi
"$old" version >&2

# ---- services ----
tmp=$(mktemp -d "${TMPDIR:-/tmp}/txhub-upgrade.XXXXXX")
hub_pids=""
cleanup() {
  set +e
  for p in $hub_pids; do kill "$p" 2>/dev/null; done
  if [ -n "${TXHUB_UPGRADE_KEEP:-}" ]; then
    mkdir -p "$TXHUB_UPGRADE_KEEP" && cp "$tmp"/*.log "$tmp"/*.json "$TXHUB_UPGRADE_KEEP"/ 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
pglog=$TXHUB_TEST_PGLOG
brokers=$TXHUB_BROKERS
q() { psql -d "$1" -v ON_ERROR_STOP=1 -qAtc "$2"; }
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

# ---- the 0.4.0 database ----
t0=$(date +%s%N)
q postgres "CREATE DATABASE v040"
"$old" migrate -X pg="host=$PGHOST user=txhub dbname=v040" 2>"$tmp/migrate-040.log" ||
  { cat "$tmp/migrate-040.log" >&2; exit 2; }
# as a hub that ran a while leaves it: 88% committed and sent, 10% rolled
# back, a few prepared (due in a day: no check-backs now), failed, retrying
q v040 "INSERT INTO txhub.messages (biz_id, message_key, status, send_status, payload,
    forward_topic, forward_key, checkback_url, next_check_at, send_attempts, next_send_at,
    last_error, src_partition, src_offset, created_at, updated_at, fwd_seq)
  SELECT 'shop' || (i % 100), 'o-' || i, s.status,
    CASE WHEN s.status <> 'committed' THEN NULL WHEN s.r >= 9840 THEN 'failed' ELSE 'sent' END,
    decode(repeat('ab', 100), 'hex'), 'orders', 'k' || i, 'http://shop.example/check',
    CASE WHEN s.status = 'prepared' THEN now() + interval '1 day' END,
    CASE WHEN s.r >= 9840 THEN 15 ELSE 0 END,
    CASE WHEN s.status = 'committed' THEN now() - interval '1 day' END,
    CASE WHEN s.r >= 9840 THEN 'broker said no' END,
    i % 4, i / 4, now() - ($rows - i) * interval '100 ms', now() - ($rows - i) * interval '100 ms',
    CASE WHEN s.status = 'committed' THEN ((i / 4) + 1) << 20 END
  FROM generate_series(1, $rows) i,
    LATERAL (SELECT i % 10000 AS r) x,
    LATERAL (SELECT x.r, CASE WHEN x.r < 8800 THEN 'committed' WHEN x.r < 9800 THEN 'rolled_back'
               WHEN x.r < 9830 THEN 'prepared' WHEN x.r < 9840 THEN 'check_failed'
               ELSE 'committed' END AS status) s"
q v040 "INSERT INTO txhub.history (biz_id, message_key, event, detail)
  SELECT biz_id, message_key, 'forward_failed', last_error FROM txhub.messages
  WHERE send_status = 'failed'"
q v040 "VACUUM (ANALYZE)"
q postgres "CHECKPOINT"
say "0.4.0 database with $(q v040 "SELECT count(*) FROM txhub.messages") messages in \
$(ms_since "$t0") ms"

# ---- the runs ----
latest=$(ls "$src"/migrations/[0-9]*.sql | wc -l)
failed=0
for ((run = 1; run <= runs; run++)); do
  db=upg$run
  conn="host=$PGHOST user=txhub dbname=$db"
  topic=upg.$$.$run.control # this invocation's own: a broker may outlive it
  q postgres "CREATE DATABASE $db TEMPLATE v040"
  log_from=$(wc -l <"$pglog")
  # every statement of the bench's sessions and of the hub it starts over 100 ms
  PGOPTIONS="-c log_min_duration_statement=100" "$txhub" bench --count $((rate * seconds)) \
    --rate "$rate" --no-ceilings --drain 120 --warmup 0 --start-hub --hub-binary "$old" \
    --hub-log "$tmp/hub$run.log" --run-id "u$run" --forward-topic "upg.$$.$run.fwd" \
    $([ "$mode" = exactly_once ] && echo --exactly-once) \
    -X pg="$conn" -X brokers="$brokers" -X control_topic="$topic" -X forward.mode="$mode" \
    >"$tmp/bench$run.json" 2>"$tmp/bench$run.log" &
  bench=$!
  hub_pids=$bench
  # the hub is applying the bench's records: 2 s of them
  for _ in $(seq 1 1200); do
    n=$(q "$db" "SELECT coalesce(sum(next_offset), 0) FROM txhub.partitions WHERE topic = '$topic'")
    [ "$n" -ge $((rate * 4)) ] && break
    kill -0 "$bench" 2>/dev/null || break
    sleep 0.1
  done
  m0=$(date +%s%N)
  set +e
  # every statement of migrate's session is logged: the lock waits name its process
  PGAPPNAME=txhub-migrate PGOPTIONS="-c log_min_duration_statement=0" "$txhub" migrate -X pg="$conn" -X control_topic="$topic" \
    2>"$tmp/migrate$run.log"
  mrc=$?
  set -e
  mms=$(ms_since "$m0")
  covered=0
  kill -0 "$bench" 2>/dev/null && covered=1
  set +e
  wait "$bench"
  brc=$?
  set -e
  hub_pids=""
  version=$(q "$db" "SELECT max(version) FROM txhub.schema_migrations")
  invalid=$(q "$db" "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                     JOIN pg_namespace n ON n.oid = c.relnamespace
                     WHERE n.nspname = 'txhub' AND NOT i.indisvalid")
  tail -n +$((log_from + 1)) "$pglog" >"$tmp/pg$run.log"
  # lock waits over deadlock_timeout (1 s), with their holders and queue
  read -r waited waited_any deadlocks deadlocks_any < <(awk -f "$src/tests/upgrade/lock_waits.awk" "$tmp/pg$run.log" "$tmp/pg$run.log")
  longest=$( (grep -v '] txhub-migrate: ' "$tmp/pg$run.log" | grep -o 'duration: [0-9.]* ms' || true) |
    awk '{ if ($2 > m) m = $2 } END { printf "%d", m }')
  slow=$(grep -v '] txhub-migrate: ' "$tmp/pg$run.log" | grep -c 'duration: [0-9.]* ms' || true)
  attempts=$(grep -c 'trying again' "$tmp/migrate$run.log" || true)
  forwarded=$(grep -o '"lost":[0-9]*' "$tmp/bench$run.json" | head -n 1 || true)
  secs=$(awk -v m="$mms" 'BEGIN { printf "%.1f", m / 1000 }')
  ok=1 why=""
  [ "$mrc" = 0 ] || { ok=0; why="$why migrate exited $mrc ($(grep -m1 -i 'error' "$tmp/migrate$run.log" | cut -c1-300));"; }
  [ "$version" = "$latest" ] || { ok=0; why="$why schema at version $version, not $latest;"; }
  [ "$invalid" = 0 ] || { ok=0; why="$why $invalid invalid index(es);"; }
  [ "$covered" = 1 ] || { ok=0; why="$why the bench ended before migrate (raise TXHUB_UPGRADE_SECONDS);"; }
  [ "$brc" = 0 ] || { ok=0; why="$why bench exited $brc (lost or wrong, $(tail -n 3 "$tmp/bench$run.log" | tr '\n' ' '));"; }
  [ "$waited" -le "$max_wait_ms" ] || { ok=0; why="$why a hub statement waited $waited ms for a lock behind migrate;"; }
  [ "$deadlocks" = 0 ] || { ok=0; why="$why $deadlocks deadlock(s) with migrate;"; }
  say "run $run: $([ $ok = 1 ] && echo ok || echo FAILED) migrate ${secs} s exit $mrc (schema $version, \
$attempts retries), longest hub lock wait behind migrate ${waited} ms, of any cause ${waited_any} ms (0: none over 1 s), longest hub statement $longest ms ($slow over 100 ms), deadlocks with migrate $deadlocks (of any cause $deadlocks_any), \
bench exit $brc ${forwarded}${why:+; }$why"
  printf '{"run":%d,"ok":%s,"migrate_s":%s,"migrate_exit":%d,"schema":%s,"retries":%d,"longest_hub_lock_wait_behind_migrate_ms":%d,"longest_hub_lock_wait_ms":%d,"longest_hub_statement_ms":%d,"hub_statements_over_100ms":%d,"deadlocks_with_migrate":%d,"deadlocks":%d,"bench_exit":%d,"bench":%s}\n' \
    "$run" "$([ $ok = 1 ] && echo true || echo false)" "$secs" "$mrc" "${version:-0}" "$attempts" \
    "$waited" "$waited_any" "$longest" "$slow" "$deadlocks" "$deadlocks_any" "$brc" "$(tail -n 1 "$tmp/bench$run.json" | grep '^{' || echo null)"
  [ $ok = 1 ] || failed=$((failed + 1))
  q postgres "DROP DATABASE $db"
done
say "$((runs - failed)) of $runs runs passed"
[ "$failed" = 0 ]
