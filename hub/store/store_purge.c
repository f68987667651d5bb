/* store_purge.c: retention's statements (docs/database.md: Purge and retention), one
 * batch at a time: the janitor's sweep of the partitions a replica owns
 * (store_purge) and `txhub purge` (ops_purge_batch, on the operator's own
 * connection). */
#include "store_int.h"

#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rows_sql.h"
#include "sbuf.h"
#include "sql.h"
#include "topic_name.h"

static int bad(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	return -2;
}

/* A finished row: nothing will ever change it again (docs/producers.md: State
 * rules; docs/admin.md: Admin commands): rolled back, or committed and sent
 * (stored 'sent', or 'pending' at or below its partition's delivery mark:
 * rows_sql.h). Each status has its index (messages_committed,
 * messages_rolled_back: (src_partition, updated_at)), whose predicate the words
 * below repeat so that PostgreSQL can prove it applies. */
#define COMMITTED_SENT "(status = 'committed' AND (send_status = 'sent' OR " SQL_MARKED("r") "))"
#define FINISHED "(status = 'rolled_back' OR " COMMITTED_SENT ")"

/* The finished rows of partition parts.p (of topic parts.t, or any) older than $1 ms, at most $2 of
 * those of each status, locked. */
#define PURGE_WALK(cond)                                                                   \
	"SELECT * FROM (SELECT r.biz_id, r.message_key FROM txhub.message_rows r WHERE " cond \
	" AND r.src_partition = parts.p AND (parts.t IS NULL OR r.src_topic = parts.t) "       \
	"AND r.updated_at < now() - $1::bigint * interval '1 millisecond' "                    \
	"LIMIT $2 FOR UPDATE OF r SKIP LOCKED) w"

/* One batch of finished messages with their history, in one statement (its
 * own transaction). Per partition, a range scan of each status's index
 * (src_partition, updated_at): a partition with nothing old costs one
 * index probe each, however many recent rows it has. $1 age in ms, $2
 * batch, `parts` the partitions to walk (a CTE named parts(t, p): t null
 * for every topic). */
#define SQL_PURGE_MESSAGES(parts)                                                          \
	"WITH RECURSIVE " parts ", "                                                           \
	"c AS (SELECT x.biz_id, x.message_key FROM parts CROSS JOIN LATERAL ("                 \
	PURGE_WALK("r.status = 'rolled_back'") " UNION ALL " PURGE_WALK(COMMITTED_SENT)         \
	") x LIMIT $2), "                                                                       \
	"d AS (DELETE FROM txhub.message_rows m USING c "                                      \
	"WHERE m.biz_id = c.biz_id AND m.message_key = c.message_key "                         \
	"RETURNING m.biz_id, m.message_key, m.status), "                                       \
	"h AS (DELETE FROM txhub.history x USING d "                                           \
	"WHERE x.biz_id = d.biz_id AND x.message_key = d.message_key RETURNING 1) "            \
	"SELECT (SELECT count(*) FROM d WHERE status = 'committed'), "                         \
	"(SELECT count(*) FROM d WHERE status = 'rolled_back'), (SELECT count(*) FROM h)"

/* $3, $4: the partitions and their topics given */
static const char *SQL_PURGE_GIVEN =
	SQL_PURGE_MESSAGES("parts(t, p) AS (SELECT * FROM unnest($4::text[], $3::int[]))");

/* Every partition that has finished rows (SQL_SEEN_PARTITIONS). */
static const char *SQL_PURGE_EVERY = SQL_PURGE_MESSAGES(
	SQL_SEEN_PARTITIONS("committed") ", " SQL_SEEN_PARTITIONS("rolled_back") ", "
	"parts(t, p) AS (SELECT NULL::text, p FROM seen_committed WHERE p IS NOT NULL "
	"UNION SELECT NULL::text, p FROM seen_rolled_back WHERE p IS NOT NULL)");

