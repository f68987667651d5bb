/* store_deadletter.c: what the dead-letter thread (hub/forward/deadletter*.c)
 * reads and writes: parked rows, their dead letters recorded with a history
 * row, and under exactly_once the pending entries of txhub.dead_letter_pending
 * (docs/troubleshooting.md: Dead-letter topic). */
#include "store.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbuf.h"
#include "store_int.h"

/* The parked rows of the owned partitions not dead-lettered yet, oldest
 * park first (binary results). */
static const char *SQL_PARKED =
	"SELECT m.biz_id, m.message_key, m.payload, m.forward_topic, m.forward_key, "
	"m.forward_headers::text, coalesce(m.last_error, ''), m.send_attempts::text, "
	"m.traceparent, m.tracestate, coalesce(m.trace_id, ''), m.updated_at::text "
	"FROM txhub.message_rows m "
	"WHERE m.send_status = 'failed' AND m.dead_lettered_at IS NULL "
	"AND (m.src_topic, m.src_partition) IN (SELECT * FROM unnest($1::text[], $2::int[])) "
	/* exactly_once ($4): not those whose record may be committed already */
	"AND NOT ($4::bool AND EXISTS (SELECT 1 FROM txhub.dead_letter_pending p "
	"WHERE p.biz_id = m.biz_id AND p.message_key = m.message_key)) "
	"ORDER BY m.updated_at LIMIT $3";

/* A dead letter that failed, in the history of its row (with its tenant;
 * a row of another tenant's does not count), once per park (a row parked
 * again after a redrive gets a new one), while the row still waits: `txhub
 * status` reads the dead_letter_failed state from these rows
 * (ops_deadletter.h), a dead letter produced later ends it for the row.
 * $1, $2: the rows; $3: each one's reason. */
static const char *SQL_FAILED =
	"INSERT INTO txhub.history (biz_id, message_key, event, detail, tenant) "
	"SELECT m.biz_id, m.message_key, 'dead_letter_failed', x.d, m.tenant "
	"FROM unnest($1::text[], $2::text[], $3::text[]) AS x(b, k, d) "
	"JOIN txhub.message_rows m ON m.biz_id = x.b AND m.message_key = x.k "
	"WHERE m.send_status = 'failed' AND m.dead_lettered_at IS NULL "
	"AND NOT EXISTS (SELECT 1 FROM txhub.history h WHERE h.biz_id = m.biz_id "
	"AND h.message_key = m.message_key AND h.at >= m.updated_at "
	"AND h.event = 'dead_letter_failed' AND (h.tenant IS NULL OR h.tenant = m.tenant))";

/* at_least_once: the dead letters the broker acknowledged ($3: when), each
 * with a history row naming the topic ($4), only while the row is still
 * parked and not recorded (an operator's redrive meanwhile wins; the
 * record went out while it was parked). Pending entries of theirs (left by
 * exactly_once before the mode changed) go: the record is out now. */
static const char *SQL_DONE =
	"WITH p AS (DELETE FROM txhub.dead_letter_pending p USING unnest($1::text[], $2::text[]) "
	"AS x(b, k) WHERE p.biz_id = x.b AND p.message_key = x.k), " /* (an exactly_once run's) */
	"u AS (UPDATE txhub.message_rows AS m SET dead_lettered_at = $3::timestamptz "
	"FROM unnest($1::text[], $2::text[]) AS x(b, k) "
	"WHERE m.biz_id = x.b AND m.message_key = x.k AND m.send_status = 'failed' "
	"AND m.dead_lettered_at IS NULL RETURNING m.biz_id, m.message_key, m.tenant) "
	"INSERT INTO txhub.history (biz_id, message_key, event, detail, tenant) "
	"SELECT biz_id, message_key, 'dead_lettered', 'produced to the dead-letter topic ' || $4, "
	"tenant FROM u";

/* exactly_once, before the commit: where each record of the transaction
 * is, for rows still parked at the park read ($3) and only while this
 * replica owns their partition at its epoch ($7-$9), that row held FOR
 * SHARE: a new owner's take (which moves the epoch) waits for this insert,
 * and an insert after the take finds the new epoch, so no entry of an old
 * owner appears after the new one's recovery looked. Returns the entries
 * written. */
