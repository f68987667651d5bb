/* test_enforce.c: tenants.enforce (docs/tenants.md: Sharing one hub between
 * teams) with a real hub, PostgreSQL and broker: each rule's allowed and
 * refused case (the refused one in txhub.rejected with its exact reason and
 * tenant, nothing else changed), enforcement off (0.4.0 behaviour, the tenant
 * still recorded), a topic no tenant owns, rules changed while running, a row
 * broken by hand (the last good rules stay: never open), intake held until the
 * first rules load (nothing lost), a decision for another tenant's message (a
 * conflict, through store_apply: one control topic here), the tenant label on
 * the counters, and two teams end to end: one hub on two control topics (a
 * list), tenants a and b, each team's messages on its own forward topic only,
 * a's reach for b's forward topic or biz ids rejected naming a alone, b's
 * decisions for a message of a (its biz id moved to b) conflicts. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "harness.h"
#include "httpd.h"
#include "store.h"
#include "topics.h"
#include "tenants_common.h"

TestSuite(enforce);

#define CB_OK "http://127.0.0.1:9/cb"

/* team-a owns the test's control topic; biz ids shop and pay*, forward
 * topics <topic>.out and <topic>.a.*, check-backs under CB_OK, envelopes up
 * to 600 bytes. */
static void add_team_a(h_env *e)
{
	char fwd[128], fwd_prefix[128];
	snprintf(fwd, sizeof fwd, "%s.out", e->topic);
	snprintf(fwd_prefix, sizeof fwd_prefix, "%s.a.*", e->topic);
	const char *args[] = {"tenant", "add", "team-a", "--control-topic", e->topic, "--biz",
	                      "shop", "pay*", "--forward-topic", fwd, fwd_prefix,
	                      "--checkback-allow", CB_OK, "--max-envelope-bytes", "600", NULL};
	cr_assert_eq(tn_run(e, args), 0, "add: %s", tn_err);
}

/* A prepare of biz_id/key forwarded to topic, with a check-back URL (or
 * none), padded with pad bytes of payload. */
static void prepare(h_env *e, const char *biz, const char *key, const char *topic,
                    const char *url, size_t pad)
{
	char payload[2048], cb[256] = "", json[4096];
	cr_assert_lt(pad, sizeof payload);
	memset(payload, 'x', pad);
	payload[pad] = '\0';
	if (url)
		snprintf(cb, sizeof cb, ",\"checkback\":{\"url\":\"%s\"}", url);
	snprintf(json, sizeof json, "{\"type\":\"prepare\",\"biz_id\":\"%s\",\"message_key\":\"%s\","
	         "\"payload\":\"p%s\",\"forward\":{\"topic\":\"%s\"}%s}", biz, key, payload, topic, cb);
	h_send_str(e, 0, key, json);
}

static void decide(h_env *e, const char *type, const char *biz, const char *key)
{
	char json[512];
	snprintf(json, sizeof json, "{\"type\":\"%s\",\"biz_id\":\"%s\",\"message_key\":\"%s\"}",
	         type, biz, key);
	h_send_str(e, 0, key, json);
}

/* The hub's log holds n lines with line within timeout_ms. */
static void wait_log_n(h_env *e, const char *line, long n, int timeout_ms)
{
	char log[256];
	h_hub_log(log, sizeof log, e);
	cr_assert_geq(h_wait_log_lines(log, line, n, timeout_ms), n,
	              "not %ld \"%s\" in %s within %d ms", n, line, log, timeout_ms);
}

/* The hub's log holds line within timeout_ms. */
static void wait_log(h_env *e, const char *line, int timeout_ms)
{
	wait_log_n(e, line, 1, timeout_ms);
}

/* The reason txhub.rejected holds for message key k (by its record key). */
static const char *reason_of(h_env *e, const char *k, char *out, size_t outsz)
{
	char q[512];
	snprintf(q, sizeof q, "SELECT coalesce(tenant, '(null)') || ' | ' || reason FROM "
	         "txhub.rejected WHERE record_key = '%s'::bytea", k);
	return h_query(e, q, out, outsz);
}

