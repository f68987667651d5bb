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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define EOS_SETTINGS                                                                   \
	"forward.mode=exactly_once", "log.level=debug", "intake.batch_max=50",             \
		"checkback.first_after_ms=600000"
static const char *const EOS[] = {EOS_SETTINGS, NULL};

/* transactions m-from..m-(to-1) to fwd; every tenth rolled back */
static void send_range(h_env *e, const char *fwd, int from, int to, int payload_bytes)
{
	char *buf = malloc((size_t)payload_bytes + 512);
	char *pad = malloc((size_t)payload_bytes + 1);
	cr_assert(buf && pad);
	memset(pad, 'x', (size_t)payload_bytes);
	pad[payload_bytes] = '\0';
	for (int i = from; i < to; i++) {
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

/* n transactions m-0.. to fwd; every tenth rolled back */
static void send_txs(h_env *e, const char *fwd, int n, int payload_bytes)
{
	send_range(e, fwd, 0, n, payload_bytes);
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

/* A hub (started with opts) that dies at failpoint fp while forwarding n
 * transactions; then a hub without it that finishes the work. Returns the
 * rows the first one left pending. */
static long crash_with(h_env *e, const char *fwd, int n, const char *fp,
                       const char *const *opts)
{
	send_txs(e, fwd, n, 10);
	setenv("TXHUB_FAILPOINT", fp, 1);
	pid_t a = h_hub_start(e, opts);
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

static long crash_and_recover(h_env *e, const char *fwd, int n, const char *fp)
{
	return crash_with(e, fwd, n, fp, EOS);
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

/* exactly_once with Kafka's transaction timeout longer than a test: an
 * open transaction left behind stays open unless the next owner ends it. */
static const char *const LONG_TXN[] = {EOS_SETTINGS, "kafka.transaction.timeout.ms=900000", NULL};

/* A hub killed with the forwards of an open transaction on the broker and
 * nothing else done since (failpoint lane_forwards_out): the next owner
 * must end that transaction, or every read_committed consumer of those
 * forward partitions stalls until Kafka's transaction timeout, here longer
 * than the test (the forwards it sends again commit behind the open ones;
 * check_once would miss them). Before the marker went first, the next
 * owner found no marker of it to fence: the chaos suite's three replicas
 * missed forwards once in CI. */
Test(exactly_once, a_hub_killed_with_forwards_out_stalls_no_reader, .timeout = 240)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	h_env e;
	h_setup(&e, "eos_fwd_out");
	char fwd[128], log[256];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	long pending = crash_with(&e, fwd, 400, "lane_forwards_out", LONG_TXN);
	cr_assert_eq(pending, 400 - 40, "nothing may count as sent before a commit");
	h_hub_log(log, sizeof log, &e);
	cr_assert_gt(h_log_lines(log, "was still open in"), 0,
	             "the next owner fenced no open transaction of the dead hub's");
	h_teardown(&e);
}

/* The same in a lane's later run, where it does not wait for its marker
 * on the broker (failpoint lane_forwards_out_no_marker: the forwards go
 * out, the marker never): the next owner finds the dead hub's
 * transactional.id in the last committed marker and fences it. Without
 * that the forwards' transaction stays open (Kafka's timeout here is
 * longer than the test) and a read_committed consumer reads nothing sent
 * after it. */
Test(exactly_once, a_hub_killed_with_forwards_out_and_no_marker_stalls_no_reader, .timeout = 240)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	h_env e;
	h_setup(&e, "eos_no_marker");
	char fwd[128], log[256];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	send_range(&e, fwd, 0, 100, 10);
	setenv("TXHUB_FAILPOINT", "lane_forwards_out_no_marker", 1);
	pid_t a = h_hub_start(&e, LONG_TXN);
	unsetenv("TXHUB_FAILPOINT");
	/* a first run committed (its marker awaited), then more: the next run
	 * of a lane that committed one dies */
	cr_assert(h_wait(&e, "SELECT count(*) > 0 FROM txhub.messages WHERE send_status = 'sent'",
	                 "t", 60000), "nothing was sent");
	send_range(&e, fwd, 100, 400, 10);
	cr_assert_eq(h_wait_exit(a, 60000), 86, "the hub did not stop at its failpoint");
	pid_t b = h_hub_start(&e, EOS);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", "360",
	                 90000), "not every committed message was sent after the restart");
	cr_assert_eq(h_hub_stop(b), 0);
	check_once(&e, fwd, 400);
	h_hub_log(log, sizeof log, &e);
	cr_assert_gt(h_log_lines(log, "which wrote the partition's last progress marker"), 0,
	             "the next owner fenced no transactional.id of the dead hub's");
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
	/* max.message.bytes small enough to refuse a record; one partition, so
	 * that the batches the broker fails for it hold the other control
	 * partitions' forwards too */
	char es[512];
	int err = h_create_topic(&e, fwd, 1, "max.message.bytes", "4000", es, sizeof es);
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
	/* the broker fails the whole batch the big record is in, with other
	 * partitions' forwards to the same forward partition (one producer for
	 * the replica): none of those is charged a failed attempt */
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key <> 'big' "
	                         "AND last_error IS NOT NULL"), 0, "%s",
	             h_query(&e, "SELECT string_agg(message_key || ': ' || last_error, '; ') FROM "
	                         "txhub.messages WHERE message_key <> 'big' AND last_error IS NOT NULL",
	                     why, sizeof why));
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

