/* store_apply.c: store_apply(), a batch in one transaction: the partitions it
 * touches fenced and their offsets moved, the keys read under lock, the
 * fold run (fold.c), forward sequences given (see store.c for why batches
 * look the way they do). */
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

/* ---- store_apply ----
 *
 * Its steps, each a helper below: lock the batch's partitions (fence_batch),
 * read and lock the batch's keys into the fold (read_current,
 * read_first_prepares), fold_run(), then write what the fold decided
 * (store_write_messages, store_write_conflicts, store_write_rejected, store_offsets). */

/* Each key by the primary key, in key order (the order every transaction
 * locks in); OFFSET 0: a join would read a young table whole, its
 * statistics behind the rows just written (issue 22's drain). */
static const char *SQL_LOCK =
	"SELECT m.biz_id, m.message_key, m.status, m.decision, m.tenant "
	"FROM (SELECT * FROM unnest($1::text[], $2::text[]) AS u(b, k) ORDER BY b, k) x "
	"CROSS JOIN LATERAL (SELECT r.biz_id, r.message_key, r.status, r.decision, r.tenant "
	"FROM txhub.message_rows r WHERE r.biz_id = x.b AND r.message_key = x.k "
	"OFFSET 0 FOR UPDATE) m ORDER BY m.biz_id, m.message_key";

static const char *SQL_FIRST_PREPARE =
	"SELECT m.biz_id, m.message_key, m.payload, m.forward_topic, m.forward_key "
	"FROM txhub.message_rows m JOIN unnest($1::text[], $2::text[]) AS x(b, k) "
	"ON m.biz_id = x.b AND m.message_key = x.k";

/* In one transaction: lock the owned partitions (shared), run sql with $1
 * and $2 the topics and partitions of those still ours and $3.. the extra
 * parameters, and commit. On STORE_OK *res holds sql's rows (caller
 * clears) and *nkept how many partitions were still ours. fmt: 0 text
 * results, 1 binary. */
store_rc store_run_owned(store *st, const owned_part *own, size_t nown, const char *sql,
                          const char *const *extra, int nextra, int fmt, PGresult **res,
                          size_t *nkept, char *err, size_t errsz)
{
	owned_part *kept = NULL;
	sbuf tb = {0}, pb = {0};
	const char *p[8];
	*res = NULL;
	store_rc rc = store_begin_owned(st, own, nown, &kept, nkept, err, errsz);
	if (rc != STORE_OK)
		goto done;
	store_owned_arrays(&tb, &pb, NULL, kept, *nkept);
	p[0] = sbuf_str(&tb);
	p[1] = sbuf_str(&pb);
	for (int i = 0; i < nextra && i < 6; i++)
		p[i + 2] = extra[i];
	*res = store_exec_params(st, sql, nextra + 2, p, fmt);
	if (PQresultStatus(*res) != PGRES_TUPLES_OK)
		rc = store_classify(st->conn, *res, err, errsz);
	else
		rc = store_exec_simple(st, "COMMIT", err, errsz);
	if (rc != STORE_OK) {
		store_rollback(st);
		PQclear(*res);
		*res = NULL;
	}
done:
	sbuf_free(&tb);
	sbuf_free(&pb);
	free(kept);
	return rc;
}
/* The batch's partitions with their epochs (from own) and next offsets. */
typedef struct {
	owned_part *own; /* epoch 0: not in own */
	int64_t *next;
	int64_t *seq;     /* the partition's next forward sequence (read under the lock) */
	owned_row *rows;  /* the rows as locked (fence_batch) */
	size_t n;
} batch_parts;

static int batch_parts_of(const store_record *recs, size_t n, const owned_part *own,
                          size_t nown, batch_parts *bp)
{
	memset(bp, 0, sizeof *bp);
	bp->own = calloc(n ? n : 1, sizeof *bp->own);
	bp->next = calloc(n ? n : 1, sizeof *bp->next);
	bp->seq = calloc(n ? n : 1, sizeof *bp->seq);
	if (!bp->own || !bp->next || !bp->seq)
		return -1;
	for (size_t i = 0; i < n; i++) {
		size_t j;
		for (j = 0; j < bp->n && bp->own[j].tp != recs[i].tp; j++)
			;
		if (j == bp->n) {
			bp->own[j].tp = recs[i].tp;
			bp->own[j].epoch = store_epoch_of(own, nown, recs[i].tp);
			bp->next[j] = 0;
			bp->n++;
		}
		if (recs[i].offset + 1 > bp->next[j])
			bp->next[j] = recs[i].offset + 1;
	}
	return 0;
}

static void batch_parts_free(batch_parts *bp)
{
	free(bp->own);
	free(bp->next);
	free(bp->seq);
	free(bp->rows);
}

