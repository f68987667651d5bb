/* ops_write.c: the operations that change state (see ops.h): resolve,
 * redrive and purge.
 *
 * How they stay out of the hub's way: each transaction locks only message
 * rows, in key order, the order every hub transaction locks them in (after
 * its txhub.partitions rows, which these never touch), so the two can wait
 * for each other but never deadlock. The state is checked again after the
 * lock (FOR UPDATE re-reads a row that changed meanwhile), and the UPDATE
 * itself is conditional on it: a decision the hub applied a moment earlier
 * wins, and the operator's is refused. Answers to check-backs in flight
 * are written by the hub only if the row is still prepared at the attempt
 * it claimed (store_record_checks), so a resolve or redrive makes them
 * drop. Purge skips rows others hold (SKIP LOCKED) rather than wait. */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delay_sql.h"
#include "envelope.h"
#include "ops.h"
#include "ops_sql.h"
#include "rows_sql.h"

/* ---- shared ---- */

/* The row, locked until the transaction ends. */
static const char *SQL_LOCK_ROW =
	"SELECT r.status, coalesce(" SQL_SEND_STATUS("r") ", ''), coalesce(r.trace_id, '') "
	"FROM txhub.message_rows r WHERE r.biz_id = $1 AND r.message_key = $2 FOR UPDATE OF r";

/* With the message's tenant: a team's role (row-level security) may add
 * history rows of its own tenant only, and sees them by it. */
static const char *SQL_HISTORY =
	"INSERT INTO txhub.history (biz_id, message_key, event, detail, actor, tenant) "
	"SELECT $1, $2, $3, $4, $5, m.tenant FROM txhub.message_rows m "
	"WHERE m.biz_id = $1 AND m.message_key = $2";

static ops_rc check_actor(const char *actor, char *err, size_t errsz)
{
	if (!actor)
		return ops_bad(err, errsz, "actor is missing");
	return envelope_check_id("actor", actor, OPS_ACTOR_MAX, err, errsz) ? OPS_BAD_ARG : OPS_OK;
}

/* BEGIN and lock the row; status and send_status (or "") into the
 * buffers, its trace id into out->trace_id. OPS_NOT_FOUND when there is
 * none. On anything but OPS_OK the transaction is rolled back. */
static ops_rc begin_locked(PGconn *conn, const char *const *ids, char *status, size_t stsz,
                           char *send, size_t sendsz, ops_change *out, char *err, size_t errsz)
{
	ops_rc rc = ops_exec(conn, "BEGIN", err, errsz);
	if (rc != OPS_OK)
		return rc;
	PGresult *r = ops_query(conn, SQL_LOCK_ROW, 2, ids, 0, err, errsz);
	if (!r) {
		rc = OPS_DB_ERROR;
	} else if (PQntuples(r) == 0) {
		snprintf(err, errsz, "no message with biz_id \"%s\" and message_key \"%s\"", ids[0],
		         ids[1]);
		rc = OPS_NOT_FOUND;
	} else {
		snprintf(status, stsz, "%s", PQgetvalue(r, 0, 0));
		snprintf(send, sendsz, "%s", PQgetvalue(r, 0, 1));
		snprintf(out->trace_id, sizeof out->trace_id, "%s", PQgetvalue(r, 0, 2));
	}
	PQclear(r);
	if (rc != OPS_OK)
		ops_rollback(conn);
	return rc;
}

/* "message shop/o-1 is committed (send_status sent)": the state named in a
 * refusal. */
static void refuse(char *err, size_t errsz, const char *const *ids, const char *status,
                   const char *send, const char *what)
{
	snprintf(err, errsz, "message %s/%s is %s%s%s%s: %s", ids[0], ids[1], status,
	         *send ? " (send_status " : "", send, *send ? ")" : "", what);
}

/* ---- resolve ---- */

