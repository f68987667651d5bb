/* tenant_ops.c: the tenants' rules as operators change and read them (see
 * tenant_ops.h): add, set, remove, list, show. Grants and tokens are in
 * tenant_access.c.
 *
 * Every rule is checked twice before it is written: alone, by the same code
 * the hubs load the rows with (tenant_rules.c), and against every other
 * tenant, read under a lock that makes concurrent adds and changes wait
 * for each other. The lists travel as array parameters, the rows come back
 * as JSON built by PostgreSQL. */
#include "tenant_ops.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope.h"
#include "ops_sql.h"
#include "sbuf.h"
#include "tenants.h"

/* A tenant (the table's alias t) as a JSON object's text. */
#define TENANT_JSON(t)                                                                       \
	"json_build_object('name', " t ".name, 'control_topics', " t ".control_topics, "        \
	"'biz_ids', " t ".biz_ids, 'forward_topics', " t ".forward_topics, "                    \
	"'checkback_allow', " t ".checkback_allow, "                                            \
	"'max_envelope_bytes', " t ".max_envelope_bytes, 'enabled', " t ".enabled, "            \
	"'created_at', " TS(t ".created_at") ", 'updated_at', " TS(t ".updated_at") ", "        \
	"'roles', (SELECT coalesce(json_agg(g.role ORDER BY g.role), '[]') "                    \
	"FROM txhub.tenant_grants g WHERE g.tenant = " t ".name))::text"

/* The rule columns a change is told by, in the order shown. */
static const char *const rule_fields[] = {"control_topics", "biz_ids", "forward_topics",
                                          "checkback_allow", "max_envelope_bytes", "enabled"};
#define NRULE_FIELDS (sizeof rule_fields / sizeof rule_fields[0])

static ops_rc check_actor(const char *actor, char *err, size_t errsz)
{
	if (!actor)
		return ops_bad(err, errsz, "actor is missing");
	return envelope_check_id("actor", actor, OPS_ACTOR_MAX, err, errsz) ? OPS_BAD_ARG : OPS_OK;
}

static cJSON *parse_or_oom(const char *text, char *err, size_t errsz)
{
	cJSON *j = cJSON_Parse(text);
	if (!j)
		snprintf(err, errsz, "out of memory");
	return j;
}

/* [{"field", "before", "after"}] for each rule column whose value differs
 * between two rows as to_jsonb() wrote them (either may be missing or JSON
 * null: an add, a remove; both: a grant or a token, which change no rule).
 * NULL when out of memory. */
static cJSON *tenant_changes_json(const cJSON *before, const cJSON *after)
{
	before = cJSON_IsObject(before) ? before : NULL;
	after = cJSON_IsObject(after) ? after : NULL;
	cJSON *arr = cJSON_CreateArray();
	for (size_t i = 0; arr && (before || after) && i < NRULE_FIELDS; i++) {
		const cJSON *b = before ? cJSON_GetObjectItem(before, rule_fields[i]) : NULL;
		const cJSON *a = after ? cJSON_GetObjectItem(after, rule_fields[i]) : NULL;
		b = cJSON_IsNull(b) ? NULL : b; /* a column's null is no value, as no row */
		a = cJSON_IsNull(a) ? NULL : a;
		if ((!b && !a) || (b && a && cJSON_Compare(a, b, 1)))
			continue;
		cJSON *c = cJSON_CreateObject();
		if (!c || !cJSON_AddItemToArray(arr, c)) {
			cJSON_Delete(c);
			cJSON_Delete(arr);
			return NULL;
		}
		cJSON_AddStringToObject(c, "field", rule_fields[i]);
		cJSON_AddItemToObject(c, "before", b ? cJSON_Duplicate(b, 1) : cJSON_CreateNull());
		cJSON_AddItemToObject(c, "after", a ? cJSON_Duplicate(a, 1) : cJSON_CreateNull());
	}
	return arr;
}

/* ---- checking against the other tenants ---- */

