/* ops_delay.c: the operators' side of delayed delivery (docs/consumers.md:
 * Delayed delivery, issue 23 §1): `txhub redrive BIZ KEY --now` (ops.h). list
 * --scheduled is ops_list's (ops.c). */
#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>

#include "envelope.h"
#include "ops.h"
#include "ops_sql.h"
#include "rows_sql.h"

/* A scheduled row: committed, not sent (no sequence: delay_sql.h), due later.
 * Made due now, with its history row, in one statement; the row lock is the
 * UPDATE's, so a hub claiming it meanwhile (it fell due) wins and the
 * redrive is refused. */
static const char *SQL_REDRIVE_NOW =
	"WITH u AS (UPDATE txhub.message_rows AS m SET not_before = now(), next_send_at = now(), "
	"updated_at = now() FROM (SELECT biz_id, message_key, not_before FROM txhub.message_rows "
	"WHERE biz_id = $2 AND message_key = $3 FOR UPDATE) o "
	"WHERE m.biz_id = o.biz_id AND m.message_key = o.message_key AND m.status = 'committed' "
	"AND m.send_status = 'pending' AND m.fwd_seq IS NULL AND m.not_before > now() "
	"RETURNING m.biz_id, m.message_key, m.tenant, 'scheduled for ' || " TS("o.not_before")
	" || ' -> due now: forward at once' AS detail, coalesce(m.trace_id, '') AS tid), "
	"h AS (INSERT INTO txhub.history (biz_id, message_key, event, detail, actor, tenant) "
	"SELECT biz_id, message_key, 'redrive', detail, $1, tenant FROM u) "
	"SELECT detail, tid FROM u";

static const char *SQL_STATE =
	"SELECT r.status, coalesce(" SQL_SEND_STATUS("r") ", ''), "
	"coalesce(r.not_before <= now(), true), coalesce(r.trace_id, '') "
	"FROM txhub.message_rows r "
	"WHERE r.biz_id = $1 AND r.message_key = $2";

ops_rc ops_redrive_now(PGconn *conn, const char *biz_id, const char *message_key,
                       const char *actor, ops_change *out, char *err, size_t errsz)
{
	memset(out, 0, sizeof *out);
	ops_rc rc = ops_check_ids(biz_id, message_key, err, errsz);
	if (rc != OPS_OK)
		return rc;
	if (!actor)
		return ops_bad(err, errsz, "actor is missing");
	if (envelope_check_id("actor", actor, OPS_ACTOR_MAX, err, errsz) != 0)
		return OPS_BAD_ARG;
	const char *p[3] = {actor, biz_id, message_key};
	PGresult *r = ops_query(conn, SQL_REDRIVE_NOW, 3, p, 0, err, errsz);
	if (!r)
		return OPS_DB_ERROR;
	if (PQntuples(r) == 1) {
		snprintf(out->previous, sizeof out->previous, "scheduled");
		snprintf(out->status, sizeof out->status, "committed");
		snprintf(out->send_status, sizeof out->send_status, "pending");
		snprintf(out->detail, sizeof out->detail, "%s", PQgetvalue(r, 0, 0));
		snprintf(out->trace_id, sizeof out->trace_id, "%s", PQgetvalue(r, 0, 1));
		PQclear(r);
		return OPS_OK;
	}
	PQclear(r);
	/* why not: gone, or not (or no longer) scheduled */
	if (!(r = ops_query(conn, SQL_STATE, 2, p + 1, 0, err, errsz)))
		return OPS_DB_ERROR;
	if (PQntuples(r) == 0) {
		snprintf(err, errsz, "no message with biz_id \"%s\" and message_key \"%s\"", biz_id,
		         message_key);
		rc = OPS_NOT_FOUND;
	} else {
		const char *send = PQgetvalue(r, 0, 1);
		snprintf(out->trace_id, sizeof out->trace_id, "%s", PQgetvalue(r, 0, 3));
		snprintf(err, errsz, "message %s/%s is %s%s%s%s: only a scheduled message (committed, "
		         "due later, not sent) can be sent --now%s", biz_id, message_key,
		         PQgetvalue(r, 0, 0), *send ? " (send_status " : "", send, *send ? ")" : "",
		         PQgetvalue(r, 0, 2)[0] == 't' ? "; it is due already" : "");
		rc = OPS_REFUSED;
	}
	PQclear(r);
	return rc;
}