static const char *SQL_PENDING =
	"WITH i AS (INSERT INTO txhub.dead_letter_pending (biz_id, message_key, parked_at, "
	"src_topic, src_partition, topic, partition, \"offset\") "
	"SELECT m.biz_id, m.message_key, m.updated_at, m.src_topic, m.src_partition, $4, x.p, x.o "
	"FROM unnest($1::text[], $2::text[], $3::timestamptz[], $5::int[], $6::bigint[]) "
	"AS x(b, k, u, p, o) JOIN txhub.message_rows m ON m.biz_id = x.b AND m.message_key = x.k "
	"WHERE m.updated_at = x.u AND m.send_status = 'failed' AND m.dead_lettered_at IS NULL "
	"AND EXISTS (SELECT 1 FROM txhub.partitions tp WHERE tp.topic = $7 AND tp.partition = $8::int "
	"AND tp.epoch = $9::bigint FOR SHARE) "
	"ON CONFLICT (biz_id, message_key) DO NOTHING RETURNING 1) "
	"SELECT count(*) FROM i";

/* exactly_once, after the commit and in recovery: the pending entries of
 * rows $1, $2 whose records are committed ($3: when each was produced) go,
 * and their rows are recorded dead-lettered with a history row, while
 * still at the park the record was for (a redrive and a new park meanwhile
 * wins: that park gets a dead letter of its own). */
static const char *SQL_DONE_EOS =
	"WITH p AS (DELETE FROM txhub.dead_letter_pending p USING unnest($1::text[], $2::text[], "
	"$3::timestamptz[]) AS x(b, k, at) WHERE p.biz_id = x.b AND p.message_key = x.k "
	"RETURNING p.biz_id, p.message_key, p.parked_at, p.topic, x.at), "
	"u AS (UPDATE txhub.message_rows AS m SET dead_lettered_at = p.at FROM p "
	"WHERE m.biz_id = p.biz_id AND m.message_key = p.message_key AND m.send_status = 'failed' "
	"AND m.dead_lettered_at IS NULL AND m.updated_at = p.parked_at "
	"RETURNING m.biz_id, m.message_key, m.tenant, p.topic) "
	"INSERT INTO txhub.history (biz_id, message_key, event, detail, tenant) "
	"SELECT biz_id, message_key, 'dead_lettered', 'produced to the dead-letter topic ' || topic, "
	"tenant FROM u";

/* exactly_once: the pending entries of rows whose transaction was aborted
 * (their rows are produced again). */
static const char *SQL_CLEAR =
	"DELETE FROM txhub.dead_letter_pending p USING unnest($1::text[], $2::text[]) AS x(b, k) "
	"WHERE p.biz_id = x.b AND p.message_key = x.k";

/* exactly_once: the pending entries of one control partition ($1, $2). */
static const char *SQL_PENDING_OF =
	"SELECT p.biz_id, p.message_key, p.topic, p.partition, p.\"offset\", "
	"coalesce(m.trace_id, '') FROM txhub.dead_letter_pending p "
	"LEFT JOIN txhub.message_rows m ON m.biz_id = p.biz_id AND m.message_key = p.message_key "
	"WHERE p.src_topic = $1 AND p.src_partition = $2::int "
	"ORDER BY p.topic, p.partition, p.\"offset\"";

/* exactly_once: the owned partitions ($1, $2) with parked rows to
 * dead-letter or pending entries to resolve. */
static const char *SQL_WORK =
	"SELECT m.src_topic, m.src_partition FROM txhub.message_rows m "
	"WHERE m.send_status = 'failed' AND m.dead_lettered_at IS NULL "
	"AND (m.src_topic, m.src_partition) IN (SELECT * FROM unnest($1::text[], $2::int[])) "
	"UNION SELECT p.src_topic, p.src_partition FROM txhub.dead_letter_pending p "
	"WHERE (p.src_topic, p.src_partition) IN (SELECT * FROM unnest($1::text[], $2::int[]))";

/* Run a query (fmt: 1 binary results) whose answer is rows, into *out;
 * or not, with err. */
static store_rc query(store *st, const char *sql, int n, const char *const *p, int fmt,
                      PGresult **out, char *err, size_t errsz)
{
	*out = NULL;
	PGresult *r = store_exec_params(st, sql, n, p, fmt);
	if (!r) {
		snprintf(err, errsz, "out of memory");
		return STORE_RETRY;
	}
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		store_rc rc = store_classify(st->conn, r, err, errsz);
		PQclear(r);
		return rc == STORE_OK ? STORE_RETRY : rc;
	}
	*out = r;
	return STORE_OK;
}

