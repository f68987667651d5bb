/* test_admin.c: the admin commands (docs/admin.md: Admin commands) against a real PostgreSQL
 * and broker: a database holding rows in every state, each command's
 * --json checked against SQL, every bad argument refused without changing
 * anything, resolve and redrive while a hub runs (forwarded once, asked
 * again, the actor in the history), purge and the retention batch. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "httpd.h"
#include "ops.h"

#define OUT_MAX (1 << 20)
#define WAIT_MS 30000

static char *out_buf;
static char err_buf[8192];

static void init(void)
{
	out_buf = malloc(OUT_MAX);
	cr_assert_not_null(out_buf);
}

static void fini(void)
{
	free(out_buf);
}

TestSuite(admin, .init = init, .fini = fini);

/* ---- helpers ---- */

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sql(h_env *e, const char *q)
{
	PGresult *r = PQexec(e->db, q);
	cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK,
	          "%s: %s", q, PQerrorMessage(e->db));
	PQclear(r);
}

static char qbuf[2048];

static const char *qf(const char *fmt, const char *a)
{
	snprintf(qbuf, sizeof qbuf, fmt, a);
	return qbuf;
}

/* Run txhub; stdout must be exactly one JSON document (whitespace around
 * it aside). Returns it (the caller deletes it). */
static cJSON *run_json(h_env *e, const char *const *args)
{
	int rc = h_txhub_io(e, args, out_buf, OUT_MAX, err_buf, sizeof err_buf);
	cr_assert_eq(rc, 0, "%s: exit %d, stderr: %s", args[0], rc, err_buf);
	const char *end = NULL;
	cJSON *doc = cJSON_ParseWithOpts(out_buf, &end, 0);
	cr_assert_not_null(doc, "%s: stdout is not JSON: %.300s", args[0], out_buf);
	for (; *end; end++)
		cr_assert(*end == ' ' || *end == '\n', "%s: more than one document on stdout: %.200s",
		          args[0], end);
	return doc;
}

static long long jnum(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItem(o, name);
	cr_assert(cJSON_IsNumber(v), "\"%s\" is not a number", name);
	return (long long)cJSON_GetNumberValue(v);
}

static const char *jstr(const cJSON *o, const char *name)
{
	return cJSON_GetStringValue(cJSON_GetObjectItem(o, name));
}

/* Everything the admin commands could change, in one value. */
static void checksum(h_env *e, char *out, size_t outsz)
{
	h_query(e, "SELECT md5("
	           "coalesce((SELECT string_agg(t::text, '|' ORDER BY t::text) FROM txhub.messages t), '') || '#' ||"
	           "coalesce((SELECT string_agg(t::text, '|' ORDER BY t::text) FROM txhub.history t), '') || '#' ||"
	           "coalesce((SELECT string_agg(t::text, '|' ORDER BY t::text) FROM txhub.rejected t), '') || '#' ||"
	           "coalesce((SELECT string_agg(t::text, '|' ORDER BY t::text) FROM txhub.conflicts t), '') || '#' ||"
	           "coalesce((SELECT string_agg(t::text, '|' ORDER BY t::text) FROM txhub.partitions t), ''))",
	        out, outsz);
}

static void os_user(char *out, size_t outsz)
{
	const struct passwd *pw = getpwuid(geteuid());
	snprintf(out, outsz, "%s", pw ? pw->pw_name : getenv("USER"));
}

/* Rows in every state (docs/database.md: Inspecting with psql), old and new, over partitions 0..2,
 * with history rows, rejected and conflict rows, and partition rows: one
 * of another consumer group (issue 15 §6). */
static void fixture(h_env *e)
{
	sql(e, "INSERT INTO txhub.messages (biz_id, message_key, status, decision, send_status, "
	       "payload, forward_topic, forward_key, forward_headers, checkback_url, check_attempts, "
	       "send_attempts, last_error, next_check_at, next_send_at, src_partition, src_offset, "
	       "created_at, updated_at) VALUES "
	       "('shop','prep-new','prepared',NULL,NULL,'{\"n\":1}','fw','k1','{\"h\":\"v\"}',"
	       " 'http://x/cb',0,0,NULL,now()+interval '1 day',NULL,0,1,now()-interval '5 min',now()-interval '5 min'),"
	       "('shop','prep-old','prepared',NULL,NULL,'p','fw',NULL,NULL,NULL,3,0,'HTTP 500',"
	       " now()+interval '1 day',NULL,1,2,now()-interval '10 days',now()-interval '10 days'),"
	       "('shop','await-new','awaiting_prepare','commit',NULL,NULL,NULL,NULL,NULL,NULL,0,0,NULL,"
	       " NULL,NULL,0,3,now()-interval '1 min',now()-interval '1 min'),"
	       "('shop','await-old','awaiting_prepare','rollback',NULL,NULL,NULL,NULL,NULL,NULL,0,0,NULL,"
	       " NULL,NULL,1,4,now()-interval '2 hours',now()-interval '2 hours'),"
	       "('shop','cf-old','check_failed',NULL,NULL,'\\x00ff10','fw',NULL,NULL,'http://x/cb',15,0,"
	       " 'no answer',NULL,NULL,2,5,now()-interval '11 days',now()-interval '10 days'),"
	       "('shop','cf-new','check_failed',NULL,NULL,'c','fw',NULL,NULL,'http://x/cb',15,0,"
	       " 'HTTP 503',NULL,NULL,0,6,now()-interval '3 hours',now()-interval '1 hour'),"
	       "('shop','pend','committed',NULL,'pending','d','fw',NULL,NULL,NULL,0,2,'retrying',NULL,"
	       " now()+interval '1 day',1,7,now()-interval '2 hours',now()-interval '1 hour'),"
	       "('shop','pend-old','committed',NULL,'pending','d','fw',NULL,NULL,NULL,0,0,NULL,NULL,"
	       " now()+interval '1 day',2,8,now()-interval '10 days',now()-interval '10 days'),"
	       "('shop','fail-old','committed',NULL,'failed','f','fw',NULL,NULL,NULL,0,15,"
	       " 'delivery to fw failed',NULL,now()-interval '10 days',0,9,now()-interval '10 days',now()-interval '10 days'),"
	       "('shop','sent-new','committed',NULL,'sent','s','fw',NULL,NULL,NULL,0,0,NULL,NULL,NULL,"
	       " 1,10,now()-interval '2 hours',now()-interval '1 hour'),"
	       "('shop','sent-old-0','committed',NULL,'sent','s','fw',NULL,NULL,NULL,0,0,NULL,NULL,NULL,"
	       " 0,11,now()-interval '12 days',now()-interval '10 days'),"
	       "('shop','sent-old-1','committed',NULL,'sent','s','fw',NULL,NULL,NULL,0,0,NULL,NULL,NULL,"
	       " 1,12,now()-interval '12 days',now()-interval '10 days'),"
	       "('shop','rb-new','rolled_back',NULL,NULL,'r','fw',NULL,NULL,NULL,0,0,NULL,NULL,NULL,"
	       " 2,13,now()-interval '2 hours',now()-interval '30 min'),"
	       "('shop','rb-old','rolled_back',NULL,NULL,'r','fw',NULL,NULL,NULL,2,0,NULL,NULL,NULL,"
	       " 2,14,now()-interval '12 days',now()-interval '10 days'),"
	       "('bank','b-cf','check_failed',NULL,NULL,'x','fw',NULL,NULL,NULL,15,0,'timeout',NULL,"
	       " NULL,1,15,now()-interval '1 day',now()-interval '20 hours'),"
	       "('bank','b-fail','committed',NULL,'failed','x','fw',NULL,NULL,NULL,0,15,'denied',NULL,"
	       " NULL,2,16,now()-interval '1 day',now()-interval '20 hours'),"
	       "('bank','b-sent','committed',NULL,'sent','x','fw',NULL,NULL,NULL,0,0,NULL,NULL,NULL,"
	       " 0,17,now()-interval '1 day',now()-interval '20 hours')");
	sql(e, "INSERT INTO txhub.history (biz_id, message_key, at, event, detail, actor) VALUES "
	       "('shop','cf-old',now()-interval '10 days 2 hours','checkback','attempt 1: HTTP 500','txhub'),"
	       "('shop','cf-old',now()-interval '10 days 1 hour','checkback','attempt 2: timeout','txhub'),"
	       "('shop','cf-old',now()-interval '9 days 23 hours','alert','check_failed','txhub'),"
	       "('shop','sent-old-0',now()-interval '11 days','forward_failed','broker down','txhub'),"
	       "('shop','rb-old',now()-interval '11 days','checkback','attempt 1: unknown','txhub'),"
	       "('shop','rb-old',now()-interval '11 days','checkback','attempt 2: rolled_back','txhub'),"
	       "('shop','pend-old',now()-interval '10 days','forward_failed','timeout','txhub')");
	sql(e, "INSERT INTO txhub.rejected (src_topic, src_partition, src_offset, record_key, "
	       "record_value, reason, created_at) VALUES "
	       "('ctl',0,100,'k','junk','invalid JSON',now()-interval '10 days'),"
	       "('ctl',1,101,'k','junk','invalid JSON',now()-interval '10 days'),"
	       "('ctl',1,102,'k','junk','invalid JSON',now()-interval '2 hours'),"
	       "('ctl',2,103,NULL,NULL,'null value',now()-interval '10 min')");
	sql(e, "INSERT INTO txhub.conflicts (biz_id, message_key, arrived, met_status, detail, "
	       "src_topic, src_partition, src_offset, created_at) VALUES "
	       "('shop','rb-old','commit','rolled_back','x','ctl',2,200,now()-interval '10 days'),"
	       "('shop','sent-new','rollback','committed','x','ctl',1,201,now()-interval '20 min'),"
	       "('shop','sent-new','rollback','committed','x','ctl',1,202,now()-interval '3 hours')");
	char q[1024];
	snprintf(q, sizeof q,
	         "INSERT INTO txhub.partitions (topic, partition, epoch, owner, group_id, next_offset, "
	         "heartbeat_at) VALUES ('%s',0,3,'host-a/11','%s',40,now()),"
	         "('%s',1,3,'host-a/11','%s',41,now()),('%s',2,5,'host-b/22','stray-group',42,now())",
	         e->topic, e->name, e->topic, e->name, e->topic);
	sql(e, q);
}