/* BEGIN, and the lock that makes adds and changes of tenants wait for
 * each other (readers, the hubs among them, do not wait). */
static ops_rc begin_locked(PGconn *conn, char *err, size_t errsz)
{
	ops_rc rc = ops_exec(conn, "BEGIN", err, errsz);
	if (rc == OPS_OK)
		rc = ops_exec(conn, "LOCK TABLE txhub.tenants IN SHARE ROW EXCLUSIVE MODE", err, errsz);
	return rc;
}

/* mine against every stored tenant but the one named skip: OPS_REFUSED,
 * naming the other tenant, when they overlap or when the other's row does
 * not pass the rules (nothing can be judged against it). */
static ops_rc check_others(const store_tenant_rows *rows, const tenant_rule *mine, const char *skip,
                           tenant_field *bad, char *err, size_t errsz)
{
	for (size_t i = 0; i < rows->n; i++) {
		const tenant_def *d = &rows->defs[i];
		if (skip && strcmp(d->name, skip) == 0)
			continue;
		tenant_rule other;
		tenant_field f;
		char why[600];
		ops_rc rc = OPS_OK;
		if (tenant_rule_compile(d, &other, &f, why, sizeof why) != 0) {
			*bad = TENANT_F_NAME;
			snprintf(err, errsz, "tenant %s's stored row does not pass the rules (%s: %s): fix "
			         "it with txhub tenant set %s first", d->name, tenant_field_column(f), why,
			         d->name);
			rc = OPS_REFUSED;
		} else if (tenant_rule_overlap(mine, &other, bad, why, sizeof why)) {
			snprintf(err, errsz, "overlaps tenant %s: %s", d->name, why);
			rc = OPS_REFUSED;
		}
		tenant_rule_clear(&other);
		if (rc != OPS_OK)
			return rc;
	}
	return OPS_OK;
}

static const tenant_def *find_row(const store_tenant_rows *rows, const char *name)
{
	for (size_t i = 0; i < rows->n; i++)
		if (strcmp(rows->defs[i].name, name) == 0)
			return &rows->defs[i];
	return NULL;
}

/* ---- writing a tenant ---- */

static void put_list(sbuf *b, const char *const *l, size_t n)
{
	sbuf_arr_begin(b);
	for (size_t i = 0; i < n; i++)
		sbuf_arr_text(b, l[i]);
	sbuf_arr_end(b);
}

/* The rule parameters $2..$7 of d, written into the buffers: control,
 * biz, forward, allow (arrays), cap (0: none), enabled. */
typedef struct {
	sbuf lists[4];
	char cap[24];
	const char *p[6];
} def_params;

static int def_params_fill(def_params *dp, const tenant_def *d)
{
	memset(dp, 0, sizeof *dp);
	put_list(&dp->lists[0], d->control_topics, d->ncontrol);
	put_list(&dp->lists[1], d->biz_ids, d->nbiz);
	put_list(&dp->lists[2], d->forward_topics, d->nforward);
	put_list(&dp->lists[3], d->checkback_allow, d->nallow);
	snprintf(dp->cap, sizeof dp->cap, "%lld", (long long)d->max_envelope_bytes);
	int oom = 0;
	for (int i = 0; i < 4; i++) {
		oom |= dp->lists[i].oom;
		dp->p[i] = sbuf_str(&dp->lists[i]);
	}
	dp->p[4] = dp->cap;
	dp->p[5] = d->enabled ? "true" : "false";
	return oom ? -1 : 0;
}

static void def_params_free(def_params *dp)
{
	for (int i = 0; i < 4; i++)
		sbuf_free(&dp->lists[i]);
}

/* $1 name, $2..$7 def_params, $8 actor. */
static const char *SQL_ADD =
	"WITH t AS (INSERT INTO txhub.tenants (name, control_topics, biz_ids, forward_topics, "
	"checkback_allow, max_envelope_bytes, enabled) VALUES ($1, $2::text[], $3::text[], "
	"$4::text[], $5::text[], nullif($6::integer, 0), $7::boolean) RETURNING *), "
	"h AS (INSERT INTO txhub.tenant_history (tenant, action, actor, after) "
	"SELECT t.name, 'add', $8, to_jsonb(t) FROM t) "
	"SELECT " TENANT_JSON("t") " FROM t";

