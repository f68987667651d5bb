/* store_owners.c: partition ownership: taking partitions (epochs), the
 * history check, heartbeats, release and contest. */
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

/* ---- partition ownership ----
 *
 * Every partition is a (topic, partition) pair (tp_key): SQL gets two
 * arrays, the topics' names and the partitions, unnested side by side. */

/* Columns of a txhub.partitions row, in the order read_partition_row()
 * expects. */
#define PARTITION_COLUMNS                                                          \
	"tp.topic, tp.partition, tp.epoch, tp.owner, coalesce(tp.group_id, ''), "        \
	"coalesce(ceil(extract(epoch FROM now() - tp.heartbeat_at) * 1000)::bigint, -1), " \
	"tp.released_at IS NOT NULL, coalesce(tp.contested_by, ''), "                   \
	"coalesce(ceil(extract(epoch FROM now() - tp.contested_at) * 1000)::bigint, -1), " \
	"coalesce(tp.next_offset, -1)"

static void read_partition_row(const PGresult *r, int row, store_partition_row *out)
{
	memset(out, 0, sizeof *out);
	out->tp = store_row_tp(r, row);
	out->epoch = atoll(PQgetvalue(r, row, 2));
	snprintf(out->owner, sizeof out->owner, "%s", PQgetvalue(r, row, 3));
	snprintf(out->group, sizeof out->group, "%s", PQgetvalue(r, row, 4));
	out->heartbeat_age_ms = atoll(PQgetvalue(r, row, 5));
	out->released = PQgetvalue(r, row, 6)[0] == 't';
	snprintf(out->contested_by, sizeof out->contested_by, "%s", PQgetvalue(r, row, 7));
	out->contested_age_ms = atoll(PQgetvalue(r, row, 8));
	out->next_offset = atoll(PQgetvalue(r, row, 9));
}

/* The topics and the partitions of keys, as two arrays. */
static void tp_arrays(sbuf *tb, sbuf *pb, const tp_key *k, size_t n)
{
	sbuf_arr_begin(tb);
	sbuf_arr_begin(pb);
	for (size_t i = 0; i < n; i++) {
		sbuf_arr_text(tb, tp_topic(k[i]));
		sbuf_arr_int(pb, tp_part(k[i]));
	}
	sbuf_arr_end(tb);
	sbuf_arr_end(pb);
}

/* rows[i] for parts[i] from the rows of r (epoch 0 where r has none). */
static void match_partition_rows(const PGresult *r, const tp_key *parts, size_t n,
                                 store_partition_row *rows)
{
	for (size_t i = 0; i < n; i++) {
		memset(&rows[i], 0, sizeof rows[i]);
		rows[i].tp = parts[i];
		rows[i].heartbeat_age_ms = -1;
		rows[i].contested_age_ms = -1;
		rows[i].next_offset = -1;
		for (int row = 0; row < PQntuples(r); row++)
			if (store_row_tp(r, row) == parts[i])
				read_partition_row(r, row, &rows[i]);
	}
}

