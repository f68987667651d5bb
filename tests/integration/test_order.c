/* test_order.c: forward.order = key (docs/consumers.md: Order per key). A forward that fails
 * for one key holds that key's later messages (held: pending, no attempt)
 * while other keys flow; a redrive (or `txhub skip`) lets them go, in
 * order. A delayed row (committed, pending, no sequence, due later) holds
 * its key too. Consumers see each key's messages in order on a forward
 * topic of several partitions, in both forwarding modes (exactly_once on
 * Apache Kafka). */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define WAIT_MS 60000
#define KEYS 6
#define PER_KEY 10

static char sqlbuf[1024];

static const char *status_of(const char *mk)
{
	snprintf(sqlbuf, sizeof sqlbuf,
	         "SELECT status || '/' || coalesce(send_status, '-') || '/' || send_attempts "
	         "FROM txhub.messages WHERE biz_id = 'ord' AND message_key = '%s'", mk);
	return sqlbuf;
}

/* Held for its key: pending, never attempted, due at 'infinity'. */
static long held(h_env *e, const char *mk)
{
	snprintf(sqlbuf, sizeof sqlbuf,
	         "SELECT count(*) FROM txhub.message_rows WHERE message_key = '%s' AND "
	         "send_status = 'pending' AND send_attempts = 0 AND fwd_seq IS NULL AND "
	         "next_send_at = 'infinity'", mk);
	return h_count(e, sqlbuf);
}

/* A one-shot commit of message_key mk to topic with key (its control
 * record keyed by the forward key: a key's messages share a control
 * partition, whose order is theirs), payload text. */
static void send_one(h_env *e, int partition, const char *mk, const char *topic, const char *key,
                     const char *payload)
{
	size_t sz = strlen(payload) + 512;
	char *buf = malloc(sz);
	cr_assert_not_null(buf);
	snprintf(buf, sz, "{\"type\":\"commit\",\"biz_id\":\"ord\",\"message_key\":\"%s\","
	                  "\"payload\":\"%s\",\"forward\":{\"topic\":\"%s\",\"key\":\"%s\"}}",
	         mk, payload, topic, key);
	h_send_str(e, partition, key, buf);
	free(buf);
}

/* k0..k5, PER_KEY messages each, interleaved; payload: the index. */
static void send_flowing(h_env *e, const char *topic)
{
	for (int j = 0; j < PER_KEY; j++)
		for (int i = 0; i < KEYS; i++) {
			char mk[32], key[16], p[16];
			snprintf(mk, sizeof mk, "k%d-%d", i, j);
			snprintf(key, sizeof key, "k%d", i);
			snprintf(p, sizeof p, "%d", j);
			send_one(e, -1, mk, topic, key, p);
		}
}

/* On topic, each of k0..k5's records came in order, each once. */
static void check_flowing(h_record *r, size_t n)
{
	int next[KEYS] = {0};
	for (size_t i = 0; i < n; i++) {
		if (r[i].key_null || r[i].key[0] != 'k')
			continue;
		int k = atoi(r[i].key + 1), v = atoi((char *)r[i].value);
		cr_assert(k >= 0 && k < KEYS, "key %s", r[i].key);
		cr_assert_eq(v, next[k], "key %s: %d after %d", r[i].key, v, next[k] - 1);
		next[k]++;
	}
	for (int k = 0; k < KEYS; k++)
		cr_assert_eq(next[k], PER_KEY, "key k%d: %d records", k, next[k]);
}

/* The payloads of key's records on topic, in order, joined by ','. */
static void values_of(h_record *r, size_t n, const char *key, char *out, size_t outsz)
{
	out[0] = '\0';
	for (size_t i = 0; i < n; i++)
		if (!r[i].key_null && strcmp(r[i].key, key) == 0)
			snprintf(out + strlen(out), outsz - strlen(out), "%s%.*s", out[0] ? "," : "",
			         (int)r[i].value_len, (char *)r[i].value);
}