/* Run one write statement with the name, the rule parameters and the
 * actor; its first column's JSON (NULL for no row) into *out. */
static ops_rc write_def(PGconn *conn, const char *sql, const tenant_def *d, const char *actor,
                        cJSON **out, int *rows, char *err, size_t errsz)
{
	def_params dp;
	if (def_params_fill(&dp, d) != 0) {
		def_params_free(&dp);
		snprintf(err, errsz, "out of memory");
		return OPS_DB_ERROR;
	}
	const char *p[8] = {d->name, dp.p[0], dp.p[1], dp.p[2], dp.p[3], dp.p[4], dp.p[5], actor};
	PGresult *r = ops_query(conn, sql, 8, p, 0, err, errsz);
	def_params_free(&dp);
	if (!r)
		return OPS_DB_ERROR;
	ops_rc rc = OPS_OK;
	*rows = PQntuples(r);
	if (*rows > 0 && !(*out = parse_or_oom(PQgetvalue(r, 0, 0), err, errsz)))
		rc = OPS_DB_ERROR;
	PQclear(r);
	return rc;
}

ops_rc tenant_add(PGconn *conn, const tenant_def *d, const char *actor, tenant_field *bad,
                  cJSON **out, char *err, size_t errsz)
{
	*out = NULL;
	*bad = TENANT_F_NAME;
	tenant_def def = *d;
	def.enabled = 1;
	tenant_rule mine = {0};
	store_tenant_rows rows = {0};
	ops_rc rc = check_actor(actor, err, errsz);
	if (rc == OPS_OK && tenant_rule_compile(&def, &mine, bad, err, errsz) != 0)
		rc = OPS_BAD_ARG;
	else
		*bad = TENANT_F_NAME;
	if (rc == OPS_OK && (rc = begin_locked(conn, err, errsz)) == OPS_OK &&
	    store_tenant_rows_read(conn, &rows, err, errsz) != 0)
		rc = OPS_DB_ERROR;
	if (rc == OPS_OK && find_row(&rows, def.name)) {
		snprintf(err, errsz, "tenant %s exists already (txhub tenant set %s changes it)",
		         def.name, def.name);
		rc = OPS_REFUSED;
	}
	if (rc == OPS_OK)
		rc = check_others(&rows, &mine, NULL, bad, err, errsz);
	int n = 0;
	if (rc == OPS_OK)
		rc = write_def(conn, SQL_ADD, &def, actor, out, &n, err, errsz);
	if (rc == OPS_OK)
		rc = ops_exec(conn, "COMMIT", err, errsz);
	if (rc != OPS_OK) {
		cJSON_Delete(*out);
		*out = NULL;
	}
	ops_rollback(conn);
	store_tenant_rows_free(&rows);
	tenant_rule_clear(&mine);
	return rc;
}

/* ---- set ---- */

/* $1 name, $2..$7 the rules after the change, $8 actor: the row before and
 * after as to_jsonb, and as shown; nothing is written when nothing
 * changes. */
static const char *SQL_SET =
	"WITH old AS (SELECT * FROM txhub.tenants WHERE name = $1), "
	"u AS (UPDATE txhub.tenants t SET control_topics = $2::text[], biz_ids = $3::text[], "
	"forward_topics = $4::text[], checkback_allow = $5::text[], "
	"max_envelope_bytes = nullif($6::integer, 0), enabled = $7::boolean, updated_at = now() "
	"WHERE t.name = $1 AND (t.control_topics, t.biz_ids, t.forward_topics, t.checkback_allow, "
	"t.max_envelope_bytes, t.enabled) IS DISTINCT FROM ($2::text[], $3::text[], $4::text[], "
	"$5::text[], nullif($6::integer, 0), $7::boolean) RETURNING t.*), "
	"h AS (INSERT INTO txhub.tenant_history (tenant, action, actor, before, after) "
	"SELECT $1, 'set', $8, to_jsonb(old), to_jsonb(u) FROM old, u) "
	"SELECT json_build_object('tenant', coalesce((SELECT " TENANT_JSON("u") " FROM u), "
	"(SELECT " TENANT_JSON("old") " FROM old))::json, "
	"'before', (SELECT to_jsonb(old) FROM old), 'after', (SELECT to_jsonb(u) FROM u))::text";