static const char *SQL_RESOLVE =
	"UPDATE txhub.message_rows SET status = $3::text, "
	"send_status = CASE WHEN $3::text = 'committed' THEN 'pending' ELSE send_status END, "
	"send_attempts = CASE WHEN $3::text = 'committed' THEN 0 ELSE send_attempts END, "
	SQL_COMMIT_DUE("", "$3::text = 'committed'") ", "
	"fwd_seq = NULL, next_check_at = NULL, updated_at = now() "
	"WHERE biz_id = $1 AND message_key = $2 AND status IN ('prepared', 'check_failed') "
	"RETURNING status, coalesce(send_status, '')";

static ops_rc check_resolve(const char *const *ids, ops_decision d, const char *reason,
                            const char *actor, char *err, size_t errsz)
{
	ops_rc rc = ops_check_ids(ids[0], ids[1], err, errsz);
	if (rc != OPS_OK)
		return rc;
	if (d != OPS_COMMIT && d != OPS_ROLLBACK)
		return ops_bad(err, errsz, "the decision must be commit or rollback");
	if (reason && envelope_check_id("reason", reason, OPS_REASON_MAX, err, errsz) != 0)
		return OPS_BAD_ARG;
	return check_actor(actor, err, errsz);
}

/* The UPDATE and its history row, inside the transaction begin_locked()
 * opened. */
static ops_rc resolve_write(PGconn *conn, const char *const *ids, ops_decision d,
                            const char *reason, const char *actor, ops_change *out, char *err,
                            size_t errsz)
{
	const char *to = d == OPS_COMMIT ? "committed" : "rolled_back";
	const char *p[3] = {ids[0], ids[1], to};
	PGresult *r = ops_query(conn, SQL_RESOLVE, 3, p, 0, err, errsz);
	if (!r)
		return OPS_DB_ERROR;
	if (PQntuples(r) != 1) { /* cannot happen under the lock; refuse rather than guess */
		PQclear(r);
		refuse(err, errsz, ids, out->previous, "", "its state changed under the lock");
		return OPS_REFUSED;
	}
	snprintf(out->status, sizeof out->status, "%s", PQgetvalue(r, 0, 0));
	snprintf(out->send_status, sizeof out->send_status, "%s", PQgetvalue(r, 0, 1));
	PQclear(r);
	snprintf(out->detail, sizeof out->detail, "%s (was %s)%s%s",
	         d == OPS_COMMIT ? "commit" : "rollback", out->previous, reason ? ": " : "",
	         reason ? reason : "");
	const char *h[5] = {ids[0], ids[1], "resolve", out->detail, actor};
	ops_rc rc = ops_command(conn, SQL_HISTORY, 5, h, err, errsz);
	return rc == OPS_OK ? ops_exec(conn, "COMMIT", err, errsz) : rc;
}

ops_rc ops_resolve(PGconn *conn, const char *biz_id, const char *message_key, ops_decision d,
                   const char *reason, const char *actor, ops_change *out, char *err,
                   size_t errsz)
{
	const char *ids[2] = {biz_id, message_key};
	char send[16];
	memset(out, 0, sizeof *out);
	ops_rc rc = check_resolve(ids, d, reason, actor, err, errsz);
	if (rc != OPS_OK)
		return rc;
	rc = begin_locked(conn, ids, out->previous, sizeof out->previous, send, sizeof send, out,
	                  err, errsz);
	if (rc != OPS_OK)
		return rc;
	if (strcmp(out->previous, "prepared") != 0 && strcmp(out->previous, "check_failed") != 0) {
		refuse(err, errsz, ids, out->previous, send,
		       "only a prepared or check_failed message can be resolved");
		rc = OPS_REFUSED;
	} else {
		rc = resolve_write(conn, ids, d, reason, actor, out, err, errsz);
	}
	ops_rollback(conn);
	return rc;
}

/* ---- redrive ---- */

