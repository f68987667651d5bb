/* test_limits.c: limits that must agree (issue 15 §2). An envelope just
 * under envelope.max_bytes is forwarded and consumed; a forward the broker
 * refuses, or to a topic it does not have, ends with the broker's reason,
 * whole; a forward delivered after failing clears last_error; partitions
 * added to the control topic are read within 30 s. */
#include <criterion/criterion.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define WAIT_MS 60000

/* Apache Kafka from deploy/kafka.sh (CI's third pass); the embedded broker
 * (librdkafka 2.0.2's mock cluster) has no admin requests and no size
 * limits of its own. */
static const char *real_kafka(void) { return getenv("TXHUB_TEST_KAFKA_DIR"); }

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	*(rd_kafka_resp_err_t *)opaque = m->err;
}

/* Produce one record to any topic and wait for it: the harness's producer
 * writes only to the control topic, and stops at librdkafka's default 1 MB. */
static void produce(const h_env *e, const char *topic, int partition, const void *v, size_t len)
{
	char es[512];
	rd_kafka_resp_err_t got = RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION;
	/* a partition just added may not be in a new client's first metadata
	 * yet (a loaded machine): asked again until it is, 30 s at most */
	for (int tries = 0; got == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION && tries < 60; tries++) {
		if (tries)
			h_pause_ms(500);
		got = RD_KAFKA_RESP_ERR__IN_PROGRESS;
		rd_kafka_conf_t *c = rd_kafka_conf_new();
		rd_kafka_conf_set(c, "bootstrap.servers", e->brokers, es, sizeof es);
		rd_kafka_conf_set(c, "message.max.bytes", "2000000", es, sizeof es);
		rd_kafka_conf_set_dr_msg_cb(c, on_delivery);
		rd_kafka_conf_set_opaque(c, &got);
		rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, es, sizeof es);
		cr_assert_not_null(rk, "%s", es);
		rd_kafka_resp_err_t err = rd_kafka_producev(
			rk, RD_KAFKA_V_TOPIC(topic),
			RD_KAFKA_V_PARTITION(partition < 0 ? RD_KAFKA_PARTITION_UA : partition),
			RD_KAFKA_V_VALUE((void *)v, len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
			RD_KAFKA_V_END);
		if (err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION)
			got = err;
		else
			cr_assert_eq(err, 0, "produce to %s: %s", topic, rd_kafka_err2str(err));
		rd_kafka_flush(rk, 30000);
		rd_kafka_destroy(rk);
	}
	cr_assert_eq(got, 0, "delivery to %s: %s", topic, rd_kafka_err2str(got));
}

/* A one-shot commit of exactly total bytes whose payload is a JSON string
 * of characters [a-zA-Z0-9] (incompressible enough that lz4 does not hide
 * its size); *payload points at the payload's characters, *plen counts
 * them. */
static char *oneshot(const char *mk, const char *topic, size_t total, const char **payload,
                     size_t *plen)
{
	static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	char head[512];
	int hl = snprintf(head, sizeof head, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"%s\","
	                                     "\"forward\":{\"topic\":\"%s\"},\"payload\":\"", mk, topic);
	cr_assert_gt(total, (size_t)hl + 2);
	size_t n = total - (size_t)hl - 2;
	char *s = malloc(total + 1);
	cr_assert_not_null(s);
	memcpy(s, head, (size_t)hl);
	srand(15);
	for (size_t i = 0; i < n; i++)
		s[(size_t)hl + i] = alnum[rand() % (int)(sizeof alnum - 1)];
	memcpy(s + hl + n, "\"}", 3);
	*payload = s + hl;
	*plen = n;
	return s;
}

static const char *row(const char *mk, const char *what)
{
	static char sql[512];
	snprintf(sql, sizeof sql, "SELECT %s FROM txhub.messages WHERE message_key = '%s'", what, mk);
	return sql;
}