/* The stored row d with the change c laid over it. */
static tenant_def merge(const tenant_def *d, const tenant_change *c)
{
	tenant_def m = *d;
	const tenant_def *g = &c->def;
	if (c->given & (1u << TENANT_F_CONTROL_TOPICS))
		m.control_topics = g->control_topics, m.ncontrol = g->ncontrol;
	if (c->given & (1u << TENANT_F_BIZ_IDS))
		m.biz_ids = g->biz_ids, m.nbiz = g->nbiz;
	if (c->given & (1u << TENANT_F_FORWARD_TOPICS))
		m.forward_topics = g->forward_topics, m.nforward = g->nforward;
	if (c->given & (1u << TENANT_F_CHECKBACK_ALLOW))
		m.checkback_allow = g->checkback_allow, m.nallow = g->nallow;
	if (c->given & (1u << TENANT_F_MAX_ENVELOPE_BYTES))
		m.max_envelope_bytes = g->max_envelope_bytes;
	if (c->enable >= 0)
		m.enabled = c->enable;
	return m;
}

/* {"tenant", "changed": [fields]} from SQL_SET's document. */
static ops_rc set_result(cJSON *doc, cJSON **out, char *err, size_t errsz)
{
	cJSON *changes = tenant_changes_json(cJSON_GetObjectItem(doc, "before"),
	                                     cJSON_GetObjectItem(doc, "after"));
	cJSON *changed = cJSON_CreateArray(), *o = cJSON_CreateObject();
	cJSON *t = cJSON_DetachItemFromObject(doc, "tenant");
	int after = cJSON_IsObject(cJSON_GetObjectItem(doc, "after"));
	if (!changes || !changed || !o || !t) {
		cJSON_Delete(changes);
		cJSON_Delete(changed);
		cJSON_Delete(o);
		cJSON_Delete(t);
		snprintf(err, errsz, "out of memory");
		return OPS_DB_ERROR;
	}
	const cJSON *c;
	cJSON_ArrayForEach(c, changes) {
		if (after)
			cJSON_AddItemToArray(changed, cJSON_CreateString(
				cJSON_GetStringValue(cJSON_GetObjectItem(c, "field"))));
	}
	cJSON_Delete(changes);
	cJSON_AddItemToObject(o, "tenant", t);
	cJSON_AddItemToObject(o, "changed", changed);
	*out = o;
	return OPS_OK;
}

ops_rc tenant_set(PGconn *conn, const tenant_change *c, const char *actor, tenant_field *bad,
                  cJSON **out, char *err, size_t errsz)
{
	*out = NULL;
	*bad = TENANT_F_NAME;
	store_tenant_rows rows = {0};
	tenant_rule mine = {0};
	cJSON *doc = NULL;
	ops_rc rc = check_actor(actor, err, errsz);
	if (rc == OPS_OK && tenant_name_check(c->def.name, err, errsz) != 0)
		rc = OPS_BAD_ARG;
	if (rc == OPS_OK && (rc = begin_locked(conn, err, errsz)) == OPS_OK &&
	    store_tenant_rows_read(conn, &rows, err, errsz) != 0)
		rc = OPS_DB_ERROR;
	const tenant_def *stored = rc == OPS_OK ? find_row(&rows, c->def.name) : NULL;
	if (rc == OPS_OK && !stored) {
		snprintf(err, errsz, "no tenant %s (txhub tenant list shows them)", c->def.name);
		rc = OPS_NOT_FOUND;
	}
	tenant_def m = stored ? merge(stored, c) : c->def;
	if (rc == OPS_OK && tenant_rule_compile(&m, &mine, bad, err, errsz) != 0)
		rc = OPS_BAD_ARG;
	else
		*bad = TENANT_F_NAME;
	if (rc == OPS_OK)
		rc = check_others(&rows, &mine, m.name, bad, err, errsz);
	int n = 0;
	if (rc == OPS_OK)
		rc = write_def(conn, SQL_SET, &m, actor, &doc, &n, err, errsz);
	if (rc == OPS_OK)
		rc = ops_exec(conn, "COMMIT", err, errsz);
	if (rc == OPS_OK)
		rc = set_result(doc, out, err, errsz);
	ops_rollback(conn);
	cJSON_Delete(doc);
	store_tenant_rows_free(&rows);
	tenant_rule_clear(&mine);
	return rc;
}

