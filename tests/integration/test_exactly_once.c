/* test_exactly_once.c: forward.mode = exactly_once against Apache Kafka
 * (devbroker has no transactions: skipped there).
 *
 * A hub dies at the two points that matter (TXHUB_FAILPOINT): with a Kafka
 * transaction open, and with one committed but not yet recorded in
 * PostgreSQL. The next hub must abort the first (a read_committed consumer
 * never sees it) and find the second from the progress marker (it is not
 * sent again). And a forward the broker refuses for its own sake (too
 * large for its topic) leaves its run: the others go through, once. */
#include <criterion/criterion.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const char *const EOS[] = {"forward.mode=exactly_once", "log.level=debug",
                                  "intake.batch_max=50", "checkback.first_after_ms=600000",
                                  NULL};

/* n transactions m-0.. to fwd; every tenth rolled back */
static void send_txs(h_env *e, const char *fwd, int n, int payload_bytes)
{
	char *buf = malloc((size_t)payload_bytes + 512);
	char *pad = malloc((size_t)payload_bytes + 1);
	cr_assert(buf && pad);
	memset(pad, 'x', (size_t)payload_bytes);
	pad[payload_bytes] = '\0';
	for (int i = 0; i < n; i++) {
		char mk[32];
		snprintf(mk, sizeof mk, "m-%d", i);
		snprintf(buf, (size_t)payload_bytes + 512,
		         "{\"type\":\"prepare\",\"biz_id\":\"eos\",\"message_key\":\"%s\","
		         "\"payload\":\"%d:%s\",\"forward\":{\"topic\":\"%s\",\"key\":\"%s\"}}",
		         mk, i, pad, fwd, mk);
		h_send_str(e, -1, mk, buf);
		snprintf(buf, 512, "{\"type\":\"%s\",\"biz_id\":\"eos\",\"message_key\":\"%s\"}",
		         i % 10 == 9 ? "rollback" : "commit", mk);
		h_send_str(e, -1, mk, buf);
	}
	h_flush();
	free(buf);
	free(pad);
}

/* Every committed one of n read exactly once, no rolled-back one. */
static void check_once(h_env *e, const char *fwd, int n)
{
	h_record *recs;
	size_t got = h_read_topic_committed(e, fwd, 3000, &recs);
	int *seen = calloc((size_t)n, sizeof *seen);
	for (size_t k = 0; k < got; k++) {
		int i = atoi(recs[k].key + 2);
		cr_assert(i >= 0 && i < n, "%s", recs[k].key);
		cr_assert(i % 10 != 9, "rolled-back %s was forwarded", recs[k].key);
		seen[i]++;
	}
	for (int i = 0; i < n; i++)
		if (i % 10 != 9)
			cr_assert_eq(seen[i], 1, "m-%d read %d times by a read_committed consumer", i,
			             seen[i]);
	free(seen);
	h_records_free(recs, got);
}

/* A hub that dies at failpoint fp while forwarding n transactions; then a
 * hub without it that finishes the work. Returns the rows the first one
 * left pending. */
static long crash_and_recover(h_env *e, const char *fwd, int n, const char *fp)
{
	send_txs(e, fwd, n, 10);
	setenv("TXHUB_FAILPOINT", fp, 1);
	pid_t a = h_hub_start(e, EOS);
	unsetenv("TXHUB_FAILPOINT");
	cr_assert_eq(h_wait_exit(a, 60000), 86, "the hub did not stop at failpoint %s", fp);
	long pending = h_count(e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'pending'");
	pid_t b = h_hub_start(e, EOS);
	char want[16];
	snprintf(want, sizeof want, "%d", n - n / 10);
	cr_assert(h_wait(e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", want,
	                 90000), "not every committed message was sent after the restart");
	cr_assert_eq(h_hub_stop(b), 0);
	check_once(e, fwd, n);
	return pending;
}

Test(exactly_once, a_transaction_committed_and_not_recorded_is_not_sent_again, .timeout = 240)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	h_env e;
	h_setup(&e, "eos_after");
	char fwd[128], log[256];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	long pending = crash_and_recover(&e, fwd, 400, "lane_after_commit");
	/* the dead hub's committed run was still pending in PostgreSQL, and the
	 * new owner found it sent from the progress marker */
	cr_assert_gt(pending, 0);
	h_hub_log(log, sizeof log, &e);
	cr_assert_gt(h_log_lines(log, "forward(s) of the previous owner found sent") -
	                 h_log_lines(log, " 0 forward(s) of the previous owner found sent"), 0,
	             "no lane found a committed run from its progress marker");
	h_teardown(&e);
}

Test(exactly_once, the_open_transaction_of_a_dead_hub_is_never_read, .timeout = 240)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	h_env e;
	h_setup(&e, "eos_before");
	char fwd[128];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	long pending = crash_and_recover(&e, fwd, 400, "lane_before_commit");
	cr_assert_eq(pending, 400 - 40, "nothing may count as sent before a commit");
	/* the aborted records are in the log: a read_uncommitted reader sees
	 * them as well as the ones sent again */
	h_record *recs;
	size_t all = h_read_topic_uncommitted(&e, fwd, 3000, &recs);
	h_records_free(recs, all);
	cr_assert_gt(all, 360, "the dead hub's open transaction held no records");
	h_teardown(&e);
}

