/* ops_deadletter.c: the dead-letter topic's figures (ops_deadletter.h). */
#include "ops_deadletter.h"

#include <libpq-fe.h>
#include <stdio.h>

#include "ops_sql.h"

/* $1: the tenant or NULL. The waiting rows walk messages_dead_letter (its
 * predicate is in the WHERE), the dead-lettered ones messages_stuck; a
 * waiting row is failing when its history holds a dead_letter_failed row
 * (of its tenant, or of none) since it was parked (updated_at: nothing
 * changes a parked row but a redrive or a skip, which end its wait). */
static const char *SQL_DEAD_LETTERS =
	"WITH w AS (SELECT m.biz_id, m.message_key, m.updated_at, m.tenant "
	"FROM txhub.message_rows m "
	"WHERE m.send_status = 'failed' AND m.dead_lettered_at IS NULL "
	"AND ($1::text IS NULL OR m.tenant = $1)), "
	"f AS (SELECT x.at, x.detail FROM w CROSS JOIN LATERAL (SELECT h.at, h.detail "
	"FROM txhub.history h WHERE h.biz_id = w.biz_id AND h.message_key = w.message_key "
	"AND h.at >= w.updated_at AND h.event = 'dead_letter_failed' "
	"AND (h.tenant IS NULL OR h.tenant = w.tenant) ORDER BY h.at DESC LIMIT 1) x) "
	"SELECT (SELECT count(*) FROM txhub.message_rows WHERE send_status = 'failed' "
	"AND dead_lettered_at IS NOT NULL AND ($1::text IS NULL OR tenant = $1)), "
	"(SELECT count(*) FROM w), (SELECT count(*) FROM f), "
	"coalesce((SELECT " TS("min(at)") " FROM f), ''), "
	"coalesce((SELECT detail FROM f ORDER BY at DESC LIMIT 1), '')";

ops_rc ops_dead_letters_read(PGconn *conn, const char *tenant, ops_dead_letters *out, char *err,
                             size_t errsz)
{
	const char *p[1] = {tenant};
	PGresult *r = ops_query(conn, SQL_DEAD_LETTERS, 1, p, 0, err, errsz);
	if (!r)
		return OPS_DB_ERROR;
	out->dead_lettered = ops_int(r, 0, 0);
	out->waiting = ops_int(r, 0, 1);
	out->failing = ops_int(r, 0, 2);
	snprintf(out->failing_since, sizeof out->failing_since, "%s", PQgetvalue(r, 0, 3));
	snprintf(out->last_error, sizeof out->last_error, "%s", PQgetvalue(r, 0, 4));
	PQclear(r);
	return OPS_OK;
}

static cJSON *text_or_null(const char *s)
{
	return *s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

cJSON *ops_dead_letters_json(const ops_dead_letters *d)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddItemToObject(o, "topic", text_or_null(d->topic));
	cJSON_AddNumberToObject(o, "dead_lettered", (double)d->dead_lettered);
	cJSON_AddNumberToObject(o, "waiting", (double)d->waiting);
	cJSON_AddBoolToObject(o, "failing", d->failing > 0);
	cJSON_AddNumberToObject(o, "failing_messages", (double)d->failing);
	cJSON_AddItemToObject(o, "failing_since", text_or_null(d->failing_since));
	cJSON_AddItemToObject(o, "last_error", text_or_null(d->last_error));
	return o;
}