/* ---- status ---- */

Test(admin, status_json_counts_match_sql, .timeout = 120)
{
	h_env e;
	h_setup(&e, "adst");
	fixture(&e);
	const char *args[] = {"status", "--json", NULL};
	cJSON *doc = run_json(&e, args);
	const cJSON *m = cJSON_GetObjectItem(doc, "messages");
	const char *statuses[] = {"prepared", "awaiting_prepare", "committed", "rolled_back",
	                          "check_failed"};
	cr_assert_eq(cJSON_GetArraySize(m), 5, "every status present");
	for (int i = 0; i < 5; i++)
		cr_expect_eq(jnum(m, statuses[i]),
		             h_count(&e, qf("SELECT count(*) FROM txhub.messages WHERE status = '%s'",
		                            statuses[i])), "%s", statuses[i]);
	const cJSON *s = cJSON_GetObjectItem(doc, "send");
	const char *sends[] = {"pending", "sent", "failed"};
	for (int i = 0; i < 3; i++)
		cr_expect_eq(jnum(s, sends[i]),
		             h_count(&e, qf("SELECT count(*) FROM txhub.messages WHERE send_status = '%s'",
		                            sends[i])), "%s", sends[i]);
	/* parked: check_failed + failed sends + awaiting_prepare older than
	 * alert.awaiting_prepare_ms (10 minutes by default) */
	cr_expect_eq(jnum(doc, "parked"),
	             h_count(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'check_failed' "
	                         "OR send_status = 'failed' OR (status = 'awaiting_prepare' "
	                         "AND created_at < now() - interval '10 minutes')"));
	cr_expect_eq(jnum(doc, "parked"), 6, "cf-old, cf-new, b-cf, fail-old, b-fail, await-old");
	long long oldest = h_count(&e, "SELECT extract(epoch FROM now() - min(created_at))::bigint "
	                               "FROM txhub.messages WHERE status = 'prepared'");
	cr_expect(llabs(jnum(doc, "oldest_prepared_s") - oldest) <= 2, "%lld vs %lld",
	          jnum(doc, "oldest_prepared_s"), oldest);
	long long pending = h_count(&e, "SELECT extract(epoch FROM now() - min(updated_at))::bigint "
	                                "FROM txhub.messages WHERE send_status = 'pending'");
	cr_expect(llabs(jnum(doc, "oldest_pending_send_s") - pending) <= 2);
	cr_expect_eq(jnum(doc, "rejected"), 4);
	cr_expect_eq(jnum(doc, "rejected_1h"), 1);
	cr_expect_eq(jnum(doc, "conflicts"), 3);
	cr_expect_eq(jnum(doc, "conflicts_1h"), 1);

	const cJSON *parts = cJSON_GetObjectItem(doc, "partitions"), *p;
	int seen = 0;
	cJSON_ArrayForEach(p, parts)
	{
		if (strcmp(jstr(p, "topic"), e.topic) != 0 || !jstr(p, "owner"))
			continue; /* the broker's partitions no replica took */
		long long part = jnum(p, "partition");
		cr_expect_str_eq(jstr(p, "owner"), part == 2 ? "host-b/22" : "host-a/11");
		cr_expect_str_eq(jstr(p, "group"), part == 2 ? "stray-group" : e.name);
		cr_expect_eq(jnum(p, "epoch"), part == 2 ? 5 : 3);
		cr_expect_eq(jnum(p, "next_offset"), 40 + part);
		cr_expect(jnum(p, "heartbeat_age_s") <= 5);
		cr_expect(cJSON_GetObjectItem(p, "lag") != NULL, "lag is there, a number or null");
		seen++;
	}
	cr_expect_eq(seen, 3);
	cJSON_Delete(doc);

	/* the same numbers for people */
	const char *text[] = {"status", NULL};
	cr_assert_eq(h_txhub_io(&e, text, out_buf, OUT_MAX, err_buf, sizeof err_buf), 0, "%s",
	             err_buf);
	cr_expect(strstr(out_buf, "check_failed 3"), "%s", out_buf);
	cr_expect(strstr(out_buf, "parked     6"), "%s", out_buf);
	cr_expect(strstr(out_buf, "stray-group"), "%s", out_buf);
	h_teardown(&e);
}