/* key's records on topic (read_committed when committed) are want. */
static void check_values(h_env *e, const char *topic, const char *key, const char *want,
                         int committed)
{
	h_record *r;
	size_t n = committed ? h_read_topic_committed(e, topic, 3000, &r)
	                     : h_read_topic(e, topic, 3000, &r);
	char vals[256];
	values_of(r, n, key, vals, sizeof vals);
	cr_assert_str_eq(vals, want, "key %s on %s", key, topic);
	if (strcmp(key, "K") == 0 && strstr(topic, ".small"))
		check_flowing(r, n); /* the other keys share the topic */
	h_records_free(r, n);
}

/* A committed, pending row without a sequence, written directly: message_key
 * mk (payload the same) to topic fwd with key, at offset 0 of partition 0
 * of e's control topic, due at due (SQL), last written at updated (SQL). */
static void insert_row(h_env *e, const char *mk, const char *fwd, const char *key,
                       const char *due, const char *updated)
{
	char sql[1024];
	snprintf(sql, sizeof sql,
	         "INSERT INTO txhub.message_rows (biz_id, message_key, status, decision, send_status, "
	         "payload, forward_topic, forward_key, src_topic, src_partition, src_offset, "
	         "next_send_at, not_before, updated_at) VALUES ('ord', '%s', 'committed', 'commit', "
	         "'pending', '%s', '%s', '%s', '%s', 0, 0, %s, %s, %s)",
	         mk, mk, fwd, key, e->topic, due, strcmp(due, "'infinity'") ? due : "NULL", updated);
	h_exec(e->db, sql);
}

static int run(h_env *e, const char *const *args, char *out, size_t outsz, char *err,
               size_t errsz)
{
	return h_txhub_io(e, args, out, outsz, err, errsz);
}

static char out_buf[1 << 16], err_buf[4096];

/* The redriven head key: sent, after at most one more refused attempt.
 * The redrive can reach the hub before the devbroker has read "allow", or
 * while the hub's producer still holds the topic's refusal from its last
 * metadata (as it would an ACL just granted on Apache Kafka): seen in CI
 * for both tests that redrive. The messages behind it must still follow
 * with none. */
static void check_sent_after_redrive(h_env *e, const char *key)
{
	const char *s = h_query(e, status_of(key), sqlbuf, sizeof sqlbuf);
	cr_assert(strcmp(s, "committed/sent/0") == 0 || strcmp(s, "committed/sent/1") == 0,
	          "%s: %s", key, s);
}

/* An embedded broker for e that refuses <topic>.bad (named into bad) from
 * the start; its commands on *cmd ("allow <topic>\n"). */
static pid_t start_denying(h_env *e, char *bad, size_t badsz, FILE **cmd)
{
	snprintf(bad, badsz, "%s.bad", e->topic);
	/* the progress topic made with the mock cluster: librdkafka 2.15.0's
	 * mock answers no CreateTopics of its own client (timed out), 2.0.2's
	 * does */
	char progress[200];
	snprintf(progress, sizeof progress, "%s.progress:4", e->topic);
	const char *args[] = {"--topic", progress, NULL};
	pid_t broker = h_devbroker_start(e, args, cmd);
	fprintf(*cmd, "deny %s\n", bad);
	fflush(*cmd);
	return broker;
}


