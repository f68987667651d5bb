/* test_lane_stuck.c: forward.mode = exactly_once when the broker refuses a
 * lane what it needs to take its partition (issue 19, item 11). Each lane
 * then retries for good and nothing is forwarded; after
 * alert.lane_stuck_ms the hub must say so: the alert lane_stuck once per
 * partition naming the topic and the broker's reason,
 * txhub_forward_lanes_stuck, and /readyz 503 with a one-line reason. When
 * the broker lets it, the lane takes its partition, the forward goes out
 * and all is clear again.
 *
 * Two brokers refuse: devbroker told to deny the progress topic (its
 * metadata answers TOPIC_AUTHORIZATION_FAILED, as a broker does for a topic
 * an ACL hides), and Apache Kafka with SASL/SCRAM and KRaft's
 * StandardAuthorizer (deploy/kafka.sh start DIR --sasl), the hub's principal
 * granted everything docs/kafka.md lists but the progress topic. The second
 * runs in CI's pass against Apache Kafka (TXHUB_TEST_KAFKA_DIR set), and is
 * skipped elsewhere. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "kafka.h"
#include "httpd.h"

/* ---- a hub in exactly_once mode whose lanes cannot take their partitions ---- */

typedef struct {
	h_env e;
	h_webhook *w;
	int port;
	char progress[160], fwd[160];
	pid_t hub;
} stuck;

/* Start the hub (kafka: its own kafka.* settings, NULL-terminated) and send
 * one committed message to forward. */
static void start_hub(stuck *s, const char *const *kafka)
{
	snprintf(s->progress, sizeof s->progress, "%s.progress", s->e.topic);
	snprintf(s->fwd, sizeof s->fwd, "%s.out", s->e.topic);
	s->w = h_webhook_start();
	cr_assert_not_null(s->w);
	s->port = h_free_port();
	char listen[64], hook[128];
	snprintf(listen, sizeof listen, "http.listen=127.0.0.1:%d", s->port);
	snprintf(hook, sizeof hook, "alert.webhook=http://127.0.0.1:%d/alert", h_webhook_port(s->w));
	const char *settings[32] = {"forward.mode=exactly_once", "alert.lane_stuck_ms=1000", listen,
	                            hook, "checkback.first_after_ms=600000", NULL};
	size_t n = 5;
	for (; kafka && *kafka && n < 31; kafka++)
		settings[n++] = *kafka;
	settings[n] = NULL;
	s->hub = h_hub_start(&s->e, settings);
	char buf[512];
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"k-1\","
	         "\"payload\":\"x\",\"forward\":{\"topic\":\"%s\",\"key\":\"k-1\"}}", s->fwd);
	h_send_str(&s->e, -1, "k-1", buf);
	h_flush();
}

/* /readyz 503 naming the progress topic and reason, on one line; the
 * gauge and the alert counter at the control topic's partition count;
 * one lane_stuck alert per partition, however long it lasts. */
static void check_stuck(stuck *s, const char *reason, int partitions)
{
	char *b = NULL, log[256];
	const char *needles[] = {"exactly_once: ", s->progress, reason, NULL};
	h_wait_not_ready(s->port, needles, 60000);
	cr_assert(h_wait(&s->e, "SELECT send_status FROM txhub.messages WHERE message_key = 'k-1'",
	                 "pending", 10000));
	/* every partition's episode raised its alert ... */
	for (int waited = 0; h_webhook_count(s->w) < partitions && waited < 30000; waited += 200)
		h_pause_ms(200);
	/* ... and no other: the lanes retry every few seconds */
	h_pause_ms(6000);
	cr_assert_eq(h_webhook_count(s->w), partitions, "%d alerts", h_webhook_count(s->w));
	for (int i = 0; i < partitions; i++) {
		char topic[200], body[2048];
		snprintf(topic, sizeof topic, "\"topic\":\"%s\"", s->progress);
		h_webhook_body(s->w, i, body, sizeof body);
		cr_assert(strstr(body, "\"kind\":\"lane_stuck\"") && strstr(body, topic) &&
		          strstr(body, reason) && strstr(body, "not taken for"), "%s", body);
	}
	cr_assert_eq(h_http_get(s->port, "/metrics", &b), 200);
	cr_assert_eq(h_series(b, "txhub_forward_lanes_stuck"), partitions, "%s", b);
	cr_assert_eq(h_series(b, "txhub_alerts_total{kind=\"lane_stuck\"}"), partitions);
	cr_assert_eq(h_series(b, "txhub_ready"), 0);
	free(b);
	cr_assert_eq(h_log_lines(h_hub_log(log, sizeof log, &s->e), "ALERT lane_stuck"), partitions);
}

/* The lanes take their partitions: the forward goes out, /readyz is 200,
 * the gauge 0, and no alert more. */