/* ---- remove ---- */

static const char *SQL_REMOVE =
	"WITH d AS (DELETE FROM txhub.tenants WHERE name = $1 RETURNING *), "
	"h AS (INSERT INTO txhub.tenant_history (tenant, action, actor, before, detail) "
	"SELECT d.name, 'remove', $2, to_jsonb(d), 'its messages keep its name; its grants "
	"and console tokens are gone' FROM d) "
	"SELECT " TENANT_JSON("d") " FROM d";

ops_rc tenant_remove(PGconn *conn, const char *name, const char *actor, cJSON **out, char *err,
                     size_t errsz)
{
	*out = NULL;
	ops_rc rc = check_actor(actor, err, errsz);
	if (rc == OPS_OK && tenant_name_check(name, err, errsz) != 0)
		rc = OPS_BAD_ARG;
	if (rc != OPS_OK || (rc = begin_locked(conn, err, errsz)) != OPS_OK)
		return rc;
	const char *p[2] = {name, actor};
	PGresult *r = ops_query(conn, SQL_REMOVE, 2, p, 0, err, errsz);
	cJSON *t = NULL, *o = NULL;
	if (!r) {
		rc = OPS_DB_ERROR;
	} else if (PQntuples(r) == 0) {
		snprintf(err, errsz, "no tenant %s (txhub tenant list shows them)", name);
		rc = OPS_NOT_FOUND;
	} else if (!(t = parse_or_oom(PQgetvalue(r, 0, 0), err, errsz)) ||
	           !(o = cJSON_CreateObject())) {
		snprintf(err, errsz, "out of memory");
		rc = OPS_DB_ERROR;
	}
	PQclear(r);
	if (rc == OPS_OK)
		rc = ops_exec(conn, "COMMIT", err, errsz);
	if (rc == OPS_OK) {
		cJSON_AddStringToObject(o, "removed", name);
		cJSON_AddItemToObject(o, "tenant", t);
		*out = o;
	} else {
		cJSON_Delete(t);
		cJSON_Delete(o);
	}
	ops_rollback(conn);
	return rc;
}

/* ---- list and show ---- */

static const char *SQL_LIST =
	"SELECT coalesce(json_agg(" TENANT_JSON("t") "::json ORDER BY t.name), '[]')::text "
	"FROM txhub.tenants t";

/* One statement's one value, as JSON. */
static ops_rc query_json(PGconn *conn, const char *sql, int n, const char *const *p, cJSON **out,
                         char *err, size_t errsz)
{
	PGresult *r = ops_query(conn, sql, n, p, 0, err, errsz);
	if (!r)
		return OPS_DB_ERROR;
	ops_rc rc = OPS_OK;
	if (PQntuples(r) == 0)
		rc = OPS_NOT_FOUND;
	else if (!(*out = parse_or_oom(PQgetvalue(r, 0, 0), err, errsz)))
		rc = OPS_DB_ERROR;
	PQclear(r);
	return rc;
}

ops_rc tenant_list(PGconn *conn, cJSON **out, char *err, size_t errsz)
{
	*out = NULL;
	return query_json(conn, SQL_LIST, 0, NULL, out, err, errsz);
}

