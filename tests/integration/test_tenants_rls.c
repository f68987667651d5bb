/* test_tenants_rls.c: `txhub tenant grant` (docs/tenants.md: Sharing one hub
 * between teams) with real PostgreSQL roles: a team's role runs `txhub
 * list/show/status/resolve/ redrive` and sees and acts on its tenant's rows
 * only; another tenant's row is "not found" and stays as it was; a role without
 * a grant sees nothing or is refused; rows of no tenant are the owner's alone;
 * the hub (the tables' owner) and `txhub migrate` go on working; list --tenant
 * and status --tenant for the owner; roles that could see every row anyway are
 * refused a grant. A hostile role's tricks: test_tenants_hostile.c. */
#include <criterion/criterion.h>
#include <pwd.h>
#include <unistd.h>

#include "tenants_common.h"

TestSuite(tenants_rls);

typedef struct {
	h_env e;
	char ra[96], rb[96], rc[96], rd[96]; /* team-a's, team-b's, no grant, privileges only */
} fixture;

/* Two tenants, their rows in several states, rows of no tenant, history,
 * rejected and conflict rows of each, partitions of each control topic;
 * team-a granted to ra, team-b to rb. */
static void setup(fixture *f, const char *name)
{
	h_setup(&f->e, name);
	h_env *e = &f->e;
	tn_role_create(e, tn_role(e, "ra", f->ra, sizeof f->ra), NULL);
	tn_role_create(e, tn_role(e, "rb", f->rb, sizeof f->rb), NULL);
	tn_role_create(e, tn_role(e, "rc", f->rc, sizeof f->rc), NULL);
	tn_role_create(e, tn_role(e, "rd", f->rd, sizeof f->rd), NULL);
	tn_add_two(e);
	tn_sql(e, "INSERT INTO txhub.messages (biz_id, message_key, status, send_status, payload, "
	          "forward_topic, src_partition, src_offset, tenant) VALUES "
	          "('shop','a1','prepared',NULL,'x','orders',0,1,'team-a'),"
	          "('shop','a2','check_failed',NULL,'x','orders',0,2,'team-a'),"
	          "('shop','a3','committed','failed','x','orders',0,3,'team-a'),"
	          "('pay','b1','prepared',NULL,'y','payments',1,1,'team-b'),"
	          "('pay','b2','check_failed',NULL,'y','payments',1,2,'team-b'),"
	          "('pay','b3','committed','failed','y','payments',1,3,'team-b'),"
	          "('misc','n1','prepared',NULL,'z','other',2,1,NULL),"
	          "('misc','n2','check_failed',NULL,'z','other',2,2,NULL)");
	tn_sql(e, "INSERT INTO txhub.history (biz_id, message_key, event, detail) VALUES "
	          "('shop','a1','checkback','HTTP 500'),('pay','b1','checkback','HTTP 503'),"
	          "('misc','n1','checkback','HTTP 502')");
	tn_sql(e, "INSERT INTO txhub.rejected (src_topic, src_partition, src_offset, reason, tenant) "
	          "VALUES ('ctl.a',0,9,'bad','team-a'),('ctl.b.x',0,9,'bad','team-b'),"
	          "('ctl.b.x',0,10,'bad','team-b'),('other',0,9,'bad',NULL)");
	tn_sql(e, "INSERT INTO txhub.conflicts (biz_id, message_key, arrived, met_status) VALUES "
	          "('shop','a1','rollback','prepared'),('pay','b1','rollback','prepared'),"
	          "('misc','n1','rollback','prepared')");
	tn_sql(e, "INSERT INTO txhub.partitions (topic, partition, epoch, owner, next_offset) VALUES "
	          "('ctl.a',0,1,'h/1',10),('ctl.b.x',0,1,'h/1',10),('other',0,1,'h/1',10)");
	const char *ga[] = {"tenant", "grant", "team-a", f->ra, NULL};
	const char *gb[] = {"tenant", "grant", "team-b", f->rb, "--json", NULL};
	cr_assert_eq(tn_run(e, ga), 0, "%s", tn_err);
	cr_assert_eq(tn_run(e, gb), 0, "%s", tn_err);
	cJSON *d = tn_json();
	cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(d, "already")));
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(d, "row_security_enabled_on")), 0,
	             "the first grant turned it on already");
	cJSON_Delete(d);
	/* rd: every privilege a grant gives, by hand, but no tenant */
	tn_sql(e, "GRANT USAGE ON SCHEMA txhub TO %s", f->rd);
	tn_sql(e, "GRANT SELECT, UPDATE ON ALL TABLES IN SCHEMA txhub TO %s", f->rd);
}

