/* test_fetchqueue.c: the consumer's fetch queue and group protocol as the
 * librdkafka the hub runs with has them (docs/kafka.md: Which
 * librdkafka). A backlog many times the fetch queue drains whole on the
 * path the library calls for (fetch.queue.backoff.ms from 2.1, the waker
 * thread before), a user's kafka.fetch.queue.backoff.ms stands over the
 * hub's 10 ms; kafka.group.protocol = consumer (KIP-848) is refused below
 * librdkafka 2.12, and with the keys the broker owns under it. */
#include <criterion/criterion.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "httpd.h"

#define BACKLOG 2000

/* One-shot commits m-00000.., each with a payload of about 1 KiB. */
static void send_backlog(h_env *e, const char *fwd)
{
	char pad[1001], buf[1400], mk[32];
	memset(pad, 'x', sizeof pad - 1);
	pad[sizeof pad - 1] = '\0';
	for (int i = 0; i < BACKLOG; i++) {
		snprintf(mk, sizeof mk, "m-%05d", i);
		snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"f\",\"message_key\":\"%s\","
		                          "\"payload\":\"%s\",\"forward\":{\"topic\":\"%s\",\"key\":\"%s\"}}",
		         mk, pad, fwd, mk);
		h_send_str(e, -1, mk, buf);
	}
	h_flush();
}

/* The backlog, sent before the hub starts, is stored and forwarded whole
 * through a fetch queue of a few KiB (queued.max.messages.kbytes = 4, so
 * about 1/500 of it at a time) and fetches of 8 KiB a partition; the hub
 * said at start how it looks at a full queue again (want in its log). */
static void drains(const char *name, const char *const *extra, const char *want)
{
	h_env e;
	h_setup(&e, name);
	char fwd[128], log[256], first[1024];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	send_backlog(&e, fwd);
	const char *settings[12] = {"kafka.queued.max.messages.kbytes=4",
	                            "kafka.max.partition.fetch.bytes=8192", "intake.batch_max=50"};
	for (size_t i = 0; extra && extra[i] && i < 8; i++)
		settings[3 + i] = extra[i];
	pid_t hub = h_hub_start(&e, settings);
	h_hub_log(log, sizeof log, &e);
	char count[32];
	snprintf(count, sizeof count, "%d", BACKLOG);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'committed' "
	                     "AND send_status = 'sent'", count, 240000),
	          "the backlog did not drain: %ld of %d stored",
	          h_count(&e, "SELECT count(*) FROM txhub.messages"), BACKLOG);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages"), BACKLOG);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.rejected"), 0);
	cr_assert_eq(h_log_first(log, "intake: librdkafka ", first, sizeof first), 1,
	             "one line at start names the fetch-queue path");
	cr_assert(strstr(first, want), "want \"%s\" in: %s", want, first);
	cr_assert(strstr(first, rd_kafka_version_str()), "%s", first);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_record *r;
	size_t n = h_read_topic(&e, fwd, 2000, &r);
	static int seen[BACKLOG];
	memset(seen, 0, sizeof seen);
	for (size_t i = 0; i < n; i++) {
		int idx = atoi(r[i].key + 2);
		cr_assert(idx >= 0 && idx < BACKLOG, "%s", r[i].key);
		seen[idx]++;
	}
	for (int i = 0; i < BACKLOG; i++)
		cr_assert_geq(seen[i], 1, "m-%05d was never forwarded", i);
	h_records_free(r, n);
	h_teardown(&e);
}

Test(fetchqueue, a_backlog_far_larger_than_the_fetch_queue_drains_whole, .timeout = 300)
{
	/* librdkafka 2.1 brought fetch.queue.backoff.ms (the hub sets 10 ms);
	 * before it, the waker thread (intake_waker.h) */
	drains("fqdrain", NULL,
	       rd_kafka_version() >= 0x02010000 ? "after fetch.queue.backoff.ms = 10 ms;"
	                                        : "has no fetch.queue.backoff.ms: a waker thread");
}

