/* ops_status.c: `txhub status` (ops.h): the counts and partitions read
 * from PostgreSQL, the broker's end offsets for the lag, the JSON. */
#include "ops.h"
#include "ops_int.h"

#include <librdkafka/rdkafka.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "kafka.h"
#include "ops_sql.h"
#include "rows_sql.h"
#include "tenant_rules.h"
#include "topics.h"

/* ---- status ---- */

/* agg over the rows operators see as pending (rows_sql.h: the CTE pend
 * that SQL_STATUS_WHERE begins with), with more conditions T. */
#define PENDING(agg, T) "(SELECT " agg " FROM pend WHERE true" T ")"

/* One scalar sub-select per number, each shaped to walk one partial index.
 * messages.committed is the sum of its three send states (the hub never
 * leaves a committed row without one); sent is counted as the committed
 * rows that are neither pending nor failed, as a partition's mark sends
 * them without writing them (migration 0012). $1: alert.awaiting_prepare_ms. T:
 * more conditions on every table (a tenant's rows: there is no index on
 * tenant, each count filters the rows its index gives). */
#define SQL_STATUS_WHERE(T)                                                                     \
	"WITH RECURSIVE " SQL_PENDING_PARTS ", pend AS ("                                           \
	SQL_PENDING_ROWS("r.tenant, r.updated_at, r.not_before") ") SELECT "                                      \
	"(SELECT count(*) FROM txhub.message_rows WHERE status = 'prepared'" T "), "                    \
	"(SELECT count(*) FROM txhub.message_rows WHERE status = 'awaiting_prepare'" T "), "            \
	"(SELECT count(*) FROM txhub.message_rows WHERE status = 'committed'" T ") - "              \
	PENDING("count(*)", T) " - "                                                                \
	"(SELECT count(*) FROM txhub.message_rows WHERE send_status = 'failed' AND status = "           \
	"'committed'" T "), "                                                                       \
	PENDING("count(*)", T) ", "                                                                 \
	"(SELECT count(*) FROM txhub.message_rows WHERE send_status = 'failed' AND status = "           \
	"'committed'" T "), "                                                                       \
	"(SELECT count(*) FROM txhub.message_rows WHERE status = 'rolled_back'" T "), "                 \
	"(SELECT count(*) FROM txhub.message_rows WHERE status = 'check_failed'" T "), "                \
	PENDING("count(*)", T) ", "                                                                 \
	"(SELECT count(*) FROM txhub.message_rows WHERE send_status = 'failed'" T "), "                 \
	"(SELECT count(*) FROM txhub.message_rows WHERE status = 'awaiting_prepare' "                   \
	" AND created_at < now() - $1::bigint * interval '1 millisecond'" T "), "                   \
	"(SELECT floor(extract(epoch FROM now() - min(created_at)))::bigint FROM txhub.message_rows "   \
	" WHERE status = 'prepared'" T "), "                                                        \
	/* a delayed row waits from its due time (delay_sql.h), not before */                   \
	"(SELECT floor(extract(epoch FROM now() - min(greatest(updated_at, not_before))))::bigint " \
	"FROM pend WHERE NOT coalesce(not_before > now(), false)" T "), "                          \
	"(SELECT count(*) FROM txhub.rejected WHERE created_at > now() - interval '1 hour'" T "), " \
	"(SELECT count(*) FROM txhub.rejected WHERE true" T "), "                                   \
	"(SELECT count(*) FROM txhub.conflicts WHERE created_at > now() - interval '1 hour'" T      \
	"), "                                                                                       \
	"(SELECT count(*) FROM txhub.conflicts WHERE true" T ")"

static const char *SQL_STATUS = SQL_STATUS_WHERE("");
/* $2: the tenant */
static const char *SQL_STATUS_TENANT = SQL_STATUS_WHERE(" AND tenant = $2");

