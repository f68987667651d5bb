/* test_dlq_once.c: dead letters exactly once under forward.mode =
 * exactly_once (issue 23 §4, docs/troubleshooting.md: Dead-letter topic),
 * against Apache Kafka (the embedded broker has no transactions: skipped
 * there).
 *
 * The hub dies (TXHUB_FAILPOINT, as kill -9 would leave it) at each point of
 * a dead-letter batch: produced in its transaction but not recorded as
 * pending; recorded as pending but not committed; committed but not
 * recorded as dead-lettered. After a restart a read_committed consumer of
 * the dead-letter topic reads exactly one dead letter per parked row, and
 * every row ends dead-lettered with no pending entry left. A pending entry
 * whose record names another message (bad input) is cleared with a warning
 * and its row produced again; one of an earlier park (a redrive and a new
 * park since) does not count for the new park; a failing dead-letter topic
 * holds nothing else up, and each row goes there once when it works.
 *
 * One transactional producer per replica dead-letters for all its
 * partitions, and writes its transactional.id in each partition's row;
 * the next owner fences the id it finds there (or, with none, the
 * per-partition id of the hubs before, a rolling upgrade) before it
 * resolves what is pending: a transaction the last owner left open, with
 * a dead letter in it, is aborted at once and commits nothing after. */
#include <criterion/criterion.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define N 6

typedef struct {
	char dlq[128], dlqset[160], missing[128];
} dlq_names;

/* The dead-letter topic (1 partition) and the control topic made; N
 * committed messages d-0.. to a topic that does not exist (auto-creation
 * off: each is parked after two attempts), d-i on control partition
 * i % spread. */
static void setup_on(h_env *e, const char *name, dlq_names *nm, int spread)
{
	char es[256], buf[512];
	h_setup(e, name);
	snprintf(nm->dlq, sizeof nm->dlq, "dlq.%s", e->name);
	snprintf(nm->missing, sizeof nm->missing, "missing.%s", e->name);
	snprintf(nm->dlqset, sizeof nm->dlqset, "forward.dead_letter_topic=%s", nm->dlq);
	cr_assert_eq(h_create_topic(e, nm->dlq, 1, NULL, NULL, es, sizeof es), 0, "%s", es);
	h_control_topic(e);
	for (int i = 0; i < N; i++) {
		char mk[16];
		snprintf(mk, sizeof mk, "d-%d", i);
		snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"%s\","
		         "\"payload\":\"p%d\",\"forward\":{\"topic\":\"%s\",\"key\":\"%s\"}}", mk, i,
		         nm->missing, mk);
		h_send_str(e, i % spread, mk, buf);
	}
	h_flush();
}

/* setup_on, every message on partition 0. */
static void setup(h_env *e, const char *name, dlq_names *nm) { setup_on(e, name, nm, 1); }

static pid_t start(h_env *e, const dlq_names *nm)
{
	const char *settings[] = {"forward.mode=exactly_once", "kafka.allow.auto.create.topics=false",
	                          "forward.backoff_ms=100", "forward.backoff_max_ms=200",
	                          "forward.max_attempts=2", "log.level=debug", nm->dlqset, NULL};
	return h_hub_start(e, settings);
}

/* The dead letters a read_committed consumer reads, per message; every
 * one of d-0.. exactly once. */
static void check_once(h_env *e, const dlq_names *nm)
{
	h_record *r;
	size_t got = h_read_topic_committed(e, nm->dlq, 3000, &r);
	int seen[N] = {0};
	for (size_t k = 0; k < got; k++) {
		const char *mk = strstr(r[k].headers, "txhub-message-key=d-");
		cr_assert_not_null(mk, "%s", r[k].headers);
		int i = atoi(mk + strlen("txhub-message-key=d-"));
		cr_assert(i >= 0 && i < N, "%s", r[k].headers);
		cr_assert(strstr(r[k].headers, "txhub-dlq-topic=missing."), "%s", r[k].headers);
		seen[i]++;
	}
	h_records_free(r, got);
	for (int i = 0; i < N; i++)
		cr_assert_eq(seen[i], 1, "the dead letter of d-%d read %d times by a read_committed "
		             "consumer (%zu in all)", i, seen[i], got);
}

