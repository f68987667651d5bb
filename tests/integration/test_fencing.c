/* test_fencing.c: partition ownership in txhub.partitions. A replica that
 * lost a partition without noticing (paused, cut off) cannot write state for
 * it: every write checks the epoch its assignment took, and a new owner
 * starts from the offset PostgreSQL holds.
 *
 * The first tests drive two store connections directly, as two replicas
 * would; the last one fences a running hub. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "harness.h"
#include "httpd.h"
#include "store.h"

typedef struct {
	txhub_config cfg;
	store *a, *b; /* two replicas */
} two;

/* The control topic of the records rec() makes (the test's). */
static const char *rec_topic;

/* Partition p of the test's control topic. */
static tp_key part(int32_t p) { return tp_of(rec_topic, p); }

static void two_open(two *t, h_env *e)
{
	char err[512];
	rec_topic = topic_intern(e->topic);
	cr_assert_eq(config_init(&t->cfg), 0);
	cr_assert_eq(config_set(&t->cfg, "pg", e->conninfo, err, sizeof err), 0, "%s", err);
	cr_assert_eq(config_set(&t->cfg, "control_topic", e->topic, err, sizeof err), 0, "%s", err);
	t->a = store_connect(&t->cfg, err, sizeof err);
	t->b = store_connect(&t->cfg, err, sizeof err);
	cr_assert(t->a && t->b, "%s", err);
}

static void two_close(two *t)
{
	store_close(t->a);
	store_close(t->b);
	config_free(&t->cfg);
}

/* A parsed record; free with rec_free. */
static store_record rec(int32_t partition, int64_t offset, const char *json)
{
	store_record r;
	memset(&r, 0, sizeof r);
	r.src_topic = rec_topic;
	r.partition = partition;
	r.tp = part(partition);
	r.offset = offset;
	r.value = json;
	r.value_len = strlen(json);
	r.valid = envelope_parse(json, strlen(json), 1 << 20, &r.env, r.reason, sizeof r.reason) == 0;
	cr_assert(r.valid, "%s", r.reason);
	return r;
}

static void rec_free(store_record *r) { envelope_free(&r->env); }

#define PREPARE(mk)                                                                  \
	"{\"type\":\"prepare\",\"biz_id\":\"f\",\"message_key\":\"" mk "\","              \
	"\"payload\":\"x\",\"forward\":{\"topic\":\"out\"},"                               \
	"\"checkback\":{\"url\":\"http://127.0.0.1:1/\",\"first_after_ms\":0}}"
#define COMMIT(mk) "{\"type\":\"commit\",\"biz_id\":\"f\",\"message_key\":\"" mk "\"}"

static store_rc apply1(store *st, store_record *r, const owned_part *own, size_t nown,
                       tp_key **lost, size_t *nlost)
{
	char err[512];
	store_forward_list out = {0};
	store_stats stats;
	store_rc rc = store_apply(st, r, 1, own, nown, &out, &stats, lost, nlost, err, sizeof err);
	cr_assert(rc == STORE_OK || rc == STORE_FENCED, "apply: %s", err);
	store_forward_list_clear(&out);
	store_stats_free(&stats);
	return rc;
}