Test(order, a_parked_key_holds_its_later_messages_until_redrive_or_skip, .timeout = 240)
{
	h_env e;
	h_setup(&e, "order_alo");
	char ok[128], bad[128], bad2[128], arg[300];
	snprintf(ok, sizeof ok, "%s.ok", e.topic);
	snprintf(bad, sizeof bad, "%s.bad", e.topic);
	/* (the producer keeps a topic it knows: the mock broker refuses one only
	 * from the start) */
	snprintf(bad2, sizeof bad2, "%s.bad2", e.topic);
	snprintf(arg, sizeof arg, "%s:4", ok);
	const char *bargs[] = {"--topic", arg, NULL};
	FILE *cmd = NULL;
	pid_t broker = h_devbroker_start(&e, bargs, &cmd);
	fprintf(cmd, "deny %s\ndeny %s\n", bad, bad2);
	fflush(cmd);
	const char *settings[] = {"forward.order=key", "kafka.message.timeout.ms=1000",
	                          "forward.backoff_ms=100", "forward.backoff_max_ms=200",
	                          "forward.max_attempts=2", "log.level=debug", NULL};
	pid_t hub = h_hub_start(&e, settings);
	send_one(&e, -1, "m1", bad, "K", "1");
	send_one(&e, -1, "m2", bad, "K", "2");
	send_one(&e, -1, "m3", bad, "K", "3");
	send_flowing(&e, ok);
	h_flush();

	/* m1 parks; m2 and m3 wait for it, never attempted; the other keys flow */
	cr_assert(h_wait(&e, status_of("m1"), "committed/failed/2", WAIT_MS));
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE message_key LIKE 'k%' "
	                     "AND send_status = 'sent'", "60", WAIT_MS));
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.message_rows WHERE message_key IN "
	                     "('m2', 'm3') AND next_send_at = 'infinity'", "2", WAIT_MS));
	h_pause_ms(1500); /* a few scans: they stay held */
	cr_assert_eq(held(&e, "m2"), 1);
	cr_assert_eq(held(&e, "m3"), 1);
	cr_assert_str_eq(h_query(&e, status_of("m2"), sqlbuf, sizeof sqlbuf), "committed/pending/0");

	/* status shows the key and what blocks it */
	const char *st[] = {"status", "--json", NULL};
	cr_assert_eq(run(&e, st, out_buf, sizeof out_buf, err_buf, sizeof err_buf), 0, "%s", err_buf);
	cJSON *doc = cJSON_Parse(out_buf);
	cr_assert_not_null(doc, "%s", out_buf);
	cJSON *blocked = cJSON_GetObjectItem(doc, "blocked");
	cr_assert_eq(cJSON_GetObjectItem(blocked, "messages")->valuedouble, 2);
	cJSON *k0 = cJSON_GetArrayItem(cJSON_GetObjectItem(blocked, "keys"), 0);
	cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(k0, "forward_key")), "K");
	cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(k0, "forward_topic")), bad);
	cr_assert_eq(cJSON_GetObjectItem(k0, "held")->valuedouble, 2);
	cJSON *by = cJSON_GetObjectItem(k0, "blocked_by");
	cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(by, "message_key")), "m1");
	cr_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(by, "send_status")), "failed");
	cJSON_Delete(doc);
	const char *st_text[] = {"status", NULL};
	cr_assert_eq(run(&e, st_text, out_buf, sizeof out_buf, err_buf, sizeof err_buf), 0);
	cr_assert(strstr(out_buf, "blocked    2 message(s)") && strstr(out_buf, "ord/m1 (failed"),
	          "%s", out_buf);

	/* skip refuses what is not parked or held, and a missing reason */
	const char *sent[] = {"skip", "ord", "k0-0", "--reason", "no", NULL};
	cr_assert_eq(run(&e, sent, out_buf, sizeof out_buf, err_buf, sizeof err_buf), 1);
	cr_assert(strstr(err_buf, "can be skipped"), "%s", err_buf);
	const char *unknown[] = {"skip", "ord", "nope", "--reason", "no", NULL};
	cr_assert_eq(run(&e, unknown, out_buf, sizeof out_buf, err_buf, sizeof err_buf), 1);
	cr_assert(strstr(err_buf, "no message"), "%s", err_buf);
	const char *noreason[] = {"skip", "ord", "m1", NULL};
	cr_assert_eq(run(&e, noreason, out_buf, sizeof out_buf, err_buf, sizeof err_buf), 2);
	cr_assert(strstr(err_buf, "--reason"), "%s", err_buf);
	cr_assert_str_eq(h_query(&e, status_of("m1"), sqlbuf, sizeof sqlbuf), "committed/failed/2");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE event = 'skip'"), 0);

	/* the topic takes writes again; a redrive sends m1, then m2 and m3 follow */
	fprintf(cmd, "allow %s\n", bad);
	fflush(cmd);
	const char *redrive[] = {"redrive", "ord", "m1", NULL};
	cr_assert_eq(run(&e, redrive, out_buf, sizeof out_buf, err_buf, sizeof err_buf), 0, "%s",
	             err_buf);
	cr_assert(h_wait(&e, status_of("m3"), "committed/sent/0", WAIT_MS));
	check_sent_after_redrive(&e, "m1");
	cr_assert_str_eq(h_query(&e, status_of("m2"), sqlbuf, sizeof sqlbuf), "committed/sent/0");

	/* parked again (on another topic): skipped with a reason, and the next
	 * one goes */
	send_one(&e, -1, "m4", bad2, "K", "4");
	send_one(&e, -1, "m5", bad2, "K", "5");
	h_flush();
	cr_assert(h_wait(&e, status_of("m4"), "committed/failed/2", WAIT_MS));
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.message_rows WHERE message_key = 'm5' "
	                     "AND next_send_at = 'infinity'", "1", WAIT_MS));
	fprintf(cmd, "allow %s\n", bad2);
	fflush(cmd);
	h_pause_ms(1500);
	cr_assert_eq(held(&e, "m5"), 1, "m5 went before m4 was skipped");
	const char *skip[] = {"skip", "ord", "m4", "--reason", "bad data, see ticket 7", "--json",
	                      NULL};
	cr_assert_eq(run(&e, skip, out_buf, sizeof out_buf, err_buf, sizeof err_buf), 0, "%s",
	             err_buf);
	cr_assert(strstr(out_buf, "\"send_status\":\"skipped\"") ||
	          strstr(out_buf, "\"send_status\": \"skipped\""), "%s", out_buf);
	cr_assert(h_wait(&e, status_of("m5"), "committed/sent/0", WAIT_MS));
	cr_assert_str_eq(h_query(&e, status_of("m4"), sqlbuf, sizeof sqlbuf), "committed/skipped/2");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'm4' "
	                         "AND event = 'skip' AND actor <> 'txhub' "
	                         "AND detail LIKE 'send failed -> skipped: bad data, see ticket 7'"),
	             1);
	/* a skipped one is not skipped again */
	cr_assert_eq(run(&e, skip, out_buf, sizeof out_buf, err_buf, sizeof err_buf), 1);
	cr_assert_eq(h_hub_stop(hub), 0);

	check_values(&e, bad, "K", "1,2,3", 0);
	check_values(&e, bad2, "K", "5", 0);
	h_record *r;
	size_t n = h_read_topic(&e, ok, 2000, &r);
	check_flowing(r, n);
	h_records_free(r, n);
	h_devbroker_stop(broker, cmd);
	h_teardown(&e);
}

