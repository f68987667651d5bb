/* rows_sql.h: SQL pieces about txhub.message_rows and the delivery marks
 * (migration 0012), shared by the store and the operators' reads, so that every
 * query says "delivered by the mark" in the same words as the txhub.messages
 * view.
 *
 * A committed row stays send_status 'pending' in txhub.message_rows when it
 * is delivered: its partition's mark (txhub.forward_marks.upto) moves past its
 * forward sequence instead. So "pending" as operators mean it is the rows
 * without a sequence (found on messages_send_retry) plus, per partition, the
 * range of messages_fwd_seq above the mark; "sent" is a stored 'sent' or a
 * 'pending' row at or below the mark. */
#ifndef TXHUB_ROWS_SQL_H
#define TXHUB_ROWS_SQL_H

/* The delivery mark of control topic t, partition p (SQL expressions; null:
 * none yet). */
#define SQL_MARK_OF(t, p)                                                         \
	"(SELECT f.upto FROM txhub.forward_marks f WHERE f.topic = " t " AND f.partition = " p ")"

/* Whether row alias r (of txhub.message_rows) was delivered by its mark. */
#define SQL_MARKED(r)                                                             \
	"(" r ".send_status = 'pending' AND " r ".fwd_seq <= "                        \
	SQL_MARK_OF(r ".src_topic", r ".src_partition") ")"

/* send_status as txhub.messages shows it. */
#define SQL_SEND_STATUS(r) \
	"CASE WHEN " SQL_MARKED(r) " THEN 'sent' ELSE " r ".send_status END"

/* The lowest mark of the topics with partition number p (0: none): where
 * that partition number's range of messages_fwd_seq (src_partition,
 * fwd_seq) to look at begins. */
#define SQL_LOWEST_MARK(p) \
	"coalesce((SELECT min(f.upto) FROM txhub.forward_marks f WHERE f.partition = " p "), 0)"

/* The partition numbers that hold pending rows, found by skipping through
 * messages_fwd_seq (one probe per partition), each with the lowest mark of
 * its topics: a recursive CTE named pend_parts(p, lo), to follow WITH
 * RECURSIVE. */
#define SQL_PENDING_PARTS                                                                   \
	"pend_seen(p) AS (SELECT min(src_partition) FROM txhub.message_rows "                  \
	"WHERE send_status = 'pending' UNION ALL SELECT (SELECT min(src_partition) "           \
	"FROM txhub.message_rows WHERE send_status = 'pending' AND src_partition > pend_seen.p) " \
	"FROM pend_seen WHERE pend_seen.p IS NOT NULL), "                                      \
	"pend_parts(p, lo) AS MATERIALIZED (SELECT p, " SQL_LOWEST_MARK("p") " FROM pend_seen " \
	"WHERE p IS NOT NULL)"

/* The rows operators see as pending, with the columns cols of r (alias r
 * in both branches): those waiting for an attempt of their own, and per
 * partition number those above their topic's mark (the range from the
 * lowest mark of the topics sharing the number; OFFSET 0 keeps it a range
 * scan per partition, never a join over the whole index). Needs
 * SQL_PENDING_PARTS in the WITH. */
#define SQL_PENDING_ROWS(cols)                                                              \
	"SELECT " cols " FROM txhub.message_rows r WHERE r.send_status = 'pending' "           \
	"AND r.fwd_seq IS NULL UNION ALL SELECT " cols " FROM pend_parts CROSS JOIN LATERAL "  \
	"(SELECT * FROM txhub.message_rows x WHERE x.src_partition = pend_parts.p "            \
	"AND x.send_status = 'pending' AND x.fwd_seq > pend_parts.lo "                         \
	"AND NOT coalesce(" SQL_MARKED("x") ", false) OFFSET 0) r"

/* A recursive CTE seen_<status>(p): every partition number with rows of
 * status (committed or rolled_back), found by skipping through the status's
 * index (src_partition, updated_at), one probe per partition, instead of
 * reading the table; it ends with a null. */
#define SQL_SEEN_PARTITIONS(status)                                                        \
	"seen_" status "(p) AS (SELECT min(src_partition) FROM txhub.message_rows "            \
	"WHERE status = '" status "' UNION ALL SELECT (SELECT min(src_partition) "             \
	"FROM txhub.message_rows WHERE status = '" status "' AND src_partition > seen_" status \
	".p) FROM seen_" status " WHERE seen_" status ".p IS NOT NULL)"

#endif
