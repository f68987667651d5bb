/* test_chaos.c: transactions stream in (commits, rollbacks, prepares left
 * for check-back, and malformed records mixed in) while the hubs are
 * disturbed; afterwards every committed message was forwarded at least once,
 * no rolled-back one ever, every row is in its right final state, every
 * malformed record is in txhub.rejected, no hub exited on its own, and
 * every line the hubs wrote is a log line. Each scenario prints its
 * duplicate forwards.
 *
 *   kill_9_every_few_seconds    the only hub is SIGKILLed every few seconds
 *                               and restarted; prints the time from each
 *                               restart to the next forward
 *   three_replicas_eager /      three hubs, one SIGKILLed and one added
 *   three_replicas_cooperative  mid-run; from the hubs' logs, no two of them
 *                               ever forwarded for one partition at once
 *   frozen_replica_is_fenced    two hubs, one frozen (SIGSTOP) for 12 s, twice
 *                               its session time-out: its partitions move,
 *                               and when it wakes it notices and writes
 *                               nothing for them
 *   postgres_stopped_10s        two hubs; PostgreSQL stopped for 10 s
 *   postgres_stopped_10s_with_a_rebalance
 *                               the same, one hub killed 1 s into it: the
 *                               other rebalances while PostgreSQL is away
 *   broker_stopped_10s          two hubs; the Kafka broker stopped for 10 s
 *                               (needs TXHUB_TEST_KAFKA_DIR: deploy/kafka.sh)
 *   ..._exactly_once            the kill -9, three-replica (cooperative) and
 *                               frozen scenarios with forward.mode =
 *                               exactly_once (Apache Kafka only): a
 *                               read_committed reader sees every committed
 *                               message exactly once, 0 duplicates
 *
 * TXHUB_CHAOS_TX transactions (default 20000; the other scenarios send half)
 * spread over about TXHUB_CHAOS_SEND_MS (default 60000; the others 40 s);
 * the kill scenario kills each hub TXHUB_CHAOS_KILL_MS (default 3000) after
 * its first forward (a new hub gets its partitions only once the dead one's
 * session has ended, unless TXHUB_CHAOS_STATIC=1 gives it static group
 * membership). */
#include <criterion/criterion.h>
#include <errno.h>
#include <glob.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
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


/* Malformed records mixed into the stream, one every MALFORMED_EVERY
 * transactions: each must end in txhub.rejected. */
#define MALFORMED_EVERY 400
static const char *const malformed[] = {
	"not json at all",
	"{\"type\":\"prepare\"}",
	"{\"v\":2,\"type\":\"commit\",\"biz_id\":\"chaos\",\"message_key\":\"x\"}",
	"{\"type\":\"commit\",\"biz_id\":\"chaos\",\"message_key\":\"\"}",
	"{\"type\":\"prepare\",\"biz_id\":\"chaos\",\"message_key\":\"y\",\"payload\":1}",
	"[1,2,3]",
};

