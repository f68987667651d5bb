/* ops.c: the operator's operations (see ops.h): reads (status, list, show)
 * and the shared pieces; the writes are in ops_write.c.
 *
 * Why the reads look the way they do: txhub.messages may hold tens of
 * millions of finished rows, and an operator runs these while hubs write.
 * Every count of an unfinished state is written so that PostgreSQL can
 * answer it from a partial index (messages_check_due, messages_send_due,
 * messages_stuck, messages_awaiting), whose size follows the unfinished
 * rows only; the finished ones are counted on messages_finished. Each read
 * is one REPEATABLE READ, READ ONLY transaction, so its numbers belong to
 * one moment. */
#include "ops.h"
#include "ops_int.h"

#include <libpq-fe.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope.h"
#include "ops_sql.h"
#include "rows_sql.h"
#include "sbuf.h"
#include "tenant_rules.h"

const char *const ops_status_names[OPS_NSTATUS] = {"prepared", "awaiting_prepare", "committed",
                                                   "rolled_back", "check_failed"};

int ops_valid_status(const char *s)
{
	for (int i = 0; i < OPS_NSTATUS; i++)
		if (strcmp(s, ops_status_names[i]) == 0)
			return 1;
	return 0;
}

int ops_valid_send_status(const char *s)
{
	return strcmp(s, "pending") == 0 || strcmp(s, "sent") == 0 || strcmp(s, "failed") == 0;
}

ops_rc ops_bad(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	return OPS_BAD_ARG;
}

ops_rc ops_check_ids(const char *biz_id, const char *message_key, char *err, size_t errsz)
{
	if (!biz_id)
		return ops_bad(err, errsz, "biz_id is missing");
	if (!message_key)
		return ops_bad(err, errsz, "message_key is missing");
	if (envelope_check_id("biz_id", biz_id, ENVELOPE_BIZ_ID_MAX, err, errsz) != 0 ||
	    envelope_check_id("message_key", message_key, ENVELOPE_MESSAGE_KEY_MAX, err, errsz) != 0)
		return OPS_BAD_ARG;
	return OPS_OK;
}