static const char *SQL_PARTITIONS =
	"SELECT tp.topic, tp.partition, owner, coalesce(group_id, ''), epoch, "
	"coalesce(next_offset, -1), "
	"coalesce(floor(extract(epoch FROM now() - heartbeat_at) * 1000)::bigint, -1), "
	"released_at IS NOT NULL, "
	/* a waiting replica says so every 5 s (janitor.c): older is over */
	"CASE WHEN tp.contested_at > now() - interval '30 seconds' "
	"AND tp.contested_by IS DISTINCT FROM tp.group_id THEN tp.contested_by ELSE '' END, "
	"(SELECT coalesce(sum(to_offset - from_offset), 0) FROM txhub.gaps g "
	" WHERE g.topic = tp.topic AND g.partition = tp.partition AND g.kind = 'lost'), "
	"coalesce(lg.kind, ''), coalesce(lg.from_offset, -1), coalesce(lg.to_offset, -1), "
	"coalesce(to_char(lg.detected_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), ''), "
	"coalesce(floor(extract(epoch FROM now() - lg.detected_at))::bigint, -1) "
	"FROM txhub.partitions tp LEFT JOIN LATERAL (SELECT kind, from_offset, to_offset, "
	"detected_at FROM txhub.gaps g WHERE g.topic = tp.topic AND g.partition = tp.partition "
	"ORDER BY id DESC LIMIT 1) lg ON true ORDER BY tp.topic, tp.partition";

static void read_counts(const PGresult *r, ops_status *st)
{
	int64_t v[16];
	for (int i = 0; i < 16; i++)
		v[i] = ops_int(r, 0, i);
	st->messages[0] = v[0];                 /* prepared */
	st->messages[1] = v[1];                 /* awaiting_prepare */
	st->messages[2] = v[2] + v[3] + v[4];   /* committed: sent + pending + failed */
	st->messages[3] = v[5];                 /* rolled_back */
	st->messages[4] = v[6];                 /* check_failed */
	st->send_sent = v[2];
	st->send_pending = v[7];
	st->send_failed = v[8];
	st->parked_check_failed = v[6];
	st->parked_send_failed = v[8];
	st->parked_awaiting = v[9];
	st->parked = v[6] + v[8] + v[9];
	st->oldest_prepared_s = v[10];
	st->oldest_pending_send_s = v[11];
	st->rejected_1h = v[12];
	st->rejected = v[13];
	st->conflicts_1h = v[14];
	st->conflicts = v[15];
}

static int read_partitions(const PGresult *r, ops_status *st)
{
	int n = PQntuples(r);
	st->partitions = calloc(n > 0 ? (size_t)n : 1, sizeof *st->partitions);
	if (!st->partitions)
		return -1;
	for (int i = 0; i < n; i++) {
		ops_partition *p = &st->partitions[st->npartitions++];
		snprintf(p->topic, sizeof p->topic, "%s", PQgetvalue(r, i, 0));
		p->partition = (int32_t)ops_int(r, i, 1);
		p->has_row = 1;
		snprintf(p->owner, sizeof p->owner, "%s", PQgetvalue(r, i, 2));
		snprintf(p->group, sizeof p->group, "%s", PQgetvalue(r, i, 3));
		p->epoch = ops_int(r, i, 4);
		p->next_offset = ops_int(r, i, 5);
		p->heartbeat_age_ms = ops_int(r, i, 6);
		p->released = PQgetvalue(r, i, 7)[0] == 't';
		snprintf(p->contested_by, sizeof p->contested_by, "%s", PQgetvalue(r, i, 8));
		p->lost_offsets = ops_int(r, i, 9);
		snprintf(p->gap_kind, sizeof p->gap_kind, "%s", PQgetvalue(r, i, 10));
		p->gap_from = ops_int(r, i, 11);
		p->gap_to = ops_int(r, i, 12);
		snprintf(p->gap_at, sizeof p->gap_at, "%s", PQgetvalue(r, i, 13));
		p->gap_age_s = ops_int(r, i, 14);
		p->high_watermark = -1;
		p->lag = -1;
	}
	return 0;
}

ops_rc ops_status_read_tenant(PGconn *conn, int64_t awaiting_prepare_ms, const char *tenant,
                              ops_status *out, char *err, size_t errsz)
{
	memset(out, 0, sizeof *out);
	if (tenant && tenant_name_check(tenant, err, errsz) != 0)
		return OPS_BAD_ARG;
	snprintf(out->tenant, sizeof out->tenant, "%s", tenant ? tenant : "");
	char ms[32];
	snprintf(ms, sizeof ms, "%lld", (long long)awaiting_prepare_ms);
	const char *p[2] = {ms, tenant};
	PGresult *r = NULL;
	ops_rc rc = ops_begin_read(conn, err, errsz);
	if (rc != OPS_OK)
		return rc;
	if (!(r = ops_query(conn, tenant ? SQL_STATUS_TENANT : SQL_STATUS, tenant ? 2 : 1, p, 0, err,
	                    errsz))) {
		rc = OPS_DB_ERROR;
		goto done;
	}
	read_counts(r, out);
	PQclear(r);
	if (!(r = ops_query(conn, SQL_PARTITIONS, 0, NULL, 0, err, errsz))) {
		rc = OPS_DB_ERROR;
		goto done;
	}
	if (read_partitions(r, out) != 0) {
		snprintf(err, errsz, "out of memory");
		rc = OPS_DB_ERROR;
		goto done;
	}
	if ((rc = ops_blocked_read(conn, tenant, &out->blocked_messages, &out->blocked,
	                           &out->nblocked, err, errsz)) != OPS_OK ||
	    (rc = ops_dead_letters_read(conn, tenant, &out->dead_letters, err, errsz)) != OPS_OK)
		goto done;
	rc = ops_exec(conn, "COMMIT", err, errsz);
done:
	PQclear(r);
	ops_rollback(conn);
	return rc;
}

