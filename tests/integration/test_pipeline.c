/* test_pipeline.c: control topic -> PostgreSQL -> forward topic, end to end
 * against a real PostgreSQL and broker: forwarding, rollbacks, duplicates,
 * early decisions, one-shot commits, failed forwards, restarts. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "httpd.h"

/* An alert webhook: keeps the body of every POST. */
#define WAIT_MS 30000

static char sqlbuf[1024];

static const char *q(const char *fmt, const char *a, const char *b)
{
	snprintf(sqlbuf, sizeof sqlbuf, fmt, a, b);
	return sqlbuf;
}

static const char *status_of(const char *mk)
{
	return q("SELECT status || '/' || coalesce(send_status, '-') FROM txhub.messages "
	         "WHERE message_key = '%s'%s", mk, "");
}

Test(pipeline, prepare_then_commit_is_forwarded_once_with_exact_bytes, .timeout = 120)
{
	h_env e;
	h_setup(&e, "fwd");
	char fwd[128], buf[2048];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	pid_t hub = h_hub_start(&e, NULL);

	/* a JSON payload with a big integer and odd whitespace, a string one */
	snprintf(buf, sizeof buf,
	         "{\"type\":\"prepare\",\"biz_id\":\"shop\",\"message_key\":\"o-1\","
	         "\"payload\":{ \"amount\" : 12345678901234567890, \"tags\": [\"a b\", 1.50] },"
	         "\"forward\":{\"topic\":\"%s\",\"key\":\"cust-9\",\"headers\":{\"trace\":\"abc\"}}}", fwd);
	h_send_str(&e, -1, "o-1", buf);
	snprintf(buf, sizeof buf,
	         "{\"v\":1,\"type\":\"prepare\",\"biz_id\":42,\"message_key\":\"o-2\","
	         "\"payload\":\"h\\u00e9llo \\\"w\\\"\",\"forward\":{\"topic\":\"%s\"}}", fwd);
	h_send_str(&e, -1, "o-2", buf);
	h_flush();
	cr_assert(h_wait(&e, status_of("o-1"), "prepared/-", WAIT_MS));
	cr_assert(h_wait(&e, status_of("o-2"), "prepared/-", WAIT_MS));
	h_send_str(&e, -1, "o-1", "{\"type\":\"commit\",\"biz_id\":\"shop\",\"message_key\":\"o-1\"}");
	h_send_str(&e, -1, "o-2", "{\"type\":\"commit\",\"biz_id\":42,\"message_key\":\"o-2\"}");
	h_flush();
	cr_assert(h_wait(&e, status_of("o-1"), "committed/sent", WAIT_MS));
	cr_assert(h_wait(&e, status_of("o-2"), "committed/sent", WAIT_MS));
	cr_assert_str_eq(h_query(&e, "SELECT biz_id FROM txhub.messages WHERE message_key='o-2'",
	                         buf, sizeof buf), "42");

	h_record *r;
	size_t n = h_read_topic(&e, fwd, 1500, &r);
	cr_assert_eq(n, 2, "expected 2 forwarded records, got %zu", n);
	int seen1 = 0, seen2 = 0;
	for (size_t i = 0; i < n; i++) {
		if (strstr(r[i].headers, "txhub-message-key=o-1\n")) {
			seen1++;
			cr_assert_str_eq((char *)r[i].value,
			                 "{\"amount\":12345678901234567890,\"tags\":[\"a b\",1.50]}");
			cr_assert_str_eq(r[i].key, "cust-9");
			cr_assert_str_eq(r[i].headers,
			                 "trace=abc\ntxhub-biz-id=shop\ntxhub-message-key=o-1\n");
		} else {
			seen2++;
			cr_assert_eq(r[i].value_len, strlen("h\xc3\xa9llo \"w\""));
			cr_assert_str_eq((char *)r[i].value, "h\xc3\xa9llo \"w\"");
			cr_assert(r[i].key_null, "forward without key must give a null record key");
			cr_assert_str_eq(r[i].headers, "txhub-biz-id=42\ntxhub-message-key=o-2\n");
		}
	}
	cr_assert_eq(seen1, 1);
	cr_assert_eq(seen2, 1);
	h_records_free(r, n);
	cr_assert_eq(h_hub_stop(hub), 0, "SIGTERM must drain and exit 0");
	h_teardown(&e);
}