static void check_clear(stuck *s, int partitions)
{
	char *b = NULL, log[256];
	cr_assert(h_wait(&s->e, "SELECT send_status FROM txhub.messages WHERE message_key = 'k-1'",
	                 "sent", 60000));
	cr_assert(h_http_wait(s->port, "/readyz", 200, 30000, &b), "/readyz: %s", b);
	cr_assert_str_eq(b, "ready\n");
	free(b);
	b = NULL;
	cr_assert_eq(h_http_get(s->port, "/metrics", &b), 200);
	cr_assert_eq(h_series(b, "txhub_forward_lanes_stuck"), 0, "%s", b);
	free(b);
	h_record *r;
	size_t n = h_read_topic_committed(&s->e, s->fwd, 3000, &r);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(r[0].key, "k-1");
	h_records_free(r, n);
	cr_assert_eq(h_webhook_count(s->w), partitions);
	cr_assert_eq(h_log_lines(h_hub_log(log, sizeof log, &s->e), "the lane_stuck alert is over"),
	             partitions);
}

static void stop_hub(stuck *s)
{
	cr_assert_eq(h_hub_stop(s->hub), 0);
	h_webhook_stop(s->w);
}

Test(lane_stuck, progress_topic_denied_by_devbroker, .timeout = 240)
{
	stuck s;
	h_setup(&s.e, "stuck");
	char progress[160];
	snprintf(progress, sizeof progress, "%s.progress", s.e.topic);
	const char *deny[] = {"--deny-topic", progress, NULL};
	FILE *commands;
	pid_t broker = h_devbroker_start(&s.e, deny, &commands);
	start_hub(&s, NULL);
	/* devbroker makes the control topic with 4 partitions */
	check_stuck(&s, "Topic authorization failed", 4);
	fprintf(commands, "allow %s\n", progress);
	fflush(commands);
	check_clear(&s, 4);
	stop_hub(&s);
	h_teardown(&s.e);
	h_devbroker_stop(broker, commands);
}

/* ---- Apache Kafka with SASL/SCRAM and ACLs ---- */

static char kafka_dir[256]; /* the test's own broker, stopped by stop_kafka() */

static void stop_kafka(void)
{
	if (!kafka_dir[0])
		return;
	const char *stop[] = {"stop", kafka_dir, NULL};
	h_kafka_sh(stop, NULL, 0);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", kafka_dir);
	cr_expect_eq(system(cmd), 0);
	kafka_dir[0] = '\0';
}

/* A line on stderr at each step, with the seconds since the test began:
 * under CI's load this test's broker start (kafka.sh) takes long, and a
 * time-out must say which step it stopped in. */
static void step(const char *what)
{
	static struct timespec t0;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (!t0.tv_sec)
		t0 = now;
	fprintf(stderr, "lane_stuck: %5.1f s: %s\n",
	        (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9, what);
}

/* The first line of DIR/sasl/<user>.password. */
static void password_of(const char *user, char *out, size_t outsz)
{
	char path[400];
	snprintf(path, sizeof path, "%s/sasl/%s.password", kafka_dir, user);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	cr_assert_not_null(fgets(out, (int)outsz, f));
	out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

/* ACLs for User:txhub, granted by the administrator (s->e.kafka) through
 * the Admin API: kafka-acls.sh would start a JVM for each, minutes of this
 * test on a loaded machine. */
static void grant(const stuck *s, const char *ops, const char *kind, const char *name)
{
	h_kafka_allow(&s->e, "User:txhub", ops, kind, name);
}

/* Write and Describe on the transactional ids with these two prefixes, in
 * one kafka-acls.sh --add (librdkafka 2.0.2's Admin API has no
 * transactional-id resource). */
static void grant_txn_ids(const char *a, const char *b)
{
	const char *args[] = {"acls", kafka_dir, "--add", "--allow-principal", "User:txhub",
	                      "--operation", "Write", "--operation", "Describe",
	                      "--transactional-id", a, "--transactional-id", b,
	                      "--resource-pattern-type", "prefixed", NULL};
	cr_assert_eq(h_kafka_sh(args, NULL, 0), 0, "kafka-acls.sh on %s* and %s* failed", a, b);
}

/* `txhub status` as the hub's principal (docs/kafka.md: Kafka ACLs: Describe
 * on the control topic is all it needs): the lag of every partition. */
static void check_status_lag(stuck *s, const char *const *kafka)
{
	const char *args[16];
	size_t n = 0;
	for (; *kafka && n < 12; kafka++) {
		args[n++] = "-X";
		args[n++] = *kafka;
	}
	args[n++] = "status";
	args[n++] = "--json";
	args[n] = NULL;
	static char out[65536];
	char err[4096];
	cJSON *doc = NULL;
	/* status gives the brokers OPS_LAG_BUDGET_MS to answer, and says so in
	 * lag_note when they did not (a loaded machine, a SASL login on a cold
	 * broker): that note is asked again, any other is a failure */
	for (int tries = 0;; tries++) {
		cr_assert_eq(h_txhub_io(&s->e, args, out, sizeof out, err, sizeof err), 0, "%s", err);
		doc = cJSON_Parse(out);
		cr_assert_not_null(doc, "%s", out);
		const char *note = cJSON_GetStringValue(cJSON_GetObjectItem(doc, "lag_note"));
		if (!note || tries == 30 || !strstr(note, "did not answer"))
			break;
		cJSON_Delete(doc);
	}
	cr_assert(cJSON_IsNull(cJSON_GetObjectItem(doc, "lag_note")), "lag_note: %s",
	          cJSON_GetStringValue(cJSON_GetObjectItem(doc, "lag_note")));
	const cJSON *parts = cJSON_GetObjectItem(doc, "partitions"), *p;
	cr_assert_eq(cJSON_GetArraySize(parts), 4, "%s", out);
	cJSON_ArrayForEach(p, parts)
		cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(p, "lag")), "%s", out);
	cJSON_Delete(doc);
}

