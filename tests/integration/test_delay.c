/* test_delay.c: delayed delivery (docs/consumers.md: Delayed delivery, issue 23 §1).
 *
 * A delayed message is forwarded no earlier than its due time, whether the
 * due time is forward.delay_ms counted from the commit or forward.not_before,
 * with a hub killed (-9) and another started in between, in both forwarding
 * modes (exactly_once on Apache Kafka: a read_committed consumer sees each
 * once). A rolled-back delayed message is never forwarded. Each malformed or
 * too-far value is rejected with a reason. list --scheduled, show and
 * redrive --now. Timing is asserted only as "not before the due time" (the
 * record's own timestamp against not_before) and generous upper bounds. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

static long long wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ms since the epoch as RFC 3339 with a +02:00 zone (the zone is honoured) */
static void rfc3339_plus2(long long ms, char *out, size_t sz)
{
	time_t s = (time_t)(ms / 1000) + 2 * 3600;
	struct tm tm;
	gmtime_r(&s, &tm);
	char day[32];
	strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, sz, "%s.%03lld+02:00", day, ms % 1000);
}

/* prepare (with `extra` inside forward) then commit, for key mk */
static void send_tx(h_env *e, const char *fwd, const char *mk, const char *extra, int commit)
{
	char buf[1024];
	snprintf(buf, sizeof buf, "{\"type\":\"prepare\",\"biz_id\":\"d\",\"message_key\":\"%s\","
	         "\"payload\":\"%s\",\"forward\":{\"topic\":\"%s\",\"key\":\"%s\"%s}}",
	         mk, mk, fwd, mk, extra);
	h_send_str(e, -1, mk, buf);
	snprintf(buf, sizeof buf, "{\"type\":\"%s\",\"biz_id\":\"d\",\"message_key\":\"%s\"}",
	         commit ? "commit" : "rollback", mk);
	h_send_str(e, -1, mk, buf);
}

static long long due_ms(h_env *e, const char *mk)
{
	char sql[256], out[64];
	snprintf(sql, sizeof sql, "SELECT coalesce((extract(epoch FROM not_before) * 1000)::bigint, "
	         "-1) FROM txhub.messages WHERE biz_id = 'd' AND message_key = '%s'", mk);
	return atoll(h_query(e, sql, out, sizeof out));
}

/* e set up as name, its forward topic into fwd, and a hub started with settings */
static pid_t start(h_env *e, const char *name, char *fwd, size_t fsz, const char *const *settings)
{
	h_setup(e, name);
	snprintf(fwd, fsz, "%s.out", e->topic);
	return h_hub_start(e, settings);
}

static size_t read_fwd(h_env *e, const char *fwd, int eos, h_record **recs)
{
	return eos ? h_read_topic_committed(e, fwd, 3000, recs) : h_read_topic(e, fwd, 3000, recs);
}

/* Two delayed messages (delay_ms from the commit; a one-shot commit with
 * not_before) and one not delayed; the hub is killed while they wait and
 * another one forwards them, each once, none before its due time. */