Test(fetchqueue, a_users_fetch_queue_backoff_stands_over_the_hubs, .timeout = 300)
{
	const char *extra[] = {"kafka.fetch.queue.backoff.ms=50", NULL};
	if (rd_kafka_version() >= 0x02010000) {
		drains("fquser", extra, "after fetch.queue.backoff.ms = 50 ms (kafka.fetch.queue.backoff.ms)");
		return;
	}
	/* a librdkafka without the key refuses it: a configuration error */
	h_env e;
	h_setup(&e, "fquser");
	char errb[2048];
	const char *run[] = {"-X", "kafka.fetch.queue.backoff.ms=50", "run", NULL};
	cr_assert_eq(h_txhub(&e, run, errb, sizeof errb), 2, "%s", errb);
	cr_assert(strstr(errb, "kafka.fetch.queue.backoff.ms"), "%s", errb);
	h_teardown(&e);
}

/* Below librdkafka 2.12 kafka.group.protocol = consumer is refused at
 * start, naming the version needed and the one run; from 2.12 it is taken
 * (chaos::consumer_protocol_join_leave_kill runs it on Apache Kafka 4). */
Test(fetchqueue, the_consumer_group_protocol_needs_librdkafka_2_12, .timeout = 60)
{
	h_env e;
	h_setup(&e, "gproto");
	char errb[2048], runs[64];
	snprintf(runs, sizeof runs, "this hub runs librdkafka %d.%d.%d", (rd_kafka_version() >> 24) & 0xff,
	         (rd_kafka_version() >> 16) & 0xff, (rd_kafka_version() >> 8) & 0xff);
	const char *check[] = {"-X", "kafka.group.protocol=consumer", "migrate", NULL};
	int rc = h_txhub(&e, check, errb, sizeof errb);
	if (rd_kafka_version() < 0x020c0000) {
		cr_assert_eq(rc, 2, "%s", errb);
		cr_assert(strstr(errb, "kafka.group.protocol: consumer (KIP-848) needs librdkafka 2.12 "
		                       "or later"), "%s", errb);
		cr_assert(strstr(errb, runs), "want \"%s\" in: %s", runs, errb);
		const char *run[] = {"-X", "kafka.group.protocol=consumer", "run", NULL};
		cr_assert_eq(h_txhub(&e, run, errb, sizeof errb), 2, "%s", errb);
		cr_assert(strstr(errb, "needs librdkafka 2.12 or later"), "%s", errb);
	} else {
		cr_assert_eq(rc, 0, "%s", errb);
	}
	h_teardown(&e);
}

/* With the consumer protocol the broker owns the group's time-outs and
 * assignor: those kafka.* keys are refused at start with what replaces
 * them, not when the consumer is made. */
Test(fetchqueue, the_consumer_group_protocol_refuses_the_keys_the_broker_owns, .timeout = 60)
{
	if (rd_kafka_version() < 0x020c0000)
		cr_skip_test("needs librdkafka 2.12 or later, and this build runs %s "
		             "(fetchqueue::the_consumer_group_protocol_needs_librdkafka_2_12 runs instead)",
		             rd_kafka_version_str());
	h_env e;
	h_setup(&e, "gpkeys");
	const char *keys[][2] = {
		{"kafka.session.timeout.ms=6000", "group.consumer.session.timeout.ms"},
		{"kafka.heartbeat.interval.ms=500", "group.consumer.heartbeat.interval.ms"},
		{"kafka.partition.assignment.strategy=cooperative-sticky", "group.remote.assignor"},
	};
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		char errb[2048], key[64];
		const char *run[] = {"-X", "kafka.group.protocol=consumer", "-X", keys[i][0], "run", NULL};
		cr_assert_eq(h_txhub(&e, run, errb, sizeof errb), 2, "%s: %s", keys[i][0], errb);
		snprintf(key, sizeof key, "%.*s", (int)(strchr(keys[i][0], '=') - keys[i][0]), keys[i][0]);
		cr_assert(strstr(errb, key), "want %s in: %s", key, errb);
		cr_assert(strstr(errb, "not with kafka.group.protocol = consumer"), "%s", errb);
		cr_assert(strstr(errb, keys[i][1]), "want %s in: %s", keys[i][1], errb);
	}
	h_teardown(&e);
}