/* Create topic with partitions (config key=value unless NULL), or, when
 * partitions is negative, grow the existing topic to -partitions. */
static void admin(const h_env *e, const char *topic, int partitions, const char *key,
                  const char *value)
{
	char es[512];
	rd_kafka_resp_err_t err;
	if (partitions > 0) {
		err = (rd_kafka_resp_err_t)h_create_topic(e, topic, partitions, key, value, es,
		                                          sizeof es);
	} else {
		rd_kafka_conf_t *c = rd_kafka_conf_new();
		rd_kafka_conf_set(c, "bootstrap.servers", e->brokers, es, sizeof es);
		rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, es, sizeof es);
		cr_assert_not_null(rk, "%s", es);
		rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
		rd_kafka_NewPartitions_t *np = rd_kafka_NewPartitions_new(topic, (size_t)-partitions, es,
		                                                          sizeof es);
		cr_assert_not_null(np, "%s", es);
		rd_kafka_CreatePartitions(rk, &np, 1, NULL, q);
		rd_kafka_NewPartitions_destroy(np);
		rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
		cr_assert_not_null(ev, "no admin result within 30 s");
		err = rd_kafka_event_error(ev);
		snprintf(es, sizeof es, "%s",
		         rd_kafka_event_error_string(ev) ? rd_kafka_event_error_string(ev) : "");
		size_t n = 0;
		const rd_kafka_CreatePartitions_result_t *res = rd_kafka_event_CreatePartitions_result(ev);
		const rd_kafka_topic_result_t **t =
			res ? rd_kafka_CreatePartitions_result_topics(res, &n) : NULL;
		if (!err && n == 1 && rd_kafka_topic_result_error(t[0])) {
			err = rd_kafka_topic_result_error(t[0]);
			snprintf(es, sizeof es, "%s", rd_kafka_topic_result_error_string(t[0]));
		}
		rd_kafka_event_destroy(ev);
		rd_kafka_queue_destroy(q);
		rd_kafka_destroy(rk);
	}
	cr_assert_eq(err, 0, "admin request on %s: %s: %s", topic, rd_kafka_err2name(err), es);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* With every default, an envelope of 1,040,000 bytes (under
 * envelope.max_bytes, 1 MiB) is stored, forwarded and read back whole:
 * librdkafka's own message.max.bytes (1,000,000) no longer stops it. */
Test(limits, an_envelope_just_under_max_bytes_is_forwarded_and_consumed, .timeout = 180)
{
	h_env e;
	h_setup(&e, "big");
	char fwd[128];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	const char *payload;
	size_t plen;
	char *env = oneshot("big", fwd, 1040000, &payload, &plen);
	pid_t hub = h_hub_start(&e, NULL);
	produce(&e, e.topic, -1, env, 1040000);
	cr_assert(h_wait(&e, row("big", "status || '/' || send_status"), "committed/sent", WAIT_MS),
	          "the envelope was not forwarded (see /tmp/txhub-%s-*.log)", e.name);
	h_record *r;
	size_t n = h_read_topic(&e, fwd, 3000, &r);
	cr_assert_eq(n, 1);
	cr_assert_eq(r[0].value_len, plen, "forwarded %zu bytes, want %zu", r[0].value_len, plen);
	cr_assert(memcmp(r[0].value, payload, plen) == 0, "the forwarded bytes differ");
	h_records_free(r, n);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.rejected"), 0);
	cr_assert_eq(h_hub_stop(hub), 0);
	free(env);
	h_teardown(&e);
}

/* A broker that refuses a record as too large (here a topic with
 * max.message.bytes 100000) ends the forward failed with its reason. */
