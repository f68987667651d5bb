/* test_topics.c: several control topics (docs/tenants.md: Sharing one hub
 * between teams), everything per (topic, partition): a hub on a list of topics
 * and one on a pattern (topics made after it started are read too), prepares
 * and commits on each forwarded once, rows naming their topic, `txhub status`
 * per (topic, partition), a forward into any control topic refused, two
 * replicas fenced per (topic, partition), exactly_once across two topics
 * (Apache Kafka), bad forms of control_topic refused (exit 2), and migration
 * 0009 of a 0.4.0 database with 200,000 rows while a 0.4.0 hub's writes go
 * on. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "migrate.h"
#include "store.h"

#define WAIT_MS 60000

static void send_prepare(h_env *t, const char *biz, const char *mk, const char *fwd)
{
	char buf[512];
	snprintf(buf, sizeof buf, "{\"type\":\"prepare\",\"biz_id\":\"%s\",\"message_key\":\"%s\","
	         "\"payload\":\"%s@%s\",\"forward\":{\"topic\":\"%s\"}}", biz, mk, mk, t->topic, fwd);
	h_send_str(t, -1, mk, buf);
}

static void send_commit(h_env *t, const char *biz, const char *mk)
{
	char buf[256];
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"%s\",\"message_key\":\"%s\"}",
	         biz, mk);
	h_send_str(t, -1, mk, buf);
}

/* Prepare and commit keys <prefix><from> .. <prefix><from + n - 1> on t;
 * vals[i] (when not NULL) the value each is forwarded with. */
static void send_txs(h_env *t, const char *biz, const char *prefix, int from, int n,
                     const char *fwd, char (*vals)[160])
{
	for (int i = 0; i < n; i++) {
		char mk[32];
		snprintf(mk, sizeof mk, "%s%d", prefix, from + i);
		send_prepare(t, biz, mk, fwd);
		send_commit(t, biz, mk);
		if (vals)
			snprintf(vals[i], sizeof vals[i], "%s@%s", mk, t->topic);
	}
}

/* The row of mk: "status/send_status/src_topic". */
static int wait_row(h_env *e, const char *mk, const char *want)
{
	char q[300];
	snprintf(q, sizeof q, "SELECT status || '/' || coalesce(send_status, '-') || '/' || src_topic "
	         "FROM txhub.messages WHERE message_key = '%s'", mk);
	return h_wait(e, q, want, WAIT_MS);
}

/* Every record on fwd (total of them): each value of want ("<key>@<topic>")
 * appears once. */
static void check_forwarded_once(h_env *e, const char *fwd, const char *const *want, size_t n,
                                 size_t total, int committed)
{
	h_record *r;
	size_t got = committed ? h_read_topic_committed(e, fwd, 3000, &r)
	                       : h_read_topic(e, fwd, 2000, &r);
	cr_assert_eq(got, total, "%zu records on %s, want %zu", got, fwd, total);
	for (size_t k = 0; k < n; k++) {
		int seen = 0;
		for (size_t i = 0; i < got; i++)
			seen += strcmp((const char *)r[i].value, want[k]) == 0;
		cr_assert_eq(seen, 1, "%s forwarded %d times", want[k], seen);
	}
	h_records_free(r, got);
}

/* `txhub status --json`'s partitions of topic: how many, and how many held
 * by an owner at an epoch. */
static void status_of(h_env *e, const char *topic, int *n, int *owned)
{
	static char out[1 << 20];
	char err[8192];
	const char *args[] = {"status", "--json", NULL};
	cr_assert_eq(h_txhub_io(e, args, out, sizeof out, err, sizeof err), 0, "%s", err);
	cJSON *doc = cJSON_Parse(out);
	cr_assert_not_null(doc, "%.300s", out);
	cJSON *parts = cJSON_GetObjectItem(doc, "partitions"), *p;
	*n = *owned = 0;
	cJSON_ArrayForEach(p, parts) {
		const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(p, "topic"));
		cr_assert_not_null(t, "a partition without its topic");
		cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(p, "partition")));
		if (strcmp(t, topic) != 0)
			continue;
		(*n)++;
		cJSON *owner = cJSON_GetObjectItem(p, "owner"), *epoch = cJSON_GetObjectItem(p, "epoch");
		*owned += cJSON_IsString(owner) && cJSON_IsNumber(epoch) && epoch->valuedouble >= 1;
	}
	cJSON_Delete(doc);
}