Test(admin, status_without_a_broker_answers_in_time_with_lag_null, .timeout = 60)
{
	h_env e;
	h_setup(&e, "adnolag");
	fixture(&e);
	char brokers[64];
	snprintf(brokers, sizeof brokers, "brokers=127.0.0.1:%d", h_free_port());
	const char *args[] = {"-X", brokers, "status", "--json", NULL};
	long long t0 = now_ms();
	cJSON *doc = run_json(&e, args);
	long long took = now_ms() - t0;
	cr_expect(took < 4000, "status took %lld ms with no broker (budget 2 s)", took);
	const cJSON *p;
	int n = 0;
	cJSON_ArrayForEach(p, cJSON_GetObjectItem(doc, "partitions"))
	{
		cr_expect(cJSON_IsNull(cJSON_GetObjectItem(p, "lag")));
		n++;
	}
	cr_expect_eq(n, 3, "the partitions PostgreSQL knows are there all the same");
	cr_expect(strstr(err_buf, "lag unknown"), "stderr: %s", err_buf);
	cr_expect(jstr(doc, "lag_note") != NULL);
	cJSON_Delete(doc);
	h_teardown(&e);
}

/* ---- list ---- */

/* The message keys of a list, comma-separated, in its order. */
static void keys_of(const cJSON *arr, char *out, size_t outsz)
{
	const cJSON *r;
	out[0] = '\0';
	cJSON_ArrayForEach(r, arr)
	{
		strncat(out, jstr(r, "message_key"), outsz - strlen(out) - 2);
		strcat(out, ",");
	}
}

/* The same from SQL: `where` over txhub.messages, newest updated_at first. */
static void keys_sql(h_env *e, const char *where, char *out, size_t outsz)
{
	char q[1024];
	snprintf(q, sizeof q,
	         "SELECT coalesce(string_agg(message_key || ',', '' ORDER BY updated_at DESC, biz_id, "
	         "message_key), '') FROM txhub.messages WHERE %s", where);
	h_query(e, q, out, outsz);
}

static void expect_list(h_env *e, const char *const *args, const char *where)
{
	char got[4096], want[4096];
	cJSON *doc = run_json(e, args);
	cr_assert(cJSON_IsArray(doc));
	keys_of(doc, got, sizeof got);
	keys_sql(e, where, want, sizeof want);
	cr_expect_str_eq(got, want, "%s %s: rows", args[1] ? args[1] : "", args[2] ? args[2] : "");
	cJSON_Delete(doc);
}

Test(admin, list_filters_and_order_match_sql, .timeout = 120)
{
	h_env e;
	h_setup(&e, "adlist");
	fixture(&e);

	const char *all[] = {"list", "--json", NULL};
	cJSON *doc = run_json(&e, all);
	cr_expect_eq(cJSON_GetArraySize(doc), 17);
	const cJSON *r;
	const char *prev = NULL;
	cJSON_ArrayForEach(r, doc)
	{
		/* the names of docs/database.md: Inspecting with psql, payload as its size only */
		const char *cols[] = {"biz_id", "message_key", "status", "send_status", "payload_bytes",
		                      "forward_topic", "forward_key", "checkback_url", "check_attempts",
		                      "send_attempts", "last_error", "created_at", "updated_at"};
		for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
			cr_expect(cJSON_GetObjectItem(r, cols[i]) != NULL, "%s missing", cols[i]);
		cr_expect_null(cJSON_GetObjectItem(r, "payload"));
		if (prev)
			cr_expect(strcmp(prev, jstr(r, "updated_at")) >= 0, "newest first");
		prev = jstr(r, "updated_at");
	}
	cJSON_Delete(doc);
	expect_list(&e, all, "true");

	const char *bytes[] = {"list", "--json", "--biz", "shop", "--status", "check_failed", NULL};
	doc = run_json(&e, bytes);
	cJSON_ArrayForEach(r, doc)
		cr_expect_eq(jnum(r, "payload_bytes"),
		             h_count(&e, qf("SELECT octet_length(payload) FROM txhub.messages "
		                            "WHERE biz_id = 'shop' AND message_key = '%s'",
		                            jstr(r, "message_key"))));
	cJSON_Delete(doc);

	const char *st2[] = {"list", "--json", "--status", "check_failed", "--status=prepared", NULL};
	expect_list(&e, st2, "status IN ('check_failed', 'prepared')");
	const char *send[] = {"list", "--json", "--send-status", "failed", NULL};
	expect_list(&e, send, "send_status = 'failed'");
	const char *biz[] = {"list", "--json", "--biz", "bank", NULL};
	expect_list(&e, biz, "biz_id = 'bank'");
	const char *since[] = {"list", "--json", "--since", "1h30m", NULL};
	expect_list(&e, since, "updated_at > now() - interval '90 minutes'");
	const char *both[] = {"list", "--json", "--status", "committed", "--send-status", "sent",
	                      "--since", "2d", NULL};
	expect_list(&e, both, "status = 'committed' AND send_status = 'sent' "
	                      "AND updated_at > now() - interval '2 days'");
	const char *lim[] = {"list", "--json", "--limit", "3", NULL};
	expect_list(&e, lim, "message_key IN (SELECT message_key FROM txhub.messages "
	                     "ORDER BY updated_at DESC, biz_id, message_key LIMIT 3)");

	/* without a filter the newest rows are taken per status and partition
	 * (ops.c): ties of updated_at across statuses and partitions, cut by the
	 * limit in the middle, come out as ORDER BY updated_at DESC, biz_id,
	 * message_key over the whole table says */
	sql(&e, "INSERT INTO txhub.messages (biz_id, message_key, status, send_status, "
	        "src_partition, src_offset, created_at, updated_at) "
	        "SELECT 'tie' || (i % 3), 'tie-' || i, (ARRAY['committed', 'rolled_back', 'prepared', "
	        "'awaiting_prepare', 'check_failed'])[1 + i % 5], CASE WHEN i % 5 = 0 THEN 'sent' END, "
	        "i % 4, 100 + i, now(), now() + interval '1 day' FROM generate_series(1, 40) i");
	const char *ties[] = {"list", "--json", "--limit", "13", NULL};
	expect_list(&e, ties, "message_key IN (SELECT message_key FROM txhub.messages "
	                      "ORDER BY updated_at DESC, biz_id, message_key LIMIT 13)");
	const char *ties_since[] = {"list", "--json", "--since", "1h", "--limit", "29", NULL};
	expect_list(&e, ties_since, "message_key IN (SELECT message_key FROM txhub.messages "
	                            "WHERE updated_at > now() - interval '1 hour' "
	                            "ORDER BY updated_at DESC, biz_id, message_key LIMIT 29)");
	sql(&e, "DELETE FROM txhub.messages WHERE biz_id LIKE 'tie%'");

	const char *text[] = {"list", "--status", "check_failed", NULL};
	cr_assert_eq(h_txhub_io(&e, text, out_buf, OUT_MAX, err_buf, sizeof err_buf), 0);
	cr_expect(strstr(out_buf, "MESSAGE_KEY") && strstr(out_buf, "cf-old") &&
	          strstr(out_buf, "3 message(s)"), "%s", out_buf);
	h_teardown(&e);
}

