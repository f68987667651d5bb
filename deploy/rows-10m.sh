#!/usr/bin/env bash
# A scratch database of N messages (default 10 million) as a hub that ran for two
# weeks leaves it, to look at the plans of the operators' and the hub's queries
# (docs/architecture.md: Storage). Works on a 0.4-0.5 schema (txhub.messages a table: delivered
# rows stored 'sent') and on migration 0012's (txhub.message_rows: delivered rows
# 'pending' at or below their partition's mark), so both can be compared.
#
#   deploy/rows-10m.sh TXHUB_BINARY CONNINFO [N]
#
# CONNINFO names a database that exists and is empty (`txhub migrate` is run on
# it). The rows, per 10,000: 8,800 committed and sent, 1,000 rolled back, 30
# prepared (due over the next hour), 5 check_failed, 5 awaiting_prepare, 5
# committed with send_status failed, 5 waiting for a retry; the last 4,000
# committed rows are in flight (pending, not yet delivered). 8 partitions, every
# third row of tenant team-a, updated_at spread over the last 14 days.
set -euo pipefail
txhub=$1
pg=$2
n=${3:-10000000}
"$txhub" migrate -X pg="$pg" >/dev/null
q() { psql "$pg" -v ON_ERROR_STOP=1 -qAtc "$1"; }
if [ "$(q "SELECT to_regclass('txhub.message_rows') IS NOT NULL")" = t ]; then
  table=txhub.message_rows sent=pending
else
  table=txhub.messages sent=sent
fi
echo "rows-10m: $n rows into $table" >&2
step=1000000
for ((from = 1; from <= n; from += step)); do
  to=$((from + step - 1)); [ "$to" -gt "$n" ] && to=$n
  q "INSERT INTO $table (biz_id, message_key, status, send_status, payload, forward_topic,
       forward_key, checkback_url, check_attempts, next_check_at, send_attempts, next_send_at,
       last_error, src_partition, src_offset, created_at, updated_at, fwd_seq, tenant)
     SELECT 'shop' || (i % 100), 'o-' || i, s.status,
       CASE WHEN s.status <> 'committed' THEN NULL WHEN s.r >= 9840 AND s.r < 9845 THEN 'failed'
            WHEN s.r >= 9845 AND s.r < 9850 OR i > $n - 4000 THEN 'pending' ELSE '$sent' END,
       decode(repeat('ab', 100), 'hex'), 'orders', 'k' || i, 'http://shop.example/check',
       CASE WHEN s.status = 'check_failed' THEN 15 ELSE 0 END,
       CASE WHEN s.status = 'prepared' THEN now() + (i % 3600) * interval '1 s' END,
       CASE WHEN s.r >= 9840 AND s.r < 9850 THEN 3 ELSE 0 END,
       CASE WHEN s.status = 'committed' THEN now() + (i % 600) * interval '1 s' - interval '5 min' END,
       CASE WHEN s.r >= 9835 AND s.r < 9850 THEN 'broker said no' END,
       i % 8, i / 8, t.at - interval '1 ms', t.at,
       CASE WHEN s.status = 'committed' AND NOT (s.r >= 9840 AND s.r < 9850)
            THEN ((i / 8) + 1) << 20 END,
       CASE WHEN i % 3 = 0 THEN 'team-a' END
     FROM generate_series($from, $to) i,
       LATERAL (SELECT i % 10000 AS r) x,
       LATERAL (SELECT x.r, CASE WHEN x.r < 8800 THEN 'committed' WHEN x.r < 9800 THEN 'rolled_back'
                  WHEN x.r < 9830 THEN 'prepared' WHEN x.r < 9835 THEN 'check_failed'
                  WHEN x.r < 9840 THEN 'awaiting_prepare' ELSE 'committed' END AS status) s,
       LATERAL (SELECT now() - ($n - i) * interval '120 ms' AS at) t"
  echo "rows-10m: $to" >&2
done
if [ "$table" = txhub.message_rows ]; then
  # each partition's mark: below its rows in flight
  q "INSERT INTO txhub.forward_marks (topic, partition, upto)
     SELECT 'txhub.control', src_partition, max(fwd_seq) FROM txhub.message_rows
     WHERE status = 'committed' AND send_status = 'pending' AND fwd_seq IS NOT NULL
       AND src_offset < ($n - 4000) / 8 GROUP BY src_partition"
fi
q "INSERT INTO txhub.tenants (name, control_topics, biz_ids, forward_topics)
   VALUES ('team-a', '{txhub.control}', '{shop*}', '{orders}') ON CONFLICT DO NOTHING"
q "INSERT INTO txhub.partitions (topic, partition, epoch, owner, next_offset)
   SELECT 'txhub.control', p, 1, 'rows-10m', $n / 8 + 1 FROM generate_series(0, 7) p
   ON CONFLICT DO NOTHING"
psql "$pg" -qc "VACUUM (ANALYZE) $table" >/dev/null
echo "rows-10m: done" >&2