typedef struct {
	h_env *e;
	const char *fwd;
	int tx;
	long send_ms;
	volatile int done;     /* set by the sender when everything is sent */
	volatile int progress; /* transactions sent so far */
	int nmalformed;
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

/* Stream the transactions in chunks of 500, each prepare's decision one
 * chunk later, spread over about send_ms; a malformed record every
 * MALFORMED_EVERY transactions. */
static void *send_all(void *arg)
{
	sender *s = arg;
	long long t0 = now_ms();
	const int chunk = 500;
	for (int from = 0; from < s->tx + chunk; from += chunk) {
		for (int i = from; i < from + chunk && i < s->tx; i++) {
			send_tx(s->e, s->fwd, i, 0);
			if (i % MALFORMED_EVERY == MALFORMED_EVERY / 2) {
				char key[32];
				snprintf(key, sizeof key, "bad-%06d", i);
				h_send_str(s->e, -1, key,
				           malformed[s->nmalformed++ % (sizeof malformed / sizeof *malformed)]);
			}
		}
		for (int i = from - chunk; i >= 0 && i < from && i < s->tx; i++)
			send_tx(s->e, s->fwd, i, 1);
		h_flush();
		s->progress = from + chunk < s->tx ? from + chunk : s->tx;
		h_pause_ms(s->send_ms / (s->tx / chunk + 1));
	}
	s->sent_ms = now_ms() - t0;
	s->done = 1;
	return NULL;
}

/* ---- a run: hubs, the sender, and the checks afterwards ---- */

typedef struct {
	h_env e;
	h_httpd *srv;
	char fwd[128], def[128];
	const char *settings[16];
	pid_t hubs[16];
	int nhubs;
	sender snd;
	pthread_t sender_thread;
	PGconn *db;
	int eos; /* forward.mode = exactly_once: 0 duplicates allowed */
} run;

/* exactly_once runs need Kafka's transactions: Apache Kafka, not devbroker */
static void need_transactions(void)
{
	if (!h_real_kafka())
		cr_skip_test("TXHUB_TEST_KAFKA_DIR is not set: exactly_once needs Apache Kafka");
}

static void run_begin(run *r, const char *name, int tx, long send_ms, const char *extra, int eos)
{
	memset(r, 0, sizeof *r);
	r->eos = eos;
	h_setup(&r->e, name);
	h_control_topic(&r->e);
	r->srv = h_httpd_start(endpoint, NULL);
	cr_assert_not_null(r->srv);
	snprintf(r->fwd, sizeof r->fwd, "fw.%s", r->e.name);
	snprintf(r->def, sizeof r->def, "checkback.default_url=http://127.0.0.1:%d/cb",
	         h_httpd_port(r->srv));
	const char *s[] = {r->def, "checkback.first_after_ms=3000", "checkback.backoff_ms=500",
	                   "checkback.backoff_max_ms=2000", "checkback.max_attempts=50",
	                   "intake.batch_max=500", "log.level=debug",
	                   eos ? "forward.mode=exactly_once" : "forward.mode=at_least_once", extra,
	                   NULL};
	memcpy(r->settings, s, sizeof s);
	r->snd = (sender){.e = &r->e, .fwd = r->fwd, .tx = tx, .send_ms = send_ms};
	r->db = PQconnectdb(r->e.conninfo);
}

/* hubs are started from the test's main thread: a hub dies with the thread
 * that started it (PR_SET_PDEATHSIG) */
static pid_t hub_add(run *r)
{
	cr_assert_lt(r->nhubs, 16);
	pid_t p = h_hub_start(&r->e, r->settings);
	r->hubs[r->nhubs++] = p;
	return p;
}

static void hub_kill(run *r, int i)
{
	h_hub_kill(r->hubs[i]);
	r->hubs[i] = r->hubs[--r->nhubs];
}

/* No hub may have exited on its own. */
static void hubs_alive(run *r, const char *when)
{
	for (int i = 0; i < r->nhubs; i++) {
		int st;
		pid_t p = waitpid(r->hubs[i], &st, WNOHANG);
		cr_assert_eq(p, 0, "a hub exited %s (status %d)", when,
		             p > 0 ? (WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st)) : -1);
	}
}

static void sender_start(run *r)
{
	cr_assert_eq(pthread_create(&r->sender_thread, NULL, send_all, &r->snd), 0);
}

/* Wait until the sender has sent `frac` of the transactions. */
static void wait_progress(run *r, double frac)
{
	while (!r->snd.done && r->snd.progress < (int)(frac * r->snd.tx))
		h_pause_ms(50);
}

/* Every line every hub of the run wrote is one of its log lines (a
 * timestamp first): no message spread over several lines, nothing printed
 * past the logger (a libc abort message, say). */
static void check_log_lines(run *r)
{
	char pat[256];
	snprintf(pat, sizeof pat, "/tmp/txhub-%s-[0-9]*.log", r->e.name);
	glob_t g;
	cr_assert_eq(glob(pat, 0, NULL, &g), 0, "no hub logs at %s", pat);
	for (size_t f = 0; f < g.gl_pathc; f++) {
		FILE *in = fopen(g.gl_pathv[f], "r");
		cr_assert_not_null(in);
		char line[4096];
		int y, mo, d;
		while (fgets(line, sizeof line, in)) {
			cr_assert(sscanf(line, "%4d-%2d-%2dT", &y, &mo, &d) == 3,
			          "%s: a line that is not a log line: %s", g.gl_pathv[f], line);
			while (!strchr(line, '\n') && fgets(line, sizeof line, in))
				; /* the rest of a long line */
		}
		fclose(in);
	}
	globfree(&g);
}