/* The hub dies at failpoint fp in its first dead-letter batch; returns the
 * pending entries it left and the dead letters a read_committed reader
 * then sees (*committed) and a read_uncommitted one (*all). Then a hub
 * without it finishes: every row dead-lettered once. */
static long crash_and_recover(h_env *e, const dlq_names *nm, const char *fp, long *committed,
                              long *all)
{
	setenv("TXHUB_FAILPOINT", fp, 1);
	pid_t a = start(e, nm);
	unsetenv("TXHUB_FAILPOINT");
	cr_assert_eq(h_wait_exit(a, 120000), 86, "the hub did not stop at failpoint %s", fp);
	long pending = h_count(e, "SELECT count(*) FROM txhub.dead_letter_pending");
	h_record *r;
	*committed = (long)h_read_topic_committed(e, nm->dlq, 2000, &r);
	h_records_free(r, (size_t)*committed);
	*all = (long)h_read_topic_uncommitted(e, nm->dlq, 2000, &r);
	h_records_free(r, (size_t)*all);
	cr_assert_eq(h_count(e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'failed' "
	                        "AND dead_lettered_at IS NOT NULL"), 0,
	             "a row was recorded dead-lettered before the failpoint");
	pid_t b = start(e, nm);
	char want[16];
	snprintf(want, sizeof want, "%d", N);
	cr_assert(h_wait(e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'failed' "
	                    "AND dead_lettered_at IS NOT NULL", want, 120000),
	          "not every parked row was dead-lettered after the restart");
	cr_assert(h_wait(e, "SELECT count(*) FROM txhub.dead_letter_pending", "0", 30000));
	cr_assert_eq(h_hub_stop(b), 0);
	check_once(e, nm);
	cr_assert_eq(h_count(e, "SELECT count(*) FROM txhub.history WHERE event = 'dead_lettered'"),
	             N, "one dead_lettered history row per park");
	return pending;
}

Test(dlq_once, killed_after_producing_before_recording_pending, .timeout = 300)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	h_env e;
	dlq_names nm;
	setup(&e, "dlqo_prod", &nm);
	long committed, all;
	long pending = crash_and_recover(&e, &nm, "dead_letter_produced", &committed, &all);
	cr_assert_eq(pending, 0);
	cr_assert_eq(committed, 0, "the open transaction's records were read as committed");
	cr_assert_gt(all, 0, "the dead hub's transaction held no records");
	h_teardown(&e);
}

Test(dlq_once, killed_after_recording_pending_before_the_commit, .timeout = 300)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	h_env e;
	dlq_names nm;
	setup(&e, "dlqo_pend", &nm);
	long committed, all;
	long pending = crash_and_recover(&e, &nm, "dead_letter_pending", &committed, &all);
	cr_assert_gt(pending, 0, "the dead hub left no pending entry");
	cr_assert_eq(committed, 0);
	cr_assert_gt(all, 0);
	char log[256];
	h_hub_log(log, sizeof log, &e);
	cr_assert_geq(h_log_lines(log, "pending dead letter(s) of an earlier run: 0 found committed"),
	              1, "the restarted hub did not find the pending entries aborted");
	h_teardown(&e);
}

Test(dlq_once, killed_after_the_commit_before_recording_it, .timeout = 300)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	h_env e;
	dlq_names nm;
	setup(&e, "dlqo_comm", &nm);
	long committed, all;
	long pending = crash_and_recover(&e, &nm, "dead_letter_committed", &committed, &all);
	cr_assert_gt(pending, 0);
	cr_assert_eq(committed, pending, "committed, as many as pending: %ld, %ld", committed,
	             pending);
	char log[256], first[2048];
	h_hub_log(log, sizeof log, &e);
	cr_assert_geq(h_log_first(log, "pending dead letter(s) of an earlier run", first,
	                          sizeof first), 1);
	char want[64];
	snprintf(want, sizeof want, "%ld found committed (recorded), 0 not", pending);
	cr_assert(strstr(first, want), "%s", first);
	h_teardown(&e);
}