static void teardown(fixture *f)
{
	h_env *e = &f->e;
	tn_role_drop(e, f->ra);
	tn_role_drop(e, f->rb);
	tn_role_drop(e, f->rc);
	tn_role_drop(e, f->rd);
	h_teardown(e);
}

/* The biz_id/message_key of each row a list --json printed, sorted. */
static void keys_of(const cJSON *rows, char *out, size_t outsz)
{
	char *keys[64];
	int n = 0;
	const cJSON *r;
	cJSON_ArrayForEach(r, rows) {
		if (n < 64)
			keys[n++] = (char *)tn_str(r, "message_key");
	}
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && strcmp(keys[j - 1], keys[j]) > 0; j--) {
			char *t = keys[j];
			keys[j] = keys[j - 1];
			keys[j - 1] = t;
		}
	out[0] = '\0';
	for (int i = 0; i < n; i++)
		snprintf(out + strlen(out), outsz - strlen(out), "%s%s", i ? "," : "", keys[i]);
}

static void list_as(h_env *e, const char *role, const char *const *extra, char *keys, size_t sz)
{
	const char *args[16] = {"list", "--json"};
	int n = 2;
	for (; extra && *extra; extra++)
		args[n++] = *extra;
	args[n] = NULL;
	int rc = tn_run_as(e, role, args);
	cr_assert_eq(rc, 0, "list as %s: exit %d: %s", role ? role : "owner", rc, tn_err);
	cJSON *d = tn_json();
	keys_of(d, keys, sz);
	cJSON_Delete(d);
}

Test(tenants_rls, each_role_sees_its_tenants_rows)
{
	fixture f;
	setup(&f, "rls_see");
	h_env *e = &f.e;
	char keys[512];
	list_as(e, f.ra, NULL, keys, sizeof keys);
	cr_assert_str_eq(keys, "a1,a2,a3");
	list_as(e, f.rb, NULL, keys, sizeof keys);
	cr_assert_str_eq(keys, "b1,b2,b3");
	list_as(e, NULL, NULL, keys, sizeof keys);
	cr_assert_str_eq(keys, "a1,a2,a3,b1,b2,b3,n1,n2", "the owner sees every row");
	/* privileges alone show nothing */
	list_as(e, f.rd, NULL, keys, sizeof keys);
	cr_assert_str_eq(keys, "");
	/* no privileges at all: refused */
	const char *list[] = {"list", NULL};
	cr_assert_eq(tn_run_as(e, f.rc, list), 1);
	cr_assert(strstr(tn_err, "permission denied"), "%s", tn_err);

	/* show: its own row with its history; another tenant's, or none's, not found */
	const char *show_a[] = {"show", "shop", "a1", "--json", NULL};
	cr_assert_eq(tn_run_as(e, f.ra, show_a), 0, "%s", tn_err);
	cJSON *d = tn_json();
	char *text = cJSON_PrintUnformatted(d);
	cr_assert(strstr(text, "HTTP 500"), "its check-back history is missing: %s", text);
	free(text);
	cJSON_Delete(d);
	const char *show_b[] = {"show", "pay", "b1", NULL}, *show_n[] = {"show", "misc", "n1", NULL};
	cr_assert_eq(tn_run_as(e, f.ra, show_b), 1);
	cr_assert(strstr(tn_err, "no message"), "%s", tn_err);
	cr_assert_eq(tn_run_as(e, f.ra, show_n), 1);
	cr_assert_eq(tn_run_as(e, f.rb, show_b), 0, "%s", tn_err);
	cr_assert(strstr(tn_out, "HTTP 503") && !strstr(tn_out, "HTTP 500"), "%s", tn_out);

	/* status: its counts, its rejected and conflict rows, its partitions */
	const char *status[] = {"status", "--json", NULL};
	cr_assert_eq(tn_run_as(e, f.rb, status), 0, "%s", tn_err);
	d = tn_json();
	const cJSON *m = cJSON_GetObjectItem(d, "messages");
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(m, "prepared")), 1);
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(m, "check_failed")), 1);
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(m, "committed")), 1);
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(d, "rejected")), 2);
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(d, "conflicts")), 1);
	const cJSON *p;
	int rows = 0;
	cJSON_ArrayForEach(p, cJSON_GetObjectItem(d, "partitions")) {
		if (cJSON_IsNull(cJSON_GetObjectItem(p, "epoch")))
			continue; /* the broker's partitions of the hub's own control topic */
		cr_assert_str_eq(tn_str(p, "topic"), "ctl.b.x");
		rows++;
	}
	cr_assert_eq(rows, 1);
	cJSON_Delete(d);
	teardown(&f);
}