void ops_status_free(ops_status *st)
{
	if (!st)
		return;
	free(st->partitions);
	st->partitions = NULL;
	st->npartitions = 0;
	free(st->blocked);
	st->blocked = NULL;
	st->nblocked = 0;
}

/* ---- status: the broker's end offsets ---- */

static int has_partition(const ops_status *st, const char *topic, int32_t part)
{
	for (size_t i = 0; i < st->npartitions; i++)
		if (st->partitions[i].partition == part && strcmp(st->partitions[i].topic, topic) == 0)
			return 1;
	return 0;
}

/* The partitions of mt that have no row. */
static void add_topic_unowned(const rd_kafka_metadata_topic_t *mt, ops_status *st)
{
	size_t want = st->npartitions + (size_t)mt->partition_cnt;
	ops_partition *grown = realloc(st->partitions, (want ? want : 1) * sizeof *grown);
	if (!grown)
		return;
	st->partitions = grown;
	for (int i = 0; i < mt->partition_cnt; i++) {
		int32_t part = mt->partitions[i].id;
		if (has_partition(st, mt->topic, part))
			continue;
		ops_partition *p = &st->partitions[st->npartitions++];
		memset(p, 0, sizeof *p);
		snprintf(p->topic, sizeof p->topic, "%s", mt->topic);
		p->partition = part;
		p->next_offset = p->high_watermark = p->lag = p->heartbeat_age_ms = -1;
		p->gap_from = p->gap_to = p->gap_age_s = -1;
	}
}

/* The broker's metadata of topic, or of every topic (NULL); NULL with
 * st->lag_note when it did not answer. */
static const rd_kafka_metadata_t *metadata_of(rd_kafka_t *rk, const char *topic, ops_status *st,
                                              int timeout_ms)
{
	const rd_kafka_metadata_t *md = NULL;
	rd_kafka_topic_t *t = topic ? rd_kafka_topic_new(rk, topic, NULL) : NULL;
	if (topic && !t)
		return NULL;
	rd_kafka_resp_err_t e = rd_kafka_metadata(rk, !topic, t, &md, timeout_ms);
	if (t)
		rd_kafka_topic_destroy(t);
	if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
		snprintf(st->lag_note, sizeof st->lag_note, "the broker did not answer within %d ms "
		         "(%s)", OPS_LAG_BUDGET_MS, rd_kafka_err2str(e));
		return NULL;
	}
	return md;
}

/* The control topics' partitions that have no row: a partition no replica
 * ever took is worth seeing (nothing reads it). Each topic of a list is
 * asked about; a pattern is matched against every topic the broker lets
 * this principal see. */
static void add_unowned(rd_kafka_t *rk, const char *control_topic, ops_status *st,
                        int timeout_ms)
{
	topics_spec spec;
	char err[256];
	if (topics_parse(control_topic, &spec, err, sizeof err) != 0) {
		snprintf(st->lag_note, sizeof st->lag_note, "control_topic: %s", err);
		topics_free(&spec);
		return;
	}
	int64_t deadline = clock_ms() + timeout_ms;
	for (size_t k = 0; k < (spec.pattern ? 1 : spec.n) && !st->lag_note[0]; k++) {
		int left = (int)(deadline - clock_ms());
		const rd_kafka_metadata_t *md =
			metadata_of(rk, spec.pattern ? NULL : spec.names[k], st, left > 0 ? left : 1);
		for (int i = 0; md && i < md->topic_cnt; i++) {
			const rd_kafka_metadata_topic_t *mt = &md->topics[i];
			if (spec.pattern && (!topics_match(&spec, mt->topic) || mt->err))
				continue;
			if (mt->err) /* e.g. an ACL that does not let this principal describe it */
				snprintf(st->lag_note, sizeof st->lag_note, "%s: %s", mt->topic,
				         rd_kafka_err2str(mt->err));
			else
				add_topic_unowned(mt, st);
		}
		if (md)
			rd_kafka_metadata_destroy(md);
	}
	topics_free(&spec);
}

