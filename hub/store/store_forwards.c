/* store_forwards.c: forwards in at_least_once: claiming due ones,
 * releasing, recording deliveries against the marks. */
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

/* ---- forwards ---- */

/* store_claim_forwards, and with overdue_ms: the rows without a sequence
 * only once due that long (-1: none of them) */
static store_rc claim_forwards(store *st, const owned_part *own, size_t nown, int limit,
                               int64_t overdue_ms, store_forward_list *out, char *err,
                               size_t errsz)
{
	/* Rows without a sequence on messages_send_retry; sequenced rows whose
	 * lease ran out (a forward list lost to a failed allocation) on the range
	 * of messages_fwd_seq above each partition's mark, short as it holds only
	 * what is in flight. */
	static const char *sql =
		"UPDATE txhub.message_rows AS m SET next_send_at = now() + $4::bigint * interval "
		"'1 millisecond' FROM (SELECT * FROM (SELECT biz_id, message_key "
		"FROM txhub.message_rows WHERE send_status = 'pending' AND fwd_seq IS NULL "
		"AND " OF_PARTS("", "$1", "$2") " AND $5::bigint >= 0 "
		"AND next_send_at <= now() - $5::bigint * interval '1 millisecond' "
		"ORDER BY src_partition, next_send_at LIMIT $3 FOR UPDATE SKIP LOCKED) a "
		"UNION ALL SELECT b.biz_id, b.message_key FROM unnest($1::text[], $2::int[]) AS o(t, p) "
		"CROSS JOIN LATERAL (SELECT biz_id, message_key FROM txhub.message_rows r "
		"WHERE r.src_partition = o.p AND r.src_topic = o.t AND r.send_status = 'pending' "
		"AND r.fwd_seq > coalesce(" SQL_MARK_OF("o.t", "o.p") ", 0) AND r.next_send_at <= now() "
		"ORDER BY r.fwd_seq LIMIT $3 FOR UPDATE SKIP LOCKED) b LIMIT $3) d "
		"WHERE m.biz_id = d.biz_id AND m.message_key = d.message_key "
		"RETURNING " FORWARD_COLUMNS;
	if (nown == 0)
		return STORE_OK;
	char lim[16], lease[32], overdue[32];
	snprintf(lim, sizeof lim, "%d", limit);
	snprintf(lease, sizeof lease, "%lld", (long long)st->lease_ms);
	snprintf(overdue, sizeof overdue, "%lld", (long long)overdue_ms);
	const char *p[3] = {lim, lease, overdue};
	PGresult *r;
	size_t nkept;
	store_rc rc = store_run_owned(st, own, nown, sql, p, 3, 1, &r, &nkept, err, errsz);
	if (rc == STORE_OK && store_collect_forwards(r, 0, -1, out) != 0) {
		/* leased: they fall due again when the lease ends */
		snprintf(err, errsz, "out of memory");
		rc = STORE_RETRY;
	} else if (rc == STORE_OK && out->n > 1) { /* qsort must not see a NULL base */
		qsort(out->items, out->n, sizeof *out->items, store_cmp_forward);
	}
	PQclear(r);
	return rc;
}

store_rc store_claim_forwards(store *st, const owned_part *own, size_t nown, int limit,
                              store_forward_list *out, char *err, size_t errsz)
{
	return claim_forwards(st, own, nown, limit, 0, out, err, errsz);
}

store_rc store_claim_lost_forwards(store *st, const owned_part *own, size_t nown, int limit,
                                   int64_t overdue_ms, store_forward_list *out, char *err,
                                   size_t errsz)
{
	return claim_forwards(st, own, nown, limit, overdue_ms, out, err, errsz);
}

