/* test_tenants.c: `txhub tenant` (docs/tenants.md: Sharing one hub between
 * teams) against a real PostgreSQL: each command's allowed and refused cases,
 * overlap between tenants, every bad argument refused with exit 2 naming it,
 * nothing changed by a refusal, the history (who, when, what), --json shapes,
 * two concurrent adds that overlap, console tokens stored hashed, the hubs'
 * loader keeping the last good rules when a row is edited into nonsense, and
 * migration 0010 on a database with rows (no table rewritten). Row-level
 * security is in test_tenants_rls.c. */
#include <criterion/criterion.h>
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "console_auth.h"
#include "migrate.h"
#include "ops.h"
#include "tenant_ops.h"
#include "tenants.h"
#include "tenants_common.h"

TestSuite(tenants);

static void os_user(char *out, size_t outsz)
{
	const struct passwd *pw = getpwuid(geteuid());
	snprintf(out, outsz, "%s", pw ? pw->pw_name : getenv("USER"));
}

#define ADD_A                                                                              \
	"tenant", "add", "team-a", "--control-topic", "ctl.a", "--biz", "shop", "pay*",       \
	"--forward-topic", "orders", "team-a.out.*", "--checkback-allow", "https://a.example/cb/"

static void add_a(h_env *e)
{
	const char *args[] = {ADD_A, NULL};
	cr_assert_eq(tn_run(e, args), 0, "add: %s", tn_err);
}

typedef struct {
	const char *args[16];
	const char *say; /* a part of the message */
} refusal;

/* `txhub tenant add team-b` with these rules. */
#define ADD_B(ctl, biz, fwd)                                                                  \
	{"tenant", "add", "team-b", "--control-topic", ctl, "--biz", biz, "--forward-topic", fwd, NULL}

static void add_b(h_env *e)
{
	const char *args[] = ADD_B("ctl.b", "b", "o");
	cr_assert_eq(tn_run(e, args), 0, "add: %s", tn_err);
}

/* Each case refused with exit status want and its words on standard
 * error, and nothing changed by any of them. */
static void expect_refused(h_env *e, const refusal *cases, size_t n, int want)
{
	char before[64], after[64];
	tn_checksum(e, before, sizeof before);
	for (size_t i = 0; i < n; i++) {
		int rc = tn_run(e, cases[i].args);
		cr_expect_eq(rc, want, "case %zu: exit %d, stderr %s", i, rc, tn_err);
		cr_expect(strstr(tn_err, cases[i].say), "case %zu: \"%s\" lacks \"%s\"", i, tn_err,
		          cases[i].say);
		cr_expect_eq(tn_out[0], '\0', "case %zu printed %s", i, tn_out);
	}
	tn_checksum(e, after, sizeof after);
	cr_assert_str_eq(before, after, "a refused or bad command changed something");
}

/* ---- add, list, show ---- */

