/* gap_report.c: see gap_report.h. */
#include "gap_report.h"

#include <libpq-fe.h>
#include <stdio.h>

#include "log.h"
#include "metrics.h"
#include "sql.h"

/* Moves next_offset to where the hub reads on (never back for a loss:
 * records the partition applied meanwhile stay applied; back for a
 * partition read again from its start), only at the owner's epoch, and
 * keeps the row; no row comes back when the partition is not ours. */
static const char *SQL_RECORD =
	"WITH moved AS ("
	" UPDATE txhub.partitions SET updated_at = now(), next_offset = CASE WHEN $4 = 'lost' "
	" THEN greatest(next_offset, $7::bigint) ELSE $7::bigint END "
	" WHERE topic = $1 AND partition = $2::int AND epoch = $3::bigint RETURNING 1) "
	"INSERT INTO txhub.gaps (topic, partition, kind, from_offset, to_offset, resume_offset, "
	"detected_by) SELECT $1, $2::int, $4, $5::bigint, $6::bigint, $7::bigint, $8 FROM moved "
	"RETURNING id";

static gap_report_rc record(store *st, const char *owner, int64_t epoch,
                            const gap *g, char *err, size_t errsz)
{
	char part[16], ep[24], from[24], to[24], resume[24];
	snprintf(part, sizeof part, "%d", tp_part(g->tp));
	snprintf(ep, sizeof ep, "%lld", (long long)epoch);
	snprintf(from, sizeof from, "%lld", (long long)g->from);
	snprintf(to, sizeof to, "%lld", (long long)g->to);
	snprintf(resume, sizeof resume, "%lld", (long long)g->resume);
	const char *p[8] = {tp_topic(g->tp), part, ep, gap_kind_name(g->kind), from, to, resume, owner};
	PGconn *c = (PGconn *)store_conn(st);
	PGresult *r = sql_query(c, SQL_RECORD, 8, p, 0, err, errsz);
	gap_report_rc rc = GAP_REPORTED;
	if (!r) {
		metrics_database_error();
		rc = GAP_FAILED;
	} else if (PQntuples(r) == 0) {
		rc = GAP_NOT_OURS;
	}
	PQclear(r);
	return rc;
}

gap_report_rc gap_report(store *st, alert *al, const char *owner,
                         int64_t epoch, const gap *g, char *err, size_t errsz)
{
	gap_report_rc rc = record(st, owner, epoch, g, err, errsz);
	if (rc != GAP_REPORTED)
		return rc;
	char text[600];
	gap_describe(g, tp_topic(g->tp), text, sizeof text);
	log_about about = {NULL, NULL, g->tp, NULL};
	log_msg_about(LOG_ERROR,
	              g->kind == GAP_LOST ? "hub: control records lost"
	                                  : "hub: control partition truncated",
	              &about, "%s", text);
	if (g->kind == GAP_LOST)
		metrics_control_records_lost(g->tp, (uint64_t)(g->to - g->from));
	alert_offsets o = {tp_part(g->tp), g->from, g->to};
	alert_raise_offsets(al, gap_alert_kind(g->kind), tp_topic(g->tp), &o, text);
	return GAP_REPORTED;
}
