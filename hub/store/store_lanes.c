/* store_lanes.c: forwards in exactly_once: sequencing, recovering what a
 * progress marker says, the failed sequences, the next run of a lane. */
#include "store.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "delay_sql.h"
#include "fold.h"
#include "log.h"
#include "rewind.h"
#include "rows_sql.h"
#include "rules.h"
#include "sbuf.h"
#include "sql.h"
#include "store_int.h"

/* ---- exactly_once forwarding ---- */

store_rc store_sequence_forwards(store *st, const owned_part *own, size_t nown, int limit,
                                 int lanes, store_forward_list *out, size_t *again, char *err,
                                 size_t errsz)
{
	/* Under the partitions' exclusive locks (the batch assigns sequences
	 * under them too), one statement: lock the rows, number them per
	 * partition from its counter, move the counter on. The sub-statements
	 * read the counters as they were when it began.
	 *
	 * A partition's sequences here lie between the one of the last offset
	 * applied (STORE_OFFSET_SEQ(next_offset - 1) = next_offset << SHIFT)
	 * and the one of the next (STORE_OFFSET_SEQ(next_offset)): every
	 * sequence is above those given before. The counter may be past that
	 * range (a progress marker of before a database loss raised it past
	 * what it said was forwarded, while the lost offsets are read again):
	 * the partition's rows then wait until the offsets catch up. Nothing is
	 * sequenced for a partition before its lane recovered at its epoch
	 * (fwd_recovered_epoch): a sequence given out before the lane read the
	 * marker could be one that the marker vouches for. A row prepared
	 * below what a lost history decided outside the control topic
	 * (fwd_lost_oob, migration 0008) may have gone out there: counted in
	 * *again.
	 *
	 * at_least_once (!lanes) has no lanes and no markers: every owned
	 * partition takes part, and a row sequenced here is the forwarder's at
	 * once, leased (next_send_at) as a claimed one is; the
	 * delivery mark then records its delivery, with no row write of its
	 * own. $6 lanes, $7 the lease (ms). */
	static const char *sql =
		"WITH b AS (SELECT tp.topic, tp.partition, greatest(tp.next_fwd_seq, "
		"(coalesce(tp.next_offset, 0) << $4::int) + 1) AS base, "
		"(coalesce(tp.next_offset, 0) + 1) << $4::int AS lim, tp.fwd_lost_oob >> $4::int AS lost "
		"FROM txhub.partitions tp JOIN unnest($1::text[], $2::int[]) AS o(t, p) "
		"ON tp.topic = o.t AND tp.partition = o.p "
		"WHERE NOT $6::bool OR tp.fwd_recovered_epoch = tp.epoch), "
		"l AS (SELECT m.biz_id, m.message_key, m.src_topic, m.src_partition, m.src_offset, "
		"m.updated_at FROM txhub.message_rows m WHERE m.send_status = 'pending' "
		"AND m.fwd_seq IS NULL "
		"AND m.src_partition IN (SELECT partition FROM b WHERE base < lim) "
		"AND (m.src_topic, m.src_partition) IN (SELECT topic, partition FROM b WHERE base < lim) "
		"AND m.next_send_at <= now() "
		"ORDER BY m.src_topic, m.src_partition, CASE WHEN $5::bool THEN m.src_offset END, "
		"m.updated_at LIMIT $3 FOR UPDATE SKIP LOCKED), "
		"n AS (SELECT l.biz_id, l.message_key, l.src_topic, l.src_partition, b.lim, "
		"coalesce(l.src_offset < b.lost, false) AS again, b.base - 1 + "
		"row_number() OVER (PARTITION BY l.src_topic, l.src_partition "
		"ORDER BY CASE WHEN $5::bool THEN l.src_offset END, l.updated_at, l.biz_id, "
		"l.message_key) AS sq "
		"FROM l JOIN b ON b.topic = l.src_topic AND b.partition = l.src_partition), "
		"k AS (SELECT * FROM n WHERE sq < lim), "
		"u AS (UPDATE txhub.message_rows AS m SET fwd_seq = k.sq, next_send_at = CASE WHEN "
		"$6::bool THEN m.next_send_at ELSE now() + $7::bigint * interval '1 millisecond' END "
		"FROM k "
		"WHERE m.biz_id = k.biz_id AND m.message_key = k.message_key "
		"RETURNING k.again, " FORWARD_COLUMNS ", m.last_error IS NOT NULL), "
		"c AS (UPDATE txhub.partitions AS tp SET next_fwd_seq = x.top + 1 "
		"FROM (SELECT src_topic, src_partition, max(sq) AS top FROM k "
		"GROUP BY src_topic, src_partition) x "
		"WHERE tp.topic = x.src_topic AND tp.partition = x.src_partition) "
		"SELECT * FROM u";
	*again = 0;
	if (nown == 0)
		return STORE_OK;
	owned_part *kept = NULL;
	size_t nkept = 0;
	sbuf tb = {0}, pb = {0};
	PGresult *r = NULL;
	size_t first = out->n; /* what collect_forwards adds comes after */
	store_rc rc = store_begin_locked(st, OWNED_EXCLUSIVE, own, nown, &kept, &nkept, err, errsz);
	if (rc != STORE_OK)
		goto done;
	char lim[16];
	snprintf(lim, sizeof lim, "%d", limit);
	store_owned_arrays(&tb, &pb, NULL, kept, nkept);
	char shift[8];
	snprintf(shift, sizeof shift, "%d", STORE_SEQ_SHIFT);
	char lease[32];
	snprintf(lease, sizeof lease, "%lld", (long long)st->lease_ms);
	const char *p[7] = {sbuf_str(&tb), sbuf_str(&pb), lim, shift, st->order_by_key ? "t" : "f",
	                    lanes ? "t" : "f", lease};
	r = store_exec_params(st, sql, 7, p, 1);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		rc = store_classify(st->conn, r, err, errsz);
	else
		rc = store_exec_simple(st, "COMMIT", err, errsz);
	if (rc != STORE_OK) {
		store_rollback(st);
	} else if (store_collect_forwards(r, 1, -1, out) != 0 && lanes) {
		/* sequenced: the owner's lane recovers them from PostgreSQL */
		snprintf(err, errsz, "out of memory");
		rc = STORE_RETRY;
	} else {
		/* at_least_once, out of memory copying: leased, sent again when
		 * their lease ends (store_claim_forwards); the marks of what was
		 * copied must not pass them (forward_send freezes them) */
		if ((size_t)PQntuples(r) != out->n - first)
			out->incomplete = 1;
		else
			for (size_t i = 0; i < out->n - first; i++)
				out->items[first + i].had_error = PQgetvalue(r, (int)i, 17)[0] != 0;
		for (int i = 0; i < PQntuples(r); i++)
			*again += PQgetvalue(r, i, 0)[0] != 0;
		if (!lanes && out->n > 1) /* in offset order per partition (forward.order = key) */
			qsort(out->items, out->n, sizeof *out->items, store_cmp_forward);
	}
done:
	PQclear(r);
	sbuf_free(&tb);
	sbuf_free(&pb);
	free(kept);
	return rc;
}