Test(tenants, add_list_show)
{
	h_env e;
	h_setup(&e, "tn_add");
	const char *add[] = {ADD_A, "--max-envelope-bytes", "5000", "--json", NULL};
	cr_assert_eq(tn_run(&e, add), 0, "%s", tn_err);
	cJSON *t = tn_json();
	cr_assert_str_eq(tn_str(t, "name"), "team-a");
	cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(t, "biz_ids")), 2);
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(t, "max_envelope_bytes")), 5000);
	cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(t, "enabled")));
	cJSON_Delete(t);
	char buf[512];
	cr_assert_str_eq(h_query(&e, "SELECT array_to_string(control_topics, ',') || '|' || "
	                              "array_to_string(biz_ids, ',') || '|' || "
	                              "array_to_string(forward_topics, ',') || '|' || "
	                              "array_to_string(checkback_allow, ',') || '|' || "
	                              "max_envelope_bytes FROM txhub.tenants WHERE name = 'team-a'",
	                         buf, sizeof buf),
	                 "ctl.a|shop,pay*|orders,team-a.out.*|https://a.example/cb/|5000");
	const char *add_b[] = {"tenant", "add", "team-b", "--control-topic", "^team-b\\.", "--biz=b1",
	                       "--forward-topic", "b.out", NULL};
	cr_assert_eq(tn_run(&e, add_b), 0, "%s", tn_err);

	const char *list[] = {"tenant", "list", "--json", NULL};
	cr_assert_eq(tn_run(&e, list), 0, "%s", tn_err);
	cJSON *l = tn_json();
	cr_assert_eq(cJSON_GetArraySize(l), 2);
	static const char *const keys[] = {"name", "control_topics", "biz_ids", "forward_topics",
	                                   "checkback_allow", "max_envelope_bytes", "enabled",
	                                   "created_at", "updated_at", "roles"};
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
		cr_assert(cJSON_HasObjectItem(cJSON_GetArrayItem(l, 1), keys[i]), "list lacks %s", keys[i]);
	cr_assert_str_eq(tn_str(cJSON_GetArrayItem(l, 1), "name"), "team-b");
	cr_assert(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(l, 1), "max_envelope_bytes")));
	cJSON_Delete(l);

	tn_sql(&e, "INSERT INTO txhub.messages (biz_id, message_key, status, send_status, "
	           "src_partition, src_offset, tenant) VALUES ('shop','1','prepared',NULL,0,1,'team-a'),"
	           "('shop','2','committed','sent',0,2,'team-a'),('shop','3','committed','failed',0,3,"
	           "'team-a'),('b1','1','prepared',NULL,0,4,'team-b'),('x','1','prepared',NULL,0,5,NULL)");
	const char *show[] = {"tenant", "show", "team-a", "--json", NULL};
	cr_assert_eq(tn_run(&e, show), 0, "%s", tn_err);
	cJSON *s = tn_json();
	cr_assert_str_eq(tn_str(cJSON_GetObjectItem(s, "tenant"), "name"), "team-a");
	const cJSON *m = cJSON_GetObjectItem(s, "messages"), *snd = cJSON_GetObjectItem(s, "send");
	cr_assert_eq(cJSON_GetArraySize(m), OPS_NSTATUS);
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(m, "prepared")), 1);
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(m, "committed")), 2);
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(m, "check_failed")), 0);
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(snd, "failed")), 1);
	cr_assert_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(snd, "sent")), 1);
	const cJSON *h = cJSON_GetObjectItem(s, "history");
	cr_assert_eq(cJSON_GetArraySize(h), 1);
	char user[128];
	os_user(user, sizeof user);
	cr_assert_str_eq(tn_str(cJSON_GetArrayItem(h, 0), "action"), "add");
	cr_assert_str_eq(tn_str(cJSON_GetArrayItem(h, 0), "actor"), user);
	cr_assert_not_null(tn_str(cJSON_GetArrayItem(h, 0), "at"));
	cr_assert_geq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(h, 0), "changes")), 5);
	cr_assert(cJSON_IsArray(cJSON_GetObjectItem(s, "grants")));
	cr_assert(cJSON_IsArray(cJSON_GetObjectItem(s, "tokens")));
	cJSON_Delete(s);
	/* the text form names the rules and the history */
	const char *show_text[] = {"tenant", "show", "team-a", NULL};
	cr_assert_eq(tn_run(&e, show_text), 0, "%s", tn_err);
	cr_assert(strstr(tn_out, "team-a.out.*") && strstr(tn_out, "add") && strstr(tn_out, user),
	          "%s", tn_out);
	h_teardown(&e);
}

/* ---- overlap ---- */


Test(tenants, overlapping_adds_refused_naming_the_other)
{
	h_env e;
	h_setup(&e, "tn_overlap");
	add_a(&e);
	const char *pat[] = {"tenant", "add", "team-p", "--control-topic", "^team-p\\.", "--biz", "p",
	                     "--forward-topic", "p.out", NULL};
	cr_assert_eq(tn_run(&e, pat), 0, "%s", tn_err);
	const refusal cases[] = {
		/* biz ids: exact vs exact, exact vs prefix, prefix vs exact, prefix vs prefix */
		{ADD_B("ctl.b", "shop", "o"), "--biz: overlaps tenant team-a"},
		{ADD_B("ctl.b", "pay-eu", "o"), "--biz: overlaps tenant team-a"},
		{ADD_B("ctl.b", "sh*", "o"), "--biz: overlaps tenant team-a"},
		{ADD_B("ctl.b", "pa*", "o"), "--biz: overlaps tenant team-a"},
		/* control topics: name vs name, name vs pattern, pattern vs pattern */
		{ADD_B("ctl.a", "b", "o"), "--control-topic: overlaps tenant team-a"},
		{ADD_B("team-p.x", "b", "o"), "--control-topic: overlaps tenant team-p"},
		{ADD_B("^ctl\\.", "b", "o"), "--control-topic: overlaps tenant team-a"},
		{ADD_B("^team-p", "b", "o"), "--control-topic: overlaps tenant team-p"},
		/* forwarding into another's control topic, or another forwarding into ours */
		{ADD_B("other.b", "b", "ctl.*"), "--forward-topic: overlaps tenant team-a"},
		{ADD_B("p.out", "b", "o"), "--control-topic: overlaps tenant team-p"},
		/* the name */
		{{"tenant", "add", "team-a", "--control-topic", "ctl.z", "--biz", "z",
		  "--forward-topic", "o", NULL}, "exists already"},
	};
	expect_refused(&e, cases, sizeof cases / sizeof *cases, 1);
	/* apart: accepted */
	const char *ok[] = {"tenant", "add", "team-b", "--control-topic", "^team-q\\.", "--biz",
	                    "shops", "paz", "--forward-topic", "orders", NULL};
	cr_assert_eq(tn_run(&e, ok), 0, "%s", tn_err);
	h_teardown(&e);
}

/* ---- bad arguments ---- */

