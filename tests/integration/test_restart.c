/* test_restart.c: stopping (SIGTERM) and crashing (SIGKILL) the hub
 * mid-stream loses nothing: every committed message is forwarded at least
 * once, no rolled-back one ever, every row ends in its right state. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define TX 3000

static void send_range(h_env *e, const char *fwd, int from, int to)
{
	char buf[512], mk[32];
	for (int i = from; i < to; i++) {
		snprintf(mk, sizeof mk, "m-%05d", i);
		snprintf(buf, sizeof buf, "{\"type\":\"prepare\",\"biz_id\":\"r\",\"message_key\":\"%s\","
		                          "\"payload\":{\"i\":%d},\"forward\":{\"topic\":\"%s\",\"key\":\"%s\"}}",
		         mk, i, fwd, mk);
		h_send_str(e, -1, mk, buf);
		snprintf(buf, sizeof buf, "{\"type\":\"%s\",\"biz_id\":\"r\",\"message_key\":\"%s\"}",
		         i % 5 == 4 ? "rollback" : "commit", mk);
		h_send_str(e, -1, mk, buf);
	}
	h_flush();
}


Test(restart, stop_and_kill_mid_stream_lose_nothing, .timeout = 300)
{
	h_env e;
	h_setup(&e, "restart");
	char fwd[128];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	const char *settings[] = {"intake.batch_max=200", NULL};

	pid_t hub = h_hub_start(&e, settings);
	send_range(&e, fwd, 0, TX / 3);
	cr_assert(h_wait(&e, "SELECT count(*) > 0 FROM txhub.messages WHERE send_status = 'sent'",
	                 "t", 30000));
	cr_assert_eq(h_hub_stop(hub), 0, "a clean stop exits 0");

	send_range(&e, fwd, TX / 3, 2 * TX / 3); /* while no hub runs */
	hub = h_hub_start(&e, settings);
	cr_assert(h_wait(&e, "SELECT count(*) > 1000 FROM txhub.messages", "t", 30000));
	send_range(&e, fwd, 2 * TX / 3, TX);
	h_pause_ms(300);
	h_hub_kill(hub); /* crash in the middle of it */

	hub = h_hub_start(&e, settings);
	/* the third hub takes every partition (the second may have forwarded
	 * everything before its kill: then the checks below pass at once, and
	 * a hub stopped before it has even set up its signals dies of SIGTERM) */
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.partitions WHERE epoch >= 3", "4", 60000),
	          "the hub after the kill did not take the partitions");
	char want[64];
	snprintf(want, sizeof want, "%d", TX * 4 / 5);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'committed' "
	                     "AND send_status = 'sent'", want, 90000));
	snprintf(want, sizeof want, "%d", TX / 5);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'rolled_back' "
	                     "AND send_status IS NULL", want, 30000));
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages"), TX);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.conflicts"), 0);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.rejected"), 0);
	cr_assert_eq(h_hub_stop(hub), 0);

	h_record *r;
	size_t n = h_read_topic(&e, fwd, 2000, &r);
	static int seen[TX];
	memset(seen, 0, sizeof seen);
	for (size_t i = 0; i < n; i++) {
		int idx = atoi(r[i].key + 2);
		cr_assert(idx >= 0 && idx < TX);
		cr_assert_neq(idx % 5, 4, "rolled-back %s was forwarded", r[i].key);
		char want_v[32];
		snprintf(want_v, sizeof want_v, "{\"i\":%d}", idx);
		cr_assert_str_eq((char *)r[i].value, want_v);
		seen[idx]++;
	}
	int dups = 0;
	for (int i = 0; i < TX; i++) {
		if (i % 5 != 4)
			cr_assert_geq(seen[i], 1, "committed m-%05d was never forwarded", i);
		if (seen[i] > 1)
			dups += seen[i] - 1;
	}
	cr_log_info("restart: %zu records forwarded for %d committed messages, %d duplicate(s)",
	            n, TX * 4 / 5, dups);
	fprintf(stderr, "restart: duplicate forwards after SIGTERM + SIGKILL: %d\n", dups);
	h_records_free(r, n);
	h_teardown(&e);
}
