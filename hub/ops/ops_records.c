/* ops_records.c: the reads of txhub.rejected and txhub.conflicts (see
 * ops.h), for the console's Rejected and Conflicts pages.
 *
 * Both tables are read newest first by their id (a bigserial, so the
 * primary key orders them the way they were written) and paged with
 * "before this id", which PostgreSQL answers from the primary key however
 * large the table is; an OFFSET would read every row it skips. A rejected
 * record's bytes can be up to envelope.max_bytes (1 MiB by default), so
 * a listing returns only the first value_max bytes of each and the whole
 * size beside them. */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope.h"
#include "ops.h"
#include "ops_sql.h"
#include "tenant_rules.h"
#include "utf8.h"

#define TS(c) "to_char(" c " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

/* ---- shared ---- */

static cJSON *text_or_null(const PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col) ? cJSON_CreateNull()
	                                : cJSON_CreateString(PQgetvalue(r, row, col));
}

static cJSON *int_or_null(const PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col) ? cJSON_CreateNull()
	                                : cJSON_CreateNumber((double)ops_int(r, row, col));
}

/* Add name (text or base64, see ops_payload_text()) and name_encoding for
 * the bytea column col (text format), cut or not. Returns 0, or -1 when
 * out of memory. */
static int add_bytes(cJSON *o, const char *name, const PGresult *r, int row, int col, int cut)
{
	char enc_name[64];
	snprintf(enc_name, sizeof enc_name, "%s_encoding", name);
	if (PQgetisnull(r, row, col)) {
		cJSON_AddNullToObject(o, name);
		cJSON_AddNullToObject(o, enc_name);
		return 0;
	}
	size_t len = 0;
	unsigned char *raw = PQunescapeBytea((const unsigned char *)PQgetvalue(r, row, col), &len);
	if (!raw)
		return -1;
	if (cut)
		len = txhubi_utf8_complete(raw, len); /* still text, if it was */
	const char *enc = "utf8";
	char *text = ops_payload_text(raw, len, &enc);
	PQfreemem(raw);
	if (!text)
		return -1;
	cJSON_AddStringToObject(o, name, text);
	cJSON_AddStringToObject(o, enc_name, enc);
	free(text);
	return 0;
}

/* Run sql and turn each row into an object with row_fn; *out gets the
 * array. */
static ops_rc read_rows(PGconn *conn, const char *sql, int np, const char *const *p,
                        cJSON *(*row_fn)(const PGresult *, int, int), int arg, cJSON **out,
                        char *err, size_t errsz)
{
	PGresult *r = ops_query(conn, sql, np, p, 0, err, errsz);
	if (!r)
		return OPS_DB_ERROR;
	cJSON *arr = cJSON_CreateArray();
	for (int i = 0; arr && i < PQntuples(r); i++) {
		cJSON *o = row_fn(r, i, arg);
		if (!o || !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			cJSON_Delete(arr);
			arr = NULL;
		}
	}
	PQclear(r);
	if (!arr) {
		snprintf(err, errsz, "out of memory");
		return OPS_DB_ERROR;
	}
	*out = arr;
	return OPS_OK;
}

static ops_rc check_page(int64_t before_id, int limit, char *err, size_t errsz)
{
	if (before_id < 0)
		return ops_bad(err, errsz, "before must not be negative");
	if (limit < 1 || limit > OPS_LIST_MAX)
		return ops_bad(err, errsz, "limit %d is out of range (1..%d)", limit, OPS_LIST_MAX);
	return OPS_OK;
}

/* ---- rejected ---- */

/* $1 id (0: any), $2 before (0: none), $3 limit, $4 bytes of key and
 * value, $5 tenant (null: any; a tenant's rows walk rejected_tenant of
 * migrations/0011_tenant_indexes.sql). The cut is made by PostgreSQL: a 1 MiB value is not sent whole
 * to show its first kilobytes. */
static const char *SQL_REJECTED =
	"SELECT id, src_topic, src_partition, src_offset, reason, " TS("created_at") ", "
	"floor(extract(epoch FROM now() - created_at))::bigint, "
	"substring(record_key FROM 1 FOR $4::int), octet_length(record_key), "
	"substring(record_value FROM 1 FOR $4::int), octet_length(record_value) "
	"FROM txhub.rejected WHERE ($1::bigint = 0 OR id = $1::bigint) "
	"AND ($2::bigint = 0 OR id < $2::bigint) AND ($5::text IS NULL OR tenant = $5) "
	"ORDER BY id DESC LIMIT $3::int";