/* Lock the batch's partitions and check they are still ours. Returns
 * STORE_FENCED with *lost set when some are not, STORE_REWOUND with *lost
 * set when the database is behind what this store wrote for some (it lost
 * its last transactions: rewind.h). */
static store_rc fence_batch(store *st, batch_parts *bp, tp_key **lost, size_t *nlost,
                            char *err, size_t errsz)
{
	owned_part *kept = NULL;
	size_t nkept = 0, nl = 0;
	owned_row *rows = calloc(bp->n ? bp->n : 1, sizeof *rows);
	tp_key *l = calloc(bp->n ? bp->n : 1, sizeof *l);
	store_rc rc = STORE_RETRY;
	free(bp->rows);
	bp->rows = calloc(bp->n ? bp->n : 1, sizeof *bp->rows);
	if (!rows || !l || !bp->rows) {
		snprintf(err, errsz, "out of memory");
		goto done;
	}
	rc = store_lock_owned_seq(st, bp->own, bp->n, OWNED_EXCLUSIVE, &kept, &nkept, rows, err, errsz);
	for (size_t i = 0; rc == STORE_OK && i < bp->n; i++) {
		for (size_t k = 0; k < nkept; k++) {
			if (kept[k].tp != bp->own[i].tp)
				continue;
			bp->seq[i] = rows[k].next_seq;
			bp->rows[i] = rows[k];
			const rewind_mark *m = rewind_find(&st->known, kept[k].tp);
			if (rewind_judge(m, kept[k].epoch, &rows[k].db) > REWIND_FENCED)
				l[nl++] = kept[k].tp;
		}
	}
	if (rc == STORE_OK && nl > 0) {
		snprintf(err, errsz, "the database is behind what this replica wrote for %zu "
		                     "partition(s) of the batch: it lost its last transactions", nl);
		rc = STORE_REWOUND;
	} else if (rc == STORE_OK && nkept < bp->n) {
		for (size_t i = 0; i < bp->n; i++)
			if (store_epoch_of(kept, nkept, bp->own[i].tp) != bp->own[i].epoch ||
			    bp->own[i].epoch == 0)
				l[nl++] = bp->own[i].tp;
		snprintf(err, errsz, "%zu partition(s) of the batch are owned by another replica "
		                     "now", nl);
		rc = STORE_FENCED;
	}
	if ((rc == STORE_FENCED || rc == STORE_REWOUND) && lost) {
		*lost = l;
		*nlost = nl;
		l = NULL;
	}
done:
	free(l);
	free(rows);
	free(kept);
	return rc;
}

static store_rc store_offsets(store *st, const batch_parts *bp, char *err, size_t errsz)
{
	/* never backwards: records before next_offset are already applied */
	static const char *sql =
		"UPDATE txhub.partitions AS tp SET next_offset = greatest(tp.next_offset, o.n), "
		"next_fwd_seq = greatest(tp.next_fwd_seq, o.q), updated_at = now() "
		"FROM unnest($1::text[], $2::int[], $3::bigint[], $4::bigint[]) AS o(t, p, n, q) "
		"WHERE tp.topic = o.t AND tp.partition = o.p";
	sbuf tb = {0}, pb = {0}, nb = {0}, qb = {0};
	store_owned_arrays(&tb, &pb, NULL, bp->own, bp->n);
	sbuf_arr_begin(&nb);
	sbuf_arr_begin(&qb);
	for (size_t i = 0; i < bp->n; i++) {
		sbuf_arr_int(&nb, bp->next[i]);
		sbuf_arr_int(&qb, bp->seq[i]);
	}
	sbuf_arr_end(&nb);
	sbuf_arr_end(&qb);
	const char *p[4] = {sbuf_str(&tb), sbuf_str(&pb), sbuf_str(&nb), sbuf_str(&qb)};
	store_rc rc = store_exec_command(st, sql, 4, p, err, errsz);
	sbuf_free(&tb);
	sbuf_free(&pb);
	sbuf_free(&nb);
	sbuf_free(&qb);
	return rc;
}

/* The fold's keys as $1 biz_id and $2 message_key arrays: all of them, or
 * (first) only those whose stored first prepare is needed. *nkeys counts
 * them. */
static store_rc key_arrays(const fold *f, int first, sbuf kw[2], size_t *nkeys, char *err,
                           size_t errsz)
{
	*nkeys = 0;
	sbuf_arr_begin(&kw[0]);
	sbuf_arr_begin(&kw[1]);
	for (size_t i = 0; i < f->nkeys; i++) {
		if (first && !fold_needs_first(&f->keys[i]))
			continue;
		sbuf_arr_text(&kw[0], f->keys[i].biz_id);
		sbuf_arr_text(&kw[1], f->keys[i].message_key);
		(*nkeys)++;
	}
	sbuf_arr_end(&kw[0]);
	sbuf_arr_end(&kw[1]);
	return store_arrays_ok(kw, 2, err, errsz);
}

