/* test_tenants_hostile.c: a team's PostgreSQL role that tries to get out
 * of its tenant (docs/tenants.md, Each team's PostgreSQL role). Role ra,
 * granted team-a, owns a schema of its own and puts it first in its
 * search_path, then shadows each function and operator the policies'
 * functions use (array_agg, = on text and on name, ~, cardinality, left,
 * pg_has_role; one at a time and all at once) and tries to read team-b's
 * rows in every table, to update them, to move its own rows to team-b and
 * to write history onto team-b's messages, with SQL and with txhub's own
 * commands: it sees and changes its own tenant's rows only, and nothing of
 * team-b changes. Every function in schema txhub runs with a fixed
 * search_path, also after a later migration remakes the view. History a
 * role forged before the fix shows neither to `txhub show` nor to any role.
 * The console's message page is tested in test_console_tenants.c. */
#include <criterion/criterion.h>

#include "tenants_common.h"

TestSuite(tenants_hostile, .timeout = 180);

typedef struct {
	h_env e;
	char ra[96], rb[96];
	PGconn *a; /* ra's session */
} fixture;

/* Two tenants (team-b's control topics a pattern), rows of each in every
 * table a role may read, and ra with more privileges than a grant gives
 * (SELECT on every table, UPDATE on every column of the view and its
 * table, as an operator's script might give): the policies alone keep it
 * in team-a. */
static void setup(fixture *f, const char *name)
{
	h_setup(&f->e, name);
	h_env *e = &f->e;
	tn_role_create(e, tn_role(e, "ra", f->ra, sizeof f->ra), NULL);
	tn_role_create(e, tn_role(e, "rb", f->rb, sizeof f->rb), NULL);
	tn_add_two(e);
	tn_sql(e, "INSERT INTO txhub.messages (biz_id, message_key, status, send_status, payload, "
	          "forward_topic, src_topic, src_partition, src_offset, tenant) VALUES "
	          "('shop','a1','prepared',NULL,'x','orders','ctl.a',0,1,'team-a'),"
	          "('shop','a2','committed','failed','x','orders','ctl.a',0,2,'team-a'),"
	          "('pay','b1','prepared',NULL,'y','payments','ctl.b.x',0,1,'team-b'),"
	          "('pay','b2','committed','failed','y','payments','ctl.b.x',0,2,'team-b')");
	tn_sql(e, "INSERT INTO txhub.history (biz_id, message_key, event, detail, tenant) VALUES "
	          "('shop','a1','checkback','HTTP 500','team-a'),('shop','a1','checkback','old',NULL),"
	          "('pay','b1','checkback','HTTP 503','team-b'),('pay','b1','checkback','old',NULL)");
	tn_sql(e, "INSERT INTO txhub.rejected (src_topic, src_partition, src_offset, reason, tenant) "
	          "VALUES ('ctl.a',0,9,'bad','team-a'),('ctl.b.x',0,9,'bad','team-b')");
	tn_sql(e, "INSERT INTO txhub.conflicts (biz_id, message_key, arrived, met_status, tenant) "
	          "VALUES ('shop','a1','rollback','prepared','team-a'),"
	          "('pay','b1','rollback','prepared','team-b')");
	tn_sql(e, "INSERT INTO txhub.partitions (topic, partition, epoch, owner, next_offset) VALUES "
	          "('ctl.a',0,1,'h/1',10),('ctl.b.x',0,1,'h/1',10)");
	tn_sql(e, "INSERT INTO txhub.gaps (topic, partition, kind, from_offset, to_offset, "
	          "resume_offset, detected_by) VALUES ('ctl.a',0,'lost',1,2,2,'h/1'),"
	          "('ctl.b.x',0,'lost',1,2,2,'h/1')");
	tn_sql(e, "INSERT INTO txhub.forward_marks (topic, partition, upto) VALUES ('ctl.a',0,1),"
	          "('ctl.b.x',0,1)");
	tn_sql(e, "INSERT INTO txhub.dead_letter_pending (biz_id, message_key, parked_at, src_topic, "
	          "src_partition, topic, partition, \"offset\") VALUES "
	          "('shop','a2',now(),'ctl.a',0,'dlq',0,1),('pay','b2',now(),'ctl.b.x',0,'dlq',0,2)");
	const char *ga[] = {"tenant", "grant", "team-a", f->ra, NULL};
	const char *gb[] = {"tenant", "grant", "team-b", f->rb, NULL};
	cr_assert_eq(tn_run(e, ga), 0, "%s", tn_err);
	cr_assert_eq(tn_run(e, gb), 0, "%s", tn_err);
	tn_sql(e, "GRANT SELECT ON ALL TABLES IN SCHEMA txhub TO %s", f->ra);
	tn_sql(e, "GRANT UPDATE ON txhub.messages, txhub.message_rows TO %s", f->ra);
	/* "CREATE SCHEMA team_a AUTHORIZATION team_a is enough" */
	tn_sql(e, "CREATE SCHEMA %s AUTHORIZATION %s", f->ra, f->ra);
	char pg[700];
	snprintf(pg, sizeof pg, "%s user=%s", e->conninfo, f->ra);
	f->a = PQconnectdb(pg);
	cr_assert(PQstatus(f->a) == CONNECTION_OK, "%s", PQerrorMessage(f->a));
}