/* Whether process pid is stopped (SIGSTOP): its state in /proc. */
static int stopped(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')'); /* "pid (comm) S ..." */
	return p && p[1] == ' ' && p[2] == 'T';
}

/* A replica paused past its session time-out while it holds an open
 * transaction of forwards (flushed to the broker, its offsets not yet
 * sent: failpoint txn_stop_before_offsets), its partitions taken by
 * another replica that forwards the same messages, then let go on: the
 * zombie commits nothing, its log says why, and a read_committed consumer
 * reads every committed message once. */
Test(exactly_once, a_paused_replica_that_lost_its_partitions_commits_nothing, .timeout = 300)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	h_env e;
	h_setup(&e, "eos_zombie");
	char fwd[128], zlog[256], blog[256];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	send_txs(&e, fwd, 400, 10);
	setenv("TXHUB_FAILPOINT", "txn_stop_before_offsets", 1);
	pid_t a = h_hub_start(&e, EOS);
	unsetenv("TXHUB_FAILPOINT");
	h_hub_log(zlog, sizeof zlog, &e);
	int waited = 0;
	while (!stopped(a) && waited < 60000) {
		h_pause_ms(100);
		waited += 100;
	}
	cr_assert(stopped(a), "the hub did not stop at the failpoint");
	cr_assert_eq(h_log_lines(zlog, "stopping (SIGSTOP) with a transaction of"), 1);
	/* what it holds is in the forward topic, uncommitted */
	h_record *recs;
	size_t held = h_read_topic_uncommitted(&e, fwd, 3000, &recs);
	h_records_free(recs, held);
	cr_assert_gt(held, 0, "the paused hub's open transaction holds no forwards");

	pid_t b = h_hub_start(&e, EOS);
	h_hub_log(blog, sizeof blog, &e);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", "360",
	                 120000), "the new owner did not forward every committed message");
	kill(a, SIGCONT);
	/* the zombie's transaction is aborted, and it says why */
	for (waited = 0; waited < 60000 && h_log_lines(zlog, "is aborted: fenced") == 0;
	     waited += 200)
		h_pause_ms(200);
	cr_assert_eq(h_hub_stop(b), 0);
	cr_assert_eq(h_hub_stop(a), 0);
	check_once(&e, fwd, 400);
	cr_assert_gt(h_log_lines(zlog, "is aborted: fenced"), 0,
	             "the paused hub's log does not say its transaction was aborted, fenced");
	h_teardown(&e);
}

/* Whether a transaction is open on a partition of topic (its last stable
 * offset below its high watermark). */