/* A version 2 marker of this database's lineage (its sequences derive from
 * offsets, so they mean the same in every history of the database): mark
 * the pending rows it says were forwarded sent, and note what it says in
 * the partition's row, for the rows that reading the control topic again
 * brings back (assign_seqs). The counter moves past its sequence: a
 * sequence the lost history gave out may not be given to another row.
 *
 * When the database never gave out the marker's sequence (its counter is
 * not past it), it lost transactions, and the history the marker speaks
 * of may have decided rows outside the control topic, which this one does
 * not know: only rows with offset sequences are taken for sent then, and
 * of the rows read again none from the offset the database stood at when
 * this owner took the partition (own->from) on, if that history sent or
 * failed such a row there (the marker's oob): noted as fwd_unsure_from,
 * and that oob in fwd_lost_oob: rows prepared below it and decided outside
 * the control topic again may go out twice (store_sequence_forwards
 * counts them). The take's offset, not the row's next_offset now: the
 * intake may have read the lost offsets again before the lane got here,
 * and the database's offset then says nothing of where it lost them.
 * sql_mark: $1 partition, $2 seq, $3 dead, $4 unsure_from, $5 topic, $6
 * STORE_SEQ_SHIFT, $7 oob, $8 from; sql_note: $1-$5 the same, $6 oob, $7
 * the lane's epoch, $8 STORE_SEQ_SHIFT, $9 from. */