static void expect_rejected(h_env *e, const char *k, const char *want)
{
	char q[512], got[1024];
	snprintf(q, sizeof q, "SELECT count(*) FROM txhub.rejected WHERE record_key = '%s'::bytea", k);
	cr_assert(h_wait(e, q, "1", 20000), "%s was not rejected", k);
	cr_expect_str_eq(reason_of(e, k, got, sizeof got), want);
}

static pid_t start_hub(h_env *e, const char *enforce, int port)
{
	static char listen[64], enf[64];
	snprintf(listen, sizeof listen, "http.listen=127.0.0.1:%d", port);
	snprintf(enf, sizeof enf, "tenants.enforce=%s", enforce);
	const char *settings[] = {listen, enf, NULL};
	pid_t hub = h_hub_start(e, settings);
	char log[256];
	h_hub_log(log, sizeof log, e);
	for (int waited = 0; access(log, R_OK) != 0 && waited < 5000; waited += 20)
		h_pause_ms(20);
	return hub;
}

Test(enforce, each_rule_allows_and_refuses, .timeout = 180)
{
	h_env e;
	h_setup(&e, "enf_rules");
	add_team_a(&e);
	int port = h_free_port();
	pid_t hub = start_hub(&e, "true", port);
	char fwd[128], fwd_a[128], got[1024], want[1024];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	snprintf(fwd_a, sizeof fwd_a, "%s.a.x", e.topic);
	/* allowed: each rule at its edge */
	prepare(&e, "shop", "ok-1", fwd, CB_OK, 10);
	decide(&e, "commit", "shop", "ok-1");
	prepare(&e, "pay-eu", "ok-2", fwd_a, CB_OK "/deeper", 10);
	decide(&e, "rollback", "pay-eu", "ok-2");
	prepare(&e, "shop", "ok-3", fwd, NULL, 400); /* under the cap, no URL */
	/* refused: one rule each */
	prepare(&e, "bank", "no-biz", fwd, NULL, 0);
	prepare(&e, "shop", "no-fwd", "elsewhere", NULL, 0);
	prepare(&e, "shop", "no-cb", fwd, "http://127.0.0.1:9/other", 0);
	prepare(&e, "shop", "no-size", fwd, NULL, 700);
	decide(&e, "commit", "bank", "no-decision"); /* a decision's biz_id too */
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.rejected", "5", 20000));
	cr_assert(h_wait(&e, "SELECT string_agg(message_key || ':' || status || ':' || tenant, ',' "
	                     "ORDER BY message_key) FROM txhub.messages",
	                 "ok-1:committed:team-a,ok-2:rolled_back:team-a,ok-3:prepared:team-a", 20000));
	expect_rejected(&e, "no-biz",
	                "team-a | tenant team-a: biz_id bank is not one of tenant team-a's biz ids");
	expect_rejected(&e, "no-decision",
	                "team-a | tenant team-a: biz_id bank is not one of tenant team-a's biz ids");
	expect_rejected(&e, "no-fwd", "team-a | tenant team-a: forward topic elsewhere is not one "
	                              "of tenant team-a's forward topics");
	reason_of(&e, "no-cb", got, sizeof got);
	cr_expect(strncmp(got, "team-a | tenant team-a: check-back URL http://127.0.0.1:9/other is "
	                       "outside tenant team-a's check-back allow-list", 109) == 0, "%s", got);
	long big = h_count(&e, "SELECT octet_length(record_value) FROM txhub.rejected "
	                       "WHERE record_key = 'no-size'::bytea");
	snprintf(want, sizeof want, "team-a | tenant team-a: envelope of %ld bytes exceeds tenant "
	         "team-a's cap of 600 bytes", big);
	expect_rejected(&e, "no-size", want);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.conflicts"), 0);
	/* the counters carry the tenant */
	char *m = NULL;
	cr_assert_eq(h_http_get(port, "/metrics", &m), 200);
	cr_expect_eq(h_series(m, "txhub_envelopes_total{outcome=\"rejected\",tenant=\"team-a\"}"), 5);
	cr_expect_eq(h_series(m, "txhub_envelopes_total{type=\"prepare\",outcome=\"applied\","
	                         "tenant=\"team-a\"}"), 3);
	cr_expect_eq(h_series(m, "txhub_envelopes_total{outcome=\"applied\",tenant=\"team-a\"}"), 5);
	cr_expect_eq(h_series(m, "txhub_envelopes_total{tenant=\"\"}"), 0);
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages WHERE message_key = 'ok-1'",
	                 "sent", 20000));
	free(m);
	m = NULL;
	for (int waited = 0; waited < 5000; waited += 100) {
		free(m);
		cr_assert_eq(h_http_get(port, "/metrics", &m), 200);
		if (h_series(m, "txhub_forwards_total{outcome=\"sent\",tenant=\"team-a\"}") == 1)
			break;
		h_pause_ms(100);
	}
	cr_expect_eq(h_series(m, "txhub_forwards_total{outcome=\"sent\",tenant=\"team-a\"}"), 1);
	free(m);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