/* Every check_failed row and failed send (of biz_id $2 and message_key $3
 * when not null), locked in key order, made due now, each with a history
 * row by actor $1. A row that stopped matching while we waited for its
 * lock (a decision arrived) is left out by FOR UPDATE's re-check. */
static const char *SQL_REDRIVE =
	"WITH c AS (SELECT biz_id, message_key, status, check_attempts, send_attempts "
	"FROM txhub.message_rows WHERE (status = 'check_failed' OR send_status = 'failed') "
	"AND ($2::text IS NULL OR biz_id = $2) AND ($3::text IS NULL OR message_key = $3) "
	"ORDER BY biz_id, message_key FOR UPDATE), "
	"u AS (UPDATE txhub.message_rows AS m SET "
	"status = CASE WHEN c.status = 'check_failed' THEN 'prepared' ELSE m.status END, "
	"check_attempts = CASE WHEN c.status = 'check_failed' THEN 0 ELSE m.check_attempts END, "
	"next_check_at = CASE WHEN c.status = 'check_failed' THEN now() ELSE m.next_check_at END, "
	"send_status = CASE WHEN c.status = 'check_failed' THEN m.send_status ELSE 'pending' END, "
	"send_attempts = CASE WHEN c.status = 'check_failed' THEN m.send_attempts ELSE 0 END, "
	"next_send_at = CASE WHEN c.status = 'check_failed' THEN m.next_send_at ELSE now() END, "
	/* exactly_once: a new forward sequence when it is due again */
	"fwd_seq = CASE WHEN c.status = 'check_failed' THEN m.fwd_seq ELSE NULL END, "
	"updated_at = now() "
	"FROM c WHERE m.biz_id = c.biz_id AND m.message_key = c.message_key "
	"RETURNING m.biz_id, m.message_key, m.tenant, c.status = 'check_failed' AS was_check, "
	"m.status, "
	"coalesce(m.send_status, '') AS send, "
	"CASE WHEN c.status = 'check_failed' THEN c.check_attempts ELSE c.send_attempts END AS n, "
	"CASE WHEN c.status = 'check_failed' "
	"THEN 'check_failed -> prepared: check back again (' || c.check_attempts "
	"|| ' attempt(s) before)' "
	"ELSE 'send failed -> pending: forward again (' || c.send_attempts "
	"|| ' attempt(s) before)' END AS detail), "
	"h AS (INSERT INTO txhub.history (biz_id, message_key, event, detail, actor, tenant) "
	"SELECT biz_id, message_key, 'redrive', detail, $1, tenant FROM u) "
	"SELECT was_check, status, send, n, detail FROM u";

/* After the change's statement r (columns: what it was, as a flag 't' for
 * check_failed when was_flag, else as text; status; send_status; attempts;
 * detail) on the row locked by begin_locked: COMMIT, or refuse with why
 * when the statement found the row in no state it changes. Clears r and
 * ends the transaction. */
static ops_rc change_done(PGconn *conn, PGresult *r, int was_flag, const char *const *ids,
                          const char *status, const char *send, const char *why,
                          ops_change *out, char *err, size_t errsz)
{
	ops_rc rc;
	if (!r) {
		rc = OPS_DB_ERROR;
	} else if (PQntuples(r) != 1) {
		refuse(err, errsz, ids, status, send, why);
		rc = OPS_REFUSED;
	} else {
		const char *was = PQgetvalue(r, 0, 0);
		snprintf(out->previous, sizeof out->previous, "%s",
		         !was_flag ? was : was[0] == 't' ? "check_failed" : "send_failed");
		snprintf(out->status, sizeof out->status, "%s", PQgetvalue(r, 0, 1));
		snprintf(out->send_status, sizeof out->send_status, "%s", PQgetvalue(r, 0, 2));
		out->attempts = (int32_t)ops_int(r, 0, 3);
		snprintf(out->detail, sizeof out->detail, "%s", PQgetvalue(r, 0, 4));
		rc = ops_exec(conn, "COMMIT", err, errsz);
	}
	PQclear(r);
	ops_rollback(conn);
	return rc;
}