Test(pipeline, binary_payload_base64_forwarded_as_bytes, .timeout = 120)
{
	h_env e;
	h_setup(&e, "b64");
	char fwd[128], buf[1024];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	pid_t hub = h_hub_start(&e, NULL);
	/* bytes 00 ff 10 41 */
	snprintf(buf, sizeof buf,
	         "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"bin\","
	         "\"payload_base64\":\"AP8QQQ==\",\"forward\":{\"topic\":\"%s\"}}", fwd);
	h_send_str(&e, -1, "bin", buf);
	h_flush();
	cr_assert(h_wait(&e, status_of("bin"), "committed/sent", WAIT_MS));
	h_record *r;
	size_t n = h_read_topic(&e, fwd, 1500, &r);
	cr_assert_eq(n, 1);
	cr_assert_eq(r[0].value_len, 4);
	cr_assert(memcmp(r[0].value, "\x00\xff\x10\x41", 4) == 0);
	h_records_free(r, n);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

Test(pipeline, prepare_then_rollback_is_never_forwarded, .timeout = 120)
{
	h_env e;
	h_setup(&e, "rb");
	char fwd[128], buf[1024];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	pid_t hub = h_hub_start(&e, NULL);
	for (int i = 0; i < 3; i++) {
		char mk[16];
		snprintf(mk, sizeof mk, "r-%d", i);
		snprintf(buf, sizeof buf,
		         "{\"type\":\"prepare\",\"biz_id\":\"b\",\"message_key\":\"%s\","
		         "\"payload\":\"p\",\"forward\":{\"topic\":\"%s\"}}", mk, fwd);
		h_send_str(&e, -1, mk, buf);
		snprintf(buf, sizeof buf, "{\"type\":\"rollback\",\"biz_id\":\"b\",\"message_key\":\"%s\"}", mk);
		h_send_str(&e, -1, mk, buf);
		/* a commit after the rollback is a conflict; the rollback stands */
		snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"%s\"}", mk);
		h_send_str(&e, -1, mk, buf);
	}
	/* a marker committed after them, so we know the hub got that far */
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"marker\","
	                          "\"payload\":\"m\",\"forward\":{\"topic\":\"%s\"}}", fwd);
	h_send_str(&e, -1, "r-0", buf);
	h_flush();
	cr_assert(h_wait(&e, status_of("marker"), "committed/sent", WAIT_MS));
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'rolled_back' "
	                     "AND send_status IS NULL", "3", WAIT_MS));
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.conflicts WHERE arrived = 'commit' "
	                     "AND met_status = 'rolled_back'", "3", WAIT_MS));
	h_record *r;
	size_t n = h_read_topic(&e, fwd, 1500, &r);
	cr_assert_eq(n, 1, "only the marker may be forwarded, got %zu records", n);
	cr_assert_str_eq((char *)r[0].value, "m");
	h_records_free(r, n);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

