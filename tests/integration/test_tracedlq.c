/* test_tracedlq.c: trace context and the dead-letter topic
 * (docs/troubleshooting.md: Dead-letter topic, issue 23 §3 and §4) end to end
 * against a real PostgreSQL and broker: traceparent/tracestate on the
 * check-back request and the forwarded record, trace_id in the row, its history
 * and the JSON log lines, malformed trace contexts dropped and counted with the
 * message forwarded, `txhub list --trace`; a parked forward produced once to
 * the dead-letter topic with its headers, not again after a restart, again
 * after a redrive and a new park, and a failing dead-letter topic alerted while
 * the hub goes on (its state in `txhub status`); every log line about a traced
 * message, on every path it takes (check-back, forward, park, dead letter, an
 * operator's redrive), names its trace id. The exactly_once cases need Apache
 * Kafka. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "httpd.h"
#include "trace_common.h"

#define WAIT_MS 30000
#define TID "4bf92f3577b34da6a3ce929d0e0e4736"
#define TP "00-" TID "-00f067aa0ba902b7-01"
#define TID2 "0af7651916cd43dd8448eb211c80319c"

/* Lines of the log at path that hold needle but not must; the first of
 * them into first. */
static long lines_without(const char *path, const char *needle, const char *must, char *first,
                          size_t firstsz)
{
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "cannot read %s", path);
	char line[8192];
	long n = 0;
	first[0] = '\0';
	while (fgets(line, sizeof line, f))
		if (strstr(line, needle) && !strstr(line, must) && n++ == 0)
			snprintf(first, firstsz, "%s", line);
	fclose(f);
	return n;
}

/* A check-back endpoint that keeps the trace headers it was sent, and
 * answers 503 the first time, "committed" after. */
typedef struct {
	pthread_mutex_t mu;
	int calls;
	char traceparent[600], tracestate[600];
} seen_t;

static void answer(void *opaque, const h_http_request *req, h_http_answer *ans)
{
	seen_t *s = opaque;
	pthread_mutex_lock(&s->mu);
	h_http_header(req, "traceparent", s->traceparent, sizeof s->traceparent);
	h_http_header(req, "tracestate", s->tracestate, sizeof s->tracestate);
	if (s->calls++ == 0) {
		ans->status = 503;
	} else {
		snprintf(ans->body, sizeof ans->body, "{\"status\":\"committed\"}");
	}
	pthread_mutex_unlock(&s->mu);
}

