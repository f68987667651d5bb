/* store.c: PostgreSQL access (see store.h).
 *
 * Why batches look the way they do: the state of a message depends on the
 * steps before it, possibly earlier in the same batch, so store_apply()
 * reads the current state of every key of the batch once (locking the rows),
 * has the fold (fold.c, pure) run the rules in memory in record order, and
 * writes the final state of every touched key with one INSERT (new keys) and
 * one UPDATE (known keys). This file keeps the SQL, the transaction and the
 * logging; every decision about what a record does lives in fold.c, where
 * it is unit-tested without a database. A key that another replica inserts
 * concurrently makes the INSERT come up short; the whole transaction is then
 * rolled back and retried, and the retry sees and locks that row. */
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

/* ---- results and errors ---- */

/* The text kept is the SQLSTATE and the primary message (sql.h's
 * sql_error_text: a DETAIL such as "Failing row contains (...)" would put
 * payload bytes into logs and rejection reasons). */
void store_error_text(struct pg_conn *conn, const struct pg_result *res, char *err, size_t errsz)
{
	sql_error_text(conn, res, err, errsz);
}

/* Which error is whose fault (CONTRACT §2): PostgreSQL blames the data only
 * with SQLSTATE class 22 (data exception) or 23 (integrity constraint
 * violation); anything else (a lost connection or permission, an I/O
 * error, a full disk, a trigger that raises) is the database's, and is
 * tried again, however long it lasts. */
store_rc store_classify(PGconn *conn, const PGresult *res, char *err, size_t errsz)
{
	store_error_text(conn, res, err, errsz);
	if (PQstatus(conn) != CONNECTION_OK)
		return STORE_RETRY;
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	if (state && (strncmp(state, "22", 2) == 0 || strncmp(state, "23", 2) == 0))
		return STORE_REFUSED;
	return STORE_RETRY;
}

store_rc store_exec_simple(store *st, const char *sql, char *err, size_t errsz)
{
	PGresult *r = PQexec(st->conn, sql);
	store_rc rc = STORE_OK;
	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
		rc = store_classify(st->conn, r, err, errsz);
	PQclear(r);
	return rc;
}

void store_rollback(store *st)
{
	if (PQstatus(st->conn) == CONNECTION_OK && PQtransactionStatus(st->conn) != PQTRANS_IDLE) {
		PGresult *r = PQexec(st->conn, "ROLLBACK");
		PQclear(r);
	}
}

/* Execute with text parameters. fmt: 0 text results, 1 binary results. */
PGresult *store_exec_params(store *st, const char *sql, int n, const char *const *vals,
                             int fmt)
{
	return PQexecParams(st->conn, sql, n, NULL, vals, NULL, NULL, fmt);
}

/* Execute a statement that returns no rows, with text parameters. */
store_rc store_exec_command(store *st, const char *sql, int n, const char *const *vals,
                             char *err, size_t errsz)
{
	PGresult *r = store_exec_params(st, sql, n, vals, 0);
	store_rc rc = STORE_OK;
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		rc = store_classify(st->conn, r, err, errsz);
	PQclear(r);
	return rc;
}

static void notice_to_log(void *arg, const char *msg)
{
	(void)arg;
	char esc[512];
	size_t l = strlen(msg);
	while (l > 0 && msg[l - 1] == '\n')
		l--;
	log_info("store: postgres: %s", log_escape(msg, l, esc, sizeof esc));
}

/* ---- connection ---- */

/* A replica stopped in the middle of a transaction (SIGSTOP, a frozen VM)
 * holds its row locks until PostgreSQL ends its session: the idle time-out
 * bounds how long it can block the partition's new owner, and the lock
 * time-out turns any such wait into an error that is retried. */
static void session_settings(store *st)
{
	PGresult *r = PQexec(st->conn, "SET lock_timeout = '10s'; "
	                                "SET idle_in_transaction_session_timeout = '5s'");
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		char m[512];
		snprintf(m, sizeof m, "%s", PQerrorMessage(st->conn));
		log_one_line(m);
		log_warn("store: setting session time-outs: %s", m);
	}
	PQclear(r);
}

store *store_connect(const txhub_config *cfg, char *err, size_t errsz)
{
	store *st = calloc(1, sizeof *st);
	if (!st) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	st->first_after_ms = cfg->checkback_first_after_ms;
	st->enforce = config_tenants_enforce(cfg);
	st->lease_ms = 360000;
	if (!(st->conninfo = strdup(cfg->pg))) {
		snprintf(err, errsz, "out of memory");
		goto fail;
	}
	const char *keys[] = {"dbname", "fallback_application_name", NULL};
	const char *vals[] = {st->conninfo, "txhub", NULL};
	/* expand_dbname: dbname may hold a full conninfo string or URI */
	st->conn = PQconnectdbParams(keys, vals, 1);
	if (!st->conn || PQstatus(st->conn) != CONNECTION_OK) {
		const char *m = st->conn ? PQerrorMessage(st->conn) : "out of memory";
		snprintf(err, errsz, "cannot connect to PostgreSQL: %s", m);
		log_one_line(err);
		goto fail;
	}
	PQsetNoticeProcessor(st->conn, notice_to_log, NULL);
	session_settings(st);
	return st;
fail:
	store_close(st);
	return NULL;
}

void store_set_lease(store *st, int64_t lease_ms) { st->lease_ms = lease_ms; }

void store_set_first_after(store *st, int64_t first_after_ms)
{
	st->first_after_ms = first_after_ms;
}

void store_close(store *st)
{
	if (!st)
		return;
	if (st->conn)
		PQfinish(st->conn);
	free(st->conninfo);
	rewind_table_free(&st->known);
	store_forward_list_clear(&st->scheduled);
	free(st);
}

store_rc store_ensure(store *st, char *err, size_t errsz)
{
	if (PQstatus(st->conn) == CONNECTION_OK)
		return STORE_OK;
	PQreset(st->conn);
	if (PQstatus(st->conn) != CONNECTION_OK) {
		snprintf(err, errsz, "cannot reconnect to PostgreSQL: %s", PQerrorMessage(st->conn));
		log_one_line(err);
		return STORE_RETRY;
	}
	PQsetNoticeProcessor(st->conn, notice_to_log, NULL);
	session_settings(st);
	log_info("store: reconnected to PostgreSQL");
	st->reconnected = 1;
	return STORE_OK;
}

void store_note_offset(store *st, tp_key tp, int64_t next_offset, int exact)
{
	if (exact)
		rewind_set_offset(&st->known, tp, next_offset);
	else
		rewind_advance(&st->known, tp, next_offset);
}

int store_reconnected(store *st)
{
	int r = st->reconnected;
	st->reconnected = 0;
	return r;
}

struct pg_conn *store_conn(store *st) { return st->conn; }

store_rc store_schema_version(store *st, int *version, char *err, size_t errsz)
{
	*version = 0;
	PGresult *r = PQexec(st->conn, "SELECT to_regclass('txhub.schema_migrations') IS NOT NULL");
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		goto fail;
	int exists = PQgetvalue(r, 0, 0)[0] == 't';
	PQclear(r);
	if (!exists)
		return STORE_OK;
	r = PQexec(st->conn, "SELECT coalesce(max(version), 0) FROM txhub.schema_migrations");
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		goto fail;
	*version = atoi(PQgetvalue(r, 0, 0));
	PQclear(r);
	return STORE_OK;
fail:;
	store_rc rc = store_classify(st->conn, r, err, errsz);
	PQclear(r);
	return rc;
}

/* ---- forward lists ---- */

void store_forward_free(store_forward *f)
{
	free(f->biz_id);
	free(f->message_key);
	free(f->payload);
	free(f->topic);
	free(f->key);
	free(f->headers);
	free(f->traceparent);
	free(f->tracestate);
	memset(f, 0, sizeof *f);
}

static char *dup_or_null(const char *s, int *oom)
{
	char *d = s ? strdup(s) : NULL;
	*oom |= s && !d;
	return d;
}

int store_forward_copy(store_forward *dst, const store_forward *src)
{
	int oom = 0;
	*dst = *src;
	dst->biz_id = dup_or_null(src->biz_id, &oom);
	dst->message_key = dup_or_null(src->message_key, &oom);
	dst->topic = dup_or_null(src->topic, &oom);
	dst->key = dup_or_null(src->key, &oom);
	dst->headers = dup_or_null(src->headers, &oom);
	dst->traceparent = dup_or_null(src->traceparent, &oom);
	dst->tracestate = dup_or_null(src->tracestate, &oom);
	dst->payload = NULL;
	if (src->payload && (dst->payload = malloc(src->payload_len + 1)))
		memcpy(dst->payload, src->payload, src->payload_len);
	oom |= src->payload && !dst->payload;
	if (oom)
		store_forward_free(dst);
	return oom ? -1 : 0;
}

void store_stats_free(store_stats *s) { metrics_tally_free(&s->by); }

void store_forward_list_clear(store_forward_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		store_forward_free(&l->items[i]);
	free(l->items);
	memset(l, 0, sizeof *l);
}

static store_forward *list_add(store_forward_list *l)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		store_forward *n = realloc(l->items, cap * sizeof *n);
		if (!n)
			return NULL;
		l->items = n;
		l->cap = cap;
	}
	store_forward *f = &l->items[l->n++];
	memset(f, 0, sizeof *f);
	return f;
}

static char *bin_text(const PGresult *r, int row, int col)
{
	if (PQgetisnull(r, row, col))
		return NULL;
	int len = PQgetlength(r, row, col);
	char *s = malloc((size_t)len + 1);
	if (s) {
		memcpy(s, PQgetvalue(r, row, col), (size_t)len);
		s[len] = '\0';
	}
	return s;
}

static int32_t bin_int4(const PGresult *r, int row, int col)
{
	uint32_t v;
	memcpy(&v, PQgetvalue(r, row, col), 4);
	return (int32_t)ntohl(v);
}

static int64_t bin_int8(const PGresult *r, int row, int col)
{
	uint32_t hi, lo;
	const char *p = PQgetvalue(r, row, col);
	memcpy(&hi, p, 4);
	memcpy(&lo, p + 4, 4);
	return (int64_t)(((uint64_t)ntohl(hi) << 32) | ntohl(lo));
}

/* Append the rows of r (binary, FORWARD_COLUMNS from column `first`) whose
 * column `flag` (a bool, or -1 for every row) is true. */
int store_collect_forwards(const PGresult *r, int first, int flag, store_forward_list *out)
{
	char last[64] = ""; /* the last tenant looked up, and its label */
	metrics_tenant label = 0;
	for (int i = 0; i < PQntuples(r); i++) {
		if (flag >= 0 && (PQgetisnull(r, i, flag) || PQgetvalue(r, i, flag)[0] == 0))
			continue;
		store_forward *f = list_add(out);
		if (!f)
			return -1;
		f->biz_id = bin_text(r, i, first);
		f->message_key = bin_text(r, i, first + 1);
		if (!PQgetisnull(r, i, first + 2)) {
			f->payload_len = (size_t)PQgetlength(r, i, first + 2);
			f->payload = malloc(f->payload_len + 1);
			if (f->payload)
				memcpy(f->payload, PQgetvalue(r, i, first + 2), f->payload_len);
		}
		f->topic = bin_text(r, i, first + 3);
		f->key = bin_text(r, i, first + 4);
		f->headers = bin_text(r, i, first + 5);
		char *topic = bin_text(r, i, first + 11);
		f->src_tp = topic ? tp_of(topic, bin_int4(r, i, first + 6)) : -1;
		free(topic);
		f->src_offset = bin_int8(r, i, first + 7);
		f->send_attempts = bin_int4(r, i, first + 8);
		/* a first send's row was last updated by its decision */
		if (f->send_attempts == 0)
			f->decided_ms = clock_ms() - bin_int8(r, i, first + 9);
		f->fwd_seq = bin_int8(r, i, first + 10);
		const char *tn = PQgetisnull(r, i, first + 12) ? "" : PQgetvalue(r, i, first + 12);
		if (strcmp(tn, last) != 0) {
			snprintf(last, sizeof last, "%s", tn);
			label = metrics_tenant_of(tn);
		}
		f->tenant = label;
		f->traceparent = bin_text(r, i, first + 13);
		f->tracestate = bin_text(r, i, first + 14);
		snprintf(f->trace_id, sizeof f->trace_id, "%s", PQgetvalue(r, i, first + 15));
		if (!f->biz_id || !f->message_key || !f->topic || f->src_tp == -1 ||
		    (!f->payload && !PQgetisnull(r, i, first + 2)))
			return -1;
	}
	return 0;
}