Test(exactly_once, a_forward_the_broker_refuses_leaves_its_transaction, .timeout = 240)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	h_env e;
	h_setup(&e, "eos_refused");
	char fwd[128];
	snprintf(fwd, sizeof fwd, "%s.small", e.topic);
	/* max.message.bytes small enough to refuse a record */
	char es[512];
	int err = h_create_topic(&e, fwd, 2, "max.message.bytes", "4000", es, sizeof es);
	cr_assert_eq(err, 0, "creating %s: %s", fwd, es);
	send_txs(&e, fwd, 60, 10);
	/* one more, whose payload (random hex: lz4 cannot shrink it below the
	 * topic's 4,000 bytes) the broker refuses */
	char big[12000], hex[9001];
	srand(7);
	for (int i = 0; i < 9000; i++)
		hex[i] = "0123456789abcdef"[rand() % 16];
	hex[9000] = '\0';
	snprintf(big, sizeof big, "{\"type\":\"prepare\",\"biz_id\":\"eos\",\"message_key\":\"big\","
	                          "\"payload\":\"%s\",\"forward\":{\"topic\":\"%s\"}}", hex, fwd);
	h_send_str(&e, -1, "big", big);
	h_send_str(&e, -1, "big", "{\"type\":\"commit\",\"biz_id\":\"eos\",\"message_key\":\"big\"}");
	h_flush();
	const char *s[] = {"forward.mode=exactly_once", "forward.max_attempts=2",
	                   "forward.backoff_ms=200", NULL};
	pid_t hub = h_hub_start(&e, s);
	cr_assert(h_wait(&e, "SELECT send_status || ' ' || send_attempts FROM txhub.messages "
	                     "WHERE message_key = 'big'", "failed 2", 90000));
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", "54",
	                 60000));
	char why[512];
	h_query(&e, "SELECT last_error FROM txhub.messages WHERE message_key = 'big'", why,
	        sizeof why);
	cr_assert(strstr(why, "too large") || strstr(why, "TOO_LARGE"), "last_error: %s", why);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_record *recs;
	size_t got = h_read_topic_committed(&e, fwd, 3000, &recs);
	int *seen = calloc(60, sizeof *seen);
	for (size_t k = 0; k < got; k++) {
		cr_assert_str_neq(recs[k].key, "", "the refused record was read");
		int i = atoi(recs[k].key + 2);
		cr_assert(i >= 0 && i < 60 && i % 10 != 9, "%s", recs[k].key);
		seen[i]++;
	}
	for (int i = 0; i < 60; i++)
		if (i % 10 != 9)
			cr_assert_eq(seen[i], 1, "m-%d read %d times", i, seen[i]);
	free(seen);
	h_records_free(recs, got);
	h_teardown(&e);
}

/* The database is recreated (here: emptied) while the control and progress
 * topics stay: the markers in the progress topic name sequences of the old
 * database. Trusting them would mark the new database's first forwards
 * sent without sending them. */
Test(exactly_once, a_progress_marker_of_another_database_is_not_trusted, .timeout = 240)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	h_env e;
	h_setup(&e, "eos_newdb");
	char fwd[128], log[256];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	send_txs(&e, fwd, 200, 10);
	pid_t a = h_hub_start(&e, EOS);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", "180",
	                 60000));
	cr_assert_eq(h_hub_stop(a), 0);
	PQclear(PQexec(e.db, "DELETE FROM txhub.messages; DELETE FROM txhub.partitions"));
	/* 200 more, other keys: n-0.. */
	for (int i = 0; i < 200; i++) {
		char mk[32], buf[512];
		snprintf(mk, sizeof mk, "n-%d", i);
		snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"eos\",\"message_key\":\"%s\","
		                          "\"payload\":\"%d\",\"forward\":{\"topic\":\"%s\",\"key\":\"%s\"}}",
		         mk, i, fwd, mk);
		h_send_str(&e, -1, mk, buf);
	}
	h_flush();
	pid_t b = h_hub_start(&e, EOS);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent' "
	                     "AND message_key LIKE 'n-%'", "200", 60000));
	cr_assert_eq(h_hub_stop(b), 0);
	h_hub_log(log, sizeof log, &e);
	cr_assert_gt(h_log_lines(log, "was not written for this database"), 0);
	h_record *recs;
	size_t got = h_read_topic_committed(&e, fwd, 3000, &recs);
	int seen[200] = {0};
	for (size_t k = 0; k < got; k++)
		if (recs[k].key[0] == 'n')
			seen[atoi(recs[k].key + 2)]++;
	for (int i = 0; i < 200; i++)
		cr_assert_eq(seen[i], 1, "n-%d read %d times", i, seen[i]);
	h_records_free(recs, got);
	h_teardown(&e);
}