static void due_across_a_kill(const char *name, int eos)
{
	h_env e;
	h_setup(&e, name);
	char fwd[128];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	const char *at_least[] = {"log.level=debug", NULL};
	const char *exactly[] = {"forward.mode=exactly_once", "log.level=debug", NULL};
	const char *const *settings = eos ? exactly : at_least;
	if (eos)
		h_control_topic(&e);
	pid_t hub = h_hub_start(&e, settings);

	const long long delay = 25000; /* past the group's session time-out (about 10 s) */
	long long t0 = wall_ms();
	send_tx(&e, fwd, "late-delay", ",\"delay_ms\":25000", 1);
	char nb[64], buf[1024];
	rfc3339_plus2(t0 + delay, nb, sizeof nb);
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"d\",\"message_key\":"
	         "\"late-at\",\"payload\":\"late-at\",\"forward\":{\"topic\":\"%s\",\"key\":"
	         "\"late-at\",\"not_before\":\"%s\"}}", fwd, nb);
	h_send_str(&e, -1, "late-at", buf);
	send_tx(&e, fwd, "now", "", 1);
	h_flush();

	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages WHERE message_key = 'now'",
	                 "sent", 60000), "the message without a delay was not forwarded");
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE message_key LIKE 'late-%' "
	                 "AND status = 'committed'", "2", 30000));
	/* the due times as stored: not_before as given; delay_ms from the commit */
	cr_assert_eq(due_ms(&e, "late-at"), t0 + delay);
	long long dd = due_ms(&e, "late-delay");
	cr_assert(dd >= t0 + delay - 1000 && dd <= wall_ms() + delay,
	          "late-delay due at %lld, sent at %lld", dd, t0);
	if (wall_ms() < t0 + delay - 1500) {
		cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key LIKE "
		                         "'late-%' AND send_status = 'pending'"), 2,
		             "a delayed message is not pending before its due time");
		char out[128];
		h_query(&e, "SELECT string_agg(biz_id || '/' || message_key, ',' ORDER BY message_key) "
		            "FROM txhub.messages WHERE send_status = 'pending' AND not_before > now()",
		        out, sizeof out);
		cr_expect_str_eq(out, "d/late-at,d/late-delay");
	}
	h_hub_kill(hub); /* kill -9 while they wait */
	hub = h_hub_start(&e, settings);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", "3",
	                 90000), "the delayed messages were not forwarded after the restart");
	long long sent_by = wall_ms();
	cr_assert_eq(h_hub_stop(hub), 0);

	h_record *recs;
	size_t n = read_fwd(&e, fwd, eos, &recs);
	int seen[3] = {0};
	const char *keys[3] = {"late-delay", "late-at", "now"};
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < 3; k++) {
			if (recs[i].key_null || strcmp(recs[i].key, keys[k]) != 0)
				continue;
			seen[k]++;
			long long due = due_ms(&e, keys[k]);
			if (k < 2)
				cr_expect_geq(recs[i].timestamp_ms, due,
				              "%s forwarded at %lld, %lld ms before its due time", keys[k],
				              recs[i].timestamp_ms, due - recs[i].timestamp_ms);
		}
	for (int k = 0; k < 3; k++)
		cr_expect_eq(seen[k], 1, "%s read %d times%s", keys[k], seen[k],
		             eos ? " by a read_committed consumer" : "");
	/* generous: the hub starts, rejoins and scans within it */
	cr_expect_leq(sent_by - (t0 + delay), 60000);
	h_records_free(recs, n);
	h_teardown(&e);
}

Test(delay, forwarded_no_earlier_across_a_kill_at_least_once, .timeout = 240)
{
	due_across_a_kill("delay_alo", 0);
}

Test(delay, forwarded_no_earlier_across_a_kill_exactly_once, .timeout = 240)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	due_across_a_kill("delay_eos", 1);
}

Test(delay, a_rolled_back_delayed_message_is_never_forwarded, .timeout = 120)
{
	h_env e;
	char fwd[128];
	const char *settings[] = {NULL};
	pid_t hub = start(&e, "delay_rollback", fwd, sizeof fwd, settings);
	send_tx(&e, fwd, "rolled", ",\"delay_ms\":1000", 0);
	send_tx(&e, fwd, "rolled-0", ",\"delay_ms\":0", 0);
	send_tx(&e, fwd, "kept", ",\"delay_ms\":1000", 1);
	h_flush();
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages WHERE message_key = 'kept'",
	                 "sent", 60000));
	h_pause_ms(2000); /* past the rolled-back ones' due time */
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key LIKE "
	                         "'rolled%' AND status = 'rolled_back' AND send_status IS NULL"), 2);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_record *recs;
	size_t n = h_read_topic(&e, fwd, 2000, &recs);
	cr_assert_eq(n, 1, "%zu records on the forward topic", n);
	cr_assert_str_eq(recs[0].key, "kept");
	h_records_free(recs, n);
	h_teardown(&e);
}