Test(pipeline, every_envelope_twice_changes_nothing, .timeout = 120)
{
	h_env e;
	h_setup(&e, "dup");
	char fwd[128], buf[1024];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	pid_t hub = h_hub_start(&e, NULL);
	const int N = 20;
	for (int i = 0; i < N; i++) {
		char mk[16];
		snprintf(mk, sizeof mk, "d-%d", i);
		snprintf(buf, sizeof buf,
		         "{\"type\":\"prepare\",\"biz_id\":\"b\",\"message_key\":\"%s\","
		         "\"payload\":{\"n\":%d},\"forward\":{\"topic\":\"%s\"}}", mk, i, fwd);
		h_send_str(&e, -1, mk, buf);
		h_send_str(&e, -1, mk, buf);
		snprintf(buf, sizeof buf, "{\"type\":\"%s\",\"biz_id\":\"b\",\"message_key\":\"%s\"}",
		         i % 4 == 3 ? "rollback" : "commit", mk);
		h_send_str(&e, -1, mk, buf);
		h_send_str(&e, -1, mk, buf);
	}
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'committed' "
	                     "AND send_status = 'sent'", "15", WAIT_MS));
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'rolled_back'",
	                 "5", WAIT_MS));
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.conflicts"), 0);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.rejected"), 0);
	h_record *r;
	size_t n = h_read_topic(&e, fwd, 1500, &r);
	cr_assert_eq(n, 15, "each committed message exactly once, got %zu", n);
	h_records_free(r, n);

	/* the same again after the fact: still nothing changes */
	char before[256], after[256];
	h_query(&e, "SELECT string_agg(message_key || status || send_status || updated_at, ',' "
	            "ORDER BY message_key) FROM txhub.messages WHERE status = 'committed'",
	        before, sizeof before);
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"d-0\"}");
	h_send_str(&e, -1, "d-0", buf);
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"marker\","
	                          "\"payload\":\"m\",\"forward\":{\"topic\":\"%s\"}}", fwd);
	h_send_str(&e, -1, "d-0", buf);
	h_flush();
	cr_assert(h_wait(&e, status_of("marker"), "committed/sent", WAIT_MS));
	h_query(&e, "SELECT string_agg(message_key || status || send_status || updated_at, ',' "
	            "ORDER BY message_key) FROM txhub.messages WHERE status = 'committed' "
	            "AND message_key <> 'marker'", after, sizeof after);
	cr_assert_str_eq(before, after);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