/* ---- show ---- */

Test(admin, show_gives_the_row_payload_and_history_oldest_first, .timeout = 120)
{
	h_env e;
	h_setup(&e, "adshow");
	fixture(&e);
	const char *args[] = {"show", "shop", "cf-old", "--json", NULL};
	cJSON *doc = run_json(&e, args);
	const cJSON *m = cJSON_GetObjectItem(doc, "message");
	cr_expect_str_eq(jstr(m, "status"), "check_failed");
	cr_expect_eq(jnum(m, "check_attempts"), 15);
	cr_expect_str_eq(jstr(m, "last_error"), "no answer");
	/* 00 ff 10 is not UTF-8 */
	cr_expect_str_eq(jstr(m, "payload_encoding"), "base64");
	cr_expect_str_eq(jstr(m, "payload"), "AP8Q");
	const cJSON *h = cJSON_GetObjectItem(doc, "history"), *ev;
	char events[512] = "";
	const char *prev = NULL;
	cJSON_ArrayForEach(ev, h)
	{
		strcat(events, jstr(ev, "event"));
		strcat(events, ",");
		cr_expect(cJSON_GetObjectItem(ev, "at") && cJSON_GetObjectItem(ev, "detail") &&
		          cJSON_GetObjectItem(ev, "actor"));
		if (prev)
			cr_expect(strcmp(prev, jstr(ev, "at")) <= 0, "oldest first: %s after %s",
			          jstr(ev, "at"), prev);
		prev = jstr(ev, "at");
	}
	/* created (derived), two check-backs, the state now (derived, at
	 * updated_at), then the alert written an hour after it */
	cr_expect_str_eq(events, "created,checkback,checkback,check_failed,alert,");
	cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(h, 0), "derived")));
	cr_expect_str_eq(jstr(cJSON_GetArrayItem(h, 1), "actor"), "txhub");
	cr_expect_str_eq(jstr(cJSON_GetArrayItem(h, 1), "detail"), "attempt 1: HTTP 500");
	cJSON_Delete(doc);

	const char *utf[] = {"show", "shop", "prep-new", "--json", NULL};
	doc = run_json(&e, utf);
	m = cJSON_GetObjectItem(doc, "message");
	cr_expect_str_eq(jstr(m, "payload_encoding"), "utf8");
	cr_expect_str_eq(jstr(m, "payload"), "{\"n\":1}");
	cr_expect_str_eq(jstr(cJSON_GetObjectItem(m, "forward_headers"), "h"), "v");
	cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "history")), 1,
	             "an untouched prepared row: only created");
	cJSON_Delete(doc);

	const char *text[] = {"show", "shop", "cf-old", NULL};
	cr_assert_eq(h_txhub_io(&e, text, out_buf, OUT_MAX, err_buf, sizeof err_buf), 0);
	cr_expect(strstr(out_buf, "check_failed") && strstr(out_buf, "attempt 2: timeout") &&
	          strstr(out_buf, "base64"), "%s", out_buf);
	h_teardown(&e);
}

/* ---- bad arguments ---- */

typedef struct {
	const char *args[10];
	int exit;
	const char *mention;
} bad_case;

