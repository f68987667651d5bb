/* tenant_access.c: who may see a tenant's rows (see tenant_ops.h):
 * `txhub tenant grant` (PostgreSQL roles under row-level security, whose
 * policies migrations/0010_tenants.sql made) and `txhub tenant token`
 * (console tokens kept as their SHA-256), and the lookup of a token. */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "secret.h"
#include "envelope.h"
#include "ops_sql.h"
#include "tenant_ops.h"

/* The tables a tenant's role reads through row-level security. Turned on
 * by the first grant: until then a database without tenants behaves as
 * before for every role. Each ALTER locks its table for a moment, in a
 * transaction of its own (autocommit), before the grant's: a transaction
 * holding one table's lock and waiting for no other cannot deadlock with a
 * hub's, whatever order the hub's statements take their tables in (the
 * dead-letter statements take dead_letter_pending and message_rows in both
 * orders, hub/forward/deadletter*.c). Turning it on restricts only: a
 * grant that fails after leaves roles seeing less, never more, and the
 * next grant turns on what is still off. */
static const char *const rls_tables[] = {"partitions", "gaps", "message_rows", "history",
                                         "rejected", "conflicts", "forward_marks",
                                         "dead_letter_pending"};
#define NRLS (sizeof rls_tables / sizeof rls_tables[0])

/* What `txhub list/show/status/resolve/redrive` need, for the role (an
 * identifier, quoted): the schema, what they read, the columns resolve and
 * redrive write (so a row can neither change tenant nor payload), and the
 * history rows they add. The policies keep all of it to the role's tenants. */
static const char *const grants[] = {
	"GRANT USAGE ON SCHEMA txhub TO %s",
	"GRANT SELECT ON txhub.schema_migrations, txhub.messages, txhub.message_rows, "
	"txhub.forward_marks, txhub.rejected, txhub.conflicts, txhub.history, txhub.partitions, "
	"txhub.gaps, txhub.tenants, txhub.tenant_grants TO %s",
	/* the view runs with the caller's rights (migration 0012): its table's
	 * policies apply, and resolve and redrive write the table (not_before:
	 * a resolved commit's due time, redrive --now) */
	"GRANT UPDATE (status, send_status, send_attempts, next_send_at, check_attempts, "
	"next_check_at, fwd_seq, updated_at, not_before) ON txhub.message_rows TO %s",
	"GRANT INSERT (biz_id, message_key, event, detail, actor, tenant) ON txhub.history TO %s",
	"GRANT USAGE ON SEQUENCE txhub.history_id_seq TO %s",
	"GRANT EXECUTE ON FUNCTION txhub.granted_tenants(), txhub.granted_topic(text) TO %s",
};
#define NGRANTS (sizeof grants / sizeof grants[0])

static ops_rc check_common(const char *name, const char *actor, char *err, size_t errsz)
{
	if (tenant_name_check(name, err, errsz) != 0)
		return OPS_BAD_ARG;
	if (!actor || envelope_check_id("actor", actor, OPS_ACTOR_MAX, err, errsz) != 0)
		return actor ? OPS_BAD_ARG : ops_bad(err, errsz, "actor is missing");
	return OPS_OK;
}

/* BEGIN and the tenant's row locked against a remove (OPS_NOT_FOUND). */
static ops_rc begin_tenant(PGconn *conn, const char *name, char *err, size_t errsz)
{
	ops_rc rc = ops_exec(conn, "BEGIN", err, errsz);
	if (rc != OPS_OK)
		return rc;
	const char *p[1] = {name};
	PGresult *r = ops_query(conn, "SELECT 1 FROM txhub.tenants WHERE name = $1 FOR SHARE", 1, p,
	                        0, err, errsz);
	if (!r)
		return OPS_DB_ERROR;
	if (PQntuples(r) == 0) {
		snprintf(err, errsz, "no tenant %s (txhub tenant list shows them)", name);
		rc = OPS_NOT_FOUND;
	}
	PQclear(r);
	return rc;
}

/* ---- grant ---- */