/* Every row dead-lettered by a hub, which stops; then row mk made to look
 * as if its dead letter were pending at offset 0 (d-0's record) for the
 * park at parked_at (SQL of the row), and a hub started again, which
 * settles it: mk dead-lettered again (N + 1 dead letters, the last
 * mk's), nothing left pending. The log of that hub into log. */
static void pend_at_first_record(h_env *e, const dlq_names *nm, const char *mk,
                                 const char *parked_at, char *log, size_t logsz)
{
	char want[16], sql[1024];
	h_record *r;
	pid_t hub = start(e, nm);
	snprintf(want, sizeof want, "%d", N);
	cr_assert(h_wait(e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'failed' "
	                    "AND dead_lettered_at IS NOT NULL", want, 120000));
	cr_assert_eq(h_hub_stop(hub), 0);
	snprintf(sql, sizeof sql,
	         "INSERT INTO txhub.dead_letter_pending (biz_id, message_key, parked_at, src_topic, "
	         "src_partition, topic, partition, \"offset\") SELECT biz_id, message_key, %s, "
	         "src_topic, src_partition, '%s', 0, 0 FROM txhub.message_rows "
	         "WHERE message_key = '%s'", parked_at, nm->dlq, mk);
	h_exec(e->db, sql);
	snprintf(sql, sizeof sql, "UPDATE txhub.message_rows SET dead_lettered_at = NULL "
	         "WHERE message_key = '%s'", mk);
	h_exec(e->db, sql);
	size_t n = h_read_topic_committed(e, nm->dlq, 2000, &r);
	cr_assert_eq(n, N);
	cr_assert(strstr(r[0].headers, "txhub-message-key=d-0\n"), "%s", r[0].headers);
	h_records_free(r, n);
	hub = start(e, nm);
	snprintf(sql, sizeof sql, "SELECT count(*) FROM txhub.messages WHERE message_key = '%s' "
	         "AND dead_lettered_at IS NOT NULL", mk);
	cr_assert(h_wait(e, sql, "1", 60000));
	cr_assert_eq(h_hub_stop(hub), 0);
	cr_assert_eq(h_count(e, "SELECT count(*) FROM txhub.dead_letter_pending"), 0);
	h_hub_log(log, logsz, e);
	n = h_read_topic_committed(e, nm->dlq, 2000, &r);
	cr_assert_eq(n, N + 1, "%s produced again: %zu", mk, n);
	snprintf(want, sizeof want, "=%s\n", mk);
	cr_assert(strstr(r[N].headers, want), "%s", r[N].headers);
	h_records_free(r, n);
}

/* Bad input: a pending entry whose record is another message's. */
Test(dlq_once, a_pending_entry_pointing_at_another_record_is_produced_again, .timeout = 300)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	h_env e;
	dlq_names nm;
	setup(&e, "dlqo_bad", &nm);
	char log[256];
	pend_at_first_record(&e, &nm, "d-1", "updated_at", log, sizeof log);
	cr_assert_eq(h_log_lines(log, "dead-letter: biz_id=b message_key=d-1 the record at "), 1);
	cr_assert_eq(h_log_lines(log, "is not the dead letter that was pending there"), 1);
	h_teardown(&e);
}

/* A pending entry of an earlier park (the row was redriven and parked again
 * since) does not mark the new park dead-lettered, though its record was
 * committed: the new park gets a dead letter of its own. */
Test(dlq_once, a_pending_entry_of_an_earlier_park_does_not_count_for_a_new_one, .timeout = 300)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	h_env e;
	dlq_names nm;
	setup(&e, "dlqo_park", &nm);
	char log[256], first[2048];
	pend_at_first_record(&e, &nm, "d-0", "updated_at - interval '1 minute'", log, sizeof log);
	cr_assert_geq(h_log_first(log, "pending dead letter(s) of an earlier run", first,
	                          sizeof first), 1);
	cr_assert(strstr(first, "1 found committed"), "%s", first);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'd-0' "
	                         "AND event = 'dead_lettered'"), 2);
	h_teardown(&e);
}

/* A dead-letter topic that fails (missing, auto-creation off) under
 * exactly_once: alerted in the history, the hub goes on forwarding; once
 * the topic exists, each parked row is dead-lettered once. */