Test(admin, bad_arguments_exit_2_or_1_naming_the_culprit_and_change_nothing, .timeout = 120)
{
	h_env e;
	h_setup(&e, "adbad");
	fixture(&e);
	char before[64], after[64];
	checksum(&e, before, sizeof before);
	const bad_case cases[] = {
		{{"list", "--status", "stuck"}, 2, "stuck"},
		{{"list", "--send-status", "lost", "--json"}, 2, "lost"},
		{{"list", "--since", "5x"}, 2, "--since"},
		{{"list", "--since", "0"}, 2, "--since"},
		{{"list", "--limit", "0"}, 2, "--limit"},
		{{"list", "--frobnicate"}, 2, "--frobnicate"},
		{{"status", "extra"}, 2, "extra"},
		{{"show", "shop"}, 2, "KEY"},
		{{"show", "shop", "missing", "--json"}, 1, "missing"},
		{{"resolve", "shop", "missing", "--commit"}, 1, "missing"},
		{{"resolve", "shop", "sent-new", "--commit", "--json"}, 1, "committed"},
		{{"resolve", "shop", "rb-new", "--rollback"}, 1, "rolled_back"},
		{{"resolve", "shop", "await-old", "--commit"}, 1, "awaiting_prepare"},
		{{"resolve", "shop", "prep-new", "--commit", "--rollback"}, 2, "--commit and --rollback"},
		{{"resolve", "shop", "prep-new"}, 2, "--commit or --rollback"},
		{{"resolve", "shop", "prep-new", "--commit", "--reason", "a\nb"}, 2, "--reason"},
		{{"resolve", "shop", "prep-new", "--commit", "--bogus"}, 2, "--bogus"},
		{{"redrive", "shop", "prep-new"}, 1, "prepared"},
		{{"redrive", "shop", "sent-new"}, 1, "sent"},
		{{"redrive", "shop", "missing"}, 1, "missing"},
		{{"redrive", "--biz", "shop"}, 2, "--biz"},
		{{"purge"}, 2, "--older-than"},
		{{"purge", "--older-than", "7"}, 2, "--older-than"},
		{{"purge", "--older-than", "-7d", "--json"}, 2, "--older-than"},
		{{"purge", "--older-than", "1h", "--dry"}, 2, "--dry"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int rc = h_txhub_io(&e, cases[i].args, out_buf, OUT_MAX, err_buf, sizeof err_buf);
		cr_expect_eq(rc, cases[i].exit, "case %zu (%s %s): exit %d, stderr: %s", i,
		             cases[i].args[0], cases[i].args[1] ? cases[i].args[1] : "", rc, err_buf);
		cr_expect(strstr(err_buf, cases[i].mention) != NULL, "case %zu: \"%s\" not in: %s", i,
		          cases[i].mention, err_buf);
		cr_expect_str_eq(out_buf, "", "case %zu: a refused command prints nothing on stdout", i);
	}
	checksum(&e, after, sizeof after);
	cr_expect_str_eq(before, after, "a refused or bad command changes nothing");
	h_teardown(&e);
}

Test(admin, database_unreachable_or_unmigrated_exits_1, .timeout = 60)
{
	h_env e;
	h_setup(&e, "adnodb");
	const char *gone[] = {"-X", "pg=host=/nonexistent dbname=x", "status", NULL};
	cr_expect_eq(h_txhub_io(&e, gone, out_buf, OUT_MAX, err_buf, sizeof err_buf), 1);
	cr_expect(strstr(err_buf, "cannot connect"), "%s", err_buf);
	sql(&e, "DROP SCHEMA txhub CASCADE");
	const char *args[] = {"list", NULL};
	cr_expect_eq(h_txhub_io(&e, args, out_buf, OUT_MAX, err_buf, sizeof err_buf), 1);
	cr_expect(strstr(err_buf, "txhub migrate"), "%s", err_buf);
	h_teardown(&e);
}

/* ---- resolve and redrive, no hub ---- */

Test(admin, resolve_and_redrive_write_the_state_the_hub_picks_up, .timeout = 120)
{
	h_env e;
	h_setup(&e, "adfix");
	fixture(&e);
	char user[128], buf[512];
	os_user(user, sizeof user);

	const char *c1[] = {"resolve", "shop", "prep-new", "--commit", "--reason", "seen in the shop DB",
	                    "--json", NULL};
	cJSON *doc = run_json(&e, c1);
	cr_expect_str_eq(jstr(doc, "previous"), "prepared");
	cr_expect_str_eq(jstr(doc, "status"), "committed");
	cr_expect_str_eq(jstr(doc, "send_status"), "pending");
	cr_expect(strstr(jstr(doc, "actor"), user), "%s", jstr(doc, "actor"));
	cJSON_Delete(doc);
	/* due now for the forward scan (pending, next_send_at <= now()), no
	 * check-back left */
	cr_expect_str_eq(h_query(&e, "SELECT status || '/' || send_status || '/' || send_attempts || '/' "
	                             "|| (next_send_at <= now()) || '/' || (next_check_at IS NULL) "
	                             "FROM txhub.messages WHERE message_key = 'prep-new'", buf, sizeof buf),
	                 "committed/pending/0/true/true");
	h_query(&e, "SELECT event || '|' || detail || '|' || actor FROM txhub.history "
	            "WHERE message_key = 'prep-new'", buf, sizeof buf);
	cr_expect(strstr(buf, "resolve|commit (was prepared): seen in the shop DB|") == buf, "%s", buf);
	cr_expect(strstr(buf, user), "%s", buf);

	const char *r1[] = {"resolve", "shop", "cf-new", "--rollback", NULL};
	cr_assert_eq(h_txhub_io(&e, r1, out_buf, OUT_MAX, err_buf, sizeof err_buf), 0, "%s", err_buf);
	cr_expect(strstr(out_buf, "check_failed -> rolled_back"), "%s", out_buf);
	cr_expect_str_eq(h_query(&e, "SELECT status || '/' || coalesce(send_status, '-') FROM "
	                             "txhub.messages WHERE message_key = 'cf-new'", buf, sizeof buf),
	                 "rolled_back/-");
	/* decided a moment ago: a second resolve is refused, not applied twice */
	const char *again[] = {"resolve", "shop", "cf-new", "--commit", NULL};
	cr_expect_eq(h_txhub_io(&e, again, out_buf, OUT_MAX, err_buf, sizeof err_buf), 1);
	cr_expect(strstr(err_buf, "rolled_back"), "%s", err_buf);
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'cf-new'"), 1);

	const char *d1[] = {"redrive", "shop", "cf-old", "--json", NULL};
	doc = run_json(&e, d1);
	cr_expect_str_eq(jstr(doc, "previous"), "check_failed");
	cr_expect_str_eq(jstr(doc, "status"), "prepared");
	cJSON_Delete(doc);
	cr_expect_str_eq(h_query(&e, "SELECT status || '/' || check_attempts || '/' || "
	                             "(next_check_at <= now()) FROM txhub.messages "
	                             "WHERE message_key = 'cf-old'", buf, sizeof buf),
	                 "prepared/0/true");
	const char *d2[] = {"redrive", "shop", "fail-old", NULL};
	cr_assert_eq(h_txhub_io(&e, d2, out_buf, OUT_MAX, err_buf, sizeof err_buf), 0, "%s", err_buf);
	/* last_error is kept until the next attempt replaces it or a delivery
	 * clears it */
	cr_expect_str_eq(h_query(&e, "SELECT send_status || '/' || send_attempts || '/' || "
	                             "(next_send_at <= now()) || '/' || last_error FROM txhub.messages "
	                             "WHERE message_key = 'fail-old'", buf, sizeof buf),
	                 "pending/0/true/delivery to fw failed");
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE event = 'redrive' AND "
	                         "message_key IN ('cf-old', 'fail-old')"), 2);

	/* --all-failed of one biz: counts, and only that biz */
	const char *all[] = {"redrive", "--all-failed", "--biz", "bank", "--json", NULL};
	doc = run_json(&e, all);
	cr_expect_eq(jnum(doc, "check_failed"), 1);
	cr_expect_eq(jnum(doc, "send_failed"), 1);
	cJSON_Delete(doc);
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE biz_id = 'bank' AND "
	                         "(status = 'check_failed' OR send_status = 'failed')"), 0);
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE biz_id = 'bank' AND "
	                         "event = 'redrive'"), 2);
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE biz_id = 'bank' AND "
	                         "((status = 'prepared' AND next_check_at <= now()) OR "
	                         "(send_status = 'pending' AND next_send_at <= now()))"), 2);
	/* nothing left: 0 and 0, exit 0 */
	const char *none[] = {"redrive", "--all-failed", NULL};
	cr_assert_eq(h_txhub_io(&e, none, out_buf, OUT_MAX, err_buf, sizeof err_buf), 0, "%s", err_buf);
	cr_expect(strstr(out_buf, "1 check_failed message(s)") == NULL);
	h_teardown(&e);
}

/* A resolve that meets a row another transaction (the hub) is deciding
 * waits for it, reads the decided state, and is refused. */
typedef struct {
	h_env *e;
	int rc;
	char out[4096], err[4096];
} async_run;

static void *run_async(void *arg)
{
	async_run *a = arg;
	const char *args[] = {"resolve", "shop", "prep-new", "--commit", NULL};
	a->rc = h_txhub_io(a->e, args, a->out, sizeof a->out, a->err, sizeof a->err);
	return NULL;
}

Test(admin, resolve_racing_a_decision_is_refused_not_applied_twice, .timeout = 120)
{
	h_env e;
	h_setup(&e, "adrace");
	fixture(&e);
	PGconn *hub = PQconnectdb(e.conninfo);
	cr_assert(PQstatus(hub) == CONNECTION_OK);
	/* the hub's commit for prep-new, in flight */
	PQclear(PQexec(hub, "BEGIN"));
	PGresult *r = PQexec(hub, "UPDATE txhub.messages SET status = 'committed', "
	                          "send_status = 'pending', next_send_at = now(), updated_at = now() "
	                          "WHERE message_key = 'prep-new'");
	cr_assert(PQresultStatus(r) == PGRES_COMMAND_OK, "%s", PQerrorMessage(hub));
	PQclear(r);
	async_run a = {.e = &e, .rc = -1};
	pthread_t t;
	pthread_create(&t, NULL, run_async, &a);
	/* the resolve now waits for the row lock */
	const char *waiting = "SELECT count(DISTINCT l.pid) FROM pg_locks l JOIN "
	                      "pg_stat_activity s ON s.pid = l.pid WHERE NOT l.granted "
	                      "AND s.datname = current_database()";
	h_wait(&e, waiting, "1", 20000);
	cr_expect_eq(h_count(&e, waiting), 1, "resolve waits");
	PQclear(PQexec(hub, "COMMIT"));
	pthread_join(t, NULL);
	PQfinish(hub);
	cr_expect_eq(a.rc, 1, "stderr: %s", a.err);
	cr_expect(strstr(a.err, "is committed"), "%s", a.err);
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'prep-new'"),
	             0, "no resolve recorded");
	cr_expect_eq(h_count(&e, "SELECT send_attempts FROM txhub.messages WHERE "
	                         "message_key = 'prep-new'"), 0);
	h_teardown(&e);
}