/* The role, and whether it could see every row anyway: a member of the
 * tables' owner in any way (owners are not subject to their tables'
 * policies; a NOINHERIT member still has SET ROLE), or a member of a role
 * (itself included) that is a superuser, has BYPASSRLS, or has CREATEROLE
 * (which can grant itself membership in the owner's role). Columns: a
 * member of the owner, the owner, the first such role (itself first) and
 * what it has. A superuser is a member of every role: its own attributes
 * are named first. */
static const char *SQL_ROLE =
	"SELECT pg_has_role(r.oid, c.relowner, 'MEMBER'), pg_get_userbyid(c.relowner), x.rolname, "
	"concat_ws(', ', CASE WHEN x.rolsuper THEN 'SUPERUSER' END, "
	"CASE WHEN x.rolbypassrls THEN 'BYPASSRLS' END, "
	"CASE WHEN x.rolcreaterole THEN 'CREATEROLE' END) "
	"FROM pg_roles r CROSS JOIN pg_class c LEFT JOIN LATERAL (SELECT y.* FROM pg_roles y "
	"WHERE (y.rolsuper OR y.rolbypassrls OR y.rolcreaterole) "
	"AND pg_has_role(r.oid, y.oid, 'MEMBER') "
	"ORDER BY y.oid <> r.oid, y.rolname LIMIT 1) x ON true "
	"WHERE r.rolname = $1 AND c.oid = 'txhub.message_rows'::regclass";

static ops_rc check_role(PGconn *conn, const char *role, char *err, size_t errsz)
{
	const char *p[1] = {role};
	PGresult *r = ops_query(conn, SQL_ROLE, 1, p, 0, err, errsz);
	if (!r)
		return OPS_DB_ERROR;
	ops_rc rc = OPS_REFUSED;
	if (PQntuples(r) == 0) {
		snprintf(err, errsz, "no PostgreSQL role %s (CREATE ROLE %s LOGIN ... makes one)", role,
		         role);
		rc = OPS_NOT_FOUND;
	} else if (strcmp(role, PQgetvalue(r, 0, 1)) == 0) {
		snprintf(err, errsz, "role %s is the owner of txhub's tables (the hubs' role), which "
		         "row-level security does not restrict: it sees every row", role);
	} else if (!PQgetisnull(r, 0, 2) && strcmp(PQgetvalue(r, 0, 2), role) == 0) {
		snprintf(err, errsz, "role %s has %s: a superuser or a role with BYPASSRLS sees every "
		         "tenant's rows whatever is granted, one with CREATEROLE can grant itself any "
		         "role's rights", role, PQgetvalue(r, 0, 3));
	} else if (PQgetvalue(r, 0, 0)[0] == 't') {
		snprintf(err, errsz, "role %s is a member of %s, the owner of txhub's tables (the hubs' "
		         "role), which row-level security does not restrict: inheriting or not, it may "
		         "SET ROLE %s and see every row", role, PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 1));
	} else if (!PQgetisnull(r, 0, 2)) {
		snprintf(err, errsz, "role %s is a member of %s, which has %s: it may SET ROLE %s, and a "
		         "superuser or a role with BYPASSRLS sees every tenant's rows whatever is granted, "
		         "one with CREATEROLE can grant itself any role's rights", role,
		         PQgetvalue(r, 0, 2), PQgetvalue(r, 0, 3), PQgetvalue(r, 0, 2));
	} else {
		rc = OPS_OK;
	}
	PQclear(r);
	return rc;
}

/* Row-level security on, where it is not yet: each ALTER its own transaction
 * (no transaction is open). */
static ops_rc enable_rls(PGconn *conn, int *enabled, char *err, size_t errsz)
{
	*enabled = 0;
	for (size_t i = 0; i < NRLS; i++) {
		const char *p[1] = {rls_tables[i]};
		PGresult *r = ops_query(conn, "SELECT relrowsecurity FROM pg_class WHERE oid = "
		                        "('txhub.' || quote_ident($1))::regclass", 1, p, 0, err, errsz);
		if (!r)
			return OPS_DB_ERROR;
		int on = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
		PQclear(r);
		if (on)
			continue;
		char sql[128];
		snprintf(sql, sizeof sql, "ALTER TABLE txhub.%s ENABLE ROW LEVEL SECURITY", rls_tables[i]);
		ops_rc rc = ops_exec(conn, sql, err, errsz);
		if (rc != OPS_OK)
			return rc;
		(*enabled)++;
	}
	return OPS_OK;
}