Test(topics, a_list_of_topics_each_read_and_forwarded_once, .timeout = 180)
{
	h_env e;
	h_setup(&e, "tlist");
	h_env b = h_on_topic(&e, "b"), c = h_on_topic(&e, "c");
	char list[400], setting[420], fwd[128];
	snprintf(list, sizeof list, "%s, %s ,%s", e.topic, b.topic, c.topic);
	snprintf(setting, sizeof setting, "control_topic=%s", list);
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	h_control_topic(&e);
	h_control_topic(&b);
	h_control_topic(&c);
	const char *s[] = {setting, NULL};
	pid_t hub = h_hub_start(&e, s);

	/* the same message key on two topics (other biz ids), and one each */
	h_env *on[3] = {&e, &b, &c};
	for (int i = 0; i < 3; i++) {
		char biz[16];
		snprintf(biz, sizeof biz, "biz%d", i);
		send_prepare(on[i], biz, i < 2 ? "same" : "own", fwd);
		send_prepare(on[i], biz, i == 0 ? "a1" : i == 1 ? "b1" : "c1", fwd);
	}
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'prepared'", "6",
	                 WAIT_MS));
	for (int i = 0; i < 3; i++) {
		char biz[16];
		snprintf(biz, sizeof biz, "biz%d", i);
		send_commit(on[i], biz, i < 2 ? "same" : "own");
		send_commit(on[i], biz, i == 0 ? "a1" : i == 1 ? "b1" : "c1");
	}
	/* a forward into another control topic of the list, and a record
	 * that is no envelope, on the third topic */
	char bad[512];
	snprintf(bad, sizeof bad, "{\"type\":\"commit\",\"biz_id\":\"x\",\"message_key\":\"loop\","
	         "\"payload\":\"p\",\"forward\":{\"topic\":\"%s\"}}", b.topic);
	h_send_str(&c, 0, "loop", bad);
	h_send_str(&c, 0, "junk", "not json");
	h_flush();
	char want[300];
	snprintf(want, sizeof want, "committed/sent/%s", e.topic);
	cr_assert(wait_row(&e, "a1", want));
	snprintf(want, sizeof want, "committed/sent/%s", b.topic);
	cr_assert(wait_row(&e, "b1", want));
	snprintf(want, sizeof want, "committed/sent/%s", c.topic);
	cr_assert(wait_row(&e, "c1", want));
	cr_assert(wait_row(&e, "own", want));
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'committed' "
	                     "AND send_status = 'sent'", "6", WAIT_MS));
	char q[512];
	snprintf(q, sizeof q, "SELECT string_agg(src_topic || ':' || src_partition::text, ',') "
	         "FROM txhub.rejected WHERE src_topic = '%s' AND (reason LIKE '%%names a control "
	         "topic%%' OR record_value = 'not json')", c.topic);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.rejected", "2", WAIT_MS));
	char got[400];
	snprintf(want, sizeof want, "%s:0,%s:0", c.topic, c.topic);
	cr_assert_str_eq(h_query(&e, q, got, sizeof got), want, "rejected rows name their topic");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key = 'loop'"), 0);

	char v[6][160];
	const char *vs[6];
	const char *keys[6] = {"same", "a1", "same", "b1", "own", "c1"};
	for (int i = 0; i < 6; i++) {
		snprintf(v[i], sizeof v[i], "%s@%s", keys[i], on[i / 2]->topic);
		vs[i] = v[i];
	}
	check_forwarded_once(&e, fwd, vs, 6, 6, 0);

	/* the partitions of each topic, taken, in txhub.partitions and status */
	for (int i = 0; i < 3; i++) {
		snprintf(q, sizeof q, "SELECT count(*) > 0 AND bool_and(epoch >= 1) FROM txhub.partitions "
		         "WHERE topic = '%s'", on[i]->topic);
		cr_assert(h_wait(&e, q, "t", WAIT_MS), "no partition of %s taken", on[i]->topic);
		int n, owned;
		status_of(&e, on[i]->topic, &n, &owned);
		snprintf(q, sizeof q, "SELECT count(*) FROM txhub.partitions WHERE topic = '%s'",
		         on[i]->topic);
		cr_assert_gt(n, 0, "status shows no partition of %s", on[i]->topic);
		cr_assert_eq(owned, h_count(&e, q), "status: %d of %s owned", owned, on[i]->topic);
	}
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