/* ---- purge ---- */

/* Rows a purge older than 1 day must delete, as "key," in key order. */
static const char *PURGEABLE =
	"((status = 'committed' AND send_status = 'sent') OR status = 'rolled_back') "
	"AND updated_at < now() - interval '1 day'";

Test(admin, purge_deletes_exactly_the_old_finished_rows_and_dry_run_nothing, .timeout = 120)
{
	h_env e;
	h_setup(&e, "adpurge");
	fixture(&e);
	char before[64], after[64], keep[4096], gone[4096], q[1024];
	long long want_c = h_count(&e, qf("SELECT count(*) FROM txhub.messages WHERE %s AND "
	                                  "status = 'committed'", PURGEABLE));
	long long want_r = h_count(&e, qf("SELECT count(*) FROM txhub.messages WHERE %s AND "
	                                  "status = 'rolled_back'", PURGEABLE));
	snprintf(q, sizeof q, "SELECT count(*) FROM txhub.history h JOIN txhub.messages m USING "
	                      "(biz_id, message_key) WHERE %s", PURGEABLE);
	long long want_h = h_count(&e, q);
	long long keep_h = h_count(&e, "SELECT count(*) FROM txhub.history") - want_h;
	cr_assert_eq(want_c, 2, "sent-old-0, sent-old-1");
	cr_assert_eq(want_r, 1, "rb-old");
	cr_assert_eq(want_h, 3);
	snprintf(q, sizeof q, "SELECT string_agg(message_key, ',' ORDER BY message_key) FROM "
	                      "txhub.messages WHERE NOT (%s)", PURGEABLE);
	h_query(&e, q, keep, sizeof keep);
	snprintf(q, sizeof q, "SELECT string_agg(message_key, ',' ORDER BY message_key) FROM "
	                      "txhub.messages WHERE %s", PURGEABLE);
	h_query(&e, q, gone, sizeof gone);
	checksum(&e, before, sizeof before);

	const char *dry[] = {"purge", "--older-than", "1d", "--dry-run", "--json", NULL};
	cJSON *doc = run_json(&e, dry);
	checksum(&e, after, sizeof after);
	cr_expect_str_eq(before, after, "--dry-run deletes nothing");
	cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(doc, "dry_run")));
	const cJSON *m = cJSON_GetObjectItem(doc, "messages");
	cr_expect_eq(jnum(m, "committed"), want_c);
	cr_expect_eq(jnum(m, "rolled_back"), want_r);
	cr_expect_eq(jnum(doc, "history"), want_h);
	cr_expect_eq(jnum(doc, "rejected"), 2);
	cr_expect_eq(jnum(doc, "conflicts"), 1);
	cJSON_Delete(doc);

	const char *real[] = {"purge", "--older-than", "1d", "--json", NULL};
	doc = run_json(&e, real);
	m = cJSON_GetObjectItem(doc, "messages");
	cr_expect_eq(jnum(m, "committed"), want_c, "the same counts as the dry run");
	cr_expect_eq(jnum(m, "rolled_back"), want_r);
	cr_expect_eq(jnum(doc, "history"), want_h);
	cr_expect_eq(jnum(doc, "rejected"), 2);
	cr_expect_eq(jnum(doc, "conflicts"), 1);
	cJSON_Delete(doc);

	/* exactly those: every other row is still there, parked and unfinished
	 * ones however old */
	char now_keep[4096];
	h_query(&e, "SELECT string_agg(message_key, ',' ORDER BY message_key) FROM txhub.messages",
	        now_keep, sizeof now_keep);
	cr_expect_str_eq(now_keep, keep, "deleted: %s", gone);
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key IN "
	                         "('prep-old', 'cf-old', 'pend-old', 'fail-old')"), 4);
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.history"), keep_h);
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key = 'cf-old'"), 3,
	             "a parked row keeps its history, however old");
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.rejected"), 2);
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.rejected WHERE created_at < "
	                         "now() - interval '1 day'"), 0);
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.conflicts"), 2);

	/* again: nothing left to delete */
	const char *text[] = {"purge", "--older-than", "1d", NULL};
	cr_assert_eq(h_txhub_io(&e, text, out_buf, OUT_MAX, err_buf, sizeof err_buf), 0);
	cr_expect(strstr(out_buf, "0 committed and sent, 0 rolled_back"), "%s", out_buf);
	h_teardown(&e);
}

/* --older-than 0s (docs/admin.md: Admin commands: no time at all) is every finished row up to
 * now, with --dry-run too; never a parked or unfinished one. 0.4.0 refused
 * it as "zero" (exit 2). */
Test(admin, purge_older_than_zero_is_every_finished_row, .timeout = 120)
{
	h_env e;
	h_setup(&e, "adpurge0");
	fixture(&e);
	static const char *FINISHED =
		"((status = 'committed' AND send_status = 'sent') OR status = 'rolled_back')";
	long long fin = h_count(&e, qf("SELECT count(*) FROM txhub.messages WHERE %s", FINISHED));
	long long unfinished = h_count(&e, qf("SELECT count(*) FROM txhub.messages WHERE NOT %s",
	                                      FINISHED));
	long long rejected = h_count(&e, "SELECT count(*) FROM txhub.rejected");
	cr_assert_gt(fin, 3, "the fixture has new finished rows too");
	cr_assert_gt(unfinished, 0);

	const char *dry[] = {"purge", "--older-than", "0s", "--dry-run", "--json", NULL};
	cJSON *doc = run_json(&e, dry);
	const cJSON *m = cJSON_GetObjectItem(doc, "messages");
	cr_expect_eq(jnum(m, "committed") + jnum(m, "rolled_back"), fin);
	cr_expect_eq(jnum(doc, "rejected"), rejected);
	cJSON_Delete(doc);
	cr_expect_eq(h_count(&e, qf("SELECT count(*) FROM txhub.messages WHERE %s", FINISHED)), fin,
	             "--dry-run deleted rows");

	const char *real[] = {"purge", "--older-than", "0s", "--json", NULL};
	doc = run_json(&e, real);
	m = cJSON_GetObjectItem(doc, "messages");
	cr_expect_eq(jnum(m, "committed") + jnum(m, "rolled_back"), fin);
	cJSON_Delete(doc);
	cr_expect_eq(h_count(&e, qf("SELECT count(*) FROM txhub.messages WHERE %s", FINISHED)), 0);
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.messages"), unfinished,
	             "a parked or unfinished row was deleted");
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.rejected"), 0);
	h_teardown(&e);
}

/* Old finished rows, 10 per partition 0..2, with a history row each, and an
 * old rejected row per partition. */