int store_cmp_forward(const void *a, const void *b)
{
	const store_forward *x = a, *y = b;
	if (x->src_tp != y->src_tp)
		return x->src_tp < y->src_tp ? -1 : 1;
	return x->src_offset < y->src_offset ? -1 : x->src_offset > y->src_offset;
}

/* ---- store_apply ----
 *
 * Its steps, each a helper below: lock the batch's partitions (fence_batch),
 * read and lock the batch's keys into the fold (read_current,
 * read_first_prepares), fold_run(), then write what the fold decided
 * (store_write_messages, store_write_conflicts, store_write_rejected, store_offsets). */

enum { W_B, W_K, W_S, W_D, W_C, W_P, W_FT, W_FK, W_FH, W_CU, W_FA, W_SP, W_SO, W_TP, W_SQ,
       W_SN, W_ST, W_TN, W_TRP, W_TRS, W_NB, W_DL, W_NCOLS };

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

/* $1..$13 as in W_*, $14 the forward lease in ms, $15 the forward sequences,
 * $16 whether a committed one was forwarded already (a progress marker
 * says so: assign_seqs), $17 the source topics, $18 the tenants (the row's for
 * good), $19 and $20 the traceparents and tracestates (CONTRACT §15), $21 and
 * $22 the not_befores and delays (delayed delivery). New rows go in by COPY
 * (store_copy_rows) unless the batch has a delayed one (its due time is computed
 * here) or the role may not COPY (row-level security). Neither says ON
 * CONFLICT: the batch read its keys under lock first (SQL_LOCK), so a key
 * is stored already only if another replica inserted it since, and then the
 * primary key refuses the statement (not_the_datas: the batch is applied
 * again, and finds the row). ON CONFLICT DO NOTHING made every row a
 * speculative insertion, whose confirmation is one more WAL record per
 * message (48 bytes, issue 22). */
static const char *SQL_INSERT =
	"INSERT INTO txhub.message_rows AS m (biz_id, message_key, status, decision, send_status, "
	"payload, forward_topic, forward_key, forward_headers, checkback_url, next_check_at, "
	"next_send_at, src_partition, src_offset, fwd_seq, src_topic, tenant, traceparent, "
	"tracestate, trace_id, not_before) "
	"SELECT x.b, x.k, x.s, x.d, "
	"CASE WHEN x.c THEN CASE WHEN x.sn AND NOT d.late THEN 'sent' ELSE 'pending' END END, "
	"decode(x.p, 'hex'), x.ft, x.fk, x.fh::jsonb, x.cu, "
	"CASE WHEN x.s = 'prepared' THEN now() + x.fa * interval '1 millisecond' END, "
	"CASE WHEN d.late THEN d.due WHEN x.c THEN now() + $14::bigint * interval '1 millisecond' "
	"ELSE " SQL_AFTER_EPOCH("x.dl") " END, x.sp, x.so, CASE WHEN NOT d.late THEN x.sq END, "
	"x.st, x.tn, x.trp, x.trs, substr(x.trp, 4, 32), CASE WHEN x.c THEN d.due ELSE d.nb END "
	"FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bool[], $6::text[], "
	"$7::text[], $8::text[], $9::text[], $10::text[], $11::bigint[], $12::int[], $13::bigint[], "
	"$15::bigint[], $16::bool[], $17::text[], $18::text[], $19::text[], $20::text[], "
	"$21::bigint[], $22::bigint[]) "
	"AS x(b, k, s, d, c, p, ft, fk, fh, cu, fa, sp, so, sq, sn, st, tn, trp, trs, nb, dl) "
	"CROSS JOIN LATERAL (SELECT " SQL_AFTER_EPOCH("x.nb") " AS nb) n "
	"CROSS JOIN LATERAL (SELECT n.nb, coalesce(n.nb, now() + x.dl * interval '1 millisecond') "
	"AS due) e CROSS JOIN LATERAL (SELECT e.nb, e.due, x.c AND coalesce(e.due > now(), false) "
	"AS late) d "
	"RETURNING m.status = 'committed' AND m.send_status = 'pending' AND m.fwd_seq IS NOT NULL, "
	"m.status = 'committed' AND m.fwd_seq IS NULL AND m.not_before > now(), " FORWARD_COLUMNS;

/* The new rows of a batch go in by COPY when they can (store_copy_rows): COPY
 * writes a page's rows as one WAL record, where each INSERTed row is a
 * record of its own, about 45 bytes less per message (issue 22); the
 * forwards are read back by key (SQL_READ_BACK) as SQL_INSERT returns
 * them. The columns of SQL_INSERT, in its order; not_before stays NULL (a
 * batch with a delayed message goes by SQL_INSERT). */
static const char *SQL_COPY =
	"COPY txhub.message_rows (biz_id, message_key, status, decision, send_status, payload, "
	"forward_topic, forward_key, forward_headers, checkback_url, next_check_at, next_send_at, "
	"src_partition, src_offset, fwd_seq, src_topic, tenant, traceparent, tracestate, trace_id) "
	"FROM STDIN";

/* The transaction's now() in microseconds since 1970 (COPY has no
 * expressions: next_check_at and next_send_at are computed from it). */
static const char *SQL_NOW_US = "SELECT (extract(epoch FROM now()) * 1000000)::bigint";

/* $1, $2: the keys of the rows copied that became committed and are not
 * sent yet; the columns SQL_INSERT returns. Each key by the primary key
 * (OFFSET 0: a join would read a young table whole, its statistics
 * behind the rows just written). */
static const char *SQL_READ_BACK =
	"SELECT m.status = 'committed' AND m.send_status = 'pending' AND m.fwd_seq IS NOT NULL, "
	"m.status = 'committed' AND m.fwd_seq IS NULL AND m.not_before > now(), " FORWARD_COLUMNS
	" FROM unnest($1::text[], $2::text[]) AS x(b, k) "
	"CROSS JOIN LATERAL (SELECT * FROM txhub.message_rows r "
	"WHERE r.biz_id = x.b AND r.message_key = x.k OFFSET 0) m";

/* same columns, $14 the lease, $15 whether the row takes the payload (and
 * its trace), $16 the forward sequences, $17 forwarded already, $18 the
 * source topics, $19 and $20 the traceparents and tracestates, $21 and $22
 * the not_befores and delays as in SQL_INSERT */
#define UPD_NB "CASE WHEN x.tp THEN " SQL_AFTER_EPOCH("x.nb") " ELSE m.not_before END"
#define UPD_DUE                                                                     \
	"coalesce(" UPD_NB ", now() + CASE WHEN x.tp THEN x.dl * interval '1 millisecond' " \
	"ELSE m.next_send_at - 'epoch'::timestamptz END)"
#define UPD_LATE "(x.c AND coalesce(" UPD_DUE " > now(), false))"
static const char *SQL_UPDATE =
	"UPDATE txhub.message_rows AS m SET status = x.s, decision = x.d, "
	"send_status = CASE WHEN x.c THEN CASE WHEN x.sn AND NOT " UPD_LATE " THEN 'sent' "
	"ELSE 'pending' END ELSE m.send_status END, "
	"send_attempts = CASE WHEN x.c THEN 0 ELSE m.send_attempts END, "
	"next_send_at = CASE WHEN " UPD_LATE " THEN " UPD_DUE " "
	"WHEN x.c THEN now() + $14::bigint * interval '1 millisecond' "
	"WHEN x.tp THEN " SQL_AFTER_EPOCH("x.dl") " ELSE m.next_send_at END, "
	"not_before = CASE WHEN x.c THEN " UPD_DUE " ELSE " UPD_NB " END, "
	"payload = CASE WHEN x.tp THEN decode(x.p, 'hex') ELSE m.payload END, "
	"forward_topic = CASE WHEN x.tp THEN x.ft ELSE m.forward_topic END, "
	"forward_key = CASE WHEN x.tp THEN x.fk ELSE m.forward_key END, "
	"forward_headers = CASE WHEN x.tp THEN x.fh::jsonb ELSE m.forward_headers END, "
	"checkback_url = CASE WHEN x.tp THEN x.cu ELSE m.checkback_url END, "
	"traceparent = CASE WHEN x.tp THEN x.trp ELSE m.traceparent END, "
	"tracestate = CASE WHEN x.tp THEN x.trs ELSE m.tracestate END, "
	"trace_id = CASE WHEN x.tp THEN substr(x.trp, 4, 32) ELSE m.trace_id END, "
	"src_topic = x.st, src_partition = x.sp, src_offset = x.so, updated_at = now(), "
	"fwd_seq = CASE WHEN " UPD_LATE " THEN NULL WHEN x.c THEN x.sq ELSE m.fwd_seq END "
	"FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bool[], $6::text[], "
	"$7::text[], $8::text[], $9::text[], $10::text[], $11::bigint[], $12::int[], $13::bigint[], "
	"$15::bool[], $16::bigint[], $17::bool[], $18::text[], $19::text[], $20::text[], "
	"$21::bigint[], $22::bigint[]) "
	"AS x(b, k, s, d, c, p, ft, fk, fh, cu, fa, sp, so, tp, sq, sn, st, trp, trs, nb, dl) "
	"WHERE m.biz_id = x.b AND m.message_key = x.k "
	"RETURNING x.c AND NOT x.sn AND m.fwd_seq IS NOT NULL, "
	"x.c AND m.fwd_seq IS NULL AND m.not_before > now(), " FORWARD_COLUMNS;
#undef UPD_LATE
#undef UPD_DUE
#undef UPD_NB

static const char *SQL_CONFLICTS =
	"INSERT INTO txhub.conflicts (biz_id, message_key, arrived, met_status, detail, "
	"src_topic, src_partition, src_offset, tenant) "
	"SELECT x.b, x.k, x.a, x.m, x.d, x.t, x.p, x.o, x.tn "
	"FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], "
	"$7::int[], $8::bigint[], $9::text[]) AS x(b, k, a, m, d, t, p, o, tn) "
	"ON CONFLICT (src_topic, src_partition, src_offset) WHERE src_offset IS NOT NULL "
	"DO NOTHING";

static const char *SQL_REJECTED =
	"INSERT INTO txhub.rejected (src_topic, src_partition, src_offset, record_key, "
	"record_value, reason, tenant) "
	"SELECT x.t, x.p, x.o, decode(x.k, 'hex'), decode(x.v, 'hex'), x.r, x.tn "
	"FROM unnest($1::text[], $2::int[], $3::bigint[], $4::text[], $5::text[], $6::text[], "
	"$7::text[]) AS x(t, p, o, k, v, r, tn) "
	"ON CONFLICT (src_topic, src_partition, src_offset) DO NOTHING";

/* ---- partition ownership ----
 *
 * Every partition is a (topic, partition) pair (tp_key): SQL gets two
 * arrays, the topics' names and the partitions, unnested side by side. */

/* Columns of a txhub.partitions row, in the order read_partition_row()
 * expects. */
#define PARTITION_COLUMNS                                                          \
	"tp.topic, tp.partition, tp.epoch, tp.owner, coalesce(tp.group_id, ''), "        \
	"coalesce(ceil(extract(epoch FROM now() - tp.heartbeat_at) * 1000)::bigint, -1), " \
	"tp.released_at IS NOT NULL, coalesce(tp.contested_by, ''), "                   \
	"coalesce(ceil(extract(epoch FROM now() - tp.contested_at) * 1000)::bigint, -1)"

/* The key of a row whose first two columns are a topic and a partition. */
tp_key store_row_tp(const PGresult *r, int row)
{
	return tp_of(PQgetvalue(r, row, 0), (int32_t)atoi(PQgetvalue(r, row, 1)));
}

static void read_partition_row(const PGresult *r, int row, store_partition_row *out)
{
	memset(out, 0, sizeof *out);
	out->tp = store_row_tp(r, row);
	out->epoch = atoll(PQgetvalue(r, row, 2));
	snprintf(out->owner, sizeof out->owner, "%s", PQgetvalue(r, row, 3));
	snprintf(out->group, sizeof out->group, "%s", PQgetvalue(r, row, 4));
	out->heartbeat_age_ms = atoll(PQgetvalue(r, row, 5));
	out->released = PQgetvalue(r, row, 6)[0] == 't';
	snprintf(out->contested_by, sizeof out->contested_by, "%s", PQgetvalue(r, row, 7));
	out->contested_age_ms = atoll(PQgetvalue(r, row, 8));
}