static store_rc recover_v2(store *st, const char *topic, const char *part,
                           const owned_part *own, const store_marker *m, int64_t *marked,
                           char *err, size_t errsz)
{
#define BEHIND "(SELECT tp.next_fwd_seq <= $2::bigint FROM txhub.partitions tp " \
               "WHERE tp.topic = $5 AND tp.partition = $1::int)"
	static const char *sql_mark =
		"UPDATE txhub.message_rows SET send_status = 'sent', last_error = NULL, updated_at = now() "
		"WHERE src_partition = $1::int AND src_topic = $5 AND send_status = 'pending' "
		"AND fwd_seq <= $2::bigint AND fwd_seq > coalesce(" SQL_MARK_OF("$5", "$1::int") ", 0) "
		"AND NOT (fwd_seq = ANY($3::bigint[])) AND ($4::bigint IS NULL OR fwd_seq < $4::bigint) "
		"AND (NOT " BEHIND " OR (fwd_seq = (src_offset + 1) << $6::int "
		"AND ($7::bigint IS NULL OR $7::bigint < $8::bigint << $6::int "
		"OR fwd_seq < $8::bigint << $6::int)))";
	static const char *sql_note =
		"UPDATE txhub.partitions tp SET fwd_sent_upto = $2::bigint, fwd_dead = $3::bigint[], "
		"fwd_unsure_from = CASE WHEN tp.next_fwd_seq <= $2::bigint AND $6::bigint IS NOT NULL "
		"AND $6::bigint >= $9::bigint << $8::int "
		"THEN least($4::bigint, $9::bigint << $8::int) ELSE $4::bigint END, "
		"fwd_lost_oob = CASE WHEN tp.next_fwd_seq <= $2::bigint AND $6::bigint IS NOT NULL "
		"AND $6::bigint >= $9::bigint << $8::int "
		"THEN greatest(tp.fwd_lost_oob, $6::bigint) ELSE tp.fwd_lost_oob END, "
		"next_fwd_seq = greatest(tp.next_fwd_seq, $2::bigint + 1), fwd_recovered_epoch = $7 "
		"WHERE tp.topic = $5 AND tp.partition = $1::int";
#undef BEHIND
	char seq[32], unsure[32], oob[32], epoch[32], shift[8], from[32];
	sbuf db = {0};
	sbuf_arr_begin(&db);
	for (size_t i = 0; i < m->ndead; i++)
		sbuf_arr_int(&db, m->dead[i]);
	sbuf_arr_end(&db);
	snprintf(seq, sizeof seq, "%lld", (long long)m->seq);
	snprintf(unsure, sizeof unsure, "%lld", (long long)m->unsure_from);
	snprintf(oob, sizeof oob, "%lld", (long long)m->oob);
	snprintf(epoch, sizeof epoch, "%lld", (long long)own->epoch);
	snprintf(shift, sizeof shift, "%d", STORE_SEQ_SHIFT);
	snprintf(from, sizeof from, "%lld", (long long)own->from);
	const char *p[9] = {part, seq, sbuf_str(&db), m->unsure_from >= 0 ? unsure : NULL,
	                    topic, m->oob > 0 ? oob : NULL, epoch, shift, from};
	store_rc rc = db.oom ? STORE_RETRY : STORE_OK;
	if (rc != STORE_OK)
		snprintf(err, errsz, "out of memory");
	const char *pm[8] = {p[0], p[1], p[2], p[3], p[4], shift, p[5], from}; /* sql_mark's */
	PGresult *r = rc == STORE_OK ? store_exec_params(st, sql_mark, 8, pm, 0) : NULL;
	if (r && PQresultStatus(r) != PGRES_COMMAND_OK)
		rc = store_classify(st->conn, r, err, errsz);
	else if (r)
		*marked = atoll(PQcmdTuples(r));
	PQclear(r);
	if (rc == STORE_OK)
		rc = store_exec_command(st, sql_note, 9, p, err, errsz);
	sbuf_free(&db);
	return rc;
}