Test(tenants, bad_arguments_exit_2_naming_them)
{
	h_env e;
	h_setup(&e, "tn_bad");
	add_a(&e);
	const refusal cases[] = {
		{{"tenant", NULL}, "needs add, set"},
		{{"tenant", "frob", NULL}, "unknown tenant command"},
		{{"tenant", "add", "Team", "--control-topic", "c", "--biz", "b", "--forward-topic", "o",
		  NULL}, "NAME"},
		{{"tenant", "add", "t", "--control-topic", "bad topic", "--biz", "b", "--forward-topic",
		  "o", NULL}, "--control-topic"},
		{{"tenant", "add", "t", "--control-topic", "^(", "--biz", "b", "--forward-topic", "o",
		  NULL}, "--control-topic"},
		{{"tenant", "add", "t", "--control-topic", "team-t.*", "--biz", "b", "--forward-topic",
		  "o", NULL}, "--control-topic"},
		{{"tenant", "add", "t", "--control-topic", "c", "^c", "--biz", "b", "--forward-topic",
		  "o", NULL}, "--control-topic"},
		{{"tenant", "add", "t", "--control-topic", "c", "--biz", "a*b", "--forward-topic", "o",
		  NULL}, "--biz"},
		{{"tenant", "add", "t", "--control-topic", "c", "--biz", "a**", "--forward-topic", "o",
		  NULL}, "--biz"},
		{{"tenant", "add", "t", "--control-topic", "c", "--biz", "b", "--forward-topic", "__x",
		  NULL}, "--forward-topic"},
		{{"tenant", "add", "t", "--control-topic", "c", "--biz", "b", "--forward-topic", "*",
		  NULL}, "--forward-topic"},
		{{"tenant", "add", "t", "--control-topic", "c", "--biz", "b", "--forward-topic", "c",
		  NULL}, "--forward-topic"},
		{{"tenant", "add", "t", "--control-topic", "c", "--biz", "b", "--forward-topic", "o",
		  "--checkback-allow", "ftp://x.example/", NULL}, "--checkback-allow"},
		{{"tenant", "add", "t", "--control-topic", "c", "--biz", "b", "--forward-topic", "o",
		  "--checkback-allow", "http://u@x.example/", NULL}, "--checkback-allow"},
		{{"tenant", "add", "t", "--control-topic", "c", "--biz", "b", "--forward-topic", "o",
		  "--max-envelope-bytes", "0", NULL}, "--max-envelope-bytes"},
		{{"tenant", "add", "t", "--control-topic", "c", "--biz", "b", "--forward-topic", "o",
		  "--max-envelope-bytes", "12k", NULL}, "--max-envelope-bytes"},
		{{"tenant", "add", "t", "--control-topic", "c", "--biz", "b", NULL}, "--forward-topic"},
		{{"tenant", "add", "t", "--control-topic", "c", "--biz", "b", "--forward-topic", "o",
		  "--enable", NULL}, "--enable"},
		{{"tenant", "add", "t", "--control-topic", "c", "--biz", "b", "--forward-topic", "o",
		  "--max-envelope-bytes", "10", "--max-envelope-bytes", "20", NULL},
		 "--max-envelope-bytes given twice"},
		{{"tenant", "add", "t", "--control-topic", "c", "--biz", "b", "--biz", "b",
		  "--forward-topic", "o", NULL}, "--biz: \"b\" given twice"},
		{{"tenant", "set", "team-a", "--checkback-allow", "none", "--checkback-allow",
		  "https://a.example/x/", NULL}, "--checkback-allow: none empties the list"},
		{{"tenant", "set", "team-a", "--checkback-allow", "https://a.example/x/", "none", NULL},
		 "--checkback-allow: none empties the list"},
		{{"tenant", "add", "t", "--control-topic", "c", "--biz", "b", "--forward-topic", "o",
		  "--frob", NULL}, "--frob"},
		{{"tenant", "set", "team-a", NULL}, "needs something to change"},
		{{"tenant", "set", "team-a", "--enable", "--disable", NULL}, "--enable and --disable"},
		{{"tenant", "set", "team-a", "--biz", "x*y", NULL}, "--biz"},
		{{"tenant", "set", "team-a", "--forward-topic", "ctl.a", NULL}, "--forward-topic"},
		{{"tenant", "remove", NULL}, "needs NAME"},
		{{"tenant", "remove", "team-a", "team-b", NULL}, "unexpected argument"},
		{{"tenant", "show", "TEAM", NULL}, "NAME"},
		{{"tenant", "grant", "team-a", NULL}, "needs NAME and ROLE"},
		{{"tenant", "grant", "team-a", "a\x01", NULL}, "ROLE"},
		{{"tenant", "token", "team-a", "--biz", "x", NULL}, "does not apply"},
		{{"list", "--tenant", "Team A", NULL}, "--tenant"},
		{{"status", "--tenant", "", NULL}, "--tenant"},
	};
	expect_refused(&e, cases, sizeof cases / sizeof *cases, 2);
	h_teardown(&e);
}