/* After the sender finished: the hubs finish the work, stop cleanly, and
 * every check passes. Returns the duplicate forwards. */
static int run_end(run *r)
{
	pthread_join(r->sender_thread, NULL);
	int tx = r->snd.tx;
	char want[32];
	int ncommit = 0;
	for (int i = 0; i < tx; i++)
		ncommit += should_commit(i);
	snprintf(want, sizeof want, "%d", ncommit);
	cr_assert(h_wait(&r->e, "SELECT count(*) FROM txhub.messages WHERE status = 'committed' "
	                        "AND send_status = 'sent'", want, 300000),
	          "committed and sent: want %d", ncommit);
	snprintf(want, sizeof want, "%d", tx - ncommit);
	cr_assert(h_wait(&r->e, "SELECT count(*) FROM txhub.messages WHERE status = 'rolled_back' "
	                        "AND send_status IS NULL", want, 120000));
	cr_assert_eq(h_count(&r->e, "SELECT count(*) FROM txhub.messages"), tx);
	cr_assert_eq(h_count(&r->e, "SELECT count(*) FROM txhub.conflicts"), 0);
	/* every malformed record, and nothing else, rejected */
	snprintf(want, sizeof want, "%d", r->snd.nmalformed);
	cr_assert(h_wait(&r->e, "SELECT count(*) FROM txhub.rejected", want, 10000),
	          "want %d rejected", r->snd.nmalformed);
	cr_assert_eq(h_count(&r->e, "SELECT count(DISTINCT record_key) FROM txhub.rejected "
	                            "WHERE convert_from(record_key, 'UTF8') LIKE 'bad-%'"),
	             r->snd.nmalformed);
	hubs_alive(r, "during the run");
	h_pause_ms(2000); /* a hub may have been started a moment ago: let it get
	                 * through start-up, then a SIGTERM must stop it cleanly */
	for (int i = 0; i < r->nhubs; i++)
		cr_assert_eq(h_hub_stop(r->hubs[i]), 0, "hub %d did not stop cleanly", i);
	r->nhubs = 0;
	check_log_lines(r);

	/* per message: the right state, and forwarded iff committed */
	PGresult *res = PQexec(r->e.db, "SELECT message_key, status FROM txhub.messages");
	cr_assert_eq(PQresultStatus(res), PGRES_TUPLES_OK);
	for (int k = 0; k < PQntuples(res); k++) {
		int i = atoi(PQgetvalue(res, k, 0) + 2);
		cr_assert_str_eq(PQgetvalue(res, k, 1), should_commit(i) ? "committed" : "rolled_back",
		                 "%s", PQgetvalue(res, k, 0));
	}
	PQclear(res);
	h_record *recs;
	size_t n = r->eos ? h_read_topic_committed(&r->e, r->fwd, 3000, &recs)
	                  : h_read_topic(&r->e, r->fwd, 3000, &recs);
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
	free(seen);
	h_records_free(recs, n);
	if (r->eos)
		cr_assert_eq(dups, 0, "exactly_once: a read_committed consumer saw %d duplicate "
		             "forwards", dups);
	return dups;
}

static void run_free(run *r)
{
	PQfinish(r->db);
	h_httpd_stop(r->srv);
	h_teardown(&r->e);
}

/* ---- who forwarded what, from the hubs' debug logs ---- */

typedef struct {
	char ts[32]; /* ISO 8601 with milliseconds: sorts as text */
	int hub, partition;
	long long epoch;
} fwd_event;

static int cmp_event(const void *a, const void *b)
{
	const fwd_event *x = a, *y = b;
	if (x->partition != y->partition)
		return x->partition - y->partition;
	return strcmp(x->ts, y->ts);
}

/* Reads every hub log of the run ("hub: forwarding N of partition P of T at
 * epoch E" lines) and checks, per partition, that in time order the epochs
 * never go back and each epoch was used by one hub only: the replicas took
 * turns, and never forwarded for one partition at the same time. Returns
 * the number of hand-overs seen. */