/* at_least_once: a key's chain held behind a parked forward goes whole once
 * the parked one is redriven and sent (released together, sent in order
 * through the key's queue, their trace context with them), each once, in
 * order. */
#define CHAIN 20
Test(order, a_held_chain_follows_its_blocker_in_order_at_least_once, .timeout = 240)
{
	h_env e;
	h_setup(&e, "order_chain");
	char bad[128];
	FILE *cmd = NULL;
	pid_t broker = start_denying(&e, bad, sizeof bad, &cmd);
	const char *settings[] = {"forward.order=key", "kafka.message.timeout.ms=1000",
	                          "forward.backoff_ms=100", "forward.backoff_max_ms=200",
	                          "forward.max_attempts=2", "log.level=debug", NULL};
	pid_t hub = h_hub_start(&e, settings);
	char want[8 * CHAIN] = "";
	for (int i = 1; i <= CHAIN; i++) {
		char mk[16], p[16];
		snprintf(mk, sizeof mk, "c%d", i);
		snprintf(p, sizeof p, "%d", i);
		/* with a trace context: a key's queue keeps its own copy of it */
		char buf[512];
		snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"ord\",\"message_key\":"
		         "\"%s\",\"payload\":\"%s\",\"forward\":{\"topic\":\"%s\",\"key\":\"C\"},"
		         "\"trace\":{\"traceparent\":\"00-4bf92f3577b34da6a3ce929d0e0e47%02d-"
		         "00f067aa0ba902b7-01\",\"tracestate\":\"t=%d\"}}", mk, p, bad, i, i);
		h_send_str(&e, -1, "C", buf);
		snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d", i > 1 ? "," : "", i);
	}
	h_flush();
	cr_assert(h_wait(&e, status_of("c1"), "committed/failed/2", WAIT_MS));
	char n_held[8];
	snprintf(n_held, sizeof n_held, "%d", CHAIN - 1);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.message_rows WHERE message_key LIKE 'c%' "
	                     "AND next_send_at = 'infinity' AND send_attempts = 0", n_held, WAIT_MS));
	fprintf(cmd, "allow %s\n", bad);
	fflush(cmd);
	const char *redrive[] = {"redrive", "ord", "c1", NULL};
	cr_assert_eq(run(&e, redrive, out_buf, sizeof out_buf, err_buf, sizeof err_buf), 0, "%s",
	             err_buf);
	char last[16];
	snprintf(last, sizeof last, "c%d", CHAIN);
	cr_assert(h_wait(&e, status_of(last), "committed/sent/0", WAIT_MS));
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key LIKE 'c%' "
	                         "AND send_status <> 'sent'"), 0);
	cr_assert_eq(h_hub_stop(hub), 0);
	check_values(&e, bad, "C", want, 0);
	h_devbroker_stop(broker, cmd);
	h_teardown(&e);
}

