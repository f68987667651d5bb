/* The C client library against a running hub (docs/producers.md: Producing from C): every kind of
 * envelope the producer sends is accepted and ends in its state, bad input
 * sends nothing, and a producer that dies between prepare and commit is
 * resolved by a check-back answered with txhub_checkback_handle(). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "httpd.h"
#include "txhub.h"
#include "vectors.h"

#define WAIT_MS 60000

static char sqlbuf[512];

static const char *row(const char *what, const char *mk)
{
	snprintf(sqlbuf, sizeof sqlbuf, "SELECT %s FROM txhub.messages WHERE message_key = '%s'",
	         what, mk);
	return sqlbuf;
}

static txhub_producer *producer(h_env *e, int timeout_ms)
{
	txhub_producer_config cfg = {.brokers = e->brokers, .control_topic = e->topic,
	                             .timeout_ms = timeout_ms};
	txhub_producer *p = NULL;
	char err[512];
	cr_assert_eq(txhub_producer_new(&cfg, &p, err, sizeof err), TXHUB_OK, "%s", err);
	return p;
}

#define OK(call)                                                                 \
	do {                                                                         \
		char err_[512] = "";                                                     \
		txhub_status st_ = (call);                                               \
		cr_assert_eq(st_, TXHUB_OK, "%s: %s: %s", #call, txhub_status_name(st_), err_); \
	} while (0)
#define ERR err_, sizeof err_

typedef struct {
	pthread_mutex_t mu;
	int done, ok;
} tally;

static void on_done(txhub_status st, const char *errstr, void *opaque)
{
	tally *t = opaque;
	cr_assert_eq(st, TXHUB_OK, "async: %s", errstr);
	pthread_mutex_lock(&t->mu);
	t->done++;
	t->ok += st == TXHUB_OK;
	pthread_mutex_unlock(&t->mu);
}

Test(producer, every_envelope_is_accepted_and_ends_in_its_state, .timeout = 180)
{
	h_env e;
	h_setup(&e, "clprod");
	char fwd[128];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	txhub_producer *p = producer(&e, 0);
	txhub_header hdrs[] = {{"source", "shop"}, {"trace", "t-\"1\""}};
	const char *json = "{ \"order_id\": 1, \"total\": 12.50 }";
	txhub_message m = {.biz_id = "shop", .message_key = "c-1", .payload_kind = TXHUB_PAYLOAD_JSON,
	                   .payload = json, .payload_len = strlen(json), .forward_topic = fwd,
	                   .forward_key = "c-1", .forward_headers = hdrs, .header_count = 2};
	OK(txhub_producer_prepare(p, &m, ERR));
	OK(txhub_producer_commit(p, "shop", "c-1", ERR));
	m.message_key = "c-2";
	m.payload_kind = TXHUB_PAYLOAD_STRING;
	m.payload = "text é";
	m.payload_len = strlen("text é");
	OK(txhub_producer_prepare(p, &m, ERR));
	OK(txhub_producer_rollback(p, "shop", "c-2", ERR));
	static const unsigned char bin[] = {0, 1, 2, 0xff};
	txhub_message one = {.biz_id = "shop", .message_key = "c-3", .payload_kind = TXHUB_PAYLOAD_BYTES,
	                     .payload = bin, .payload_len = sizeof bin, .forward_topic = fwd};
	OK(txhub_producer_one_shot(p, &one, ERR));
	m.message_key = "c-4"; /* prepared, never decided (no check-back URL) */
	OK(txhub_producer_prepare(p, &m, ERR));
	/* JSON strings: the consumer gets their compact JSON text, quotes and all */
	const char *jsons[] = {"\"hello\"", " \"q\\\" \\u00e9 \xc3\xa9\" "};
	for (int i = 0; i < 2; i++) {
		txhub_message j = {.biz_id = "shop", .message_key = i ? "c-6" : "c-5",
		                   .payload_kind = TXHUB_PAYLOAD_JSON, .payload = jsons[i],
		                   .payload_len = strlen(jsons[i]), .forward_topic = fwd};
		OK(txhub_producer_one_shot(p, &j, ERR));
	}
	/* the asynchronous form: 20 prepares and their commits */
	tally t = {.mu = PTHREAD_MUTEX_INITIALIZER};
	char keys[20][16];
	for (int i = 0; i < 20; i++) {
		snprintf(keys[i], sizeof keys[i], "a-%d", i);
		txhub_message a = {.biz_id = "shop", .message_key = keys[i],
		                   .payload_kind = TXHUB_PAYLOAD_STRING, .payload = keys[i],
		                   .payload_len = strlen(keys[i]), .forward_topic = fwd};
		OK(txhub_producer_send(p, TXHUB_PREPARE, &a, on_done, &t, ERR));
		txhub_message d = {.biz_id = "shop", .message_key = keys[i]};
		OK(txhub_producer_send(p, i % 2 ? TXHUB_ROLLBACK : TXHUB_COMMIT, &d, on_done, &t, ERR));
	}
	OK(txhub_producer_flush(p, 30000));
	cr_assert_eq(t.done, 40);
	cr_assert_eq(t.ok, 40);
	txhub_producer_destroy(p, 5000);

	pid_t hub = h_hub_start(&e, NULL);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages", "26", WAIT_MS));
	cr_assert(h_wait(&e, row("status || '/' || coalesce(send_status, '-')", "c-1"), "committed/sent", WAIT_MS));
	cr_assert(h_wait(&e, row("status", "c-2"), "rolled_back", WAIT_MS));
	cr_assert(h_wait(&e, row("status || '/' || coalesce(send_status, '-')", "c-3"), "committed/sent", WAIT_MS));
	cr_assert(h_wait(&e, row("status", "c-4"), "prepared", WAIT_MS));
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE message_key LIKE 'a-%' "
	                     "AND status = 'committed'", "10", WAIT_MS));
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE message_key LIKE 'a-%' "
	                     "AND status = 'rolled_back'", "10", WAIT_MS));
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", "14", WAIT_MS));
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.rejected"), 0);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.conflicts"), 0);
	h_record *recs;
	size_t n = h_read_topic(&e, fwd, 1500, &recs);
	cr_assert_eq(n, 14);
	int strings = 0;
	for (size_t i = 0; i < n; i++) {
		if (strstr(recs[i].headers, "txhub-message-key=c-1\n")) {
			cr_assert_str_eq((char *)recs[i].value, "{\"order_id\":1,\"total\":12.50}");
			cr_assert_str_eq(recs[i].key, "c-1");
			/* (the hub keeps headers as jsonb, which orders them its own way) */
			cr_assert(strstr(recs[i].headers, "source=shop\n"), "%s", recs[i].headers);
			cr_assert(strstr(recs[i].headers, "trace=t-\"1\"\n"), "%s", recs[i].headers);
			cr_assert(strstr(recs[i].headers, "txhub-biz-id=shop\n"), "%s", recs[i].headers);
		} else if (strstr(recs[i].headers, "txhub-message-key=c-3\n")) {
			cr_assert_eq(recs[i].value_len, 4);
			cr_assert(memcmp(recs[i].value, bin, 4) == 0);
			cr_assert(recs[i].key_null);
		} else if (strstr(recs[i].headers, "txhub-message-key=c-5\n")) {
			cr_assert_str_eq((char *)recs[i].value, "\"hello\"");
			strings++;
		} else if (strstr(recs[i].headers, "txhub-message-key=c-6\n")) {
			cr_assert_str_eq((char *)recs[i].value, "\"q\\\" \\u00e9 \xc3\xa9\"");
			strings++;
		}
	}
	cr_assert_eq(strings, 2);
	/* and every envelope was keyed by its message_key: read them back */
	h_records_free(recs, n);
	n = h_read_topic(&e, e.topic, 1500, &recs);
	cr_assert_eq(n, 48);
	for (size_t i = 0; i < n; i++)
		cr_assert(strstr((char *)recs[i].value, recs[i].key), "record keyed %s: %s", recs[i].key,
		          (char *)recs[i].value);
	h_records_free(recs, n);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

