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

#include <librdkafka/rdkafka.h>
#include <libpq-fe.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "envelope.h"
#include "kafka.h"
#include "ops_sql.h"
#include "rows_sql.h"
#include "sbuf.h"
#include "store.h"
#include "tenant_rules.h"
#include "topics.h"

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

ops_rc ops_status_read(PGconn *conn, int64_t awaiting_prepare_ms, ops_status *out, char *err,
                       size_t errsz)
{
	return ops_status_read_tenant(conn, awaiting_prepare_ms, NULL, out, err, errsz);
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
static const char *SQL_SHOW_HISTORY =
	"SELECT " TS("at") ", event, detail, actor, (extract(epoch FROM at) * 1000000)::bigint "
	"FROM txhub.history WHERE biz_id = $1 AND message_key = $2 ORDER BY at, id";

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