Test(tracedlq, trace_context_travels_with_the_message, .timeout = 180)
{
	h_env e;
	h_setup(&e, "trace");
	seen_t seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
	h_httpd *srv = h_httpd_start(answer, &seen);
	cr_assert_not_null(srv);
	int port = h_free_port();
	char listen[64], fwd[128], buf[4096];
	snprintf(listen, sizeof listen, "http.listen=127.0.0.1:%d", port);
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	h_webhook *w = h_webhook_start();
	cr_assert_not_null(w);
	char hook[128];
	snprintf(hook, sizeof hook, "alert.webhook=http://127.0.0.1:%d/alert", h_webhook_port(w));
	const char *settings[] = {"log.format=json", "checkback.backoff_ms=100",
	                          "checkback.max_attempts=2", listen, hook, NULL};
	pid_t hub = h_hub_start(&e, settings);
	/* one that nobody answers: check_failed, its alert carries the trace id */
	snprintf(buf, sizeof buf,
	         "{\"type\":\"prepare\",\"biz_id\":\"shop\",\"message_key\":\"t-2\",\"payload\":\"p\","
	         "\"forward\":{\"topic\":\"%s\"},\"checkback\":{\"url\":\"http://127.0.0.1:%d/cb\","
	         "\"first_after_ms\":0},\"trace\":{\"traceparent\":\"00-" TID2 "-00f067aa0ba902b7-01\"}}",
	         fwd, h_free_port());
	h_send_str(&e, -1, "t-2", buf);

	/* a prepare with a trace context, checked back (once failing), then a
	 * commit with a trace of its own (not stored: the prepare's is) */
	snprintf(buf, sizeof buf,
	         "{\"type\":\"prepare\",\"biz_id\":\"shop\",\"message_key\":\"t-1\",\"payload\":\"p\","
	         "\"forward\":{\"topic\":\"%s\",\"headers\":{\"traceparent\":\"stale\",\"h\":\"v\"}},"
	         "\"checkback\":{\"url\":\"http://127.0.0.1:%d/cb\",\"first_after_ms\":0},"
	         "\"trace\":{\"traceparent\":\"" TP "\",\"tracestate\":\"rojo=1,congo=2\"}}",
	         fwd, h_httpd_port(srv));
	h_send_str(&e, -1, "t-1", buf);
	/* malformed ones: dropped, counted, the messages forwarded all the same */
	const char *bad[] = {
		"{\"traceparent\":\"ff-" TID "-00f067aa0ba902b7-01\"}",
		"{\"traceparent\":\"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01\"}",
		"{\"traceparent\":\"00-00000000000000000000000000000000-00f067aa0ba902b7-01\"}",
		"{\"traceparent\":\"00-" TID "-00f067aa0ba902b7-01-extra\"}",
		"{\"traceparent\":\"" TP "\",\"tracestate\":\"Not Valid\"}",
		"\"" TP "\"",
	};
	for (int i = 0; i < 6; i++) {
		char mk[16];
		snprintf(mk, sizeof mk, "bad-%d", i);
		snprintf(buf, sizeof buf,
		         "{\"type\":\"commit\",\"biz_id\":\"shop\",\"message_key\":\"%s\",\"payload\":\"x\","
		         "\"forward\":{\"topic\":\"%s\"},\"trace\":%s}", mk, fwd, bad[i]);
		h_send_str(&e, -1, mk, buf);
	}
	h_flush();
	for (int i = 0; i < 6; i++) {
		char mk[16];
		snprintf(mk, sizeof mk, "bad-%d", i);
		cr_assert(h_wait(&e, status_of(mk), "committed/sent", WAIT_MS), "%s", mk);
	}
	cr_assert(h_wait(&e, status_of("t-1"), "committed/sent", WAIT_MS));
	h_send_str(&e, -1, "t-1", "{\"type\":\"commit\",\"biz_id\":\"shop\",\"message_key\":\"t-1\","
	                          "\"trace\":{\"traceparent\":\"00-11111111111111111111111111111111-"
	                          "2222222222222222-01\"}}");
	h_flush();

	/* the check-back request carried the trace headers unchanged */
	pthread_mutex_lock(&seen.mu);
	cr_assert_geq(seen.calls, 2);
	cr_assert_str_eq(seen.traceparent, TP);
	cr_assert_str_eq(seen.tracestate, "rojo=1,congo=2");
	pthread_mutex_unlock(&seen.mu);

	/* the row and every history row about it */
	cr_assert_str_eq(h_query(&e, "SELECT trace_id || ' ' || traceparent || ' ' || tracestate FROM "
	                             "txhub.messages WHERE message_key = 't-1'", buf, sizeof buf),
	                 TID " " TP " rojo=1,congo=2");
	cr_assert_geq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 't-1' "
	                          "AND event = 'checkback' AND trace_id = '" TID "'"), 1);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 't-1' "
	                         "AND trace_id IS DISTINCT FROM '" TID "'"), 0);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key LIKE 'bad-%' "
	                         "AND message_key <> 'bad-4' AND trace_id IS NOT NULL"), 0);
	cr_assert_str_eq(h_query(&e, "SELECT trace_id || ' ' || coalesce(tracestate, '-') FROM "
	                             "txhub.messages WHERE message_key = 'bad-4'", buf, sizeof buf),
	                 TID " -");

	/* the forwarded records */
	h_record *r;
	size_t n = h_read_topic(&e, fwd, 1500, &r);
	cr_assert_eq(n, 7);
	const h_record *t1 = record_of(r, n, "t-1");
	cr_assert_not_null(t1);
	cr_assert(strstr(t1->headers, "traceparent=" TP "\n"), "%s", t1->headers);
	cr_assert(strstr(t1->headers, "tracestate=rojo=1,congo=2\n"), "%s", t1->headers);
	cr_assert(strstr(t1->headers, "h=v\n"), "%s", t1->headers);
	cr_assert_null(strstr(t1->headers, "stale"), "%s", t1->headers);
	for (int i = 0; i < 6; i++) {
		char mk[16];
		snprintf(mk, sizeof mk, "bad-%d", i);
		const h_record *b = record_of(r, n, mk);
		cr_assert_not_null(b, "%s", mk);
		cr_assert_null(strstr(b->headers, "tracestate="), "%s: %s", mk, b->headers);
		/* a bad tracestate alone leaves its valid traceparent */
		cr_assert_eq(strstr(b->headers, "traceparent=") != NULL, i == 4, "%s: %s", mk,
		             b->headers);
	}
	h_records_free(r, n);

	/* counted by reason, logged (JSON lines carry the trace id) */
	cr_assert_eq(dropped_count(port, "traceparent"), 4);
	cr_assert_eq(dropped_count(port, "tracestate"), 1);
	cr_assert_eq(dropped_count(port, "trace"), 1);
	char logf[256];
	h_hub_log(logf, sizeof logf, &e);
	cr_assert_eq(h_log_lines(logf, "trace context dropped"), 6);
	/* bad-4's traceparent stayed (only its tracestate went): its line names the trace */
	cr_assert_eq(h_log_lines(logf, "\"message_key\":\"bad-4\",\"trace_id\":\"" TID "\""),
	             h_log_lines(logf, "\"message_key\":\"bad-4\""));
	cr_assert_geq(h_log_lines(logf, "\"msg\":\"checkback: attempt 1: HTTP 503"), 1);
	long traced = h_log_lines(logf, "\"message_key\":\"t-1\",\"trace_id\":\"" TID "\"");
	cr_assert_eq(traced, h_log_lines(logf, "\"message_key\":\"t-1\""), "every line about t-1");
	cr_assert_geq(traced, 1);

	/* the check_failed alert of t-2: its log line and webhook name the trace */
	cr_assert(h_wait(&e, status_of("t-2"), "check_failed/-", WAIT_MS));
	int found = 0;
	char body[2048];
	for (int i = 0; i < 100 && !found; i++) {
		for (int j = 0; j < h_webhook_count(w) && !found; j++)
			found = strstr(h_webhook_body(w, j, body, sizeof body), "\"kind\":\"check_failed\"") !=
			        NULL;
		if (!found)
			h_pause_ms(100);
	}
	cr_assert(found, "no check_failed alert");
	cr_assert(strstr(body, "\"trace_id\":\"" TID2 "\""), "%s", body);
	cr_assert_geq(h_log_lines(logf, "\"msg\":\"ALERT check_failed: "), 1);
	cr_assert_eq(h_log_lines(logf, "\"message_key\":\"t-2\""),
	             h_log_lines(logf, "\"message_key\":\"t-2\",\"trace_id\":\"" TID2 "\""),
	             "every line about t-2, its ALERT line too");

	/* list --trace finds it; a malformed id is a usage error */
	char out[8192], errb[1024];
	const char *list[] = {"list", "--trace", TID, "--json", NULL};
	cr_assert_eq(h_txhub_io(&e, list, out, sizeof out, errb, sizeof errb), 0, "%s", errb);
	cr_assert(strstr(out, "\"message_key\":\"t-1\""), "%s", out);
	cr_assert(strstr(out, "\"trace_id\":\"" TID "\""), "%s", out);
	/* bad-4 kept the same traceparent (only its tracestate was dropped) */
	cr_assert(strstr(out, "\"message_key\":\"bad-4\""), "%s", out);
	cr_assert_null(strstr(out, "\"message_key\":\"bad-0\""), "%s", out);
	const char *badlist[] = {"list", "--trace", "4BF92F", NULL};
	cr_assert_eq(h_txhub(&e, badlist, errb, sizeof errb), 2);
	cr_assert(strstr(errb, "--trace"), "%s", errb);

	cr_assert_eq(h_hub_stop(hub), 0);
	h_httpd_stop(srv);
	h_webhook_stop(w);
	h_teardown(&e);
}