/* A consistent view for a read: one snapshot for all its statements. */
ops_rc ops_begin_read(PGconn *conn, char *err, size_t errsz)
{
	return ops_exec(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", err, errsz);
}

/* ---- rows as JSON (list and show) ---- */

/* The columns of a message row, in the order of row_fields[]. */
#define ROW_COLUMNS                                                                         \
	"biz_id, message_key, status, decision, send_status, coalesce(octet_length(payload), 0), " \
	"forward_topic, forward_key, checkback_url, check_attempts, send_attempts, last_error, "  \
	"src_partition, src_offset, " TS("created_at") ", " TS("updated_at") ", "                \
	TS("next_check_at") ", " TS("next_send_at") ", "                                          \
	"floor(extract(epoch FROM now() - created_at))::bigint, "                                 \
	"floor(extract(epoch FROM now() - updated_at))::bigint, tenant, trace_id, "               \
	TS("dead_lettered_at") ", " TS("not_before")

static const struct {
	const char *name;
	int number; /* a JSON number, else text */
} row_fields[] = {
	{"biz_id", 0},        {"message_key", 0},   {"status", 0},        {"decision", 0},
	{"send_status", 0},   {"payload_bytes", 1}, {"forward_topic", 0}, {"forward_key", 0},
	{"checkback_url", 0}, {"check_attempts", 1}, {"send_attempts", 1}, {"last_error", 0},
	{"src_partition", 1}, {"src_offset", 1},    {"created_at", 0},    {"updated_at", 0},
	{"next_check_at", 0}, {"next_send_at", 0},  {"created_age_s", 1}, {"updated_age_s", 1},
	{"tenant", 0},        {"trace_id", 0},      {"dead_lettered_at", 0}, {"not_before", 0},
};
#define NROW_FIELDS ((int)(sizeof row_fields / sizeof row_fields[0]))

/* Row `row` of r (ROW_COLUMNS from column 0) as an object; a SQL null is
 * a JSON null. */
static cJSON *row_json(const PGresult *r, int row)
{
	cJSON *o = cJSON_CreateObject();
	for (int c = 0; o && c < NROW_FIELDS; c++) {
		cJSON *v;
		if (PQgetisnull(r, row, c))
			v = cJSON_CreateNull();
		else if (row_fields[c].number)
			v = cJSON_CreateNumber((double)ops_int(r, row, c));
		else
			v = cJSON_CreateString(PQgetvalue(r, row, c));
		if (!v) {
			cJSON_Delete(o);
			return NULL;
		}
		cJSON_AddItemToObject(o, row_fields[c].name, v);
	}
	return o;
}

/* ---- list ---- */

int ops_valid_trace_id(const char *s)
{
	size_t n = 0;
	int nonzero = 0;
	for (; s[n]; n++) {
		if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
			return 0;
		nonzero |= s[n] != '0';
	}
	return n == 32 && nonzero;
}

static ops_rc check_filter(const ops_list_filter *f, char *err, size_t errsz)
{
	for (size_t i = 0; i < f->nstatuses; i++)
		if (!ops_valid_status(f->statuses[i]))
			return ops_bad(err, errsz, "unknown status \"%s\" (one of prepared, "
			               "awaiting_prepare, committed, rolled_back, check_failed)",
			               f->statuses[i]);
	if (f->send_status && !ops_valid_send_status(f->send_status))
		return ops_bad(err, errsz, "unknown send status \"%s\" (one of pending, sent, failed)",
		               f->send_status);
	if (f->biz_id && envelope_check_id("biz_id", f->biz_id, ENVELOPE_BIZ_ID_MAX, err, errsz))
		return OPS_BAD_ARG;
	if (f->message_key && envelope_check_id("message_key", f->message_key,
	                                        ENVELOPE_MESSAGE_KEY_MAX, err, errsz))
		return OPS_BAD_ARG;
	if (f->tenant && tenant_name_check(f->tenant, err, errsz) != 0)
		return OPS_BAD_ARG;
	if (f->trace_id && !ops_valid_trace_id(f->trace_id))
		return ops_bad(err, errsz, "a trace id is 32 lowercase hex digits, not all zeros");
	if (f->limit < 1 || f->limit > OPS_LIST_MAX)
		return ops_bad(err, errsz, "limit %d is out of range (1..%d)", f->limit, OPS_LIST_MAX);
	if (f->since_ms < 0)
		return ops_bad(err, errsz, "since must not be negative");
	if (f->older_ms < 0)
		return ops_bad(err, errsz, "older must not be negative");
	return OPS_OK;
}

/* The newest rows by updated_at, each status's from its own index (the
 * partial indexes of rolled_back and committed rows per partition, the
 * small ones of the unfinished statuses), then read by key from the view:
 * `txhub list` without a filter (or with --since only) reads a few hundred
 * index entries where ORDER BY updated_at over the view read every row.
 * X: more conditions on every branch, $1 the limit. */
#define NEWEST_OF_PARTS(status, X)                                                        \
	"SELECT x.* FROM seen_" status " s CROSS JOIN LATERAL (SELECT r.biz_id AS kb, "          \
	"r.message_key AS kk, r.updated_at AS ku FROM txhub.message_rows r "                     \
	"WHERE r.status = '" status "' AND r.src_partition = s.p" X " "                          \
	"ORDER BY r.updated_at DESC, r.biz_id, r.message_key LIMIT $1) x WHERE s.p IS NOT NULL"
#define NEWEST_OF(status, X)                                                              \
	"(SELECT r.biz_id AS kb, r.message_key AS kk, r.updated_at AS ku "                       \
	"FROM txhub.message_rows r WHERE r.status = '" status "'" X " "                          \
	"ORDER BY r.updated_at DESC, r.biz_id, r.message_key LIMIT $1)"
#define SQL_LIST_NEWEST(X)                                                                \
	"WITH RECURSIVE " SQL_SEEN_PARTITIONS("committed") ", "                                   \
	SQL_SEEN_PARTITIONS("rolled_back") ", k AS (" NEWEST_OF_PARTS("committed", X)            \
	" UNION ALL " NEWEST_OF_PARTS("rolled_back", X) " UNION ALL " NEWEST_OF("prepared", X)   \
	" UNION ALL " NEWEST_OF("awaiting_prepare", X) " UNION ALL "                              \
	NEWEST_OF("check_failed", X) ") "                                                         \
	"SELECT " ROW_COLUMNS " FROM (SELECT * FROM k ORDER BY ku DESC, kb, kk LIMIT $1) k "      \
	"CROSS JOIN LATERAL (SELECT * FROM txhub.messages v "                                     \
	"WHERE v.biz_id = k.kb AND v.message_key = k.kk OFFSET 0) m "                             \
	"ORDER BY m.updated_at DESC, m.biz_id, m.message_key"
static const char *SQL_LIST_NEWEST_ALL = SQL_LIST_NEWEST("");
/* $2: --since in ms */
static const char *SQL_LIST_NEWEST_SINCE =
	SQL_LIST_NEWEST(" AND r.updated_at > now() - $2::bigint * interval '1 millisecond'");

/* The WHERE clause holds only the filters given, so that PostgreSQL can
 * pick the index each one allows (the primary key for a biz_id, the partial
 * indexes for unfinished statuses); values always travel as parameters. */
static void list_sql(const ops_list_filter *f, sbuf *sql, sbuf *statuses, const char **p,
                     int *np, char *since, char *older, char *limit)
{
	/* the view computes send_status (rows_sql.h): pending rows are taken
	 * from the indexes that hold them, then read by key (OFFSET 0: so,
	 * whatever the estimates) */
	int pending = f->send_status && strcmp(f->send_status, "pending") == 0;
	if (pending)
		sbuf_puts(sql, "SELECT " ROW_COLUMNS " FROM (WITH RECURSIVE " SQL_PENDING_PARTS
		               " SELECT * FROM (" SQL_PENDING_ROWS("r.biz_id AS pb, r.message_key AS pk")
		               ") k OFFSET 0) k CROSS JOIN LATERAL (SELECT * FROM txhub.messages v "
		               "WHERE v.biz_id = k.pb AND v.message_key = k.pk OFFSET 0) m WHERE true");
	else if (!f->send_status) /* the keys from the table, then the rows from the view */
		sbuf_puts(sql, "SELECT " ROW_COLUMNS " FROM (SELECT r.biz_id AS kb, r.message_key AS kk "
		               "FROM txhub.message_rows r WHERE true");
	else
		sbuf_puts(sql, "SELECT " ROW_COLUMNS " FROM txhub.messages WHERE true");
	if (f->nstatuses > 0) {
		sbuf_arr_begin(statuses);
		for (size_t i = 0; i < f->nstatuses; i++)
			sbuf_arr_text(statuses, f->statuses[i]);
		sbuf_arr_end(statuses);
		p[*np] = sbuf_str(statuses);
		sbuf_printf(sql, " AND status = ANY($%d::text[])", ++*np);
	}
	/* failed and sent: the keys come from the table, on the index that holds
	 * them (failed: messages_stuck) */
	if (f->send_status && strcmp(f->send_status, "failed") == 0)
		sbuf_puts(sql, " AND (biz_id, message_key) IN (SELECT biz_id, message_key "
		               "FROM txhub.message_rows WHERE send_status = 'failed')");
	else if (f->send_status && !pending)
		sbuf_puts(sql, " AND (biz_id, message_key) IN (SELECT r.biz_id, r.message_key "
		               "FROM txhub.message_rows r WHERE r.status = 'committed' "
		               "AND (r.send_status = 'sent' OR " SQL_MARKED("r") "))");
	if (f->scheduled) /* on messages_send_retry, whose rows they are (delay_sql.h) */
		sbuf_puts(sql, " AND (biz_id, message_key) IN (SELECT biz_id, message_key "
		               "FROM txhub.message_rows WHERE send_status = 'pending' "
		               "AND fwd_seq IS NULL AND not_before > now())");
	if (f->biz_id) {
		p[*np] = f->biz_id;
		sbuf_printf(sql, " AND biz_id = $%d", ++*np);
	}
	if (f->since_ms > 0 || f->since_set) {
		p[*np] = since;
		sbuf_printf(sql, " AND updated_at > now() - $%d::bigint * interval '1 millisecond'",
		            ++*np);
	}
	if (f->message_key) {
		p[*np] = f->message_key;
		sbuf_printf(sql, " AND message_key = $%d", ++*np);
	}
	if (f->tenant) {
		p[*np] = f->tenant;
		sbuf_printf(sql, " AND tenant = $%d", ++*np);
	}
	if (f->trace_id) { /* index messages_trace (migration 0014) */
		p[*np] = f->trace_id;
		sbuf_printf(sql, " AND trace_id = $%d", ++*np);
	}
	if (f->older_ms > 0) {
		p[*np] = older;
		sbuf_printf(sql, " AND created_at < now() - $%d::bigint * interval '1 millisecond'",
		            ++*np);
	}
	p[*np] = limit;
	const char *order = f->scheduled ? "not_before" : "updated_at DESC";
	sbuf_printf(sql, " ORDER BY %s, biz_id, message_key LIMIT $%d", order, ++*np);
	/* without a send status every filter is on a stored column: the table is
	 * read without the view's computed send_status (which kept the scan from
	 * running in parallel), and only the rows listed through the view */
	if (!f->send_status)
		sbuf_printf(sql, ") k CROSS JOIN LATERAL (SELECT * FROM txhub.messages v "
		                 "WHERE v.biz_id = k.kb AND v.message_key = k.kk OFFSET 0) m "
		                 "ORDER BY m.%s, m.biz_id, m.message_key", order);
}

ops_rc ops_list(PGconn *conn, const ops_list_filter *f, cJSON **out, char *err, size_t errsz)
{
	*out = NULL;
	ops_rc rc = check_filter(f, err, errsz);
	if (rc != OPS_OK)
		return rc;
	sbuf sql = {0}, statuses = {0};
	const char *p[10];
	int np = 0;
	char since[32], older[32], limit[16];
	snprintf(since, sizeof since, "%lld", (long long)f->since_ms);
	snprintf(older, sizeof older, "%lld", (long long)f->older_ms);
	snprintf(limit, sizeof limit, "%d", f->limit);
	if (!f->nstatuses && !f->send_status && !f->biz_id && !f->message_key && !f->tenant &&
	    !f->trace_id && !f->scheduled && f->older_ms <= 0) {
		int with_since = f->since_ms > 0 || f->since_set;
		sbuf_puts(&sql, with_since ? SQL_LIST_NEWEST_SINCE : SQL_LIST_NEWEST_ALL);
		p[np++] = limit;
		if (with_since)
			p[np++] = since;
	} else {
		list_sql(f, &sql, &statuses, p, &np, since, older, limit);
	}
	PGresult *r = NULL;
	cJSON *arr = NULL;
	if (sql.oom || statuses.oom) {
		snprintf(err, errsz, "out of memory");
		rc = OPS_DB_ERROR;
		goto done;
	}
	if (!(r = ops_query(conn, sbuf_str(&sql), np, p, 0, err, errsz))) {
		rc = OPS_DB_ERROR;
		goto done;
	}
	arr = cJSON_CreateArray();
	for (int i = 0; arr && i < PQntuples(r); i++) {
		cJSON *row = row_json(r, i);
		if (!row) {
			cJSON_Delete(arr);
			arr = NULL;
		} else {
			cJSON_AddItemToArray(arr, row);
		}
	}
	if (!arr) {
		snprintf(err, errsz, "out of memory");
		rc = OPS_DB_ERROR;
	}
	*out = arr;
done:
	PQclear(r);
	sbuf_free(&sql);
	sbuf_free(&statuses);
	return rc;
}

/* ---- show ---- */

char *ops_payload_text(const unsigned char *p, size_t len, const char **encoding)
{
	if (envelope_valid_utf8(p, len) && !memchr(p, '\0', len)) {
		char *s = malloc(len + 1);
		if (s) {
			memcpy(s, p, len);
			s[len] = '\0';
		}
		*encoding = "utf8";
		return s;
	}
	/* EVP_EncodeBlock: standard alphabet, padded, no line breaks */
	if (len > (size_t)1 << 30)
		return NULL;
	char *s = malloc(4 * ((len + 2) / 3) + 1);
	if (s)
		EVP_EncodeBlock((unsigned char *)s, p, (int)len);
	*encoding = "base64";
	return s;
}

/* Beyond ROW_COLUMNS: what only show needs, and created_at/updated_at in
 * microseconds, to merge the derived events with the history rows. */
static const char *SQL_SHOW_ROW =
	"SELECT " ROW_COLUMNS ", forward_headers::text, " TS("alerted_at") ", "
	"(extract(epoch FROM created_at) * 1000000)::bigint, "
	"(extract(epoch FROM updated_at) * 1000000)::bigint, traceparent, tracestate, "
	/* delayed delivery: committed, due later, not sent (delay_sql.h) */
	"coalesce(send_status = 'pending' AND fwd_seq IS NULL AND not_before > now(), false), "
	/* forward.order = key: held for an earlier message of its key (store.h) */
	"coalesce(send_status = 'pending' AND fwd_seq IS NULL AND next_send_at = 'infinity', false) "
	"FROM txhub.messages WHERE biz_id = $1 AND message_key = $2";
static const char *SQL_SHOW_PAYLOAD =
	"SELECT payload FROM txhub.messages WHERE biz_id = $1 AND message_key = $2";
/* The message's history rows: those of its tenant, or of none; a row that
 * names another tenant than its message's was forged by that tenant's role
 * and shows nowhere (docs/tenants.md, Each team's PostgreSQL role). */
static const char *SQL_SHOW_HISTORY =
	"SELECT " TS("h.at") ", h.event, h.detail, h.actor, "
	"(extract(epoch FROM h.at) * 1000000)::bigint "
	"FROM txhub.history h JOIN txhub.message_rows m ON m.biz_id = h.biz_id "
	"AND m.message_key = h.message_key "
	"WHERE h.biz_id = $1 AND h.message_key = $2 "
	"AND (h.tenant IS NULL OR h.tenant = m.tenant) ORDER BY h.at, h.id";

/* Add payload, payload_encoding, forward_headers, alerted_at, traceparent,
 * tracestate, scheduled and held to the
 * message object m. r: SQL_SHOW_ROW's row, pr: SQL_SHOW_PAYLOAD's (binary). */
static int add_show_fields(cJSON *m, const PGresult *r, const PGresult *pr)
{
	const char *enc = "utf8";
	char *text = NULL;
	if (!PQgetisnull(pr, 0, 0)) {
		text = ops_payload_text((const unsigned char *)PQgetvalue(pr, 0, 0),
		                        (size_t)PQgetlength(pr, 0, 0), &enc);
		if (!text)
			return -1;
	}
	cJSON_AddItemToObject(m, "payload", text ? cJSON_CreateString(text) : cJSON_CreateNull());
	cJSON_AddStringToObject(m, "payload_encoding", enc);
	free(text);
	cJSON *h = PQgetisnull(r, 0, NROW_FIELDS) ? cJSON_CreateNull()
	                                           : cJSON_Parse(PQgetvalue(r, 0, NROW_FIELDS));
	cJSON_AddItemToObject(m, "forward_headers", h ? h : cJSON_CreateNull());
	cJSON_AddItemToObject(m, "alerted_at", PQgetisnull(r, 0, NROW_FIELDS + 1)
	                          ? cJSON_CreateNull()
	                          : cJSON_CreateString(PQgetvalue(r, 0, NROW_FIELDS + 1)));
	for (int c = NROW_FIELDS + 4; c <= NROW_FIELDS + 5; c++) /* traceparent, tracestate */
		cJSON_AddItemToObject(m, c == NROW_FIELDS + 4 ? "traceparent" : "tracestate",
		                      PQgetisnull(r, 0, c) ? cJSON_CreateNull()
		                                           : cJSON_CreateString(PQgetvalue(r, 0, c)));
	cJSON_AddBoolToObject(m, "scheduled", PQgetvalue(r, 0, NROW_FIELDS + 6)[0] == 't');
	cJSON_AddBoolToObject(m, "held", PQgetvalue(r, 0, NROW_FIELDS + 7)[0] == 't');
	return 0;
}

static cJSON *event_json(const char *at, const char *event, const char *detail,
                         const char *actor, int derived)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "at", at);
	cJSON_AddStringToObject(o, "event", event);
	cJSON_AddItemToObject(o, "detail", detail ? cJSON_CreateString(detail) : cJSON_CreateNull());
	cJSON_AddItemToObject(o, "actor", actor ? cJSON_CreateString(actor) : cJSON_CreateNull());
	cJSON_AddBoolToObject(o, "derived", derived);
	return o;
}