/* The topics and the partitions of keys, as two arrays. */
static void tp_arrays(sbuf *tb, sbuf *pb, const tp_key *k, size_t n)
{
	sbuf_arr_begin(tb);
	sbuf_arr_begin(pb);
	for (size_t i = 0; i < n; i++) {
		sbuf_arr_text(tb, tp_topic(k[i]));
		sbuf_arr_int(pb, tp_part(k[i]));
	}
	sbuf_arr_end(tb);
	sbuf_arr_end(pb);
}

/* rows[i] for parts[i] from the rows of r (epoch 0 where r has none). */
static void match_partition_rows(const PGresult *r, const tp_key *parts, size_t n,
                                 store_partition_row *rows)
{
	for (size_t i = 0; i < n; i++) {
		memset(&rows[i], 0, sizeof rows[i]);
		rows[i].tp = parts[i];
		rows[i].heartbeat_age_ms = -1;
		rows[i].contested_age_ms = -1;
		for (int row = 0; row < PQntuples(r); row++)
			if (store_row_tp(r, row) == parts[i])
				read_partition_row(r, row, &rows[i]);
	}
}

store_rc store_take_partitions(store *st, const char *owner, const char *group,
                               const tp_key *parts, size_t n, store_owned *own,
                               int64_t *next_offset, store_partition_row *prev, char *err,
                               size_t errsz)
{
	/* rows in (topic, partition) order, in both statements: two replicas
	 * taking overlapping sets cannot deadlock */
	static const char *sql_prev =
		"SELECT " PARTITION_COLUMNS " FROM txhub.partitions tp "
		"JOIN unnest($1::text[], $2::int[]) AS o(t, p) ON tp.topic = o.t AND tp.partition = o.p "
		"ORDER BY tp.topic, tp.partition FOR UPDATE OF tp";
	static const char *sql_take =
		"INSERT INTO txhub.partitions AS tp (topic, partition, epoch, owner, group_id, "
		"heartbeat_at) "
		"SELECT o.t, o.p, o.m + 1, $3, $4, now() "
		"FROM unnest($1::text[], $2::int[], $5::bigint[]) AS o(t, p, m) ORDER BY o.t, o.p "
		"ON CONFLICT (topic, partition) DO UPDATE SET "
		"epoch = greatest(tp.epoch, EXCLUDED.epoch - 1) + 1, "
		"owner = EXCLUDED.owner, group_id = EXCLUDED.group_id, taken_at = now(), "
		"updated_at = now(), heartbeat_at = now(), released_at = NULL, contested_by = NULL, "
		"contested_at = NULL "
		"RETURNING topic, partition, epoch, coalesce(next_offset, -1), fwd_origin";
	if (n == 0)
		return STORE_OK;
	sbuf tb = {0}, pb = {0};
	tp_arrays(&tb, &pb, parts, n);
	PGresult *r = NULL;
	store_rc rc = store_exec_simple(st, "BEGIN", err, errsz);
	if (rc != STORE_OK)
		goto done;
	const char *pp[2] = {sbuf_str(&tb), sbuf_str(&pb)};
	r = store_exec_params(st, sql_prev, 2, pp, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		rc = store_classify(st->conn, r, err, errsz);
		goto done;
	}
	if (prev)
		match_partition_rows(r, parts, n, prev);
	PQclear(r);
	r = NULL;
	/* never an epoch this store held before: a database that lost the
	 * take (its row back at an older epoch, or gone) must not give it out
	 * again, or this replica's old lanes and writes would pass for new */
	sbuf mb = {0};
	sbuf_arr_begin(&mb);
	for (size_t i = 0; i < n; i++) {
		const rewind_mark *k = rewind_find(&st->known, parts[i]);
		sbuf_arr_int(&mb, k ? k->epoch : 0);
	}
	sbuf_arr_end(&mb);
	const char *p[5] = {sbuf_str(&tb), sbuf_str(&pb), owner, group, sbuf_str(&mb)};
	r = mb.oom || tb.oom || pb.oom ? NULL : store_exec_params(st, sql_take, 5, p, 0);
	sbuf_free(&mb);
	if (!r) {
		snprintf(err, errsz, "out of memory");
		rc = STORE_RETRY;
		goto done;
	}
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		rc = store_classify(st->conn, r, err, errsz);
		goto done;
	}
	for (size_t i = 0; i < n; i++) {
		own[i].tp = parts[i];
		own[i].epoch = 0;
		next_offset[i] = -1;
		for (int row = 0; row < PQntuples(r); row++) {
			if (store_row_tp(r, row) != parts[i])
				continue;
			own[i].epoch = atoll(PQgetvalue(r, row, 2));
			next_offset[i] = atoll(PQgetvalue(r, row, 3));
		}
		if (own[i].epoch <= 0) {
			snprintf(err, errsz, "taking partition %d of %s returned no epoch",
			         tp_part(parts[i]), tp_topic(parts[i]));
			rc = STORE_RETRY;
			goto done;
		}
	}
	rc = store_exec_simple(st, "COMMIT", err, errsz);
	/* remembered once it is so: a take that did not commit changes nothing */
	for (size_t i = 0; rc == STORE_OK && i < n; i++)
		for (int row = 0; row < PQntuples(r); row++)
			if (store_row_tp(r, row) == parts[i] &&
			    rewind_taken(&st->known, parts[i], own[i].epoch, next_offset[i],
			                 PQgetvalue(r, row, 4)) != 0)
				log_warn("store: out of memory: partition %d of %s is not watched for a "
				         "database that loses its last transactions", tp_part(parts[i]),
				         tp_topic(parts[i]));
done:
	if (rc != STORE_OK)
		store_rollback(st);
	PQclear(r);
	sbuf_free(&tb);
	sbuf_free(&pb);
	return rc;
}

/* The topics, partitions and (when eb is not NULL) epochs of own, as
 * arrays. */
void store_owned_arrays(sbuf *tb, sbuf *pb, sbuf *eb, const store_owned *own, size_t n)
{
	sbuf_arr_begin(tb);
	sbuf_arr_begin(pb);
	if (eb)
		sbuf_arr_begin(eb);
	for (size_t i = 0; i < n; i++) {
		sbuf_arr_text(tb, tp_topic(own[i].tp));
		sbuf_arr_int(pb, tp_part(own[i].tp));
		if (eb)
			sbuf_arr_int(eb, own[i].epoch);
	}
	sbuf_arr_end(tb);
	sbuf_arr_end(pb);
	if (eb)
		sbuf_arr_end(eb);
}

store_rc store_check_history(store *st, const store_owned *own, size_t nown,
                             store_rewound **out, size_t *nout, char *err, size_t errsz)
{
	static const char *sql =
		"SELECT tp.topic, tp.partition, tp.epoch, coalesce(tp.next_offset, -1), tp.fwd_origin "
		"FROM txhub.partitions tp JOIN unnest($1::text[], $2::int[]) AS o(t, p) "
		"ON tp.topic = o.t AND tp.partition = o.p";
	*out = NULL;
	*nout = 0;
	if (nown == 0)
		return STORE_OK;
	sbuf tb = {0}, pb = {0};
	store_owned_arrays(&tb, &pb, NULL, own, nown);
	const char *p[2] = {sbuf_str(&tb), sbuf_str(&pb)};
	PGresult *r = store_exec_params(st, sql, 2, p, 0);
	store_rc rc = STORE_OK;
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		rc = store_classify(st->conn, r, err, errsz);
		goto done;
	}
	if (!(*out = calloc(nown, sizeof **out))) {
		snprintf(err, errsz, "out of memory");
		rc = STORE_RETRY;
		goto done;
	}
	for (size_t i = 0; i < nown; i++) {
		rewind_row db = {.next_offset = -1};
		for (int row = 0; row < PQntuples(r); row++) {
			if (store_row_tp(r, row) != own[i].tp)
				continue;
			db.present = 1;
			db.epoch = atoll(PQgetvalue(r, row, 2));
			db.next_offset = atoll(PQgetvalue(r, row, 3));
			snprintf(db.origin, sizeof db.origin, "%s", PQgetvalue(r, row, 4));
		}
		const rewind_mark *m = rewind_find(&st->known, own[i].tp);
		rewind_verdict v = rewind_judge(m, own[i].epoch, &db);
		if (v <= REWIND_FENCED)
			continue;
		(*out)[(*nout)++] = (store_rewound){own[i].tp, (int)v, own[i].epoch,
		                                    m->next_offset, db.epoch, db.next_offset};
	}
done:
	PQclear(r);
	sbuf_free(&tb);
	sbuf_free(&pb);
	return rc;
}

store_rc store_partition_rows(store *st, const tp_key *parts, size_t n,
                              store_partition_row *rows, char *err, size_t errsz)
{
	static const char *sql = "SELECT " PARTITION_COLUMNS " FROM txhub.partitions tp "
	                         "JOIN unnest($1::text[], $2::int[]) AS o(t, p) "
	                         "ON tp.topic = o.t AND tp.partition = o.p";
	if (n == 0)
		return STORE_OK;
	sbuf tb = {0}, pb = {0};
	tp_arrays(&tb, &pb, parts, n);
	const char *p[2] = {sbuf_str(&tb), sbuf_str(&pb)};
	PGresult *r = store_exec_params(st, sql, 2, p, 0);
	store_rc rc = STORE_OK;
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		rc = store_classify(st->conn, r, err, errsz);
	else
		match_partition_rows(r, parts, n, rows);
	PQclear(r);
	sbuf_free(&tb);
	sbuf_free(&pb);
	return rc;
}

/* Run sql ($1 topics, $2 partitions, $3 epochs of own; returns
 * PARTITION_COLUMNS of the rows it touched): *rows (caller frees) receives
 * them, *lost (caller frees) the owned partitions it did not touch. */
static store_rc update_owned(store *st, const char *sql, const store_owned *own, size_t nown,
                             store_partition_row **rows, size_t *nrows, tp_key **lost,
                             size_t *nlost, char *err, size_t errsz)
{
	*rows = NULL;
	*nrows = 0;
	*lost = NULL;
	*nlost = 0;
	if (nown == 0)
		return STORE_OK;
	sbuf tb = {0}, pb = {0}, eb = {0};
	store_owned_arrays(&tb, &pb, &eb, own, nown);
	const char *p[3] = {sbuf_str(&tb), sbuf_str(&pb), sbuf_str(&eb)};
	PGresult *r = store_exec_params(st, sql, 3, p, 0);
	store_rc rc = STORE_OK;
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		rc = store_classify(st->conn, r, err, errsz);
		goto done;
	}
	*rows = calloc(nown, sizeof **rows);
	*lost = calloc(nown, sizeof **lost);
	if (!*rows || !*lost) {
		snprintf(err, errsz, "out of memory");
		rc = STORE_RETRY;
		goto done;
	}
	for (int row = 0; row < PQntuples(r) && *nrows < nown; row++)
		read_partition_row(r, row, &(*rows)[(*nrows)++]);
	for (size_t i = 0; i < nown; i++) {
		int found = 0;
		for (size_t k = 0; k < *nrows && !found; k++)
			found = (*rows)[k].tp == own[i].tp;
		if (!found)
			(*lost)[(*nlost)++] = own[i].tp;
	}
done:
	PQclear(r);
	sbuf_free(&tb);
	sbuf_free(&pb);
	sbuf_free(&eb);
	return rc;
}

#define SQL_UPDATE_OWNED(set)                                                     \
	"UPDATE txhub.partitions AS tp SET " set " "                                 \
	"FROM unnest($1::text[], $2::int[], $3::bigint[]) AS o(t, p, e) "             \
	"WHERE tp.topic = o.t AND tp.partition = o.p AND tp.epoch = o.e "             \
	"RETURNING " PARTITION_COLUMNS

store_rc store_heartbeat(store *st, const store_owned *own, size_t nown,
                         store_partition_row **rows, size_t *nrows, tp_key **lost,
                         size_t *nlost, char *err, size_t errsz)
{
	return update_owned(st, SQL_UPDATE_OWNED("heartbeat_at = now()"), own, nown, rows, nrows,
	                    lost, nlost, err, errsz);
}