Test(fencing, a_new_owner_fences_off_the_old_one, .timeout = 60)
{
	h_env e;
	h_setup(&e, "fence");
	two t;
	two_open(&t, &e);
	char err[512];
	tp_key parts[2] = {part(0), part(1)};
	owned_part a_own[2], b_own[1];
	int64_t next[2];

	/* A takes partitions 0 and 1: first epoch, no offset stored yet */
	cr_assert_eq(store_take_partitions(t.a, "replica-a", "g", parts, 2, a_own, next, NULL, err, sizeof err),
	             STORE_OK, "%s", err);
	cr_assert_eq(a_own[0].epoch, 1);
	cr_assert_eq(a_own[1].epoch, 1);
	cr_assert_eq(next[0], -1);

	/* A applies a prepare on each partition; offsets move with the state */
	store_record r0 = rec(0, 41, PREPARE("k0"));
	store_record r1 = rec(1, 7, PREPARE("k1"));
	cr_assert_eq(apply1(t.a, &r0, a_own, 2, NULL, NULL), STORE_OK);
	cr_assert_eq(apply1(t.a, &r1, a_own, 2, NULL, NULL), STORE_OK);
	cr_assert_eq(h_count(&e, "SELECT next_offset FROM txhub.partitions WHERE partition = 0"), 42);
	cr_assert_eq(h_count(&e, "SELECT next_offset FROM txhub.partitions WHERE partition = 1"), 8);

	/* B takes partition 0 (a rebalance A did not notice) and learns where
	 * A stopped */
	cr_assert_eq(store_take_partitions(t.b, "replica-b", "g", parts, 1, b_own, next, NULL, err, sizeof err),
	             STORE_OK, "%s", err);
	cr_assert_eq(b_own[0].epoch, 2);
	cr_assert_eq(next[0], 42);
	char owner[64];
	cr_assert_str_eq(h_query(&e, "SELECT owner FROM txhub.partitions WHERE partition = 0", owner,
	                         sizeof owner), "replica-b");

	/* A's next batch for partition 0 is refused as a whole and writes
	 * nothing, not even its offset; partition 1 is still A's */
	store_record c0 = rec(0, 42, COMMIT("k0"));
	tp_key *lost = NULL;
	size_t nlost = 0;
	store_record both[2] = {c0, rec(1, 8, COMMIT("k1"))};
	char e2[512];
	store_forward_list out = {0};
	store_stats stats;
	cr_assert_eq(store_apply(t.a, both, 2, a_own, 2, &out, &stats, &lost, &nlost, e2,
	                         sizeof e2), STORE_FENCED);
	store_stats_free(&stats);
	cr_assert_eq(nlost, 1);
	cr_assert_eq(lost[0], part(0));
	free(lost);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'committed'"), 0);
	cr_assert_eq(h_count(&e, "SELECT next_offset FROM txhub.partitions WHERE partition = 1"), 8);
	/* without partition 0 the batch goes through */
	cr_assert_eq(apply1(t.a, &both[1], a_own, 2, NULL, NULL), STORE_OK);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key = 'k1' "
	                         "AND status = 'committed'"), 1);
	/* B applies the commit for partition 0 */
	cr_assert_eq(apply1(t.b, &c0, b_own, 1, NULL, NULL), STORE_OK);
	cr_assert_eq(h_count(&e, "SELECT next_offset FROM txhub.partitions WHERE partition = 0"), 43);

	/* forwards: A may claim only partition 1's, and its delivery report
	 * for partition 0's message is dropped */
	PQclear(PQexec(e.db, "UPDATE txhub.messages SET next_send_at = now() - interval '1 s'"));
	store_forward_list fl = {0};
	cr_assert_eq(store_claim_forwards(t.a, a_own, 2, 100, &fl, err, sizeof err), STORE_OK, "%s",
	             err);
	cr_assert_eq(fl.n, 1);
	cr_assert_str_eq(fl.items[0].message_key, "k1");
	store_forward_list_clear(&fl);
	store_delivery d[2] = {{.biz_id = "f", .message_key = "k0", .tp = part(0), .ok = 1},
	                       {.biz_id = "f", .message_key = "k1", .tp = part(1), .ok = 1}};
	cr_assert_eq(store_record_deliveries(t.a, a_own, 2, d, 2, 15, NULL, 0, NULL, err, sizeof err),
	             STORE_OK, "%s", err);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key = 'k0' "
	                         "AND send_status = 'pending'"), 1);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key = 'k1' "
	                         "AND send_status = 'sent'"), 1);
	/* the new owner's release and claim do see it */
	cr_assert_eq(store_release_forwards(t.b, b_own, 1, 1, err, sizeof err), STORE_OK, "%s", err);
	cr_assert_eq(store_claim_forwards(t.b, b_own, 1, 100, &fl, err, sizeof err), STORE_OK, "%s",
	             err);
	cr_assert_eq(fl.n, 1);
	cr_assert_str_eq(fl.items[0].message_key, "k0");
	store_forward_list_clear(&fl);

	rec_free(&r0);
	rec_free(&r1);
	rec_free(&both[0]);
	rec_free(&both[1]);
	two_close(&t);
	h_teardown(&e);
}

Test(fencing, check_backs_of_a_lost_partition_are_neither_claimed_nor_written, .timeout = 60)
{
	h_env e;
	h_setup(&e, "fencecb");
	two t;
	two_open(&t, &e);
	char err[512];
	tp_key p0 = part(0);
	owned_part a_own[1], b_own[1];
	int64_t next;
	cr_assert_eq(store_take_partitions(t.a, "a", "g", &p0, 1, a_own, &next, NULL, err, sizeof err),
	             STORE_OK, "%s", err);
	store_record r = rec(0, 0, PREPARE("c0"));
	cr_assert_eq(apply1(t.a, &r, a_own, 1, NULL, NULL), STORE_OK);

	/* A claims the due check-back, then loses the partition to B */
	store_check_list l = {0};
	int64_t due;
	cr_assert_eq(store_claim_checks(t.a, a_own, 1, 10, 60000, &l, &due, err, sizeof err),
	             STORE_OK, "%s", err);
	cr_assert_eq(l.n, 1);
	store_check_list_clear(&l);
	cr_assert_eq(store_take_partitions(t.b, "b", "g", &p0, 1, b_own, &next, NULL, err, sizeof err),
	             STORE_OK, "%s", err);

	/* A's answer (committed) is not written: B asks again */
	store_check_result res = {"f", "c0", 0, 0, 1, CHECK_COMMITTED, NULL, 0};
	size_t written = 99;
	cr_assert_eq(store_record_checks(t.a, a_own, 1, &res, 1, NULL, &written, err, sizeof err),
	             STORE_OK, "%s", err);
	cr_assert_eq(written, 0);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'prepared' "
	                         "AND check_attempts = 0"), 1);
	PQclear(PQexec(e.db, "UPDATE txhub.messages SET next_check_at = now() - interval '1 s'"));
	cr_assert_eq(store_claim_checks(t.a, a_own, 1, 10, 60000, &l, &due, err, sizeof err),
	             STORE_OK, "%s", err);
	cr_assert_eq(l.n, 0);
	cr_assert_eq(store_claim_checks(t.b, b_own, 1, 10, 60000, &l, &due, err, sizeof err),
	             STORE_OK, "%s", err);
	cr_assert_eq(l.n, 1);
	store_check_list_clear(&l);
	/* B's answer is */
	cr_assert_eq(store_record_checks(t.b, b_own, 1, &res, 1, NULL, &written, err, sizeof err),
	             STORE_OK, "%s", err);
	cr_assert_eq(written, 1);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'committed'"), 1);

	rec_free(&r);
	two_close(&t);
	h_teardown(&e);
}


/* A replica frozen in the middle of a transaction (here: a transaction left
 * open on its connection) holds the partition row; the new owner's take
 * does not fail on the lock time-out (10 s) because PostgreSQL ends the
 * frozen session first (idle_in_transaction_session_timeout, 5 s). */
