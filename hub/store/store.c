/* store.c: PostgreSQL access (see store.h).
 *
 * Why batches look the way they do: the state of a message depends on the
 * steps before it, possibly earlier in the same batch, so store_apply()
 * reads the current state of every key of the batch once (locking the rows),
 * has the fold (fold.c, pure) run the rules in memory in record order, and
 * writes the final state of every touched key with one INSERT (new keys) and
 * one UPDATE (known keys). The store's files keep the SQL, the transactions
 * and the logging; every decision about what a record does lives in fold.c,
 * where it is unit-tested without a database. A key that another replica inserts
 * concurrently makes the INSERT come up short; the whole transaction is then
 * rolled back and retried, and the retry sees and locks that row.
 *
 * This file is the base the others stand on (store_int.h): the connection,
 * results and errors, forward lists, the ownership locks. The parts:
 * store_owners.c (taking partitions, heartbeats), store_apply.c and
 * store_write.c (the batch), store_forwards.c (at_least_once),
 * store_lanes.c (exactly_once), store_checks.c (check-backs),
 * store_order.c (order per key), store_sample.c (/metrics). */
#include "store.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array.h"
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

/* Which error is whose fault (docs/producers.md: Envelope fields): PostgreSQL blames the data only
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

int store_dbid(store *st, dbid *out, char *err, size_t errsz)
{
	memset(out, 0, sizeof *out);
	PGresult *r = PQexec(st->conn, "SELECT system_identifier::text, current_database() "
	                           "FROM pg_control_system()");
	char text[128];
	int rc = -1;
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		const char *m = PQresultErrorMessage(r);
		snprintf(err, errsz, "%.*s", (int)strcspn(m, "\n"), *m ? m : "no row");
	} else if (snprintf(text, sizeof text, "%s/%s", PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1)) >=
	               (int)sizeof text ||
	           dbid_parse(text, out) != 0) {
		snprintf(err, errsz, "unexpected system identifier or database name: %s", text);
	} else {
		rc = 0;
	}
	PQclear(r);
	return rc;
}

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

store_rc store_db_now_ms(store *st, int64_t *ms, char *err, size_t errsz)
{
	PGresult *r = PQexec(st->conn, "SELECT floor(extract(epoch FROM now()) * 1000)::bigint");
	store_rc rc = STORE_OK;
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		rc = store_classify(st->conn, r, err, errsz);
	else
		*ms = atoll(PQgetvalue(r, 0, 0));
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
	store_forward *n = array_grow(l->items, &l->cap, l->n + 1, sizeof *n);
	if (!n)
		return NULL;
	l->items = n;
	store_forward *f = &l->items[l->n++];
	memset(f, 0, sizeof *f);
	return f;
}

char *store_col_text(const PGresult *r, int row, int col)
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
		f->biz_id = store_col_text(r, i, first);
		f->message_key = store_col_text(r, i, first + 1);
		if (!PQgetisnull(r, i, first + 2)) {
			f->payload_len = (size_t)PQgetlength(r, i, first + 2);
			f->payload = malloc(f->payload_len + 1);
			if (f->payload)
				memcpy(f->payload, PQgetvalue(r, i, first + 2), f->payload_len);
		}
		f->topic = store_col_text(r, i, first + 3);
		f->key = store_col_text(r, i, first + 4);
		f->headers = store_col_text(r, i, first + 5);
		char *topic = store_col_text(r, i, first + 11);
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
		f->traceparent = store_col_text(r, i, first + 13);
		f->tracestate = store_col_text(r, i, first + 14);
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

int64_t store_epoch_of(const owned_part *own, size_t nown, tp_key tp)
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

static store_rc lock_owned(store *st, const owned_part *own, size_t nown, owned_lock mode,
                           owned_part **kept, size_t *nkept, char *err, size_t errsz)
{
	return store_lock_owned_seq(st, own, nown, mode, kept, nkept, NULL, err, errsz);
}

/* lock_owned(), and rows[i] (when not NULL, nown long) the row of
 * (*kept)[i]'s partition as locked. */
store_rc store_lock_owned_seq(store *st, const owned_part *own, size_t nown, owned_lock mode,
                               owned_part **kept, size_t *nkept, owned_row *rows, char *err,
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
store_rc store_begin_locked(store *st, owned_lock mode, const owned_part *own, size_t nown,
                             owned_part **kept, size_t *nkept, char *err, size_t errsz)
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
store_rc store_begin_owned(store *st, const owned_part *own, size_t nown, owned_part **kept,
                            size_t *nkept, char *err, size_t errsz)
{
	return store_begin_locked(st, OWNED_SHARED, own, nown, kept, nkept, err, errsz);
}

/* The key of a row whose first two columns are a topic and a partition. */
tp_key store_row_tp(const PGresult *r, int row)
{
	return tp_of(PQgetvalue(r, row, 0), (int32_t)atoi(PQgetvalue(r, row, 1)));
}

/* The topics, partitions and (when eb is not NULL) epochs of own, as
 * arrays. */
void store_owned_arrays(sbuf *tb, sbuf *pb, sbuf *eb, const owned_part *own, size_t n)
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