void store_parked_free(store_parked *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		store_forward_free(&p[i].f);
		free(p[i].error);
	}
	free(p);
}

store_rc store_dl_parked(store *st, const owned_part *own, size_t nown, int limit, int eos,
                         store_parked **out, size_t *n, char *err, size_t errsz)
{
	*out = NULL;
	*n = 0;
	sbuf w[2] = {{0}};
	store_owned_arrays(&w[0], &w[1], NULL, own, nown);
	char lim[16];
	snprintf(lim, sizeof lim, "%d", limit);
	const char *p[4] = {sbuf_str(&w[0]), sbuf_str(&w[1]), lim, eos ? "true" : "false"};
	PGresult *r = NULL;
	store_rc rc = store_arrays_ok(w, 2, err, errsz);
	if (rc == STORE_OK)
		rc = query(st, SQL_PARKED, 4, p, 1, &r, err, errsz);
	sbuf_free(&w[0]);
	sbuf_free(&w[1]);
	if (rc != STORE_OK)
		return rc;
	int rows = PQntuples(r);
	store_parked *items = calloc(rows ? (size_t)rows : 1, sizeof *items);
	if (!items) {
		PQclear(r);
		snprintf(err, errsz, "out of memory");
		return STORE_RETRY;
	}
	for (int i = 0; i < rows; i++) {
		store_parked *it = &items[i];
		it->f.biz_id = store_col_text(r, i, 0);
		it->f.message_key = store_col_text(r, i, 1);
		it->f.payload = (unsigned char *)store_col_text(r, i, 2);
		it->f.payload_len = PQgetisnull(r, i, 2) ? 0 : (size_t)PQgetlength(r, i, 2);
		it->f.topic = store_col_text(r, i, 3);
		it->f.key = store_col_text(r, i, 4);
		it->f.headers = store_col_text(r, i, 5);
		it->error = store_col_text(r, i, 6);
		snprintf(it->attempts, sizeof it->attempts, "%s", PQgetvalue(r, i, 7));
		it->f.traceparent = store_col_text(r, i, 8);
		it->f.tracestate = store_col_text(r, i, 9);
		snprintf(it->f.trace_id, sizeof it->f.trace_id, "%s", PQgetvalue(r, i, 10));
		snprintf(it->parked_at, sizeof it->parked_at, "%s", PQgetvalue(r, i, 11));
		if (!it->f.biz_id || !it->f.message_key || !it->f.topic || !it->error ||
		    (!it->f.payload && !PQgetisnull(r, i, 2))) {
			store_parked_free(items, (size_t)rows);
			PQclear(r);
			snprintf(err, errsz, "out of memory");
			return STORE_RETRY;
		}
	}
	PQclear(r);
	*out = items;
	*n = (size_t)rows;
	return STORE_OK;
}

/* keys[0..n) as array parameters: biz ids, message keys and (with vals)
 * their values. */
static store_rc key_arrays(const store_dl_key *keys, size_t n, int vals, sbuf w[3], char *err,
                           size_t errsz)
{
	for (int j = 0; j < 3; j++)
		sbuf_arr_begin(&w[j]);
	for (size_t i = 0; i < n; i++) {
		sbuf_arr_text(&w[0], keys[i].biz_id);
		sbuf_arr_text(&w[1], keys[i].message_key);
		if (vals)
			sbuf_arr_text(&w[2], keys[i].value);
	}
	for (int j = 0; j < 3; j++)
		sbuf_arr_end(&w[j]);
	return store_arrays_ok(w, 3, err, errsz);
}

/* sql on keys[0..n) ($1, $2; $3 their values when vals), then nmore
 * parameters more. */
static store_rc keys_command(store *st, const char *sql, const store_dl_key *keys, size_t n,
                             int vals, const char *const *more, int nmore, char *err,
                             size_t errsz)
{
	if (n == 0)
		return STORE_OK;
	sbuf w[3] = {{0}};
	store_rc rc = key_arrays(keys, n, vals, w, err, errsz);
	const char *p[6] = {sbuf_str(&w[0]), sbuf_str(&w[1]), sbuf_str(&w[2])};
	int np = vals ? 3 : 2;
	for (int j = 0; j < nmore && np < 6; j++)
		p[np++] = more[j];
	if (rc == STORE_OK)
		rc = store_exec_command(st, sql, np, p, err, errsz);
	for (int j = 0; j < 3; j++)
		sbuf_free(&w[j]);
	return rc;
}