Test(fencing, a_transaction_left_open_does_not_block_the_new_owner, .timeout = 60)
{
	h_env e;
	h_setup(&e, "fenceidle");
	two t;
	two_open(&t, &e);
	char err[512];
	tp_key p0 = part(0);
	owned_part own[1];
	int64_t next;
	cr_assert_eq(store_take_partitions(t.a, "a", "g", &p0, 1, own, &next, NULL, err, sizeof err),
	             STORE_OK, "%s", err);
	PGresult *r = PQexec(store_conn(t.a), "BEGIN; SELECT epoch FROM txhub.partitions "
	                                      "FOR NO KEY UPDATE");
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(store_conn(t.a)));
	PQclear(r);
	/* A now sleeps with the lock; B takes over */
	cr_assert_eq(store_take_partitions(t.b, "b", "g", &p0, 1, own, &next, NULL, err, sizeof err),
	             STORE_OK, "%s", err);
	cr_assert_eq(own[0].epoch, 2);
	/* A's session is gone; it reconnects, and its epoch is stale */
	r = PQexec(store_conn(t.a), "COMMIT");
	cr_assert_neq(PQresultStatus(r), PGRES_COMMAND_OK, "the frozen transaction survived");
	PQclear(r);
	cr_assert_eq(store_ensure(t.a, err, sizeof err), STORE_OK, "%s", err);
	owned_part stale = {.tp = part(0), .epoch = 1};
	store_record rec0 = rec(0, 5, PREPARE("late"));
	tp_key *lost = NULL;
	size_t nlost = 0;
	cr_assert_eq(apply1(t.a, &rec0, &stale, 1, &lost, &nlost), STORE_FENCED);
	free(lost);
	rec_free(&rec0);
	two_close(&t);
	h_teardown(&e);
}

/* A one-shot commit of key mk on partition 0. */
static void send_oneshot(h_env *e, const char *mk, int payload, const char *fwd)
{
	char buf[512];
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"h\",\"message_key\":\"%s\","
	                          "\"payload\":%d,\"forward\":{\"topic\":\"%s\"}}", mk, payload, fwd);
	h_send_str(e, 0, mk, buf);
}

/* A running hub whose partition is taken behind its back (as another
 * replica would after a rebalance it missed) stops applying it and stays
 * up; when Kafka assigns the partition to it again it takes it back at a
 * new epoch and reads on from the offset PostgreSQL kept. */
Test(fencing, a_running_hub_stops_writing_a_partition_taken_from_it, .timeout = 180)
{
	h_env e;
	h_setup(&e, "fencehub");
	char fwd[128];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	const char *settings[] = {NULL};
	pid_t hub = h_hub_start(&e, settings);
	send_oneshot(&e, "a", 1, fwd);
	h_flush();
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE message_key = 'a'", "1",
	                 30000));
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.partitions WHERE partition = 0 "
	                     "AND next_offset = 1", "1", 10000));

	/* another replica takes partition 0 */
	PQclear(PQexec(e.db, "UPDATE txhub.partitions SET epoch = epoch + 1, owner = 'intruder' "
	                     "WHERE partition = 0"));
	send_oneshot(&e, "b", 2, fwd);
	h_flush();
	h_pause_ms(3000);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key = 'b'"), 0,
	             "a fenced replica wrote state");
	cr_assert_eq(h_count(&e, "SELECT next_offset FROM txhub.partitions WHERE partition = 0"), 1);

	/* a second hub joins and leaves: two rebalances, after which partition
	 * 0 is the first hub's again, whichever hub it went to in between */
	pid_t hub2 = h_hub_start(&e, settings);
	cr_assert(h_wait(&e, "SELECT status || '/' || send_status FROM txhub.messages "
	                     "WHERE message_key = 'b'", "committed/sent", 60000));
	cr_assert_eq(h_hub_stop(hub2), 0);
	send_oneshot(&e, "c", 3, fwd);
	h_flush();
	cr_assert(h_wait(&e, "SELECT status || '/' || send_status FROM txhub.messages "
	                     "WHERE message_key = 'c'", "committed/sent", 60000),
	          "partition 0 was not read again after it came back");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.partitions WHERE partition = 0 "
	                         "AND epoch >= 3 AND owner <> 'intruder' AND next_offset = 3"), 1);
	cr_assert_eq(h_hub_stop(hub), 0, "the once-fenced hub did not stop cleanly");

	/* the harness passes consumer-only kafka.* settings (session time-out
	 * and such) to both clients: the producer ignoring them is not a
	 * warning */
	char path[256], line[1024];
	snprintf(path, sizeof path, "/tmp/txhub-%s-1.log", e.name);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	char taken[256];
	snprintf(taken, sizeof taken, "partition 0 of %s was taken by another replica of this group "
	         "(intruder)", e.topic);
	int fenced = 0;
	while (fgets(line, sizeof line, f)) {
		cr_assert_null(strstr(line, "warn  kafka: CONFWARN"), "%s", line);
		fenced += strstr(line, taken) != NULL;
	}
	fclose(f);
	cr_assert_eq(fenced, 1);
	h_teardown(&e);
}

/* Wait up to timeout_ms for a line holding needle in the log at path. */
static int log_shows(const char *path, const char *needle, int timeout_ms)
{
	for (int waited = 0; waited <= timeout_ms; waited += 200) {
		if (h_log_lines(path, needle) > 0)
			return 1;
		h_pause_ms(200);
	}
	return 0;
}

