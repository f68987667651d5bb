/* store_tenants.c: txhub.tenants as the hub and the operators' commands read
 * it (docs/tenants.md: Sharing one hub between teams): every row, and the
 * table's fingerprint the run loop's tenants_refresh() looks at first. The
 * lists travel as JSON (array_to_json), read with cJSON, so that no array
 * literal is parsed by hand. */
#include "store_int.h"

#include <cjson/cJSON.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sql.h"
#include "tenants.h"

#define NLISTS 4

static const char *const list_columns[NLISTS] = {"control_topics", "biz_ids", "forward_topics",
                                                 "checkback_allow"};

static const char *SQL_ROWS =
	"SELECT name, array_to_json(control_topics)::text, array_to_json(biz_ids)::text, "
	"array_to_json(forward_topics)::text, array_to_json(checkback_allow)::text, "
	"coalesce(max_envelope_bytes, 0), enabled FROM txhub.tenants ORDER BY name";

typedef struct {
	char *name;
	char **lists[NLISTS];
	size_t n[NLISTS];
} row_store;

/* A JSON array of strings into a NULL-terminated array of copies. */
static int json_list(const char *text, char ***out, size_t *n)
{
	cJSON *a = cJSON_Parse(text);
	int rc = -1;
	*out = NULL;
	*n = 0;
	if (!cJSON_IsArray(a))
		goto done;
	size_t len = (size_t)cJSON_GetArraySize(a);
	if (!(*out = calloc(len + 1, sizeof **out)))
		goto done;
	const cJSON *e;
	cJSON_ArrayForEach(e, a) {
		const char *s = cJSON_GetStringValue(e);
		if (!s || !((*out)[*n] = strdup(s)))
			goto done;
		(*n)++;
	}
	rc = 0;
done:
	cJSON_Delete(a);
	return rc;
}

static int read_row(const PGresult *r, int i, row_store *s, tenant_def *d, char *err,
                    size_t errsz)
{
	if (!(s->name = strdup(PQgetvalue(r, i, 0)))) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	for (int l = 0; l < NLISTS; l++) {
		if (PQgetisnull(r, i, 1 + l) || json_list(PQgetvalue(r, i, 1 + l), &s->lists[l],
		                                          &s->n[l]) != 0) {
			char b[96];
			snprintf(err, errsz, "tenant \"%s\": %s: not a list of text", log_escape(s->name,
			         strlen(s->name), b, sizeof b), list_columns[l]);
			return -1;
		}
	}
	*d = (tenant_def){s->name, (const char *const *)s->lists[0], s->n[0],
	                  (const char *const *)s->lists[1], s->n[1],
	                  (const char *const *)s->lists[2], s->n[2],
	                  (const char *const *)s->lists[3], s->n[3],
	                  strtoll(PQgetvalue(r, i, 5), NULL, 10), PQgetvalue(r, i, 6)[0] == 't'};
	return 0;
}

int store_tenant_rows_read(PGconn *conn, store_tenant_rows *rows, char *err, size_t errsz)
{
	memset(rows, 0, sizeof *rows);
	PGresult *r = PQexec(conn, SQL_ROWS);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		sql_error_text(conn, r, err, errsz);
		PQclear(r);
		return -1;
	}
	int n = PQntuples(r), rc = 0;
	row_store *own = calloc((size_t)n + 1, sizeof *own);
	rows->defs = calloc((size_t)n + 1, sizeof *rows->defs);
	rows->own = own;
	if (!own || !rows->defs) {
		snprintf(err, errsz, "out of memory");
		rc = -1;
	}
	for (int i = 0; rc == 0 && i < n; i++) {
		rows->n++; /* counted first: store_tenant_rows_free() frees what the row got */
		rc = read_row(r, i, &own[i], &rows->defs[i], err, errsz);
	}
	PQclear(r);
	if (rc != 0) {
		store_tenant_rows_free(rows);
		return -1;
	}
	return 0;
}

void store_tenant_rows_free(store_tenant_rows *rows)
{
	row_store *own = rows->own;
	for (size_t i = 0; own && i < rows->n; i++) {
		free(own[i].name);
		for (int l = 0; l < NLISTS; l++) {
			for (size_t j = 0; own[i].lists[l] && j < own[i].n[l]; j++)
				free(own[i].lists[l][j]);
			free(own[i].lists[l]);
		}
	}
	free(own);
	free(rows->defs);
	memset(rows, 0, sizeof *rows);
}

/* Every row's text, hashed: changes with any change of the table. */
static const char *SQL_FINGERPRINT =
	"SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t.name), '')) FROM txhub.tenants t";

static int fingerprint(void *ctx, char *out, size_t outsz, char *err, size_t errsz)
{
	PGconn *conn = ctx;
	PGresult *r = PQexec(conn, SQL_FINGERPRINT);
	int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
	if (ok)
		snprintf(out, outsz, "%s", PQgetvalue(r, 0, 0));
	else
		sql_error_text(conn, r, err, errsz);
	PQclear(r);
	return ok ? 0 : -1;
}

static int rules(void *ctx, tenant_rules **out, char *err, size_t errsz)
{
	store_tenant_rows rows;
	*out = NULL;
	if (store_tenant_rows_read(ctx, &rows, err, errsz) != 0)
		return -1;
	*out = tenant_rules_build(rows.defs, rows.n, err, errsz);
	store_tenant_rows_free(&rows);
	return *out ? 0 : -2;
}

int store_tenants_refresh_on(PGconn *conn, tenants *t, int64_t now_ms)
{
	tenants_source src = {fingerprint, rules, conn};
	return tenants_refresh(t, &src, now_ms);
}

int store_tenants_refresh(store *st, tenants *t, int64_t now_ms)
{
	return store_tenants_refresh_on(st->conn, t, now_ms);
}