/* On an Apache Kafka before 4.0 a consumer of that protocol never joins its
 * group, and librdkafka says nothing: /readyz says what may be why. */
Test(fetchqueue, the_consumer_group_protocol_on_kafka_before_4_says_what_it_needs, .timeout = 90)
{
	if (rd_kafka_version() < 0x020c0000)
		cr_skip_test("needs librdkafka 2.12 or later, and this build runs %s",
		             rd_kafka_version_str());
	if (!h_real_kafka() || h_kafka_major() >= 4)
		cr_skip_test("needs Apache Kafka before 4.0 (TXHUB_TEST_KAFKA_DIR from deploy/kafka.sh "
		             "start DIR, 3.9.1 by default)");
	h_env e;
	h_setup(&e, "gpold");
	h_control_topic(&e);
	char listen[64];
	int port = h_free_port();
	snprintf(listen, sizeof listen, "http.listen=127.0.0.1:%d", port);
	const char *settings[] = {listen, "kafka.group.protocol=consumer", NULL};
	pid_t hub = h_hub_start(&e, settings);
	const char *needles[] = {"the consumer has not joined its group yet",
	                         "kafka.group.protocol = consumer (KIP-848) needs Apache Kafka 4.0 "
	                         "or later", NULL};
	h_wait_not_ready(port, needles, 60000);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

/* Static membership under the consumer protocol: the broker refuses a
 * member whose kafka.group.instance.id a member it has not let go still
 * holds (a replica restarted at once after a crash), for good. The hub
 * stops, saying so (exit 1, the alert kafka_fatal), rather than run on
 * with a dead consumer; started again once the broker ended the dead
 * member's session, it takes the partitions. */
Test(fetchqueue, a_static_member_restarted_before_its_session_ended_stops_and_says_why,
     .timeout = 120)
{
	const char *missing = h_consumer_protocol_missing();
	if (missing)
		cr_skip_test("kafka.group.protocol = consumer %s", missing);
	h_env e;
	h_setup(&e, "gpstatic");
	h_control_topic(&e);
	const char *settings[] = {"kafka.group.protocol=consumer", "kafka.group.instance.id=hub-a",
	                          NULL};
	pid_t a = h_hub_start(&e, settings);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.partitions WHERE epoch = 1", "4", 60000));
	h_hub_kill(a); /* the broker holds its membership for its session (6 s) */
	pid_t b = h_hub_start(&e, settings);
	char log[256], first[2048];
	h_hub_log(log, sizeof log, &e);
	cr_assert_eq(h_wait_exit(b, 60000), 1, "the hub refused its instance id ran on");
	cr_assert_eq(h_log_first(log, "hub: the Kafka consumer failed for good", first, sizeof first),
	             1);
	cr_assert(strstr(first, "instance ID"), "%s", first);
	cr_assert_eq(h_log_lines(log, "ALERT kafka_fatal"), 1);
	/* once the dead member's session is over, the same id joins: started
	 * again as a supervisor would each time it stops, until it does */
	pid_t c = -1;
	int taken = 0, refused = 0;
	for (int i = 0; i < 60 && !taken; i++) {
		c = h_hub_start(&e, settings);
		for (;;) {
			int st;
			if (h_count(&e, "SELECT count(*) FROM txhub.partitions WHERE epoch >= 2") == 4) {
				taken = 1;
				break;
			}
			if (waitpid(c, &st, WNOHANG) == c) {
				cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "a refused hub exits 1");
				refused++;
				h_pause_ms(500);
				break;
			}
			h_pause_ms(100);
		}
	}
	cr_assert(taken, "the partitions were not taken again (%d refused starts)", refused);
	cr_assert_eq(h_hub_stop(c), 0);
	h_teardown(&e);
}