Test(delay, malformed_or_too_far_is_rejected_with_a_reason, .timeout = 120)
{
	h_env e;
	h_setup(&e, "delay_bad");
	char fwd[128];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	const char *settings[] = {"forward.max_delay=1h", NULL};
	char far[64], soon[64], past[64];
	long long now = wall_ms();
	rfc3339_plus2(now + 2 * 3600 * 1000LL, far, sizeof far);
	rfc3339_plus2(now + 1800 * 1000LL, soon, sizeof soon);
	rfc3339_plus2(now - 3600 * 1000LL, past, sizeof past);
	struct {
		const char *mk, *extra, *reason;
	} bad[] = {
		{"b-nozone", ",\"not_before\":\"2030-01-01T00:00:00\"", "no zone"},
		{"b-garbage", ",\"not_before\":\"next tuesday\"", "not an RFC 3339 time"},
		{"b-date", ",\"not_before\":\"2030-02-30T00:00:00Z\"", "no such date"},
		{"b-range", ",\"not_before\":\"1969-12-31T23:00:00Z\"", "out of range"},
		{"b-number", ",\"not_before\":1900000000", "forward.not_before"},
		{"b-both", ",\"delay_ms\":5,\"not_before\":\"2030-01-01T00:00:00Z\"", "mutually exclusive"},
		{"b-negative", ",\"delay_ms\":-5", "forward.delay_ms"},
		{"b-fraction", ",\"delay_ms\":2.5", "forward.delay_ms"},
		{"b-text", ",\"delay_ms\":\"5\"", "forward.delay_ms"},
		{"b-delay-far", ",\"delay_ms\":3600001", "beyond forward.max_delay (1h)"},
		{"b-at-far", NULL, "beyond forward.max_delay (1h)"},
	};
	size_t nbad = sizeof bad / sizeof bad[0];
	char extra_far[128];
	snprintf(extra_far, sizeof extra_far, ",\"not_before\":\"%s\"", far);
	bad[nbad - 1].extra = extra_far;
	pid_t hub = h_hub_start(&e, settings);
	for (size_t i = 0; i < nbad; i++)
		send_tx(&e, fwd, bad[i].mk, bad[i].extra, 1);
	/* within the bound, and a time in the past (due at once) */
	char ok1[128], ok2[128];
	snprintf(ok1, sizeof ok1, ",\"not_before\":\"%s\"", soon);
	snprintf(ok2, sizeof ok2, ",\"not_before\":\"%s\"", past);
	send_tx(&e, fwd, "ok-soon", ok1, 1);
	send_tx(&e, fwd, "ok-past", ok2, 1);
	send_tx(&e, fwd, "ok-max", ",\"delay_ms\":3600000", 1);
	h_flush();
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages WHERE message_key = 'ok-past'",
	                 "sent", 60000), "a not_before in the past is due at once");
	char want[16];
	snprintf(want, sizeof want, "%zu", nbad);
	/* each bad prepare is rejected; its commit then waits for it */
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.rejected", want, 30000));
	for (size_t i = 0; i < nbad; i++) {
		char sql[512], reason[512];
		snprintf(sql, sizeof sql, "SELECT coalesce(string_agg(reason, ' | '), '') FROM "
		         "txhub.rejected WHERE convert_from(record_value, 'UTF8') LIKE "
		         "'%%\"message_key\":\"%s\"%%'", bad[i].mk);
		h_query(&e, sql, reason, sizeof reason);
		cr_expect(strstr(reason, bad[i].reason) != NULL, "%s: reason \"%s\" lacks \"%s\"",
		          bad[i].mk, reason, bad[i].reason);
	}
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key LIKE 'b-%' "
	                         "AND status <> 'awaiting_prepare'"), 0);
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key IN "
	                         "('ok-soon', 'ok-max') AND send_status = 'pending' "
	                         "AND not_before > now() + interval '10 minutes'"), 2);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

