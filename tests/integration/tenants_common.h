/* tenants_common.h: helpers of the tenant tests (test_tenants.c,
 * test_tenants_rls.c): running txhub with its output kept, SQL, and a
 * checksum of everything a refused command must leave alone. Header only
 * (static inline): each test program includes it once. */
#ifndef TXHUB_TENANTS_COMMON_H
#define TXHUB_TENANTS_COMMON_H

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define TN_OUT_MAX (1 << 20)

/* The last command's standard output and error. */
static char tn_out[TN_OUT_MAX], tn_err[16384];

/* Run txhub with args (NULL-terminated); returns the exit status. */
static inline int tn_run(h_env *e, const char *const *args)
{
	return h_txhub_io(e, args, tn_out, sizeof tn_out, tn_err, sizeof tn_err);
}

/* Run it as PostgreSQL role `role` (NULL: the test's own, the owner). */
static inline int tn_run_as(h_env *e, const char *role, const char *const *args)
{
	if (!role)
		return tn_run(e, args);
	static char pg[700];
	snprintf(pg, sizeof pg, "pg=%s user=%s", e->conninfo, role);
	const char *argv[64] = {"-X", pg};
	int n = 2;
	for (; *args && n < 63; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	return tn_run(e, argv);
}

/* Standard output as one JSON document (the command must have exited 0 and
 * printed nothing else). The caller deletes it. */
static inline cJSON *tn_json(void)
{
	const char *end = NULL;
	cJSON *doc = cJSON_ParseWithOpts(tn_out, &end, 0);
	cr_assert_not_null(doc, "stdout is not JSON: %.300s (stderr: %.300s)", tn_out, tn_err);
	for (; *end; end++)
		cr_assert(*end == ' ' || *end == '\n', "more than one document on stdout: %.200s", end);
	return doc;
}

static inline void tn_sql(h_env *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Run a statement built with printf (test-made names only; values the
 * test controls). */
static inline void tn_sql(h_env *e, const char *fmt, ...)
{
	char q[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(q, sizeof q, fmt, ap);
	va_end(ap);
	h_exec(e->db, q);
}

/* Everything txhub's commands could change, in one value. */
static inline void tn_checksum(h_env *e, char *out, size_t outsz)
{
	static const char *const tables[] = {"messages", "history", "rejected", "conflicts",
	                                     "tenants", "tenant_history", "tenant_grants",
	                                     "tenant_tokens"};
	char q[4096];
	int n = snprintf(q, sizeof q, "SELECT md5(''");
	for (size_t i = 0; i < sizeof tables / sizeof *tables; i++)
		n += snprintf(q + n, sizeof q - (size_t)n, " || '#' || coalesce((SELECT string_agg("
		              "t::text, '|' ORDER BY t::text) FROM txhub.%s t), '')", tables[i]);
	snprintf(q + n, sizeof q - (size_t)n, " || '#' || coalesce((SELECT string_agg(relname || "
	         "relrowsecurity::text, ',' ORDER BY relname) FROM pg_class WHERE relnamespace = "
	         "'txhub'::regnamespace), ''))");
	h_query(e, q, out, outsz);
}

/* The string member of an object, or NULL. */
static inline const char *tn_str(const cJSON *o, const char *name)
{
	return cJSON_GetStringValue(cJSON_GetObjectItem(o, name));
}

/* A role of this test (roles are the cluster's: the test's name in it). */
static inline const char *tn_role(h_env *e, const char *suffix, char *out, size_t outsz)
{
	snprintf(out, outsz, "%s_%s", e->name, suffix);
	return out;
}

/* Create a LOGIN role (trust authentication in the test cluster); any left
 * from an earlier run of the same name goes first. */
static inline void tn_role_create(h_env *e, const char *role, const char *extra)
{
	PGresult *r = PQexec(e->db, "SET client_min_messages = warning");
	PQclear(r);
	char q[512]; /* role names are at most 63 bytes */
	snprintf(q, sizeof q, "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '%.63s') "
	         "THEN EXECUTE 'DROP OWNED BY %.63s'; EXECUTE 'DROP ROLE %.63s'; END IF; END $$", role,
	         role, role);
	r = PQexec(e->db, q);
	PQclear(r); /* owned in another database: left for DROP ROLE to say */
	tn_sql(e, "CREATE ROLE %s LOGIN %s", role, extra ? extra : "");
}

/* team-a (control topic ctl.a, biz shop, forward topic orders) and team-b
 * (control topics ^ctl\.b\., biz pay, forward topic payments). */
static inline void tn_add_two(h_env *e)
{
	const char *a[] = {"tenant", "add", "team-a", "--control-topic", "ctl.a", "--biz", "shop",
	                   "--forward-topic", "orders", NULL};
	const char *b[] = {"tenant", "add", "team-b", "--control-topic", "^ctl\\.b\\.", "--biz",
	                   "pay", "--forward-topic", "payments", NULL};
	cr_assert_eq(tn_run(e, a), 0, "%s", tn_err);
	cr_assert_eq(tn_run(e, b), 0, "%s", tn_err);
}

static inline void tn_role_drop(h_env *e, const char *role)
{
	tn_sql(e, "DROP OWNED BY %s", role);
	tn_sql(e, "DROP ROLE %s", role);
}

#endif