Test(enforce, off_records_the_tenant_and_enforces_nothing, .timeout = 180)
{
	h_env e;
	h_setup(&e, "enf_off");
	int port = h_free_port();
	pid_t hub = start_hub(&e, "false", port);
	wait_log(&e, "tenants: 0 enabled tenant(s) in force", 20000);
	prepare(&e, "bank", "before", "anywhere", NULL, 0);
	cr_assert(h_wait(&e, "SELECT coalesce(tenant, '(null)') FROM txhub.messages", "(null)", 20000));
	add_team_a(&e);
	wait_log(&e, "tenants: 1 enabled tenant(s) in force", 5000);
	/* outside every rule of team-a, and accepted: 0.4.0 behaviour, with its tenant */
	prepare(&e, "bank", "after", "anywhere", "http://elsewhere.example/cb", 900);
	decide(&e, "commit", "bank", "before"); /* a NULL-tenant message: stays NULL */
	cr_assert(h_wait(&e, "SELECT string_agg(message_key || ':' || status || ':' || "
	                     "coalesce(tenant, '(null)'), ',' ORDER BY message_key) FROM txhub.messages",
	                 "after:prepared:team-a,before:committed:(null)", 20000));
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.rejected"), 0);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.conflicts"), 0);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

Test(enforce, a_topic_of_no_tenant_is_refused_until_a_tenant_takes_it, .timeout = 180)
{
	h_env e;
	h_setup(&e, "enf_none");
	const char *b[] = {"tenant", "add", "team-b", "--control-topic", "ctl.elsewhere", "--biz",
	                   "shop", "--forward-topic", "out.b", NULL};
	cr_assert_eq(tn_run(&e, b), 0, "%s", tn_err);
	int port = h_free_port();
	pid_t hub = start_hub(&e, "true", port);
	prepare(&e, "shop", "k1", "out.b", NULL, 0);
	char want[256];
	snprintf(want, sizeof want, "(null) | tenant: topic %s belongs to no enabled tenant", e.topic);
	expect_rejected(&e, "k1", want);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages"), 0);
	/* team-b takes the topic while the hub runs: applied at the next
	 * refresh (docs/tenants.md: Sharing one hub between teams), which logs
	 * the rules in force again */
	const char *in_force = "tenants: 1 enabled tenant(s) in force";
	wait_log(&e, in_force, 20000);
	char log[256];
	long loads = h_log_lines(h_hub_log(log, sizeof log, &e), in_force);
	const char *set[] = {"tenant", "set", "team-b", "--control-topic", e.topic, NULL};
	cr_assert_eq(tn_run(&e, set), 0, "%s", tn_err);
	wait_log_n(&e, in_force, loads + 1, 20000);
	prepare(&e, "shop", "k2", "out.b", NULL, 0);
	cr_assert(h_wait(&e, "SELECT tenant FROM txhub.messages WHERE message_key = 'k2'", "team-b",
	                 20000));
	/* disabled: refused again */
	const char *off[] = {"tenant", "set", "team-b", "--disable", NULL};
	cr_assert_eq(tn_run(&e, off), 0, "%s", tn_err);
	wait_log(&e, "tenants: 0 enabled tenant(s) in force", 5000);
	prepare(&e, "shop", "k3", "out.b", NULL, 0);
	expect_rejected(&e, "k3", want);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

Test(enforce, a_broken_row_keeps_the_last_good_rules, .timeout = 180)
{
	h_env e;
	h_setup(&e, "enf_broken");
	add_team_a(&e);
	int port = h_free_port();
	pid_t hub = start_hub(&e, "true", port);
	char fwd[128];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	wait_log(&e, "tenants: 1 enabled tenant(s) in force", 20000);
	tn_sql(&e, "UPDATE txhub.tenants SET biz_ids = '{a*b}', forward_topics = '{x*y}' "
	           "WHERE name = 'team-a'");
	wait_log(&e, "the last good rules stay in force (1 enabled tenant(s))", 10000);
	prepare(&e, "shop", "good", fwd, NULL, 0);
	prepare(&e, "bank", "bad", fwd, NULL, 0); /* still refused: never open */
	prepare(&e, "shop", "bad-fwd", "x-or-y", NULL, 0);
	cr_assert(h_wait(&e, "SELECT tenant FROM txhub.messages WHERE message_key = 'good'", "team-a",
	                 20000));
	expect_rejected(&e, "bad",
	                "team-a | tenant team-a: biz_id bank is not one of tenant team-a's biz ids");
	expect_rejected(&e, "bad-fwd", "team-a | tenant team-a: forward topic x-or-y is not one of "
	                               "tenant team-a's forward topics");
	char *m = NULL;
	cr_assert_eq(h_http_get(port, "/readyz", &m), 200, "%s", m);
	free(m);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

Test(enforce, intake_waits_for_the_first_rules, .timeout = 180)
{
	h_env e;
	h_setup(&e, "enf_wait");
	add_team_a(&e);
	tn_sql(&e, "UPDATE txhub.tenants SET biz_ids = '{a*b}' WHERE name = 'team-a'");
	char fwd[128];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	for (int i = 0; i < 20; i++) {
		char k[16];
		snprintf(k, sizeof k, "w-%d", i);
		prepare(&e, "shop", k, fwd, NULL, 0);
		decide(&e, "commit", "shop", k);
	}
	prepare(&e, "bank", "w-bad", fwd, NULL, 0);
	int port = h_free_port();
	pid_t hub = start_hub(&e, "true", port);
	const char *needles[] = {"tenants.enforce is on and no tenant rules are loaded yet",
	                         "biz_ids", NULL};
	h_wait_not_ready(port, needles, 20000);
	wait_log(&e, "hub: tenants.enforce is on and no tenant rules are loaded yet", 20000);
	h_pause_ms(3000); /* records were read by now: none applied, none rejected */
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages"), 0);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.rejected"), 0);
	char log[256];
	h_hub_log(log, sizeof log, &e);
	cr_assert_eq(h_log_lines(log, "hub: tenants.enforce is on and no tenant rules are loaded"),
	             1, "one error line (see %s)", log);
	tn_sql(&e, "UPDATE txhub.tenants SET biz_ids = '{shop}' WHERE name = 'team-a'");
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'committed' "
	                     "AND tenant = 'team-a'", "20", 20000));
	expect_rejected(&e, "w-bad",
	                "team-a | tenant team-a: biz_id bank is not one of tenant team-a's biz ids");
	char *ready = NULL;
	cr_assert(h_http_wait(port, "/readyz", 200, 10000, &ready), "%s", ready);
	free(ready);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