/* One message that a change (redrive, skip) is made to: its ids, and its
 * status and send_status ("" for none) as change_begin() found them. */
typedef struct {
	const char *ids[2];
	char status[32], send[16];
} change_row;

/* The start of a change to one message: out zeroed; the ids, the actor
 * and, when the change takes one (takes_reason), the reason (required)
 * checked in that order; then BEGIN and the row locked (begin_locked()).
 * On anything but OPS_OK no transaction is left open. */
static ops_rc change_begin(PGconn *conn, change_row *c, const char *biz_id,
                           const char *message_key, const char *actor, int takes_reason,
                           const char *reason, ops_change *out, char *err, size_t errsz)
{
	c->ids[0] = biz_id;
	c->ids[1] = message_key;
	memset(out, 0, sizeof *out);
	ops_rc rc = ops_check_ids(biz_id, message_key, err, errsz);
	if (rc == OPS_OK)
		rc = check_actor(actor, err, errsz);
	if (rc == OPS_OK && takes_reason && !reason)
		rc = ops_bad(err, errsz, "a reason is required");
	if (rc == OPS_OK && takes_reason &&
	    envelope_check_id("reason", reason, OPS_REASON_MAX, err, errsz) != 0)
		rc = OPS_BAD_ARG;
	if (rc != OPS_OK)
		return rc;
	return begin_locked(conn, c->ids, c->status, sizeof c->status, c->send, sizeof c->send, out,
	                    err, errsz);
}

ops_rc ops_redrive(PGconn *conn, const char *biz_id, const char *message_key, const char *actor,
                   ops_change *out, char *err, size_t errsz)
{
	change_row c;
	ops_rc rc = change_begin(conn, &c, biz_id, message_key, actor, 0, NULL, out, err, errsz);
	if (rc != OPS_OK)
		return rc;
	if (strcmp(c.status, "check_failed") != 0 && strcmp(c.send, "failed") != 0) {
		refuse(err, errsz, c.ids, c.status, c.send,
		       "only a check_failed message or a failed send can be redriven");
		ops_rollback(conn);
		return OPS_REFUSED;
	}
	const char *p[3] = {actor, biz_id, message_key};
	PGresult *r = ops_query(conn, SQL_REDRIVE, 3, p, 0, err, errsz);
	return change_done(conn, r, 1, c.ids, c.status, c.send, "its state changed under the lock",
	                   out, err, errsz);
}

/* ---- skip ---- */

/* A held row waits, without a sequence, due at 'infinity' (store.h). */
#define SQL_SKIPPABLE                                                                  \
	"status = 'committed' AND (send_status = 'failed' OR (send_status = 'pending' "   \
	"AND fwd_seq IS NULL AND next_send_at = 'infinity'))"

static const char *SQL_SKIP =
	"WITH c AS (SELECT biz_id, message_key, send_status, send_attempts "
	"FROM txhub.message_rows WHERE biz_id = $2 AND message_key = $3 AND " SQL_SKIPPABLE " "
	"FOR UPDATE), "
	"u AS (UPDATE txhub.message_rows AS m SET send_status = 'skipped', updated_at = now() "
	"FROM c WHERE m.biz_id = c.biz_id AND m.message_key = c.message_key "
	"RETURNING m.biz_id, m.message_key, m.tenant, c.send_status AS before, m.status, "
	"c.send_attempts, CASE WHEN c.send_status = 'failed' THEN 'send failed' "
	"ELSE 'held for an earlier message of its key' END || ' -> skipped: ' || $4 AS detail), "
	"h AS (INSERT INTO txhub.history (biz_id, message_key, event, detail, actor, tenant) "
	"SELECT biz_id, message_key, 'skip', detail, $1, tenant FROM u) "
	"SELECT CASE WHEN before = 'failed' THEN 'send_failed' ELSE 'held' END, status, "
	"'skipped', send_attempts, detail FROM u";