static ops_rc grant_privileges(PGconn *conn, const char *role, char *err, size_t errsz)
{
	char *id = PQescapeIdentifier(conn, role, strlen(role));
	if (!id)
		return ops_db_fail(conn, NULL, err, errsz);
	ops_rc rc = OPS_OK;
	for (size_t i = 0; rc == OPS_OK && i < NGRANTS; i++) {
		char sql[512];
		snprintf(sql, sizeof sql, grants[i], id);
		rc = ops_exec(conn, sql, err, errsz);
	}
	PQfreemem(id);
	return rc;
}

static const char *SQL_GRANT =
	"WITH g AS (INSERT INTO txhub.tenant_grants (tenant, role, granted_by) VALUES ($1, $2, $3) "
	"ON CONFLICT DO NOTHING RETURNING tenant), "
	"h AS (INSERT INTO txhub.tenant_history (tenant, action, actor, detail) "
	"SELECT tenant, 'grant', $3, 'role ' || $2 || ' may see and act on its rows' FROM g) "
	"SELECT count(*) FROM g";

static cJSON *grant_json(const char *name, const char *role, int already, int enabled)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "tenant", name);
	cJSON_AddStringToObject(o, "role", role);
	cJSON_AddBoolToObject(o, "already", already);
	cJSON_AddNumberToObject(o, "row_security_enabled_on", enabled);
	return o;
}

ops_rc tenant_grant(PGconn *conn, const char *name, const char *role, const char *actor,
                    cJSON **out, char *err, size_t errsz)
{
	*out = NULL;
	ops_rc rc = check_common(name, actor, err, errsz);
	if (rc == OPS_OK && (!role || envelope_check_id("role", role, TENANT_ROLE_MAX, err, errsz)))
		rc = role ? OPS_BAD_ARG : ops_bad(err, errsz, "role is missing");
	if (rc != OPS_OK)
		return rc;
	/* the refusals first, changing nothing; then row-level security; then
	 * the grant, its tenant and role checked again in its transaction */
	if ((rc = begin_tenant(conn, name, err, errsz)) == OPS_OK)
		rc = check_role(conn, role, err, errsz);
	ops_rollback(conn);
	int enabled = 0, added = 0;
	if (rc == OPS_OK)
		rc = enable_rls(conn, &enabled, err, errsz);
	const char *p[3] = {name, role, actor};
	PGresult *r = NULL;
	if (rc == OPS_OK && (rc = begin_tenant(conn, name, err, errsz)) == OPS_OK &&
	    (rc = check_role(conn, role, err, errsz)) == OPS_OK &&
	    (rc = grant_privileges(conn, role, err, errsz)) == OPS_OK) {
		if ((r = ops_query(conn, SQL_GRANT, 3, p, 0, err, errsz)))
			added = (int)ops_int(r, 0, 0);
		else
			rc = OPS_DB_ERROR;
	}
	PQclear(r);
	if (rc == OPS_OK)
		rc = ops_exec(conn, "COMMIT", err, errsz);
	ops_rollback(conn);
	if (rc == OPS_OK && !(*out = grant_json(name, role, !added, enabled))) {
		snprintf(err, errsz, "out of memory");
		rc = OPS_DB_ERROR;
	}
	return rc;
}

/* ---- console tokens ---- */

static void hash_hex(const char *token, char out[65])
{
	unsigned char h[32];
	secret_token_hash(token, h);
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", h[i]);
}

static const char *SQL_TOKEN =
	"WITH k AS (INSERT INTO txhub.tenant_tokens (tenant, sha256, created_by) "
	"VALUES ($1, decode($2, 'hex'), $3) RETURNING id), "
	"h AS (INSERT INTO txhub.tenant_history (tenant, action, actor, detail) "
	"SELECT $1, 'token', $3, 'console token ' || id || ' issued' FROM k) "
	"SELECT id FROM k";