Test(pipeline, commit_before_prepare_in_another_partition_ends_committed, .timeout = 120)
{
	h_env e;
	h_setup(&e, "early");
	char fwd[128], buf[1024];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	pid_t hub = h_hub_start(&e, NULL);
	/* badly keyed producer: the decisions land in partition 1, the
	 * prepares in partition 0, and the decisions are read first */
	h_send_str(&e, 1, "x", "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"early-c\"}");
	h_send_str(&e, 1, "x", "{\"type\":\"rollback\",\"biz_id\":\"b\",\"message_key\":\"early-r\"}");
	h_flush();
	cr_assert(h_wait(&e, "SELECT status || ':' || decision FROM txhub.messages WHERE message_key = 'early-c'",
	                 "awaiting_prepare:commit", WAIT_MS));
	cr_assert(h_wait(&e, "SELECT status || ':' || decision FROM txhub.messages WHERE message_key = 'early-r'",
	                 "awaiting_prepare:rollback", WAIT_MS));
	snprintf(buf, sizeof buf, "{\"type\":\"prepare\",\"biz_id\":\"b\",\"message_key\":\"early-c\","
	                          "\"payload\":\"yes\",\"forward\":{\"topic\":\"%s\"}}", fwd);
	h_send_str(&e, 0, "y", buf);
	snprintf(buf, sizeof buf, "{\"type\":\"prepare\",\"biz_id\":\"b\",\"message_key\":\"early-r\","
	                          "\"payload\":\"no\",\"forward\":{\"topic\":\"%s\"}}", fwd);
	h_send_str(&e, 0, "y", buf);
	h_flush();
	cr_assert(h_wait(&e, status_of("early-c"), "committed/sent", WAIT_MS));
	cr_assert(h_wait(&e, status_of("early-r"), "rolled_back/-", WAIT_MS));
	h_record *r;
	size_t n = h_read_topic(&e, fwd, 1500, &r);
	cr_assert_eq(n, 1);
	cr_assert_str_eq((char *)r[0].value, "yes");
	h_records_free(r, n);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

Test(pipeline, one_shot_commit_is_stored_and_forwarded, .timeout = 120)
{
	h_env e;
	h_setup(&e, "oneshot");
	char fwd[128], buf[1024];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	pid_t hub = h_hub_start(&e, NULL);
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"one\","
	                          "\"payload\":[1,2,3],\"forward\":{\"topic\":\"%s\",\"key\":\"k\"}}", fwd);
	h_send_str(&e, -1, "one", buf);
	h_flush();
	cr_assert(h_wait(&e, status_of("one"), "committed/sent", WAIT_MS));
	cr_assert_str_eq(h_query(&e, "SELECT convert_from(payload, 'UTF8') || ' ' || forward_topic "
	                             "FROM txhub.messages WHERE message_key = 'one'", buf, sizeof buf),
	                 q("[1,2,3] %s%s", fwd, ""));
	h_record *r;
	size_t n = h_read_topic(&e, fwd, 1500, &r);
	cr_assert_eq(n, 1);
	cr_assert_str_eq((char *)r[0].value, "[1,2,3]");
	cr_assert_str_eq(r[0].key, "k");
	h_records_free(r, n);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

Test(pipeline, undeliverable_forward_ends_failed_after_max_attempts, .timeout = 180)
{
	h_env e;
	h_setup(&e, "sendfail");
	/* a broker of our own whose topic "denied" refuses access */
	const char *deny[] = {"--deny-topic", "denied", NULL};
	pid_t broker = h_devbroker_start(&e, deny, NULL);

	h_webhook *w = h_webhook_start();
	cr_assert_not_null(w);
	char hook[128];
	snprintf(hook, sizeof hook, "alert.webhook=http://127.0.0.1:%d/alert", h_webhook_port(w));
	const char *settings[] = {"kafka.message.timeout.ms=1000", "forward.backoff_ms=100",
	                          "forward.backoff_max_ms=200", "forward.max_attempts=3", hook, NULL};
	pid_t hub = h_hub_start(&e, settings);
	h_send_str(&e, -1, "f", "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"f-1\","
	                        "\"payload\":\"x\",\"forward\":{\"topic\":\"denied\"}}");
	h_send_str(&e, -1, "g", "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"ok-1\","
	                        "\"payload\":\"y\",\"forward\":{\"topic\":\"allowed\"}}");
	h_flush();
	cr_assert(h_wait(&e, status_of("f-1"), "committed/failed", 60000));
	char buf[512];
	cr_assert_str_eq(h_query(&e, "SELECT send_attempts FROM txhub.messages WHERE message_key = 'f-1'",
	                         buf, sizeof buf), "3");
	h_query(&e, "SELECT last_error FROM txhub.messages WHERE message_key = 'f-1'", buf, sizeof buf);
	cr_assert(strstr(buf, "denied") != NULL, "last_error names the topic: %s", buf);
	/* its history: the three failed attempts, each naming the topic and
	 * librdkafka's reason, then the alert. The reason is the library's:
	 * 2.0.2 retries the embedded broker's refusal until
	 * kafka.message.timeout.ms ("delivery to denied failed: Local: Message
	 * timed out"), later ones return it from the produce call ("produce to
	 * denied refused: Broker: Topic authorization failed") */
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'f-1' "
	                         "AND event = 'forward_failed' AND actor = 'txhub' AND detail LIKE "
	                         "'attempt _: % to denied %: _%'"), 3);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'f-1' "
	                         "AND event = 'alert' AND detail LIKE 'send_failed after 3 %'"), 1);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'ok-1'"), 0);
	/* the failure of one topic does not hold up another */
	cr_assert(h_wait(&e, status_of("ok-1"), "committed/sent", WAIT_MS));
	/* the webhook heard of it once */
	for (int i = 0; i < 100 && h_webhook_count(w) == 0; i++)
		usleep(100000);
	cr_assert_eq(h_hub_stop(hub), 0); /* stopping delivers what is queued */
	int got = h_webhook_count(w);
	char body[2048];
	h_webhook_body(w, 0, body, sizeof body);
	h_webhook_stop(w);
	cr_assert_eq(got, 1, "%d alerts", got);
	cr_assert(strstr(body, "\"kind\":\"send_failed\""), "%s", body);
	cr_assert(strstr(body, "\"message_key\":\"f-1\""), "%s", body);
	cr_assert(strstr(body, "\"topic\":\"denied\""), "%s", body);
	cr_assert(strstr(body, "\"attempts\":3"), "%s", body);
	h_teardown(&e);
	h_devbroker_stop(broker, NULL);
}