/* A delayed row (as delayed delivery stores it: committed, pending, no
 * sequence, due later) is unsent: its key's later messages wait for it. */
Test(order, a_delayed_message_holds_its_key, .timeout = 120)
{
	h_env e;
	h_setup(&e, "order_delayed");
	char fwd[128];
	snprintf(fwd, sizeof fwd, "%s.fwd", e.topic);
	/* written after the hub takes the partition (updated_at ahead): not a
	 * lease of a previous owner that the take gives back */
	insert_row(&e, "x", fwd, "D", "now() + interval '1 hour'", "now() + interval '1 hour'");
	const char *settings[] = {"forward.order=key", "log.level=debug", NULL};
	pid_t hub = h_hub_start(&e, settings);
	/* offset 0 of partition 0: the row above comes first */
	send_one(&e, 0, "f", fwd, "F", "f");
	h_flush();
	cr_assert(h_wait(&e, status_of("f"), "committed/sent/0", WAIT_MS));
	h_pause_ms(2000); /* its scans have read the blockers */
	send_one(&e, 0, "d", fwd, "D", "d");
	send_one(&e, 0, "e", fwd, "E", "e");
	h_flush();
	cr_assert(h_wait(&e, status_of("e"), "committed/sent/0", WAIT_MS));
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.message_rows WHERE message_key = 'd' "
	                     "AND next_send_at = 'infinity'", "1", WAIT_MS));
	h_pause_ms(1500);
	cr_assert_eq(held(&e, "d"), 1);
	/* due: it goes, then d */
	h_exec(e.db, "UPDATE txhub.message_rows SET next_send_at = now() WHERE message_key = 'x'");
	cr_assert(h_wait(&e, status_of("d"), "committed/sent/0", WAIT_MS));
	cr_assert_str_eq(h_query(&e, status_of("x"), sqlbuf, sizeof sqlbuf), "committed/sent/0");
	cr_assert_eq(h_hub_stop(hub), 0);
	check_values(&e, fwd, "D", "x,d", 0);
	h_teardown(&e);
}