Test(dlq_once, a_failing_dead_letter_topic_does_not_hold_the_hub, .timeout = 300)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	h_env e;
	dlq_names nm;
	char es[256], ok[128], buf[512];
	h_setup(&e, "dlqo_fail");
	snprintf(nm.dlq, sizeof nm.dlq, "dlq.%s", e.name);
	snprintf(nm.missing, sizeof nm.missing, "missing.%s", e.name);
	snprintf(nm.dlqset, sizeof nm.dlqset, "forward.dead_letter_topic=%s", nm.dlq);
	snprintf(ok, sizeof ok, "ok.%s", e.name);
	cr_assert_eq(h_create_topic(&e, ok, 1, NULL, NULL, es, sizeof es), 0, "%s", es);
	h_control_topic(&e);
	for (int i = 0; i < N; i++) {
		snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"d-%d\","
		         "\"payload\":\"p\",\"forward\":{\"topic\":\"%s\"}}", i, nm.missing);
		h_send_str(&e, 0, "d", buf);
	}
	h_flush();
	pid_t hub = start(&e, &nm);
	cr_assert(h_wait(&e, "SELECT count(DISTINCT message_key) FROM txhub.history "
	                     "WHERE event = 'dead_letter_failed'", "6", 120000));
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"ok-1\","
	         "\"payload\":\"p\",\"forward\":{\"topic\":\"%s\"}}", ok);
	h_send_str(&e, 1, "ok", buf);
	h_flush();
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages WHERE message_key = 'ok-1'",
	                 "sent", 60000), "the hub did not go on forwarding");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages "
	                         "WHERE dead_lettered_at IS NOT NULL"), 0);
	cr_assert_eq(h_create_topic(&e, nm.dlq, 1, NULL, NULL, es, sizeof es), 0, "%s", es);
	char want[16];
	snprintf(want, sizeof want, "%d", N);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'failed' "
	                     "AND dead_lettered_at IS NOT NULL", want, 150000));
	cr_assert_eq(h_hub_stop(hub), 0);
	check_once(&e, &nm);
	char log[256];
	h_hub_log(log, sizeof log, &e);
	cr_assert_geq(h_log_lines(log, "works again"), 1);
	h_teardown(&e);
}

/* One transactional producer per replica: parked rows on every control
 * partition are dead-lettered by one transactional.id, named after the
 * replica's, and each partition's row names it. */
Test(dlq_once, one_producer_dead_letters_for_every_partition, .timeout = 300)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	h_env e;
	dlq_names nm;
	int parts = h_control_partitions();
	cr_assert_geq(parts, 2);
	setup_on(&e, "dlqo_one", &nm, parts);
	pid_t hub = start(&e, &nm);
	char want[16], sql[512];
	snprintf(want, sizeof want, "%d", N);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'failed' "
	                     "AND dead_lettered_at IS NOT NULL", want, 120000));
	cr_assert_eq(h_hub_stop(hub), 0);
	check_once(&e, &nm);
	int with = N < parts ? N : parts;
	snprintf(sql, sizeof sql, "SELECT count(*) FROM txhub.partitions WHERE topic = '%s' AND "
	         "dl_txn_id LIKE 'txhub-%s-r-%%-dlq'", e.topic, e.name);
	cr_assert_eq(h_count(&e, sql), with, "not every partition with dead letters names the "
	             "replica's dead-letter transactional.id");
	cr_assert_eq(h_count(&e, "SELECT count(DISTINCT dl_txn_id) FROM txhub.partitions"), 1,
	             "the partitions name more than one dead-letter transactional.id");
	char log[256];
	h_hub_log(log, sizeof log, &e);
	cr_assert_geq(h_log_lines(log, "dead-letter: the transactional producer is up"), 1);
	h_teardown(&e);
}

/* The delivery report's offset, for open_txn_as. */
static void offset_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	int64_t *off = opaque;
	*off = m->err ? -2 : m->offset;
}

/* A transactional producer of id, as another replica (or a hub of one
 * producer per partition) would hold it: mk's dead letter produced in a
 * transaction left open, at *offset of the dead-letter topic. */