static int txn_open_on(h_env *e, const char *topic, int partitions)
{
	int open = 0;
	rd_kafka_t *c[2];
	for (int k = 0; k < 2; k++) {
		char es[256];
		rd_kafka_conf_t *conf = rd_kafka_conf_new();
		rd_kafka_conf_set(conf, "bootstrap.servers", e->brokers, es, sizeof es);
		rd_kafka_conf_set(conf, "group.id", "eos-watermarks", es, sizeof es);
		rd_kafka_conf_set(conf, "isolation.level", k ? "read_committed" : "read_uncommitted", es,
		                  sizeof es);
		c[k] = rd_kafka_new(RD_KAFKA_CONSUMER, conf, es, sizeof es);
		cr_assert_not_null(c[k], "%s", es);
	}
	for (int p = 0; p < partitions && !open; p++) {
		int64_t lo, hw, lso;
		cr_assert_eq(rd_kafka_query_watermark_offsets(c[0], topic, p, &lo, &hw, 10000), 0);
		cr_assert_eq(rd_kafka_query_watermark_offsets(c[1], topic, p, &lo, &lso, 10000), 0);
		open = lso < hw;
	}
	rd_kafka_destroy(c[0]);
	rd_kafka_destroy(c[1]);
	return open;
}

/* A rolling upgrade: the partitions' last owner ran a hub of one
 * transactional producer per partition (TXHUB_TEST_OLD_TXHUB, e.g. a build
 * of f200f43), and was paused in the middle of draining a backlog, with
 * transactions of forwards open. This build takes the partitions, fences
 * the old per-partition transactional ids (their open transactions are
 * aborted) and forwards; the old hub, let go on, commits nothing: a
 * read_committed consumer reads every committed message once. */
Test(exactly_once, a_rolling_upgrade_from_per_partition_ids_forwards_nothing_twice,
     .timeout = 300)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	const char *old = getenv("TXHUB_TEST_OLD_TXHUB");
	if (!old || !*old)
		cr_skip_test("needs TXHUB_TEST_OLD_TXHUB, a txhub of one producer per partition");
	h_env e;
	h_setup(&e, "eos_upgrade");
	char fwd[128], nlog[256], bin[1024];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	snprintf(bin, sizeof bin, "%s", getenv("TXHUB_BIN"));
	int n = 10000;
	send_txs(&e, fwd, n, 50); /* (a paused hub with a large result unread would hold its locks) */
	setenv("TXHUB_BIN", old, 1);
	pid_t a = h_hub_start(&e, EOS);
	setenv("TXHUB_BIN", bin, 1);
	char olog[256];
	h_hub_log(olog, sizeof olog, &e);
	/* paused while it drains, with a transaction open (tried again until
	 * one is: its lanes' transactions are open most of the time then) */
	long sent = 0;
	for (int waited = 0; sent < 500 && waited < 120000; waited += 20) {
		h_pause_ms(20);
		sent = h_count(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'");
	}
	int held = 0;
	for (int tries = 0; !held && tries < 100; tries++) {
		kill(a, SIGSTOP);
		h_pause_ms(300); /* (what it sent reaches the broker) */
		if (!(held = txn_open_on(&e, fwd, 4))) {
			kill(a, SIGCONT);
			h_pause_ms(tries * 7 % 50);
		}
	}
	cr_assert(held, "the old hub was never paused with a transaction open");
	sent = h_count(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'");
	cr_assert_lt(sent, n - n / 10, "the old hub forwarded everything before it was paused");
	pid_t b = h_hub_start(&e, EOS);
	h_hub_log(nlog, sizeof nlog, &e);
	char want[16];
	snprintf(want, sizeof want, "%d", n - n / 10);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", want,
	                 180000), "the new hub did not forward every committed message");
	cr_assert_geq(h_log_lines(nlog, "a hub of one producer per partition's (what it left open "
	                                "is aborted)"), 4);
	kill(a, SIGCONT);
	/* what it held open was aborted: its commit fails, fenced */
	int waited = 0;
	while (h_log_lines(olog, "the lane stops") == 0 && waited < 60000) {
		h_pause_ms(200);
		waited += 200;
	}
	cr_assert_gt(h_log_lines(olog, "the lane stops"), 0, "the old hub's lanes went on");
	h_pause_ms(2000); /* (anything it could still commit would land meanwhile) */
	h_hub_kill(a);
	cr_assert_eq(h_hub_stop(b), 0);
	check_once(&e, fwd, n);
	h_teardown(&e);
}