static const char *field(const cJSON *m, const char *name)
{
	return cJSON_GetStringValue(cJSON_GetObjectItem(m, name));
}

/* The state a row is in now, as an event at its updated_at: what the row
 * itself can say honestly (its other steps left no timestamp). Returns 0
 * when its last change says nothing beyond "created" (an untouched
 * prepared or awaiting_prepare row). */
static int last_event(const cJSON *m, int changed, char *event, size_t evsz, char *detail,
                      size_t dsz)
{
	const char *st = field(m, "status"), *send = field(m, "send_status");
	const char *topic = field(m, "forward_topic"), *lerr = field(m, "last_error");
	int checks = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(m, "check_attempts"));
	int sends = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(m, "send_attempts"));
	topic = topic ? topic : "?";
	lerr = lerr ? lerr : "-";
	send = send ? send : "";
	if (!st)
		return 0;
	if (strcmp(st, "committed") == 0 && strcmp(send, "sent") == 0) {
		snprintf(event, evsz, "sent");
		snprintf(detail, dsz, "delivered to %s", topic);
	} else if (strcmp(st, "committed") == 0 && strcmp(send, "failed") == 0) {
		snprintf(event, evsz, "send_failed");
		snprintf(detail, dsz, "forward to %s given up after %d attempt(s): %s", topic, sends, lerr);
	} else if (strcmp(st, "committed") == 0 && strcmp(send, "skipped") == 0) {
		snprintf(event, evsz, "skipped");
		snprintf(detail, dsz, "never forwarded to %s (given up after %d failed attempt(s))",
		         topic, sends);
	} else if (strcmp(st, "committed") == 0) {
		snprintf(event, evsz, "forward_pending");
		snprintf(detail, dsz, "committed; forward to %s pending, %d failed attempt(s) so far",
		         topic, sends);
	} else if (strcmp(st, "rolled_back") == 0) {
		snprintf(event, evsz, "rolled_back");
		snprintf(detail, dsz, "never forwarded");
	} else if (strcmp(st, "check_failed") == 0) {
		snprintf(event, evsz, "check_failed");
		snprintf(detail, dsz, "after %d check-back attempt(s): %s", checks, lerr);
	} else if (changed) {
		snprintf(event, evsz, "%s", st);
		snprintf(detail, dsz, "%d check-back attempt(s) so far", checks);
	} else {
		return 0;
	}
	return 1;
}

