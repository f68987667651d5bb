#!/usr/bin/env bash
# Check-back benchmark, run by `deploy/dev.sh bench-checkback [N]` inside
# tests/with-services.sh. Not a test: nothing is asserted.
#
# The table first gets 1,000,000 finished messages (BENCH_FINISHED, so the
# due-row query runs against a realistic table), then:
#  1. idle: 10,000 prepared messages not due for a day; the hub's CPU use is
#     measured over 10 s;
#  2. load: N prepared messages (default 20000) all falling due at the same
#     moment, against a local endpoint that answers at once (committed for
#     even keys, rolled_back for odd ones); check-backs per second run from
#     the due time to the last answer written, both read from PostgreSQL.
# The prepared rows are written straight into txhub.messages, as a backlog
# of prepares that never got a decision would look. The endpoint is one
# host, so checkback.per_host (default 8) applies; compare other values with
# TXHUB_BENCH_ARGS="-X checkback.per_host=64".
set -euo pipefail
n=${1:-20000}
finished=${BENCH_FINISHED:-1000000}
txhub=$TXHUB_BIN
endpoint=$(dirname "$txhub")/tests/bench-endpoint
dir=$(mktemp -d /tmp/txhub-bench-cb.XXXXXX)
hub=
trap '[ -n "$hub" ] && kill $hub 2>/dev/null; exec 3>&-; wait 2>/dev/null; rm -rf "$dir"' EXIT

psql -qc "CREATE DATABASE bench_cb" >/dev/null
export TXHUB_PG="$TXHUB_PG dbname=bench_cb" PGDATABASE=bench_cb
"$txhub" migrate 2>/dev/null

mkfifo "$dir/in"
"$endpoint" <"$dir/in" >"$dir/port" 2>"$dir/endpoint.log" &
exec 3>"$dir/in"
for _ in $(seq 1 50); do [ -s "$dir/port" ] && break; sleep 0.1; done
port=$(head -1 "$dir/port")

cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# CPU seconds of every hub thread that used at least 10 ms since it started
threads() {
  for t in /proc/$hub/task/*; do
    awk -v t="$ticks" -v what="$1" '{ c = ($14 + $15) / t; if (c >= 0.01)
      printf "bench: %s: thread %s CPU %.2f s\n", what, $2, c }' "$t/stat"
  done
}
ticks=$(getconf CLK_TCK)

echo "bench: writing $finished finished messages"
psql -qc "INSERT INTO txhub.messages (biz_id, message_key, status, send_status, payload,
  forward_topic, src_partition, src_offset)
  SELECT 'done', 'done-' || i, 'committed', 'sent', 'x', 'bench.out', i % 4, i
  FROM generate_series(1, $finished) i" >/dev/null
psql -qc "INSERT INTO txhub.messages (biz_id, message_key, status, payload, forward_topic,
  checkback_url, next_check_at, src_partition, src_offset)
  SELECT 'idle', 'idle-' || i, 'prepared', 'x', 'bench.out', 'http://127.0.0.1:$port/cb',
  now() + interval '1 day', i % 4, i FROM generate_series(1, 10000) i" >/dev/null
psql -qc "VACUUM ANALYZE txhub.messages" >/dev/null

kcat -b "$TXHUB_BROKERS" -t txhub.control -P </dev/null   # four partitions
"$txhub" run -X kafka.session.timeout.ms=6000 -X log.level=info ${TXHUB_BENCH_ARGS:-} \
  >"$dir/hub.log" 2>&1 &
hub=$!
for _ in $(seq 1 300); do grep -q "assigned" "$dir/hub.log" && break; sleep 0.1; done
sleep 2
c0=$(cpu_of $hub)
sleep 10
c1=$(cpu_of $hub)
threads "after the idle phase"
python3 -c "import sys; t=$c1-$c0; print(f'bench: idle with 10,000 prepares not due: hub CPU {t / $ticks * 1000:.0f} ms in 10 s ({t / $ticks / 10 * 100:.2f}% of one core)')"

due=$(psql -Atqc "SELECT extract(epoch FROM now() + interval '3 seconds')")
psql -qc "INSERT INTO txhub.messages (biz_id, message_key, status, payload, forward_topic,
  checkback_url, next_check_at, src_partition, src_offset)
  SELECT 'bench', 'm-' || i, 'prepared', 'x', 'bench.out', 'http://127.0.0.1:$port/cb',
  to_timestamp($due), i % 4, 1000000 + i FROM generate_series(1, $n) i" >/dev/null
c2=$(cpu_of $hub)
while [ "$(psql -Atqc "SELECT count(*) FROM txhub.messages WHERE biz_id = 'bench' AND status = 'prepared'")" != 0 ]; do
  sleep 0.2
done
c3=$(cpu_of $hub)
last=$(psql -Atqc "SELECT extract(epoch FROM max(updated_at)) FROM txhub.messages WHERE biz_id = 'bench'")
rss=$(awk '/VmHWM/ {print $2}' /proc/$hub/status)
python3 - "$n" "$due" "$last" "$((c3 - c2))" "$ticks" "$rss" <<'PY'
import sys
n, due, last, cpu, ticks, rss = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
took = last - due
print(f"bench: {n} check-backs due at once answered and written in {took:.2f} s: {n / took:,.0f} check-backs/s")
print(f"bench: hub CPU {cpu / ticks:.2f} s for them, peak resident memory {rss / 1024:.1f} MiB")
PY
threads "at the end"
psql -Atqc "SELECT 'bench: outcome ' || status || ': ' || count(*) FROM txhub.messages WHERE biz_id = 'bench' GROUP BY status ORDER BY status"
psql -Atqc "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) SELECT biz_id FROM unnest('{0,1,2,3}'::int[]) AS p(part) CROSS JOIN LATERAL (SELECT biz_id FROM txhub.messages WHERE status = 'prepared' AND src_partition = p.part AND next_check_at <= now() ORDER BY next_check_at LIMIT 16) c" \
  | grep -E "Index|Execution" | sed 's/^ */bench: due-row scan: /'