Test(tracedlq, exactly_once_forwards_carry_the_trace_headers, .timeout = 240)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	h_env e;
	h_setup(&e, "traceeos");
	char fwd[128], buf[1024];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	h_control_topic(&e);
	const char *settings[] = {"forward.mode=exactly_once", NULL};
	pid_t hub = h_hub_start(&e, settings);
	snprintf(buf, sizeof buf,
	         "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"e-1\",\"payload\":\"x\","
	         "\"forward\":{\"topic\":\"%s\"},\"trace\":{\"traceparent\":\"" TP "\","
	         "\"tracestate\":\"rojo=1\"}}", fwd);
	h_send_str(&e, -1, "e-1", buf);
	h_flush();
	cr_assert(h_wait(&e, status_of("e-1"), "committed/sent", 60000));
	h_record *r;
	size_t n = h_read_topic_committed(&e, fwd, 2000, &r);
	cr_assert_eq(n, 1);
	cr_assert(strstr(r[0].headers, "traceparent=" TP "\n"), "%s", r[0].headers);
	cr_assert(strstr(r[0].headers, "tracestate=rojo=1\n"), "%s", r[0].headers);
	h_records_free(r, n);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

/* One traced message down every path of the hub: checked back (503 once),
 * forwarded to a topic the broker refuses, parked, dead-lettered, redriven
 * by an operator, parked and dead-lettered again: each line that names it
 * (as a field or in its text) carries its trace id. */