/* Which call a vector's type maps to, for the bad-input test. */
static txhub_status call_for(txhub_producer *p, const v_input *in, int variant, char *err, size_t errsz)
{
	switch (in->type) {
	case TXHUB_PREPARE:
		return variant ? txhub_producer_send(p, TXHUB_PREPARE, &in->m, on_done, NULL, err, errsz)
		               : txhub_producer_prepare(p, &in->m, err, errsz);
	case TXHUB_COMMIT:
		if (in->m.payload_kind != TXHUB_PAYLOAD_NONE || in->m.forward_topic)
			return txhub_producer_one_shot(p, &in->m, err, errsz);
		return txhub_producer_commit(p, in->m.biz_id, in->m.message_key, err, errsz);
	case TXHUB_ROLLBACK:
		return txhub_producer_rollback(p, in->m.biz_id, in->m.message_key, err, errsz);
	}
	return TXHUB_ERR_INVALID;
}

Test(producer, bad_input_is_refused_before_anything_is_sent, .timeout = 120)
{
	h_env e;
	h_setup(&e, "clbad");
	txhub_producer *p = producer(&e, 0);
	cJSON *doc = v_load("envelopes.json");
	const cJSON *vec;
	int n = 0;
	cJSON_ArrayForEach(vec, cJSON_GetObjectItemCaseSensitive(doc, "invalid_inputs")) {
		const char *name = cJSON_GetObjectItemCaseSensitive(vec, "name")->valuestring;
		v_input in;
		v_input_from(vec, &in);
		for (int variant = 0; variant < 2 && !in.max_bytes; variant++) {
			/* (the vector with a max_bytes of its own: the producer's limit is tried below) */
			char err[512] = "";
			txhub_status st = call_for(p, &in, variant, err, sizeof err);
			cr_assert_eq(st, TXHUB_ERR_INVALID, "%s: %s", name, txhub_status_name(st));
			cr_assert_gt(strlen(err), 5, "%s: no reason", name);
		}
		v_input_free(&in);
		n++;
	}
	cJSON_Delete(doc);
	cr_assert_geq(n, 30);
	OK(txhub_producer_flush(p, 30000));
	txhub_producer_destroy(p, 1000);
	/* the forward topic may not be the control topic; over max_bytes */
	txhub_producer_config cfg = {.brokers = e.brokers, .control_topic = e.topic, .max_bytes = 200};
	cr_assert_eq(txhub_producer_new(&cfg, &p, NULL, 0), TXHUB_OK);
	char big[300], err[512];
	memset(big, 'x', sizeof big);
	txhub_message m = {.biz_id = "b", .message_key = "k", .payload_kind = TXHUB_PAYLOAD_BYTES,
	                   .payload = big, .payload_len = sizeof big, .forward_topic = "t"};
	cr_assert_eq(txhub_producer_prepare(p, &m, err, sizeof err), TXHUB_ERR_TOO_LARGE, "%s", err);
	cr_assert(strstr(err, "max_bytes (200)"), "%s", err);
	m.payload_len = 10;
	m.forward_topic = e.topic;
	cr_assert_eq(txhub_producer_one_shot(p, &m, err, sizeof err), TXHUB_ERR_INVALID);
	cr_assert(strstr(err, "control topic"), "%s", err);
	m.forward_topic = "t";
	cr_assert_eq(txhub_producer_send(p, TXHUB_PREPARE, &m, NULL, NULL, err, sizeof err), TXHUB_ERR_INVALID);
	cr_assert_eq(txhub_producer_prepare(NULL, &m, err, sizeof err), TXHUB_ERR_INVALID);
	cr_assert_eq(txhub_producer_prepare(p, NULL, err, sizeof err), TXHUB_ERR_INVALID);
	/* the only envelope sent: the rest reached nothing */
	m.message_key = "the-only-one";
	cr_assert_eq(txhub_producer_one_shot(p, &m, err, sizeof err), TXHUB_OK, "%s", err);
	txhub_producer_destroy(p, 5000);
	h_record *recs;
	size_t got = h_read_topic(&e, e.topic, 1500, &recs);
	cr_assert_eq(got, 1, "%zu records reached the control topic", got);
	cr_assert_str_eq(recs[0].key, "the-only-one");
	h_records_free(recs, got);
	h_teardown(&e);
}