store_rc store_release_partitions(store *st, const store_owned *own, size_t nown, char *err,
                                  size_t errsz)
{
	store_partition_row *rows;
	tp_key *lost;
	size_t nrows, nlost;
	store_rc rc = update_owned(st, SQL_UPDATE_OWNED("released_at = now()"), own, nown, &rows,
	                           &nrows, &lost, &nlost, err, errsz);
	free(rows);
	free(lost);
	return rc;
}

store_rc store_contest_partitions(store *st, const store_owned *held, size_t n,
                                  const char *group, char *err, size_t errsz)
{
	static const char *sql =
		"UPDATE txhub.partitions AS tp SET contested_by = $4, contested_at = now() "
		"FROM unnest($1::text[], $2::int[], $3::bigint[]) AS o(t, p, e) "
		"WHERE tp.topic = o.t AND tp.partition = o.p AND tp.epoch = o.e";
	if (n == 0)
		return STORE_OK;
	sbuf tb = {0}, pb = {0}, eb = {0};
	store_owned_arrays(&tb, &pb, &eb, held, n);
	const char *p[4] = {sbuf_str(&tb), sbuf_str(&pb), sbuf_str(&eb), group};
	store_rc rc = store_exec_command(st, sql, 4, p, err, errsz);
	sbuf_free(&tb);
	sbuf_free(&pb);
	sbuf_free(&eb);
	return rc;
}

int64_t store_epoch_of(const store_owned *own, size_t nown, tp_key tp)
{
	for (size_t i = 0; i < nown; i++)
		if (own[i].tp == tp)
			return own[i].epoch;
	return 0;
}

/* The sequences of txhub.partitions.fwd_dead as array_to_string() wrote
 * them ("1048576,3145728"), at most max into out; returns how many. */
static size_t seq_list(const char *s, int64_t *out, size_t max)
{
	size_t n = 0;
	while (*s && n < max) {
		char *end;
		long long v = strtoll(s, &end, 10);
		if (end == s)
			break;
		out[n++] = v;
		s = *end == ',' ? end + 1 : end;
	}
	return n;
}

static store_rc lock_owned(store *st, const store_owned *own, size_t nown, owned_lock mode,
                           store_owned **kept, size_t *nkept, char *err, size_t errsz)
{
	return store_lock_owned_seq(st, own, nown, mode, kept, nkept, NULL, err, errsz);
}

/* lock_owned(), and rows[i] (when not NULL, nown long) the row of
 * (*kept)[i]'s partition as locked. */
store_rc store_lock_owned_seq(store *st, const store_owned *own, size_t nown, owned_lock mode,
                               store_owned **kept, size_t *nkept, owned_row *rows, char *err,
                               size_t errsz)
{
#define SQL_OWNED_ROWS                                                             \
	"SELECT tp.topic, tp.partition, tp.epoch, tp.next_fwd_seq, "                     \
	"coalesce(tp.next_offset, -1), tp.fwd_origin, coalesce(tp.fwd_sent_upto, -1), "  \
	"coalesce(tp.fwd_unsure_from, -1), coalesce(array_to_string(tp.fwd_dead, ','), '') " \
	"FROM txhub.partitions tp "                                                     \
	"JOIN unnest($1::text[], $2::int[], $3::bigint[]) AS o(t, p, e) "              \
	"ON tp.topic = o.t AND tp.partition = o.p AND tp.epoch = o.e "                 \
	"ORDER BY tp.topic, tp.partition "
	static const char *sql[] = {SQL_OWNED_ROWS "FOR NO KEY UPDATE OF tp",
	                            SQL_OWNED_ROWS "FOR SHARE OF tp",
	                            SQL_OWNED_ROWS "FOR KEY SHARE OF tp"};
#undef SQL_OWNED_ROWS
	*nkept = 0;
	if (!(*kept = calloc(nown ? nown : 1, sizeof **kept))) {
		snprintf(err, errsz, "out of memory");
		return STORE_RETRY;
	}
	if (nown == 0)
		return STORE_OK;
	sbuf tb = {0}, pb = {0}, eb = {0};
	store_owned_arrays(&tb, &pb, &eb, own, nown);
	const char *p[3] = {sbuf_str(&tb), sbuf_str(&pb), sbuf_str(&eb)};
	store_rc rc = STORE_OK;
	PGresult *r = store_exec_params(st, sql[mode], 3, p, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		rc = store_classify(st->conn, r, err, errsz);
	} else {
		for (int row = 0; row < PQntuples(r) && *nkept < nown; row++) {
			(*kept)[*nkept].tp = store_row_tp(r, row);
			(*kept)[*nkept].epoch = atoll(PQgetvalue(r, row, 2));
			if (rows) {
				owned_row *o = &rows[*nkept];
				o->next_seq = atoll(PQgetvalue(r, row, 3));
				o->db.present = 1;
				o->db.epoch = (*kept)[*nkept].epoch;
				o->db.next_offset = atoll(PQgetvalue(r, row, 4));
				snprintf(o->db.origin, sizeof o->db.origin, "%s", PQgetvalue(r, row, 5));
				o->sent_upto = atoll(PQgetvalue(r, row, 6));
				o->unsure_from = atoll(PQgetvalue(r, row, 7));
				o->ndead = seq_list(PQgetvalue(r, row, 8), o->dead, STORE_MARKER_DEAD_MAX);
			}
			(*nkept)++;
		}
	}
	PQclear(r);
	sbuf_free(&tb);
	sbuf_free(&pb);
	sbuf_free(&eb);
	return rc;
}

/* BEGIN, then lock_owned() (*kept: caller frees, also on failure). */
store_rc store_begin_locked(store *st, owned_lock mode, const store_owned *own, size_t nown,
                             store_owned **kept, size_t *nkept, char *err, size_t errsz)
{
	*kept = NULL;
	store_rc rc = store_exec_simple(st, "BEGIN", err, errsz);
	if (rc == STORE_OK)
		rc = lock_owned(st, own, nown, mode, kept, nkept, err, errsz);
	if (rc != STORE_OK)
		store_rollback(st);
	return rc;
}

/* BEGIN, then lock_owned() shared (*kept: caller frees, also on failure). */
store_rc store_begin_owned(store *st, const store_owned *own, size_t nown, store_owned **kept,
                            size_t *nkept, char *err, size_t errsz)
{
	return store_begin_locked(st, OWNED_SHARED, own, nown, kept, nkept, err, errsz);
}

/* In one transaction: lock the owned partitions (shared), run sql with $1
 * and $2 the topics and partitions of those still ours and $3.. the extra
 * parameters, and commit. On STORE_OK *res holds sql's rows (caller
 * clears) and *nkept how many partitions were still ours. fmt: 0 text
 * results, 1 binary. */
store_rc store_run_owned(store *st, const store_owned *own, size_t nown, const char *sql,
                          const char *const *extra, int nextra, int fmt, PGresult **res,
                          size_t *nkept, char *err, size_t errsz)
{
	store_owned *kept = NULL;
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
	store_owned *own; /* epoch 0: not in own */
	int64_t *next;
	int64_t *seq;     /* the partition's next forward sequence (read under the lock) */
	owned_row *rows;  /* the rows as locked (fence_batch) */
	size_t n;
} batch_parts;