store_rc store_take_partitions(store *st, const char *owner, const char *group,
                               const tp_key *parts, size_t n, owned_part *own,
                               int64_t *next_offset, store_partition_row *prev, char *err,
                               size_t errsz)
{
	/* rows in (topic, partition) order, in both statements: two replicas
	 * taking overlapping sets cannot deadlock */
	static const char *sql_prev =
		"SELECT " PARTITION_COLUMNS " FROM txhub.partitions tp "
		"JOIN unnest($1::text[], $2::int[]) AS o(t, p) ON tp.topic = o.t AND tp.partition = o.p "
		"ORDER BY tp.topic, tp.partition FOR UPDATE OF tp";
	static const char *sql_take =
		"INSERT INTO txhub.partitions AS tp (topic, partition, epoch, owner, group_id, "
		"heartbeat_at) "
		"SELECT o.t, o.p, o.m + 1, $3, $4, now() "
		"FROM unnest($1::text[], $2::int[], $5::bigint[]) AS o(t, p, m) ORDER BY o.t, o.p "
		"ON CONFLICT (topic, partition) DO UPDATE SET "
		"epoch = greatest(tp.epoch, EXCLUDED.epoch - 1) + 1, "
		"owner = EXCLUDED.owner, group_id = EXCLUDED.group_id, taken_at = now(), "
		"updated_at = now(), heartbeat_at = now(), released_at = NULL, contested_by = NULL, "
		"contested_at = NULL "
		"RETURNING topic, partition, epoch, coalesce(next_offset, -1), fwd_origin";
	if (n == 0)
		return STORE_OK;
	sbuf tb = {0}, pb = {0};
	tp_arrays(&tb, &pb, parts, n);
	PGresult *r = NULL;
	store_rc rc = store_exec_simple(st, "BEGIN", err, errsz);
	if (rc != STORE_OK)
		goto done;
	const char *pp[2] = {sbuf_str(&tb), sbuf_str(&pb)};
	r = store_exec_params(st, sql_prev, 2, pp, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		rc = store_classify(st->conn, r, err, errsz);
		goto done;
	}
	if (prev)
		match_partition_rows(r, parts, n, prev);
	PQclear(r);
	r = NULL;
	/* never an epoch this store held before: a database that lost the
	 * take (its row back at an older epoch, or gone) must not give it out
	 * again, or this replica's old lanes and writes would pass for new */
	sbuf mb = {0};
	sbuf_arr_begin(&mb);
	for (size_t i = 0; i < n; i++) {
		const rewind_mark *k = rewind_find(&st->known, parts[i]);
		sbuf_arr_int(&mb, k ? k->epoch : 0);
	}
	sbuf_arr_end(&mb);
	const char *p[5] = {sbuf_str(&tb), sbuf_str(&pb), owner, group, sbuf_str(&mb)};
	r = mb.oom || tb.oom || pb.oom ? NULL : store_exec_params(st, sql_take, 5, p, 0);
	sbuf_free(&mb);
	if (!r) {
		snprintf(err, errsz, "out of memory");
		rc = STORE_RETRY;
		goto done;
	}
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		rc = store_classify(st->conn, r, err, errsz);
		goto done;
	}
	for (size_t i = 0; i < n; i++) {
		own[i].tp = parts[i];
		own[i].epoch = 0;
		next_offset[i] = -1;
		for (int row = 0; row < PQntuples(r); row++) {
			if (store_row_tp(r, row) != parts[i])
				continue;
			own[i].epoch = atoll(PQgetvalue(r, row, 2));
			next_offset[i] = atoll(PQgetvalue(r, row, 3));
		}
		own[i].from = next_offset[i] > 0 ? next_offset[i] : 0;
		if (own[i].epoch <= 0) {
			snprintf(err, errsz, "taking partition %d of %s returned no epoch",
			         tp_part(parts[i]), tp_topic(parts[i]));
			rc = STORE_RETRY;
			goto done;
		}
	}
	rc = store_exec_simple(st, "COMMIT", err, errsz);
	/* remembered once it is so: a take that did not commit changes nothing */
	for (size_t i = 0; rc == STORE_OK && i < n; i++)
		for (int row = 0; row < PQntuples(r); row++)
			if (store_row_tp(r, row) == parts[i] &&
			    rewind_taken(&st->known, parts[i], own[i].epoch, next_offset[i],
			                 PQgetvalue(r, row, 4)) != 0)
				log_warn("store: out of memory: partition %d of %s is not watched for a "
				         "database that loses its last transactions", tp_part(parts[i]),
				         tp_topic(parts[i]));
done:
	if (rc != STORE_OK)
		store_rollback(st);
	PQclear(r);
	sbuf_free(&tb);
	sbuf_free(&pb);
	return rc;
}