Test(tenants, unknown_tenant_exit_1)
{
	h_env e;
	h_setup(&e, "tn_unknown");
	add_a(&e);
	char role[96];
	tn_role_create(&e, tn_role(&e, "u", role, sizeof role), NULL);
	const refusal cases[] = {
		{{"tenant", "set", "nobody", "--disable", NULL}, "no tenant nobody"},
		{{"tenant", "remove", "nobody", NULL}, "no tenant nobody"},
		{{"tenant", "show", "nobody", NULL}, "no tenant nobody"},
		{{"tenant", "grant", "nobody", role, NULL}, "no tenant nobody"},
		{{"tenant", "token", "nobody", NULL}, "no tenant nobody"},
		{{"tenant", "grant", "team-a", "no_such_role_x", NULL}, "no PostgreSQL role"},
		{{"tenant", "grant", "team-a", "txhub", NULL}, "role txhub is the owner of txhub's tables"},
	};
	expect_refused(&e, cases, sizeof cases / sizeof *cases, 1);
	tn_role_drop(&e, role);
	h_teardown(&e);
}

/* ---- set and remove ---- */

Test(tenants, set_changes_what_is_given_with_history)
{
	h_env e;
	h_setup(&e, "tn_set");
	add_a(&e);
	add_b(&e);
	const char *set[] = {"tenant", "set", "team-a", "--biz", "shop", "pay*", "extra",
	                     "--max-envelope-bytes", "1000", "--disable", "--json", NULL};
	cr_assert_eq(tn_run(&e, set), 0, "%s", tn_err);
	cJSON *d = tn_json();
	const cJSON *changed = cJSON_GetObjectItem(d, "changed");
	cr_assert_eq(cJSON_GetArraySize(changed), 3, "%s", tn_out);
	cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetArrayItem(changed, 0)), "biz_ids");
	cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "tenant"), "enabled")));
	cJSON_Delete(d);
	char buf[512];
	cr_assert_str_eq(h_query(&e, "SELECT array_to_string(biz_ids, ',') || '|' || "
	                              "array_to_string(forward_topics, ',') || '|' || enabled || '|' || "
	                              "max_envelope_bytes FROM txhub.tenants WHERE name = 'team-a'",
	                         buf, sizeof buf),
	                 "shop,pay*,extra|orders,team-a.out.*|false|1000");
	cr_assert_str_eq(h_query(&e, "SELECT before->>'enabled' || '|' || (after->>'enabled') || '|' "
	                              "|| (after->'biz_ids')::text FROM txhub.tenant_history "
	                              "WHERE tenant = 'team-a' AND action = 'set'", buf, sizeof buf),
	                 "true|false|[\"shop\", \"pay*\", \"extra\"]");
	/* the same values again: nothing written */
	char before[64], after[64];
	tn_checksum(&e, before, sizeof before);
	const char *same[] = {"tenant", "set", "team-a", "--biz", "shop", "pay*", "extra", "--json",
	                      NULL};
	cr_assert_eq(tn_run(&e, same), 0, "%s", tn_err);
	d = tn_json();
	cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(d, "changed")), 0);
	cJSON_Delete(d);
	/* refused: an overlap with team-b, forwarding into its own control topic */
	const char *overlap[] = {"tenant", "set", "team-a", "--biz", "b", NULL};
	cr_assert_eq(tn_run(&e, overlap), 1, "%s", tn_err);
	cr_assert(strstr(tn_err, "overlaps tenant team-b"), "%s", tn_err);
	const char *loop[] = {"tenant", "set", "team-a", "--control-topic", "team-a.out.in", NULL};
	cr_assert_eq(tn_run(&e, loop), 2, "%s", tn_err);
	cr_assert(strstr(tn_err, "--forward-topic"), "%s", tn_err);
	tn_checksum(&e, after, sizeof after);
	cr_assert_str_eq(before, after);
	/* none empties the allow list and the cap */
	const char *none[] = {"tenant", "set", "team-a", "--checkback-allow", "none",
	                      "--max-envelope-bytes", "none", "--enable", NULL};
	cr_assert_eq(tn_run(&e, none), 0, "%s", tn_err);
	cr_assert_str_eq(h_query(&e, "SELECT cardinality(checkback_allow) || '|' || "
	                              "coalesce(max_envelope_bytes::text, 'null') || '|' || enabled "
	                              "FROM txhub.tenants WHERE name = 'team-a'", buf, sizeof buf),
	                 "0|null|true");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.tenant_history WHERE tenant = 'team-a'"),
	             3);
	h_teardown(&e);
}

/* A list option given again adds its values (kafka-acls, kubectl and git
 * take repeated options), a list after one option as before, both mixed. */