static rd_kafka_t *open_txn_as(h_env *e, const dlq_names *nm, const char *id, const char *mk,
                               int64_t *offset)
{
	char es[256];
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	const char *set[] = {"bootstrap.servers", e->brokers, "transactional.id", id,
	                     /* never ended by the broker within the test */
	                     "transaction.timeout.ms", "900000", NULL};
	for (int i = 0; set[i]; i += 2)
		cr_assert_eq(rd_kafka_conf_set(c, set[i], set[i + 1], es, sizeof es), RD_KAFKA_CONF_OK,
		             "%s", es);
	*offset = -1;
	rd_kafka_conf_set_opaque(c, offset);
	rd_kafka_conf_set_dr_msg_cb(c, offset_cb);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, es, sizeof es);
	cr_assert_not_null(rk, "%s", es);
	rd_kafka_error_t *err = rd_kafka_init_transactions(rk, 30000);
	cr_assert_null(err, "%s", err ? rd_kafka_error_string(err) : "");
	cr_assert_null(rd_kafka_begin_transaction(rk));
	rd_kafka_headers_t *h = rd_kafka_headers_new(2);
	rd_kafka_header_add(h, "txhub-biz-id", -1, "b", -1);
	rd_kafka_header_add(h, "txhub-message-key", -1, mk, -1);
	cr_assert_eq(rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(nm->dlq), RD_KAFKA_V_PARTITION(0),
	                               RD_KAFKA_V_VALUE((void *)"zombie", 6),
	                               RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END),
	             RD_KAFKA_RESP_ERR_NO_ERROR);
	cr_assert_eq(rd_kafka_flush(rk, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
	cr_assert_geq(*offset, 0, "the open transaction's dead letter was not acknowledged");
	return rk;
}

/* How the partition's last owner is made to look in fenced_on_takeover. */
typedef enum {
	LAST_NAMED,  /* the row names its id, written at the epoch before */
	LAST_OLD,    /* a hub of one producer per partition: the row names none */
	LAST_OLD_BETWEEN, /* one such hub, after a hub of this version: the row names
	                   * that one's id, written at an earlier epoch */
} last_owner;

/* Every row dead-lettered by a hub, which stops. Then the partition's
 * last owner is made to look as if it had died (or been paused) with
 * d-1's dead letter produced in an open transaction of transactional.id
 * id and recorded as pending, the partition's row as how says. A hub
 * started again must fence id: the entry is found aborted at once and d-1
 * produced again, and the old transaction commits nothing after.
 * Unfenced, the open transaction holds every read_committed reader of the
 * dead-letter topic (the hub's own reading back the entry) for the 15
 * minutes of its time-out. */
static void fenced_on_takeover(const char *name, const char *id_fmt, last_owner how)
{
	h_env e;
	dlq_names nm;
	setup(&e, name, &nm);
	char id[256], want[16], sql[1024], log[256];
	snprintf(id, sizeof id, id_fmt, e.name, e.topic);
	pid_t hub = start(&e, &nm);
	snprintf(want, sizeof want, "%d", N);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'failed' "
	                     "AND dead_lettered_at IS NOT NULL", want, 120000));
	cr_assert_eq(h_hub_stop(hub), 0);
	int64_t off;
	rd_kafka_t *zombie = open_txn_as(&e, &nm, id, "d-1", &off);
	if (how == LAST_NAMED)
		snprintf(sql, sizeof sql, "UPDATE txhub.partitions SET dl_txn_id = '%s', "
		         "dl_txn_epoch = epoch WHERE topic = '%s' AND partition = 0", id, e.topic);
	else if (how == LAST_OLD)
		snprintf(sql, sizeof sql, "UPDATE txhub.partitions SET dl_txn_id = NULL, "
		         "dl_txn_epoch = NULL WHERE topic = '%s' AND partition = 0", e.topic);
	else
		snprintf(sql, sizeof sql, "UPDATE txhub.partitions SET dl_txn_epoch = epoch - 1 "
		         "WHERE topic = '%s' AND partition = 0 AND dl_txn_id LIKE 'txhub-%%-r-%%'",
		         e.topic);
	h_exec(e.db, sql);
	snprintf(sql, sizeof sql, "SELECT count(*) FROM txhub.partitions WHERE topic = '%s' AND "
	         "partition = 0 AND %s", e.topic,
	         how == LAST_NAMED ? "dl_txn_epoch = epoch"
	         : how == LAST_OLD ? "dl_txn_id IS NULL"
	                           : "dl_txn_epoch = epoch - 1 AND dl_txn_id LIKE 'txhub-%-r-%'");
	cr_assert_eq(h_count(&e, sql), 1, "the row is not as the test made it: %s", sql);
	snprintf(sql, sizeof sql,
	         "INSERT INTO txhub.dead_letter_pending (biz_id, message_key, parked_at, src_topic, "
	         "src_partition, topic, partition, \"offset\") SELECT biz_id, message_key, "
	         "updated_at, src_topic, src_partition, '%s', 0, %lld FROM txhub.message_rows "
	         "WHERE message_key = 'd-1'", nm.dlq, (long long)off);
	h_exec(e.db, sql);
	h_exec(e.db, "UPDATE txhub.message_rows SET dead_lettered_at = NULL "
	             "WHERE message_key = 'd-1'");
	hub = start(&e, &nm);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE message_key = 'd-1' "
	                     "AND dead_lettered_at IS NOT NULL", "1", 90000),
	          "d-1 was not dead-lettered again: the open transaction was not fenced");
	cr_assert_eq(h_hub_stop(hub), 0);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.dead_letter_pending"), 0);
	/* the old transaction was aborted: it commits nothing now */
	rd_kafka_error_t *err = rd_kafka_commit_transaction(zombie, 30000);
	cr_assert_not_null(err, "the fenced transaction committed");
	rd_kafka_error_destroy(err);
	rd_kafka_destroy(zombie);
	h_record *r;
	size_t n = h_read_topic_committed(&e, nm.dlq, 3000, &r);
	cr_assert_eq(n, N + 1, "d-1 produced again once, the zombie's never: %zu", n);
	cr_assert(strstr(r[N].headers, "txhub-message-key=d-1\n"), "%s", r[N].headers);
	for (size_t k = 0; k < n; k++)
		cr_assert(r[k].value_len != 6 || memcmp(r[k].value, "zombie", 6) != 0,
		          "a read_committed reader read the fenced transaction's record");
	h_records_free(r, n);
	h_hub_log(log, sizeof log, &e);
	snprintf(sql, sizeof sql, "partition 0 of %s: fenced transactional.id %s, %s", e.topic, id,
	         how == LAST_NAMED ? "which dead-lettered for it last"
	                           : "a hub of one producer per partition's");
	cr_assert_eq(h_log_lines(log, sql), 1, "%s: not in the log", sql);
	cr_assert_eq(h_log_lines(log, "pending dead letter(s) of an earlier run: 0 found committed "
	                              "(recorded), 1 not"), 1);
	h_teardown(&e);
}

/* The zombie: another replica's dead-letter producer, named in the row. */
Test(dlq_once, the_last_owners_open_transaction_is_fenced_on_takeover, .timeout = 300)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	fenced_on_takeover("dlqo_zomb", "txhub-%s-r-zombie-1-0badcafe-dlq%.0s", LAST_NAMED);
}

/* A rolling upgrade: the partition's last owner dead-lettered with the
 * per-partition transactional.id of the hubs before one per replica. */
Test(dlq_once, a_rolling_upgrade_fences_the_per_partition_id, .timeout = 300)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	fenced_on_takeover("dlqo_upgr", "txhub-%s-%s-0-dlq", LAST_OLD);
}

/* A rolling upgrade, mixed: a hub of this version dead-lettered for the
 * partition, then a hub of one producer per partition held it (it writes
 * no id) and left a transaction open: the next owner fences the
 * per-partition id too, since the id's epoch is not the one before. */
Test(dlq_once, an_older_hub_between_two_of_this_version_is_fenced, .timeout = 300)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	fenced_on_takeover("dlqo_mixd", "txhub-%s-%s-0-dlq", LAST_OLD_BETWEEN);
}