/* forward.max_delay on PostgreSQL's clock, the one the due times are
 * computed on (issue 30 §9): a hub whose own clock is off by 10 minutes
 * (TXHUB_TEST_CLOCK_OFFSET_MS, hub/lib/clock.h), limit 10 minutes. A
 * not_before 15 minutes ahead is rejected (a hub 10 minutes fast took it
 * for 5 minutes ahead), one 9 minutes ahead is kept and due then (a hub
 * 10 minutes slow took it for 19 minutes ahead and rejected it). */
static void max_delay_on_the_databases_clock(const char *name, const char *offset,
                                             const char *says)
{
	h_env e;
	h_setup(&e, name);
	char fwd[128], far[64], near[64], xfar[128], xnear[128];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	cr_assert_eq(setenv("TXHUB_TEST_CLOCK_OFFSET_MS", offset, 1), 0);
	const char *settings[] = {"forward.max_delay=10m", NULL};
	pid_t hub = h_hub_start(&e, settings);
	cr_assert_eq(unsetenv("TXHUB_TEST_CLOCK_OFFSET_MS"), 0);
	long long now = wall_ms(); /* (PostgreSQL runs on this machine: its clock) */
	rfc3339_plus2(now + 15 * 60000LL, far, sizeof far);
	rfc3339_plus2(now + 9 * 60000LL, near, sizeof near);
	snprintf(xfar, sizeof xfar, ",\"not_before\":\"%s\"", far);
	snprintf(xnear, sizeof xnear, ",\"not_before\":\"%s\"", near);
	send_tx(&e, fwd, "far", xfar, 1);
	send_tx(&e, fwd, "near", xnear, 1);
	h_flush();
	cr_assert(h_wait(&e, "SELECT status || '/' || send_status FROM txhub.messages WHERE "
	                     "message_key = 'near'", "committed/pending", 30000),
	          "9 minutes ahead: %s", h_query(&e, "SELECT coalesce(string_agg(reason, ' | '), "
	                                             "'(none)') FROM txhub.rejected", xnear,
	                                         sizeof xnear));
	cr_assert_eq(due_ms(&e, "near") / 1000, (now + 9 * 60000LL) / 1000);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.rejected WHERE reason LIKE "
	                     "'field \"forward.not_before\" is 1_m% ahead, beyond forward.max_delay "
	                     "(10m)'", "1", 30000),
	          "15 minutes ahead: %s (status %s)",
	          h_query(&e, "SELECT coalesce(string_agg(reason, ' | '), '(none)') FROM "
	                      "txhub.rejected", xfar, sizeof xfar),
	          h_query(&e, "SELECT coalesce(min(status), '(no row)') FROM txhub.messages "
	                      "WHERE message_key = 'far'", far, sizeof far));
	/* its commit waits for a prepare that will not come */
	cr_assert_str_eq(h_query(&e, "SELECT status FROM txhub.messages WHERE message_key = 'far'",
	                         far, sizeof far), "awaiting_prepare");
	/* and the hub says, once, that its clock is off */
	char log[256];
	h_hub_log(log, sizeof log, &e);
	cr_assert_eq(h_log_lines(log, says), 1, "no line \"%s\" in %s", says, log);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

Test(delay, max_delay_on_the_databases_clock_with_a_hub_10_minutes_fast, .timeout = 120)
{
	max_delay_on_the_databases_clock("delay_fast", "600000",
	                                 "s ahead of PostgreSQL's; due times and forward.max_delay");
}

Test(delay, max_delay_on_the_databases_clock_with_a_hub_10_minutes_slow, .timeout = 120)
{
	max_delay_on_the_databases_clock("delay_slow", "-600000",
	                                 "s behind PostgreSQL's; due times and forward.max_delay");
}