Test(tenants, list_options_given_again_add_their_values)
{
	h_env e;
	h_setup(&e, "tn_repeat");
	const char *add[] = {"tenant", "add", "team-c", "--control-topic", "c1",
	                     "--biz", "x1", "--forward-topic", "f1", "--control-topic", "c2", "c3",
	                     "--biz", "x2", "--forward-topic", "f2", "--forward-topic", "f3", "f4",
	                     "--checkback-allow", "https://c.example/a/", "--checkback-allow",
	                     "https://c.example/b/", "https://c.example/c/", NULL};
	cr_assert_eq(tn_run(&e, add), 0, "%s", tn_err);
	static const char *q = "SELECT array_to_string(control_topics, ',') || '|' || "
	                       "array_to_string(biz_ids, ',') || '|' || "
	                       "array_to_string(forward_topics, ',') || '|' || "
	                       "array_to_string(checkback_allow, ',') FROM txhub.tenants";
	char buf[512];
	cr_assert_str_eq(h_query(&e, q, buf, sizeof buf),
	                 "c1,c2,c3|x1,x2|f1,f2,f3,f4|https://c.example/a/,https://c.example/b/,"
	                 "https://c.example/c/");
	const char *set[] = {"tenant", "set", "team-c", "--forward-topic", "g1", "--biz", "y",
	                     "--forward-topic", "g2", "g3", "--biz", "z", "--checkback-allow",
	                     "https://c.example/d/", "--checkback-allow", "https://c.example/e/",
	                     "--control-topic", "c4", "--control-topic", "c5", NULL};
	cr_assert_eq(tn_run(&e, set), 0, "%s", tn_err);
	cr_assert_str_eq(h_query(&e, q, buf, sizeof buf),
	                 "c4,c5|y,z|g1,g2,g3|https://c.example/d/,https://c.example/e/");
	/* none alone still empties the allow list */
	const char *none[] = {"tenant", "set", "team-c", "--checkback-allow", "none", NULL};
	cr_assert_eq(tn_run(&e, none), 0, "%s", tn_err);
	cr_assert_eq(h_count(&e, "SELECT cardinality(checkback_allow) FROM txhub.tenants"), 0);
	h_teardown(&e);
}

Test(tenants, remove_keeps_the_messages)
{
	h_env e;
	h_setup(&e, "tn_remove");
	add_a(&e);
	char role[96];
	tn_role_create(&e, tn_role(&e, "r", role, sizeof role), NULL);
	const char *grant[] = {"tenant", "grant", "team-a", role, NULL};
	cr_assert_eq(tn_run(&e, grant), 0, "%s", tn_err);
	const char *token[] = {"tenant", "token", "team-a", NULL};
	cr_assert_eq(tn_run(&e, token), 0, "%s", tn_err);
	tn_sql(&e, "INSERT INTO txhub.messages (biz_id, message_key, status, src_partition, "
	           "src_offset, tenant) VALUES ('shop','1','prepared',0,1,'team-a')");
	const char *rm[] = {"tenant", "remove", "team-a", "--json", NULL};
	cr_assert_eq(tn_run(&e, rm), 0, "%s", tn_err);
	cJSON *d = tn_json();
	cr_assert_str_eq(tn_str(d, "removed"), "team-a");
	cr_assert_str_eq(tn_str(cJSON_GetObjectItem(d, "tenant"), "name"), "team-a");
	cJSON_Delete(d);
	char buf[64];
	cr_assert_str_eq(h_query(&e, "SELECT tenant FROM txhub.messages", buf, sizeof buf), "team-a");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.tenants"), 0);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.tenant_grants"), 0);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.tenant_tokens"), 0);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.tenant_history WHERE action = 'remove' "
	                         "AND before->>'name' = 'team-a'"), 1);
	const char *show[] = {"tenant", "show", "team-a", NULL};
	cr_assert_eq(tn_run(&e, show), 1);
	/* the name is free again; list --tenant still finds the old messages */
	add_a(&e);
	const char *list[] = {"list", "--tenant", "team-a", "--json", NULL};
	cr_assert_eq(tn_run(&e, list), 0, "%s", tn_err);
	d = tn_json();
	cr_assert_eq(cJSON_GetArraySize(d), 1);
	cr_assert_str_eq(tn_str(cJSON_GetArrayItem(d, 0), "tenant"), "team-a");
	cJSON_Delete(d);
	tn_role_drop(&e, role);
	h_teardown(&e);
}

/* ---- two adds at once ---- */