/* A hub started by mistake with another consumer group on the same control
 * topic and database takes every partition. Both hubs say so, naming both
 * groups; the real hub, fenced, takes its partitions back as soon as the
 * stray one stops cleanly, or once the stray one's heartbeat is stale when
 * it is killed, and goes on forwarding. */
Test(fencing, a_hub_of_another_group_is_named_and_outlived, .timeout = 300)
{
	h_env e;
	h_setup(&e, "groups");
	char fwd[128], real_log[256], stray_log[256], q[512], stray_group[128], stray_set[160];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	snprintf(stray_group, sizeof stray_group, "stray_%s", e.name);
	snprintf(stray_set, sizeof stray_set, "group=%s", stray_group);
	const char *stray_settings[] = {stray_set, NULL};
	pid_t real = h_hub_start(&e, NULL);
	h_hub_log(real_log, sizeof real_log, &e);
	send_oneshot(&e, "r1", 1, fwd);
	h_flush();
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages WHERE message_key = 'r1'",
	                 "sent", 60000));

	pid_t stray = h_hub_start(&e, stray_settings);
	h_hub_log(stray_log, sizeof stray_log, &e);
	snprintf(q, sizeof q, "SELECT count(*) FROM txhub.partitions WHERE group_id = '%s'",
	         stray_group);
	cr_assert(h_wait(&e, q, "4", 60000), "the stray hub did not take the partitions");
	send_oneshot(&e, "s1", 2, fwd);
	h_flush();
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages WHERE message_key = 's1'",
	                 "sent", 60000), "nothing was processed while the stray hub held");
	char needle[256];
	snprintf(needle, sizeof needle, "of consumer group \"%s\", not by this replica's group \"%s\"",
	         stray_group, e.name);
	cr_assert(log_shows(real_log, needle, 20000), "the real hub did not name both groups");
	snprintf(needle, sizeof needle, "a replica of consumer group \"%s\" waits for partition",
	         e.name);
	cr_assert(log_shows(stray_log, needle, 20000), "the stray hub did not name both groups");

	/* stopped cleanly: the real hub takes its partitions back at once */
	cr_assert_eq(h_hub_stop(stray), 0);
	snprintf(q, sizeof q, "SELECT count(*) FROM txhub.partitions WHERE group_id = '%s'", e.name);
	cr_assert(h_wait(&e, q, "4", 20000), "the real hub did not take its partitions back");
	send_oneshot(&e, "r2", 3, fwd);
	h_flush();
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages WHERE message_key = 'r2'",
	                 "sent", 30000));

	/* killed: taken back once its heartbeat is stale (30 s) */
	stray = h_hub_start(&e, stray_settings);
	snprintf(q, sizeof q, "SELECT count(*) FROM txhub.partitions WHERE group_id = '%s'",
	         stray_group);
	cr_assert(h_wait(&e, q, "4", 60000));
	h_hub_kill(stray);
	send_oneshot(&e, "r3", 4, fwd);
	h_flush();
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages WHERE message_key = 'r3'",
	                 "sent", 60000), "the real hub stayed fenced after the stray hub died");
	cr_assert_geq(h_log_lines(real_log, "the clash over partitions is over"), 1);
	cr_assert_eq(h_hub_stop(real), 0);
	h_teardown(&e);
}

/* ---- the alert webhook ---- */

#define ALERTS_MAX 32

typedef struct {
	pthread_mutex_t mu;
	char bodies[ALERTS_MAX][4096];
	int n;
} alerts;

static void on_alert(void *opaque, const h_http_request *req, h_http_answer *ans)
{
	alerts *a = opaque;
	pthread_mutex_lock(&a->mu);
	if (strcmp(req->path, "/alert") == 0 && a->n < ALERTS_MAX)
		snprintf(a->bodies[a->n++], sizeof a->bodies[0], "%s", req->body ? req->body : "");
	pthread_mutex_unlock(&a->mu);
	ans->status = 200;
}

/* The first alert of this kind the webhook got within timeout_ms, parsed
 * (the caller deletes it), or NULL. */
static cJSON *alert_of(alerts *a, const char *kind, int timeout_ms)
{
	for (int waited = 0; waited <= timeout_ms; waited += 200) {
		pthread_mutex_lock(&a->mu);
		cJSON *found = NULL;
		for (int i = 0; i < a->n && !found; i++) {
			cJSON *j = cJSON_Parse(a->bodies[i]);
			cr_assert_not_null(j, "an alert is not JSON: %s", a->bodies[i]);
			const cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "kind");
			if (cJSON_IsString(k) && strcmp(k->valuestring, kind) == 0)
				found = j;
			else
				cJSON_Delete(j);
		}
		pthread_mutex_unlock(&a->mu);
		if (found)
			return found;
		h_pause_ms(200);
	}
	return NULL;
}

/* How many alerts of this kind the webhook got. */
static int alerts_of(alerts *a, const char *kind)
{
	char needle[96];
	snprintf(needle, sizeof needle, "\"kind\":\"%s\"", kind);
	int n = 0;
	pthread_mutex_lock(&a->mu);
	for (int i = 0; i < a->n; i++)
		n += strstr(a->bodies[i], needle) != NULL;
	pthread_mutex_unlock(&a->mu);
	return n;
}

static const char *alert_text(const cJSON *a, const char *field)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, field);
	cr_assert(cJSON_IsString(v), "alert without %s", field);
	return v->valuestring;
}