static void retention_rows(h_env *e)
{
	sql(e, "INSERT INTO txhub.messages (biz_id, message_key, status, send_status, payload, "
	       "forward_topic, src_topic, src_partition, src_offset, created_at, updated_at) "
	       "SELECT 'r', 'm-' || p || '-' || i, CASE WHEN i % 3 = 0 THEN 'rolled_back' ELSE "
	       "'committed' END, CASE WHEN i % 3 = 0 THEN NULL ELSE 'sent' END, 'x', 'fw', 'ctl', p, i, "
	       "now() - interval '3 days', now() - interval '2 days' "
	       "FROM generate_series(0, 2) p, generate_series(1, 10) i");
	sql(e, "INSERT INTO txhub.history (biz_id, message_key, event, detail) "
	       "SELECT biz_id, message_key, 'forward_failed', 'x' FROM txhub.messages");
	sql(e, "INSERT INTO txhub.rejected (src_topic, src_partition, src_offset, reason, created_at) "
	       "SELECT 'ctl', p, p, 'bad', now() - interval '2 days' FROM generate_series(0, 2) p");
	/* unfinished rows of partition 1, as old: never deleted */
	sql(e, "INSERT INTO txhub.messages (biz_id, message_key, status, send_status, src_topic, "
	       "src_partition, src_offset, updated_at) VALUES ('r', 'stuck-1', 'committed', 'failed', "
	       "'ctl', 1, 99, now() - interval '9 days'), ('r', 'wait-1', 'prepared', NULL, 'ctl', 1, "
	       "98, now() - interval '9 days')");
}

static long long in_partition(h_env *e, const char *table, int part)
{
	char q[256];
	snprintf(q, sizeof q, "SELECT count(*) FROM txhub.%s WHERE src_partition = %d", table, part);
	return h_count(e, q);
}

Test(admin, purge_batch_keeps_to_its_partitions_and_batch_size_and_never_waits, .timeout = 120)
{
	h_env e;
	h_setup(&e, "adbatch");
	retention_rows(&e);
	char err[512];
	int32_t parts[] = {1};
	const char *topics[] = {"ctl"};
	store_purge_opts o = {.finished_older_ms = 86400000, .rejected_older_ms = 86400000,
	                    .topics = topics, .partitions = parts, .npartitions = 1, .batch = 4};
	store_purge_counts c;

	o.dry_run = 1;
	cr_assert_eq(ops_purge_batch(e.db, &o, &c, err, sizeof err), OPS_OK, "%s", err);
	cr_expect_eq(c.committed + c.rolled_back, 10);
	cr_expect_eq(c.history, 10);
	cr_expect_eq(c.rejected, 1);
	cr_expect_eq(c.more, 0);
	cr_expect_eq(in_partition(&e, "messages", 1), 12, "the dry run deleted nothing");
	o.dry_run = 0;

	/* one row of partition 1 is locked by someone else (the hub): skipped,
	 * not waited for (e.db has no lock_timeout: a wait would hang) */
	PGconn *other = PQconnectdb(e.conninfo);
	cr_assert(PQstatus(other) == CONNECTION_OK);
	PQclear(PQexec(other, "BEGIN"));
	PQclear(PQexec(other, "SELECT 1 FROM txhub.messages WHERE message_key = 'm-1-1' FOR UPDATE"));

	long long deleted = 0;
	int calls = 0;
	do {
		long long t0 = now_ms();
		cr_assert_eq(ops_purge_batch(e.db, &o, &c, err, sizeof err), OPS_OK, "%s", err);
		cr_expect(now_ms() - t0 < 5000, "a batch waited %lld ms", now_ms() - t0);
		cr_expect_leq(c.committed + c.rolled_back, 4, "call %d deleted %lld messages", calls,
		              c.committed + c.rolled_back);
		cr_expect_leq(c.rejected, 4);
		cr_expect_eq(c.history, c.committed + c.rolled_back, "their history with them");
		deleted += c.committed + c.rolled_back;
		cr_assert_lt(++calls, 10);
	} while (c.more);
	cr_expect_eq(calls, 3, "4 + 4 + 1");
	cr_expect_eq(deleted, 9, "the locked row is skipped");
	PQclear(PQexec(other, "COMMIT"));
	PQfinish(other);

	cr_expect_eq(in_partition(&e, "messages", 0), 10, "other partitions untouched");
	cr_expect_eq(in_partition(&e, "messages", 2), 10);
	cr_expect_eq(in_partition(&e, "messages", 1), 3);
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key IN "
	                         "('m-1-1', 'stuck-1', 'wait-1')"), 3);
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE message_key LIKE 'm-1-%'"), 1);
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.history"), 21);
	cr_expect_eq(in_partition(&e, "rejected", 1), 0);
	cr_expect_eq(in_partition(&e, "rejected", 0), 1);
	cr_expect_eq(in_partition(&e, "rejected", 2), 1);

	/* the same partitions of another control topic: nothing of ctl's */
	int32_t all[] = {0, 1, 2};
	const char *elsewhere[] = {"elsewhere", "elsewhere", "elsewhere"};
	o.topics = elsewhere;
	o.partitions = all;
	o.npartitions = 3;
	o.batch = 5000;
	cr_assert_eq(ops_purge_batch(e.db, &o, &c, err, sizeof err), OPS_OK, "%s", err);
	cr_expect_eq(c.committed + c.rolled_back, 0, "messages of another topic stay");
	cr_expect_eq(c.rejected, 0, "rejected rows of another topic stay");
	/* a topic without its partition, or the other way round: refused */
	o.topics = NULL;
	cr_expect_eq(ops_purge_batch(e.db, &o, &c, err, sizeof err), OPS_BAD_ARG);
	/* every partition of every topic (NULL) */
	o.partitions = NULL;
	o.npartitions = 0;
	cr_assert_eq(ops_purge_batch(e.db, &o, &c, err, sizeof err), OPS_OK, "%s", err);
	cr_expect_eq(c.committed + c.rolled_back, 21, "partitions 0 and 2, and m-1-1 now");
	cr_expect_eq(c.rejected, 2);
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.messages"), 2);

	o.batch = STORE_PURGE_BATCH_MAX + 1;
	cr_expect_eq(ops_purge_batch(e.db, &o, &c, err, sizeof err), OPS_BAD_ARG);
	cr_expect(strstr(err, "batch"), "%s", err);
	o.batch = 0;
	cr_expect_eq(ops_purge_batch(e.db, &o, &c, err, sizeof err), OPS_BAD_ARG);
	h_teardown(&e);
}

/* ---- with a running hub ---- */

typedef struct {
	pthread_mutex_t mu;
	int answer_commit_b;   /* cf-b's check-backs answer committed once set */
	int b_first_attempts;  /* requests for cf-b carrying X-Txhub-Attempt: 1 */
	int requests;
} endpoint;

static void on_check(void *opaque, const h_http_request *r, h_http_answer *a)
{
	endpoint *ep = opaque;
	char mk[128] = "", att[16] = "";
	h_http_param(r, "message_key", mk, sizeof mk);
	h_http_header(r, "x-txhub-attempt", att, sizeof att);
	pthread_mutex_lock(&ep->mu);
	ep->requests++;
	int commit = strcmp(mk, "cf-b") == 0 && ep->answer_commit_b;
	if (strcmp(mk, "cf-b") == 0 && atoi(att) == 1)
		ep->b_first_attempts++;
	pthread_mutex_unlock(&ep->mu);
	if (commit) {
		a->status = 200;
		snprintf(a->body, sizeof a->body, "committed");
	} else {
		a->status = 503;
		snprintf(a->body, sizeof a->body, "not now");
	}
}

/* Records on the forward topic whose txhub-message-key is mk. */
static int forwarded(const h_record *r, size_t n, const char *mk)
{
	char want[160];
	snprintf(want, sizeof want, "txhub-message-key=%s\n", mk);
	int c = 0;
	for (size_t i = 0; i < n; i++)
		if (strstr(r[i].headers, want))
			c++;
	return c;
}