store_rc store_dl_note_failed(store *st, const store_dl_key *keys, size_t n, char *err,
                              size_t errsz)
{
	return keys_command(st, SQL_FAILED, keys, n, 1, NULL, 0, err, errsz);
}

store_rc store_dl_done(store *st, const store_dl_key *keys, size_t n, const char *at,
                       const char *topic, char *err, size_t errsz)
{
	const char *more[2] = {at, topic}; /* ($3: one time for all) */
	return keys_command(st, SQL_DONE, keys, n, 0, more, 2, err, errsz);
}

store_rc store_dl_pending_done(store *st, const store_dl_key *keys, size_t n, char *err,
                               size_t errsz)
{
	return keys_command(st, SQL_DONE_EOS, keys, n, 1, NULL, 0, err, errsz);
}

store_rc store_dl_pending_clear(store *st, const store_dl_key *keys, size_t n, char *err,
                                size_t errsz)
{
	return keys_command(st, SQL_CLEAR, keys, n, 0, NULL, 0, err, errsz);
}

store_rc store_dl_pending_add(store *st, const store_dl_placed *recs, size_t n,
                              const char *topic, const owned_part *own, size_t *written,
                              char *err, size_t errsz)
{
	*written = 0;
	sbuf w[5] = {{0}};
	for (int j = 0; j < 5; j++)
		sbuf_arr_begin(&w[j]);
	for (size_t i = 0; i < n; i++) {
		sbuf_arr_text(&w[0], recs[i].biz_id);
		sbuf_arr_text(&w[1], recs[i].message_key);
		sbuf_arr_text(&w[2], recs[i].parked_at);
		sbuf_arr_int(&w[3], recs[i].partition);
		sbuf_arr_int(&w[4], recs[i].offset);
	}
	for (int j = 0; j < 5; j++)
		sbuf_arr_end(&w[j]);
	char part[16], epoch[24];
	snprintf(part, sizeof part, "%d", tp_part(own->tp));
	snprintf(epoch, sizeof epoch, "%lld", (long long)own->epoch);
	const char *p[9] = {sbuf_str(&w[0]), sbuf_str(&w[1]), sbuf_str(&w[2]), topic,
	                    sbuf_str(&w[3]), sbuf_str(&w[4]), tp_topic(own->tp), part, epoch};
	PGresult *r = NULL;
	store_rc rc = store_arrays_ok(w, 5, err, errsz);
	if (rc == STORE_OK)
		rc = query(st, SQL_PENDING, 9, p, 0, &r, err, errsz);
	if (rc == STORE_OK)
		*written = (size_t)atoll(PQgetvalue(r, 0, 0));
	PQclear(r);
	for (int j = 0; j < 5; j++)
		sbuf_free(&w[j]);
	return rc;
}

void store_dl_entries_free(store_dl_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(e[i].biz_id);
		free(e[i].message_key);
		free(e[i].topic);
	}
	free(e);
}

store_rc store_dl_pending_of(store *st, tp_key tp, store_dl_entry **out, size_t *n, char *err,
                             size_t errsz)
{
	*out = NULL;
	*n = 0;
	char part[16];
	snprintf(part, sizeof part, "%d", tp_part(tp));
	const char *p[2] = {tp_topic(tp), part};
	PGresult *r;
	store_rc rc = query(st, SQL_PENDING_OF, 2, p, 0, &r, err, errsz);
	if (rc != STORE_OK)
		return rc;
	size_t rows = (size_t)PQntuples(r);
	store_dl_entry *e = calloc(rows ? rows : 1, sizeof *e);
	rc = e ? STORE_OK : STORE_RETRY;
	for (size_t i = 0; e && i < rows; i++) {
		e[i].biz_id = strdup(PQgetvalue(r, (int)i, 0));
		e[i].message_key = strdup(PQgetvalue(r, (int)i, 1));
		e[i].topic = strdup(PQgetvalue(r, (int)i, 2));
		e[i].partition = atoi(PQgetvalue(r, (int)i, 3));
		e[i].offset = atoll(PQgetvalue(r, (int)i, 4));
		snprintf(e[i].trace_id, sizeof e[i].trace_id, "%s", PQgetvalue(r, (int)i, 5));
		if (!e[i].biz_id || !e[i].message_key || !e[i].topic)
			rc = STORE_RETRY;
	}
	PQclear(r);
	if (rc != STORE_OK) {
		if (e)
			store_dl_entries_free(e, rows);
		snprintf(err, errsz, "out of memory");
		return rc;
	}
	*out = e;
	*n = rows;
	return STORE_OK;
}