/* ---- a decision for another tenant's message (store_apply, one topic) ---- */

typedef struct {
	txhub_config cfg;
	store *st;
	owned_part own[1];
	h_env e;
	int64_t off;
} fixture;

static void open_store(fixture *f, const char *name, const char *enforce)
{
	char err[512];
	int64_t next;
	h_setup(&f->e, name);
	tp_key part = tp_of(f->e.topic, 0);
	f->off = 0;
	cr_assert_eq(config_init(&f->cfg), 0);
	cr_assert_eq(config_set(&f->cfg, "pg", f->e.conninfo, err, sizeof err), 0, "%s", err);
	cr_assert_eq(config_set(&f->cfg, "control_topic", f->e.topic, err, sizeof err), 0, "%s", err);
	cr_assert_eq(config_set(&f->cfg, "tenants.enforce", enforce, err, sizeof err), 0, "%s", err);
	f->st = store_connect(&f->cfg, err, sizeof err);
	cr_assert(f->st, "%s", err);
	cr_assert_eq(store_take_partitions(f->st, "replica", "g", &part, 1, f->own, &next, NULL, err,
	                                   sizeof err), STORE_OK, "%s", err);
}

static void close_store(fixture *f)
{
	store_close(f->st);
	config_free(&f->cfg);
	h_teardown(&f->e);
}