store_rc store_next_send_due(store *st, const owned_part *own, size_t nown, int64_t *in_ms,
                             char *err, size_t errsz)
{
	static const char *sql =
		"SELECT CASE WHEN min(x.at) IS NULL THEN -1 ELSE greatest(0, ceil(extract(epoch FROM "
		"min(x.at) - now()) * 1000)) END::bigint FROM (SELECT DISTINCT n FROM "
		"unnest($1::int[]) AS n) p CROSS JOIN LATERAL (SELECT next_send_at AS at "
		"FROM txhub.message_rows WHERE src_partition = p.n AND send_status = 'pending' "
		"AND fwd_seq IS NULL AND next_send_at < 'infinity' " /* not held for order */
		"ORDER BY next_send_at LIMIT 1) x";
	*in_ms = -1;
	if (nown == 0)
		return STORE_OK;
	sbuf tb = {0}, pb = {0};
	store_owned_arrays(&tb, &pb, NULL, own, nown);
	const char *p[1] = {sbuf_str(&pb)};
	PGresult *r = pb.oom ? NULL : store_exec_params(st, sql, 1, p, 0);
	store_rc rc = STORE_OK;
	if (!r) {
		snprintf(err, errsz, "out of memory");
		rc = STORE_RETRY;
	} else if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		rc = store_classify(st->conn, r, err, errsz);
	} else {
		*in_ms = atoll(PQgetvalue(r, 0, 0));
	}
	PQclear(r);
	sbuf_free(&tb);
	sbuf_free(&pb);
	return rc;
}

store_rc store_release_forwards(store *st, const owned_part *own, size_t nown, int clear_seqs,
                                char *err, size_t errsz)
{
	/* only the leases of the previous owners: a row this replica leased
	 * itself (updated by a batch after it took the partition) is in its
	 * producer, and releasing it would send it twice. Two statements, one
	 * per index: the rows without a sequence, and those above the mark. */
	static const char *sql_unsequenced =
		"UPDATE txhub.message_rows AS m SET next_send_at = now() FROM txhub.partitions p "
		"WHERE p.topic = m.src_topic AND p.partition = m.src_partition "
		"AND m.send_status = 'pending' AND m.fwd_seq IS NULL AND " OF_PARTS("m.", "$1", "$2") " "
		"AND m.send_attempts = 0 AND m.next_send_at > now() AND m.updated_at < p.taken_at "
		"AND m.next_send_at < 'infinity' " /* held for order: released by their key */
		"AND (m.not_before IS NULL OR m.not_before <= now())"; /* not a scheduled one */
	static const char *sql_sequenced =
		"UPDATE txhub.message_rows AS m SET next_send_at = now(), "
		"fwd_seq = CASE WHEN $3::bool THEN NULL ELSE m.fwd_seq END "
		"FROM (SELECT tp.topic, tp.partition, tp.taken_at, coalesce("
		SQL_MARK_OF("tp.topic", "tp.partition") ", 0) AS mark FROM txhub.partitions tp "
		"JOIN unnest($1::text[], $2::int[]) AS o(t, p) ON tp.topic = o.t AND tp.partition = o.p) p "
		"WHERE m.src_partition = p.partition AND m.src_topic = p.topic "
		"AND m.send_status = 'pending' "
		/* at_least_once ($3) gives retries sequences too (a due scan): a
		 * retry an earlier owner had in flight is released as well, or this
		 * owner's later deliveries would move the mark past it unsent */
		"AND m.fwd_seq > p.mark AND (m.send_attempts = 0 OR $3::bool) "
		"AND m.updated_at < p.taken_at AND (m.next_send_at > now() OR $3::bool)";
	if (nown == 0)
		return STORE_OK;
	owned_part *kept = NULL;
	size_t nkept = 0;
	sbuf tb = {0}, pb = {0};
	store_rc rc = store_begin_owned(st, own, nown, &kept, &nkept, err, errsz);
	if (rc != STORE_OK)
		goto done;
	store_owned_arrays(&tb, &pb, NULL, kept, nkept);
	const char *p[3] = {sbuf_str(&tb), sbuf_str(&pb), clear_seqs ? "t" : "f"};
	rc = store_exec_command(st, sql_unsequenced, 2, p, err, errsz);
	if (rc == STORE_OK)
		rc = store_exec_command(st, sql_sequenced, 3, p, err, errsz);
	if (rc == STORE_OK)
		rc = store_exec_simple(st, "COMMIT", err, errsz);
	if (rc != STORE_OK)
		store_rollback(st);
done:
	sbuf_free(&tb);
	sbuf_free(&pb);
	free(kept);
	return rc;
}