/* `txhub status --json` for e, parsed (the caller deletes it). */
static cJSON *status_json(h_env *e)
{
	static char out[1 << 16];
	char errbuf[2048];
	const char *args[] = {"status", "--json", NULL};
	cr_assert_eq(h_txhub_io(e, args, out, sizeof out, errbuf, sizeof errbuf), 0, "%s", errbuf);
	cJSON *j = cJSON_Parse(out);
	cr_assert_not_null(j, "status --json: %s", out);
	return j;
}

/* A hub of another consumer group takes the partitions of a running hub
 * (the same control topic and database): the hub that loses them names the
 * group that took them, each partition and what to do, in its log line
 * for each partition, in the alert group_clash, and `txhub status` (text
 * and --json) shows the clash over each partition. */
Test(fencing, a_fenced_hub_names_the_group_that_took_its_partitions, .timeout = 300)
{
	h_env e;
	h_setup(&e, "named");
	alerts al = {.mu = PTHREAD_MUTEX_INITIALIZER};
	h_httpd *srv = h_httpd_start(on_alert, &al);
	char fwd[128], webhook[128], real_log[256], stray_group[128], stray_set[160], q[512];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	snprintf(webhook, sizeof webhook, "alert.webhook=http://127.0.0.1:%d/alert",
	         h_httpd_port(srv));
	snprintf(stray_group, sizeof stray_group, "stray_%s", e.name);
	snprintf(stray_set, sizeof stray_set, "group=%s", stray_group);
	const char *real_settings[] = {webhook, NULL};
	const char *stray_settings[] = {stray_set, NULL};
	pid_t real = h_hub_start(&e, real_settings);
	h_hub_log(real_log, sizeof real_log, &e);
	send_oneshot(&e, "r1", 1, fwd);
	h_flush();
	cr_assert(h_wait(&e, "SELECT send_status FROM txhub.messages WHERE message_key = 'r1'",
	                 "sent", 60000));

	pid_t stray = h_hub_start(&e, stray_settings);
	snprintf(q, sizeof q, "SELECT count(*) FROM txhub.partitions WHERE group_id = '%s'",
	         stray_group);
	cr_assert(h_wait(&e, q, "4", 60000), "the stray hub did not take the partitions");
	char host[128] = "", holder[200];
	gethostname(host, sizeof host - 1);
	snprintf(holder, sizeof holder, "%s/%d", host, (int)stray);

	/* the log: a line per partition lost, naming who took it, its group
	 * and what to do */
	char needle[1200];
	for (int p = 0; p < 4; p++) {
		snprintf(needle, sizeof needle, "partition %d of %s was taken by %s of consumer group "
		         "\"%s\", not of this replica's group \"%s\": two consumer groups read one "
		         "control topic into one database: give every hub of this control topic and "
		         "database the same `group`", p, e.topic, holder, stray_group, e.name);
		cr_assert(log_shows(real_log, needle, 20000), "no line: %s", needle);
	}

	/* the alert, once */
	cJSON *a = alert_of(&al, "group_clash", 30000);
	cr_assert_not_null(a, "no group_clash alert");
	snprintf(needle, sizeof needle, "partitions 0, 1, 2 and 3 of %s are held by %s of consumer "
	         "group \"%s\", not by this replica's group \"%s\": two consumer groups", e.topic,
	         holder, stray_group, e.name);
	cr_assert(strstr(alert_text(a, "last_error"), needle), "alert: %s",
	          alert_text(a, "last_error"));
	cr_assert(strstr(alert_text(a, "last_error"), "the same `group`"));
	cr_assert_str_eq(alert_text(a, "topic"), e.topic);
	cJSON_Delete(a);

	/* txhub status --json: each partition held by the stray group, the
	 * real one waiting */
	int clashes = 0;
	for (int waited = 0; clashes < 4 && waited < 30000; waited += 500) {
		cJSON *st = status_json(&e);
		const cJSON *c, *list = cJSON_GetObjectItemCaseSensitive(st, "clashes");
		cr_assert(cJSON_IsArray(list), "status --json has no clashes");
		clashes = 0;
		int seen[4] = {0};
		cJSON_ArrayForEach(c, list) {
			int p = cJSON_GetObjectItemCaseSensitive(c, "partition")->valueint;
			cr_assert(p >= 0 && p < 4 && !seen[p]);
			seen[p] = 1;
			cr_assert_str_eq(alert_text(c, "topic"), e.topic);
			cr_assert_str_eq(alert_text(c, "group"), stray_group);
			cr_assert_str_eq(alert_text(c, "owner"), holder);
			cr_assert_str_eq(alert_text(c, "waiting_group"), e.name);
			cr_assert(strstr(alert_text(c, "advice"), "the same `group`"));
			clashes++;
		}
		cJSON_Delete(st);
		if (clashes < 4)
			h_pause_ms(500);
	}
	cr_assert_eq(clashes, 4, "status --json names %d clashes", clashes);
	/* ... and as text */
	static char out[1 << 16];
	char errbuf[2048];
	const char *text[] = {"status", NULL};
	cr_assert_eq(h_txhub_io(&e, text, out, sizeof out, errbuf, sizeof errbuf), 0, "%s", errbuf);
	for (int p = 0; p < 4; p++) {
		snprintf(needle, sizeof needle, "partition %d of %s is held by %s of consumer group "
		         "\"%s\"; a replica of consumer group \"%s\" waits for it", p, e.topic, holder,
		         stray_group, e.name);
		cr_assert(strstr(out, needle), "status does not say: %s\n%s", needle, out);
	}
	cr_assert(strstr(out, "the same `group`"), "%s", out);

	cr_assert_eq(h_hub_stop(stray), 0);
	cr_assert(log_shows(real_log, "the clash over partitions is over", 20000));
	cr_assert_eq(alerts_of(&al, "group_clash"), 1, "one clash, one alert");
	cr_assert_eq(h_hub_stop(real), 0);
	h_httpd_stop(srv);
	h_teardown(&e);
}