static void teardown(fixture *f)
{
	PQfinish(f->a);
	tn_role_drop(&f->e, f->ra);
	tn_role_drop(&f->e, f->rb);
	h_teardown(&f->e);
}

/* One statement in ra's session: its status and the rows it counted or
 * changed ("" after an error, err holding why). */
static ExecStatusType as_a(fixture *f, const char *sql, char *n, size_t nsz, char *err,
                           size_t errsz)
{
	PGresult *r = PQexec(f->a, sql);
	ExecStatusType st = PQresultStatus(r);
	snprintf(n, nsz, "%s", st == PGRES_TUPLES_OK && PQntuples(r) == 1 ? PQgetvalue(r, 0, 0)
	                       : st == PGRES_COMMAND_OK ? PQcmdTuples(r) : "");
	snprintf(err, errsz, "%s", PQresultErrorMessage(r));
	PQclear(r);
	return st;
}

static void as_a_ok(fixture *f, const char *sql)
{
	char n[32], err[1024];
	ExecStatusType st = as_a(f, sql, n, sizeof n, err, sizeof err);
	cr_assert(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql, err);
}

/* What ra should see of each table: team-a's rows (history: a1's two, the
 * one of no tenant included); the tokens and the tenants' change history
 * are the owner's alone. */
static const struct {
	const char *table;
	const char *rows;
} seen[] = {
	{"messages", "2"},       {"message_rows", "2"},  {"history", "2"},
	{"rejected", "1"},       {"conflicts", "1"},     {"partitions", "1"},
	{"gaps", "1"},           {"forward_marks", "1"}, {"dead_letter_pending", "1"},
	{"tenants", "1"},        {"tenant_grants", "1"}, {"tenant_history", "0"},
	{"tenant_tokens", "0"},
};

/* Everything ra tries, with the shadows of `what` in place: it counts
 * team-a's rows only in every table, updates its own rows only (through
 * the view too: its trigger's = is pg_catalog's), and can neither move a
 * row to team-b nor write history onto team-b's message. Nothing of the
 * database changes (the updates write the values the rows had). */
static void try_everything(fixture *f, const char *what)
{
	char before[64], after[64], n[32], err[1024], q[256];
	tn_checksum(&f->e, before, sizeof before);
	for (size_t i = 0; i < sizeof seen / sizeof *seen; i++) {
		snprintf(q, sizeof q, "SELECT count(*) FROM txhub.%s", seen[i].table);
		cr_expect_eq(as_a(f, q, n, sizeof n, err, sizeof err), PGRES_TUPLES_OK, "%s: %s: %s",
		             what, q, err);
		cr_expect_str_eq(n, seen[i].rows, "%s: ra counts %s rows of txhub.%s", what, n,
		                 seen[i].table);
	}
	static const char *const own[] = {
		"UPDATE txhub.message_rows SET check_attempts = check_attempts",
		"UPDATE txhub.messages SET check_attempts = check_attempts",
	};
	for (size_t i = 0; i < sizeof own / sizeof *own; i++) {
		cr_expect_eq(as_a(f, own[i], n, sizeof n, err, sizeof err), PGRES_COMMAND_OK, "%s: %s: %s",
		             what, own[i], err);
		cr_expect_str_eq(n, "2", "%s: %s changed %s rows", what, own[i], n);
	}
	static const char *const refused[] = {
		"UPDATE txhub.message_rows SET tenant = 'team-b'",
		"UPDATE txhub.messages SET tenant = 'team-b'",
		/* the forgery of issue 30 §2, and the same naming team-b */
		"INSERT INTO txhub.history (biz_id, message_key, event, detail, actor, tenant) "
		"VALUES ('pay', 'b1', 'resolve', 'forged', 'console:b-admin', 'team-a')",
		"INSERT INTO txhub.history (biz_id, message_key, event, detail, actor, tenant) "
		"VALUES ('pay', 'b1', 'resolve', 'forged', 'console:b-admin', 'team-b')",
	};
	for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
		cr_expect_eq(as_a(f, refused[i], n, sizeof n, err, sizeof err), PGRES_FATAL_ERROR,
		             "%s: %s: allowed (%s rows)", what, refused[i], n);
	tn_checksum(&f->e, after, sizeof after);
	cr_expect_str_eq(after, before, "%s: ra changed the database", what);
}