Test(tenants_rls, a_role_acts_on_its_rows_only)
{
	fixture f;
	setup(&f, "rls_act");
	h_env *e = &f.e;
	char before[64], after[64];
	tn_checksum(e, before, sizeof before);
	const char *const refused[][8] = {
		{"resolve", "pay", "b1", "--commit", NULL},
		{"resolve", "misc", "n1", "--rollback", NULL},
		{"redrive", "pay", "b2", NULL},
		{"redrive", "pay", "b3", NULL},
		{"redrive", "misc", "n2", NULL},
	};
	for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
		int rc = tn_run_as(e, f.ra, refused[i]);
		cr_expect_eq(rc, 1, "case %zu: exit %d: %s", i, rc, tn_err);
		cr_expect(strstr(tn_err, "no message"), "case %zu: %s", i, tn_err);
	}
	/* a role without the grant is refused too */
	const char *rd_resolve[] = {"resolve", "shop", "a1", "--commit", NULL};
	cr_assert_eq(tn_run_as(e, f.rd, rd_resolve), 1, "%s", tn_err);
	cr_assert_eq(tn_run_as(e, f.rc, rd_resolve), 1, "%s", tn_err);
	tn_checksum(e, after, sizeof after);
	cr_assert_str_eq(before, after, "a refused action changed something");

	/* its own: done, recorded with the operating-system user and the tenant */
	const char *res[] = {"resolve", "shop", "a1", "--commit", "--reason", "by team a", NULL};
	cr_assert_eq(tn_run_as(e, f.ra, res), 0, "%s", tn_err);
	const char *red[] = {"redrive", "shop", "a2", NULL};
	cr_assert_eq(tn_run_as(e, f.ra, red), 0, "%s", tn_err);
	const char *all[] = {"redrive", "--all-failed", "--json", NULL};
	cr_assert_eq(tn_run_as(e, f.ra, all), 0, "%s", tn_err);
	cJSON *d = tn_json();
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(d, "send_failed")), 1, "%s", tn_out);
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(d, "check_failed")), 0, "%s", tn_out);
	cJSON_Delete(d);
	char buf[512];
	cr_assert_str_eq(h_query(e, "SELECT string_agg(message_key || '=' || status || '/' || "
	                            "coalesce(send_status, '-'), ',' ORDER BY message_key) "
	                            "FROM txhub.messages", buf, sizeof buf),
	                 "a1=committed/pending,a2=prepared/-,a3=committed/pending,b1=prepared/-,"
	                 "b2=check_failed/-,b3=committed/failed,n1=prepared/-,n2=check_failed/-");
	const struct passwd *pw = getpwuid(geteuid());
	char q[512];
	snprintf(q, sizeof q, "SELECT count(*) FROM txhub.history WHERE tenant = 'team-a' AND "
	         "actor = '%s' AND event IN ('resolve', 'redrive')", pw ? pw->pw_name : "");
	cr_assert_eq(h_count(e, q), 3);
	/* a role can neither move a row to another tenant nor rewrite its payload */
	char pg[700];
	snprintf(pg, sizeof pg, "%s user=%s", e->conninfo, f.ra);
	PGconn *c = PQconnectdb(pg);
	cr_assert(PQstatus(c) == CONNECTION_OK);
	static const char *const writes[] = {
		"UPDATE txhub.messages SET tenant = 'team-b' WHERE message_key = 'a1'",
		"UPDATE txhub.messages SET payload = 'evil' WHERE message_key = 'a1'",
		"UPDATE txhub.messages SET forward_topic = 'payments' WHERE message_key = 'a1'",
		"DELETE FROM txhub.messages WHERE message_key = 'a1'",
		"INSERT INTO txhub.history (biz_id, message_key, event, tenant) "
		"VALUES ('pay', 'b1', 'x', 'team-b')",
		"SELECT * FROM txhub.tenant_tokens",
		"SELECT * FROM txhub.tenant_history",
	};
	for (size_t i = 0; i < sizeof writes / sizeof *writes; i++) {
		PGresult *r = PQexec(c, writes[i]);
		cr_expect(PQresultStatus(r) == PGRES_FATAL_ERROR, "%s: allowed", writes[i]);
		PQclear(r);
	}
	/* and sees its own tenant's rules only */
	PGresult *r = PQexec(c, "SELECT string_agg(name, ',') FROM txhub.tenants");
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(c));
	cr_assert_str_eq(PQgetvalue(r, 0, 0), "team-a");
	PQclear(r);
	PQfinish(c);
	teardown(&f);
}