ops_rc tenant_token_issue(PGconn *conn, const char *name, const char *actor,
                          char token[TENANT_TOKEN_LEN + 1], cJSON **out, char *err, size_t errsz)
{
	*out = NULL;
	token[0] = '\0';
	ops_rc rc = check_common(name, actor, err, errsz);
	if (rc != OPS_OK || (rc = begin_tenant(conn, name, err, errsz)) != OPS_OK) {
		ops_rollback(conn);
		return rc;
	}
	char hex[65];
	int64_t id = 0;
	if (secret_random_hex(token) != 0) {
		snprintf(err, errsz, "no random bytes to be had from OpenSSL");
		rc = OPS_DB_ERROR;
	} else {
		hash_hex(token, hex);
		const char *p[3] = {name, hex, actor};
		PGresult *r = ops_query(conn, SQL_TOKEN, 3, p, 0, err, errsz);
		if (r)
			id = ops_int(r, 0, 0);
		rc = r ? ops_exec(conn, "COMMIT", err, errsz) : OPS_DB_ERROR;
		PQclear(r);
	}
	ops_rollback(conn);
	cJSON *o = rc == OPS_OK ? cJSON_CreateObject() : NULL;
	if (rc == OPS_OK && !o) {
		snprintf(err, errsz, "out of memory (the token was stored: issue another)");
		rc = OPS_DB_ERROR;
	}
	if (rc != OPS_OK) {
		memset(token, 0, TENANT_TOKEN_LEN + 1);
		return rc;
	}
	cJSON_AddStringToObject(o, "tenant", name);
	cJSON_AddNumberToObject(o, "id", (double)id);
	cJSON_AddStringToObject(o, "token", token);
	*out = o;
	return OPS_OK;
}

/* A token that logs in: not revoked, not expired, of a tenant that exists
 * (a remove deletes its tokens) and is enabled. k: txhub.tenant_tokens. */
#define TOKEN_LIVE                                                                       \
	"k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now()) "            \
	"AND EXISTS (SELECT 1 FROM txhub.tenants t WHERE t.name = k.tenant AND t.enabled)"

ops_rc tenant_token_lookup(PGconn *conn, const char *token, char *tenant, size_t tenantsz,
                           int64_t *id, char *err, size_t errsz)
{
	tenant[0] = '\0';
	*id = 0;
	if (!token || !*token || strlen(token) > 1024) {
		snprintf(err, errsz, "no such token");
		return OPS_NOT_FOUND;
	}
	char hex[65];
	hash_hex(token, hex);
	const char *p[1] = {hex};
	PGresult *r = ops_query(conn, "SELECT k.tenant, k.id FROM txhub.tenant_tokens k "
	                        "WHERE k.sha256 = decode($1, 'hex') AND " TOKEN_LIVE, 1, p, 0, err,
	                        errsz);
	if (!r)
		return OPS_DB_ERROR;
	ops_rc rc = OPS_OK;
	if (PQntuples(r) == 0) {
		snprintf(err, errsz, "no such token");
		rc = OPS_NOT_FOUND;
	} else {
		snprintf(tenant, tenantsz, "%s", PQgetvalue(r, 0, 0));
		*id = ops_int(r, 0, 1);
	}
	PQclear(r);
	return rc;
}

ops_rc tenant_token_live(PGconn *conn, int64_t id, const char *tenant, char *err, size_t errsz)
{
	char ids[32];
	snprintf(ids, sizeof ids, "%lld", (long long)id);
	const char *p[2] = {ids, tenant};
	PGresult *r = ops_query(conn, "SELECT 1 FROM txhub.tenant_tokens k WHERE k.id = $1::bigint "
	                        "AND k.tenant = $2 AND " TOKEN_LIVE, 2, p, 0, err, errsz);
	if (!r)
		return OPS_DB_ERROR;
	ops_rc rc = PQntuples(r) == 1 ? OPS_OK : OPS_NOT_FOUND;
	if (rc != OPS_OK)
		snprintf(err, errsz, "the token was revoked, or its tenant removed or disabled");
	PQclear(r);
	return rc;
}