Test(tracedlq, every_log_line_about_a_traced_message_names_its_trace_id, .timeout = 240)
{
	h_env e;
	h_setup(&e, "tracelog");
	const char *deny[] = {"--deny-topic", "denied", NULL};
	pid_t broker = h_devbroker_start(&e, deny, NULL);
	seen_t seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
	h_httpd *srv = h_httpd_start(answer, &seen);
	cr_assert_not_null(srv);
	char dlqset[160], buf[2048], logf[256], first[8192], errb[1024];
	snprintf(dlqset, sizeof dlqset, "forward.dead_letter_topic=dlq.%s", e.name);
	const char *settings[] = {"log.format=json", "checkback.backoff_ms=100",
	                          "kafka.message.timeout.ms=1000", "forward.backoff_ms=100",
	                          "forward.backoff_max_ms=200", "forward.max_attempts=2", dlqset,
	                          NULL};
	pid_t hub = h_hub_start(&e, settings);
	h_hub_log(logf, sizeof logf, &e);
	snprintf(buf, sizeof buf,
	         "{\"type\":\"prepare\",\"biz_id\":\"shop\",\"message_key\":\"traced-1\","
	         "\"payload\":\"p\",\"forward\":{\"topic\":\"denied\"},\"checkback\":{\"url\":"
	         "\"http://127.0.0.1:%d/cb\",\"first_after_ms\":0},\"trace\":{\"traceparent\":"
	         "\"" TP "\"}}", h_httpd_port(srv));
	h_send_str(&e, -1, "traced-1", buf);
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'traced-1' "
	                     "AND event = 'dead_lettered'", "1", 60000));
	const char *redrive[] = {"redrive", "shop", "traced-1", NULL};
	cr_assert_eq(h_txhub(&e, redrive, errb, sizeof errb), 0, "%s", errb);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'traced-1' "
	                     "AND event = 'dead_lettered'", "2", 60000));
	cr_assert_eq(h_hub_stop(hub), 0);

	static const char *const paths[] = {
		"\"msg\":\"checkback: attempt 1: HTTP 503",           /* the check-back */
		"\"msg\":\"forward: attempt 1: ",                      /* a failed forward */
		"\"msg\":\"ALERT send_failed: ",                       /* parked */
		"\"msg\":\"dead-letter: parked forward to denied produced to dlq.", /* dead letter */
	};
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
		cr_expect_geq(h_log_lines(logf, paths[i]), 1, "no line %s", paths[i]);
	cr_expect_geq(h_log_lines(logf, "\"msg\":\"ALERT send_failed: "), 2, "parked twice");
	cr_expect_eq(lines_without(logf, "traced-1", "\"trace_id\":\"" TID "\"", first,
	                           sizeof first), 0, "a line without the trace id: %s", first);
	cr_expect_geq(h_log_lines(logf, "traced-1"), 7);
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'traced-1' "
	                         "AND trace_id IS DISTINCT FROM '" TID "'"), 0);
	h_httpd_stop(srv);
	h_teardown(&e);
	h_devbroker_stop(broker, NULL);
}