static const char *SQL_SHOW_TENANT =
	"SELECT " TENANT_JSON("t") " FROM txhub.tenants t WHERE t.name = $1";
/* every status and send status present, 0 when none; the tenant's
 * messages read once */
static const char *SQL_SHOW_COUNTS =
	"WITH c AS (SELECT status, send_status, count(*) AS n FROM txhub.messages "
	"  WHERE tenant = $1 GROUP BY status, send_status) "
	"SELECT json_build_object("
	"'messages', (SELECT json_object_agg(s, (SELECT coalesce(sum(n), 0) FROM c "
	"  WHERE c.status = s)) FROM unnest(ARRAY['prepared', 'awaiting_prepare', 'committed', "
	"  'rolled_back', 'check_failed']) s), "
	"'send', (SELECT json_object_agg(s, (SELECT coalesce(sum(n), 0) FROM c "
	"  WHERE c.send_status = s)) FROM unnest(ARRAY['pending', 'sent', 'failed']) s), "
	"'grants', (SELECT coalesce(json_agg(json_build_object('role', role, 'granted_at', "
	"  " TS("granted_at") ", 'granted_by', granted_by) ORDER BY role), '[]') "
	"  FROM txhub.tenant_grants WHERE tenant = $1), "
	"'tokens', (SELECT coalesce(json_agg(json_build_object('id', id, 'created_at', "
	"  " TS("created_at") ", 'created_by', created_by, 'revoked_at', " TS("revoked_at") ", "
	"  'expires_at', " TS("expires_at") ") ORDER BY id), '[]') "
	"  FROM txhub.tenant_tokens WHERE tenant = $1), "
	"'history', (SELECT coalesce(json_agg(json_build_object('at', " TS("at") ", "
	"  'action', action, 'actor', actor, 'detail', detail, 'before', before, "
	"  'after', after) ORDER BY at, id), '[]') FROM txhub.tenant_history WHERE tenant = $1)"
	")::text";

/* Each history entry's before/after replaced by its changes. */
static int history_changes(cJSON *history)
{
	cJSON *h;
	cJSON_ArrayForEach(h, history) {
		cJSON *ch = tenant_changes_json(cJSON_GetObjectItem(h, "before"),
		                                cJSON_GetObjectItem(h, "after"));
		if (!ch)
			return -1;
		cJSON_DeleteItemFromObject(h, "before");
		cJSON_DeleteItemFromObject(h, "after");
		cJSON_AddItemToObject(h, "changes", ch);
	}
	return 0;
}

ops_rc tenant_show(PGconn *conn, const char *name, cJSON **out, char *err, size_t errsz)
{
	*out = NULL;
	if (tenant_name_check(name, err, errsz) != 0)
		return OPS_BAD_ARG;
	const char *p[1] = {name};
	cJSON *t = NULL, *doc = NULL;
	ops_rc rc = ops_exec(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", err, errsz);
	if (rc == OPS_OK && (rc = query_json(conn, SQL_SHOW_TENANT, 1, p, &t, err, errsz)) ==
	                    OPS_NOT_FOUND)
		snprintf(err, errsz, "no tenant %s (txhub tenant list shows them)", name);
	if (rc == OPS_OK)
		rc = query_json(conn, SQL_SHOW_COUNTS, 1, p, &doc, err, errsz);
	if (rc == OPS_OK)
		rc = ops_exec(conn, "COMMIT", err, errsz);
	ops_rollback(conn);
	if (rc == OPS_OK && history_changes(cJSON_GetObjectItem(doc, "history")) != 0) {
		snprintf(err, errsz, "out of memory");
		rc = OPS_DB_ERROR;
	}
	if (rc != OPS_OK) {
		cJSON_Delete(t);
		cJSON_Delete(doc);
		return rc;
	}
	cJSON_AddItemToObject(doc, "tenant", t);
	*out = doc;
	return OPS_OK;
}
