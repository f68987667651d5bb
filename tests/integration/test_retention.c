/* test_retention.c: retention inside `txhub run` (docs/database.md: Purge and retention). A hub
 * deletes, for the partitions it owns, the finished rows (committed and
 * sent, rolled_back) and their history older than retention.finished_hours,
 * and rejected and conflict rows older than retention.rejected_hours; it
 * never deletes a parked or unfinished row, however old; with
 * retention.finished_hours = 0 it deletes nothing. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

static void exec(h_env *e, const char *sql)
{
	PGresult *r = PQexec(e->db, sql);
	cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", sql, PQerrorMessage(e->db));
	PQclear(r);
}

/* One row in every state, of partition 0, last changed 10 days ago (and
 * fresh copies of the finished ones), plus old rejected and conflict rows
 * and history. */
static void fill(h_env *e)
{
	exec(e, "INSERT INTO txhub.messages (biz_id, message_key, status, send_status, decision, "
	        "src_partition, src_offset, created_at, updated_at) VALUES "
	        "('r','sent','committed','sent',NULL,0,1, now()-'10 days'::interval, now()-'10 days'::interval),"
	        "('r','rolled','rolled_back',NULL,NULL,0,2, now()-'10 days'::interval, now()-'10 days'::interval),"
	        "('r','sent-new','committed','sent',NULL,0,3, now(), now()),"
	        "('r','rolled-new','rolled_back',NULL,NULL,0,4, now(), now()),"
	        "('r','pending','committed','pending',NULL,0,5, now()-'10 days'::interval, now()-'10 days'::interval),"
	        "('r','failed','committed','failed',NULL,0,6, now()-'10 days'::interval, now()-'10 days'::interval),"
	        "('r','checkfailed','check_failed',NULL,NULL,0,7, now()-'10 days'::interval, now()-'10 days'::interval),"
	        "('r','prepared','prepared',NULL,NULL,0,8, now()-'10 days'::interval, now()-'10 days'::interval),"
	        "('r','awaiting','awaiting_prepare',NULL,'commit',0,9, now()-'10 days'::interval, now()-'10 days'::interval)");
	exec(e, "UPDATE txhub.messages SET next_check_at = now() + interval '1 day' "
	        "WHERE status = 'prepared'");
	exec(e, "INSERT INTO txhub.history (biz_id, message_key, at, event, detail) VALUES "
	        "('r','sent', now()-'10 days'::interval, 'forward_failed', 'attempt 1: x'),"
	        "('r','failed', now()-'10 days'::interval, 'alert', 'send_failed')");
	char sql[512];
	snprintf(sql, sizeof sql, "INSERT INTO txhub.rejected (src_topic, src_partition, src_offset, "
	                          "reason, created_at) VALUES ('%s', 0, 100, 'old', now() - '40 days'"
	                          "::interval), ('%s', 0, 101, 'new', now())", e->topic, e->topic);
	exec(e, sql);
	snprintf(sql, sizeof sql, "INSERT INTO txhub.conflicts (biz_id, message_key, arrived, "
	                          "met_status, src_topic, src_partition, src_offset, created_at) "
	                          "VALUES ('r','x','commit','rolled_back','%s',0,200, now() - "
	                          "'40 days'::interval)", e->topic);
	exec(e, sql);
}

Test(retention, a_running_hub_deletes_old_finished_rows_only, .timeout = 120)
{
	h_env e;
	h_setup(&e, "retention");
	h_control_topic(&e);
	fill(&e);
	pid_t hub = h_hub_start(&e, NULL); /* defaults: 168 h and 720 h */
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE message_key IN "
	                     "('sent', 'rolled')", "0", 60000), "old finished rows were kept");
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.rejected", "1", 30000));
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.conflicts", "0", 30000));
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages"), 7,
	             "a parked, unfinished or recent row was deleted");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key IN "
	                         "('sent-new','rolled-new','pending','failed','checkfailed',"
	                         "'prepared','awaiting')"), 7);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'sent'"), 0,
	             "the history of a deleted message stayed");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'failed'"), 1);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.rejected WHERE reason = 'new'"), 1);
	cr_assert_eq(h_hub_stop(hub), 0);
	char log[256];
	h_hub_log(log, sizeof log, &e);
	cr_assert_geq(h_log_lines(log, "janitor: retention deleted 2 finished message(s)"), 1);
	h_teardown(&e);
}

Test(retention, zero_hours_turns_it_off, .timeout = 120)
{
	h_env e;
	h_setup(&e, "retoff");
	h_control_topic(&e);
	fill(&e);
	const char *settings[] = {"retention.finished_hours=0", NULL};
	pid_t hub = h_hub_start(&e, settings);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.partitions WHERE heartbeat_at > now() - "
	                     "interval '3 seconds' AND epoch >= 1", "4", 60000));
	h_pause_ms(7000); /* past a heartbeat and the retention that would follow */
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages"), 9);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.rejected"), 2);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.conflicts"), 1);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}
