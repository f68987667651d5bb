/* store_checks.c: missing prepares flagged, and the check-backs: claiming
 * due prepared messages, recording outcomes. */
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

store_rc store_flag_missing_prepares(store *st, const owned_part *own, size_t nown,
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
	store_check *n = array_grow(l->items, &l->cap, l->n + 1, sizeof *n);
	if (!n)
		return NULL;
	l->items = n;
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

store_rc store_claim_checks(store *st, const owned_part *own, size_t nown, int limit,
                            int64_t lease_ms, store_check_list *out, int64_t *next_due_ms,
                            char *err, size_t errsz)
{
	*next_due_ms = -1;
	if (nown == 0 || limit <= 0)
		return STORE_OK;
	owned_part *kept = NULL;
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

store_rc store_record_checks(store *st, const owned_part *own, size_t nown,
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
	owned_part *kept = NULL;
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