/* Apply one envelope as a record of tenant (""; none); returns its stats. */
static store_stats apply_as(fixture *f, const char *tenant, const char *json)
{
	store_record r;
	store_stats stats;
	store_forward_list out = {0};
	char err[512];
	memset(&r, 0, sizeof r);
	r.offset = f->off++;
	r.value = json;
	r.value_len = strlen(json);
	r.valid = envelope_parse(json, strlen(json), 1 << 20, &r.env, r.reason, sizeof r.reason) == 0;
	cr_assert(r.valid, "%s: %s", json, r.reason);
	snprintf(r.tenant, sizeof r.tenant, "%s", tenant);
	r.src_topic = topic_intern(f->e.topic);
	r.tp = tp_of(f->e.topic, 0);
	cr_assert_eq(store_apply(f->st, &r, 1, f->own, 1, &out, &stats, NULL, NULL, err,
	                         sizeof err), STORE_OK, "%s", err);
	envelope_free(&r.env);
	store_forward_list_clear(&out);
	return stats;
}

#define PREP(k) "{\"type\":\"prepare\",\"biz_id\":\"s\",\"message_key\":\"" k "\"," \
                "\"payload\":\"x\",\"forward\":{\"topic\":\"out\"}}"
#define DEC(t, k) "{\"type\":\"" t "\",\"biz_id\":\"s\",\"message_key\":\"" k "\"}"

Test(enforce, a_decision_for_another_tenants_message_is_a_conflict, .timeout = 120)
{
	fixture f;
	open_store(&f, "enf_cross", "true");
	store_stats s = apply_as(&f, "team-a", PREP("m1"));
	store_stats_free(&s);
	s = apply_as(&f, "team-b", DEC("commit", "m1"));
	cr_assert_eq(s.conflicts, 1);
	cr_assert_eq(s.applied, 0);
	store_stats_free(&s);
	cr_assert_str_eq(h_query(&f.e, "SELECT status || ':' || tenant FROM txhub.messages", (char[64]){0},
	                         64), "prepared:team-a");
	char row[512];
	cr_assert_str_eq(h_query(&f.e, "SELECT arrived || '|' || met_status || '|' || tenant || '|' "
	                               "|| detail FROM txhub.conflicts", row, sizeof row),
	                 "commit|prepared|team-b|tenant team-b: the message belongs to another tenant");
	/* its own tenant's decision applies; a message of no tenant (stored before
	 * tenants) takes the decision of the tenant whose biz_id intake checked, and keeps
	 * no tenant */
	s = apply_as(&f, "team-a", DEC("commit", "m1"));
	cr_assert_eq(s.applied, 1);
	store_stats_free(&s);
	s = apply_as(&f, "", PREP("m2"));
	store_stats_free(&s);
	s = apply_as(&f, "team-b", DEC("rollback", "m2"));
	cr_assert_eq(s.applied, 1);
	cr_assert_eq(s.conflicts, 0);
	store_stats_free(&s);
	cr_assert_str_eq(h_query(&f.e, "SELECT string_agg(message_key || ':' || status || ':' || "
	                               "coalesce(tenant, '(null)'), ',' ORDER BY message_key) FROM "
	                               "txhub.messages", row, sizeof row),
	                 "m1:committed:team-a,m2:rolled_back:(null)");
	close_store(&f);
}