static int wait_exit(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Two adds whose biz ids overlap, started together while the test holds the
 * table so that both have started before either writes: one succeeds, the
 * other is refused. Without the lock in `txhub tenant add` both would read
 * no overlap, then both write. */
Test(tenants, concurrent_overlapping_adds_one_wins)
{
	h_env e;
	h_setup(&e, "tn_race");
	PGconn *hold = PQconnectdb(e.conninfo);
	cr_assert(PQstatus(hold) == CONNECTION_OK);
	PQclear(PQexec(hold, "BEGIN"));
	PGresult *r = PQexec(hold, "LOCK TABLE txhub.tenants IN SHARE ROW EXCLUSIVE MODE");
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s", PQerrorMessage(hold));
	PQclear(r);
	const char *one[] = {"tenant", "add", "team-1", "--control-topic", "ctl.1", "--biz", "shop*",
	                     "--forward-topic", "o", NULL};
	const char *two[] = {"tenant", "add", "team-2", "--control-topic", "ctl.2", "--biz",
	                     "shop-eu", "--forward-topic", "o", NULL};
	pid_t p1 = h_command_start(&e, one, NULL);
	char log1[256], log2[256];
	h_hub_log(log1, sizeof log1, &e);
	pid_t p2 = h_command_start(&e, two, NULL);
	h_hub_log(log2, sizeof log2, &e);
	/* both are waiting for a lock the test holds */
	cr_assert(h_wait(&e, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
	                     "AND wait_event_type = 'Lock' AND application_name = 'txhub'", "2", 20000),
	          "the two adds did not both reach the table");
	PQclear(PQexec(hold, "COMMIT"));
	PQfinish(hold);
	int rc1 = wait_exit(p1), rc2 = wait_exit(p2);
	cr_assert_eq(rc1 + rc2, 1, "exits %d and %d: exactly one add must succeed (logs %s, %s)", rc1,
	             rc2, log1, log2);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.tenants"), 1);
	cr_assert_eq(h_log_lines(rc1 ? log1 : log2, "overlaps tenant team-"), 1);
	h_teardown(&e);
}

/* ---- console tokens ---- */

Test(tenants, token_printed_once_stored_hashed)
{
	h_env e;
	h_setup(&e, "tn_token");
	add_a(&e);
	const char *token[] = {"tenant", "token", "team-a", NULL};
	cr_assert_eq(tn_run(&e, token), 0, "%s", tn_err);
	char tok[256];
	size_t tl = strcspn(tn_out, "\n");
	cr_assert_lt(tl, sizeof tok, "stdout: %.300s", tn_out);
	memcpy(tok, tn_out, tl);
	tok[tl] = '\0';
	cr_assert_eq(strlen(tok), TENANT_TOKEN_LEN, "stdout: %s", tn_out);
	cr_assert_eq(strspn(tok, "0123456789abcdef"), TENANT_TOKEN_LEN);
	/* a second token differs; --json has tenant, id and token */
	const char *again[] = {"tenant", "token", "team-a", "--json", NULL};
	cr_assert_eq(tn_run(&e, again), 0, "%s", tn_err);
	cJSON *d = tn_json();
	cr_assert_str_eq(tn_str(d, "tenant"), "team-a");
	cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(d, "id")));
	cr_assert_str_neq(tn_str(d, "token"), tok);
	cJSON_Delete(d);
	/* stored: its SHA-256, nowhere the token itself */
	unsigned char h[32];
	secret_token_hash(tok, h);
	char hex[65], q[512];
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", h[i]);
	snprintf(q, sizeof q, "SELECT count(*) FROM txhub.tenant_tokens WHERE sha256 = "
	         "decode('%s', 'hex') AND tenant = 'team-a'", hex);
	cr_assert_eq(h_count(&e, q), 1);
	snprintf(q, sizeof q, "SELECT count(*) FROM (SELECT t::text x FROM txhub.tenant_tokens t "
	         "UNION ALL SELECT t::text FROM txhub.tenant_history t UNION ALL SELECT "
	         "encode(sha256, 'escape') FROM txhub.tenant_tokens) a WHERE x LIKE '%%%s%%'", tok);
	cr_assert_eq(h_count(&e, q), 0, "the token is stored in plain");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.tenant_history WHERE action = 'token'"),
	             2);
	/* the lookup the console will call */
	char tenant[64], err[256];
	int64_t tid = 0;
	cr_assert_eq(tenant_token_lookup(e.db, tok, tenant, sizeof tenant, &tid, err, sizeof err), OPS_OK,
	             "%s", err);
	cr_assert_str_eq(tenant, "team-a");
	cr_assert_gt(tid, 0);
	cr_assert_eq(tenant_token_live(e.db, tid, "team-a", err, sizeof err), OPS_OK, "%s", err);
	cr_assert_eq(tenant_token_live(e.db, tid, "team-b", err, sizeof err), OPS_NOT_FOUND);
	tn_sql(&e, "UPDATE txhub.tenants SET enabled = false WHERE name = 'team-a'");
	cr_assert_eq(tenant_token_lookup(e.db, tok, tenant, sizeof tenant, &tid, err, sizeof err),
	             OPS_NOT_FOUND, "a disabled tenant's token still works");
	cr_assert_eq(tenant_token_live(e.db, tid, "team-a", err, sizeof err), OPS_NOT_FOUND);
	tn_sql(&e, "UPDATE txhub.tenants SET enabled = true WHERE name = 'team-a'");
	char wrong[TENANT_TOKEN_LEN + 1];
	snprintf(wrong, sizeof wrong, "%s", tok);
	wrong[0] = wrong[0] == 'a' ? 'b' : 'a';
	cr_assert_eq(tenant_token_lookup(e.db, wrong, tenant, sizeof tenant, &tid, err, sizeof err),
	             OPS_NOT_FOUND);
	cr_assert_eq(tenant_token_lookup(e.db, "", tenant, sizeof tenant, &tid, err, sizeof err),
	             OPS_NOT_FOUND);
	tn_sql(&e, "UPDATE txhub.tenant_tokens SET expires_at = now() - interval '1 second' "
	           "WHERE sha256 = decode('%s', 'hex')", hex);
	cr_assert_eq(tenant_token_lookup(e.db, tok, tenant, sizeof tenant, &tid, err, sizeof err),
	             OPS_NOT_FOUND, "an expired token still works");
	tn_sql(&e, "UPDATE txhub.tenant_tokens SET expires_at = NULL, revoked_at = now() "
	           "WHERE sha256 = decode('%s', 'hex')", hex);
	cr_assert_eq(tenant_token_lookup(e.db, tok, tenant, sizeof tenant, &tid, err, sizeof err),
	             OPS_NOT_FOUND, "a revoked token still works");
	h_teardown(&e);
}

