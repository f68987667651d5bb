/* test_fatal.c: a fatal error of the idempotent forward producer (librdkafka
 * says the handle is dead: every later produce would fail) replaces the
 * producer; what the dead one held is sent again without counting a failed
 * attempt, and every committed message is still forwarded. The hub's
 * modules are driven directly, as the run loop drives them. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "envelope.h"
#include "forward.h"
#include "harness.h"
#include "owned.h"
#include "store.h"

#define N 200

static store_record oneshot(const char *topic, int i, const char *fwd, char *buf, size_t bufsz)
{
	store_record r;
	memset(&r, 0, sizeof r);
	r.src_topic = topic_intern(topic);
	r.tp = tp_of(topic, 0);
	snprintf(buf, bufsz, "{\"type\":\"commit\",\"biz_id\":\"f\",\"message_key\":\"m-%d\","
	                     "\"payload\":\"p-%d\",\"forward\":{\"topic\":\"%s\"}}", i, i, fwd);
	r.partition = 0;
	r.offset = i;
	r.value = buf;
	r.value_len = strlen(buf);
	r.valid = envelope_parse(buf, r.value_len, 1 << 20, &r.env, r.reason, sizeof r.reason) == 0;
	cr_assert(r.valid, "%s", r.reason);
	return r;
}

Test(fatal, a_dead_producer_is_replaced_and_nothing_is_lost, .timeout = 120)
{
	h_env e;
	h_setup(&e, "fatal");
	char err[512], fwd[128];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	txhub_config cfg;
	cr_assert_eq(config_init(&cfg), 0);
	cr_assert_eq(config_set(&cfg, "pg", e.conninfo, err, sizeof err), 0);
	cr_assert_eq(config_set(&cfg, "control_topic", e.topic, err, sizeof err), 0);
	cr_assert_eq(config_set(&cfg, "brokers", e.brokers, err, sizeof err), 0);
	store *st = store_connect(&cfg, err, sizeof err);
	cr_assert_not_null(st, "%s", err);
	tp_key p0 = tp_of(e.topic, 0);
	owned_part own;
	int64_t next;
	cr_assert_eq(store_take_partitions(st, "me", "g", &p0, 1, &own, &next, NULL, err, sizeof err),
	             STORE_OK, "%s", err);
	owned_set owned = {0};
	cr_assert_eq(owned_take(&owned, &own), 0);
	forward *fw = forward_new(&cfg, NULL, err, sizeof err);
	cr_assert_not_null(fw, "%s", err);

	/* N committed messages, forwarded in two halves with the producer
	 * dying in between */
	static char texts[N][512];
	store_record recs[N];
	for (int i = 0; i < N; i++)
		recs[i] = oneshot(e.topic, i, fwd, texts[i], sizeof texts[i]);
	for (int half = 0; half < 2; half++) {
		store_forward_list out = {0};
		store_stats stats;
		cr_assert_eq(store_apply(st, recs + half * N / 2, N / 2, &own, 1, &out, &stats,
		                         NULL, NULL, err, sizeof err), STORE_OK, "%s", err);
		store_stats_free(&stats);
		forward_send(fw, &out);
		store_forward_list_clear(&out);
		if (half == 0)
			forward_test_fatal(fw);
	}
	/* the run loop's work: serve and hand over reports, re-send what is due */
	for (int turn = 0; turn < 300; turn++) {
		forward_poll(fw, &owned);
		store_forward_list due = {0};
		cr_assert_eq(store_claim_forwards(st, &own, 1, 1000, &due, err, sizeof err), STORE_OK,
		             "%s", err);
		forward_send(fw, &due);
		store_forward_list_clear(&due);
		if (h_count(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'") == N)
			break;
		h_pause_ms(100);
	}
	forward_drain(fw, &owned, 10000);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'"), N,
	             "a committed message was not forwarded after the producer died");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE send_attempts > 0"), 0,
	             "the dead producer's messages were counted as failed attempts");
	forward_stats fs = forward_get_stats(fw);
	cr_assert_eq(fs.replaced, 1);
	cr_assert_gt(fs.requeued, 0, "the dead producer held nothing: the test proves nothing");
	h_record *got;
	size_t n = h_read_topic(&e, fwd, 3000, &got);
	int seen[N] = {0};
	for (size_t i = 0; i < n; i++)
		seen[atoi((const char *)got[i].value + 2)]++;
	for (int i = 0; i < N; i++)
		cr_assert_geq(seen[i], 1, "message %d never reached the forward topic", i);
	h_records_free(got, n);
	forward_destroy(fw);
	owned_free(&owned);
	store_close(st);
	for (int i = 0; i < N; i++)
		envelope_free(&recs[i].env);
	config_free(&cfg);
	h_teardown(&e);
}
