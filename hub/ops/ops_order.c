/* ops_order.c: the keys held back by forward.order = key (docs/consumers.md: Order per key), for
 * `txhub status` and the console (ops.h). */
#include <cjson/cJSON.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_order.h"
#include "ops_sql.h"

/* The keys with held rows (pending, no sequence, due at 'infinity': store.h),
 * the most held first, each with the unsent row that comes first in its
 * partition (the one to redrive or skip; none when it was just sent and
 * the held ones wait for the next scan). $1: the tenant or NULL. */
static const char *SQL_BLOCKED =
	"WITH h AS (SELECT src_topic, src_partition, forward_topic, forward_key, count(*) AS n, "
	"min(src_offset) AS first FROM txhub.message_rows WHERE send_status = 'pending' "
	"AND fwd_seq IS NULL AND next_send_at = 'infinity' AND forward_key IS NOT NULL "
	"AND ($1::text IS NULL OR tenant = $1) GROUP BY 1, 2, 3, 4), "
	"t AS (SELECT coalesce(sum(n), 0) AS total FROM h) "
	"SELECT t.total, h.forward_topic, h.forward_key, h.src_topic, h.src_partition, h.n, "
	"b.biz_id, b.message_key, b.send_status "
	"FROM t LEFT JOIN h ON true LEFT JOIN LATERAL (SELECT m.biz_id, m.message_key, "
	"m.send_status FROM txhub.message_rows m WHERE m.src_partition = h.src_partition "
	"AND m.src_topic = h.src_topic AND m.forward_topic = h.forward_topic "
	"AND m.forward_key = h.forward_key AND m.src_offset < h.first AND m.status = 'committed' "
	"AND ((m.send_status = 'pending' AND m.fwd_seq IS NULL) OR m.send_status = 'failed') "
	"ORDER BY m.src_offset LIMIT 1) b ON true "
	"ORDER BY h.n DESC, h.forward_topic, h.forward_key LIMIT " OPS_BLOCKED_MAX_TEXT;

ops_rc ops_blocked_read(PGconn *conn, const char *tenant, int64_t *messages,
                        ops_blocked_key **keys, size_t *nkeys, char *err, size_t errsz)
{
	const char *p[1] = {tenant};
	PGresult *r = ops_query(conn, SQL_BLOCKED, 1, p, 0, err, errsz);
	if (!r)
		return OPS_DB_ERROR;
	int n = PQntuples(r);
	*messages = n > 0 ? ops_int(r, 0, 0) : 0;
	if (n > 0 && !PQgetisnull(r, 0, 1) && !(*keys = calloc((size_t)n, sizeof **keys))) {
		PQclear(r);
		snprintf(err, errsz, "out of memory");
		return OPS_DB_ERROR;
	}
	for (int i = 0; *keys && i < n; i++) {
		ops_blocked_key *b = &(*keys)[(*nkeys)++];
		snprintf(b->topic, sizeof b->topic, "%s", PQgetvalue(r, i, 1));
		snprintf(b->key, sizeof b->key, "%s", PQgetvalue(r, i, 2));
		snprintf(b->control_topic, sizeof b->control_topic, "%s", PQgetvalue(r, i, 3));
		b->partition = (int32_t)ops_int(r, i, 4);
		b->held = ops_int(r, i, 5);
		snprintf(b->by_biz_id, sizeof b->by_biz_id, "%s", PQgetvalue(r, i, 6));
		snprintf(b->by_message_key, sizeof b->by_message_key, "%s", PQgetvalue(r, i, 7));
		snprintf(b->by_send_status, sizeof b->by_send_status, "%s", PQgetvalue(r, i, 8));
	}
	PQclear(r);
	return OPS_OK;
}

cJSON *ops_blocked_json(int64_t messages, const ops_blocked_key *held, size_t nkeys)
{
	cJSON *o = cJSON_CreateObject(), *keys = cJSON_AddArrayToObject(o, "keys");
	if (!o || !keys) {
		cJSON_Delete(o);
		return NULL;
	}
	cJSON_AddNumberToObject(o, "messages", (double)messages);
	for (size_t i = 0; i < nkeys; i++) {
		const ops_blocked_key *b = &held[i];
		cJSON *k = cJSON_CreateObject();
		if (!k) {
			cJSON_Delete(o);
			return NULL;
		}
		cJSON_AddItemToArray(keys, k);
		cJSON_AddStringToObject(k, "forward_topic", b->topic);
		cJSON_AddStringToObject(k, "forward_key", b->key);
		cJSON_AddStringToObject(k, "control_topic", b->control_topic);
		cJSON_AddNumberToObject(k, "partition", b->partition);
		cJSON_AddNumberToObject(k, "held", (double)b->held);
		cJSON *by = b->by_biz_id[0] ? cJSON_CreateObject() : cJSON_CreateNull();
		if (b->by_biz_id[0]) {
			cJSON_AddStringToObject(by, "biz_id", b->by_biz_id);
			cJSON_AddStringToObject(by, "message_key", b->by_message_key);
			cJSON_AddStringToObject(by, "send_status", b->by_send_status);
		}
		cJSON_AddItemToObject(k, "blocked_by", by);
	}
	return o;
}