/* Make topic t: Apache Kafka is asked to; the embedded broker makes a
 * topic when it is first written to (its own number of partitions). */
static void make_topic(h_env *e, const char *t, int partitions)
{
	char es[512];
	if (h_real_kafka())
		cr_assert_eq(h_create_topic(e, t, partitions, NULL, NULL, es, sizeof es), 0, "%s", es);
}

Test(topics, a_pattern_reads_topics_made_after_the_start, .timeout = 180)
{
	h_env e;
	h_setup(&e, "tpat");
	h_env one = h_on_topic(&e, "one"), two = h_on_topic(&e, "two");
	char pattern[300], setting[320], fwd[128];
	/* ^ctl\.t_tpat_123\..* : the topic names' dots escaped */
	size_t k = (size_t)snprintf(pattern, sizeof pattern, "^");
	for (const char *p = e.topic; *p && k + 3 < sizeof pattern; p++) {
		if (*p == '.')
			pattern[k++] = '\\';
		pattern[k++] = *p;
	}
	snprintf(pattern + k, sizeof pattern - k, "\\..*");
	snprintf(setting, sizeof setting, "control_topic=%s", pattern);
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	make_topic(&e, one.topic, 2);
	send_prepare(&one, "p", "m1", fwd);
	h_flush();
	const char *s[] = {setting, NULL};
	pid_t hub = h_hub_start(&e, s);
	send_commit(&one, "p", "m1");
	h_flush();
	char want[200];
	snprintf(want, sizeof want, "committed/sent/%s", one.topic);
	cr_assert(wait_row(&e, "m1", want));

	/* a topic made now is found at a metadata refresh and read */
	make_topic(&e, two.topic, 3);
	send_prepare(&two, "p", "m2", fwd);
	send_commit(&two, "p", "m2");
	h_flush();
	snprintf(want, sizeof want, "committed/sent/%s", two.topic);
	cr_assert(wait_row(&e, "m2", want), "a topic made after the start was not read");
	char q[300];
	snprintf(q, sizeof q, "SELECT count(*) FROM txhub.partitions WHERE topic = '%s'", two.topic);
	if (h_real_kafka())
		cr_assert(h_wait(&e, q, "3", WAIT_MS));
	int n, owned;
	status_of(&e, two.topic, &n, &owned);
	cr_assert_gt(n, 0);
	cr_assert_eq(owned, h_count(&e, q), "status: %d of %s owned", owned, two.topic);
	cr_assert_eq(n, owned, "a partition of %s not taken", two.topic);
	/* the base topic does not match the pattern: nothing of it is read */
	send_prepare(&e, "p", "m0", fwd);
	h_flush();
	h_pause_ms(2000);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key = 'm0'"), 0);
	snprintf(q, sizeof q, "SELECT count(*) FROM txhub.partitions WHERE topic = '%s'", e.topic);
	cr_assert_eq(h_count(&e, q), 0);
	const char *vs[] = {"m1@", "m2@"};
	char v1[200], v2[200];
	snprintf(v1, sizeof v1, "%s%s", vs[0], one.topic);
	snprintf(v2, sizeof v2, "%s%s", vs[1], two.topic);
	const char *want_v[] = {v1, v2};
	check_forwarded_once(&e, fwd, want_v, 2, 2, 0);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

/* ---- fencing per (topic, partition), in the store ---- */

static store_record rec(const char *topic, int32_t part, int64_t offset, const char *json)
{
	store_record r;
	memset(&r, 0, sizeof r);
	r.src_topic = topic_intern(topic);
	r.partition = part;
	r.tp = tp_of(topic, part);
	r.offset = offset;
	r.value = json;
	r.value_len = strlen(json);
	r.valid = envelope_parse(json, strlen(json), 1 << 20, &r.env, r.reason, sizeof r.reason) == 0;
	cr_assert(r.valid, "%s", r.reason);
	return r;
}

Test(topics, partition_zero_of_two_topics_are_two_partitions, .timeout = 60)
{
	h_env e;
	h_setup(&e, "tfence");
	h_env b = h_on_topic(&e, "b");
	txhub_config cfg;
	char err[512];
	cr_assert_eq(config_init(&cfg), 0);
	cr_assert_eq(config_set(&cfg, "pg", e.conninfo, err, sizeof err), 0);
	store *x = store_connect(&cfg, err, sizeof err), *y = store_connect(&cfg, err, sizeof err);
	cr_assert(x && y, "%s", err);
	tp_key a0 = tp_of(e.topic, 0), b0 = tp_of(b.topic, 0);
	tp_key both[2] = {a0, b0};
	owned_part xo[2], yo[1];
	int64_t next[2];
	/* x takes partition 0 of both topics; y then takes b's alone */
	cr_assert_eq(store_take_partitions(x, "x", "g", both, 2, xo, next, NULL, err, sizeof err),
	             STORE_OK, "%s", err);
	cr_assert_eq(xo[0].epoch, 1);
	cr_assert_eq(xo[1].epoch, 1);
	cr_assert_eq(store_take_partitions(y, "y", "g", &b0, 1, yo, next, NULL, err, sizeof err),
	             STORE_OK, "%s", err);
	cr_assert_eq(yo[0].epoch, 2);
	char q[300], got[64];
	snprintf(q, sizeof q, "SELECT owner || epoch FROM txhub.partitions WHERE topic = '%s'",
	         e.topic);
	cr_assert_str_eq(h_query(&e, q, got, sizeof got), "x1", "a's partition 0 is x's still");

	/* x's batch with a record of each: refused as a whole, b's partition lost */
	static const char *p1 = "{\"type\":\"commit\",\"biz_id\":\"f\",\"message_key\":\"k1\","
	                        "\"payload\":\"x\",\"forward\":{\"topic\":\"out\"}}";
	static const char *p2 = "{\"type\":\"commit\",\"biz_id\":\"f\",\"message_key\":\"k2\","
	                        "\"payload\":\"x\",\"forward\":{\"topic\":\"out\"}}";
	store_record r[2] = {rec(e.topic, 0, 5, p1), rec(b.topic, 0, 5, p2)};
	store_forward_list out = {0};
	store_stats stats;
	tp_key *lost = NULL;
	size_t nlost = 0;
	cr_assert_eq(store_apply(x, r, 2, xo, 2, &out, &stats, &lost, &nlost, err, sizeof err),
	             STORE_FENCED);
	store_stats_free(&stats);
	cr_assert_eq(nlost, 1);
	cr_assert_eq(lost[0], b0, "the partition lost is b's, not a's");
	free(lost);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages"), 0);
	/* a's record alone goes through for x, b's for y */
	cr_assert_eq(store_apply(x, r, 1, xo, 2, &out, &stats, NULL, NULL, err, sizeof err), STORE_OK,
	             "%s", err);
	store_stats_free(&stats);
	cr_assert_eq(store_apply(y, r + 1, 1, yo, 1, &out, &stats, NULL, NULL, err, sizeof err),
	             STORE_OK, "%s", err);
	store_stats_free(&stats);
	store_forward_list_clear(&out);
	snprintf(q, sizeof q, "SELECT string_agg(message_key || '=' || src_topic, ',' ORDER BY "
	         "message_key) FROM txhub.messages");
	char rows[400], want[400];
	snprintf(want, sizeof want, "k1=%s,k2=%s", e.topic, b.topic);
	cr_assert_str_eq(h_query(&e, q, rows, sizeof rows), want);
	snprintf(q, sizeof q, "SELECT string_agg(topic || '=' || next_offset, ',' ORDER BY topic) "
	         "FROM txhub.partitions");
	snprintf(want, sizeof want, "%s=6,%s=6", e.topic, b.topic);
	cr_assert_str_eq(h_query(&e, q, rows, sizeof rows), want);

	/* forwards: each replica claims only its own (topic, partition)'s, and
	 * x's delivery report for b's message is dropped */
	PQclear(PQexec(e.db, "UPDATE txhub.messages SET next_send_at = now() - interval '1 s'"));
	store_forward_list fl = {0};
	cr_assert_eq(store_claim_forwards(x, xo, 2, 100, &fl, err, sizeof err), STORE_OK, "%s", err);
	cr_assert_eq(fl.n, 1);
	cr_assert_str_eq(fl.items[0].message_key, "k1");
	cr_assert_eq(fl.items[0].src_tp, a0);
	store_forward_list_clear(&fl);
	store_delivery d[2] = {{.biz_id = "f", .message_key = "k1", .tp = a0, .ok = 1},
	                       {.biz_id = "f", .message_key = "k2", .tp = b0, .ok = 1}};
	cr_assert_eq(store_record_deliveries(x, xo, 2, d, 2, 15, NULL, 0, NULL, err, sizeof err), STORE_OK,
	             "%s", err);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'"), 1);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key = 'k2' "
	                         "AND send_status = 'pending'"), 1);
	cr_assert_eq(store_claim_forwards(y, yo, 1, 100, &fl, err, sizeof err), STORE_OK, "%s", err);
	cr_assert_eq(fl.n, 1);
	cr_assert_eq(fl.items[0].src_tp, b0);
	store_forward_list_clear(&fl);
	envelope_free(&r[0].env);
	envelope_free(&r[1].env);
	store_close(x);
	store_close(y);
	config_free(&cfg);
	h_teardown(&e);
}