/* A record too large for its topic fails for its own sake: the later ones
 * of its key, which the broker would take, are held until it is skipped;
 * the others keys flow, each in order, on the topic's 4 partitions. */
static void too_large_holds_its_key(const char *name, const char *mode)
{
	if (!h_real_kafka())
		cr_skip_test("a topic's max.message.bytes needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	h_env e;
	h_setup(&e, name);
	char fwd[128], es[512];
	snprintf(fwd, sizeof fwd, "%s.small", e.topic);
	int err = h_create_topic(&e, fwd, 4, "max.message.bytes", "4000", es, sizeof es);
	cr_assert_eq(err, 0, "creating %s: %s", fwd, es);
	/* random hex: lz4 cannot shrink it below 4,000 bytes */
	char hex[9001];
	srand(7);
	for (int i = 0; i < 9000; i++)
		hex[i] = "0123456789abcdef"[rand() % 16];
	hex[9000] = '\0';
	send_one(&e, -1, "m1", fwd, "K", hex);
	send_one(&e, -1, "m2", fwd, "K", "2");
	send_one(&e, -1, "m3", fwd, "K", "3");
	h_flush();
	const char *settings[] = {mode, "forward.order=key", "forward.max_attempts=2",
	                          "forward.backoff_ms=200", "log.level=debug", NULL};
	pid_t hub = h_hub_start(&e, settings);
	cr_assert(h_wait(&e, status_of("m1"), "committed/failed/2", 90000));
	/* the others after: at_least_once, the broker refuses a whole batch for
	 * a record too large, and records of other keys sharing it would fail
	 * with it */
	send_flowing(&e, fwd);
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE message_key LIKE 'k%' "
	                     "AND send_status = 'sent'", "60", WAIT_MS));
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.message_rows WHERE message_key IN "
	                     "('m2', 'm3') AND next_send_at = 'infinity'", "2", WAIT_MS));
	h_pause_ms(1500);
	cr_assert_eq(held(&e, "m2"), 1);
	cr_assert_eq(held(&e, "m3"), 1);
	const char *skip[] = {"skip", "ord", "m1", "--reason", "too large", NULL};
	cr_assert_eq(h_txhub_io(&e, skip, out_buf, sizeof out_buf, err_buf, sizeof err_buf), 0, "%s",
	             err_buf);
	cr_assert(h_wait(&e, status_of("m3"), "committed/sent/0", WAIT_MS));
	cr_assert_str_eq(h_query(&e, status_of("m2"), sqlbuf, sizeof sqlbuf), "committed/sent/0");
	cr_assert_eq(h_hub_stop(hub), 0);
	check_values(&e, fwd, "K", "2,3", strstr(mode, "exactly_once") != NULL);
	h_teardown(&e);
}

Test(order, too_large_forward_holds_its_key_at_least_once, .timeout = 240)
{
	too_large_holds_its_key("order_large_alo", "forward.mode=at_least_once");
}

Test(order, too_large_forward_holds_its_key_exactly_once, .timeout = 240)
{
	too_large_holds_its_key("order_large_eos", "forward.mode=exactly_once");
}

/* A hub with forward.order = partition taking a partition where a hub with
 * key held messages sends them (nothing releases them otherwise). */
Test(order, a_partition_hub_sends_what_a_key_hub_held, .timeout = 120)
{
	h_env e;
	h_setup(&e, "order_unheld");
	char fwd[128];
	snprintf(fwd, sizeof fwd, "%s.fwd", e.topic);
	insert_row(&e, "h", fwd, "H", "'infinity'", "now()");
	h_control_topic(&e); /* (Apache Kafka makes it on a produce only) */
	pid_t hub = h_hub_start(&e, NULL);
	cr_assert(h_wait(&e, status_of("h"), "committed/sent/0", WAIT_MS));
	cr_assert_eq(h_hub_stop(hub), 0);
	check_values(&e, fwd, "H", "h", 0);
	h_teardown(&e);
}