static void add_event(cJSON *arr, cJSON *ev, int *ok)
{
	if (!ev || !cJSON_AddItemToArray(arr, ev)) {
		cJSON_Delete(ev);
		*ok = 0;
	}
}

/* The history, oldest first: "created" (at created_at) before everything,
 * the row's last change (at updated_at) after every history row up to that
 * moment, history rows in their order. */
static cJSON *history_json(const cJSON *m, const PGresult *row, const PGresult *h)
{
	int64_t created_us = ops_int(row, 0, NROW_FIELDS + 2);
	int64_t updated_us = ops_int(row, 0, NROW_FIELDS + 3);
	const char *decision = field(m, "decision"), *status = field(m, "status");
	char created_detail[128], ev[32], detail[1024];
	if (status && strcmp(status, "awaiting_prepare") == 0 && decision)
		snprintf(created_detail, sizeof created_detail,
		         "a %s arrived before its prepare; waiting for it", decision);
	else
		snprintf(created_detail, sizeof created_detail, "first envelope stored");
	int want_last = last_event(m, updated_us > created_us, ev, sizeof ev, detail, sizeof detail);
	int ok = 1;
	cJSON *arr = cJSON_CreateArray();
	if (!arr)
		return NULL;
	add_event(arr, event_json(field(m, "created_at"), "created", created_detail, NULL, 1), &ok);
	for (int i = 0; i < PQntuples(h); i++) {
		if (want_last && ops_int(h, i, 4) > updated_us) {
			add_event(arr, event_json(field(m, "updated_at"), ev, detail, NULL, 1), &ok);
			want_last = 0;
		}
		add_event(arr, event_json(PQgetvalue(h, i, 0), PQgetvalue(h, i, 1),
		                          PQgetisnull(h, i, 2) ? NULL : PQgetvalue(h, i, 2),
		                          PQgetvalue(h, i, 3), 0), &ok);
	}
	if (want_last)
		add_event(arr, event_json(field(m, "updated_at"), ev, detail, NULL, 1), &ok);
	if (!ok) {
		cJSON_Delete(arr);
		return NULL;
	}
	return arr;
}