/* Two hubs of one group share the partitions of two topics: every
 * (topic, partition) has one owner, and when one hub stops the other takes
 * its partitions at new epochs; every message forwarded once. */
Test(topics, two_replicas_share_the_partitions_of_two_topics, .timeout = 240)
{
	h_env e;
	h_setup(&e, "trepl");
	h_env b = h_on_topic(&e, "b");
	char setting[420], fwd[128];
	snprintf(setting, sizeof setting, "control_topic=%s,%s", e.topic, b.topic);
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	h_control_topic(&e);
	h_control_topic(&b);
	const char *s[] = {setting, NULL};
	pid_t h1 = h_hub_start(&e, s);
	cr_assert(h_wait(&e, "SELECT count(DISTINCT topic) FROM txhub.partitions", "2", WAIT_MS));
	pid_t h2 = h_hub_start(&e, s);
	cr_assert(h_wait(&e, "SELECT count(DISTINCT owner) FROM txhub.partitions", "2", WAIT_MS),
	          "the second hub took no partition");
	enum { N = 40 };
	char vals[2 * N][160];
	const char *want[2 * N];
	send_txs(&e, "r", "a", 0, N, fwd, vals);
	send_txs(&b, "r", "b", 0, N, fwd, vals + N);
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", "80",
	                 WAIT_MS));
	/* hub 1 goes: hub 2 takes its partitions at new epochs */
	char q[300];
	snprintf(q, sizeof q, "SELECT count(*) FROM txhub.partitions WHERE owner LIKE '%%/%d'",
	         (int)h1);
	long n1 = h_count(&e, q), epochs = h_count(&e, "SELECT sum(epoch) FROM txhub.partitions");
	long total = h_count(&e, "SELECT count(*) FROM txhub.partitions");
	cr_assert_gt(n1, 0);
	cr_assert_eq(h_hub_stop(h1), 0);
	char want_n[16];
	snprintf(q, sizeof q, "SELECT count(*) FROM txhub.partitions WHERE owner LIKE '%%/%d'",
	         (int)h2);
	snprintf(want_n, sizeof want_n, "%ld", total);
	cr_assert(h_wait(&e, q, want_n, WAIT_MS), "hub 2 did not take hub 1's partitions");
	cr_assert_geq(h_count(&e, "SELECT sum(epoch) FROM txhub.partitions"), epochs + n1,
	              "taken over without new epochs");
	send_txs(&e, "r", "a", N, 10, fwd, NULL);
	send_txs(&b, "r", "b", N, 10, fwd, NULL);
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", "100",
	                 WAIT_MS));
	for (int i = 0; i < 2 * N; i++)
		want[i] = vals[i];
	check_forwarded_once(&e, fwd, want, 2 * N, 2 * N + 20, 0);
	cr_assert_eq(h_hub_stop(h2), 0);
	h_teardown(&e);
}