/* ---- the hubs' loader ---- */

Test(tenants, loader_keeps_the_last_good_rules)
{
	h_env e;
	h_setup(&e, "tn_loader");
	add_a(&e);
	add_b(&e);
	tenants *t = tenants_new();
	cr_assert_not_null(t);
	int64_t now = 1000000;
	cr_assert_eq(store_tenants_refresh_on(e.db, t, now), 1);
	cr_assert_eq(tenant_rules_count(tenants_rules(t)), 2);
	cr_assert_eq(store_tenants_refresh_on(e.db, t, now + 1), 0, "not due yet");
	now += TENANTS_REFRESH_MS;
	cr_assert_eq(store_tenants_refresh_on(e.db, t, now), 0, "nothing changed");

	/* rows edited by hand into nonsense the table's checks let through */
	const char *bad[] = {
		"UPDATE txhub.tenants SET biz_ids = '{a*b}' WHERE name = 'team-b'",
		"UPDATE txhub.tenants SET control_topics = '{\"^(\"}' WHERE name = 'team-b'",
		"UPDATE txhub.tenants SET checkback_allow = '{http://u@x.example/}' WHERE name = 'team-b'",
		"UPDATE txhub.tenants SET biz_ids = '{shop}' WHERE name = 'team-b'",
	};
	const char *say[] = {"tenant \"team-b\": biz_ids", "tenant \"team-b\": control_topics",
	                     "tenant \"team-b\": checkback_allow", "overlaps tenant \"team-b\""};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		tn_sql(&e, "BEGIN");
		tn_sql(&e, "%s", bad[i]);
		now += TENANTS_REFRESH_MS;
		cr_assert_eq(store_tenants_refresh_on(e.db, t, now), -1, "case %zu accepted", i);
		cr_assert(strstr(tenants_failing(t), say[i]), "case %zu: %s", i, tenants_failing(t));
		/* never fails open: the last good rules stay */
		const tenant_rules *r = tenants_rules(t);
		cr_assert_eq(tenant_rules_count(r), 2);
		cr_assert_not_null(tenant_rules_by_biz(r, "b"));
		cr_assert_str_eq(tenant_rules_by_topic(r, "ctl.b")->name, "team-b");
		now += TENANTS_REFRESH_MS;
		cr_assert_eq(store_tenants_refresh_on(e.db, t, now), -1, "case %zu: still wrong", i);
		tn_sql(&e, "ROLLBACK");
	}
	tn_sql(&e, "UPDATE txhub.tenants SET biz_ids = '{a*b}', enabled = false WHERE name = 'team-b'");
	now += TENANTS_REFRESH_MS;
	cr_assert_eq(store_tenants_refresh_on(e.db, t, now), 1, "%s", tenants_failing(t) ? tenants_failing(t) : "");
	cr_assert_null(tenants_failing(t));
	cr_assert_eq(tenant_rules_count(tenants_rules(t)), 1, "a disabled row is left out");
	tenants_free(t);
	h_teardown(&e);
}

/* The run loop's hook: a hub logs the count, takes a change within 5 s, and
 * says once that a row went wrong while it keeps the last good rules. */