store_rc store_check_history(store *st, const owned_part *own, size_t nown,
                             store_rewound **out, size_t *nout, char *err, size_t errsz)
{
	static const char *sql =
		"SELECT tp.topic, tp.partition, tp.epoch, coalesce(tp.next_offset, -1), tp.fwd_origin "
		"FROM txhub.partitions tp JOIN unnest($1::text[], $2::int[]) AS o(t, p) "
		"ON tp.topic = o.t AND tp.partition = o.p";
	*out = NULL;
	*nout = 0;
	if (nown == 0)
		return STORE_OK;
	sbuf tb = {0}, pb = {0};
	store_owned_arrays(&tb, &pb, NULL, own, nown);
	const char *p[2] = {sbuf_str(&tb), sbuf_str(&pb)};
	PGresult *r = store_exec_params(st, sql, 2, p, 0);
	store_rc rc = STORE_OK;
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		rc = store_classify(st->conn, r, err, errsz);
		goto done;
	}
	if (!(*out = calloc(nown, sizeof **out))) {
		snprintf(err, errsz, "out of memory");
		rc = STORE_RETRY;
		goto done;
	}
	for (size_t i = 0; i < nown; i++) {
		rewind_row db = {.next_offset = -1};
		for (int row = 0; row < PQntuples(r); row++) {
			if (store_row_tp(r, row) != own[i].tp)
				continue;
			db.present = 1;
			db.epoch = atoll(PQgetvalue(r, row, 2));
			db.next_offset = atoll(PQgetvalue(r, row, 3));
			snprintf(db.origin, sizeof db.origin, "%s", PQgetvalue(r, row, 4));
		}
		const rewind_mark *m = rewind_find(&st->known, own[i].tp);
		rewind_verdict v = rewind_judge(m, own[i].epoch, &db);
		if (v <= REWIND_FENCED)
			continue;
		(*out)[(*nout)++] = (store_rewound){own[i].tp, (int)v, own[i].epoch,
		                                    m->next_offset, db.epoch, db.next_offset};
	}
done:
	PQclear(r);
	sbuf_free(&tb);
	sbuf_free(&pb);
	return rc;
}

store_rc store_partition_rows(store *st, const tp_key *parts, size_t n,
                              store_partition_row *rows, char *err, size_t errsz)
{
	static const char *sql = "SELECT " PARTITION_COLUMNS " FROM txhub.partitions tp "
	                         "JOIN unnest($1::text[], $2::int[]) AS o(t, p) "
	                         "ON tp.topic = o.t AND tp.partition = o.p";
	if (n == 0)
		return STORE_OK;
	sbuf tb = {0}, pb = {0};
	tp_arrays(&tb, &pb, parts, n);
	const char *p[2] = {sbuf_str(&tb), sbuf_str(&pb)};
	PGresult *r = store_exec_params(st, sql, 2, p, 0);
	store_rc rc = STORE_OK;
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		rc = store_classify(st->conn, r, err, errsz);
	else
		match_partition_rows(r, parts, n, rows);
	PQclear(r);
	sbuf_free(&tb);
	sbuf_free(&pb);
	return rc;
}

/* Run sql ($1 topics, $2 partitions, $3 epochs of own; returns
 * PARTITION_COLUMNS of the rows it touched): *rows (caller frees) receives
 * them, *lost (caller frees) the owned partitions it did not touch. */