static int batch_parts_of(const store_record *recs, size_t n, const store_owned *own,
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
	store_owned *kept = NULL;
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

/* Whether every array of w[0..n) was built whole (an allocation failed
 * otherwise, which is ours to retry, not a record's fault). */
store_rc store_arrays_ok(const sbuf *w, size_t n, char *err, size_t errsz)
{
	for (size_t i = 0; i < n; i++) {
		if (w[i].oom) {
			snprintf(err, errsz, "out of memory building the batch");
			return STORE_RETRY;
		}
	}
	return STORE_OK;
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

/* A primary key violation of the new rows: another replica inserted one of
 * them since the batch read its keys (SQL_LOCK), which is not the data's
 * fault: the batch is applied again, and finds the row. */
store_rc store_not_the_datas(const PGresult *r, store_rc rc, char *err, size_t errsz)
{
	const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	if (rc == STORE_REFUSED && state && strcmp(state, "23505") == 0) {
		snprintf(err, errsz, "another replica inserted some of this batch's messages "
		                     "first; applying the batch again");
		rc = STORE_RETRY;
	}
	return rc;
}

/* SQL_INSERT or SQL_UPDATE over the row arrays w, with the forward lease;
 * the UPDATE also takes W_TP. *res keeps the rows it returned. */
static store_rc exec_rows(store *st, const char *sql, sbuf *w, int update, PGresult **res,
                          char *err, size_t errsz)
{
	char lease[32];
	const char *p[22];
	snprintf(lease, sizeof lease, "%lld", (long long)st->lease_ms);
	for (int c = 0; c < 13; c++)
		p[c] = sbuf_str(&w[c]);
	p[13] = lease;
	int n = 14;
	if (update)
		p[n++] = sbuf_str(&w[W_TP]);
	p[n++] = sbuf_str(&w[W_SQ]);
	p[n++] = sbuf_str(&w[W_SN]);
	p[n++] = sbuf_str(&w[W_ST]);
	if (!update) /* a stored message's tenant never changes */
		p[n++] = sbuf_str(&w[W_TN]);
	p[n++] = sbuf_str(&w[W_TRP]);
	p[n++] = sbuf_str(&w[W_TRS]);
	p[n++] = sbuf_str(&w[W_NB]);
	p[n++] = sbuf_str(&w[W_DL]);
	*res = store_exec_params(st, sql, n, p, 1);
	if (PQresultStatus(*res) == PGRES_TUPLES_OK)
		return STORE_OK;
	store_rc rc = store_classify(st->conn, *res, err, errsz);
	return update ? rc : store_not_the_datas(*res, rc, err, errsz);
}

/* One row of the INSERT or UPDATE arrays: key k's final state, and the
 * prepare it takes (NULL columns and tp false when it keeps the stored one). */
static void write_row(sbuf *w, const fold_key *k, int64_t seq, int sent,
                      const store_record *recs, int64_t default_first_after)
{
	sbuf_arr_bool(&w[W_SN], sent);
	const envelope *pe = k->payload_rec >= 0 ? &recs[k->payload_rec].env : NULL;
	sbuf_arr_text(&w[W_B], k->biz_id);
	sbuf_arr_text(&w[W_K], k->message_key);
	sbuf_arr_text(&w[W_S], rules_status_name(k->state.status));
	sbuf_arr_text(&w[W_D], k->state.status == STATUS_AWAITING_PREPARE
	                           ? rules_decision_name(k->state.decision) : NULL);
	sbuf_arr_bool(&w[W_C], k->committed);
	sbuf_arr_hex(&w[W_P], pe ? (pe->payload ? (const void *)pe->payload : "") : NULL,
	             pe ? pe->payload_len : 0);
	sbuf_arr_text(&w[W_FT], pe ? pe->forward_topic : NULL);
	sbuf_arr_text(&w[W_FK], pe ? pe->forward_key : NULL);
	sbuf_arr_text(&w[W_FH], pe ? pe->forward_headers : NULL);
	sbuf_arr_text(&w[W_CU], pe ? pe->checkback_url : NULL);
	sbuf_arr_int(&w[W_FA], pe && pe->first_after_ms >= 0 ? pe->first_after_ms
	                                                     : default_first_after);
	sbuf_arr_text(&w[W_ST], k->src_topic);
	sbuf_arr_int(&w[W_SP], k->src_partition);
	sbuf_arr_int(&w[W_SO], k->src_offset);
	sbuf_arr_bool(&w[W_TP], pe != NULL);
	sbuf_arr_text(&w[W_TN], k->tenant[0] ? k->tenant : NULL);
	sbuf_arr_text(&w[W_TRP], pe ? pe->traceparent : NULL);
	sbuf_arr_text(&w[W_TRS], pe ? pe->tracestate : NULL);
	/* delayed delivery: NULL where the prepare asked for none */
	if (pe && pe->not_before_ms >= 0)
		sbuf_arr_int(&w[W_NB], pe->not_before_ms);
	else
		sbuf_arr_text(&w[W_NB], NULL);
	if (pe && pe->delay_ms >= 0)
		sbuf_arr_int(&w[W_DL], pe->delay_ms);
	else
		sbuf_arr_text(&w[W_DL], NULL);
	if (seq > 0)
		sbuf_arr_int(&w[W_SQ], seq);
	else
		sbuf_arr_text(&w[W_SQ], NULL);
}

/* A timestamp of COPY's text format, us microseconds since 1970, in UTC. */
static void copy_time(sbuf *b, int64_t us)
{
	time_t sec = (time_t)(us / 1000000);
	struct tm tm;
	gmtime_r(&sec, &tm);
	sbuf_printf(b, "%04d-%02d-%02d %02d:%02d:%02d.%06d+00\t", tm.tm_year + 1900, tm.tm_mon + 1,
	            tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(us % 1000000));
}

/* One row of the COPY, as write_row() for SQL_INSERT; now_us the
 * transaction's now(). */
static void copy_row(sbuf *c, const fold_key *k, int64_t seq, int sent, const store_record *recs,
                     int64_t default_first_after, int64_t lease_ms, int64_t now_us)
{
	const envelope *pe = k->payload_rec >= 0 ? &recs[k->payload_rec].env : NULL;
	sbuf_copy_text(c, k->biz_id);
	sbuf_copy_text(c, k->message_key);
	sbuf_copy_text(c, rules_status_name(k->state.status));
	sbuf_copy_text(c, k->state.status == STATUS_AWAITING_PREPARE
	                      ? rules_decision_name(k->state.decision) : NULL);
	sbuf_copy_text(c, k->committed ? (sent ? "sent" : "pending") : NULL);
	sbuf_copy_hex(c, pe ? (pe->payload ? (const void *)pe->payload : "") : NULL,
	              pe ? pe->payload_len : 0);
	sbuf_copy_text(c, pe ? pe->forward_topic : NULL);
	sbuf_copy_text(c, pe ? pe->forward_key : NULL);
	sbuf_copy_text(c, pe ? pe->forward_headers : NULL);
	sbuf_copy_text(c, pe ? pe->checkback_url : NULL);
	if (k->state.status == STATUS_PREPARED)
		copy_time(c, now_us + 1000 * (pe && pe->first_after_ms >= 0 ? pe->first_after_ms
		                                                           : default_first_after));
	else
		sbuf_copy_text(c, NULL);
	if (k->committed)
		copy_time(c, now_us + 1000 * lease_ms);
	else
		sbuf_copy_text(c, NULL);
	sbuf_copy_int(c, k->src_partition);
	sbuf_copy_int(c, k->src_offset);
	if (seq > 0)
		sbuf_copy_int(c, seq);
	else
		sbuf_copy_text(c, NULL);
	sbuf_copy_text(c, k->src_topic);
	sbuf_copy_text(c, k->tenant[0] ? k->tenant : NULL);
	const char *tp = pe ? pe->traceparent : NULL;
	sbuf_copy_text(c, tp);
	sbuf_copy_text(c, pe ? pe->tracestate : NULL);
	char trace_id[33] = ""; /* as SQL_INSERT's substr(traceparent, 4, 32) */
	if (tp && strlen(tp) >= 35)
		memcpy(trace_id, tp + 3, 32);
	sbuf_copy_text(c, trace_id[0] ? trace_id : NULL);
	sbuf_copy_end(c);
}

/* The new rows of f by COPY, then the forwards of those that became
 * committed read back into *res (NULL when none). */
store_rc store_copy_rows(store *st, const fold *f, const int64_t *seq,
                          const unsigned char *sent, const store_record *recs, PGresult **res,
                          char *err, size_t errsz)
{
	sbuf c = {0}, kb = {0}, kk = {0};
	store_rc rc = STORE_OK;
	PGresult *r = PQexec(st->conn, SQL_NOW_US);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		rc = store_classify(st->conn, r, err, errsz);
		PQclear(r);
		return rc == STORE_REFUSED ? STORE_RETRY : rc;
	}
	int64_t now_us = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	size_t nback = 0;
	sbuf_arr_begin(&kb);
	sbuf_arr_begin(&kk);
	for (size_t i = 0; i < f->nkeys; i++) {
		const fold_key *k = &f->keys[i];
		if (!k->changed || k->existed)
			continue;
		copy_row(&c, k, seq[i], sent[i], recs, st->first_after_ms, st->lease_ms, now_us);
		if (k->committed && !sent[i]) {
			sbuf_arr_text(&kb, k->biz_id);
			sbuf_arr_text(&kk, k->message_key);
			nback++;
		}
	}
	sbuf_arr_end(&kb);
	sbuf_arr_end(&kk);
	if (c.oom || kb.oom || kk.oom) {
		snprintf(err, errsz, "out of memory");
		rc = STORE_RETRY;
		goto done;
	}
	r = PQexec(st->conn, SQL_COPY);
	if (PQresultStatus(r) != PGRES_COPY_IN) {
		const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
		rc = store_classify(st->conn, r, err, errsz);
		if (state && strcmp(state, "0A000") == 0) {
			/* "COPY FROM not supported with row-level security" */
			log_warn("store: PostgreSQL refuses COPY into txhub.message_rows to this role (%s); "
			         "new messages go in by INSERT from now on", err);
			st->copy_refused = 1;
			rc = STORE_RETRY;
		}
		PQclear(r);
		goto done;
	}
	PQclear(r);
	int ok = PQputCopyData(st->conn, c.data ? c.data : "", (int)c.len) == 1;
	ok = PQputCopyEnd(st->conn, ok ? NULL : "txhub: sending the rows failed") == 1 && ok;
	r = PQgetResult(st->conn);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		rc = store_not_the_datas(r, store_classify(st->conn, r, err, errsz), err, errsz);
	else if (!ok)
		rc = store_classify(st->conn, NULL, err, errsz);
	PQclear(r);
	while ((r = PQgetResult(st->conn)))
		PQclear(r);
	if (rc != STORE_OK || nback == 0)
		goto done;
	const char *p[2] = {sbuf_str(&kb), sbuf_str(&kk)};
	*res = store_exec_params(st, SQL_READ_BACK, 2, p, 1);
	if (PQresultStatus(*res) != PGRES_TUPLES_OK)
		rc = store_classify(st->conn, *res, err, errsz);
	else if ((size_t)PQntuples(*res) != nback) {
		snprintf(err, errsz, "read back %d of the %zu rows copied", PQntuples(*res), nback);
		rc = STORE_RETRY;
	}
done:
	sbuf_free(&c);
	sbuf_free(&kb);
	sbuf_free(&kk);
	return rc;
}

/* Write the final state of every key the batch changed: one INSERT for the
 * new ones, one UPDATE for the stored ones. *ins and *upd keep what they
 * returned (the messages that became committed). */
store_rc store_write_messages(store *st, const fold *f, const int64_t *seq,
                               const unsigned char *sent, const store_record *recs,
                               PGresult **ins, PGresult **upd, char *err, size_t errsz)
{
	sbuf iw[W_NCOLS] = {{0}}, uw[W_NCOLS] = {{0}};
	size_t nins = 0, nupd = 0;
	int delayed = 0; /* a new row with a due time: SQL_INSERT computes it */
	for (int c = 0; c < W_NCOLS; c++) {
		sbuf_arr_begin(&iw[c]);
		sbuf_arr_begin(&uw[c]);
	}
	for (size_t i = 0; i < f->nkeys; i++) {
		const fold_key *k = &f->keys[i];
		if (k->changed)
			write_row(k->existed ? uw : iw, k, seq[i], sent[i], recs, st->first_after_ms);
		nupd += k->changed && k->existed;
		nins += k->changed && !k->existed;
		const envelope *pe = k->payload_rec >= 0 ? &recs[k->payload_rec].env : NULL;
		delayed |= k->changed && !k->existed && pe && (pe->not_before_ms >= 0 || pe->delay_ms >= 0);
	}
	for (int c = 0; c < W_NCOLS; c++) {
		sbuf_arr_end(&iw[c]);
		sbuf_arr_end(&uw[c]);
	}
	store_rc rc = store_arrays_ok(iw, W_NCOLS, err, errsz);
	if (rc == STORE_OK)
		rc = store_arrays_ok(uw, W_NCOLS, err, errsz);
	if (rc == STORE_OK && nins > 0 && !st->copy_refused && !delayed)
		rc = store_copy_rows(st, f, seq, sent, recs, ins, err, errsz);
	else if (rc == STORE_OK && nins > 0)
		rc = exec_rows(st, SQL_INSERT, iw, 0, ins, err, errsz);
	if (rc == STORE_OK && nupd > 0)
		rc = exec_rows(st, SQL_UPDATE, uw, 1, upd, err, errsz);
	for (int c = 0; c < W_NCOLS; c++) {
		sbuf_free(&iw[c]);
		sbuf_free(&uw[c]);
	}
	return rc;
}

/* "committed", or "awaiting_prepare:commit" for a held decision. */
static void met_text(rules_state met, char *buf, size_t sz)
{
	int held = met.status == STATUS_AWAITING_PREPARE;
	snprintf(buf, sz, "%s%s%s", rules_status_name(met.status), held ? ":" : "",
	         held ? rules_decision_name(met.decision) : "");
}

/* Log the fold's conflicts and keep them in txhub.conflicts. */
store_rc store_write_conflicts(store *st, const fold *f,
                                const store_record *recs, char *err, size_t errsz)
{
	enum { C_B, C_K, C_A, C_M, C_D, C_T, C_P, C_O, C_TN, C_NCOLS };
	sbuf cw[C_NCOLS] = {{0}};
	if (f->nconflicts == 0)
		return STORE_OK;
	for (int c = 0; c < C_NCOLS; c++)
		sbuf_arr_begin(&cw[c]);
	for (size_t i = 0; i < f->nconflicts; i++) {
		const fold_conflict *fc = &f->conflicts[i];
		const store_record *rec = &recs[fc->rec];
		char met[64];
		met_text(fc->met, met, sizeof met);
		sbuf_arr_text(&cw[C_B], rec->env.biz_id);
		sbuf_arr_text(&cw[C_K], rec->env.message_key);
		sbuf_arr_text(&cw[C_A], rules_step_name(fc->step));
		sbuf_arr_text(&cw[C_M], met);
		char detail[160];
		/* a message of another tenant: named by the record's own tenant only */
		snprintf(detail, sizeof detail, "%s%s%s%s", fc->foreign ? "tenant " : "",
		         fc->foreign ? rec->tenant : "", fc->foreign ? ": " : "", fc->detail);
		sbuf_arr_text(&cw[C_D], detail);
		sbuf_arr_text(&cw[C_T], rec->src_topic);
		sbuf_arr_int(&cw[C_P], rec->partition);
		sbuf_arr_int(&cw[C_O], rec->offset);
		sbuf_arr_text(&cw[C_TN], rec->tenant[0] ? rec->tenant : NULL);
		log_about about = {rec->env.biz_id, rec->env.message_key, rec->tp, rec->env.trace_id};
		log_msg_about(LOG_WARN, "store: conflict", &about, "%s met %s (offset %lld)%s%s",
		              rules_step_name(fc->step), met, (long long)rec->offset,
		              fc->foreign ? ": " : "", fc->foreign ? detail : "");
	}
	for (int c = 0; c < C_NCOLS; c++)
		sbuf_arr_end(&cw[c]);
	store_rc rc = store_arrays_ok(cw, C_NCOLS, err, errsz);
	if (rc == STORE_OK) {
		const char *p[9] = {sbuf_str(&cw[C_B]), sbuf_str(&cw[C_K]), sbuf_str(&cw[C_A]),
		                    sbuf_str(&cw[C_M]), sbuf_str(&cw[C_D]), sbuf_str(&cw[C_T]),
		                    sbuf_str(&cw[C_P]), sbuf_str(&cw[C_O]), sbuf_str(&cw[C_TN])};
		rc = store_exec_command(st, SQL_CONFLICTS, 9, p, err, errsz);
	}
	for (int c = 0; c < C_NCOLS; c++)
		sbuf_free(&cw[c]);
	return rc;
}

/* Keep the batch's invalid records in txhub.rejected (CONTRACT §2). */
store_rc store_write_rejected(store *st, const store_record *recs, size_t n, char *err,
                               size_t errsz)
{
	enum { R_T, R_P, R_O, R_K, R_V, R_R, R_TN, R_NCOLS };
	sbuf rw[R_NCOLS] = {{0}};
	size_t nrej = 0;
	for (int c = 0; c < R_NCOLS; c++)
		sbuf_arr_begin(&rw[c]);
	for (size_t i = 0; i < n; i++) {
		if (recs[i].valid)
			continue;
		sbuf_arr_text(&rw[R_T], recs[i].src_topic);
		sbuf_arr_int(&rw[R_P], recs[i].partition);
		sbuf_arr_int(&rw[R_O], recs[i].offset);
		sbuf_arr_hex(&rw[R_K], recs[i].key, recs[i].key_len);
		sbuf_arr_hex(&rw[R_V], recs[i].value, recs[i].value_len);
		sbuf_arr_text(&rw[R_R], recs[i].reason);
		sbuf_arr_text(&rw[R_TN], recs[i].tenant[0] ? recs[i].tenant : NULL);
		nrej++;
	}
	for (int c = 0; c < R_NCOLS; c++)
		sbuf_arr_end(&rw[c]);
	store_rc rc = store_arrays_ok(rw, R_NCOLS, err, errsz);
	if (rc == STORE_OK && nrej > 0) {
		const char *p[7] = {sbuf_str(&rw[R_T]), sbuf_str(&rw[R_P]), sbuf_str(&rw[R_O]),
		                    sbuf_str(&rw[R_K]), sbuf_str(&rw[R_V]), sbuf_str(&rw[R_R]),
		                    sbuf_str(&rw[R_TN])};
		rc = store_exec_command(st, SQL_REJECTED, 7, p, err, errsz);
	}
	for (int c = 0; c < R_NCOLS; c++)
		sbuf_free(&rw[c]);
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

store_rc store_apply(store *st, store_record *recs, size_t n, const store_owned *own,
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

/* ---- forwards ---- */

/* store_claim_forwards, and with overdue_ms: the rows without a sequence
 * only once due that long (-1: none of them) */
static store_rc claim_forwards(store *st, const store_owned *own, size_t nown, int limit,
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

store_rc store_claim_forwards(store *st, const store_owned *own, size_t nown, int limit,
                              store_forward_list *out, char *err, size_t errsz)
{
	return claim_forwards(st, own, nown, limit, 0, out, err, errsz);
}

store_rc store_claim_lost_forwards(store *st, const store_owned *own, size_t nown, int limit,
                                   int64_t overdue_ms, store_forward_list *out, char *err,
                                   size_t errsz)
{
	return claim_forwards(st, own, nown, limit, overdue_ms, out, err, errsz);
}

store_rc store_next_send_due(store *st, const store_owned *own, size_t nown, int64_t *in_ms,
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

store_rc store_release_forwards(store *st, const store_owned *own, size_t nown, int clear_seqs,
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
	store_owned *kept = NULL;
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

store_rc store_record_deliveries(store *st, const store_owned *own, size_t nown,
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
	/* never back; a partition no longer ours is left to its new owner */
	static const char *sql_marks =
		"INSERT INTO txhub.forward_marks AS f (topic, partition, upto) "
		"SELECT x.t, x.p, x.u FROM unnest($1::text[], $2::int[], $3::bigint[]) AS x(t, p, u) "
		"WHERE (x.t, x.p) IN (SELECT * FROM unnest($4::text[], $5::int[])) ORDER BY x.t, x.p "
		"ON CONFLICT (topic, partition) DO UPDATE SET upto = EXCLUDED.upto, updated_at = now() "
		"WHERE f.upto < EXCLUDED.upto";
	sbuf ok[2] = {{0}}, bad[4] = {{0}}, rq[3] = {{0}}, kt = {0}, kb = {0}, mk[3] = {{0}};
	size_t nok = 0, nbad = 0, nrq = 0, nkept = 0, dropped = 0;
	store_rc rc = STORE_OK;
	PGresult *r = NULL;
	store_owned *kept = NULL;
	if ((rc = store_begin_locked(st, OWNED_CHECK_ONLY, own, nown, &kept, &nkept, err, errsz)) !=
	    STORE_OK)
		goto done;
	/* a row counts for the partition it belongs to now, not the one the
	 * report remembers */
	store_owned_arrays(&kt, &kb, NULL, kept, nkept);
	char maxs[16];
	snprintf(maxs, sizeof maxs, "%d", max_attempts);
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
			nrq++;
		} else if (d[i].ok && d[i].fwd_seq > 0) {
			continue; /* the mark says it */
		} else if (d[i].ok) {
			sbuf_arr_text(&ok[0], d[i].biz_id);
			sbuf_arr_text(&ok[1], d[i].message_key);
			nok++;
		} else {
			sbuf_arr_text(&bad[0], d[i].biz_id);
			sbuf_arr_text(&bad[1], d[i].message_key);
			sbuf_arr_text(&bad[2], d[i].error);
			sbuf_arr_int(&bad[3], d[i].retry_in_ms);
			nbad++;
		}
	}
	for (int i = 0; i < 2; i++)
		sbuf_arr_end(&ok[i]);
	for (int i = 0; i < 4; i++)
		sbuf_arr_end(&bad[i]);
	for (int i = 0; i < 3; i++)
		sbuf_arr_end(&rq[i]);
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
	if (nmarks > 0) {
		for (int i = 0; i < 3; i++)
			sbuf_arr_begin(&mk[i]);
		for (size_t i = 0; i < nmarks; i++) {
			sbuf_arr_text(&mk[0], tp_topic(marks[i].tp));
			sbuf_arr_int(&mk[1], tp_part(marks[i].tp));
			sbuf_arr_int(&mk[2], marks[i].upto);
		}
		for (int i = 0; i < 3; i++)
			sbuf_arr_end(&mk[i]);
		const char *p[5] = {sbuf_str(&mk[0]), sbuf_str(&mk[1]), sbuf_str(&mk[2]), sbuf_str(&kt),
		                    sbuf_str(&kb)};
		if ((rc = store_arrays_ok(mk, 3, err, errsz)) != STORE_OK ||
		    (rc = store_exec_command(st, sql_marks, 5, p, err, errsz)) != STORE_OK)
			goto done;
	}
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
	for (int i = 0; i < 3; i++)
		sbuf_free(&mk[i]);
	free(kept);
	return rc;
}

/* ---- exactly_once forwarding ---- */

store_rc store_sequence_forwards(store *st, const store_owned *own, size_t nown, int limit,
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
	store_owned *kept = NULL;
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
 * of the rows read again none from the database's own offset on if that
 * history sent or failed such a row there (the marker's oob: noted as
 * fwd_unsure_from), and that oob in fwd_lost_oob: rows prepared below it
 * and decided outside the control topic again may go out twice
 * (store_sequence_forwards counts them). $1 partition, $2 seq, $3 dead,
 * $4 unsure_from, $5
 * topic, $6 oob, $7 the lane's epoch, $8 STORE_SEQ_SHIFT. */
static store_rc recover_v2(store *st, const char *topic, const char *part, int64_t own_epoch,
                           const store_marker *m, int64_t *marked, char *err, size_t errsz)
{
#define BEHIND "(SELECT tp.next_fwd_seq <= $2::bigint FROM txhub.partitions tp " \
               "WHERE tp.topic = $5 AND tp.partition = $1::int)"
	static const char *sql_mark =
		"UPDATE txhub.message_rows SET send_status = 'sent', last_error = NULL, updated_at = now() "
		"WHERE src_partition = $1::int AND src_topic = $5 AND send_status = 'pending' "
		"AND fwd_seq <= $2::bigint AND fwd_seq > coalesce(" SQL_MARK_OF("$5", "$1::int") ", 0) "
		"AND NOT (fwd_seq = ANY($3::bigint[])) AND ($4::bigint IS NULL OR fwd_seq < $4::bigint) "
		"AND (NOT " BEHIND " OR fwd_seq = (src_offset + 1) << $6::int)";
	static const char *sql_note =
		"UPDATE txhub.partitions tp SET fwd_sent_upto = $2::bigint, fwd_dead = $3::bigint[], "
		"fwd_unsure_from = CASE WHEN tp.next_fwd_seq <= $2::bigint AND $6::bigint IS NOT NULL "
		"AND $6::bigint >= coalesce(tp.next_offset, 0) << $8::int "
		"THEN least($4::bigint, coalesce(tp.next_offset, 0) << $8::int) ELSE $4::bigint END, "
		"fwd_lost_oob = CASE WHEN tp.next_fwd_seq <= $2::bigint AND $6::bigint IS NOT NULL "
		"AND $6::bigint >= coalesce(tp.next_offset, 0) << $8::int "
		"THEN greatest(tp.fwd_lost_oob, $6::bigint) ELSE tp.fwd_lost_oob END, "
		"next_fwd_seq = greatest(tp.next_fwd_seq, $2::bigint + 1), fwd_recovered_epoch = $7 "
		"WHERE tp.topic = $5 AND tp.partition = $1::int";
#undef BEHIND
	char seq[32], unsure[32], oob[32], epoch[32], shift[8];
	sbuf db = {0};
	sbuf_arr_begin(&db);
	for (size_t i = 0; i < m->ndead; i++)
		sbuf_arr_int(&db, m->dead[i]);
	sbuf_arr_end(&db);
	snprintf(seq, sizeof seq, "%lld", (long long)m->seq);
	snprintf(unsure, sizeof unsure, "%lld", (long long)m->unsure_from);
	snprintf(oob, sizeof oob, "%lld", (long long)m->oob);
	snprintf(epoch, sizeof epoch, "%lld", (long long)own_epoch);
	snprintf(shift, sizeof shift, "%d", STORE_SEQ_SHIFT);
	const char *p[8] = {part, seq, sbuf_str(&db), m->unsure_from >= 0 ? unsure : NULL,
	                    topic, m->oob > 0 ? oob : NULL, epoch, shift};
	store_rc rc = db.oom ? STORE_RETRY : STORE_OK;
	if (rc != STORE_OK)
		snprintf(err, errsz, "out of memory");
	const char *pm[6] = {p[0], p[1], p[2], p[3], p[4], shift}; /* sql_mark's */
	PGresult *r = rc == STORE_OK ? store_exec_params(st, sql_mark, 6, pm, 0) : NULL;
	if (r && PQresultStatus(r) != PGRES_COMMAND_OK)
		rc = store_classify(st->conn, r, err, errsz);
	else if (r)
		*marked = atoll(PQcmdTuples(r));
	PQclear(r);
	if (rc == STORE_OK)
		rc = store_exec_command(st, sql_note, 8, p, err, errsz);
	sbuf_free(&db);
	return rc;
}

store_rc store_recover_forwards(store *st, const store_owned *own, const store_marker *m,
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
	store_owned *kept = NULL;
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
		if ((rc = recover_v2(st, topic, part, own->epoch, m, marked, err, errsz)) != STORE_OK)
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

/* ---- sampling for /metrics ---- */

store_rc store_sample(store *st, int64_t awaiting_ms, metrics_sample *out, char *err,
                      size_t errsz)
{
	static const char *sql_small =
		"SELECT (SELECT count(*) FROM txhub.message_rows WHERE status = 'prepared'), "
		"(SELECT count(*) FROM txhub.message_rows WHERE status = 'check_failed'), "
		"(SELECT count(*) FROM txhub.message_rows WHERE status = 'awaiting_prepare'), "
		"(SELECT count(*) FROM txhub.message_rows WHERE status = 'awaiting_prepare' "
		" AND created_at < now() - $1::bigint * interval '1 millisecond'), "
		"(SELECT count(*) FROM txhub.message_rows WHERE send_status = 'failed'), "
		"coalesce((SELECT extract(epoch FROM now() - min(created_at)) FROM txhub.message_rows "
		" WHERE status = 'prepared'), -1), "
		/* a delayed row waits from its due time (delay_sql.h), not before */
		"coalesce((WITH RECURSIVE " SQL_PENDING_PARTS " SELECT extract(epoch FROM now() - "
		/* a delayed row waits from its due time (delay_sql.h), not before */
		" min(greatest(updated_at, not_before))) FROM (" SQL_PENDING_ROWS("r.updated_at, "
		"r.not_before") ") u WHERE NOT coalesce(not_before > now(), false)), -1), "
		"(SELECT reltuples FROM pg_class WHERE oid = 'txhub.message_rows'::regclass), "
		/* held for their key (forward.order = key), on messages_send_retry */
		"(SELECT count(*) FROM txhub.message_rows WHERE send_status = 'pending' "
		" AND fwd_seq IS NULL AND next_send_at = 'infinity'), "
		/* the scheduled rows, on messages_send_retry (their due times are its
		 * next_send_at): those still ahead, and the oldest due time passed */
		"(SELECT count(*) FROM txhub.message_rows WHERE send_status = 'pending' "
		" AND fwd_seq IS NULL AND not_before > now()), "
		"coalesce((SELECT extract(epoch FROM now() - min(not_before)) FROM txhub.message_rows "
		" WHERE send_status = 'pending' AND fwd_seq IS NULL AND not_before <= now()), -1)";
	static const char *sql_exact =
		"SELECT count(*) FILTER (WHERE status = 'committed'), "
		"count(*) FILTER (WHERE status = 'rolled_back') FROM txhub.message_rows";
	/* the share of each value among the rows ANALYZE saw */
	static const char *sql_estimate =
		"SELECT coalesce(sum(f) FILTER (WHERE v = 'committed'), 0), "
		"coalesce(sum(f) FILTER (WHERE v = 'rolled_back'), 0) "
		"FROM pg_stats, unnest(most_common_vals::text::text[], most_common_freqs) AS x(v, f) "
		"WHERE schemaname = 'txhub' AND tablename = 'message_rows' AND attname = 'status'";
	char ms[32];
	snprintf(ms, sizeof ms, "%lld", (long long)awaiting_ms);
	const char *p[1] = {ms};
	PGresult *r = store_exec_params(st, sql_small, 1, p, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		goto fail;
	memset(out, 0, sizeof *out);
	out->by_status[0] = atoll(PQgetvalue(r, 0, 0));
	out->by_status[3] = atoll(PQgetvalue(r, 0, 1));
	out->by_status[4] = atoll(PQgetvalue(r, 0, 2));
	out->parked = out->by_status[3] + atoll(PQgetvalue(r, 0, 3)) + atoll(PQgetvalue(r, 0, 4));
	out->oldest_prepared_s = atof(PQgetvalue(r, 0, 5));
	out->oldest_pending_send_s = atof(PQgetvalue(r, 0, 6));
	double rows = atof(PQgetvalue(r, 0, 7));
	out->blocked = atoll(PQgetvalue(r, 0, 8));
	out->scheduled = atoll(PQgetvalue(r, 0, 9));
	out->oldest_overdue_s = atof(PQgetvalue(r, 0, 10));
	int exact = rows < STORE_EXACT_ROWS;
	PQclear(r);
	r = store_exec_params(st, exact ? sql_exact : sql_estimate, 0, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
		goto fail;
	for (int i = 0; i < 2; i++)
		out->by_status[1 + i] = exact ? atoll(PQgetvalue(r, 0, i))
		                              : (int64_t)(atof(PQgetvalue(r, 0, i)) * rows);
	PQclear(r);
	return STORE_OK;
fail:;
	store_rc rc = store_classify(st->conn, r, err, errsz);
	PQclear(r);
	return rc;
}

/* ---- missing prepares ---- */

void store_missing_list_clear(store_missing_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->items[i].biz_id);
		free(l->items[i].message_key);
		free(l->items[i].decision);
	}
	free(l->items);
	memset(l, 0, sizeof *l);
}

store_rc store_flag_missing_prepares(store *st, const store_owned *own, size_t nown,
                                     int64_t older_than_ms, int limit,
                                     store_missing_list *out, char *err, size_t errsz)
{
	static const char *sql =
		"UPDATE txhub.message_rows AS m SET alerted_at = now() "
		"FROM (SELECT biz_id, message_key FROM txhub.message_rows "
		"WHERE status = 'awaiting_prepare' AND " OF_PARTS("", "$1", "$2") " "
		"AND alerted_at IS NULL AND created_at < now() - $3::bigint * interval '1 millisecond' "
		"ORDER BY created_at LIMIT $4 FOR UPDATE SKIP LOCKED) d "
		"WHERE m.biz_id = d.biz_id AND m.message_key = d.message_key "
		"RETURNING m.biz_id, m.message_key, coalesce(m.decision, '') AS decision, "
		"m.src_partition, floor(extract(epoch FROM now() - m.created_at) * 1000)::bigint AS age, "
		"m.src_topic, m.tenant";
	/* the alert goes to the message's history in the same statement */
	static const char *sql_history =
		"WITH upd AS (%s), h AS (INSERT INTO txhub.history (biz_id, message_key, event, detail, "
		"tenant) SELECT biz_id, message_key, 'alert', 'prepare_missing: a ' || decision || "
		"' arrived ' || age / 1000 || ' s ago and its prepare never did', tenant FROM upd) "
		"SELECT * FROM upd";
	char full[2048];
	snprintf(full, sizeof full, sql_history, sql);
	if (nown == 0)
		return STORE_OK;
	char ms[32], lim[16];
	snprintf(ms, sizeof ms, "%lld", (long long)older_than_ms);
	snprintf(lim, sizeof lim, "%d", limit);
	const char *p[2] = {ms, lim};
	PGresult *r;
	size_t nkept;
	store_rc rc = store_run_owned(st, own, nown, full, p, 2, 0, &r, &nkept, err, errsz);
	if (rc != STORE_OK)
		goto done;
	size_t rows = (size_t)PQntuples(r);
	if (rows > 0 && !(out->items = calloc(rows, sizeof *out->items))) {
		/* flagged but not listed: these alerts are only lost from the log */
		snprintf(err, errsz, "out of memory listing missing prepares");
		rc = STORE_RETRY;
		goto done;
	}
	for (size_t i = 0; i < rows; i++) {
		store_missing *m = &out->items[out->n++];
		m->biz_id = strdup(PQgetvalue(r, (int)i, 0));
		m->message_key = strdup(PQgetvalue(r, (int)i, 1));
		m->decision = strdup(PQgetvalue(r, (int)i, 2));
		m->tp = tp_of(PQgetvalue(r, (int)i, 5), (int32_t)atoi(PQgetvalue(r, (int)i, 3)));
		m->age_ms = atoll(PQgetvalue(r, (int)i, 4));
	}
	out->cap = out->n;
done:
	PQclear(r);
	return rc;
}

/* ---- check-backs ---- */

void store_check_list_clear(store_check_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->items[i].biz_id);
		free(l->items[i].message_key);
		free(l->items[i].url);
		free(l->items[i].last_error);
		free(l->items[i].traceparent);
		free(l->items[i].tracestate);
	}
	free(l->items);
	memset(l, 0, sizeof *l);
}

static store_check *check_add(store_check_list *l)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		store_check *n = realloc(l->items, cap * sizeof *n);
		if (!n)
			return NULL;
		l->items = n;
		l->cap = cap;
	}
	store_check *c = &l->items[l->n++];
	memset(c, 0, sizeof *c);
	return c;
}

/* Each partition's due rows come from its own walk of messages_check_due
 * (only unfinished rows are in that index, however many finished ones the
 * table holds); $4 caps each partition's share so one busy partition does
 * not starve the others. */
static const char *SQL_CLAIM_CHECKS =
	"UPDATE txhub.message_rows AS m SET next_check_at = now() + $3::bigint * interval "
	"'1 millisecond' "
	"FROM (SELECT c.biz_id, c.message_key FROM unnest($5::text[], $1::int[]) AS p(topic, part) "
	"CROSS JOIN LATERAL (SELECT biz_id, message_key FROM txhub.message_rows "
	"WHERE status = 'prepared' AND src_partition = p.part AND src_topic = p.topic "
	"AND next_check_at <= now() "
	"ORDER BY next_check_at LIMIT $4 FOR UPDATE SKIP LOCKED) c LIMIT $2) d "
	"WHERE m.biz_id = d.biz_id AND m.message_key = d.message_key "
	"RETURNING m.biz_id, m.message_key, m.checkback_url, m.src_partition, m.check_attempts, "
	"m.src_topic, m.tenant, m.traceparent, m.tracestate";

static const char *SQL_NEXT_CHECK =
	"SELECT ceil(extract(epoch FROM min(x.t) - now()) * 1000)::bigint "
	"FROM unnest($2::text[], $1::int[]) AS p(topic, part) CROSS JOIN LATERAL "
	"(SELECT next_check_at AS t FROM txhub.message_rows WHERE status = 'prepared' "
	"AND src_partition = p.part AND src_topic = p.topic "
	"AND next_check_at IS NOT NULL ORDER BY next_check_at LIMIT 1) x";

store_rc store_claim_checks(store *st, const store_owned *own, size_t nown, int limit,
                            int64_t lease_ms, store_check_list *out, int64_t *next_due_ms,
                            char *err, size_t errsz)
{
	*next_due_ms = -1;
	if (nown == 0 || limit <= 0)
		return STORE_OK;
	store_owned *kept = NULL;
	size_t nkept = 0;
	sbuf tb = {0}, pb = {0};
	PGresult *r = NULL;
	store_rc rc = store_begin_owned(st, own, nown, &kept, &nkept, err, errsz);
	if (rc != STORE_OK)
		goto done;
	char lim[16], share[16], lease[32];
	store_owned_arrays(&tb, &pb, NULL, kept, nkept);
	snprintf(lim, sizeof lim, "%d", limit);
	snprintf(share, sizeof share, "%d", (int)(((size_t)limit + nkept - 1) / (nkept ? nkept : 1)));
	snprintf(lease, sizeof lease, "%lld", (long long)lease_ms);
	const char *p[5] = {sbuf_str(&pb), lim, lease, share, sbuf_str(&tb)};
	r = store_exec_params(st, SQL_CLAIM_CHECKS, 5, p, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		rc = store_classify(st->conn, r, err, errsz);
	else
		rc = store_exec_simple(st, "COMMIT", err, errsz);
	if (rc != STORE_OK) {
		store_rollback(st);
		goto done;
	}
	int rows = PQntuples(r);
	for (int i = 0; i < rows; i++) {
		store_check *c = check_add(out);
		if (!c)
			goto oom;
		c->biz_id = strdup(PQgetvalue(r, i, 0));
		c->message_key = strdup(PQgetvalue(r, i, 1));
		c->url = PQgetisnull(r, i, 2) ? NULL : strdup(PQgetvalue(r, i, 2));
		c->tp = tp_of(PQgetvalue(r, i, 5), (int32_t)atoi(PQgetvalue(r, i, 3)));
		c->attempts = (int32_t)atoi(PQgetvalue(r, i, 4));
		c->tenant = metrics_tenant_of(PQgetisnull(r, i, 6) ? NULL : PQgetvalue(r, i, 6));
		c->traceparent = PQgetisnull(r, i, 7) ? NULL : strdup(PQgetvalue(r, i, 7));
		c->tracestate = PQgetisnull(r, i, 8) ? NULL : strdup(PQgetvalue(r, i, 8));
		if (!c->biz_id || !c->message_key || (!c->url && !PQgetisnull(r, i, 2)) ||
		    (!c->traceparent && !PQgetisnull(r, i, 7)) ||
		    (!c->tracestate && !PQgetisnull(r, i, 8)))
			goto oom;
	}
	PQclear(r);
	r = NULL;
	if (rows >= limit) {
		*next_due_ms = 0;
		goto done;
	}
	const char *q[2] = {sbuf_str(&pb), sbuf_str(&tb)};
	r = store_exec_params(st, SQL_NEXT_CHECK, 2, q, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		/* the claim itself is done and must not be lost: guess instead */
		*next_due_ms = 1000;
		goto done;
	}
	if (!PQgetisnull(r, 0, 0)) { /* null: nothing is waiting */
		*next_due_ms = atoll(PQgetvalue(r, 0, 0));
		if (*next_due_ms < 0)
			*next_due_ms = 0;
	}
	goto done;
oom:
	/* rows already claimed stay leased and fall due again when it ends */
	snprintf(err, errsz, "out of memory reading claimed check-backs");
	rc = STORE_RETRY;
	store_check_list_clear(out);
done:
	PQclear(r);
	sbuf_free(&tb);
	sbuf_free(&pb);
	free(kept);
	return rc;
}

/* The rows are locked in key order first (the sub-select), the order
 * store_apply() locks in, so the two never deadlock. */
static const char *SQL_RECORD_CHECKS =
	"UPDATE txhub.message_rows AS m SET "
	"status = CASE x.o WHEN 'retry' THEN 'prepared' ELSE x.o END, "
	"check_attempts = x.n, last_error = coalesce(x.e, m.last_error), "
	"next_check_at = CASE WHEN x.o = 'retry' THEN now() + x.ms * interval '1 millisecond' "
	"END, "
	"send_status = CASE WHEN x.o = 'committed' THEN 'pending' ELSE m.send_status END, "
	"send_attempts = CASE WHEN x.o = 'committed' THEN 0 ELSE m.send_attempts END, "
	SQL_COMMIT_DUE("m.", "x.o = 'committed'") ", "
	"updated_at = now() "
	"FROM (SELECT y.* FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::text[], "
	"$6::text[], $7::bigint[]) AS y(b, k, p, n, o, e, ms) "
	"JOIN txhub.message_rows t ON t.biz_id = y.b AND t.message_key = y.k "
	"ORDER BY t.biz_id, t.message_key FOR UPDATE OF t) x "
	"WHERE m.biz_id = x.b AND m.message_key = x.k AND m.status = 'prepared' "
	"AND m.check_attempts = x.p AND " OF_PARTS("m.", "$9", "$8") " "
	"RETURNING m.biz_id, m.message_key, m.status, m.check_attempts, m.last_error, "
	"x.p AS claimed, x.o AS outcome, x.e AS error, m.tenant, m.traceparent";

/* ... with the history of each attempt made (a lease given back is none)
 * and of each check_failed alert, in the same statement. */
static const char *SQL_RECORD_CHECKS_HISTORY =
	"WITH upd AS (%s), h AS (INSERT INTO txhub.history (biz_id, message_key, event, detail, "
	"tenant) SELECT biz_id, message_key, 'checkback', 'attempt ' || check_attempts || ': ' || "
	"CASE outcome WHEN 'committed' THEN 'committed' WHEN 'rolled_back' THEN 'rolled back' "
	"ELSE coalesce(error, outcome) END, tenant FROM upd WHERE check_attempts > claimed "
	"UNION ALL SELECT biz_id, message_key, 'alert', 'check_failed after ' || check_attempts || "
	"' attempt(s): ' || coalesce(last_error, ''), tenant FROM upd "
	"WHERE status = 'check_failed') "
	"SELECT biz_id, message_key, status, check_attempts, last_error, traceparent FROM upd";

store_rc store_record_checks(store *st, const store_owned *own, size_t nown,
                             const store_check_result *res, size_t n,
                             store_check_list *failed_out, size_t *written,
                             char *err, size_t errsz)
{
	static const char *outcome_names[] = {"committed", "rolled_back", "retry", "check_failed"};
	*written = 0;
	if (n == 0)
		return STORE_OK;
	sbuf a[7] = {{0}};
	PGresult *r = NULL;
	size_t nkept = 0, nwrite = 0;
	store_owned *kept = NULL;
	store_rc rc = store_begin_owned(st, own, nown, &kept, &nkept, err, errsz);
	if (rc != STORE_OK)
		goto done;
	for (int i = 0; i < 7; i++)
		sbuf_arr_begin(&a[i]);
	for (size_t i = 0; i < n; i++) {
		if (store_epoch_of(kept, nkept, res[i].tp) == 0)
			continue; /* no longer ours: the new owner asks again */
		nwrite++;
		sbuf_arr_text(&a[0], res[i].biz_id);
		sbuf_arr_text(&a[1], res[i].message_key);
		sbuf_arr_int(&a[2], res[i].claimed_attempts);
		sbuf_arr_int(&a[3], res[i].attempts);
		sbuf_arr_text(&a[4], outcome_names[res[i].outcome]);
		sbuf_arr_text(&a[5], res[i].error);
		sbuf_arr_int(&a[6], res[i].outcome == CHECK_RETRY ? res[i].retry_in_ms : 0);
	}
	const char *p[7];
	for (int i = 0; i < 7; i++) {
		sbuf_arr_end(&a[i]);
		if (a[i].oom) {
			snprintf(err, errsz, "out of memory building check-back results");
			rc = STORE_RETRY;
			goto done;
		}
		p[i] = sbuf_str(&a[i]);
	}
	if (nwrite < n)
		log_warn("checkback: %zu answer(s) dropped: their partitions belong to another "
		         "replica now", n - nwrite);
	sbuf kt = {0}, kb = {0};
	store_owned_arrays(&kt, &kb, NULL, kept, nkept);
	const char *p9[9] = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], sbuf_str(&kb),
	                     sbuf_str(&kt)};
	char sql[4096];
	snprintf(sql, sizeof sql, SQL_RECORD_CHECKS_HISTORY, SQL_RECORD_CHECKS);
	r = store_exec_params(st, sql, 9, p9, 0);
	sbuf_free(&kt);
	sbuf_free(&kb);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		rc = store_classify(st->conn, r, err, errsz);
		goto done;
	}
	if ((rc = store_exec_simple(st, "COMMIT", err, errsz)) != STORE_OK)
		goto done;
	*written = (size_t)PQntuples(r);
	for (int i = 0; failed_out && i < PQntuples(r); i++) {
		if (strcmp(PQgetvalue(r, i, 2), "check_failed") != 0)
			continue;
		store_check *c = check_add(failed_out);
		if (!c) {
			log_error("store: out of memory listing failed check-backs");
			break;
		}
		c->biz_id = strdup(PQgetvalue(r, i, 0));
		c->message_key = strdup(PQgetvalue(r, i, 1));
		c->attempts = (int32_t)atoi(PQgetvalue(r, i, 3));
		c->last_error = PQgetisnull(r, i, 4) ? NULL : strdup(PQgetvalue(r, i, 4));
		c->traceparent = PQgetisnull(r, i, 5) ? NULL : strdup(PQgetvalue(r, i, 5));
		if (!c->biz_id || !c->message_key) {
			log_error("store: out of memory listing failed check-backs");
			break;
		}
	}
done:
	if (rc != STORE_OK)
		store_rollback(st);
	PQclear(r);
	for (int i = 0; i < 7; i++)
		sbuf_free(&a[i]);
	free(kept);
	return rc;
}