static int check_forwarders(run *r)
{
	char pat[256];
	snprintf(pat, sizeof pat, "/tmp/txhub-%s-[0-9]*.log", r->e.name);
	glob_t g;
	cr_assert_eq(glob(pat, 0, NULL, &g), 0, "no hub logs at %s", pat);
	fwd_event *ev = NULL;
	size_t n = 0, cap = 0;
	for (size_t f = 0; f < g.gl_pathc; f++) {
		FILE *in = fopen(g.gl_pathv[f], "r");
		cr_assert_not_null(in);
		char line[1024];
		while (fgets(line, sizeof line, in)) {
			const char *m = strstr(line, "hub: forwarding ");
			if (!m)
				continue;
			fwd_event e = {.hub = (int)f};
			unsigned long cnt;
			if (sscanf(line, "%31s", e.ts) != 1 ||
			    sscanf(m, "hub: forwarding %lu of partition %d of %*s at epoch %lld", &cnt,
			           &e.partition, &e.epoch) != 3)
				continue;
			if (n == cap) {
				cap = cap ? cap * 2 : 1024;
				ev = realloc(ev, cap * sizeof *ev);
				cr_assert_not_null(ev);
			}
			ev[n++] = e;
		}
		fclose(in);
	}
	cr_assert_gt(n, 0, "no forwarding lines in the hub logs");
	qsort(ev, n, sizeof *ev, cmp_event);
	int handovers = 0;
	for (size_t i = 1; i < n; i++) {
		if (ev[i].partition != ev[i - 1].partition)
			continue;
		cr_assert_gt(ev[i].epoch, 0, "forwarded without an epoch");
		cr_assert_geq(ev[i].epoch, ev[i - 1].epoch,
		              "partition %d: epoch %lld (hub %d) forwarded at %s after epoch %lld "
		              "(hub %d) at %s", ev[i].partition, ev[i].epoch, ev[i].hub, ev[i].ts,
		              ev[i - 1].epoch, ev[i - 1].hub, ev[i - 1].ts);
		if (ev[i].epoch == ev[i - 1].epoch)
			cr_assert_eq(ev[i].hub, ev[i - 1].hub,
			             "partition %d epoch %lld forwarded by two hubs", ev[i].partition,
			             ev[i].epoch);
		else if (ev[i].hub != ev[i - 1].hub)
			handovers++;
	}
	free(ev);
	globfree(&g);
	return handovers;
}

/* ---- scenarios ---- */

static void kill_9(const char *name, int eos)
{
	int tx = getenv("TXHUB_CHAOS_TX") ? atoi(getenv("TXHUB_CHAOS_TX")) : 20000;
	long kill_ms = getenv("TXHUB_CHAOS_KILL_MS") ? atol(getenv("TXHUB_CHAOS_KILL_MS")) : 3000;
	long send_ms = getenv("TXHUB_CHAOS_SEND_MS") ? atol(getenv("TXHUB_CHAOS_SEND_MS")) : 60000;
	/* TXHUB_CHAOS_STATIC=1: static group membership, so that a restarted
	 * hub takes its partitions back without waiting for the dead one's
	 * session to end */
	const char *stat = getenv("TXHUB_CHAOS_STATIC") && atoi(getenv("TXHUB_CHAOS_STATIC"))
	                       ? "kafka.group.instance.id=chaos-hub" : NULL;
	run r;
	run_begin(&r, name, tx, send_ms, stat, eos);
	hub_add(&r);
	sender_start(&r);
	int kills = 0, samples = 0;
	long long restart_sum = 0, restart_max = 0;
	for (int last = 0; !last;) {
		h_pause_ms(kill_ms);
		last = r.snd.done; /* one more kill after the last record was sent */
		hubs_alive(&r, "before it was killed");
		hub_kill(&r, 0);
		kills++;
		long before = sent_count(r.db);
		long long t0 = now_ms();
		hub_add(&r);
		/* time to the new hub's first forward (it must get its partitions
		 * first: the dead member's session has to end); the next kill comes
		 * kill_ms after that, so every hub is killed while working */
		while (now_ms() - t0 < 60000 && !(last && work_left(r.db) == 0)) {
			if (sent_count(r.db) > before) {
				long long d = now_ms() - t0;
				restart_sum += d;
				restart_max = d > restart_max ? d : restart_max;
				samples++;
				break;
			}
			h_pause_ms(20);
		}
	}
	int dups = run_end(&r);
	fprintf(stderr, "chaos: kill -9 (%s): %d transactions (%d by check-back, %d malformed) sent "
	                "in %.1f s, %d kill -9s, %d duplicate forwards (%.1f per kill); restart to "
	                "first forward: mean %lld ms, max %lld ms over %d restarts that had work\n",
	        eos ? "exactly_once, read_committed" : "at_least_once", tx, tx / 10,
	        r.snd.nmalformed, (double)r.snd.sent_ms / 1000, kills, dups,
	        kills ? (double)dups / kills : 0.0, samples ? restart_sum / samples : -1, restart_max,
	        samples);
	run_free(&r);
}