/* ra's shadows, made in its own schema (first in its path). Bodies use no
 * operator, so that they mean the same whatever is shadowed already. */
static const struct {
	const char *name;
	const char *sql;
} shadows[] = {
	{"array_agg", "CREATE FUNCTION evil_acc(text[], text) RETURNS text[] LANGUAGE sql "
	              "AS $$ SELECT ARRAY['team-a', 'team-b'] $$; "
	              "CREATE AGGREGATE array_agg(text) (sfunc = evil_acc, stype = text[], "
	              "initcond = '{}')"},
	{"= (text, text)", "CREATE FUNCTION evil_eq(text, text) RETURNS boolean LANGUAGE sql "
	                   "AS 'SELECT true'; "
	                   "CREATE OPERATOR = (leftarg = text, rightarg = text, function = evil_eq)"},
	{"= (name, text)", "CREATE FUNCTION evil_eqn(name, text) RETURNS boolean LANGUAGE sql "
	                   "AS 'SELECT true'; "
	                   "CREATE OPERATOR = (leftarg = name, rightarg = text, function = evil_eqn)"},
	{"~", "CREATE FUNCTION evil_re(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT true'; "
	      "CREATE OPERATOR ~ (leftarg = text, rightarg = text, function = evil_re)"},
	{"cardinality", "CREATE FUNCTION cardinality(text[]) RETURNS integer LANGUAGE sql "
	                "AS 'SELECT 1'"},
	{"left", "CREATE FUNCTION \"left\"(text, integer) RETURNS text LANGUAGE sql "
	         "AS $$ SELECT '^'::text $$"},
	{"pg_has_role", "CREATE FUNCTION pg_has_role(oid, text) RETURNS boolean LANGUAGE sql "
	                "AS 'SELECT true'"},
};
#define NSHADOWS (sizeof shadows / sizeof *shadows)

static void shadow(fixture *f, size_t i)
{
	as_a_ok(f, shadows[i].sql);
}

/* ra's schema emptied again (by the owner: ra may not create schemas),
 * its path back to the default. */
static void unshadow(fixture *f)
{
	as_a_ok(f, "RESET search_path");
	tn_sql(&f->e, "DROP SCHEMA %s CASCADE", f->ra);
	tn_sql(&f->e, "CREATE SCHEMA %s AUTHORIZATION %s", f->ra, f->ra);
}

static void shadow_path(fixture *f)
{
	char q[256];
	snprintf(q, sizeof q, "SET search_path = %s, pg_catalog", f->ra);
	as_a_ok(f, q);
}

/* All at once: with cardinality 1, left '^' and ~ true, team-a's control
 * topic would be a pattern matching every topic. */
static void try_every_shadow(fixture *f, const char *what)
{
	shadow_path(f);
	for (size_t i = 0; i < NSHADOWS; i++)
		shadow(f, i);
	try_everything(f, what);
	unshadow(f);
}

Test(tenants_hostile, shadowed_functions_and_operators_give_no_other_tenants_rows)
{
	fixture f;
	setup(&f, "hostile_path");
	try_everything(&f, "no shadow");
	for (size_t i = 0; i < NSHADOWS; i++) {
		shadow_path(&f);
		shadow(&f, i);
		try_everything(&f, shadows[i].name);
		unshadow(&f);
	}
	try_every_shadow(&f, "every shadow");
	teardown(&f);
}

/* The issue's own steps, with txhub's commands: ra keeps the shadowing
 * array_agg in its role's search_path and runs txhub list, status, show
 * and resolve. */