Test(topics, exactly_once_across_two_topics, .timeout = 240)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	h_env e;
	h_setup(&e, "teos");
	h_env b = h_on_topic(&e, "b");
	char setting[420], fwd[128];
	snprintf(setting, sizeof setting, "control_topic=%s,%s", e.topic, b.topic);
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	h_control_topic(&e);
	h_control_topic(&b);
	const char *s[] = {setting, "forward.mode=exactly_once", NULL};
	pid_t hub = h_hub_start(&e, s);
	enum { N = 50 };
	char vals[2 * N][160];
	const char *want[2 * N];
	send_txs(&e, "a", "m", 0, N, fwd, vals);
	send_txs(&b, "b", "m", 0, N, fwd, vals + N);
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", "100",
	                 120000));
	/* restarted: the markers of both topics' partitions are found, nothing
	 * goes again */
	cr_assert_eq(h_hub_stop(hub), 0);
	hub = h_hub_start(&e, s);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.partitions WHERE fwd_recovered_epoch = epoch",
	                 "8", 120000), "the lanes of both topics did not take their partitions");
	for (int i = 0; i < 2 * N; i++)
		want[i] = vals[i];
	check_forwarded_once(&e, fwd, want, 2 * N, 2 * N, 1);
	/* the progress topic of a list is txhub.progress, its markers keyed
	 * per topic; the transactional ids are per (topic, partition) */
	char log[256], needle[300];
	h_hub_log(log, sizeof log, &e);
	snprintf(needle, sizeof needle, "transactional.id txhub-%s-%s-0", e.name, b.topic);
	cr_assert_geq(h_log_lines(log, needle), 1, "no lane of %s's partition 0", b.topic);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

