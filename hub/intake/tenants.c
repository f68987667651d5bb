/* tenants.c: see tenants.h. The lists travel as JSON (array_to_json), read
 * with cJSON, so that no array literal is parsed by hand. */
#include "tenants.h"

#include <cjson/cJSON.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sql.h"

/* ---- the rows ---- */

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

int tenant_rows_read(PGconn *conn, tenant_rows *rows, char *err, size_t errsz)
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
		rows->n++; /* counted first: tenant_rows_free() frees what the row got */
		rc = read_row(r, i, &own[i], &rows->defs[i], err, errsz);
	}
	PQclear(r);
	if (rc != 0) {
		tenant_rows_free(rows);
		return -1;
	}
	return 0;
}

void tenant_rows_free(tenant_rows *rows)
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

/* ---- the snapshot ---- */

struct tenants {
	tenant_rules *rules;   /* the last good snapshot, or NULL */
	char seen[64];         /* the table's fingerprint when last read ("" never) */
	int64_t next_ms;       /* when to look again */
	int looked;
	int rows_bad;          /* the rows with that fingerprint did not pass */
	char failing[1024];    /* the last failure, "" when none */
	int64_t loaded_ms;     /* the last refresh that found the rules in force current */
};

/* Every row's text, hashed: changes with any change of the table. */
static const char *SQL_FINGERPRINT =
	"SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t.name), '')) FROM txhub.tenants t";

tenants *tenants_new(void) { return calloc(1, sizeof(tenants)); }

void tenants_free(tenants *t)
{
	if (!t)
		return;
	tenant_rules_free(t->rules);
	free(t);
}

const tenant_rules *tenants_rules(const tenants *t) { return t->rules; }

const char *tenants_failing(const tenants *t) { return t->failing[0] ? t->failing : NULL; }

int64_t tenants_rules_age_ms(const tenants *t, int64_t now_ms)
{
	if (!t->rules)
		return -1;
	return now_ms > t->loaded_ms ? now_ms - t->loaded_ms : 0;
}

/* Log a failure the first time it is this one. */
static int failed(tenants *t, const char *why)
{
	if (strcmp(t->failing, why) != 0) {
		snprintf(t->failing, sizeof t->failing, "%s", why);
		if (t->rules)
			log_error("tenants: %s; the last good rules stay in force (%zu enabled "
			          "tenant(s))", why, tenant_rules_count(t->rules));
		else
			log_error("tenants: %s; no rules are loaded yet", why);
	}
	return -1;
}

static int fingerprint(PGconn *conn, char *out, size_t outsz, char *err, size_t errsz)
{
	PGresult *r = PQexec(conn, SQL_FINGERPRINT);
	int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
	if (ok)
		snprintf(out, outsz, "%s", PQgetvalue(r, 0, 0));
	else
		sql_error_text(conn, r, err, errsz);
	PQclear(r);
	return ok ? 0 : -1;
}

int tenants_refresh(tenants *t, PGconn *conn, int64_t now_ms)
{
	if (t->looked && now_ms < t->next_ms)
		return 0;
	t->looked = 1;
	t->next_ms = now_ms + TENANTS_REFRESH_MS;
	char fp[64], err[1024];
	if (fingerprint(conn, fp, sizeof fp, err, sizeof err) != 0)
		return failed(t, err);
	if (strcmp(fp, t->seen) == 0) {
		if (t->rows_bad)
			return -1; /* the same rows, still wrong (said already) */
		if (t->failing[0])
			log_info("tenants: the table reads again; the rules are unchanged");
		t->failing[0] = '\0';
		t->loaded_ms = now_ms;
		return 0;
	}
	tenant_rows rows;
	if (tenant_rows_read(conn, &rows, err, sizeof err) != 0)
		return failed(t, err); /* read again next time */
	tenant_rules *next = tenant_rules_build(rows.defs, rows.n, err, sizeof err);
	tenant_rows_free(&rows);
	snprintf(t->seen, sizeof t->seen, "%s", fp);
	t->rows_bad = !next;
	if (!next)
		return failed(t, err);
	tenant_rules_free(t->rules);
	t->rules = next;
	t->loaded_ms = now_ms;
	if (t->failing[0])
		log_info("tenants: the rules load again");
	t->failing[0] = '\0';
	log_info("tenants: %zu enabled tenant(s) in force", tenant_rules_count(next));
	return 1;
}