Test(chaos, kill_9_every_few_seconds_loses_nothing, .timeout = 1200)
{
	kill_9("chaos", 0);
}

Test(chaos, kill_9_every_few_seconds_exactly_once, .timeout = 1200)
{
	need_transactions();
	kill_9("chaos_eos", 1);
}

static int half_tx(void)
{
	return (getenv("TXHUB_CHAOS_TX") ? atoi(getenv("TXHUB_CHAOS_TX")) : 20000) / 2;
}

static long short_send_ms(void)
{
	long send_ms = getenv("TXHUB_CHAOS_SEND_MS") ? atol(getenv("TXHUB_CHAOS_SEND_MS")) : 60000;
	return send_ms * 2 / 3;
}

static void three_replicas(const char *name, const char *assignor, int eos)
{
	run r;
	run_begin(&r, name, half_tx(), short_send_ms(), assignor, eos);
	for (int i = 0; i < 3; i++)
		hub_add(&r);
	sender_start(&r);
	wait_progress(&r, 0.3);
	hubs_alive(&r, "before the kill");
	hub_kill(&r, 0); /* its partitions move once its session ends */
	wait_progress(&r, 0.65);
	hub_add(&r); /* a rebalance among the living */
	while (!r.snd.done)
		h_pause_ms(100);
	int dups = run_end(&r);
	/* (exactly_once: a stopping lane may still commit while the next owner
	 * starts; Kafka's fencing, not the hand-over order, keeps that right,
	 * and run_end counted 0 duplicates) */
	int handovers = eos ? -1 : check_forwarders(&r);
	char ho[64] = "";
	if (handovers >= 0)
		snprintf(ho, sizeof ho, "; %d hand-overs between replicas", handovers);
	fprintf(stderr, "chaos: three replicas (%s%s): %d transactions (%d malformed) sent in %.1f s, "
	                "one kill -9 and one added%s; %d duplicate forwards\n",
	        assignor ? "cooperative" : "eager", eos ? ", exactly_once" : "", r.snd.tx,
	        r.snd.nmalformed, (double)r.snd.sent_ms / 1000, ho, dups);
	run_free(&r);
}

Test(chaos, three_replicas_eager, .timeout = 1200)
{
	three_replicas("rep_eager", NULL, 0);
}

Test(chaos, three_replicas_cooperative, .timeout = 1200)
{
	three_replicas("rep_coop", "kafka.partition.assignment.strategy=cooperative-sticky", 0);
}

Test(chaos, three_replicas_exactly_once, .timeout = 1200)
{
	need_transactions();
	three_replicas("rep_eos", "kafka.partition.assignment.strategy=cooperative-sticky", 1);
}

/* The consumer group protocol (KIP-848): the broker assigns, every
 * rebalance is incremental, and a member that is gone is noticed by the
 * broker's session time-out. Two hubs; a third joins, one leaves
 * (SIGTERM), one is killed, one more joins; every check of run_end, and
 * no two hubs forwarded for one partition at once. */
static int log_lines(run *r, int n, const char *what);