static void fill_lag(rd_kafka_t *rk, ops_status *st, int64_t deadline)
{
	for (size_t i = 0; i < st->npartitions; i++) {
		ops_partition *p = &st->partitions[i];
		int64_t left = deadline - clock_ms();
		if (left <= 0) {
			snprintf(st->lag_note, sizeof st->lag_note,
			         "the broker did not answer within %d ms", OPS_LAG_BUDGET_MS);
			return;
		}
		int64_t lo = -1, hi = -1;
		rd_kafka_resp_err_t e =
			rd_kafka_query_watermark_offsets(rk, p->topic, p->partition, &lo, &hi, (int)left);
		if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
			snprintf(st->lag_note, sizeof st->lag_note, "partition %d of %s: %s", p->partition,
			         p->topic, rd_kafka_err2str(e));
			continue;
		}
		p->high_watermark = hi;
		if (p->next_offset >= 0 && hi >= p->next_offset)
			p->lag = hi - p->next_offset;
		else if (p->next_offset < 0 && hi == lo)
			/* nothing applied yet, but nothing there to apply either:
			 * wherever a reader stands, it has no record to catch up on */
			p->lag = 0;
		else if (p->next_offset >= 0)
			/* the topic was deleted and made again: its offsets start anew */
			snprintf(st->lag_note, sizeof st->lag_note, "partition %d of %s ends at %lld, "
			         "before its next_offset %lld", p->partition, p->topic, (long long)hi,
			         (long long)p->next_offset);
	}
}

void ops_status_lag(const txhub_config *cfg, ops_status *st, int budget_ms)
{
	int64_t deadline = clock_ms() + budget_ms;
	/* a status query must neither create topics nor fill the operator's
	 * terminal with connection errors: the note says what went wrong */
	static const char *const defaults[] = {"allow.auto.create.topics", "false", "log_level", "0",
	                                       NULL};
	char err[512];
	rd_kafka_t *rk = kafka_client_new(cfg, RD_KAFKA_PRODUCER, defaults, NULL, err, sizeof err);
	if (!rk) {
		snprintf(st->lag_note, sizeof st->lag_note, "%s", err);
		return;
	}
	add_unowned(rk, cfg->control_topic, st, budget_ms);
	if (!st->lag_note[0])
		fill_lag(rk, st, deadline);
	rd_kafka_destroy(rk);
}

/* ---- status: JSON ---- */

static cJSON *num_or_null(int64_t v)
{
	return v < 0 ? cJSON_CreateNull() : cJSON_CreateNumber((double)v);
}

static cJSON *str_or_null(const char *s)
{
	return s && *s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static cJSON *partition_json(const ops_partition *p)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "topic", p->topic);
	cJSON_AddNumberToObject(o, "partition", p->partition);
	cJSON_AddItemToObject(o, "owner", str_or_null(p->owner));
	cJSON_AddItemToObject(o, "group", str_or_null(p->group));
	cJSON_AddItemToObject(o, "epoch", p->has_row ? cJSON_CreateNumber((double)p->epoch)
	                                             : cJSON_CreateNull());
	cJSON_AddItemToObject(o, "next_offset", num_or_null(p->next_offset));
	cJSON_AddItemToObject(o, "lag", num_or_null(p->lag));
	cJSON_AddItemToObject(o, "high_watermark", num_or_null(p->high_watermark));
	cJSON_AddItemToObject(o, "heartbeat_age_s", p->heartbeat_age_ms < 0 ? cJSON_CreateNull()
	                      : cJSON_CreateNumber((double)(p->heartbeat_age_ms / 1000)));
	cJSON_AddBoolToObject(o, "released", p->released);
	cJSON_AddItemToObject(o, "contested_by", str_or_null(p->contested_by));
	cJSON_AddNumberToObject(o, "lost_offsets", (double)p->lost_offsets);
	cJSON *gap = p->gap_kind[0] ? cJSON_CreateObject() : cJSON_CreateNull();
	if (gap && p->gap_kind[0]) {
		cJSON_AddStringToObject(gap, "kind", p->gap_kind);
		cJSON_AddNumberToObject(gap, "from_offset", (double)p->gap_from);
		cJSON_AddNumberToObject(gap, "to_offset", (double)p->gap_to);
		cJSON_AddStringToObject(gap, "at", p->gap_at);
	}
	cJSON_AddItemToObject(o, "last_gap", gap);
	return o;
}