store_rc store_recover_forwards(store *st, const owned_part *own, const store_marker *m,
                                int64_t *marked, int *mismatch, char *origin_out, char *err,
                                size_t errsz)
{
	static const char *sql_origin =
		"SELECT fwd_origin FROM txhub.partitions WHERE topic = $1 AND partition = $2";
	static const char *sql_mark =
		"UPDATE txhub.message_rows SET send_status = 'sent', last_error = NULL, updated_at = now() "
		"WHERE src_partition = $1 AND src_topic = $5 AND send_status = 'pending' "
		"AND fwd_seq <= $2 AND fwd_seq > coalesce(" SQL_MARK_OF("$5", "$1::int") ", 0) "
		"AND EXISTS (SELECT 1 FROM txhub.message_rows x WHERE x.src_partition = $1 "
		"AND x.src_topic = $5 AND x.fwd_seq = $2 AND x.biz_id = $3 AND x.message_key = $4 "
		"AND x.send_status = 'pending')";
	static const char *sql_below =
		"SELECT count(*) FROM txhub.message_rows WHERE src_partition = $1 AND src_topic = $3 "
		"AND send_status = 'pending' AND fwd_seq <= $2 "
		"AND fwd_seq > coalesce(" SQL_MARK_OF("$3", "$1::int") ", 0)";
	owned_part *kept = NULL;
	size_t nkept = 0;
	PGresult *r = NULL;
	*marked = 0;
	*mismatch = 0;
	store_rc rc = store_begin_locked(st, OWNED_SHARED, own, 1, &kept, &nkept, err, errsz);
	if (rc != STORE_OK)
		goto done;
	if (nkept == 0) {
		snprintf(err, errsz, "partition %d of %s is owned by another replica now",
		         tp_part(own->tp), tp_topic(own->tp));
		rc = STORE_FENCED;
		store_rollback(st);
		goto done;
	}
	char part[16], seq[32];
	const char *topic = tp_topic(own->tp);
	snprintf(part, sizeof part, "%d", tp_part(own->tp));
	snprintf(seq, sizeof seq, "%lld", (long long)m->seq);
	const char *po[2] = {topic, part};
	r = store_exec_params(st, sql_origin, 2, po, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		rc = PQresultStatus(r) != PGRES_TUPLES_OK ? store_classify(st->conn, r, err, errsz) : STORE_RETRY;
		if (rc == STORE_RETRY && PQresultStatus(r) == PGRES_TUPLES_OK)
			snprintf(err, errsz, "partition %d of %s has no row in txhub.partitions",
			         tp_part(own->tp), topic);
		goto fail;
	}
	snprintf(origin_out, 64, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	r = NULL;
	if (m->seq > 0 && strcmp(origin_out, m->origin) != 0) {
		*mismatch = 1;
	} else if (m->seq > 0 && m->version >= 2) {
		if ((rc = recover_v2(st, topic, part, own, m, marked, err, errsz)) != STORE_OK)
			goto fail;
	} else if (m->seq > 0) {
		const char *p[5] = {part, seq, m->biz_id, m->message_key, topic};
		r = store_exec_params(st, sql_mark, 5, p, 0);
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			rc = store_classify(st->conn, r, err, errsz);
			goto fail;
		}
		*marked = atoll(PQcmdTuples(r));
		PQclear(r);
		r = NULL;
		if (*marked == 0) { /* pending rows below a marker that is not theirs? */
			const char *pb[3] = {part, seq, topic};
			r = store_exec_params(st, sql_below, 3, pb, 0);
			if (PQresultStatus(r) != PGRES_TUPLES_OK) {
				rc = store_classify(st->conn, r, err, errsz);
				goto fail;
			}
			*mismatch = atoll(PQgetvalue(r, 0, 0)) > 0;
			PQclear(r);
			r = NULL;
		}
	}
	if (m->seq == 0 || *mismatch || m->version < 2) {
		/* (recover_v2 notes it with the marker) */
		static const char *sql_recovered =
			"UPDATE txhub.partitions SET fwd_recovered_epoch = $3 "
			"WHERE topic = $1 AND partition = $2::int";
		char ep[32];
		snprintf(ep, sizeof ep, "%lld", (long long)own->epoch);
		const char *pr[3] = {topic, part, ep};
		if ((rc = store_exec_command(st, sql_recovered, 3, pr, err, errsz)) != STORE_OK)
			goto fail;
	}
	rc = store_exec_simple(st, "COMMIT", err, errsz);
	if (rc == STORE_OK)
		goto done;
fail:
	store_rollback(st);
done:
	PQclear(r);
	free(kept);
	return rc;
}