/* The reports d[0..n) of partitions still kept, as array parameters: ok
 * (delivered without a sequence: biz ids, keys), bad (failed: biz ids,
 * keys, errors, retry delays) and rq (requeued or held: biz ids, keys,
 * held). Returns how many were dropped for a partition no longer ours. */
static size_t sort_reports(const store_delivery *d, size_t n, const owned_part *kept,
                           size_t nkept, sbuf ok[2], sbuf bad[4], sbuf rq[3], size_t *nok,
                           size_t *nbad, size_t *nrq)
{
	size_t dropped = 0;
	for (int i = 0; i < 2; i++)
		sbuf_arr_begin(&ok[i]);
	for (int i = 0; i < 4; i++)
		sbuf_arr_begin(&bad[i]);
	for (int i = 0; i < 3; i++)
		sbuf_arr_begin(&rq[i]);
	for (size_t i = 0; i < n; i++) {
		if (store_epoch_of(kept, nkept, d[i].tp) == 0) {
			dropped++; /* the partition's new owner sends it again */
			continue;
		}
		if (d[i].requeue || d[i].hold) {
			sbuf_arr_text(&rq[0], d[i].biz_id);
			sbuf_arr_text(&rq[1], d[i].message_key);
			sbuf_arr_text(&rq[2], d[i].hold ? "t" : "f");
			(*nrq)++;
		} else if (d[i].ok && d[i].fwd_seq > 0) {
			continue; /* the mark says it */
		} else if (d[i].ok) {
			sbuf_arr_text(&ok[0], d[i].biz_id);
			sbuf_arr_text(&ok[1], d[i].message_key);
			(*nok)++;
		} else {
			sbuf_arr_text(&bad[0], d[i].biz_id);
			sbuf_arr_text(&bad[1], d[i].message_key);
			sbuf_arr_text(&bad[2], d[i].error);
			sbuf_arr_int(&bad[3], d[i].retry_in_ms);
			(*nbad)++;
		}
	}
	for (int i = 0; i < 2; i++)
		sbuf_arr_end(&ok[i]);
	for (int i = 0; i < 4; i++)
		sbuf_arr_end(&bad[i]);
	for (int i = 0; i < 3; i++)
		sbuf_arr_end(&rq[i]);
	return dropped;
}

/* Move the partitions' delivery marks to marks[0..nmarks), never back, for
 * the partitions kept (kt, kb: their topics and partitions). */
static store_rc write_marks(store *st, const store_mark *marks, size_t nmarks, sbuf *kt,
                            sbuf *kb, char *err, size_t errsz)
{
	/* never back; a partition no longer ours is left to its new owner */
	static const char *sql_marks =
		"INSERT INTO txhub.forward_marks AS f (topic, partition, upto) "
		"SELECT x.t, x.p, x.u FROM unnest($1::text[], $2::int[], $3::bigint[]) AS x(t, p, u) "
		"WHERE (x.t, x.p) IN (SELECT * FROM unnest($4::text[], $5::int[])) ORDER BY x.t, x.p "
		"ON CONFLICT (topic, partition) DO UPDATE SET upto = EXCLUDED.upto, updated_at = now() "
		"WHERE f.upto < EXCLUDED.upto";
	sbuf mk[3] = {{0}};
	for (int i = 0; i < 3; i++)
		sbuf_arr_begin(&mk[i]);
	for (size_t i = 0; i < nmarks; i++) {
		sbuf_arr_text(&mk[0], tp_topic(marks[i].tp));
		sbuf_arr_int(&mk[1], tp_part(marks[i].tp));
		sbuf_arr_int(&mk[2], marks[i].upto);
	}
	for (int i = 0; i < 3; i++)
		sbuf_arr_end(&mk[i]);
	const char *p[5] = {sbuf_str(&mk[0]), sbuf_str(&mk[1]), sbuf_str(&mk[2]), sbuf_str(kt),
	                    sbuf_str(kb)};
	store_rc rc = store_arrays_ok(mk, 3, err, errsz);
	if (rc == STORE_OK)
		rc = store_exec_command(st, sql_marks, 5, p, err, errsz);
	for (int i = 0; i < 3; i++)
		sbuf_free(&mk[i]);
	return rc;
}