/* A key's head whose forward topic the broker refuses (the same pre-check
 * as a missing topic: the topic's metadata says no), forward.max_attempts
 * = 2: only the head is tried (twice) and parked; the two after it wait
 * behind it, never attempted, not parked, in both modes (issue 30, item 6:
 * exactly_once tried all three at once and parked them). Redriven once the
 * topic takes writes, the head goes and the two follow, in order, each
 * once (read_committed in exactly_once). */
static void head_topic_refused(const char *name, const char *mode)
{
	h_env e;
	h_setup(&e, name);
	char bad[128];
	FILE *cmd = NULL;
	pid_t broker = start_denying(&e, bad, sizeof bad, &cmd);
	const char *settings[] = {mode, "forward.order=key", "kafka.message.timeout.ms=1000",
	                          "forward.backoff_ms=100", "forward.backoff_max_ms=200",
	                          "forward.max_attempts=2", "log.level=debug", NULL};
	/* the three in one control partition before the hub starts: one run */
	send_one(&e, 0, "K5-0", bad, "K5", "0");
	send_one(&e, 0, "K5-1", bad, "K5", "1");
	send_one(&e, 0, "K5-2", bad, "K5", "2");
	h_flush();
	pid_t hub = h_hub_start(&e, settings);
	cr_assert(h_wait(&e, status_of("K5-0"), "committed/failed/2", WAIT_MS));
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.message_rows WHERE message_key IN "
	                     "('K5-1', 'K5-2') AND next_send_at = 'infinity'", "2", WAIT_MS));
	h_pause_ms(1500); /* a few scans: they stay held */
	cr_assert_eq(held(&e, "K5-1"), 1, "%s", h_query(&e, status_of("K5-1"), sqlbuf, sizeof sqlbuf));
	cr_assert_eq(held(&e, "K5-2"), 1, "%s", h_query(&e, status_of("K5-2"), sqlbuf, sizeof sqlbuf));
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key IN "
	                         "('K5-1', 'K5-2') AND event IN ('forward_failed', 'alert')"), 0,
	             "a message behind the head was attempted");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'K5-0' "
	                         "AND event = 'forward_failed'"), 2);

	fprintf(cmd, "allow %s\n", bad);
	fflush(cmd);
	const char *redrive[] = {"redrive", "ord", "K5-0", NULL};
	cr_assert_eq(run(&e, redrive, out_buf, sizeof out_buf, err_buf, sizeof err_buf), 0, "%s",
	             err_buf);
	cr_assert(h_wait(&e, status_of("K5-2"), "committed/sent/0", WAIT_MS), "%s",
	          h_query(&e, status_of("K5-2"), sqlbuf, sizeof sqlbuf));
	check_sent_after_redrive(&e, "K5-0");
	cr_assert_str_eq(h_query(&e, status_of("K5-1"), sqlbuf, sizeof sqlbuf), "committed/sent/0");
	cr_assert_eq(h_hub_stop(hub), 0);
	check_values(&e, bad, "K5", "0,1,2", strstr(mode, "exactly_once") != NULL);
	h_devbroker_stop(broker, cmd);
	h_teardown(&e);
}

Test(order, a_key_waits_behind_a_head_whose_topic_is_refused_at_least_once, .timeout = 180)
{
	head_topic_refused("order_head_alo", "forward.mode=at_least_once");
}

Test(order, a_key_waits_behind_a_head_whose_topic_is_refused_exactly_once, .timeout = 180)
{
	head_topic_refused("order_head_eos", "forward.mode=exactly_once");
}
