/* test_chaos.c: the hub is killed with SIGKILL every few seconds and
 * restarted while transactions stream in (commits, rollbacks, and prepares
 * left for check-back). Afterwards every committed message was forwarded at
 * least once, no rolled-back one ever, and every row is in its right final
 * state. Prints the duplicate forwards and the time from each restart to
 * the next forward.
 *
 * TXHUB_CHAOS_TX transactions (default 20000) spread over about
 * TXHUB_CHAOS_SEND_MS (default 60000); each hub is killed
 * TXHUB_CHAOS_KILL_MS (default 3000) after its first forward (a new hub
 * gets its partitions only once the dead one's session has ended, unless
 * TXHUB_CHAOS_STATIC=1 gives it static group membership). */
#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "httpd.h"

enum { KIND_COMMIT, KIND_ROLLBACK, KIND_CHECKBACK };

static int kind_of(int i) { return i % 10 < 7 ? KIND_COMMIT : i % 10 < 9 ? KIND_ROLLBACK : KIND_CHECKBACK; }
/* what the producer answers for a prepare it never decided */
static int checkback_commits(int i) { return (i / 10) % 2 == 0; }
static int should_commit(int i)
{
	return kind_of(i) == KIND_COMMIT || (kind_of(i) == KIND_CHECKBACK && checkback_commits(i));
}