/* ---- the dead-letter topic ---- */

static long dlq_series(int port, const char *outcome)
{
	char name[128], *body = NULL;
	snprintf(name, sizeof name, "txhub_dead_letters_total{outcome=\"%s\"}", outcome);
	if (!h_http_wait(port, "/metrics", 200, 10000, &body))
		return -1;
	long v = (long)h_series(body, name);
	free(body);
	return v;
}

Test(tracedlq, a_parked_forward_is_dead_lettered_once_and_again_after_a_new_park, .timeout = 240)
{
	h_env e;
	h_setup(&e, "dlq");
	const char *deny[] = {"--deny-topic", "denied", NULL};
	pid_t broker = h_devbroker_start(&e, deny, NULL);
	char dlq[128], dlqset[160], listen[64];
	snprintf(dlq, sizeof dlq, "dlq.%s", e.name);
	snprintf(dlqset, sizeof dlqset, "forward.dead_letter_topic=%s", dlq);
	int port = h_free_port();
	snprintf(listen, sizeof listen, "http.listen=127.0.0.1:%d", port);
	const char *settings[] = {"kafka.message.timeout.ms=1000", "forward.backoff_ms=100",
	                          "forward.backoff_max_ms=200", "forward.max_attempts=2", dlqset,
	                          listen, NULL};
	pid_t hub = h_hub_start(&e, settings);
	h_send_str(&e, -1, "f", "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"f-1\","
	                        "\"payload\":\"the bytes\",\"forward\":{\"topic\":\"denied\","
	                        "\"key\":\"k-1\",\"headers\":{\"h1\":\"v1\"}},"
	                        "\"trace\":{\"traceparent\":\"" TP "\"}}");
	h_flush();
	cr_assert(h_wait(&e, status_of("f-1"), "committed/failed", 60000));
	cr_assert(h_wait(&e, "SELECT dead_lettered_at IS NOT NULL FROM txhub.messages "
	                     "WHERE message_key = 'f-1'", "t", WAIT_MS));
	h_record *r;
	size_t n = h_read_topic(&e, dlq, 1500, &r);
	cr_assert_eq(n, 1);
	cr_assert_eq(r[0].value_len, 9);
	cr_assert_eq(memcmp(r[0].value, "the bytes", 9), 0);
	cr_assert_str_eq(r[0].key, "k-1");
	const char *hd = r[0].headers;
	cr_assert(strstr(hd, "h1=v1\n"), "%s", hd);
	cr_assert(strstr(hd, "txhub-biz-id=b\n"), "%s", hd);
	cr_assert(strstr(hd, "txhub-message-key=f-1\n"), "%s", hd);
	cr_assert(strstr(hd, "traceparent=" TP "\n"), "%s", hd);
	cr_assert(strstr(hd, "txhub-dlq-topic=denied\n"), "%s", hd);
	/* the last error names the topic and librdkafka's reason, in the words
	 * of the librdkafka at hand (2.0.2: "delivery to denied failed: Local:
	 * Message timed out", later: "produce to denied refused: Broker: Topic
	 * authorization failed") */
	const char *why = strstr(hd, "txhub-dlq-error=");
	cr_assert(why, "%s", hd);
	char line[400];
	snprintf(line, sizeof line, "%.*s", (int)strcspn(why, "\n"), why);
	const char *after = strstr(line, " to denied ");
	cr_assert(after && strstr(after, ": ") && strlen(strstr(after, ": ")) > 2, "%s", line);
	cr_assert(strstr(hd, "txhub-dlq-attempts=2\n"), "%s", hd);
	cr_assert(strstr(hd, "txhub-dlq-at=20"), "%s", hd);
	cr_assert(strstr(hd, "Z\n"), "%s", hd);
	h_records_free(r, n);
	/* the row stays parked; its history says so, with its trace id */
	cr_assert_str_eq(h_query(&e, status_of("f-1"), sqlbuf, sizeof sqlbuf), "committed/failed");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'f-1' "
	                         "AND event = 'dead_lettered' AND trace_id = '" TID "'"), 1);
	cr_assert_eq(dlq_series(port, "sent"), 1);

	/* a restart does not send it again */
	cr_assert_eq(h_hub_stop(hub), 0);
	hub = h_hub_start(&e, settings);
	h_pause_ms(3000);
	n = h_read_topic(&e, dlq, 1500, &r);
	cr_assert_eq(n, 1, "after a restart: %zu", n);
	h_records_free(r, n);

	/* redriven, parked again: dead-lettered again */
	char errb[1024];
	const char *redrive[] = {"redrive", "b", "f-1", NULL};
	cr_assert_eq(h_txhub(&e, redrive, errb, sizeof errb), 0, "%s", errb);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'f-1' "
	                     "AND event = 'dead_lettered'", "2", 60000));
	n = h_read_topic(&e, dlq, 1500, &r);
	cr_assert_eq(n, 2);
	h_records_free(r, n);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
	h_devbroker_stop(broker, NULL);
}