ops_rc ops_skip(PGconn *conn, const char *biz_id, const char *message_key, const char *reason,
                const char *actor, ops_change *out, char *err, size_t errsz)
{
	change_row c;
	ops_rc rc = change_begin(conn, &c, biz_id, message_key, actor, 1, reason, out, err, errsz);
	if (rc != OPS_OK)
		return rc;
	const char *p[4] = {actor, biz_id, message_key, reason};
	PGresult *r = ops_query(conn, SQL_SKIP, 4, p, 0, err, errsz);
	return change_done(conn, r, 0, c.ids, c.status, c.send,
	                   "only a failed send or one held for an earlier message of its key "
	                   "(forward.order = key) can be skipped",
	                   out, err, errsz);
}

ops_rc ops_redrive_all(PGconn *conn, const char *biz_id, const char *actor,
                       ops_redrive_counts *out, char *err, size_t errsz)
{
	memset(out, 0, sizeof *out);
	if (biz_id && envelope_check_id("biz_id", biz_id, ENVELOPE_BIZ_ID_MAX, err, errsz) != 0)
		return OPS_BAD_ARG;
	ops_rc rc = check_actor(actor, err, errsz);
	if (rc != OPS_OK)
		return rc;
	/* one statement: its own transaction, all rows or none */
	const char *p[3] = {actor, biz_id, NULL};
	PGresult *r = ops_query(conn, SQL_REDRIVE, 3, p, 0, err, errsz);
	if (!r)
		return OPS_DB_ERROR;
	for (int i = 0; i < PQntuples(r); i++) {
		if (PQgetvalue(r, i, 0)[0] == 't')
			out->checks++;
		else
			out->sends++;
	}
	PQclear(r);
	return OPS_OK;
}

cJSON *ops_change_json(const char *biz_id, const char *message_key, const char *action,
                       const char *actor, const ops_change *c)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "biz_id", biz_id);
	cJSON_AddStringToObject(o, "message_key", message_key);
	cJSON_AddStringToObject(o, "action", action);
	cJSON_AddStringToObject(o, "previous", c->previous);
	cJSON_AddStringToObject(o, "status", c->status);
	cJSON_AddItemToObject(o, "send_status", *c->send_status ? cJSON_CreateString(c->send_status)
	                                                        : cJSON_CreateNull());
	cJSON_AddStringToObject(o, "detail", c->detail);
	cJSON_AddStringToObject(o, "actor", actor);
	return o;
}

/* ---- purge: the statements are the store's (store_purge.c) ---- */

ops_rc ops_purge_batch(PGconn *conn, const store_purge_opts *o, store_purge_counts *out, char *err,
                       size_t errsz)
{
	int rc = store_purge_batch(conn, o, out, err, errsz);
	return rc == 0 ? OPS_OK : rc == -2 ? OPS_BAD_ARG : OPS_DB_ERROR;
}

cJSON *ops_purge_json(const store_purge_counts *c, int dry_run)
{
	cJSON *o = cJSON_CreateObject(), *m = cJSON_CreateObject();
	if (!o || !m) {
		cJSON_Delete(o);
		cJSON_Delete(m);
		return NULL;
	}
	cJSON_AddBoolToObject(o, "dry_run", dry_run);
	cJSON_AddNumberToObject(m, "committed", (double)c->committed);
	cJSON_AddNumberToObject(m, "rolled_back", (double)c->rolled_back);
	cJSON_AddItemToObject(o, "messages", m);
	cJSON_AddNumberToObject(o, "history", (double)c->history);
	cJSON_AddNumberToObject(o, "rejected", (double)c->rejected);
	cJSON_AddNumberToObject(o, "conflicts", (double)c->conflicts);
	return o;
}