static store_rc update_owned(store *st, const char *sql, const owned_part *own, size_t nown,
                             store_partition_row **rows, size_t *nrows, tp_key **lost,
                             size_t *nlost, char *err, size_t errsz)
{
	*rows = NULL;
	*nrows = 0;
	*lost = NULL;
	*nlost = 0;
	if (nown == 0)
		return STORE_OK;
	sbuf tb = {0}, pb = {0}, eb = {0};
	store_owned_arrays(&tb, &pb, &eb, own, nown);
	const char *p[3] = {sbuf_str(&tb), sbuf_str(&pb), sbuf_str(&eb)};
	PGresult *r = store_exec_params(st, sql, 3, p, 0);
	store_rc rc = STORE_OK;
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		rc = store_classify(st->conn, r, err, errsz);
		goto done;
	}
	*rows = calloc(nown, sizeof **rows);
	*lost = calloc(nown, sizeof **lost);
	if (!*rows || !*lost) {
		snprintf(err, errsz, "out of memory");
		rc = STORE_RETRY;
		goto done;
	}
	for (int row = 0; row < PQntuples(r) && *nrows < nown; row++)
		read_partition_row(r, row, &(*rows)[(*nrows)++]);
	for (size_t i = 0; i < nown; i++) {
		int found = 0;
		for (size_t k = 0; k < *nrows && !found; k++)
			found = (*rows)[k].tp == own[i].tp;
		if (!found)
			(*lost)[(*nlost)++] = own[i].tp;
	}
done:
	PQclear(r);
	sbuf_free(&tb);
	sbuf_free(&pb);
	sbuf_free(&eb);
	return rc;
}

#define SQL_UPDATE_OWNED(set)                                                     \
	"UPDATE txhub.partitions AS tp SET " set " "                                 \
	"FROM unnest($1::text[], $2::int[], $3::bigint[]) AS o(t, p, e) "             \
	"WHERE tp.topic = o.t AND tp.partition = o.p AND tp.epoch = o.e "             \
	"RETURNING " PARTITION_COLUMNS

store_rc store_heartbeat(store *st, const owned_part *own, size_t nown,
                         store_partition_row **rows, size_t *nrows, tp_key **lost,
                         size_t *nlost, char *err, size_t errsz)
{
	return update_owned(st, SQL_UPDATE_OWNED("heartbeat_at = now()"), own, nown, rows, nrows,
	                    lost, nlost, err, errsz);
}

store_rc store_still_owned(store *st, const owned_part *own, size_t nown, tp_key **lost,
                           size_t *nlost, char *err, size_t errsz)
{
	static const char *sql =
		"SELECT " PARTITION_COLUMNS " FROM txhub.partitions AS tp, "
		"unnest($1::text[], $2::int[], $3::bigint[]) AS o(t, p, e) "
		"WHERE tp.topic = o.t AND tp.partition = o.p AND tp.epoch = o.e";
	store_partition_row *rows;
	size_t nrows;
	store_rc rc = update_owned(st, sql, own, nown, &rows, &nrows, lost, nlost, err, errsz);
	free(rows);
	return rc;
}

store_rc store_release_partitions(store *st, const owned_part *own, size_t nown, char *err,
                                  size_t errsz)
{
	store_partition_row *rows;
	tp_key *lost;
	size_t nrows, nlost;
	store_rc rc = update_owned(st, SQL_UPDATE_OWNED("released_at = now()"), own, nown, &rows,
	                           &nrows, &lost, &nlost, err, errsz);
	free(rows);
	free(lost);
	return rc;
}

store_rc store_contest_partitions(store *st, const owned_part *held, size_t n,
                                  const char *group, char *err, size_t errsz)
{
	static const char *sql =
		"UPDATE txhub.partitions AS tp SET contested_by = $4, contested_at = now() "
		"FROM unnest($1::text[], $2::int[], $3::bigint[]) AS o(t, p, e) "
		"WHERE tp.topic = o.t AND tp.partition = o.p AND tp.epoch = o.e";
	if (n == 0)
		return STORE_OK;
	sbuf tb = {0}, pb = {0}, eb = {0};
	store_owned_arrays(&tb, &pb, &eb, held, n);
	const char *p[4] = {sbuf_str(&tb), sbuf_str(&pb), sbuf_str(&eb), group};
	store_rc rc = store_exec_command(st, sql, 4, p, err, errsz);
	sbuf_free(&tb);
	sbuf_free(&pb);
	sbuf_free(&eb);
	return rc;
}