Test(tracedlq, a_failing_dead_letter_topic_is_alerted_and_the_hub_goes_on, .timeout = 240)
{
	h_env e;
	h_setup(&e, "dlqfail");
	char dlq[128], dlqset[160], hook[128];
	snprintf(dlq, sizeof dlq, "dlq.%s", e.name);
	snprintf(dlqset, sizeof dlqset, "forward.dead_letter_topic=%s", dlq);
	const char *deny[] = {"--deny-topic", "denied", "--deny-topic", dlq, NULL};
	FILE *cmd = NULL;
	pid_t broker = h_devbroker_start(&e, deny, &cmd);
	h_webhook *w = h_webhook_start();
	cr_assert_not_null(w);
	snprintf(hook, sizeof hook, "alert.webhook=http://127.0.0.1:%d/alert", h_webhook_port(w));
	const char *settings[] = {"kafka.message.timeout.ms=1000", "forward.backoff_ms=100",
	                          "forward.backoff_max_ms=200", "forward.max_attempts=2", dlqset,
	                          hook, NULL};
	pid_t hub = h_hub_start(&e, settings);
	h_send_str(&e, -1, "f", "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"f-1\","
	                        "\"payload\":\"x\",\"forward\":{\"topic\":\"denied\"},"
	                        "\"trace\":{\"traceparent\":\"" TP "\"}}");
	h_flush();
	cr_assert(h_wait(&e, status_of("f-1"), "committed/failed", 60000));
	/* alerted once (send_failed, then dead_letter_failed), not recorded */
	int found = 0;
	char body[2048];
	for (int i = 0; i < 200 && !found; i++) {
		for (int j = 0; j < h_webhook_count(w) && !found; j++)
			found = strstr(h_webhook_body(w, j, body, sizeof body),
			               "\"kind\":\"dead_letter_failed\"") != NULL;
		if (!found)
			h_pause_ms(100);
	}
	cr_assert(found, "no dead_letter_failed alert");
	cr_assert(strstr(body, dlq), "%s", body);
	cr_assert_str_eq(h_query(&e, "SELECT dead_lettered_at IS NULL FROM txhub.messages "
	                             "WHERE message_key = 'f-1'", sqlbuf, sizeof sqlbuf), "t");
	/* the hub goes on: another message is forwarded meanwhile */
	h_send_str(&e, -1, "g", "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"ok-1\","
	                        "\"payload\":\"y\",\"forward\":{\"topic\":\"allowed\"}}");
	h_flush();
	cr_assert(h_wait(&e, status_of("ok-1"), "committed/sent", WAIT_MS));
	char logf[256];
	h_hub_log(logf, sizeof logf, &e);
	cr_assert_geq(h_log_lines(logf, "producing 1 parked forward(s) to the dead-letter topic"), 1);
	char first[8192];
	cr_assert_eq(lines_without(logf, "f-1", "trace_id=" TID, first, sizeof first), 0,
	             "a line without the trace id: %s", first);
	/* in the history once per park, however many attempts failed; and in
	 * txhub status (its -X names the topic as the hub's configuration does) */
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'f-1' AND "
	                     "event = 'dead_letter_failed' AND trace_id = '" TID "'", "1", WAIT_MS));
	for (int i = 0; i < 100 && h_log_lines(logf, "dead-letter: biz_id=b message_key=f-1") < 2; i++)
		h_pause_ms(100);
	cr_assert_geq(h_log_lines(logf, "dead-letter: biz_id=b message_key=f-1"), 2,
	              "tried more than once");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'f-1' AND "
	                         "event = 'dead_letter_failed'"), 1);
	static char out[1 << 16];
	const char *status[] = {"-X", dlqset, "status", "--json", NULL};
	cr_assert_eq(h_txhub_io(&e, status, out, sizeof out, body, sizeof body), 0, "%s", body);
	cr_assert(strstr(out, "\"dead_letter\":{\"topic\":\"dlq."), "%s", out);
	cr_assert(strstr(out, "\"dead_lettered\":0,\"waiting\":1,\"failing\":true,"
	                      "\"failing_messages\":1,"), "%s", out);
	const char *status_text[] = {"-X", dlqset, "status", NULL};
	cr_assert_eq(h_txhub_io(&e, status_text, out, sizeof out, body, sizeof body), 0, "%s", body);
	cr_assert(strstr(out, "FAILING since "), "%s", out);
	/* the topic works again: the parked forward goes there */
	fprintf(cmd, "allow %s\n", dlq);
	fflush(cmd);
	cr_assert(h_wait(&e, "SELECT dead_lettered_at IS NOT NULL FROM txhub.messages "
	                     "WHERE message_key = 'f-1'", "t", 90000));
	h_record *r;
	size_t n = h_read_topic(&e, dlq, 1500, &r);
	cr_assert_eq(n, 1);
	h_records_free(r, n);
	cr_assert_geq(h_log_lines(logf, "works again"), 1);
	cr_assert_eq(h_txhub_io(&e, status, out, sizeof out, body, sizeof body), 0, "%s", body);
	cr_assert(strstr(out, "\"dead_lettered\":1,\"waiting\":0,\"failing\":false,"), "%s", out);
	int alerts = 0;
	for (int j = 0; j < h_webhook_count(w); j++)
		alerts += strstr(h_webhook_body(w, j, body, sizeof body), "dead_letter_failed") != NULL;
	cr_assert_eq(alerts, 1, "one alert per episode: %d", alerts);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_webhook_stop(w);
	h_teardown(&e);
	h_devbroker_stop(broker, cmd);
}