store_rc store_failed_seqs(store *st, tp_key tp, int64_t *out, size_t max, size_t *n,
                           char *err, size_t errsz)
{
	static const char *sql =
		"SELECT s FROM (SELECT (src_offset + 1) << $3::int AS s, fwd_seq, send_attempts "
		"FROM txhub.message_rows WHERE src_partition = $1::int AND src_topic = $4 "
		"AND send_status = 'failed' "
		"UNION ALL SELECT (src_offset + 1) << $3::int, fwd_seq, send_attempts "
		"FROM txhub.message_rows WHERE src_partition = $1::int AND src_topic = $4 "
		"AND send_status = 'pending' AND fwd_seq IS NULL "
		"UNION ALL SELECT (src_offset + 1) << $3::int, fwd_seq, send_attempts "
		"FROM txhub.message_rows WHERE src_partition = $1::int AND src_topic = $4 "
		"AND send_status = 'pending' AND fwd_seq > coalesce(" SQL_MARK_OF("$4", "$1::int") ", 0)) x "
		"WHERE send_attempts > 0 AND fwd_seq IS DISTINCT FROM s ORDER BY s DESC LIMIT $2";
	char part[16], lim[16], shift[8];
	snprintf(part, sizeof part, "%d", tp_part(tp));
	snprintf(lim, sizeof lim, "%zu", max);
	snprintf(shift, sizeof shift, "%d", STORE_SEQ_SHIFT);
	const char *p[4] = {part, lim, shift, tp_topic(tp)};
	*n = 0;
	PGresult *r = store_exec_params(st, sql, 4, p, 0);
	store_rc rc = STORE_OK;
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		rc = store_classify(st->conn, r, err, errsz);
	else
		for (int i = 0; i < PQntuples(r) && *n < max; i++)
			out[(*n)++] = atoll(PQgetvalue(r, i, 0));
	PQclear(r);
	return rc;
}

store_rc store_next_forwards(store *st, tp_key tp, int64_t after, int limit,
                             store_forward_list *out, char *err, size_t errsz)
{
	/* one statement, one snapshot: a batch's sequences are all visible or
	 * none, and batches of a partition commit in sequence order (under its
	 * lock), so no sequence below a visible one is still to come */
	static const char *sql =
		"SELECT " FORWARD_COLUMNS " FROM txhub.message_rows m WHERE m.src_partition = $1 "
		"AND m.src_topic = $4 AND m.send_status = 'pending' "
		"AND m.fwd_seq > greatest($2::bigint, " SQL_MARK_OF("$4", "$1::int") ") "
		"ORDER BY m.fwd_seq LIMIT $3";
	char part[16], seq[32], lim[16];
	snprintf(part, sizeof part, "%d", tp_part(tp));
	snprintf(seq, sizeof seq, "%lld", (long long)after);
	snprintf(lim, sizeof lim, "%d", limit);
	const char *p[4] = {part, seq, lim, tp_topic(tp)};
	PGresult *r = store_exec_params(st, sql, 4, p, 1);
	store_rc rc = STORE_OK;
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		rc = store_classify(st->conn, r, err, errsz);
	else if (store_collect_forwards(r, 0, -1, out) != 0) {
		snprintf(err, errsz, "out of memory");
		rc = STORE_RETRY;
	}
	PQclear(r);
	return rc;
}