static const char *state(const char *mk)
{
	return qf("SELECT status || '/' || coalesce(send_status, '-') FROM txhub.messages "
	          "WHERE message_key = '%s'", mk);
}

Test(admin, with_a_hub_resolve_and_redrive_end_forwarded_once_and_status_shows_lag,
     .timeout = 240)
{
	h_env e;
	h_setup(&e, "adhub");
	endpoint ep = {.answer_commit_b = 0};
	pthread_mutex_init(&ep.mu, NULL);
	h_httpd *srv = h_httpd_start(on_check, &ep);
	cr_assert_not_null(srv);
	char fwd[128], url[128], buf[2048], user[128];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	snprintf(url, sizeof url, "http://127.0.0.1:%d/cb", h_httpd_port(srv));
	os_user(user, sizeof user);
	const char *settings[] = {"checkback.first_after_ms=100", "checkback.backoff_ms=100",
	                          "checkback.backoff_max_ms=200", "checkback.max_attempts=2", NULL};
	pid_t hub = h_hub_start(&e, settings);

	const char *keys[] = {"cf-a", "cf-b"};
	for (int i = 0; i < 2; i++) {
		snprintf(buf, sizeof buf,
		         "{\"type\":\"prepare\",\"biz_id\":\"shop\",\"message_key\":\"%s\","
		         "\"payload\":\"pay-%s\",\"forward\":{\"topic\":\"%s\"},"
		         "\"checkback\":{\"url\":\"%s\"}}", keys[i], keys[i], fwd, url);
		h_send_str(&e, -1, keys[i], buf);
	}
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"shop\",\"message_key\":\"fs\","
	                          "\"payload\":\"pay-fs\",\"forward\":{\"topic\":\"%s\"}}", fwd);
	h_send_str(&e, -1, "fs", buf);
	h_flush();
	cr_assert(h_wait(&e, state("cf-a"), "check_failed/-", WAIT_MS));
	cr_assert(h_wait(&e, state("cf-b"), "check_failed/-", WAIT_MS));
	cr_assert(h_wait(&e, state("fs"), "committed/sent", WAIT_MS));

	/* resolve --commit: forwarded by the owning replica like any commit */
	const char *res[] = {"resolve", "shop", "cf-a", "--commit", "--reason", "shop says paid", NULL};
	cr_assert_eq(h_txhub_io(&e, res, buf, sizeof buf, err_buf, sizeof err_buf), 0, "%s", err_buf);
	cr_assert(h_wait(&e, state("cf-a"), "committed/sent", WAIT_MS));

	/* redrive of check_failed: asked again from attempt 1, answered, sent */
	pthread_mutex_lock(&ep.mu);
	ep.answer_commit_b = 1;
	int b_before = ep.b_first_attempts;
	pthread_mutex_unlock(&ep.mu);
	cr_expect_eq(b_before, 1);
	const char *rd[] = {"redrive", "shop", "cf-b", NULL};
	cr_assert_eq(h_txhub_io(&e, rd, buf, sizeof buf, err_buf, sizeof err_buf), 0, "%s", err_buf);
	cr_assert(h_wait(&e, state("cf-b"), "committed/sent", WAIT_MS));
	pthread_mutex_lock(&ep.mu);
	cr_expect_eq(ep.b_first_attempts, 2, "asked again, as attempt 1");
	pthread_mutex_unlock(&ep.mu);

	/* a failed send (made so by hand), redriven: sent again */
	sql(&e, "UPDATE txhub.messages SET send_status = 'failed', send_attempts = 15, "
	        "last_error = 'delivery failed' WHERE message_key = 'fs'");
	const char *rf[] = {"redrive", "shop", "fs", NULL};
	cr_assert_eq(h_txhub_io(&e, rf, buf, sizeof buf, err_buf, sizeof err_buf), 0, "%s", err_buf);
	cr_assert(h_wait(&e, state("fs"), "committed/sent", WAIT_MS));
	cr_expect_str_eq(h_query(&e, "SELECT coalesce(last_error, 'cleared') FROM txhub.messages "
	                             "WHERE message_key = 'fs'", buf, sizeof buf), "cleared");

	h_record *r;
	size_t n = h_read_topic(&e, fwd, 2000, &r);
	cr_expect_eq(forwarded(r, n, "cf-a"), 1, "the resolved commit, once");
	cr_expect_eq(forwarded(r, n, "cf-b"), 1, "the redriven check-back's commit, once");
	cr_expect_eq(forwarded(r, n, "fs"), 2, "once, and once more after the redrive");
	h_records_free(r, n);

	/* the history shows each action with its actor */
	const char *sh[] = {"show", "shop", "cf-a", "--json", NULL};
	cJSON *doc = run_json(&e, sh);
	const cJSON *ev, *found = NULL;
	cJSON_ArrayForEach(ev, cJSON_GetObjectItem(doc, "history"))
		if (strcmp(jstr(ev, "event"), "resolve") == 0)
			found = ev;
	cr_assert_not_null(found, "no resolve in the history");
	cr_expect(strstr(jstr(found, "actor"), user), "%s", jstr(found, "actor"));
	cr_expect_str_eq(jstr(found, "detail"), "commit (was check_failed): shop says paid");
	const cJSON *last = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "history"), -1 +
	                    cJSON_GetArraySize(cJSON_GetObjectItem(doc, "history")));
	cr_expect_str_eq(jstr(last, "event"), "sent", "the row's state now, last");
	cJSON_Delete(doc);
	cr_expect_eq(h_count(&e, "SELECT count(*) FROM txhub.history WHERE event = 'redrive' AND "
	                         "message_key IN ('cf-b', 'fs')"), 2);

	/* status against the running hub and broker: owner, epoch, group, lag */
	const char *st[] = {"status", "--json", NULL};
	doc = run_json(&e, st);
	const cJSON *p;
	int owned = 0, with_records = 0;
	cJSON_ArrayForEach(p, cJSON_GetObjectItem(doc, "partitions"))
	{
		if (strcmp(jstr(p, "topic"), e.topic) != 0)
			continue;
		cr_expect(jstr(p, "owner") && strchr(jstr(p, "owner"), '/'), "owner host/pid");
		cr_expect_str_eq(jstr(p, "group"), e.name);
		cr_expect_geq(jnum(p, "epoch"), 1);
		cr_expect(cJSON_IsNumber(cJSON_GetObjectItem(p, "lag")), "lag against the broker: %s",
		          jstr(doc, "lag_note") ? jstr(doc, "lag_note") : "");
		cr_expect_eq(jnum(p, "lag"), 0, "everything applied");
		if (cJSON_IsNumber(cJSON_GetObjectItem(p, "next_offset"))) {
			cr_expect_eq(jnum(p, "high_watermark"), jnum(p, "next_offset"));
			with_records++;
		}
		owned++;
	}
	cr_expect_gt(owned, 0);
	cr_expect_gt(with_records, 0, "the partitions that had records: lag against next_offset");
	cJSON_Delete(doc);

	cr_expect_eq(h_hub_stop(hub), 0);
	h_httpd_stop(srv);
	h_teardown(&e);
}