/* Row-level security on, the hub (owner of the tables) still stores,
 * forwards and migrates as before. */
Test(tenants_rls, the_owner_is_not_restricted)
{
	fixture f;
	setup(&f, "rls_owner");
	h_env *e = &f.e;
	cr_assert_eq(h_count(e, "SELECT count(*) FROM pg_class WHERE relnamespace = "
	                        "'txhub'::regnamespace AND relname IN ('message_rows', 'history', "
	                        "'rejected', 'conflicts', 'partitions', 'gaps') AND relrowsecurity"), 6);
	const char *migrate[] = {"migrate", NULL};
	cr_assert_eq(tn_run(e, migrate), 0, "%s", tn_err);
	pid_t hub = h_hub_start(e, NULL);
	h_send_str(e, 0, "o-1", "{\"type\":\"prepare\",\"biz_id\":\"hub\",\"message_key\":\"o-1\","
	                        "\"payload\":\"p\",\"forward\":{\"topic\":\"rls.out\"}}");
	h_send_str(e, 0, "o-1", "{\"type\":\"commit\",\"biz_id\":\"hub\",\"message_key\":\"o-1\"}");
	h_flush();
	cr_assert(h_wait(e, "SELECT status || '/' || send_status FROM txhub.messages WHERE "
	                    "message_key = 'o-1'", "committed/sent", 30000));
	cr_assert_eq(h_hub_stop(hub), 0);
	teardown(&f);
}

/* Roles that could see every row, or make themselves such a role, are
 * refused a grant, and the refusal changes nothing: a member of the
 * tables' owner (txhub, in the tests) of any kind, NOINHERIT (it may still
 * SET ROLE txhub) or through another role; a superuser, a role with
 * BYPASSRLS or CREATEROLE, and a member of such a role. */
Test(tenants_rls, roles_that_could_see_everything_are_refused)
{
	fixture f;
	setup(&f, "rls_refuse");
	h_env *e = &f.e;
	static const struct {
		const char *suffix, *attrs, *why;
	} roles[] = {
		{"rs", "SUPERUSER", "superuser"},
		{"rm", "IN ROLE txhub", "owner"},
		{"rn", "NOINHERIT IN ROLE txhub", "owner"},
		{"ri", NULL, "owner"}, /* member of rn, so of txhub through it */
		{"rr", "CREATEROLE", "CREATEROLE"},
		{"ry", "BYPASSRLS", "BYPASSRLS"},
		{"rz", "NOINHERIT", "BYPASSRLS"}, /* member of ry */
	};
	char names[7][96], before[64], after[64];
	for (size_t i = 0; i < 7; i++)
		tn_role_create(e, tn_role(e, roles[i].suffix, names[i], sizeof names[i]), roles[i].attrs);
	tn_sql(e, "GRANT %s TO %s", names[2], names[3]);
	tn_sql(e, "GRANT %s TO %s", names[5], names[6]);
	tn_checksum(e, before, sizeof before);
	for (size_t i = 0; i < 7; i++) {
		const char *g[] = {"tenant", "grant", "team-a", names[i], NULL};
		cr_expect_eq(tn_run(e, g), 1, "%s: granted", names[i]);
		cr_expect(strstr(tn_err, roles[i].why), "%s: %s", names[i], tn_err);
	}
	tn_checksum(e, after, sizeof after);
	cr_expect_str_eq(after, before, "a refused grant changed something");
	cr_expect_eq(h_count(e, "SELECT count(*) FROM txhub.tenant_grants"), 2);
	for (size_t i = 7; i-- > 0;)
		tn_role_drop(e, names[i]);
	teardown(&f);
}