Test(tracedlq, exactly_once_parks_a_forward_to_a_missing_topic_and_dead_letters_it_once,
     .timeout = 300)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	h_env e;
	h_setup(&e, "dlqeos");
	char dlq[128], dlqset[160], es[256], missing[128], buf[1024];
	snprintf(dlq, sizeof dlq, "dlq.%s", e.name);
	snprintf(missing, sizeof missing, "missing.%s", e.name);
	snprintf(dlqset, sizeof dlqset, "forward.dead_letter_topic=%s", dlq);
	cr_assert_eq(h_create_topic(&e, dlq, 1, NULL, NULL, es, sizeof es), 0, "%s", es);
	h_control_topic(&e);
	const char *settings[] = {"forward.mode=exactly_once", "kafka.allow.auto.create.topics=false",
	                          "forward.backoff_ms=100", "forward.backoff_max_ms=200",
	                          "forward.max_attempts=2", dlqset, NULL};
	pid_t hub = h_hub_start(&e, settings);
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"m-1\","
	                          "\"payload\":\"x\",\"forward\":{\"topic\":\"%s\"}}", missing);
	h_send_str(&e, -1, "m-1", buf);
	h_flush();
	cr_assert(h_wait(&e, status_of("m-1"), "committed/failed", 120000));
	cr_assert(h_wait(&e, "SELECT dead_lettered_at IS NOT NULL FROM txhub.messages "
	                     "WHERE message_key = 'm-1'", "t", 60000));
	cr_assert_eq(h_hub_stop(hub), 0);
	hub = h_hub_start(&e, settings);
	h_pause_ms(5000);
	h_record *r;
	size_t n = h_read_topic_committed(&e, dlq, 3000, &r);
	cr_assert_eq(n, 1);
	cr_assert(strstr(r[0].headers, "txhub-dlq-topic="), "%s", r[0].headers);
	cr_assert(strstr(r[0].headers, "the broker has no such topic"), "%s", r[0].headers);
	h_records_free(r, n);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

