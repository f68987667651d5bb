/* store_sample.c: the gauges /metrics samples from PostgreSQL. */
#include "store.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* ---- sampling for /metrics ---- */

store_rc store_sample(store *st, int64_t awaiting_ms, metrics_sample *out, char *err,
                      size_t errsz)
{
	static const char *sql_small =
		"SELECT (SELECT count(*) FROM txhub.message_rows WHERE status = 'prepared'), "
		"(SELECT count(*) FROM txhub.message_rows WHERE status = 'check_failed'), "
		"(SELECT count(*) FROM txhub.message_rows WHERE status = 'awaiting_prepare'), "
		"(SELECT count(*) FROM txhub.message_rows WHERE status = 'awaiting_prepare' "
		" AND created_at < now() - $1::bigint * interval '1 millisecond'), "
		"(SELECT count(*) FROM txhub.message_rows WHERE send_status = 'failed'), "
		"coalesce((SELECT extract(epoch FROM now() - min(created_at)) FROM txhub.message_rows "
		" WHERE status = 'prepared'), -1), "
		/* a delayed row waits from its due time (delay_sql.h), not before */
		"coalesce((WITH RECURSIVE " SQL_PENDING_PARTS " SELECT extract(epoch FROM now() - "
		/* a delayed row waits from its due time (delay_sql.h), not before */
		" min(greatest(updated_at, not_before))) FROM (" SQL_PENDING_ROWS("r.updated_at, "
		"r.not_before") ") u WHERE NOT coalesce(not_before > now(), false)), -1), "
		"(SELECT reltuples FROM pg_class WHERE oid = 'txhub.message_rows'::regclass), "
		/* held for their key (forward.order = key), on messages_send_retry */
		"(SELECT count(*) FROM txhub.message_rows WHERE send_status = 'pending' "
		" AND fwd_seq IS NULL AND next_send_at = 'infinity'), "
		/* the scheduled rows, on messages_send_retry (their due times are its
		 * next_send_at): those still ahead, and the oldest due time passed */
		"(SELECT count(*) FROM txhub.message_rows WHERE send_status = 'pending' "
		" AND fwd_seq IS NULL AND not_before > now()), "
		"coalesce((SELECT extract(epoch FROM now() - min(not_before)) FROM txhub.message_rows "
		" WHERE send_status = 'pending' AND fwd_seq IS NULL AND not_before <= now()), -1)";
	static const char *sql_exact =
		"SELECT count(*) FILTER (WHERE status = 'committed'), "
		"count(*) FILTER (WHERE status = 'rolled_back') FROM txhub.message_rows";
	/* the share of each value among the rows ANALYZE saw */
	static const char *sql_estimate =
		"SELECT coalesce(sum(f) FILTER (WHERE v = 'committed'), 0), "
		"coalesce(sum(f) FILTER (WHERE v = 'rolled_back'), 0) "
		"FROM pg_stats, unnest(most_common_vals::text::text[], most_common_freqs) AS x(v, f) "
		"WHERE schemaname = 'txhub' AND tablename = 'message_rows' AND attname = 'status'";
	char ms[32];
	snprintf(ms, sizeof ms, "%lld", (long long)awaiting_ms);
	const char *p[1] = {ms};
	PGresult *r = store_exec_params(st, sql_small, 1, p, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		goto fail;
	memset(out, 0, sizeof *out);
	out->by_status[0] = atoll(PQgetvalue(r, 0, 0));
	out->by_status[3] = atoll(PQgetvalue(r, 0, 1));
	out->by_status[4] = atoll(PQgetvalue(r, 0, 2));
	out->parked = out->by_status[3] + atoll(PQgetvalue(r, 0, 3)) + atoll(PQgetvalue(r, 0, 4));
	out->oldest_prepared_s = atof(PQgetvalue(r, 0, 5));
	out->oldest_pending_send_s = atof(PQgetvalue(r, 0, 6));
	double rows = atof(PQgetvalue(r, 0, 7));
	out->blocked = atoll(PQgetvalue(r, 0, 8));
	out->scheduled = atoll(PQgetvalue(r, 0, 9));
	out->oldest_overdue_s = atof(PQgetvalue(r, 0, 10));
	int exact = rows < STORE_EXACT_ROWS;
	PQclear(r);
	r = store_exec_params(st, exact ? sql_exact : sql_estimate, 0, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
		goto fail;
	for (int i = 0; i < 2; i++)
		out->by_status[1 + i] = exact ? atoll(PQgetvalue(r, 0, i))
		                              : (int64_t)(atof(PQgetvalue(r, 0, i)) * rows);
	PQclear(r);
	return STORE_OK;
fail:;
	store_rc rc = store_classify(st->conn, r, err, errsz);
	PQclear(r);
	return rc;
}