static void endpoint(void *opaque, const h_http_request *r, h_http_answer *a)
{
	(void)opaque;
	char mk[64] = "";
	h_http_param(r, "message_key", mk, sizeof mk);
	int i = atoi(mk + 2);
	/* truthful: a check-back may come before the decision envelope */
	snprintf(a->body, sizeof a->body, "%s", should_commit(i) ? "committed" : "rolled_back");
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

typedef struct {
	h_env *e;
	const char *fwd;
	int tx;
	long send_ms;
	volatile int done; /* set by the sender when everything is sent */
	long long sent_ms;
} sender;

static long sent_count(PGconn *db)
{
	PGresult *r = PQexec(db, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'");
	long n = PQresultStatus(r) == PGRES_TUPLES_OK ? atol(PQgetvalue(r, 0, 0)) : -1;
	PQclear(r);
	return n;
}

/* Messages not final yet, or committed and not sent. */
static long work_left(PGconn *db)
{
	PGresult *r = PQexec(db, "SELECT count(*) FROM txhub.messages WHERE status IN "
	                         "('prepared', 'awaiting_prepare') OR send_status = 'pending'");
	long n = PQresultStatus(r) == PGRES_TUPLES_OK ? atol(PQgetvalue(r, 0, 0)) : -1;
	PQclear(r);
	return n;
}

static void send_tx(h_env *e, const char *fwd, int i, int decision);

/* Stream the transactions in chunks of 500, each prepare's decision one
 * chunk later, spread over about send_ms. */
static void *send_all(void *arg)
{
	sender *s = arg;
	long long t0 = now_ms();
	const int chunk = 500;
	for (int from = 0; from < s->tx + chunk; from += chunk) {
		for (int i = from; i < from + chunk && i < s->tx; i++)
			send_tx(s->e, s->fwd, i, 0);
		for (int i = from - chunk; i >= 0 && i < from && i < s->tx; i++)
			send_tx(s->e, s->fwd, i, 1);
		h_flush();
		pause_ms(s->send_ms / (s->tx / chunk + 1));
	}
	s->sent_ms = now_ms() - t0;
	s->done = 1;
	return NULL;
}

static void send_tx(h_env *e, const char *fwd, int i, int decision)
{
	char buf[512], mk[32];
	snprintf(mk, sizeof mk, "c-%06d", i);
	if (!decision) {
		snprintf(buf, sizeof buf, "{\"type\":\"prepare\",\"biz_id\":\"chaos\",\"message_key\":\"%s\","
		                          "\"payload\":{\"i\":%d},\"forward\":{\"topic\":\"%s\",\"key\":\"%s\"}}",
		         mk, i, fwd, mk);
	} else {
		if (kind_of(i) == KIND_CHECKBACK)
			return;
		snprintf(buf, sizeof buf, "{\"type\":\"%s\",\"biz_id\":\"chaos\",\"message_key\":\"%s\"}",
		         kind_of(i) == KIND_COMMIT ? "commit" : "rollback", mk);
	}
	h_send_str(e, -1, mk, buf);
}

Test(chaos, kill_9_every_few_seconds_loses_nothing, .timeout = 1200)
{
	int tx = getenv("TXHUB_CHAOS_TX") ? atoi(getenv("TXHUB_CHAOS_TX")) : 20000;
	long kill_ms = getenv("TXHUB_CHAOS_KILL_MS") ? atol(getenv("TXHUB_CHAOS_KILL_MS")) : 3000;
	long send_ms = getenv("TXHUB_CHAOS_SEND_MS") ? atol(getenv("TXHUB_CHAOS_SEND_MS")) : 60000;
	h_env e;
	h_setup(&e, "chaos");
	h_httpd *srv = h_httpd_start(endpoint, NULL);
	cr_assert_not_null(srv);
	char fwd[128], def[128];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	snprintf(def, sizeof def, "checkback.default_url=http://127.0.0.1:%d/cb", h_httpd_port(srv));
	/* TXHUB_CHAOS_STATIC=1: static group membership, so that a restarted
	 * hub takes its partitions back without waiting for the dead one's
	 * session to end */
	const char *stat = getenv("TXHUB_CHAOS_STATIC") && atoi(getenv("TXHUB_CHAOS_STATIC"))
	                       ? "kafka.group.instance.id=chaos-hub" : NULL;
	const char *settings[] = {def, "checkback.first_after_ms=3000", "checkback.backoff_ms=500",
	                          "checkback.backoff_max_ms=2000", "checkback.max_attempts=50",
	                          "intake.batch_max=500", stat, NULL};
	/* hubs are started from this thread: a hub dies with the thread that
	 * started it (PR_SET_PDEATHSIG) */
	sender snd = {.e = &e, .fwd = fwd, .tx = tx, .send_ms = send_ms};
	pid_t hub = h_hub_start(&e, settings);
	pthread_t st;
	cr_assert_eq(pthread_create(&st, NULL, send_all, &snd), 0);
	int kills = 0, samples = 0;
	long long restart_sum = 0, restart_max = 0;
	PGconn *db = PQconnectdb(e.conninfo);
	for (int last = 0; !last;) {
		pause_ms(kill_ms);
		last = snd.done; /* one more kill after the last record was sent */
		h_hub_kill(hub);
		kills++;
		long before = sent_count(db);
		long long t0 = now_ms();
		hub = h_hub_start(&e, settings);
		/* time to the new hub's first forward (it must get its partitions
		 * first: the dead member's session has to end); the next kill comes
		 * kill_ms after that, so every hub is killed while working */
		while (now_ms() - t0 < 60000 && !(last && work_left(db) == 0)) {
			if (sent_count(db) > before) {
				long long d = now_ms() - t0;
				restart_sum += d;
				restart_max = d > restart_max ? d : restart_max;
				samples++;
				break;
			}
			pause_ms(20);
		}
	}
	PQfinish(db);
	pthread_join(st, NULL);

	/* the last hub finishes the work */
	char want[32];
	int ncommit = 0;
	for (int i = 0; i < tx; i++)
		ncommit += should_commit(i);
	snprintf(want, sizeof want, "%d", ncommit);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'committed' "
	                     "AND send_status = 'sent'", want, 300000),
	          "committed and sent: want %d", ncommit);
	snprintf(want, sizeof want, "%d", tx - ncommit);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE status = 'rolled_back' "
	                     "AND send_status IS NULL", want, 120000));
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages"), tx);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.rejected"), 0);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.conflicts"), 0);
	pause_ms(2000); /* the last hub may have been started a moment ago: let it
	                 * get through start-up, then a SIGTERM must stop it cleanly */
	cr_assert_eq(h_hub_stop(hub), 0);

	/* per message: the right state, and forwarded iff committed */
	PGresult *r = PQexec(e.db, "SELECT message_key, status FROM txhub.messages");
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK);
	for (int k = 0; k < PQntuples(r); k++) {
		int i = atoi(PQgetvalue(r, k, 0) + 2);
		cr_assert_str_eq(PQgetvalue(r, k, 1), should_commit(i) ? "committed" : "rolled_back",
		                 "%s", PQgetvalue(r, k, 0));
	}
	PQclear(r);
	h_record *recs;
	size_t n = h_read_topic(&e, fwd, 3000, &recs);
	int *seen = calloc((size_t)tx, sizeof *seen);
	for (size_t k = 0; k < n; k++) {
		int i = atoi(recs[k].key + 2);
		cr_assert(i >= 0 && i < tx);
		cr_assert(should_commit(i), "rolled-back %s was forwarded", recs[k].key);
		seen[i]++;
	}
	int dups = 0;
	for (int i = 0; i < tx; i++) {
		if (should_commit(i))
			cr_assert_geq(seen[i], 1, "committed c-%06d was never forwarded", i);
		if (seen[i] > 1)
			dups += seen[i] - 1;
	}
	fprintf(stderr, "chaos: %d transactions (%d committed, %d by check-back) sent in %.1f s, "
	                "%d kill -9s, %d duplicate forwards; restart to first forward: mean %lld ms, "
	                "max %lld ms over %d restarts that had work\n",
	        tx, ncommit, tx / 10, (double)snd.sent_ms / 1000, kills, dups,
	        samples ? restart_sum / samples : -1, restart_max, samples);
	free(seen);
	h_records_free(recs, n);
	h_httpd_stop(srv);
	h_teardown(&e);
}