Test(chaos, consumer_protocol_join_leave_kill, .timeout = 1200)
{
	const char *missing = h_consumer_protocol_missing();
	if (missing)
		cr_skip_test("kafka.group.protocol = consumer %s", missing);
	run r;
	run_begin(&r, "rep_kip848", half_tx(), short_send_ms(), "kafka.group.protocol=consumer", 0);
	hub_add(&r);
	hub_add(&r);
	sender_start(&r);
	wait_progress(&r, 0.2);
	hub_add(&r); /* joins */
	wait_progress(&r, 0.4);
	hubs_alive(&r, "before one left");
	cr_assert_eq(h_hub_stop(r.hubs[0]), 0, "a hub leaving did not stop cleanly");
	r.hubs[0] = r.hubs[--r.nhubs];
	wait_progress(&r, 0.6);
	hub_kill(&r, 0); /* its partitions move once the broker ends its session */
	wait_progress(&r, 0.8);
	hub_add(&r);
	while (!r.snd.done)
		h_pause_ms(100);
	int dups = run_end(&r);
	int handovers = check_forwarders(&r);
	for (int n = 1; n <= 4; n++) /* (the hubs' logs, -1 to -4) */
		cr_assert_eq(log_lines(&r, n, "; group protocol consumer"), 1,
		             "hub %d did not run the consumer group protocol", n);
	fprintf(stderr, "chaos: consumer group protocol: %d transactions (%d malformed) sent in "
	                "%.1f s, one joined, one left, one killed, one joined; %d hand-overs "
	                "between replicas; %d duplicate forwards\n",
	        r.snd.tx, r.snd.nmalformed, (double)r.snd.sent_ms / 1000, handovers, dups);
	run_free(&r);
}

static void sh(const char *cmd)
{
	int rc = system(cmd);
	cr_assert(rc == 0, "%s: exit %d", cmd, rc);
}

/* Two hubs; `stop` and `start` take a service away for 10 s mid-run. */
/* Two hubs; `stop` and `start` take a service away for 10 s mid-run. With
 * rebalance set, one hub is SIGKILLed 1 s into the outage, so that the
 * other goes through a rebalance while PostgreSQL is away (its batch in
 * hand revoked, its partitions taken again only once PostgreSQL answers),
 * and a new hub joins after it. */
static void outage(const char *name, const char *what, const char *stop, const char *start,
                   int pg, int rebalance)
{
	run r;
	run_begin(&r, name, half_tx(), short_send_ms(), NULL, 0);
	hub_add(&r);
	hub_add(&r);
	sender_start(&r);
	wait_progress(&r, 0.3);
	hubs_alive(&r, "before the outage");
	long long t0 = now_ms();
	sh(stop);
	if (rebalance) {
		h_pause_ms(1000);
		hub_kill(&r, 0);
		h_pause_ms(9000);
	} else {
		h_pause_ms(10000);
	}
	hubs_alive(&r, "during the outage");
	sh(start);
	long long down = now_ms() - t0;
	if (pg) { /* the test's own connections died too */
		PQreset(r.e.db);
		PQreset(r.db);
	}
	if (rebalance)
		hub_add(&r);
	while (!r.snd.done)
		h_pause_ms(100);
	int dups = run_end(&r);
	fprintf(stderr, "chaos: %s stopped for %.1f s%s: %d transactions (%d malformed) sent in "
	                "%.1f s, no hub exited on its own; %d duplicate forwards\n",
	        what, (double)down / 1000,
	        rebalance ? ", one of two hubs killed during it and one added after" : ", two hubs",
	        r.snd.tx, r.snd.nmalformed, (double)r.snd.sent_ms / 1000, dups);
	run_free(&r);
}

static void pg_outage(const char *name, int rebalance)
{
	const char *ctl = getenv("TXHUB_TEST_PGCTL");
	cr_assert_not_null(ctl, "TXHUB_TEST_PGCTL is not set (tests/with-services.sh sets it)");
	char stop[600], start[600];
	snprintf(stop, sizeof stop, "%s stop >/dev/null", ctl);
	snprintf(start, sizeof start, "%s start >/dev/null", ctl);
	outage(name, "PostgreSQL", stop, start, 1, rebalance);
}

Test(chaos, postgres_stopped_10s, .timeout = 1200)
{
	pg_outage("pg_out", 0);
}

Test(chaos, postgres_stopped_10s_with_a_rebalance, .timeout = 1200)
{
	pg_outage("pg_rebal", 1);
}