/* ---- one consumer group, two databases ---- */

static size_t keep_body(char *p, size_t size, size_t n, void *opaque)
{
	char *b = opaque;
	size_t l = strlen(b), add = size * n;
	if (l + add >= 4096)
		add = 4095 - l;
	memcpy(b + l, p, add);
	b[l + add] = '\0';
	return size * n;
}

/* GET http://127.0.0.1:port/readyz: the status (0: no answer), the body
 * into body (4096 bytes). */
static long readyz(int port, char *body)
{
	char url[64];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/readyz", port);
	body[0] = '\0';
	CURL *c = curl_easy_init();
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
	long code = 0;
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	return code;
}

/* Whether every partition of e's control topic has an offset committed to
 * e's group whose metadata holds needle, within timeout_ms (read as any
 * Kafka client can: OffsetFetch, without joining the group). */
static int committed_with(h_env *e, const char *needle, int timeout_ms)
{
	char es[512];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	rd_kafka_conf_set(conf, "bootstrap.servers", e->brokers, es, sizeof es);
	rd_kafka_conf_set(conf, "group.id", e->name, es, sizeof es);
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, es, sizeof es);
	cr_assert_not_null(rk, "%s", es);
	int all = 0;
	for (int waited = 0; !all && waited <= timeout_ms; waited += 500) {
		rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(4);
		for (int p = 0; p < 4; p++)
			rd_kafka_topic_partition_list_add(l, e->topic, p);
		all = rd_kafka_committed(rk, l, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR;
		for (int p = 0; all && p < 4; p++) {
			char md[512] = "";
			snprintf(md, sizeof md, "%.*s", (int)l->elems[p].metadata_size,
			         l->elems[p].metadata ? (const char *)l->elems[p].metadata : "");
			all = l->elems[p].offset >= 0 && strstr(md, needle) != NULL;
		}
		rd_kafka_topic_partition_list_destroy(l);
		if (!all)
			h_pause_ms(500);
	}
	rd_kafka_destroy(rk);
	return all;
}

/* The prepare (fwd: its forward topic) or, fwd NULL, the bare commit of
 * transaction i (key k-i), on partition i % 4. */
static void send_tx(h_env *e, int i, const char *fwd)
{
	char buf[512], mk[32];
	snprintf(mk, sizeof mk, "k-%03d", i);
	if (fwd)
		snprintf(buf, sizeof buf, "{\"type\":\"prepare\",\"biz_id\":\"d\",\"message_key\":"
		         "\"%s\",\"payload\":%d,\"forward\":{\"topic\":\"%s\",\"key\":\"%s\"}}", mk, i,
		         fwd, mk);
	else
		snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"d\",\"message_key\":"
		         "\"%s\"}", mk);
	h_send_str(e, i % 4, mk, buf);
}

#define SPLIT_TX 40

/* Two hubs of one consumer group, the second started against another
 * database (a configuration slip; here another database of the same
 * cluster: the same system identifier, another name). Each hub commits
 * its offsets with its database's identity; the second finds the
 * partitions Kafka gives it were worked against the first database and
 * refuses them: it takes nothing in its database and reads nothing, raises
 * database_mismatch naming both databases, and answers /readyz 503. The
 * decisions on those partitions wait, unread, until the slip is fixed (the
 * second hub stops): then the first hub takes them and everything is
 * forwarded once. A hub started against the second database with
 * pg.adopt_from naming the first (a move on purpose) takes the partitions
 * over. */