Test(tenants_hostile, txhub_commands_under_a_shadowing_search_path)
{
	fixture f;
	setup(&f, "hostile_cmds");
	h_env *e = &f.e;
	shadow_path(&f);
	shadow(&f, 0);
	char q[256];
	snprintf(q, sizeof q, "ALTER ROLE %s SET search_path = %s, pg_catalog", f.ra, f.ra);
	as_a_ok(&f, q); /* a role may set its own defaults */
	char before[64], after[64];
	tn_checksum(e, before, sizeof before);
	const char *list[] = {"list", "--json", NULL};
	cr_assert_eq(tn_run_as(e, f.ra, list), 0, "%s", tn_err);
	cJSON *d = tn_json();
	cr_expect_eq(cJSON_GetArraySize(d), 2, "ra lists %d messages: %s", cJSON_GetArraySize(d),
	             tn_out);
	const cJSON *m;
	cJSON_ArrayForEach(m, d)
		cr_expect_str_eq(tn_str(m, "tenant"), "team-a", "%s", tn_out);
	cJSON_Delete(d);
	const char *status[] = {"status", "--json", NULL};
	cr_assert_eq(tn_run_as(e, f.ra, status), 0, "%s", tn_err);
	cr_expect_null(strstr(tn_out, "ctl.b.x"), "ra's status shows team-b's partition: %s", tn_out);
	const char *show[] = {"show", "pay", "b1", NULL};
	cr_expect_eq(tn_run_as(e, f.ra, show), 1, "%s", tn_out);
	cr_expect(strstr(tn_err, "no message"), "%s", tn_err);
	const char *resolve[] = {"resolve", "pay", "b1", "--commit", NULL};
	cr_expect_eq(tn_run_as(e, f.ra, resolve), 1, "%s", tn_out);
	cr_expect(strstr(tn_err, "no message"), "%s", tn_err);
	const char *redrive[] = {"redrive", "pay", "b2", NULL};
	cr_expect_eq(tn_run_as(e, f.ra, redrive), 1, "%s", tn_out);
	tn_checksum(e, after, sizeof after);
	cr_expect_str_eq(after, before, "ra changed the database");
	/* its own still works, under the same path */
	const char *own[] = {"resolve", "shop", "a1", "--commit", NULL};
	cr_expect_eq(tn_run_as(e, f.ra, own), 0, "%s", tn_err);
	teardown(&f);
}

/* The functions of schema txhub without search_path pg_catalog, pg_temp,
 * by name. */
static const char *unfixed(h_env *e, char *out, size_t outsz)
{
	return h_query(e, "SELECT coalesce(string_agg(proname, ',' ORDER BY proname), '') "
	                  "FROM pg_proc WHERE pronamespace = 'txhub'::regnamespace AND NOT "
	                  "coalesce('search_path=pg_catalog, pg_temp' = ANY (proconfig), false)",
	               out, outsz);
}

/* Every function of schema txhub runs with search_path pg_catalog, pg_temp,
 * also the view's trigger function after define_messages_view() makes it
 * again (as a migration that adds a column does). */
Test(tenants_hostile, every_function_has_a_fixed_search_path)
{
	h_env e;
	h_setup(&e, "hostile_funcs");
	char buf[1024];
	cr_expect_str_eq(unfixed(&e, buf, sizeof buf), "", "without a search_path: %s", buf);
	cr_assert_gt(h_count(&e, "SELECT count(*) FROM pg_proc WHERE pronamespace = "
	                         "'txhub'::regnamespace"), 5);
	h_exec(e.db, "SELECT txhub.define_messages_view()");
	cr_expect_str_eq(unfixed(&e, buf, sizeof buf), "", "after define_messages_view(): %s", buf);
	h_teardown(&e);
}

/* History a role wrote onto another tenant's message before migration 16
 * (made here by the owner, as the policy no longer lets a role): txhub
 * show leaves it out, for the owner and for team-b's role, and no role
 * reads it; the rows of the message's tenant and of none stay. */
Test(tenants_hostile, forged_history_shows_nowhere)
{
	fixture f;
	setup(&f, "hostile_hist");
	h_env *e = &f.e;
	tn_sql(e, "INSERT INTO txhub.history (biz_id, message_key, event, detail, actor, tenant) "
	          "VALUES ('pay', 'b1', 'resolve', 'forged by a', 'console:b-admin', 'team-a')");
	const char *show[] = {"show", "pay", "b1", "--json", NULL};
	const char *who[] = {NULL, f.rb};
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(tn_run_as(e, who[i], show), 0, "%s", tn_err);
		cr_expect_null(strstr(tn_out, "console:b-admin"), "show as %s: the forged row shows: %s",
		               who[i] ? who[i] : "owner", tn_out);
		cr_expect(strstr(tn_out, "HTTP 503") && strstr(tn_out, "\"old\""), "show as %s: %s",
		          who[i] ? who[i] : "owner", tn_out);
	}
	char n[32], err[1024];
	cr_expect_eq(as_a(&f, "SELECT count(*) FROM txhub.history WHERE biz_id = 'pay'", n, sizeof n,
	                  err, sizeof err), PGRES_TUPLES_OK, "%s", err);
	cr_expect_str_eq(n, "0", "ra reads %s history rows of team-b's message", n);
	/* ra's own history still goes in, with its resolve */
	const char *res[] = {"resolve", "shop", "a1", "--commit", "--reason", "by a", NULL};
	cr_assert_eq(tn_run_as(e, f.ra, res), 0, "%s", tn_err);
	cr_expect_eq(h_count(e, "SELECT count(*) FROM txhub.history WHERE message_key = 'a1' AND "
	                        "event = 'resolve' AND tenant = 'team-a'"), 1);
	teardown(&f);
}