Test(producer, bad_configuration)
{
	txhub_producer *p = (txhub_producer *)1;
	char err[512];
	txhub_producer_config none = {0};
	cr_assert_eq(txhub_producer_new(&none, &p, err, sizeof err), TXHUB_ERR_INVALID);
	cr_assert_null(p);
	cr_assert_eq(txhub_producer_new(NULL, &p, err, sizeof err), TXHUB_ERR_INVALID);
	txhub_producer_config bad_topic = {.brokers = "x:1", .control_topic = "a b"};
	cr_assert_eq(txhub_producer_new(&bad_topic, &p, err, sizeof err), TXHUB_ERR_INVALID);
	const char *weak[] = {"acks", "1", NULL};
	txhub_producer_config w = {.brokers = "x:1", .kafka = weak};
	cr_assert_eq(txhub_producer_new(&w, &p, err, sizeof err), TXHUB_ERR_INVALID);
	cr_assert(strstr(err, "acks"), "%s", err);
	const char *unknown[] = {"no.such.property", "1", NULL};
	txhub_producer_config u = {.brokers = "x:1", .kafka = unknown};
	cr_assert_eq(txhub_producer_new(&u, &p, err, sizeof err), TXHUB_ERR_INVALID);
	cr_assert(strstr(err, "no.such.property"), "%s", err);
	txhub_producer_config big = {.brokers = "x:1", .max_bytes = 10};
	cr_assert_eq(txhub_producer_new(&big, &p, err, sizeof err), TXHUB_ERR_INVALID);
	const char *fine[] = {"linger.ms", "2", "acks", "all", NULL};
	txhub_producer_config f = {.brokers = "127.0.0.1:1", .kafka = fine};
	cr_assert_eq(txhub_producer_new(&f, &p, err, sizeof err), TXHUB_OK, "%s", err);
	txhub_producer_destroy(p, 0);
	txhub_producer_destroy(NULL, 0);
}