Test(fencing, a_replica_against_another_database_refuses_its_partitions, .timeout = 300)
{
	h_env e, other;
	h_setup(&other, "otherdb");
	h_setup(&e, "onedb");
	char sysid[32];
	h_query(&e, "SELECT system_identifier FROM pg_control_system()", sysid, sizeof sysid);
	alerts al = {.mu = PTHREAD_MUTEX_INITIALIZER};
	h_httpd *srv = h_httpd_start(on_alert, &al);
	int port = h_free_port();
	char fwd[128], webhook[128], listen[64], pgset[600], b_log[256], q[256], body[4096];
	snprintf(fwd, sizeof fwd, "%s.out", e.topic);
	snprintf(webhook, sizeof webhook, "alert.webhook=http://127.0.0.1:%d/alert",
	         h_httpd_port(srv));
	snprintf(listen, sizeof listen, "http.listen=127.0.0.1:%d", port);
	snprintf(pgset, sizeof pgset, "pg=%s", other.conninfo);
	const char *a_settings[] = {"checkback.first_after_ms=600000", NULL};
	const char *b_settings[] = {"checkback.first_after_ms=600000", pgset, webhook, listen, NULL};

	/* the first hub works every partition against e's database */
	pid_t a = h_hub_start(&e, a_settings);
	for (int i = 0; i < SPLIT_TX; i++)
		send_tx(&e, i, fwd);
	h_flush();
	snprintf(q, sizeof q, "%d", SPLIT_TX);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'prepared'", q,
	                 60000));
	char id[200];
	snprintf(id, sizeof id, "\"db_system_identifier\":\"%s\",\"db_name\":\"%s\"", sysid, e.name);
	cr_assert(committed_with(&e, id, 20000), "the offsets committed do not name %s", id);

	/* the second, of the same group, against the other database */
	pid_t b = h_hub_start(&e, b_settings);
	h_hub_log(b_log, sizeof b_log, &e);
	cJSON *alert = alert_of(&al, "database_mismatch", 60000);
	cr_assert_not_null(alert, "no database_mismatch alert");
	char want[600];
	const char *text = alert_text(alert, "last_error");
	snprintf(want, sizeof want, "last worked against database \"%s\" of the cluster with system "
	         "identifier %s, while this hub works against database \"%s\" of the cluster with "
	         "system identifier %s", e.name, sysid, other.name, sysid);
	cr_assert(strstr(text, want), "alert: %s", text);
	snprintf(want, sizeof want, "set pg.adopt_from = %s/%s on this hub", sysid, e.name);
	cr_assert(strstr(text, want), "alert: %s", text);
	cr_assert(strstr(text, "partitions ") && strstr(text, " refused: "), "%s", text);
	cr_assert_str_eq(alert_text(alert, "topic"), e.topic);
	cJSON_Delete(alert);
	cr_assert(log_shows(b_log, "error intake: partitions ", 1000));
	long code = readyz(port, body);
	cr_assert_eq(code, 503, "/readyz %ld: %s", code, body);
	snprintf(want, sizeof want, "while this hub works against database \"%s\"", other.name);
	cr_assert(strstr(body, want), "/readyz: %s", body);

	/* the decisions: those of the refused partitions are applied nowhere */
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.partitions WHERE released_at IS NULL",
	                 "2", 30000), "the first hub does not hold two partitions");
	for (int i = 0; i < SPLIT_TX; i++)
		send_tx(&e, i, NULL);
	h_flush();
	snprintf(q, sizeof q, "%d", SPLIT_TX / 2);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", q,
	                 60000));
	h_pause_ms(3000);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'prepared'"),
	             SPLIT_TX / 2);
	cr_assert_eq(h_count(&other, "SELECT count(*) FROM txhub.messages"), 0,
	             "the second hub applied records in its database");
	cr_assert_eq(h_count(&other, "SELECT count(*) FROM txhub.partitions"), 0,
	             "the second hub took partitions in its database");
	cr_assert_eq(readyz(port, body), 503, "%s", body);

	/* the slip fixed: the first hub takes the partitions and finishes */
	cr_assert_eq(h_hub_stop(b), 0);
	snprintf(q, sizeof q, "%d", SPLIT_TX);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'committed' "
	                     "AND send_status = 'sent'", q, 60000),
	          "the decisions of the refused partitions were not applied after the fix");
	cr_assert_eq(alerts_of(&al, "database_mismatch"), 1);
	cr_assert_eq(h_hub_stop(a), 0);
	h_record *r;
	size_t n = h_read_topic(&e, fwd, 2000, &r);
	int seen[SPLIT_TX] = {0};
	for (size_t i = 0; i < n; i++) {
		int k = atoi(r[i].key + 2);
		cr_assert(k >= 0 && k < SPLIT_TX, "%s", r[i].key);
		seen[k]++;
	}
	for (int k = 0; k < SPLIT_TX; k++)
		cr_assert_eq(seen[k], 1, "k-%03d forwarded %d times", k, seen[k]);
	h_records_free(r, n);

	/* a move on purpose: a hub against the other database adopting e's */
	char adopt[200];
	snprintf(adopt, sizeof adopt, "pg.adopt_from=%s/%s", sysid, e.name);
	const char *c_settings[] = {pgset, adopt, NULL};
	pid_t c = h_hub_start(&e, c_settings);
	cr_assert(h_wait(&other, "SELECT count(*) FROM txhub.partitions", "4", 60000),
	          "the adopting hub did not take the partitions");
	snprintf(id, sizeof id, "\"db_system_identifier\":\"%s\",\"db_name\":\"%s\"", sysid,
	         other.name);
	cr_assert(committed_with(&e, id, 20000), "the adopting hub did not commit its identity");
	send_oneshot(&e, "moved", 1, fwd);
	h_flush();
	cr_assert(h_wait(&other, "SELECT send_status FROM txhub.messages WHERE message_key = "
	                         "'moved'", "sent", 60000));
	cr_assert_eq(h_hub_stop(c), 0);
	h_httpd_stop(srv);
	h_teardown(&other);
	h_teardown(&e);
}

/* Delivery reports are recorded on a connection of their own while a batch
 * holds its partitions (they only check the epoch), so the writer never
 * waits for the run loop's transactions; state writes (here a check-back
 * claim) still wait for the batch, and everything waits for a take. */