/* forward.dead_letter_topic naming a forward topic (issue 30 §12): its dead
 * letters would carry the message's own txhub-biz-id and txhub-message-key,
 * so that a consumer deduplicating on them takes a dead letter for the
 * message. An envelope forwarding into it is rejected, as one into the
 * control topic is, and nothing reaches the topic. */
Test(tracedlq, a_forward_into_the_dead_letter_topic_is_rejected, .timeout = 180)
{
	h_env e;
	h_setup(&e, "dlqfwd");
	char dlq[128], dlqset[160], buf[1024];
	snprintf(dlq, sizeof dlq, "dlq.%s", e.name);
	snprintf(dlqset, sizeof dlqset, "forward.dead_letter_topic=%s", dlq);
	const char *settings[] = {dlqset, NULL};
	pid_t hub = h_hub_start(&e, settings);
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"d-1\","
	                          "\"payload\":\"x\",\"forward\":{\"topic\":\"%s\"}}", dlq);
	h_send_str(&e, -1, "d-1", buf);
	/* and one that goes elsewhere, after it: intake read past the first */
	h_send_str(&e, -1, "d-2", "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"d-2\","
	                          "\"payload\":\"y\",\"forward\":{\"topic\":\"elsewhere\"}}");
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.rejected WHERE reason = 'field "
	                     "\"forward.topic\" names the dead-letter topic "
	                     "(forward.dead_letter_topic)'", "1", WAIT_MS),
	          "rejected: %s", h_query(&e, "SELECT coalesce(string_agg(reason, '; '), '(none)') "
	                                      "FROM txhub.rejected", sqlbuf, sizeof sqlbuf));
	cr_assert(h_wait(&e, status_of("d-2"), "committed/sent", WAIT_MS));
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key = 'd-1'"), 0);
	h_record *r;
	size_t n = h_read_topic(&e, dlq, 1500, &r);
	cr_assert_eq(n, 0, "%zu record(s) in the dead-letter topic", n);
	h_records_free(r, n);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

/* ...and a hub whose tenants may forward into it refuses to start, with
 * the exit status of a refused configuration (2), as for the control
 * topic. */
Test(tracedlq, a_tenants_forward_topic_as_dead_letter_topic_is_refused_at_start, .timeout = 120)
{
	h_env e;
	h_setup(&e, "dlqten");
	char dlq[128], dlqset[160], ctl[128], errb[1024], logf[256];
	snprintf(dlq, sizeof dlq, "orders.%s.dlq", e.name);
	snprintf(ctl, sizeof ctl, "ctl.%s", e.name);
	snprintf(dlqset, sizeof dlqset, "forward.dead_letter_topic=%s", dlq);
	const char *add[] = {"tenant", "add", "team-a", "--control-topic", ctl, "--biz", "shop",
	                     "--forward-topic", "orders.*", NULL};
	cr_assert_eq(h_txhub(&e, add, errb, sizeof errb), 0, "tenant add: %s", errb);
	const char *settings[] = {dlqset, NULL};
	pid_t hub = h_hub_start(&e, settings);
	h_hub_log(logf, sizeof logf, &e);
	int rc = h_wait_exit(hub, 60000);
	cr_assert_eq(rc, 2, "exit status %d (log %s)", rc, logf);
	char want[300];
	snprintf(want, sizeof want, "forward.dead_letter_topic: \"%s\" names a forward topic: "
	                            "tenant team-a may forward into it", dlq);
	cr_assert_eq(h_log_lines(logf, want), 1, "no line \"%s\" in %s", want, logf);

	/* another topic: it starts */
	const char *other[] = {"forward.dead_letter_topic=dead.letters", NULL};
	hub = h_hub_start(&e, other);
	h_hub_log(logf, sizeof logf, &e);
	int waited = 0;
	while (access(logf, R_OK) != 0 && waited < 5000) {
		h_pause_ms(20);
		waited += 20;
	}
	while (h_log_lines(logf, "hub: running") == 0 && waited < 30000) {
		h_pause_ms(100);
		waited += 100;
	}
	cr_assert_eq(h_log_lines(logf, "hub: running"), 1, "see %s", logf);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}