/* The owner's view of one tenant: list --tenant, status --tenant. */
Test(tenants_rls, list_and_status_by_tenant)
{
	fixture f;
	setup(&f, "rls_filter");
	h_env *e = &f.e;
	char keys[512];
	const char *ta[] = {"--tenant", "team-a", NULL}, *tz[] = {"--tenant", "team-z", NULL};
	list_as(e, NULL, ta, keys, sizeof keys);
	cr_assert_str_eq(keys, "a1,a2,a3");
	list_as(e, NULL, tz, keys, sizeof keys);
	cr_assert_str_eq(keys, "");
	const char *list[] = {"list", "--tenant", "team-a", "--json", NULL};
	cr_assert_eq(tn_run(e, list), 0);
	cJSON *d = tn_json();
	cr_assert_str_eq(tn_str(cJSON_GetArrayItem(d, 0), "tenant"), "team-a");
	cJSON_Delete(d);
	const char *status[] = {"status", "--tenant", "team-b", "--json", NULL};
	cr_assert_eq(tn_run(e, status), 0, "%s", tn_err);
	d = tn_json();
	cr_assert_str_eq(tn_str(d, "tenant"), "team-b");
	const cJSON *m = cJSON_GetObjectItem(d, "messages"), *s = cJSON_GetObjectItem(d, "send");
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(m, "prepared")), 1);
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(m, "check_failed")), 1);
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(s, "failed")), 1);
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(d, "parked")), 2);
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(d, "rejected")), 2);
	static const char *const keys_kept[] = {"messages", "send", "parked", "oldest_prepared_s",
	                                        "oldest_pending_send_s", "rejected_1h", "rejected",
	                                        "conflicts_1h", "conflicts", "partitions"};
	for (size_t i = 0; i < sizeof keys_kept / sizeof *keys_kept; i++)
		cr_assert(cJSON_HasObjectItem(d, keys_kept[i]), "status --json lacks %s", keys_kept[i]);
	cJSON_Delete(d);
	const char *all[] = {"status", "--json", NULL};
	cr_assert_eq(tn_run(e, all), 0, "%s", tn_err);
	d = tn_json();
	cr_assert(cJSON_IsNull(cJSON_GetObjectItem(d, "tenant")));
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "messages"),
	                                                      "prepared")), 3);
	cJSON_Delete(d);
	teardown(&f);
}

/* The first grant turns row-level security on while a hub writes: both go
 * on (the ALTERs lock each table for a moment, in the hubs' order). */
Test(tenants_rls, first_grant_while_the_hub_writes)
{
	h_env e;
	h_setup(&e, "rls_live");
	char ra[96];
	tn_role_create(&e, tn_role(&e, "ra", ra, sizeof ra), NULL);
	const char *a[] = {"tenant", "add", "team-a", "--control-topic", "ctl.a", "--biz", "shop",
	                   "--forward-topic", "orders", NULL};
	cr_assert_eq(tn_run(&e, a), 0, "%s", tn_err);
	pid_t hub = h_hub_start(&e, NULL);
	char json[256], key[32];
	for (int i = 0; i < 200; i++) {
		snprintf(key, sizeof key, "o-%d", i);
		snprintf(json, sizeof json, "{\"type\":\"commit\",\"biz_id\":\"live\",\"message_key\":"
		         "\"%s\",\"payload\":\"p\",\"forward\":{\"topic\":\"rls.live\"}}", key);
		h_send_str(&e, -1, key, json);
		if (i == 100) {
			h_flush();
			cr_assert(h_wait(&e, "SELECT count(*) > 0 FROM txhub.messages", "t", 30000));
			const char *grant[] = {"tenant", "grant", "team-a", ra, NULL};
			cr_assert_eq(tn_run(&e, grant), 0, "%s", tn_err);
		}
	}
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", "200",
	                 60000));
	cr_assert_eq(h_hub_stop(hub), 0);
	/* with 0012's forward_marks and 0016's dead_letter_pending */
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM pg_class WHERE relnamespace = "
	                         "'txhub'::regnamespace AND relrowsecurity"), 12);
	tn_role_drop(&e, ra);
	h_teardown(&e);
}