/* A partition held by one consumer group while a replica of another waits
 * for it, or NULL (none, or out of memory). */
static cJSON *clash_json(const ops_partition *p)
{
	cJSON *o = p->contested_by[0] ? cJSON_CreateObject() : NULL;
	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "topic", p->topic);
	cJSON_AddNumberToObject(o, "partition", p->partition);
	cJSON_AddItemToObject(o, "owner", str_or_null(p->owner));
	cJSON_AddItemToObject(o, "group", str_or_null(p->group));
	cJSON_AddStringToObject(o, "waiting_group", p->contested_by);
	cJSON_AddStringToObject(o, "advice", OPS_GROUP_CLASH_ADVICE);
	return o;
}

cJSON *ops_status_json(const ops_status *st)
{
	cJSON *o = cJSON_CreateObject(), *m = cJSON_CreateObject(), *s = cJSON_CreateObject(),
	      *pb = cJSON_CreateObject(), *parts = cJSON_CreateArray(),
	      *clashes = cJSON_CreateArray();
	if (!o || !m || !s || !pb || !parts || !clashes)
		goto fail;
	for (int i = 0; i < OPS_NSTATUS; i++)
		cJSON_AddNumberToObject(m, ops_status_names[i], (double)st->messages[i]);
	cJSON_AddNumberToObject(s, "pending", (double)st->send_pending);
	cJSON_AddNumberToObject(s, "sent", (double)st->send_sent);
	cJSON_AddNumberToObject(s, "failed", (double)st->send_failed);
	cJSON_AddNumberToObject(pb, "check_failed", (double)st->parked_check_failed);
	cJSON_AddNumberToObject(pb, "send_failed", (double)st->parked_send_failed);
	cJSON_AddNumberToObject(pb, "awaiting_prepare", (double)st->parked_awaiting);
	for (size_t i = 0; i < st->npartitions; i++) {
		cJSON *p = partition_json(&st->partitions[i]);
		if (!p)
			goto fail;
		cJSON_AddItemToArray(parts, p);
		cJSON *c = clash_json(&st->partitions[i]);
		if (c)
			cJSON_AddItemToArray(clashes, c);
	}
	cJSON_AddItemToObject(o, "messages", m);
	cJSON_AddItemToObject(o, "send", s);
	cJSON_AddNumberToObject(o, "parked", (double)st->parked);
	cJSON_AddItemToObject(o, "parked_by", pb);
	cJSON_AddItemToObject(o, "oldest_prepared_s", num_or_null(st->oldest_prepared_s));
	cJSON_AddItemToObject(o, "oldest_pending_send_s", num_or_null(st->oldest_pending_send_s));
	cJSON_AddNumberToObject(o, "rejected_1h", (double)st->rejected_1h);
	cJSON_AddNumberToObject(o, "rejected", (double)st->rejected);
	cJSON_AddNumberToObject(o, "conflicts_1h", (double)st->conflicts_1h);
	cJSON_AddNumberToObject(o, "conflicts", (double)st->conflicts);
	cJSON_AddItemToObject(o, "partitions", parts);
	cJSON_AddItemToObject(o, "clashes", clashes);
	cJSON_AddItemToObject(o, "lag_note", str_or_null(st->lag_note));
	cJSON_AddItemToObject(o, "tenant", str_or_null(st->tenant));
	cJSON *blocked = ops_blocked_json(st->blocked_messages, st->blocked, st->nblocked);
	if (!blocked)
		goto fail_all;
	cJSON_AddItemToObject(o, "blocked", blocked);
	cJSON *dl = ops_dead_letters_json(&st->dead_letters);
	if (!dl)
		goto fail_all;
	cJSON_AddItemToObject(o, "dead_letter", dl);
	return o;
fail_all:
	cJSON_Delete(o);
	return NULL;
fail:
	cJSON_Delete(o);
	cJSON_Delete(m);
	cJSON_Delete(s);
	cJSON_Delete(pb);
	cJSON_Delete(parts);
	cJSON_Delete(clashes);
	return NULL;
}