Test(enforce, off_a_decision_of_another_topic_applies, .timeout = 120)
{
	fixture f;
	open_store(&f, "enf_cross_off", "false");
	store_stats s = apply_as(&f, "team-a", PREP("m1"));
	store_stats_free(&s);
	s = apply_as(&f, "team-b", DEC("commit", "m1"));
	cr_assert_eq(s.applied, 1);
	cr_assert_eq(s.conflicts, 0);
	store_stats_free(&s);
	char row[128];
	cr_assert_str_eq(h_query(&f.e, "SELECT status || ':' || tenant FROM txhub.messages", row,
	                         sizeof row), "committed:team-a");
	close_store(&f);
}

/* ---- two teams on two control topics, end to end ---- */

/* An envelope on t's control topic, partition 0 (one order per team): a
 * prepare (payload and forward topic given) or a decision (NULL, NULL). */
static void send_on(h_env *t, const char *type, const char *biz, const char *key,
                    const char *payload, const char *fwd)
{
	char json[512];
	if (payload)
		snprintf(json, sizeof json, "{\"type\":\"%s\",\"biz_id\":\"%s\",\"message_key\":"
		         "\"%s\",\"payload\":\"%s\",\"forward\":{\"topic\":\"%s\"}}", type, biz, key,
		         payload, fwd);
	else
		snprintf(json, sizeof json, "{\"type\":\"%s\",\"biz_id\":\"%s\",\"message_key\":"
		         "\"%s\"}", type, biz, key);
	h_send_str(t, 0, key, json);
}

/* A counter's value, 0 when it has no series. */
static double counted(const char *metrics, const char *name)
{
	double v = h_series(metrics, name);
	return v < 0 ? 0 : v;
}

/* The hub's log lines holding needle, once there are more than `than`
 * (within timeout_ms). */
static long wait_more_lines(h_env *e, const char *needle, long than, int timeout_ms)
{
	char log[256];
	h_hub_log(log, sizeof log, e);
	long n;
	for (int waited = 0; (n = h_log_lines(log, needle)) <= than; waited += 100) {
		cr_assert_lt(waited, timeout_ms, "no new \"%s\" in %s within %d ms", needle, log,
		             timeout_ms);
		h_pause_ms(100);
	}
	return n;
}

/* Run `txhub tenant set NAME --biz BIZ...` and wait until the hub has
 * loaded the change (its count line again after the command). */
static void move_biz(h_env *e, const char *const *set)
{
	static const char *loaded = "tenants: 2 enabled tenant(s) in force";
	char log[256];
	long before = h_log_lines(h_hub_log(log, sizeof log, e), loaded);
	cr_assert_eq(tn_run(e, set), 0, "%s", tn_err);
	wait_more_lines(e, loaded, before, 30000);
}