Test(delay, list_scheduled_show_and_redrive_now, .timeout = 120)
{
	h_env e;
	char fwd[128], out[8192], err[1024];
	const char *settings[] = {NULL};
	pid_t hub = start(&e, "delay_ops", fwd, sizeof fwd, settings);
	send_tx(&e, fwd, "later", ",\"delay_ms\":3600000", 1);
	send_tx(&e, fwd, "later-2", ",\"delay_ms\":7200000", 1);
	send_tx(&e, fwd, "now", "", 1);
	h_flush();
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages WHERE message_key = 'now'",
	                 "sent", 60000));
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'committed'", "3",
	                 30000));

	const char *list[] = {"list", "--scheduled", "--json", NULL};
	cr_assert_eq(h_txhub_io(&e, list, out, sizeof out, err, sizeof err), 0, "%s", err);
	char *a = strstr(out, "\"later\""), *b = strstr(out, "\"later-2\"");
	cr_assert(a && b && a < b, "list --scheduled, next due first: %s", out);
	cr_assert_null(strstr(out, "\"now\""), "a sent message is not scheduled: %s", out);
	cr_assert(strstr(out, "\"not_before\":"), "%s", out);

	const char *show[] = {"show", "d", "later", NULL};
	cr_assert_eq(h_txhub_io(&e, show, out, sizeof out, err, sizeof err), 0, "%s", err);
	cr_assert(strstr(out, "not_before"), "show names the due time: %s", out);

	const char *now_bad[] = {"redrive", "d", "now", "--now", NULL};
	cr_assert_eq(h_txhub_io(&e, now_bad, out, sizeof out, err, sizeof err), 1);
	cr_assert(strstr(err, "only a scheduled message"), "%s", err);
	const char *all_now[] = {"redrive", "--all-failed", "--now", NULL};
	cr_assert_eq(h_txhub_io(&e, all_now, out, sizeof out, err, sizeof err), 2);

	const char *redrive[] = {"redrive", "d", "later", "--now", NULL};
	cr_assert_eq(h_txhub_io(&e, redrive, out, sizeof out, err, sizeof err), 0, "%s", err);
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages WHERE message_key = 'later'",
	                 "sent", 30000), "redrive --now did not send it at once");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'later' "
	                         "AND event = 'redrive' AND detail LIKE 'scheduled for %'"), 1);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key = "
	                         "'later-2' AND send_status = 'pending'"), 1,
	             "the other one still waits");
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

/* The due time counts from the commit being applied, whichever way it comes:
 * in a later batch than the prepare, before the prepare (awaiting_prepare),
 * or from an operator's resolve; a not_before stays as given. */