/* ---- bad forms: exit 2 naming the key, nothing started ---- */

Test(topics, bad_control_topics_are_refused_with_exit_2, .timeout = 60)
{
	h_env e;
	h_setup(&e, "tbad");
	char many[70 * 8] = "control_topic=";
	for (int i = 0; i < 65; i++) {
		char one[16];
		snprintf(one, sizeof one, "%st%d", i ? "," : "", i);
		strcat(many, one);
	}
	static const char *const bad[][2] = {
		{"control_topic=^a(b", "not a valid regular expression"},
		{"control_topic=a,,b", "item 2 of the list is empty"},
		{"control_topic=a,b,a", "\"a\" is named twice"},
		{"control_topic=a,^b.*", "a pattern stands alone"},
		{"control_topic=a,b c", "not a valid topic name"},
		{NULL, "more than 64 topics"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		const char *s[] = {bad[i][0] ? bad[i][0] : many, NULL};
		pid_t pid = h_hub_start(&e, s);
		int st;
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "%s: exit %d", s[0], WEXITSTATUS(st));
		char log[256], line[1024];
		h_hub_log(log, sizeof log, &e);
		cr_assert_gt(h_log_first(log, "control_topic: ", line, sizeof line), 0,
		             "%s: no line names the key", s[0]);
		cr_assert(strstr(line, bad[i][1]), "%s: %s", s[0], line);
	}
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.partitions"), 0);
	h_teardown(&e);
}

