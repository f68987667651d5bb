#!/usr/bin/env bash
# Benchmark, run by `deploy/dev.sh bench [N]` inside tests/with-services.sh.
# Pushes N prepare+commit pairs through the embedded broker and a local
# PostgreSQL, and prints end-to-end transactions per second (from the first
# envelope produced to the last forward marked sent) and the hub's peak
# resident memory. Not a test: nothing is asserted.
set -euo pipefail
n=${1:-50000}
txhub=$TXHUB_BIN
dir=$(mktemp -d /tmp/txhub-bench.XXXXXX)
trap 'kill $hub 2>/dev/null; wait $hub 2>/dev/null; rm -rf "$dir"' EXIT

psql -qc "CREATE DATABASE bench" >/dev/null
export TXHUB_PG="$TXHUB_PG dbname=bench" PGDATABASE=bench
"$txhub" migrate 2>/dev/null

python3 - "$n" >"$dir/envelopes" <<'PY'
import sys
n = int(sys.argv[1])
out = sys.stdout
for i in range(n):
    k = f"order-{i:08d}"
    out.write(f'{k}|{{"type":"prepare","biz_id":"bench","message_key":"{k}",'
              f'"payload":{{"order":{i},"amount":"12.50","customer":"c-{i % 977}"}},'
              f'"forward":{{"topic":"bench.orders","key":"{k}"}}}}\n')
for i in range(n):
    k = f"order-{i:08d}"
    out.write(f'{k}|{{"type":"commit","biz_id":"bench","message_key":"{k}"}}\n')
PY

# four control partitions, like a small production topic
kcat -b "$TXHUB_BROKERS" -t txhub.control -P -K '|' </dev/null
"$txhub" run -X kafka.session.timeout.ms=6000 -X log.level=info ${TXHUB_BENCH_ARGS:-} >"$dir/hub.log" 2>&1 &
hub=$!
for _ in $(seq 1 300); do grep -q "assigned" "$dir/hub.log" && break; sleep 0.1; done

start=$(date +%s.%N)
kcat -b "$TXHUB_BROKERS" -t txhub.control -P -K '|' -X linger.ms=20 -l "$dir/envelopes"
produced=$(date +%s.%N)
while :; do
  sent=$(psql -Atqc "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'")
  [ "$sent" -ge "$n" ] && break
  sleep 0.2
done
end=$(date +%s.%N)
rss=$(awk '/VmHWM/ {print $2}' /proc/$hub/status)
cpu=$(awk '{print ($14 + $15) / 100}' /proc/$hub/stat)
python3 - "$n" "$start" "$produced" "$end" "$rss" "$cpu" <<'PY'
import sys
n, start, produced, end, rss, cpu = int(sys.argv[1]), *map(float, sys.argv[2:])
print(f"bench: {n} transactions ({2 * n} envelopes) in {end - start:.2f} s end to end")
print(f"bench: producing the envelopes took {produced - start:.2f} s")
print(f"bench: {n / (end - start):,.0f} transactions/s, {2 * n / (end - start):,.0f} envelopes/s")
print(f"bench: hub peak resident memory {rss / 1024:.1f} MiB, CPU {cpu:.2f} s")
PY