Test(tenants, hub_takes_changes_and_keeps_good_rules)
{
	h_env e;
	h_setup(&e, "tn_hub");
	pid_t hub = h_hub_start(&e, NULL);
	char log[256];
	h_hub_log(log, sizeof log, &e);
	int waited = 0;
	while (access(log, R_OK) != 0 && waited < 5000) {
		h_pause_ms(20);
		waited += 20;
	}
	while (h_log_lines(log, "tenants: 0 enabled tenant(s) in force") == 0 && waited < 30000) {
		h_pause_ms(100);
		waited += 100;
	}
	cr_assert_eq(h_log_lines(log, "tenants: 0 enabled tenant(s) in force"), 1, "see %s", log);
	add_a(&e);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (h_log_lines(log, "tenants: 1 enabled tenant(s) in force") == 0) {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		cr_assert_lt((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000, 5000,
		             "the hub did not take the new tenant within 5 s (see %s)", log);
		h_pause_ms(50);
	}
	tn_sql(&e, "UPDATE txhub.tenants SET biz_ids = '{a*b}' WHERE name = 'team-a'");
	const char *line = "tenants: tenant \"team-a\": biz_ids: ";
	waited = 0;
	while (h_log_lines(log, line) == 0 && waited < 10000) {
		h_pause_ms(100);
		waited += 100;
	}
	cr_assert_eq(h_log_lines(log, line), 1, "see %s", log);
	cr_assert_eq(h_log_lines(log, "the last good rules stay in force (1 enabled tenant(s))"), 1);
	h_pause_ms(3 * TENANTS_REFRESH_MS + 1000);
	cr_assert_eq(h_log_lines(log, line), 1, "the same failure logged again (see %s)", log);
	tn_sql(&e, "UPDATE txhub.tenants SET biz_ids = '{shop}' WHERE name = 'team-a'");
	waited = 0;
	while (h_log_lines(log, "tenants: the rules load again") == 0 && waited < 10000) {
		h_pause_ms(100);
		waited += 100;
	}
	cr_assert_eq(h_log_lines(log, "tenants: the rules load again"), 1, "see %s", log);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

/* ---- migration 0010 on a database with rows ---- */


/* A database at schema 7 (0.4.0 and issue 20), as `txhub migrate` of then
 * left it, with rows. */
static void schema_7(PGconn *c)
{
	h_exec(c, "CREATE SCHEMA txhub");
	h_exec(c, "CREATE TABLE txhub.schema_migrations (version integer PRIMARY KEY, name text NOT "
	           "NULL, applied_at timestamptz NOT NULL DEFAULT now())");
	for (const migration *m = migrations; m->name && m->version <= 7; m++) {
		h_exec(c, m->sql);
		char q[256];
		snprintf(q, sizeof q, "INSERT INTO txhub.schema_migrations (version, name) VALUES (%d, "
		         "'%s')", m->version, m->name);
		h_exec(c, q);
	}
	h_exec(c, "INSERT INTO txhub.messages (biz_id, message_key, status, send_status, "
	           "src_partition, src_offset) SELECT 'b', 'k' || i, 'committed', 'sent', i % 4, i "
	           "FROM generate_series(1, 2000) i");
	h_exec(c, "INSERT INTO txhub.history (biz_id, message_key, event) SELECT 'b', 'k' || i, "
	           "'checkback' FROM generate_series(1, 100) i");
	h_exec(c, "INSERT INTO txhub.rejected (src_topic, src_partition, src_offset, reason) "
	           "VALUES ('t', 0, 1, 'bad')");
	h_exec(c, "INSERT INTO txhub.conflicts (biz_id, message_key, arrived, met_status) "
	           "VALUES ('b', 'k1', 'rollback', 'committed')");
}

static void filenodes(PGconn *c, char *out, size_t outsz)
{
	/* (migration 0012 renames txhub.messages to txhub.message_rows) */
	PGresult *r = PQexec(c, "SELECT string_agg(CASE relname WHEN 'message_rows' THEN 'messages' "
	                        "ELSE relname END || '=' || pg_relation_filenode(oid), ',' "
	                        "ORDER BY relname) FROM pg_class WHERE relnamespace = "
	                        "'txhub'::regnamespace AND relkind IN ('r', 'i') AND relname IN "
	                        "('messages', 'message_rows', 'history', 'rejected', 'conflicts', "
	                        "'messages_pkey')");
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	snprintf(out, outsz, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
}

Test(tenants, migration_rewrites_no_table)
{
	h_env e;
	h_setup(&e, "tn_mig");
	char name[96], conninfo[700], pg[720];
	snprintf(name, sizeof name, "%s_old", e.name);
	PGconn *old = h_fresh_database(name, conninfo, sizeof conninfo);
	schema_7(old);
	char before[512], after[512];
	filenodes(old, before, sizeof before);
	snprintf(pg, sizeof pg, "pg=%s", conninfo);
	const char *migrate[] = {"-X", pg, "migrate", NULL};
	cr_assert_eq(tn_run(&e, migrate), 0, "%s", tn_err);
	filenodes(old, after, sizeof after);
	cr_assert_str_eq(before, after, "a table was rewritten");
	PGresult *r = PQexec(old, "SELECT (SELECT count(*) FROM txhub.messages WHERE tenant IS NULL), "
	                          "(SELECT count(*) FROM txhub.history WHERE tenant IS NULL), "
	                          "(SELECT max(version) FROM txhub.schema_migrations), "
	                          "(SELECT relrowsecurity FROM pg_class WHERE oid = "
	                          "'txhub.message_rows'::regclass), "
	                          "(SELECT count(*) FROM pg_policies WHERE schemaname = 'txhub')");
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(old));
	cr_assert_str_eq(PQgetvalue(r, 0, 0), "2000");
	cr_assert_str_eq(PQgetvalue(r, 0, 1), "100");
	cr_assert_eq(atoi(PQgetvalue(r, 0, 2)), migrate_latest());
	cr_assert_str_eq(PQgetvalue(r, 0, 3), "f", "row-level security on before any grant");
	cr_assert_geq(atoi(PQgetvalue(r, 0, 4)), 8);
	PQclear(r);
	/* again: nothing to do */
	cr_assert_eq(tn_run(&e, migrate), 0, "%s", tn_err);
	PQfinish(old);
	h_teardown(&e);
}
