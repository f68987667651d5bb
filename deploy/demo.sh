#!/usr/bin/env bash
# The quick-start demo, run by `deploy/dev.sh demo` inside tests/with-services.sh
# (which exports TXHUB_PG, TXHUB_BROKERS and TXHUB_BIN). Sends a few
# transactions through a running hub and shows what happened.
set -euo pipefail
txhub=$TXHUB_BIN
log=$(mktemp /tmp/txhub-demo.XXXXXX.log)

echo "== txhub migrate"
"$txhub" migrate

echo "== txhub run   (log: $log)"
"$txhub" run -X kafka.session.timeout.ms=6000 -X checkback.first_after_ms=600000 >"$log" 2>&1 &
hub=$!
trap 'kill $hub 2>/dev/null; wait $hub 2>/dev/null' EXIT

send() { printf '%s\n' "$@" | kcat -b "$TXHUB_BROKERS" -t txhub.control -P -K '|'; }

echo "== a producer prepares three orders, commits one, rolls one back, and"
echo "   sends a one-shot commit; the third prepare waits for its decision"
send 'order-1|{"type":"prepare","biz_id":"shop","message_key":"order-1","payload":{"order":1,"total":"19.90"},"forward":{"topic":"orders","key":"customer-7","headers":{"source":"demo"}},"checkback":{"url":"http://127.0.0.1:8080/txhub/check"}}' \
     'order-2|{"type":"prepare","biz_id":"shop","message_key":"order-2","payload":{"order":2,"total":"5.00"},"forward":{"topic":"orders"}}' \
     'order-3|{"type":"prepare","biz_id":"shop","message_key":"order-3","payload":"plain text payload","forward":{"topic":"orders"}}'
send 'order-1|{"type":"commit","biz_id":"shop","message_key":"order-1"}' \
     'order-2|{"type":"rollback","biz_id":"shop","message_key":"order-2"}' \
     'order-4|{"type":"commit","biz_id":"shop","message_key":"order-4","payload":{"order":4},"forward":{"topic":"orders"}}' \
     'junk|this is not an envelope'

for _ in $(seq 1 150); do
  n=$(psql -Atqc "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'" 2>/dev/null || echo 0)
  [ "$n" = 2 ] && break
  sleep 0.2
done
if [ "$n" != 2 ]; then
  echo "demo: $n of the 2 committed messages forwarded after 30 s; the hub's log:" >&2
  tail -30 "$log" >&2
  exit 1
fi

echo
echo "== PostgreSQL: txhub.messages"
psql -qc "SELECT biz_id, message_key, status, send_status, convert_from(payload, 'UTF8') AS payload,
                 forward_topic FROM txhub.messages ORDER BY message_key"
echo "== PostgreSQL: txhub.rejected"
psql -qc "SELECT src_partition, src_offset, convert_from(record_value, 'UTF8') AS value, reason
          FROM txhub.rejected"
echo "== Kafka: the forward topic 'orders'"
kcat -b "$TXHUB_BROKERS" -t orders -C -e -q -f 'key=%k  headers=%h  value=%s\n'
echo
echo "== stopping the hub (SIGTERM drains and exits 0)"
kill -TERM $hub
wait $hub && echo "hub exited 0"
trap - EXIT