/* ---- migration 0009 on a 0.4.0 database ---- */


/* What a 0.4.0 hub keeps doing while `txhub migrate` runs: batches that
 * insert new rows (without src_topic, which it does not know) and move
 * old ones on, each its own transaction, until told to stop. */
typedef struct {
	const char *conninfo;
	volatile int stop;
	long batches, failed;
	char last_error[256];
} writer;

static void *write_as_040(void *arg)
{
	writer *w = arg;
	PGconn *c = PQconnectdb(w->conninfo);
	if (PQstatus(c) != CONNECTION_OK) {
		w->failed++;
		return NULL;
	}
	for (long i = 0; !w->stop; i++) {
		char q[600];
		snprintf(q, sizeof q, "BEGIN; INSERT INTO txhub.messages (biz_id, message_key, status, "
		         "src_partition, src_offset, next_check_at) SELECT 'new', '%ld-' || g, "
		         "'prepared', g %% 4, %ld, now() + interval '1 day' FROM generate_series(1, 50) g; "
		         "UPDATE txhub.messages SET check_attempts = check_attempts + 1, updated_at = now() "
		         "WHERE biz_id = 'old' AND message_key = 'k' || %ld; COMMIT",
		         i, i, i % 500 + 1);
		PGresult *r = PQexec(c, q);
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			w->failed++;
			snprintf(w->last_error, sizeof w->last_error, "%s", PQerrorMessage(c));
			PQclear(PQexec(c, "ROLLBACK"));
		} else {
			w->batches++;
		}
		PQclear(r);
	}
	PQfinish(c);
	return NULL;
}