Test(producer, an_unreachable_broker_is_an_error_value, .timeout = 60)
{
	txhub_producer_config cfg = {.brokers = "127.0.0.1:1", .timeout_ms = 1500};
	txhub_producer *p;
	char err[512];
	cr_assert_eq(txhub_producer_new(&cfg, &p, err, sizeof err), TXHUB_OK, "%s", err);
	cr_assert_eq(txhub_producer_commit(p, "b", "k", err, sizeof err), TXHUB_ERR_KAFKA);
	cr_assert(strstr(err, "not confirmed"), "%s", err);
	cr_assert(txhub_status_retriable(TXHUB_ERR_KAFKA));
	txhub_producer_destroy(p, 0);
}

/* ---- a producer that dies between prepare and commit ---- */

/* The producer's database, as far as the check-back sees it: crash-1's
 * local transaction committed, crash-2's never did. */
static int decide(const txhub_checkback_request *req, txhub_outcome *o, void *opaque)
{
	(void)opaque;
	if (strcmp(req->biz_id, "shop") != 0)
		return -1;
	*o = strcmp(req->message_key, "crash-1") == 0 ? TXHUB_COMMITTED : TXHUB_ROLLED_BACK;
	return 0;
}

static void endpoint(void *opaque, const h_http_request *r, h_http_answer *a)
{
	const char *secret = opaque;
	char attempt[32], ts[32], sig[128];
	int ha = h_http_header(r, "x-txhub-attempt", attempt, sizeof attempt);
	int ht = h_http_header(r, "x-txhub-timestamp", ts, sizeof ts);
	int hs = h_http_header(r, "x-txhub-signature", sig, sizeof sig);
	txhub_checkback_config cfg = {.secret = secret};
	txhub_checkback_response resp;
	txhub_checkback_handle(&cfg, r->query, ha ? attempt : NULL, ht ? ts : NULL, hs ? sig : NULL,
	                       decide, NULL, &resp);
	a->status = resp.http_status;
	snprintf(a->body, sizeof a->body, "%s", resp.body);
}

/* In another process (tests/clients/prepare_and_die.c): prepare, then die
 * before the commit. */
static void prepare_and_die(h_env *e, const char *mk, const char *url, const char *fwd)
{
	char *argv[] = {(char *)PREPARE_AND_DIE, e->brokers, e->topic, (char *)mk, (char *)url,
	                (char *)fwd, NULL};
	pid_t pid;
	cr_assert_eq(posix_spawn(&pid, PREPARE_AND_DIE, NULL, NULL, argv, environ), 0,
	             "cannot run %s", PREPARE_AND_DIE);
	int st;
	waitpid(pid, &st, 0);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the producer child failed to prepare");
}

Test(producer, a_producer_that_dies_after_prepare_is_resolved_by_its_checkback, .timeout = 180)
{
	h_env e;
	h_setup(&e, "clcrash");
	char fwd[128], url[128], wrong_secret[160];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	h_httpd *srv = h_httpd_start(endpoint, "s3cret");
	snprintf(url, sizeof url, "http://127.0.0.1:%d/txhub/check", h_httpd_port(srv));
	const char *settings[] = {"checkback.secret=s3cret", "checkback.backoff_ms=200", NULL};
	pid_t hub = h_hub_start(&e, settings);
	prepare_and_die(&e, "crash-1", url, fwd);
	prepare_and_die(&e, "crash-2", url, fwd);
	cr_assert(h_wait(&e, row("status || '/' || coalesce(send_status, '-') || '/' || check_attempts",
	                         "crash-1"), "committed/sent/1", WAIT_MS));
	cr_assert(h_wait(&e, row("status || '/' || check_attempts", "crash-2"), "rolled_back/1", WAIT_MS));
	cr_assert_eq(h_hub_stop(hub), 0);
	/* a hub with the wrong secret is refused (401), and never decides */
	snprintf(wrong_secret, sizeof wrong_secret, "checkback.secret=not-the-secret");
	const char *wrong[] = {wrong_secret, "checkback.backoff_ms=200", "checkback.max_attempts=2", NULL};
	hub = h_hub_start(&e, wrong);
	prepare_and_die(&e, "crash-3", url, fwd);
	cr_assert(h_wait(&e, row("status || '/' || check_attempts", "crash-3"), "check_failed/2", WAIT_MS));
	char buf[512];
	cr_assert(strstr(h_query(&e, row("last_error", "crash-3"), buf, sizeof buf), "HTTP 401"), "%s", buf);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_httpd_stop(srv);
	h_teardown(&e);
}