/* ---- order per key ---- */

void store_set_order_by_key(store *st, int by_key, int exactly_once)
{
	st->order_by_key = by_key;
	st->retries_block = by_key && !exactly_once;
}

void store_take_scheduled(store *st, store_forward_list *out)
{
	*out = st->scheduled;
	memset(&st->scheduled, 0, sizeof st->scheduled);
}

void store_blocker_list_clear(store_blocker_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->items[i].topic);
		free(l->items[i].key);
	}
	free(l->items);
	memset(l, 0, sizeof *l);
}

/* The unsent rows of a key no forwarder has in hand, of the partitions $1/$2:
 * those without a sequence (messages_send_retry) and the failed ones
 * (messages_stuck). */
#define SQL_BLOCKERS(held)                                                                   \
	"SELECT src_topic, src_partition, forward_topic, forward_key, src_offset "             \
	"FROM txhub.message_rows WHERE send_status = 'pending' AND fwd_seq IS NULL "          \
	"AND status = 'committed' AND forward_key IS NOT NULL " held " AND "                   \
	OF_PARTS("", "$1", "$2") " UNION ALL "                                                \
	"SELECT src_topic, src_partition, forward_topic, forward_key, src_offset "             \
	"FROM txhub.message_rows WHERE send_status = 'failed' AND forward_key IS NOT NULL AND " \
	OF_PARTS("", "$1", "$2")