Test(limits, a_forward_the_broker_refuses_as_too_large_ends_failed_with_its_reason,
     .timeout = 180)
{
	if (!real_kafka())
		cr_skip_test("needs Apache Kafka (TXHUB_TEST_KAFKA_DIR): the embedded broker has no "
		             "size limit and no CreateTopics");
	h_env e;
	h_setup(&e, "toolarge");
	char fwd[128];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	admin(&e, fwd, 1, "max.message.bytes", "100000");
	const char *settings[] = {"forward.max_attempts=2", "forward.backoff_ms=100",
	                          "forward.backoff_max_ms=200", NULL};
	pid_t hub = h_hub_start(&e, settings);
	const char *payload;
	size_t plen;
	char *env = oneshot("large", fwd, 200000, &payload, &plen);
	produce(&e, e.topic, -1, env, 200000);
	free(env);
	cr_assert(h_wait(&e, row("large", "send_status"), "failed", WAIT_MS));
	char buf[1024];
	h_query(&e, row("large", "last_error"), buf, sizeof buf);
	cr_assert(strstr(buf, fwd) && strstr(buf, "Broker: Message size too large") &&
	          strstr(buf, "max.message.bytes"), "last_error: %s", buf);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

/* A topic name of 249 bytes (Kafka's longest) that the broker does not
 * have, ending in a marker that a cut would lose. */
static void missing_name(const h_env *e, char *out, size_t outsz, const char *prefix)
{
	cr_assert_gt(outsz, 249);
	int n = snprintf(out, outsz, "%s.%s.", prefix, e->name);
	memset(out + n, 'x', (size_t)(249 - n - 4));
	memcpy(out + 245, ".end", 5);
	cr_assert_eq(strlen(out), 249);
}

/* A broker without the topic, that can then get it. Apache Kafka (with the
 * hub's kafka.allow.auto.create.topics=false, as if the broker had
 * auto.create.topics.enable=false), or else a mock cluster of the test's
 * own: librdkafka 2.0.2's mock answers only Metadata v0..v2, which creates
 * any topic asked about, so there the topic is made to answer "unknown
 * topic or partition" instead, as a missing one does. */
typedef struct {
	rd_kafka_t *rk;
	rd_kafka_mock_cluster_t *mc;
} missing;

static void missing_start(h_env *e, missing *m, const char *topic)
{
	memset(m, 0, sizeof *m);
	if (real_kafka())
		return;
	char es[512];
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	rd_kafka_conf_set(c, "log_level", "3", es, sizeof es);
	m->rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, es, sizeof es);
	cr_assert_not_null(m->rk, "%s", es);
	m->mc = rd_kafka_mock_cluster_new(m->rk, 1);
	cr_assert_not_null(m->mc);
	rd_kafka_mock_topic_set_error(m->mc, topic, RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART);
	snprintf(e->brokers, sizeof e->brokers, "%s", rd_kafka_mock_cluster_bootstraps(m->mc));
}

/* The topic exists from now on. */
static void missing_appear(const h_env *e, missing *m, const char *topic)
{
	if (m->mc)
		rd_kafka_mock_topic_set_error(m->mc, topic, RD_KAFKA_RESP_ERR_NO_ERROR);
	else
		produce(e, topic, -1, "first", 5); /* a producer that may create topics */
}

static void missing_stop(missing *m)
{
	if (m->mc)
		rd_kafka_mock_cluster_destroy(m->mc);
	if (m->rk)
		rd_kafka_destroy(m->rk);
}

/* A forward to a topic the broker does not have ends failed with the
 * broker's "unknown topic" reason, the whole topic name in it, rather than
 * "Local: Message timed out" (librdkafka waited 30 s for the topic to
 * appear, as long as the delivery time-out), and not cut at 160 bytes. */