Test(delay, the_delay_counts_from_the_commit, .timeout = 120)
{
	h_env e;
	char fwd[128], buf[512], err[512];
	const char *settings[] = {"checkback.first_after_ms=600000", NULL};
	pid_t hub = start(&e, "delay_from_commit", fwd, sizeof fwd, settings);
	char nb[64];
	long long at = wall_ms() + 4000;
	rfc3339_plus2(at, nb, sizeof nb);
	char extra_nb[128];
	snprintf(extra_nb, sizeof extra_nb, ",\"not_before\":\"%s\"", nb);
	const char *pre[][2] = {{"later-batch", ",\"delay_ms\":3000"},
	                        {"resolved", ",\"delay_ms\":3000"},
	                        {"absolute", extra_nb}};
	for (size_t i = 0; i < 3; i++) {
		snprintf(buf, sizeof buf, "{\"type\":\"prepare\",\"biz_id\":\"d\",\"message_key\":\"%s\","
		         "\"payload\":\"p\",\"forward\":{\"topic\":\"%s\"%s}}", pre[i][0], fwd, pre[i][1]);
		h_send_str(&e, -1, pre[i][0], buf);
	}
	h_send_str(&e, -1, "commit-first",
	           "{\"type\":\"commit\",\"biz_id\":\"d\",\"message_key\":\"commit-first\"}");
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE status IN ('prepared', "
	                 "'awaiting_prepare')", "4", 30000));
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE not_before IS NOT NULL "
	                         "AND message_key <> 'absolute'"), 0,
	             "a delay_ms has no due time before its commit");
	h_pause_ms(1500);
	h_send_str(&e, -1, "later-batch",
	           "{\"type\":\"commit\",\"biz_id\":\"d\",\"message_key\":\"later-batch\"}");
	h_send_str(&e, -1, "absolute",
	           "{\"type\":\"commit\",\"biz_id\":\"d\",\"message_key\":\"absolute\"}");
	snprintf(buf, sizeof buf, "{\"type\":\"prepare\",\"biz_id\":\"d\",\"message_key\":"
	         "\"commit-first\",\"payload\":\"p\",\"forward\":{\"topic\":\"%s\",\"delay_ms\":3000}}",
	         fwd);
	h_send_str(&e, -1, "commit-first", buf);
	h_flush();
	const char *resolve[] = {"resolve", "d", "resolved", "--commit", NULL};
	cr_assert_eq(h_txhub(&e, resolve, err, sizeof err), 0, "%s", err);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'committed'", "4",
	                 30000));
	/* each due time is its commit's time (the row's updated_at, same
	 * transaction) plus the delay, to the millisecond */
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key IN "
	                         "('later-batch', 'resolved', 'commit-first') AND not_before - "
	                         "updated_at = interval '3 seconds'"), 3);
	char sql[256];
	snprintf(sql, sizeof sql, "SELECT count(*) FROM txhub.messages WHERE message_key = 'absolute' "
	         "AND (extract(epoch FROM not_before) * 1000)::bigint = %lld", at);
	cr_expect_eq(h_count(&e, sql), 1, "a not_before stays as given");
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", "4",
	                 60000));
	cr_assert_eq(h_hub_stop(hub), 0);
	h_record *recs;
	size_t n = h_read_topic(&e, fwd, 2000, &recs);
	cr_assert_eq(n, 4);
	for (size_t i = 0; i < n; i++) {
		const char *h = strstr(recs[i].headers, "txhub-message-key=");
		cr_assert(h);
		char mk[64];
		snprintf(mk, sizeof mk, "%.*s", (int)strcspn(h + 18, "\n"), h + 18);
		long long due = due_ms(&e, mk);
		cr_expect_geq(recs[i].timestamp_ms, due, "%s forwarded %lld ms before its due time", mk,
		              due - recs[i].timestamp_ms);
	}
	h_records_free(recs, n);
	h_teardown(&e);
}

/* forward.order = key: a scheduled message holds its key's later messages
 * from the batch that committed it on (they are committed in the same one
 * here), in both modes; another key flows. */
static void holds_its_key(const char *name, int eos)
{
	h_env e;
	h_setup(&e, name);
	char fwd[128], buf[512];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	const char *alo[] = {"forward.order=key", NULL};
	const char *eo[] = {"forward.order=key", "forward.mode=exactly_once", NULL};
	if (eos)
		h_control_topic(&e);
	pid_t hub = h_hub_start(&e, eos ? eo : alo);
	/* one control partition, one batch: the delayed one first */
	const char *msgs[][3] = {{"k-1", "K", ",\"delay_ms\":4000"}, {"k-2", "K", ""},
	                         {"o-1", "O", ""}, {"k-3", "K", ""}};
	for (size_t i = 0; i < 4; i++) {
		snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"d\",\"message_key\":\"%s\","
		         "\"payload\":\"%s\",\"forward\":{\"topic\":\"%s\",\"key\":\"%s\"%s}}",
		         msgs[i][0], msgs[i][0], fwd, msgs[i][1], msgs[i][2]);
		h_send_str(&e, 0, "same", buf);
	}
	h_flush();
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages WHERE message_key = 'o-1'",
	                 "sent", 60000), "another key flows");
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", "4",
	                 60000));
	cr_assert_eq(h_hub_stop(hub), 0);
	h_record *recs;
	size_t n = eos ? h_read_topic_committed(&e, fwd, 3000, &recs)
	               : h_read_topic(&e, fwd, 3000, &recs);
	char order[64] = "";
	for (size_t i = 0; i < n; i++)
		if (!recs[i].key_null && strcmp(recs[i].key, "K") == 0)
			snprintf(order + strlen(order), sizeof order - strlen(order), "%s%.*s",
			         *order ? "," : "", (int)recs[i].value_len, (const char *)recs[i].value);
	cr_expect_str_eq(order, "k-1,k-2,k-3", "key K in order behind its delayed first message: %s",
	                 order);
	cr_expect_eq(n, 4, "each once");
	h_records_free(recs, n);
	h_teardown(&e);
}