store_rc store_record_deliveries(store *st, const owned_part *own, size_t nown,
                                 const store_delivery *d, size_t n, int max_attempts,
                                 const store_mark *marks, size_t nmarks,
                                 store_forward_list *failed_out, char *err, size_t errsz)
{
	/* The rows are locked in key order first (the sub-selects), the order
	 * the batch and the check-back answers lock in: reports are written on
	 * a connection of their own beside those, and never deadlock with
	 * them. (The update finds each row again by its key, not by the locked
	 * version's ctid: a version committed after the statement's snapshot
	 * would not be seen by ctid, and its report would be lost.) */
	static const char *sql_sent =
		"UPDATE txhub.message_rows AS m SET send_status = 'sent', last_error = NULL, updated_at = now() "
		"FROM (SELECT y.b, y.k FROM unnest($1::text[], $2::text[]) AS y(b, k) "
		"JOIN txhub.message_rows t ON t.biz_id = y.b AND t.message_key = y.k "
		"ORDER BY t.biz_id, t.message_key FOR UPDATE OF t) x "
		"WHERE m.biz_id = x.b AND m.message_key = x.k AND m.send_status = 'pending' "
		"AND " OF_PARTS("m.", "$3", "$4");
	static const char *sql_failed =
		"UPDATE txhub.message_rows AS m SET send_attempts = m.send_attempts + 1, "
		"last_error = x.e, updated_at = now(), "
		"send_status = CASE WHEN m.send_attempts + 1 >= $5::int THEN 'failed' "
		"ELSE 'pending' END, "
		/* a new park is dead-lettered again (deadletter.h) */
		"dead_lettered_at = CASE WHEN m.send_attempts + 1 >= $5::int THEN NULL "
		"ELSE m.dead_lettered_at END, "
		"next_send_at = now() + x.ms * interval '1 millisecond', "
		"fwd_seq = NULL "
		"FROM (SELECT y.* FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) "
		"AS y(b, k, e, ms) JOIN txhub.message_rows t ON t.biz_id = y.b AND t.message_key = y.k "
		"ORDER BY t.biz_id, t.message_key FOR UPDATE OF t) x "
		"WHERE m.biz_id = x.b AND m.message_key = x.k AND m.send_status = 'pending' "
		"AND " OF_PARTS("m.", "$7", "$6") " "
		"RETURNING m.send_status = 'failed' AS gave_up, " FORWARD_COLUMNS ", x.e AS error";
	/* each failed attempt and each send_failed alert go to the history in
	 * the same statement; the rows come back as above (error last) */
	static const char *sql_failed_history =
		"WITH upd AS (%s), h AS (INSERT INTO txhub.history (biz_id, message_key, event, "
		"detail, tenant) SELECT biz_id, message_key, 'forward_failed', 'attempt ' || "
		"send_attempts || ': ' || error, tenant FROM upd UNION ALL SELECT biz_id, message_key, "
		"'alert', 'send_failed after ' || send_attempts || ' attempt(s): ' || error, tenant "
		"FROM upd WHERE gave_up) SELECT * FROM upd";
	/* requeued: due now; held (forward.order = key): due when released */
	static const char *sql_requeue =
		"UPDATE txhub.message_rows AS m SET fwd_seq = NULL, next_send_at = CASE WHEN x.h "
		"THEN 'infinity'::timestamptz ELSE now() END "
		"FROM (SELECT y.b, y.k, y.h FROM unnest($1::text[], $2::text[], $5::bool[]) AS y(b, k, h) "
		"JOIN txhub.message_rows t ON t.biz_id = y.b AND t.message_key = y.k "
		"ORDER BY t.biz_id, t.message_key FOR UPDATE OF t) x "
		"WHERE m.biz_id = x.b AND m.message_key = x.k AND m.send_status = 'pending' "
		"AND " OF_PARTS("m.", "$3", "$4");
	sbuf ok[2] = {{0}}, bad[4] = {{0}}, rq[3] = {{0}}, kt = {0}, kb = {0};
	size_t nok = 0, nbad = 0, nrq = 0, nkept = 0, dropped = 0;
	store_rc rc = STORE_OK;
	PGresult *r = NULL;
	owned_part *kept = NULL;
	if ((rc = store_begin_locked(st, OWNED_CHECK_ONLY, own, nown, &kept, &nkept, err, errsz)) !=
	    STORE_OK)
		goto done;
	/* a row counts for the partition it belongs to now, not the one the
	 * report remembers */
	store_owned_arrays(&kt, &kb, NULL, kept, nkept);
	char maxs[16];
	snprintf(maxs, sizeof maxs, "%d", max_attempts);
	dropped = sort_reports(d, n, kept, nkept, ok, bad, rq, &nok, &nbad, &nrq);
	if (dropped > 0)
		log_warn("store: %zu delivery report(s) dropped: their partitions belong to another "
		         "replica now", dropped);
	if (nok > 0) {
		const char *p[4] = {sbuf_str(&ok[0]), sbuf_str(&ok[1]), sbuf_str(&kt), sbuf_str(&kb)};
		r = store_exec_params(st, sql_sent, 4, p, 0);
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			rc = store_classify(st->conn, r, err, errsz);
			goto done;
		}
		PQclear(r);
		r = NULL;
	}
	if (nrq > 0) {
		const char *p[5] = {sbuf_str(&rq[0]), sbuf_str(&rq[1]), sbuf_str(&kt), sbuf_str(&kb),
		                    sbuf_str(&rq[2])};
		if ((rc = store_exec_command(st, sql_requeue, 5, p, err, errsz)) != STORE_OK)
			goto done;
	}
	if (nmarks > 0 && (rc = write_marks(st, marks, nmarks, &kt, &kb, err, errsz)) != STORE_OK)
		goto done;
	if (nbad > 0) {
		const char *p[7] = {sbuf_str(&bad[0]), sbuf_str(&bad[1]), sbuf_str(&bad[2]),
		                    sbuf_str(&bad[3]), maxs, sbuf_str(&kb), sbuf_str(&kt)};
		char sql[4096];
		snprintf(sql, sizeof sql, sql_failed_history, sql_failed);
		r = store_exec_params(st, sql, 7, p, 1);
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			rc = store_classify(st->conn, r, err, errsz);
			goto done;
		}
	}
	if ((rc = store_exec_simple(st, "COMMIT", err, errsz)) != STORE_OK)
		goto done;
	if (r && failed_out && store_collect_forwards(r, 1, 0, failed_out) != 0)
		log_error("store: out of memory listing failed forwards");
done:
	if (rc != STORE_OK)
		store_rollback(st);
	PQclear(r);
	for (int i = 0; i < 2; i++)
		sbuf_free(&ok[i]);
	for (int i = 0; i < 4; i++)
		sbuf_free(&bad[i]);
	for (int i = 0; i < 3; i++)
		sbuf_free(&rq[i]);
	sbuf_free(&kt);
	sbuf_free(&kb);
	free(kept);
	return rc;
}