static rules_decision decision_of(const char *s)
{
	return strcmp(s, "commit") == 0     ? DECISION_COMMIT
	       : strcmp(s, "rollback") == 0 ? DECISION_ROLLBACK
	                                    : DECISION_NONE;
}

/* Lock and read the stored rows of the batch's keys (in key order), and
 * hand their states to the fold. */
static store_rc read_current(store *st, fold *f, char *err, size_t errsz)
{
	sbuf kw[2] = {{0}};
	PGresult *r = NULL;
	size_t nkeys;
	store_rc rc = key_arrays(f, 0, kw, &nkeys, err, errsz);
	if (rc != STORE_OK || nkeys == 0)
		goto done;
	const char *p[2] = {sbuf_str(&kw[0]), sbuf_str(&kw[1])};
	r = store_exec_params(st, SQL_LOCK, 2, p, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		rc = store_classify(st->conn, r, err, errsz);
		goto done;
	}
	for (int i = 0; i < PQntuples(r); i++) {
		fold_key *k = fold_find(f, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
		rules_state cur = {STATUS_NONE, decision_of(PQgetvalue(r, i, 3))};
		if (!k)
			continue;
		if (rules_status_parse(PQgetvalue(r, i, 2), &cur.status) != 0) {
			/* a row the hub did not write: the database's fault, not the record's */
			snprintf(err, errsz, "unknown status \"%s\" in txhub.message_rows",
			         PQgetvalue(r, i, 2));
			log_one_line(err);
			rc = STORE_RETRY;
			goto done;
		}
		fold_set_current(k, cur, PQgetisnull(r, i, 4) ? NULL : PQgetvalue(r, i, 4));
	}
done:
	PQclear(r);
	sbuf_free(&kw[0]);
	sbuf_free(&kw[1]);
	return rc;
}

/* The stored first prepare of the keys the batch prepares again (rare: a
 * producer retried a prepare in a later batch), so the fold can tell a
 * retry from a conflict. The fold borrows the bytes of *res: the caller
 * clears it once fold_run() returned. */
static store_rc read_first_prepares(store *st, fold *f, PGresult **res, char *err,
                                    size_t errsz)
{
	sbuf kw[2] = {{0}};
	size_t nkeys;
	store_rc rc = key_arrays(f, 1, kw, &nkeys, err, errsz);
	if (rc != STORE_OK || nkeys == 0)
		goto done;
	const char *p[2] = {sbuf_str(&kw[0]), sbuf_str(&kw[1])};
	PGresult *r = *res = store_exec_params(st, SQL_FIRST_PREPARE, 2, p, 1);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		rc = store_classify(st->conn, r, err, errsz);
		goto done;
	}
	/* binary text values are NUL-terminated by libpq too */
	for (int i = 0; i < PQntuples(r); i++) {
		fold_key *k = fold_find(f, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
		if (k && fold_needs_first(k))
			fold_set_first(k, (const unsigned char *)PQgetvalue(r, i, 2),
			               (size_t)PQgetlength(r, i, 2),
			               PQgetisnull(r, i, 3) ? NULL : PQgetvalue(r, i, 3),
			               PQgetisnull(r, i, 4) ? NULL : PQgetvalue(r, i, 4));
	}
done:
	sbuf_free(&kw[0]);
	sbuf_free(&kw[1]);
	return rc;
}

/* Whether a marker noted in the partition's row says that seq was
 * forwarded already (0: not, or it cannot tell). */
static int marked_sent(const owned_row *r, int64_t seq)
{
	if (r->sent_upto < 0 || seq > r->sent_upto)
		return 0;
	if (r->unsure_from >= 0 && seq >= r->unsure_from)
		return 0;
	for (size_t i = 0; i < r->ndead; i++)
		if (r->dead[i] == seq)
			return 0;
	return 1;
}

/* The forward sequence of each key the batch made committed (0 for the
 * others): derived from the offset of the record that committed it (the
 * same when the record is read again), and each partition's counter in bp
 * moved past it. sent[i] is set for a key that a progress marker says was
 * forwarded already (the database lost it and the control topic was read
 * again: it is stored as sent), and st counts those and the ones that go
 * again because the marker cannot rule out that they went. Returns NULL
 * when out of memory. */
static int64_t *assign_seqs(const fold *f, batch_parts *bp, unsigned char *sent,
                            store_stats *st)
{
	int64_t *seq = calloc(f->nkeys ? f->nkeys : 1, sizeof *seq);
	if (!seq)
		return NULL;
	for (size_t i = 0; i < f->nkeys; i++) {
		const fold_key *k = &f->keys[i];
		if (!k->committed)
			continue;
		seq[i] = STORE_OFFSET_SEQ(k->src_offset);
		for (size_t j = 0; j < bp->n; j++) {
			if (bp->own[j].tp != k->src_tp)
				continue;
			if (seq[i] + 1 > bp->seq[j])
				bp->seq[j] = seq[i] + 1;
			if (bp->rows && bp->rows[j].sent_upto >= seq[i]) {
				sent[i] = (unsigned char)marked_sent(&bp->rows[j], seq[i]);
				st->recognised += sent[i];
				st->maybe_duplicated += !sent[i];
			}
		}
	}
	return seq;
}

store_rc store_apply(store *st, store_record *recs, size_t n, const owned_part *own,
                     size_t nown, store_forward_list *out, store_stats *stats, tp_key **lost,
                     size_t *nlost, char *err, size_t errsz)
{
	batch_parts bp = {0};
	fold f = {0};
	int64_t *seq = NULL;
	unsigned char *sent = NULL;
	PGresult *first = NULL, *ins = NULL, *upd = NULL;
	store_rc rc = STORE_OK;
	memset(stats, 0, sizeof *stats);
	store_forward_list_clear(&st->scheduled);
	if (lost)
		*lost = NULL;
	if (nlost)
		*nlost = 0;
	if (fold_begin(&f, recs, n) != 0 || batch_parts_of(recs, n, own, nown, &bp) != 0) {
		snprintf(err, errsz, "out of memory");
		rc = STORE_RETRY;
		goto done;
	}
	/* the ownership rows first, then the messages in key order: every
	 * transaction locks in the same order */
	if ((rc = store_exec_simple(st, "BEGIN", err, errsz)) != STORE_OK ||
	    (rc = fence_batch(st, &bp, lost, nlost, err, errsz)) != STORE_OK ||
	    (rc = read_current(st, &f, err, errsz)) != STORE_OK ||
	    (rc = read_first_prepares(st, &f, &first, err, errsz)) != STORE_OK)
		goto done;
	f.enforce = st->enforce;
	fold_run(&f);
	PQclear(first); /* the fold is done with the stored first prepares */
	first = NULL;
	*stats = f.stats; /* by's rows move to the caller */
	memset(&f.stats.by, 0, sizeof f.stats.by);
	if (!(sent = calloc(f.nkeys ? f.nkeys : 1, 1)) ||
	    !(seq = assign_seqs(&f, &bp, sent, stats))) {
		snprintf(err, errsz, "out of memory");
		rc = STORE_RETRY;
		goto done;
	}
	if ((rc = store_write_messages(st, &f, seq, sent, recs, &ins, &upd, err, errsz)) != STORE_OK ||
	    (rc = store_write_conflicts(st, &f, recs, err, errsz)) != STORE_OK ||
	    (rc = store_write_rejected(st, recs, n, err, errsz)) != STORE_OK ||
	    (rc = store_offsets(st, &bp, err, errsz)) != STORE_OK ||
	    (rc = store_exec_simple(st, "COMMIT", err, errsz)) != STORE_OK)
		goto done;
	for (size_t i = 0; i < bp.n; i++)
		rewind_advance(&st->known, bp.own[i].tp, bp.next[i]);

	/* delayed delivery, forward.order = key: the scheduled ones block their
	 * keys from now on (store_take_scheduled) */
	if (st->order_by_key && ((ins && store_collect_forwards(ins, 2, 1, &st->scheduled) != 0) ||
	                         (upd && store_collect_forwards(upd, 2, 1, &st->scheduled) != 0))) {
		log_error("store: out of memory copying scheduled messages; their keys wait from the "
		          "next due scan");
		store_forward_list_clear(&st->scheduled);
	}
	if ((ins && store_collect_forwards(ins, 2, 0, out) != 0) ||
	    (upd && store_collect_forwards(upd, 2, 0, out) != 0)) {
		/* committed, but we could not copy the rows: the lease expiry or the
		 * next assignment forwards them */
		log_error("store: out of memory copying committed messages; they are forwarded "
		          "when their lease expires");
		out->incomplete = 1;
	}
	if (out->n > 1) /* qsort must not see a NULL base */
		qsort(out->items, out->n, sizeof *out->items, store_cmp_forward);

done:
	if (rc != STORE_OK) {
		store_rollback(st);
		store_stats_free(stats);
	}
	PQclear(first);
	PQclear(ins);
	PQclear(upd);
	fold_free(&f);
	batch_parts_free(&bp);
	free(seq);
	free(sent);
	return rc;
}