static cJSON *rejected_row(const PGresult *r, int i, int value_max)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddItemToObject(o, "id", int_or_null(r, i, 0));
	cJSON_AddItemToObject(o, "src_topic", text_or_null(r, i, 1));
	cJSON_AddItemToObject(o, "src_partition", int_or_null(r, i, 2));
	cJSON_AddItemToObject(o, "src_offset", int_or_null(r, i, 3));
	cJSON_AddItemToObject(o, "reason", text_or_null(r, i, 4));
	cJSON_AddItemToObject(o, "created_at", text_or_null(r, i, 5));
	cJSON_AddItemToObject(o, "created_age_s", int_or_null(r, i, 6));
	int64_t key_bytes = ops_int(r, i, 8), value_bytes = ops_int(r, i, 10);
	if (add_bytes(o, "key", r, i, 7, key_bytes > value_max) != 0 ||
	    add_bytes(o, "value", r, i, 9, value_bytes > value_max) != 0) {
		cJSON_Delete(o);
		return NULL;
	}
	cJSON_AddItemToObject(o, "key_bytes", int_or_null(r, i, 8));
	cJSON_AddItemToObject(o, "value_bytes", int_or_null(r, i, 10));
	cJSON_AddBoolToObject(o, "value_truncated", value_bytes > value_max);
	return o;
}

ops_rc ops_rejected_list(PGconn *conn, const ops_rejected_filter *f, cJSON **out, char *err,
                         size_t errsz)
{
	*out = NULL;
	ops_rc rc = check_page(f->before_id, f->limit, err, errsz);
	if (rc != OPS_OK)
		return rc;
	if (f->id < 0)
		return ops_bad(err, errsz, "id must not be negative");
	if (f->value_max < 0 || f->value_max > OPS_VALUE_MAX)
		return ops_bad(err, errsz, "value_max %d is out of range (0..%d)", f->value_max,
		               OPS_VALUE_MAX);
	char id[32], before[32], limit[16], vmax[16];
	snprintf(id, sizeof id, "%lld", (long long)f->id);
	snprintf(before, sizeof before, "%lld", (long long)f->before_id);
	snprintf(limit, sizeof limit, "%d", f->limit);
	snprintf(vmax, sizeof vmax, "%d", f->value_max);
	if (f->tenant && tenant_name_check(f->tenant, err, errsz) != 0)
		return OPS_BAD_ARG;
	const char *p[5] = {id, before, limit, vmax, f->tenant};
	return read_rows(conn, SQL_REJECTED, 5, p, rejected_row, f->value_max, out, err, errsz);
}

/* ---- conflicts ---- */

/* $1 biz_id, $2 message_key (null: any), $3 before (0: none), $4 limit,
 * $5 tenant (null: any). */
static const char *SQL_CONFLICTS =
	"SELECT id, biz_id, message_key, arrived, met_status, detail, src_topic, src_partition, "
	"src_offset, " TS("created_at") ", floor(extract(epoch FROM now() - created_at))::bigint "
	"FROM txhub.conflicts WHERE ($1::text IS NULL OR biz_id = $1) "
	"AND ($2::text IS NULL OR message_key = $2) AND ($3::bigint = 0 OR id < $3::bigint) "
	"AND ($5::text IS NULL OR tenant = $5) ORDER BY id DESC LIMIT $4::int";

static cJSON *conflict_row(const PGresult *r, int i, int unused)
{
	(void)unused;
	static const char *const names[] = {"id", "biz_id", "message_key", "arrived", "met_status",
	                                    "detail", "src_topic", "src_partition", "src_offset",
	                                    "created_at", "created_age_s"};
	static const int number[] = {1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1};
	cJSON *o = cJSON_CreateObject();
	for (int c = 0; o && c < (int)(sizeof names / sizeof names[0]); c++) {
		cJSON *v = number[c] ? int_or_null(r, i, c) : text_or_null(r, i, c);
		if (!v) {
			cJSON_Delete(o);
			return NULL;
		}
		cJSON_AddItemToObject(o, names[c], v);
	}
	return o;
}

ops_rc ops_conflicts_list(PGconn *conn, const ops_conflicts_filter *f, cJSON **out, char *err,
                          size_t errsz)
{
	*out = NULL;
	ops_rc rc = check_page(f->before_id, f->limit, err, errsz);
	if (rc != OPS_OK)
		return rc;
	if (f->biz_id && envelope_check_id("biz_id", f->biz_id, ENVELOPE_BIZ_ID_MAX, err, errsz))
		return OPS_BAD_ARG;
	if (f->message_key && envelope_check_id("message_key", f->message_key,
	                                        ENVELOPE_MESSAGE_KEY_MAX, err, errsz))
		return OPS_BAD_ARG;
	char before[32], limit[16];
	snprintf(before, sizeof before, "%lld", (long long)f->before_id);
	snprintf(limit, sizeof limit, "%d", f->limit);
	if (f->tenant && tenant_name_check(f->tenant, err, errsz) != 0)
		return OPS_BAD_ARG;
	const char *p[5] = {f->biz_id, f->message_key, before, limit, f->tenant};
	return read_rows(conn, SQL_CONFLICTS, 5, p, conflict_row, 0, out, err, errsz);
}