/* One batch of txhub.rejected or txhub.conflicts, oldest first on the
 * created_at index. $1 age, $2 batch, $3 partitions and $4 their topics,
 * or null. */
#define SQL_PURGE_SOURCE(table)                                                            \
	"WITH d AS (DELETE FROM txhub." table " WHERE id IN (SELECT id FROM txhub." table " "  \
	"WHERE created_at < now() - $1::bigint * interval '1 millisecond' "                   \
	"AND ($3::int[] IS NULL OR (src_topic, src_partition) IN "                            \
	"(SELECT * FROM unnest($4::text[], $3::int[]))) "                                     \
	"ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING 1) "                  \
	"SELECT count(*) FROM d"

static const char *SQL_PURGE_REJECTED = SQL_PURGE_SOURCE("rejected");
static const char *SQL_PURGE_CONFLICTS = SQL_PURGE_SOURCE("conflicts");

/* What a purge would delete now. $1 finished age or null, $2 partitions
 * and $4 their topics, or null, $3 rejected age or null. */
#define DRY_PARTS                                                                          \
	"($2::int[] IS NULL OR (src_topic, src_partition) IN "                                \
	"(SELECT * FROM unnest($4::text[], $2::int[])))"
#define DRY_FINISHED                                                                       \
	"$1::bigint IS NOT NULL AND " FINISHED " "                                              \
	"AND updated_at < now() - $1::bigint * interval '1 millisecond' AND " DRY_PARTS
#define DRY_SOURCE(table)                                                                  \
	"(SELECT count(*) FROM txhub." table " WHERE $3::bigint IS NOT NULL "                  \
	"AND created_at < now() - $3::bigint * interval '1 millisecond' AND " DRY_PARTS ")"
static const char *SQL_PURGE_DRY =
	"SELECT (SELECT count(*) FROM txhub.message_rows r WHERE " DRY_FINISHED
	" AND status = 'committed'), "
	"(SELECT count(*) FROM txhub.message_rows r WHERE " DRY_FINISHED " AND status = 'rolled_back'), "
	"(SELECT count(*) FROM txhub.history hx WHERE EXISTS (SELECT 1 FROM txhub.message_rows r "
	"WHERE biz_id = hx.biz_id AND message_key = hx.message_key AND " DRY_FINISHED ")), "
	DRY_SOURCE("rejected") ", " DRY_SOURCE("conflicts");

static int check_purge(const store_purge_opts *o, char *err, size_t errsz)
{
	if (o->batch < 1 || o->batch > STORE_PURGE_BATCH_MAX)
		return bad(err, errsz, "batch %d is out of range (1..%d)", o->batch,
		           STORE_PURGE_BATCH_MAX);
	if (o->npartitions > 0 && (!o->partitions || !o->topics))
		return bad(err, errsz, "partitions: %zu announced, none given", o->npartitions);
	if (!o->partitions != !o->topics)
		return bad(err, errsz, "partitions and topics: one given without the other");
	for (size_t i = 0; i < o->npartitions; i++) {
		if (o->partitions[i] < 0)
			return bad(err, errsz, "partition %d is negative", o->partitions[i]);
		if (!o->topics[i] || !txhubi_topic_valid(o->topics[i], strlen(o->topics[i])))
			return bad(err, errsz, "\"%s\" is not a valid topic name",
			           o->topics[i] ? o->topics[i] : "(null)");
	}
	return 0;
}

/* Run one purge statement; its one row's columns into v[0..n). */
static int purge_run(PGconn *conn, const char *sql, const char *const *p, int np, int64_t *v,
                     int n, char *err, size_t errsz)
{
	PGresult *r = sql_query(conn, sql, np, p, 0, err, errsz);
	if (!r)
		return -1;
	for (int i = 0; i < n; i++)
		v[i] = sql_int(r, 0, i);
	PQclear(r);
	return 0;
}