Test(limits, a_forward_to_a_missing_topic_ends_failed_naming_it, .timeout = 180)
{
	h_env e;
	h_setup(&e, "notopic");
	char topic[256], buf[2048];
	missing_name(&e, topic, sizeof topic, "nx");
	missing m;
	missing_start(&e, &m, topic);
	const char *settings[] = {"kafka.message.timeout.ms=6000", "forward.max_attempts=2",
	                          "forward.backoff_ms=100", "forward.backoff_max_ms=200",
	                          real_kafka() ? "kafka.allow.auto.create.topics=false" : NULL, NULL};
	pid_t hub = h_hub_start(&e, settings);
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"nx\","
	                          "\"payload\":\"x\",\"forward\":{\"topic\":\"%s\"}}", topic);
	h_send_str(&e, -1, "nx", buf);
	h_flush();
	cr_assert(h_wait(&e, row("nx", "send_status"), "failed", WAIT_MS));
	h_query(&e, row("nx", "last_error"), buf, sizeof buf);
	cr_assert(strstr(buf, topic), "the topic name is not whole in last_error: %s", buf);
	cr_assert(strstr(buf, "the broker has no such topic") && strstr(buf, "Unknown topic"),
	          "last_error: %s", buf);
	cr_assert_null(strstr(buf, "timed out"), "last_error: %s", buf);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
	missing_stop(&m);
}

/* A forward that failed (its topic was missing) and is then delivered,
 * once the topic exists, keeps no last_error. */
Test(limits, a_forward_delivered_after_failing_clears_last_error, .timeout = 180)
{
	h_env e;
	h_setup(&e, "late");
	char topic[256], buf[2048];
	missing_name(&e, topic, sizeof topic, "late");
	missing m;
	missing_start(&e, &m, topic);
	const char *settings[] = {"kafka.message.timeout.ms=6000", "forward.max_attempts=100",
	                          "forward.backoff_ms=200", "forward.backoff_max_ms=1000",
	                          real_kafka() ? "kafka.allow.auto.create.topics=false" : NULL, NULL};
	pid_t hub = h_hub_start(&e, settings);
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"late\","
	                          "\"payload\":\"x\",\"forward\":{\"topic\":\"%s\"}}", topic);
	h_send_str(&e, -1, "late", buf);
	h_flush();
	cr_assert(h_wait(&e, row("late", "last_error IS NOT NULL AND send_attempts > 0"), "t",
	                 WAIT_MS), "the forward never failed");
	missing_appear(&e, &m, topic);
	cr_assert(h_wait(&e, row("late", "send_status || '/' || coalesce(last_error, 'NULL')"),
	                 "sent/NULL", WAIT_MS));
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
	missing_stop(&m);
}

/* Partitions added to the control topic of a running hub are read within
 * 30 s (librdkafka's default metadata refresh took 5 minutes). */
Test(limits, partitions_added_to_the_control_topic_are_read_within_30_s, .timeout = 180)
{
	if (!real_kafka())
		cr_skip_test("needs Apache Kafka (TXHUB_TEST_KAFKA_DIR): the embedded broker "
		             "(librdkafka 2.0.2's mock cluster) cannot add partitions to a topic");
	h_env e;
	h_setup(&e, "addparts");
	char fwd[128], buf[1024];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	admin(&e, e.topic, 2, NULL, NULL);
	pid_t hub = h_hub_start(&e, NULL);
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"p0\","
	                          "\"payload\":\"x\",\"forward\":{\"topic\":\"%s\"}}", fwd);
	produce(&e, e.topic, 0, buf, strlen(buf));
	cr_assert(h_wait(&e, row("p0", "send_status"), "sent", WAIT_MS));

	admin(&e, e.topic, -4, NULL, NULL);
	double t0 = now_s();
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"p3\","
	                          "\"payload\":\"x\",\"forward\":{\"topic\":\"%s\"}}", fwd);
	produce(&e, e.topic, 3, buf, strlen(buf));
	cr_assert(h_wait(&e, row("p3", "status"), "committed", 40000),
	          "the envelope in the new partition was not read");
	double took = now_s() - t0;
	cr_log_info("limits: new control partition read %.1f s after it was added", took);
	fprintf(stderr, "limits: new control partition read %.1f s after it was added\n", took);
	cr_assert_leq(took, 30.0, "the new partition was read after %.1f s", took);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.partitions WHERE partition = 3"), 1);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}