Test(topics, migration_of_a_040_database_while_its_hub_writes, .timeout = 300)
{
	h_env e;
	h_setup(&e, "tmig");
	char name[96], conninfo[700], pg[720];
	snprintf(name, sizeof name, "%s_old", e.name);
	PGconn *old = h_fresh_database(name, conninfo, sizeof conninfo);
	/* schema 8, as `txhub migrate` of issue 20 left it, with 200,000 rows
	 * and the partitions of the one control topic */
	h_exec(old, "CREATE SCHEMA txhub");
	h_exec(old, "CREATE TABLE txhub.schema_migrations (version integer PRIMARY KEY, name text "
	            "NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
	for (const migration *m = migrations; m->name && m->version <= 8; m++) {
		h_exec(old, m->sql);
		char q[256];
		snprintf(q, sizeof q, "INSERT INTO txhub.schema_migrations (version, name) VALUES (%d, "
		         "'%s')", m->version, m->name);
		h_exec(old, q);
	}
	h_exec(old, "INSERT INTO txhub.messages (biz_id, message_key, status, send_status, "
	            "src_partition, src_offset) SELECT 'old', 'k' || i, CASE WHEN i <= 1000 THEN "
	            "'prepared' ELSE 'committed' END, CASE WHEN i <= 1000 THEN NULL ELSE 'sent' END, "
	            "i % 4, i FROM generate_series(1, 200000) i");
	char q[600];
	snprintf(q, sizeof q, "INSERT INTO txhub.partitions (topic, partition, epoch, owner) "
	         "SELECT '%s', p, 1, 'old-hub' FROM generate_series(0, 3) p", e.topic);
	h_exec(old, q);
	PGresult *r = PQexec(old, "SELECT pg_relation_filenode('txhub.messages')");
	char filenode[32];
	snprintf(filenode, sizeof filenode, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);

	writer w = {conninfo, 0, 0, 0, ""};
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, write_as_040, &w), 0);
	h_pause_ms(300);
	long before = w.batches;
	snprintf(pg, sizeof pg, "pg=%s", conninfo);
	const char *migrate[] = {"-X", pg, "migrate", NULL};
	static char out[65536], err[65536];
	cr_assert_eq(h_txhub_io(&e, migrate, out, sizeof out, err, sizeof err), 0, "%s", err);
	h_pause_ms(300);
	w.stop = 1;
	pthread_join(th, NULL);
	cr_assert_eq(w.failed, 0, "the 0.4.0 hub's writes failed: %s", w.last_error);
	cr_assert_gt(w.batches, before, "no write went on while migrating");

	/* every row names the topic, none rewritten, nothing lost */
	r = PQexec(old, "SELECT pg_relation_filenode(coalesce(to_regclass('txhub.message_rows'), "
	                "'txhub.messages'::regclass)), "
	                "(SELECT count(*) FROM txhub.messages WHERE biz_id = 'old'), "
	                "(SELECT count(*) FROM txhub.messages WHERE biz_id = 'new'), "
	                "(SELECT count(DISTINCT src_topic) FROM txhub.messages), "
	                "(SELECT min(src_topic) FROM txhub.messages), "
	                "(SELECT max(version) FROM txhub.schema_migrations)");
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(old));
	cr_assert_str_eq(PQgetvalue(r, 0, 0), filenode, "txhub.messages was rewritten");
	cr_assert_str_eq(PQgetvalue(r, 0, 1), "200000");
	cr_assert_eq(atol(PQgetvalue(r, 0, 2)), 50 * w.batches, "inserts lost");
	cr_assert_str_eq(PQgetvalue(r, 0, 3), "1");
	cr_assert_str_eq(PQgetvalue(r, 0, 4), e.topic);
	cr_assert_eq(atoi(PQgetvalue(r, 0, 5)), migrate_latest());
	PQclear(r);

	/* the new hub works on the old rows: a prepared one of 0.4.0 gets its
	 * commit and is forwarded; a new prepare and commit too */
	h_env n = e;
	cr_assert_lt(strlen(conninfo), sizeof n.conninfo);
	memcpy(n.conninfo, conninfo, strlen(conninfo) + 1);
	n.db = old;
	h_exec(old, "UPDATE txhub.messages SET forward_topic = 'fw.' || current_database(), "
	            "payload = 'old-1' WHERE biz_id = 'old' AND message_key = 'k999'");
	h_exec(old, "DELETE FROM txhub.partitions"); /* the group's offsets start it */
	pid_t hub = h_hub_start(&n, NULL);
	send_commit(&n, "old", "k999");
	char fwd[160];
	snprintf(fwd, sizeof fwd, "fw.%s", name);
	send_prepare(&n, "new", "fresh", fwd);
	send_commit(&n, "new", "fresh");
	h_flush();
	char want[200];
	snprintf(want, sizeof want, "committed/sent/%s", e.topic);
	cr_assert(wait_row(&n, "k999", want), "the 0.4.0 row was not forwarded");
	cr_assert(wait_row(&n, "fresh", want));
	cr_assert_eq(h_hub_stop(hub), 0);
	/* migrating again: nothing to do */
	cr_assert_eq(h_txhub_io(&e, migrate, out, sizeof out, err, sizeof err), 0, "%s", err);
	PQfinish(old);
	h_teardown(&e);
}