Test(delay, a_scheduled_message_holds_its_key_at_least_once, .timeout = 120)
{
	holds_its_key("delay_order_alo", 0);
}

Test(delay, a_scheduled_message_holds_its_key_exactly_once, .timeout = 180)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	holds_its_key("delay_order_eos", 1);
}

/* A burst of delayed messages falling due together, more than one due scan
 * claims (5,000): every one leaves, none before its due time, each once
 * (exactly_once: to a read_committed consumer). */
#define BURST 5200
static void a_burst_all_leave(const char *name, int eos)
{
	h_env e;
	h_setup(&e, name);
	char fwd[128], buf[512];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	const char *alo[] = {NULL};
	const char *eo[] = {"forward.mode=exactly_once", NULL};
	if (eos)
		h_control_topic(&e);
	pid_t hub = h_hub_start(&e, eos ? eo : alo);
	for (int i = 0; i < BURST; i++) {
		char mk[16];
		snprintf(mk, sizeof mk, "b%05d", i);
		snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"d\",\"message_key\":\"%s\","
		         "\"payload\":\"%s\",\"forward\":{\"topic\":\"%s\",\"key\":\"%s\","
		         "\"delay_ms\":3000}}", mk, mk, fwd, mk);
		h_send_str(&e, -1, mk, buf);
	}
	h_flush();
	char want[16];
	snprintf(want, sizeof want, "%d", BURST);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", want,
	                 180000), "not all of the burst was forwarded");
	cr_assert_eq(h_hub_stop(hub), 0);

	/* every due time, by message key */
	static char dues[BURST * 24 + 64];
	h_query(&e, "SELECT string_agg((extract(epoch FROM not_before) * 1000)::bigint::text, ',' "
	            "ORDER BY message_key) FROM txhub.messages WHERE message_key LIKE 'b%'",
	        dues, sizeof dues);
	static long long due[BURST];
	int nd = 0;
	for (char *s = dues, *tok; nd < BURST && (tok = strtok(s, ",")); s = NULL)
		due[nd++] = atoll(tok);
	cr_assert_eq(nd, BURST, "%d due times", nd);
	static int seen[BURST];
	memset(seen, 0, sizeof seen);
	h_record *recs;
	size_t n = read_fwd(&e, fwd, eos, &recs);
	int early = 0;
	for (size_t i = 0; i < n; i++) {
		int k = recs[i].key_null ? -1 : atoi(recs[i].key + 1);
		cr_assert(k >= 0 && k < BURST, "record %zu: key %s", i, recs[i].key);
		seen[k]++;
		if (recs[i].timestamp_ms < due[k] && early++ == 0)
			cr_expect_geq(recs[i].timestamp_ms, due[k], "b%05d forwarded %lld ms early", k,
			              due[k] - recs[i].timestamp_ms);
	}
	cr_expect_eq(early, 0, "%d forwarded before their due time", early);
	for (int k = 0; k < BURST; k++)
		cr_assert(eos ? seen[k] == 1 : seen[k] >= 1, "b%05d read %d times", k, seen[k]);
	h_records_free(recs, n);
	h_teardown(&e);
}

Test(delay, a_burst_larger_than_a_claim_all_leave_none_early_at_least_once, .timeout = 300)
{
	a_burst_all_leave("delay_burst_alo", 0);
}

Test(delay, a_burst_larger_than_a_claim_all_leave_none_early_exactly_once, .timeout = 300)
{
	if (!h_real_kafka())
		cr_skip_test("exactly_once needs Apache Kafka (TXHUB_TEST_KAFKA_DIR)");
	a_burst_all_leave("delay_burst_eos", 1);
}