Test(lane_stuck, progress_topic_denied_by_kafka_acls, .timeout = 600, .fini = stop_kafka)
{
	if (!h_real_kafka())
		cr_skip_test("needs Apache Kafka (TXHUB_TEST_KAFKA_DIR): deploy/kafka.sh start --sasl");
	/* a broker of the suite's Kafka version, whose SCRAM logins need
	 * librdkafka 2.6.1 or later on 4.x (docs/kafka.md: Which librdkafka) */
	char version[32];
	if (*h_kafka_version(version, sizeof version))
		setenv("TXHUB_KAFKA_VERSION", version, 1);
	if (h_kafka_major() >= 4 && rd_kafka_version() < KAFKA_SCRAM_FIXED_VERSION)
		cr_skip_test("librdkafka %s cannot log in to Apache Kafka %s with SCRAM (2.6.1 or "
		             "later can: librdkafka #4895)", rd_kafka_version_str(), version);
	snprintf(kafka_dir, sizeof kafka_dir, "/tmp/txhub-kafka-sasl.XXXXXX");
	cr_assert_not_null(mkdtemp(kafka_dir));
	char brokers[256], admin_pw[128], hub_pw[128];
	const char *start[] = {"start", kafka_dir, "--sasl", "--user", "txhub", NULL};
	step("starting Apache Kafka with SASL");
	cr_assert_eq(h_kafka_sh(start, brokers, sizeof brokers), 0, "deploy/kafka.sh start --sasl");
	step("started");
	password_of("admin", admin_pw, sizeof admin_pw);
	password_of("txhub", hub_pw, sizeof hub_pw);

	stuck s;
	h_setup(&s.e, "acl");
	snprintf(s.e.brokers, sizeof s.e.brokers, "%s", brokers);
	const char *admin[] = {"security.protocol", "SASL_PLAINTEXT", "sasl.mechanisms",
	                       "SCRAM-SHA-512", "sasl.username", "admin", "sasl.password", admin_pw,
	                       NULL};
	memcpy(s.e.kafka, admin, sizeof admin);
	/* the topics, by the administrator: the hub may not create them */
	char es[512], fwd[160];
	h_control_topic(&s.e);
	snprintf(fwd, sizeof fwd, "%s.out", s.e.topic);
	cr_assert_eq(h_create_topic(&s.e, fwd, 1, NULL, NULL, es, sizeof es), 0, "%s", es);
	/* the ACLs of docs/kafka.md for forward.mode = exactly_once ("Kafka
	 * ACLs"), but the progress topic's and the transactional ids' */
	grant(&s, "Read,Describe", "topic", s.e.topic);
	grant(&s, "Read", "group", s.e.name);
	grant(&s, "Write,Describe", "topic", fwd);
	step("granted all but the progress topic and the transactional ids");
	char pw[200];
	snprintf(pw, sizeof pw, "kafka.sasl.password=%s", hub_pw);
	const char *kafka[] = {"kafka.security.protocol=SASL_PLAINTEXT",
	                       "kafka.sasl.mechanisms=SCRAM-SHA-512", "kafka.sasl.username=txhub", pw,
	                       NULL};
	start_hub(&s, kafka);
	check_stuck(&s, "Topic authorization failed", 4);
	step("stuck on the progress topic");
	check_status_lag(&s, kafka);
	step("txhub status answered");
	/* the progress topic granted, the replica's producer fails at
	 * init_transactions: the same episode (no more alerts), another
	 * reason */
	grant(&s, "Read,Write,Create,Describe", "topic", s.progress);
	char txn[200], old[200];
	snprintf(txn, sizeof txn, "txhub-%s-r-", s.e.name);
	const char *txn_denied[] = {"exactly_once: ", txn, "Transactional Id authorization failed",
	                            NULL};
	h_wait_not_ready(s.port, txn_denied, 60000);
	step("stuck on the transactional id");
	cr_assert_eq(h_webhook_count(s.w), 4);
	snprintf(old, sizeof old, "txhub-%s-%s-", s.e.name, s.e.topic);
	grant_txn_ids(txn, old);
	step("granted the transactional ids");
	check_clear(&s, 4);
	step("clear");
	stop_hub(&s);
	step("stopped");
	h_teardown(&s.e);
}