/* The pending rows with a sequence above the marks of the partitions $1/$2
 * (in flight, or lost with a hub that died) for which `cond` holds. */
#define SQL_ABOVE_MARK(cond)                                                                 \
	"SELECT r.src_topic, r.src_partition, r.forward_topic, r.forward_key, r.src_offset "   \
	"FROM unnest($1::text[], $2::int[]) AS o(t, p) JOIN txhub.message_rows r "            \
	"ON r.src_partition = o.p AND r.src_topic = o.t WHERE " cond " "                      \
	"AND r.send_status = 'pending' AND r.forward_key IS NOT NULL "                         \
	"AND r.fwd_seq > coalesce(" SQL_MARK_OF("o.t", "o.p") ", 0)"

/* at_least_once (store_set_order_by_key): a retry that a due scan gave a
 * sequence blocks its key too, in flight or lost with a hub that died: what
 * comes after it is not released before it is delivered (exactly_once's
 * lanes read and send in sequence order: not there). $4 */
#define SQL_RETRIES_ABOVE_MARK SQL_ABOVE_MARK("$4::bool AND r.send_attempts > 0")

store_rc store_order_blockers(store *st, const store_owned *own, size_t nown, int taken,
                              store_blocker_list *out, char *err, size_t errsz)
{
	static const char *sql =
		"SELECT src_topic, src_partition, forward_topic, forward_key, min(src_offset) "
		"FROM (" SQL_BLOCKERS("") " UNION ALL " SQL_ABOVE_MARK("$3::bool") " UNION ALL "
		SQL_RETRIES_ABOVE_MARK ") b GROUP BY 1, 2, 3, 4";
	memset(out, 0, sizeof *out);
	if (nown == 0)
		return STORE_OK;
	sbuf w[2] = {{0}};
	store_owned_arrays(&w[0], &w[1], NULL, own, nown);
	const char *p[4] = {sbuf_str(&w[0]), sbuf_str(&w[1]), taken ? "t" : "f",
	                    st->retries_block ? "t" : "f"};
	store_rc rc = store_arrays_ok(w, 2, err, errsz);
	PGresult *r = rc == STORE_OK ? store_exec_params(st, sql, 4, p, 0) : NULL;
	if (rc == STORE_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
		rc = store_classify(st->conn, r, err, errsz);
	int n = rc == STORE_OK ? PQntuples(r) : 0;
	if (n > 0 && !(out->items = calloc((size_t)n, sizeof *out->items))) {
		snprintf(err, errsz, "out of memory");
		rc = STORE_RETRY;
	}
	for (int i = 0; rc == STORE_OK && i < n; i++) {
		store_blocker *b = &out->items[out->n++];
		b->tp = tp_of(PQgetvalue(r, i, 0), (int32_t)atoi(PQgetvalue(r, i, 1)));
		b->topic = strdup(PQgetvalue(r, i, 2));
		b->key = strdup(PQgetvalue(r, i, 3));
		b->offset = atoll(PQgetvalue(r, i, 4));
		if (b->tp == -1 || !b->topic || !b->key) {
			snprintf(err, errsz, "out of memory");
			rc = STORE_RETRY;
		}
	}
	if (rc != STORE_OK)
		store_blocker_list_clear(out);
	PQclear(r);
	sbuf_free(&w[0]);
	sbuf_free(&w[1]);
	return rc;
}

store_rc store_order_release(store *st, const store_owned *own, size_t nown, int all,
                             size_t *released, char *err, size_t errsz)
{
	/* the held rows (due at 'infinity', on messages_send_retry) whose key has
	 * no blocker before them but held ones */
	static const char *sql =
		"WITH b AS (SELECT src_topic, src_partition, forward_topic, forward_key, "
		"min(src_offset) AS o FROM (" SQL_BLOCKERS("AND next_send_at < 'infinity'")
		" UNION ALL " SQL_RETRIES_ABOVE_MARK ") x GROUP BY 1, 2, 3, 4), "
		"h AS (SELECT m.biz_id, m.message_key FROM txhub.message_rows m "
		"WHERE m.send_status = 'pending' AND m.fwd_seq IS NULL "
		"AND m.next_send_at = 'infinity' AND " OF_PARTS("m.", "$1", "$2") " "
		"AND ($3::bool OR NOT EXISTS (SELECT 1 FROM b WHERE b.src_topic = m.src_topic "
		"AND b.src_partition = m.src_partition AND b.forward_topic = m.forward_topic "
		"AND b.forward_key = m.forward_key AND b.o < m.src_offset)) "
		"ORDER BY m.biz_id, m.message_key FOR UPDATE OF m SKIP LOCKED) "
		"UPDATE txhub.message_rows AS m SET next_send_at = now() FROM h "
		"WHERE m.biz_id = h.biz_id AND m.message_key = h.message_key "
		"AND m.next_send_at = 'infinity' RETURNING 1";
	*released = 0;
	if (nown == 0)
		return STORE_OK;
	PGresult *r;
	size_t nkept;
	const char *p[2] = {all ? "t" : "f", st->retries_block ? "t" : "f"};
	store_rc rc = store_run_owned(st, own, nown, sql, p, 2, 0, &r, &nkept, err, errsz);
	if (rc == STORE_OK)
		*released = (size_t)PQntuples(r);
	PQclear(r);
	return rc;
}