/* A database at version 15 with grants made (the policies and functions of
 * 0010-0015 as they were, row-level security on without
 * dead_letter_pending's) is fixed by `txhub migrate` as a new one is. */
Test(tenants_hostile, migrate_fixes_a_database_at_15)
{
	fixture f;
	setup(&f, "hostile_at15");
	h_env *e = &f.e;
	static const char *const functions[] = {
		"granted_tenants()", "granted_topic(text)", "tenant_list_ok(text[], integer, integer)",
		"history_trace_id()",
	};
	for (size_t i = 0; i < sizeof functions / sizeof *functions; i++)
		tn_sql(e, "ALTER FUNCTION txhub.%s RESET search_path", functions[i]);
	/* 0012's define_messages_view(), and the trigger function it made */
	tn_sql(e, "DO $$ DECLARE b text; BEGIN SELECT prosrc INTO b FROM pg_proc WHERE oid = "
	          "'txhub.define_messages_view()'::regprocedure; EXECUTE format('CREATE OR REPLACE "
	          "FUNCTION txhub.define_messages_view() RETURNS void LANGUAGE plpgsql AS %%L', "
	          "replace(b, 'plpgsql SET search_path = pg_catalog, pg_temp AS $f$', "
	          "'plpgsql AS $f$')); END $$");
	tn_sql(e, "SELECT txhub.define_messages_view()");
	char buf[1024];
	cr_assert_str_eq(unfixed(e, buf, sizeof buf), "define_messages_view,granted_tenants,"
	                 "granted_topic,history_trace_id,messages_write,tenant_list_ok");
	tn_sql(e, "ALTER POLICY tenant_act ON txhub.history "
	          "WITH CHECK (tenant = ANY ((SELECT txhub.granted_tenants())::text[]))");
	tn_sql(e, "ALTER POLICY tenant_read ON txhub.history USING (coalesce(tenant, (SELECT "
	          "m.tenant FROM txhub.messages m WHERE m.biz_id = history.biz_id AND "
	          "m.message_key = history.message_key)) = ANY ((SELECT "
	          "txhub.granted_tenants())::text[]))");
	tn_sql(e, "DROP POLICY tenant_read ON txhub.dead_letter_pending");
	tn_sql(e, "ALTER TABLE txhub.dead_letter_pending DISABLE ROW LEVEL SECURITY");
	/* (and without what came after 16) */
	tn_sql(e, "ALTER TABLE txhub.partitions DROP COLUMN dl_txn_id, DROP COLUMN dl_txn_epoch");
	tn_sql(e, "DELETE FROM txhub.schema_migrations WHERE version >= 16");
	/* it is the database of the issue: the shadowing array_agg works */
	shadow_path(&f);
	shadow(&f, 0);
	char n[32], err[1024];
	cr_assert_eq(as_a(&f, "SELECT count(*) FROM txhub.messages", n, sizeof n, err, sizeof err),
	             PGRES_TUPLES_OK, "%s", err);
	cr_assert_str_eq(n, "4", "the database was not put back to version 15");
	unshadow(&f);
	const char *migrate[] = {"migrate", NULL};
	cr_assert_eq(tn_run(e, migrate), 0, "%s", tn_err);
	cr_assert_eq(h_count(e, "SELECT max(version) FROM txhub.schema_migrations"), 17);
	cr_assert_eq(h_count(e, "SELECT count(*) FROM pg_class WHERE oid = "
	                        "'txhub.dead_letter_pending'::regclass AND relrowsecurity"), 1);
	cr_expect_str_eq(unfixed(e, buf, sizeof buf), "", "without a search_path: %s", buf);
	tn_sql(e, "SELECT txhub.define_messages_view()");
	cr_expect_str_eq(unfixed(e, buf, sizeof buf), "", "after define_messages_view(): %s", buf);
	/* in ra's session of before the migration */
	try_every_shadow(&f, "every shadow, after migrate");
	teardown(&f);
}