/* The values on fwd, sorted, comma-separated: what a consumer of it sees. */
static const char *values_on(h_env *e, const char *fwd, char *out, size_t outsz)
{
	h_record *r;
	size_t got = h_read_topic(e, fwd, 2000, &r);
	const char *v[64];
	cr_assert_leq(got, 64, "%zu records on %s", got, fwd);
	for (size_t i = 0; i < got; i++)
		v[i] = (const char *)r[i].value;
	for (size_t i = 1; i < got; i++) /* insertion sort: a handful */
		for (size_t j = i; j > 0 && strcmp(v[j - 1], v[j]) > 0; j--) {
			const char *t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	size_t n = 0;
	out[0] = '\0';
	for (size_t i = 0; i < got; i++)
		n += (size_t)snprintf(out + n, n < outsz ? outsz - n : 0, "%s%s", i ? "," : "", v[i]);
	h_records_free(r, got);
	return out;
}

/* One hub on control_topic = "<t>.a,<t>.b" with tenants.enforce = true;
 * tenants a and b (`txhub tenant add`), each with its own control topic,
 * biz ids and forward topic. Each team's transactions reach its own
 * forward topic only; a's envelopes naming b's forward topic or b's biz
 * id are rejected naming tenant a alone; a biz id moved from a to b
 * (docs/tenants.md: Sharing one hub between teams, on conflicts between
 * tenants): b's decisions for the message a
 * prepared are conflicts and change nothing, and a may no longer decide
 * it. Rows and counters carry their tenant. */
Test(enforce, two_teams_on_two_control_topics, .timeout = 300)
{
	h_env e;
	h_setup(&e, "enf_teams");
	h_env ta = h_on_topic(&e, "a"), tb = h_on_topic(&e, "b");
	char fa[128], fb[128], list[256], setting[300], listen[64];
	snprintf(fa, sizeof fa, "%s.fwd-a", e.topic);
	snprintf(fb, sizeof fb, "%s.fwd-b", e.topic);
	snprintf(list, sizeof list, "%s,%s", ta.topic, tb.topic);
	snprintf(setting, sizeof setting, "control_topic=%s", list);
	const char *add_a[] = {"tenant", "add", "a", "--control-topic", ta.topic, "--biz", "shop-a",
	                       "move", "--forward-topic", fa, NULL};
	const char *add_b[] = {"tenant", "add", "b", "--control-topic", tb.topic, "--biz", "shop-b",
	                       "--forward-topic", fb, NULL};
	cr_assert_eq(tn_run(&e, add_a), 0, "%s", tn_err);
	cr_assert_eq(tn_run(&e, add_b), 0, "%s", tn_err);
	h_control_topic(&ta);
	h_control_topic(&tb);
	int port = h_free_port();
	snprintf(listen, sizeof listen, "http.listen=127.0.0.1:%d", port);
	/* m-1 stays prepared: no check-back while the test runs */
	const char *settings[] = {setting, listen, "tenants.enforce=true",
	                          "checkback.first_after_ms=600000", NULL};
	pid_t hub = h_hub_start(&e, settings);

	/* each team's own transactions; a's prepare of "move" stays open */
	for (int i = 1; i <= 3; i++) {
		char k[16], v[32];
		snprintf(k, sizeof k, "a-%d", i);
		snprintf(v, sizeof v, "%s@a", k);
		send_on(&ta, "prepare", "shop-a", k, v, fa);
		send_on(&ta, "commit", "shop-a", k, NULL, NULL);
		snprintf(k, sizeof k, "b-%d", i);
		snprintf(v, sizeof v, "%s@b", k);
		send_on(&tb, "prepare", "shop-b", k, v, fb);
		send_on(&tb, "commit", "shop-b", k, NULL, NULL);
	}
	send_on(&ta, "prepare", "move", "m-1", "m-1@a", fa);
	/* a reaches for b's forward topic, and for b's biz id */
	send_on(&ta, "prepare", "shop-a", "steal-fwd", "steal@a", fb);
	send_on(&ta, "prepare", "shop-b", "steal-biz", "steal@a", fa);
	send_on(&ta, "commit", "shop-b", "b-1", NULL, NULL);
	h_flush();
	cr_assert(h_wait(&e, "SELECT string_agg(message_key || ':' || status || ':' || "
	                     "coalesce(send_status, '-') || ':' || coalesce(tenant, '(null)'), ',' "
	                     "ORDER BY message_key) FROM txhub.messages",
	                 "a-1:committed:sent:a,a-2:committed:sent:a,a-3:committed:sent:a,"
	                 "b-1:committed:sent:b,b-2:committed:sent:b,b-3:committed:sent:b,"
	                 "m-1:prepared:-:a", 60000));
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.rejected", "3", 30000));
	char q[512], got[2048], want[1024];
	snprintf(q, sizeof q, "SELECT string_agg(convert_from(record_key, 'UTF8') || ' | ' || "
	         "coalesce(tenant, '(null)') || ' | ' || src_topic || ' | ' || reason, E'\\n' ORDER "
	         "BY id) FROM txhub.rejected");
	snprintf(want, sizeof want,
	         "steal-fwd | a | %s | tenant a: forward topic %s is not one of tenant a's forward "
	         "topics\n"
	         "steal-biz | a | %s | tenant a: biz_id shop-b is not one of tenant a's biz ids\n"
	         "b-1 | a | %s | tenant a: biz_id shop-b is not one of tenant a's biz ids",
	         ta.topic, fb, ta.topic, ta.topic);
	cr_expect_str_eq(h_query(&e, q, got, sizeof got), want);
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.rejected WHERE reason LIKE '%tenant b%' "
	                         "OR reason LIKE '%shop-b''s%'"), 0, "a's reasons name b");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.conflicts"), 0);
	cr_expect_str_eq(values_on(&e, fa, got, sizeof got), "a-1@a,a-2@a,a-3@a");
	cr_expect_str_eq(values_on(&e, fb, got, sizeof got), "b-1@b,b-2@b,b-3@b",
	                 "only b's messages on b's forward topic");

	/* the operator moves biz id "move" from a to b: b's decisions for the
	 * message a prepared are conflicts, and a's are no longer its own */
	const char *a_keeps[] = {"tenant", "set", "a", "--biz", "shop-a", NULL};
	const char *b_takes[] = {"tenant", "set", "b", "--biz", "shop-b", "move", NULL};
	move_biz(&e, a_keeps);
	move_biz(&e, b_takes);
	send_on(&tb, "commit", "move", "m-1", NULL, NULL);
	send_on(&tb, "rollback", "move", "m-1", NULL, NULL);
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.conflicts", "2", 30000));
	snprintf(want, sizeof want,
	         "m-1 | commit | prepared | b | %s | tenant b: the message belongs to another tenant\n"
	         "m-1 | rollback | prepared | b | %s | tenant b: the message belongs to another tenant",
	         tb.topic, tb.topic);
	cr_expect_str_eq(h_query(&e, "SELECT string_agg(message_key || ' | ' || arrived || ' | ' || "
	                             "met_status || ' | ' || tenant || ' | ' || src_topic || ' | ' || "
	                             "detail, E'\\n' ORDER BY id) FROM txhub.conflicts", got,
	                         sizeof got), want);
	send_on(&ta, "rollback", "move", "m-1", NULL, NULL);
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.rejected", "4", 30000));
	cr_expect_str_eq(h_query(&e, "SELECT tenant || ' | ' || reason FROM txhub.rejected ORDER BY "
	                             "id DESC LIMIT 1", got, sizeof got),
	                 "a | tenant a: biz_id move is not one of tenant a's biz ids");
	cr_expect_str_eq(h_query(&e, "SELECT status || ':' || tenant FROM txhub.messages WHERE "
	                             "message_key = 'm-1'", got, sizeof got), "prepared:a");
	cr_expect_str_eq(values_on(&e, fb, got, sizeof got), "b-1@b,b-2@b,b-3@b");

	/* the counters by tenant (forwards counted once delivered: wait for them) */
	char *m = NULL;
	for (int waited = 0; waited < 20000; waited += 200) {
		free(m);
		m = NULL;
		cr_assert_eq(h_http_get(port, "/metrics", &m), 200);
		if (counted(m, "txhub_forwards_total{outcome=\"sent\"}") >= 6 &&
		    counted(m, "txhub_envelopes_total{outcome=\"conflict\"}") >= 2 &&
		    counted(m, "txhub_envelopes_total{outcome=\"rejected\"}") >= 4)
			break;
		h_pause_ms(200);
	}
	cr_expect_eq(h_series(m, "txhub_envelopes_total{outcome=\"applied\",tenant=\"a\"}"), 7);
	cr_expect_eq(h_series(m, "txhub_envelopes_total{outcome=\"rejected\",tenant=\"a\"}"), 4);
	cr_expect_eq(counted(m, "txhub_envelopes_total{outcome=\"conflict\",tenant=\"a\"}"), 0);
	cr_expect_eq(h_series(m, "txhub_envelopes_total{outcome=\"applied\",tenant=\"b\"}"), 6);
	cr_expect_eq(counted(m, "txhub_envelopes_total{outcome=\"rejected\",tenant=\"b\"}"), 0);
	cr_expect_eq(h_series(m, "txhub_envelopes_total{outcome=\"conflict\",tenant=\"b\"}"), 2);
	cr_expect_eq(counted(m, "txhub_envelopes_total{tenant=\"\"}"), 0);
	cr_expect_eq(h_series(m, "txhub_forwards_total{outcome=\"sent\",tenant=\"a\"}"), 3);
	cr_expect_eq(h_series(m, "txhub_forwards_total{outcome=\"sent\",tenant=\"b\"}"), 3);
	free(m);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}