static int purge_delete(PGconn *conn, const store_purge_opts *o, const char *parts,
                        const char *topics, store_purge_counts *out, char *err, size_t errsz)
{
	char fms[32], rms[32], batch[16];
	snprintf(fms, sizeof fms, "%lld", (long long)o->finished_older_ms);
	snprintf(rms, sizeof rms, "%lld", (long long)o->rejected_older_ms);
	snprintf(batch, sizeof batch, "%d", o->batch);
	int rc = 0;
	if (o->finished_older_ms >= 0) {
		const char *p[4] = {fms, batch, parts, topics};
		int64_t v[3];
		rc = purge_run(conn, parts ? SQL_PURGE_GIVEN : SQL_PURGE_EVERY, p, parts ? 4 : 2, v, 3,
		               err, errsz);
		if (rc != 0)
			return rc;
		out->committed = v[0];
		out->rolled_back = v[1];
		out->history = v[2];
		out->more |= v[0] + v[1] >= o->batch;
	}
	if (o->rejected_older_ms >= 0) {
		const char *p[4] = {rms, batch, parts, topics};
		if ((rc = purge_run(conn, SQL_PURGE_REJECTED, p, 4, &out->rejected, 1, err, errsz)) ||
		    (rc = purge_run(conn, SQL_PURGE_CONFLICTS, p, 4, &out->conflicts, 1, err, errsz)))
			return rc;
		out->more |= out->rejected >= o->batch || out->conflicts >= o->batch;
	}
	return rc;
}

static int purge_count(PGconn *conn, const store_purge_opts *o, const char *parts,
                       const char *topics, store_purge_counts *out, char *err, size_t errsz)
{
	char fms[32], rms[32];
	snprintf(fms, sizeof fms, "%lld", (long long)o->finished_older_ms);
	snprintf(rms, sizeof rms, "%lld", (long long)o->rejected_older_ms);
	const char *p[4] = {o->finished_older_ms >= 0 ? fms : NULL, parts,
	                    o->rejected_older_ms >= 0 ? rms : NULL, topics};
	int64_t v[5];
	int rc = purge_run(conn, SQL_PURGE_DRY, p, 4, v, 5, err, errsz);
	if (rc == 0) {
		out->committed = v[0];
		out->rolled_back = v[1];
		out->history = v[2];
		out->rejected = v[3];
		out->conflicts = v[4];
	}
	return rc;
}

int store_purge_batch(PGconn *conn, const store_purge_opts *o, store_purge_counts *out, char *err,
                      size_t errsz)
{
	memset(out, 0, sizeof *out);
	int rc = check_purge(o, err, errsz);
	if (rc != 0)
		return rc;
	sbuf pb = {0}, tb = {0};
	if (o->partitions) {
		sbuf_arr_begin(&pb);
		sbuf_arr_begin(&tb);
		for (size_t i = 0; i < o->npartitions; i++) {
			sbuf_arr_int(&pb, o->partitions[i]);
			sbuf_arr_text(&tb, o->topics[i]);
		}
		sbuf_arr_end(&pb);
		sbuf_arr_end(&tb);
		if (pb.oom || tb.oom) {
			sbuf_free(&pb);
			sbuf_free(&tb);
			snprintf(err, errsz, "out of memory");
			return -1;
		}
	}
	const char *parts = o->partitions ? sbuf_str(&pb) : NULL;
	const char *topics = o->partitions ? sbuf_str(&tb) : NULL;
	if (o->dry_run)
		rc = purge_count(conn, o, parts, topics, out, err, errsz);
	else
		rc = purge_delete(conn, o, parts, topics, out, err, errsz);
	sbuf_free(&pb);
	sbuf_free(&tb);
	return rc;
}

int store_purge(store *st, const store_purge_opts *o, store_purge_counts *out, char *err,
                size_t errsz)
{
	return store_purge_batch(st->conn, o, out, err, errsz);
}