Test(fencing, delivery_reports_do_not_wait_for_a_batch_in_progress, .timeout = 60)
{
	h_env e;
	h_setup(&e, "overlap");
	two t;
	two_open(&t, &e);
	char err[512];
	tp_key p0 = part(0);
	owned_part own;
	int64_t next;
	cr_assert_eq(store_take_partitions(t.a, "a", "g", &p0, 1, &own, &next, NULL, err, sizeof err),
	             STORE_OK, "%s", err);
	store_record r = rec(0, 0, "{\"type\":\"commit\",\"biz_id\":\"f\",\"message_key\":\"k\","
	                           "\"payload\":\"x\",\"forward\":{\"topic\":\"out\"}}");
	cr_assert_eq(apply1(t.a, &r, &own, 1, NULL, NULL), STORE_OK);
	/* a batch in progress on A's connection holds partition 0 */
	PGconn *a = store_conn(t.a), *b = store_conn(t.b);
	PQclear(PQexec(a, "BEGIN"));
	char sql[256];
	snprintf(sql, sizeof sql, "SELECT 1 FROM txhub.partitions WHERE topic = '%s' AND "
	                          "partition = 0 FOR NO KEY UPDATE", e.topic);
	PGresult *res = PQexec(a, sql);
	cr_assert_eq(PQresultStatus(res), PGRES_TUPLES_OK);
	PQclear(res);
	PQclear(PQexec(b, "SET lock_timeout = '1s'"));
	store_delivery d = {.biz_id = "f", .message_key = "k", .tp = part(0), .ok = 1};
	cr_assert_eq(store_record_deliveries(t.b, &own, 1, &d, 1, 15, NULL, 0, NULL, err, sizeof err),
	             STORE_OK, "the report waited for the batch: %s", err);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'"), 1);
	/* a state write still waits for the batch (and gives up after 1 s) */
	store_forward_list l = {0};
	cr_assert_eq(store_claim_forwards(t.b, &own, 1, 10, &l, err, sizeof err), STORE_RETRY);
	cr_assert(strstr(err, "55P03"), "%s", err);
	store_forward_list_clear(&l);
	PQclear(PQexec(a, "ROLLBACK"));
	rec_free(&r);
	two_close(&t);
	h_teardown(&e);
}

/* Replica A takes partition 0 and applies a commit of message_key key;
 * then B takes the partition (into *b_own). */
static void a_applies_then_b_takes(two *t, const char *key, owned_part *b_own)
{
	char err[512], json[256];
	tp_key p0 = part(0);
	owned_part a_own;
	int64_t next;
	cr_assert_eq(store_take_partitions(t->a, "replica-a", "g", &p0, 1, &a_own, &next, NULL, err,
	                                   sizeof err), STORE_OK, "%s", err);
	snprintf(json, sizeof json,
	         "{\"type\":\"commit\",\"biz_id\":\"f\",\"message_key\":\"%s\","
	         "\"payload\":\"x\",\"forward\":{\"topic\":\"out\"}}", key);
	store_record old = rec(0, 1, json);
	cr_assert_eq(apply1(t->a, &old, &a_own, 1, NULL, NULL), STORE_OK);
	rec_free(&old);
	h_pause_ms(20);
	cr_assert_eq(store_take_partitions(t->b, "replica-b", "g", &p0, 1, b_own, &next, NULL, err,
	                                   sizeof err), STORE_OK, "%s", err);
}

/* A replica taking a partition sends again what the previous owner left in
 * flight (its leases are released), but not what it leased itself since:
 * those forwards are in its own producer already, and releasing them (the
 * release runs a moment after the take, when the first batch may have been
 * forwarded) sent them twice. */
Test(fencing, a_new_owner_releases_only_the_previous_owners_leases, .timeout = 60)
{
	h_env e;
	h_setup(&e, "fencelease");
	two t;
	two_open(&t, &e);
	char err[512];
	owned_part b_own;
	/* B takes the partition, then applies a commit of its own */
	a_applies_then_b_takes(&t, "old", &b_own);
	h_pause_ms(20);
	store_record mine = rec(0, 2, "{\"type\":\"commit\",\"biz_id\":\"f\",\"message_key\":\"mine\","
	                                 "\"payload\":\"x\",\"forward\":{\"topic\":\"out\"}}");
	cr_assert_eq(apply1(t.b, &mine, &b_own, 1, NULL, NULL), STORE_OK);
	/* both are leased (in flight); B's release frees only A's */
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE next_send_at > now()"), 2);
	cr_assert_eq(store_release_forwards(t.b, &b_own, 1, 1, err, sizeof err), STORE_OK, "%s", err);
	store_forward_list fl = {0};
	cr_assert_eq(store_claim_forwards(t.b, &b_own, 1, 100, &fl, err, sizeof err), STORE_OK, "%s",
	             err);
	cr_assert_eq(fl.n, 1);
	cr_assert_str_eq(fl.items[0].message_key, "old");
	store_forward_list_clear(&fl);
	rec_free(&mine);
	two_close(&t);
	h_teardown(&e);
}

/* at_least_once gives retries forward sequences too (a due scan): a retry
 * the previous owner had in flight when it died is above the partition's
 * mark with send_attempts > 0. The new owner's release must take its
 * sequence back like any other lease of the previous owner's, or the new
 * owner's own later deliveries would move the mark past it and the view
 * would call it sent, never forwarded (chaos, kill -9, found this). */
Test(fencing, a_new_owner_releases_a_retry_the_previous_owner_had_in_flight, .timeout = 60)
{
	h_env e;
	h_setup(&e, "fenceretry");
	two t;
	two_open(&t, &e);
	char err[512];
	owned_part b_own;
	a_applies_then_b_takes(&t, "retry", &b_own);
	/* A's first attempt had failed and a due scan of A's sequenced it
	 * again: in flight, leased, one attempt counted (as A left it) */
	h_exec(e.db, "UPDATE txhub.message_rows SET send_attempts = 1, updated_at = "
	             "updated_at - interval '1 second', next_send_at = now() + interval '30 seconds' "
	             "WHERE message_key = 'retry'");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.message_rows WHERE message_key = "
	                         "'retry' AND fwd_seq IS NOT NULL"), 1);
	cr_assert_eq(store_release_forwards(t.b, &b_own, 1, 1, err, sizeof err), STORE_OK, "%s", err);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.message_rows WHERE message_key = "
	                         "'retry' AND fwd_seq IS NULL AND next_send_at <= now() "
	                         "AND send_status = 'pending'"),
	             1, "the retry keeps its sequence above the mark: a later mark would pass it");
	two_close(&t);
	h_teardown(&e);
}