/* Read the three parts of a message in one snapshot. */
static ops_rc show_read(PGconn *conn, const char *const *p, PGresult **row, PGresult **pay,
                        PGresult **hist, char *err, size_t errsz)
{
	ops_rc rc = ops_begin_read(conn, err, errsz);
	if (rc != OPS_OK)
		return rc;
	if (!(*row = ops_query(conn, SQL_SHOW_ROW, 2, p, 0, err, errsz)) ||
	    !(*pay = ops_query(conn, SQL_SHOW_PAYLOAD, 2, p, 1, err, errsz)) ||
	    !(*hist = ops_query(conn, SQL_SHOW_HISTORY, 2, p, 0, err, errsz)))
		rc = OPS_DB_ERROR;
	else
		rc = ops_exec(conn, "COMMIT", err, errsz);
	ops_rollback(conn);
	return rc;
}

ops_rc ops_show(PGconn *conn, const char *biz_id, const char *message_key, cJSON **out,
                char *err, size_t errsz)
{
	*out = NULL;
	ops_rc rc = ops_check_ids(biz_id, message_key, err, errsz);
	if (rc != OPS_OK)
		return rc;
	const char *p[2] = {biz_id, message_key};
	PGresult *row = NULL, *pay = NULL, *hist = NULL;
	cJSON *doc = NULL, *m = NULL, *h = NULL;
	if ((rc = show_read(conn, p, &row, &pay, &hist, err, errsz)) != OPS_OK)
		goto done;
	if (PQntuples(row) == 0 || PQntuples(pay) == 0) {
		snprintf(err, errsz, "no message with biz_id \"%s\" and message_key \"%s\"", biz_id,
		         message_key);
		rc = OPS_NOT_FOUND;
		goto done;
	}
	if (!(m = row_json(row, 0)) || add_show_fields(m, row, pay) != 0 ||
	    !(h = history_json(m, row, hist)) || !(doc = cJSON_CreateObject())) {
		snprintf(err, errsz, "out of memory");
		rc = OPS_DB_ERROR;
		goto done;
	}
	cJSON_AddItemToObject(doc, "message", m);
	cJSON_AddItemToObject(doc, "history", h);
	m = h = NULL;
	*out = doc;
done:
	cJSON_Delete(m);
	cJSON_Delete(h);
	PQclear(row);
	PQclear(pay);
	PQclear(hist);
	return rc;
}