Test(chaos, broker_stopped_10s, .timeout = 1200)
{
	const char *dir = getenv("TXHUB_TEST_KAFKA_DIR");
	if (!dir)
		cr_skip_test("TXHUB_TEST_KAFKA_DIR is not set: the broker is not ours to stop");
	char stop[600], start[600];
	snprintf(stop, sizeof stop, "%s/deploy/kafka.sh stop %s", TXHUB_SOURCE_ROOT, dir);
	snprintf(start, sizeof start, "%s/deploy/kafka.sh start %s >/dev/null", TXHUB_SOURCE_ROOT,
	         dir);
	outage("kafka_out", "the Kafka broker", stop, start, 0, 0);
}

/* Counts lines of a hub's log holding `what`. */
static int log_lines(run *r, int n, const char *what)
{
	char path[256], line[1024];
	snprintf(path, sizeof path, "/tmp/txhub-%s-%d.log", r->e.name, n);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	int c = 0;
	while (fgets(line, sizeof line, f))
		c += strstr(line, what) != NULL;
	fclose(f);
	return c;
}

static void frozen(const char *name, int eos)
{
	run r;
	run_begin(&r, name, half_tx(), short_send_ms(), NULL, eos);
	hub_add(&r); /* log -1 */
	hub_add(&r); /* log -2 */
	sender_start(&r);
	wait_progress(&r, 0.3);
	hubs_alive(&r, "before the freeze");
	pid_t frozen = r.hubs[0];
	PQclear(PQexec(r.e.db, "CREATE TABLE public.before_freeze AS "
	                       "SELECT partition, epoch, owner FROM txhub.partitions"));
	/* the frozen hub's partitions (owner: host/pid); an eager rebalance
	 * moves the other hub's too, an incremental one (the consumer group
	 * protocol) leaves them where they are */
	char mine[160];
	snprintf(mine, sizeof mine, "SELECT count(*) FROM public.before_freeze WHERE owner LIKE "
	                            "'%%/%d'", (int)frozen);
	long held = h_count(&r.e, mine);
	cr_assert_gt(held, 0, "the hub to freeze held no partition");
	kill(frozen, SIGSTOP);
	/* meanwhile the group gives its partitions to the other hub, which
	 * takes them at a new epoch (if the frozen hub was in the middle of a
	 * transaction, only once that ends: when PostgreSQL's idle time-out
	 * ends it, or when the hub is woken) */
	h_pause_ms(12000);
	kill(frozen, SIGCONT);
	while (!r.snd.done)
		h_pause_ms(100);
	int dups = run_end(&r);
	char moved[300];
	snprintf(moved, sizeof moved, "SELECT count(*) FROM txhub.partitions p JOIN "
	                              "public.before_freeze b USING (partition) "
	                              "WHERE p.epoch > b.epoch AND b.owner LIKE '%%/%d'", (int)frozen);
	long taken_over = h_count(&r.e, moved);
	int lost = log_lines(&r, 1, "intake: lost ");
	int fenced = log_lines(&r, 1, "taken by another replica");
	int dropped = log_lines(&r, 1, "belong to another replica now");
	cr_assert_eq(taken_over, held, "a partition of the frozen hub was never taken again after "
	             "the freeze (%ld of %ld were)", taken_over, held);
	cr_assert_gt(lost + fenced, 0, "the frozen hub never noticed it lost its partitions");
	fprintf(stderr, "chaos: a hub frozen for 12 s%s: %d transactions (%d malformed) sent in "
	                "%.1f s; its %ld partition(s) taken at a new epoch since; on waking it logged %d "
	                "lost-partition event(s), %d fenced write(s), %d dropped report(s); "
	                "%d duplicate forwards\n",
	        eos ? " (exactly_once)" : "", r.snd.tx, r.snd.nmalformed,
	        (double)r.snd.sent_ms / 1000, taken_over, lost, fenced, dropped, dups);
	run_free(&r);
}

Test(chaos, frozen_replica_is_fenced, .timeout = 1200)
{
	frozen("frozen", 0);
}

Test(chaos, frozen_replica_is_fenced_exactly_once, .timeout = 1200)
{
	need_transactions();
	frozen("frozen_eos", 1);
}