/* The partition's dead-letter transactional.id and the epoch it was
 * written at, at the owner's epoch. */
static const char *SQL_CLAIM_READ =
	"SELECT coalesce(dl_txn_id, ''), coalesce(dl_txn_epoch, 0) FROM txhub.partitions "
	"WHERE topic = $1 AND partition = $2::int AND epoch = $3::bigint";

/* The owner's dead-letter transactional.id ($4), at its epoch. */
static const char *SQL_CLAIM =
	"UPDATE txhub.partitions SET dl_txn_id = $4, dl_txn_epoch = epoch "
	"WHERE topic = $1 AND partition = $2::int AND epoch = $3::bigint RETURNING 1";

/* One of the claim's statements (txn_id: $4, NULL for the read), its one
 * row into *out; STORE_FENCED when own's epoch matched no row. */
static store_rc claim_query(store *st, const char *sql, const owned_part *own,
                            const char *txn_id, PGresult **out, char *err, size_t errsz)
{
	char part[16], epoch[24];
	snprintf(part, sizeof part, "%d", tp_part(own->tp));
	snprintf(epoch, sizeof epoch, "%lld", (long long)own->epoch);
	const char *p[4] = {tp_topic(own->tp), part, epoch, txn_id};
	store_rc rc = query(st, sql, txn_id ? 4 : 3, p, 0, out, err, errsz);
	if (rc == STORE_OK && PQntuples(*out) != 1) {
		snprintf(err, errsz, "partition %d of %s is no longer this replica's at epoch %lld",
		         tp_part(own->tp), tp_topic(own->tp), (long long)own->epoch);
		PQclear(*out);
		*out = NULL;
		rc = STORE_FENCED;
	}
	return rc;
}

store_rc store_dl_claim_read(store *st, const owned_part *own, char *prev, size_t prevsz,
                             int64_t *prev_epoch, char *err, size_t errsz)
{
	*prev = '\0';
	*prev_epoch = 0;
	PGresult *r;
	store_rc rc = claim_query(st, SQL_CLAIM_READ, own, NULL, &r, err, errsz);
	if (rc != STORE_OK)
		return rc;
	snprintf(prev, prevsz, "%s", PQgetvalue(r, 0, 0));
	*prev_epoch = atoll(PQgetvalue(r, 0, 1));
	PQclear(r);
	return STORE_OK;
}

store_rc store_dl_claim(store *st, const owned_part *own, const char *txn_id, char *err,
                        size_t errsz)
{
	PGresult *r;
	store_rc rc = claim_query(st, SQL_CLAIM, own, txn_id, &r, err, errsz);
	PQclear(r);
	return rc;
}

store_rc store_dl_work(store *st, const owned_part *own, size_t nown, tp_key **out, size_t *n,
                       char *err, size_t errsz)
{
	*out = NULL;
	*n = 0;
	sbuf w[2] = {{0}};
	store_owned_arrays(&w[0], &w[1], NULL, own, nown);
	const char *p[2] = {sbuf_str(&w[0]), sbuf_str(&w[1])};
	PGresult *r = NULL;
	store_rc rc = store_arrays_ok(w, 2, err, errsz);
	if (rc == STORE_OK)
		rc = query(st, SQL_WORK, 2, p, 0, &r, err, errsz);
	sbuf_free(&w[0]);
	sbuf_free(&w[1]);
	if (rc != STORE_OK)
		return rc;
	size_t rows = (size_t)PQntuples(r);
	tp_key *k = calloc(rows ? rows : 1, sizeof *k);
	for (size_t i = 0; k && i < rows; i++)
		if ((k[i] = store_row_tp(r, (int)i)) == -1) {
			free(k);
			k = NULL;
		}
	PQclear(r);
	if (!k) {
		snprintf(err, errsz, "out of memory");
		return STORE_RETRY;
	}
	*out = k;
	*n = rows;
	return STORE_OK;
}
