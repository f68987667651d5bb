/* Downstream deduplication (txhub/dedup.h) against PostgreSQL: both ways of
 * claiming, racing consumers, a consumer killed while processing, a
 * business write that fails, and bad input. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "txhub.h"

static PGconn *connect_to(h_env *e)
{
	PGconn *db = PQconnectdb(e->conninfo);
	cr_assert(PQstatus(db) == CONNECTION_OK, "%s", PQerrorMessage(db));
	return db;
}

/* count(*) of sql seen from db (another session than e->db, when e->db is
 * inside a transaction). */
static long count_on(PGconn *db, const char *sql)
{
	PGresult *r = PQexec(db, sql);
	cr_assert(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(db));
	long n = atol(PQgetvalue(r, 0, 0));
	PQclear(r);
	return n;
}

static void setup(h_env *e, const char *name)
{
	h_setup(e, name);
	char err[512];
	cr_assert_eq(txhub_dedup_create_table(e->db, NULL, err, sizeof err), TXHUB_OK, "%s", err);
	cr_assert_eq(txhub_dedup_create_table(e->db, NULL, err, sizeof err), TXHUB_OK, "twice: %s", err);
	h_exec(e->db, "CREATE TABLE applied (biz_id text, message_key text, worker int)");
}

static txhub_dedup_result claim(PGconn *db, const txhub_dedup_config *cfg, const char *biz,
                                const char *key, txhub_claim *c)
{
	txhub_dedup_result res = 0;
	char err[512];
	txhub_status st = txhub_dedup_claim(db, cfg, biz, strlen(biz), key, strlen(key), &res, c,
	                                    err, sizeof err);
	cr_assert_eq(st, TXHUB_OK, "claim %s/%s: %s", biz, key, err);
	return res;
}

Test(dedup, own_transactions_claim_busy_done_duplicate)
{
	h_env e;
	setup(&e, "ddown");
	PGconn *other = connect_to(&e);
	txhub_claim a, b;
	char err[512];
	cr_assert_eq(claim(e.db, NULL, "shop", "o-1", &a), TXHUB_DEDUP_CLAIMED);
	cr_assert_eq(a.in_caller_tx, 0);
	cr_assert_eq(strlen(a.holder), 32);
	cr_assert_eq(claim(other, NULL, "shop", "o-1", &b), TXHUB_DEDUP_BUSY);
	cr_assert(b.busy_ms > 50000 && b.busy_ms <= 60000, "busy for %lld ms", b.busy_ms);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub_dedup WHERE state = 'processing' "
	                         "AND expires_at > now()"), 1);
	cr_assert_eq(txhub_dedup_done(e.db, &a, err, sizeof err), TXHUB_OK, "%s", err);
	cr_assert_eq(txhub_dedup_done(e.db, &a, err, sizeof err), TXHUB_OK, "done twice");
	cr_assert_eq(claim(other, NULL, "shop", "o-1", &b), TXHUB_DEDUP_DUPLICATE);
	/* a release after done never un-processes a message */
	cr_assert_eq(txhub_dedup_release(e.db, &a, err, sizeof err), TXHUB_OK);
	cr_assert_eq(claim(other, NULL, "shop", "o-1", &b), TXHUB_DEDUP_DUPLICATE);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub_dedup WHERE state = 'processed' "
	                         "AND processed_at IS NOT NULL AND expires_at IS NULL"), 1);
	/* the same key under another biz_id is another message */
	cr_assert_eq(claim(other, NULL, "shop2", "o-1", &b), TXHUB_DEDUP_CLAIMED);
	/* release: the next claim gets it at once */
	cr_assert_eq(txhub_dedup_release(other, &b, err, sizeof err), TXHUB_OK, "%s", err);
	cr_assert_eq(claim(e.db, NULL, "shop2", "o-1", &a), TXHUB_DEDUP_CLAIMED);
	long long purged = -1;
	cr_assert_eq(txhub_dedup_purge(e.db, NULL, 0, &purged, err, sizeof err), TXHUB_OK, "%s", err);
	cr_assert_eq(purged, 1);
	PQfinish(other);
	h_teardown(&e);
}

Test(dedup, an_expired_claim_is_taken_over_and_its_holder_told)
{
	h_env e;
	setup(&e, "ddexp");
	txhub_dedup_config shortlease = {.lease_ms = 300};
	txhub_claim a, b;
	char err[512];
	cr_assert_eq(claim(e.db, &shortlease, "shop", "o-1", &a), TXHUB_DEDUP_CLAIMED);
	cr_assert_eq(claim(e.db, &shortlease, "shop", "o-1", &b), TXHUB_DEDUP_BUSY);
	h_pause_ms(400);
	cr_assert_eq(claim(e.db, &shortlease, "shop", "o-1", &b), TXHUB_DEDUP_CLAIMED);
	cr_assert_str_neq(a.holder, b.holder);
	cr_assert_eq(txhub_dedup_done(e.db, &a, err, sizeof err), TXHUB_ERR_LOST);
	cr_assert(strstr(err, "took it over"), "%s", err);
	cr_assert_eq(txhub_dedup_release(e.db, &a, err, sizeof err), TXHUB_OK, "a stale release");
	cr_assert_eq(txhub_dedup_done(e.db, &b, err, sizeof err), TXHUB_OK, "the stale release took b's row");
	h_teardown(&e);
}

Test(dedup, a_consumer_killed_while_processing_is_taken_over_after_expiry)
{
	h_env e;
	setup(&e, "ddkill");
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		PGconn *db = PQconnectdb(e.conninfo);
		txhub_dedup_config cfg = {.lease_ms = 1000};
		txhub_claim c;
		txhub_dedup_result res;
		if (txhub_dedup_claim(db, &cfg, "shop", 4, "o-9", 3, &res, &c, NULL, 0) != TXHUB_OK ||
		    res != TXHUB_DEDUP_CLAIMED)
			_exit(1);
		if (write(1, "", 0) < 0) /* claimed: now "processing" forever */
			_exit(1);
		for (;;)
			pause();
	}
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub_dedup WHERE state = 'processing'", "1", 10000));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	txhub_claim c;
	cr_assert_eq(claim(e.db, NULL, "shop", "o-9", &c), TXHUB_DEDUP_BUSY);
	cr_assert_leq(c.busy_ms, 1000);
	h_pause_ms(c.busy_ms + 100);
	cr_assert_eq(claim(e.db, NULL, "shop", "o-9", &c), TXHUB_DEDUP_CLAIMED);
	char err[512];
	cr_assert_eq(txhub_dedup_done(e.db, &c, err, sizeof err), TXHUB_OK, "%s", err);
	h_teardown(&e);
}

Test(dedup, in_the_callers_transaction_the_mark_commits_with_the_business_write)
{
	h_env e;
	setup(&e, "ddtx");
	PGconn *other = connect_to(&e);
	txhub_claim c, d;
	char err[512];
	h_exec(e.db, "BEGIN");
	cr_assert_eq(claim(e.db, NULL, "shop", "o-1", &c), TXHUB_DEDUP_CLAIMED);
	cr_assert_eq(c.in_caller_tx, 1);
	h_exec(e.db, "INSERT INTO applied VALUES ('shop', 'o-1', 1)");
	/* the same message again inside the same transaction is a duplicate */
	cr_assert_eq(claim(e.db, NULL, "shop", "o-1", &d), TXHUB_DEDUP_DUPLICATE);
	cr_assert_eq(txhub_dedup_done(e.db, &c, err, sizeof err), TXHUB_OK, "%s", err);
	/* nothing visible outside before the commit */
	cr_assert_eq(count_on(other, "SELECT count(*) FROM txhub_dedup"), 0);
	h_exec(e.db, "COMMIT");
	cr_assert_eq(claim(other, NULL, "shop", "o-1", &d), TXHUB_DEDUP_DUPLICATE);

	/* a business write that fails: the transaction rolls back, no mark */
	h_exec(e.db, "BEGIN");
	cr_assert_eq(claim(e.db, NULL, "shop", "o-2", &c), TXHUB_DEDUP_CLAIMED);
	PGresult *r = PQexec(e.db, "INSERT INTO applied VALUES ('shop', 'o-2', 1 / 0)");
	cr_assert(PQresultStatus(r) == PGRES_FATAL_ERROR);
	PQclear(r);
	/* a failed transaction is refused, not half-used */
	cr_assert_eq(txhub_dedup_claim(e.db, NULL, "shop", 4, "o-3", 3, &(txhub_dedup_result){0}, &d,
	                               err, sizeof err), TXHUB_ERR_INVALID);
	h_exec(e.db, "ROLLBACK");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub_dedup WHERE message_key = 'o-2'"), 0);
	cr_assert_eq(claim(other, NULL, "shop", "o-2", &d), TXHUB_DEDUP_CLAIMED, "a retry gets it");
	cr_assert_eq(txhub_dedup_done(other, &d, err, sizeof err), TXHUB_OK);
	/* in its own transactions a failed business write releases its claim */
	cr_assert_eq(claim(other, NULL, "shop", "o-4", &d), TXHUB_DEDUP_CLAIMED);
	cr_assert_eq(txhub_dedup_release(other, &d, err, sizeof err), TXHUB_OK);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub_dedup WHERE message_key = 'o-4'"), 0);
	/* an expired 'processing' row is taken over from inside a transaction too */
	txhub_dedup_config shortlease = {.lease_ms = 100};
	cr_assert_eq(claim(other, &shortlease, "shop", "o-5", &d), TXHUB_DEDUP_CLAIMED);
	h_pause_ms(200);
	h_exec(e.db, "BEGIN");
	cr_assert_eq(claim(e.db, NULL, "shop", "o-5", &c), TXHUB_DEDUP_CLAIMED);
	h_exec(e.db, "COMMIT");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub_dedup WHERE message_key = 'o-5' "
	                         "AND state = 'processed'"), 1);
	PQfinish(other);
	h_teardown(&e);
}

/* ---- racing consumers ---- */

#define RACE_MESSAGES 40
#define RACE_WORKERS 6

typedef struct {
	h_env *e;
	int worker;
	int own_tx; /* 1: claims in their own transactions; 0: in the worker's */
	pthread_barrier_t *start;
} racer;

static void apply_in_tx(PGconn *db, const char *key, int worker, int *pending)
{
	txhub_claim c;
	txhub_dedup_result res = 0;
	char err[512], sql[256];
	h_exec(db, "BEGIN");
	txhub_status st = txhub_dedup_claim(db, NULL, "shop", 4, key, strlen(key), &res, &c, err, sizeof err);
	cr_assert(st == TXHUB_OK || st == TXHUB_ERR_DB_RETRY, "%s", err);
	if (st == TXHUB_OK && res == TXHUB_DEDUP_CLAIMED) {
		snprintf(sql, sizeof sql, "INSERT INTO applied VALUES ('shop', '%s', %d)", key, worker);
		h_exec(db, sql);
		cr_assert_eq(txhub_dedup_done(db, &c, err, sizeof err), TXHUB_OK, "%s", err);
		h_exec(db, "COMMIT");
		return;
	}
	h_exec(db, "ROLLBACK");
	if (st != TXHUB_OK || res == TXHUB_DEDUP_BUSY)
		(*pending)++;
}

static void apply_own_tx(PGconn *db, const char *key, int worker, int *pending)
{
	txhub_claim c;
	txhub_dedup_result res = 0;
	char err[512], sql[256];
	txhub_status st = txhub_dedup_claim(db, NULL, "shop", 4, key, strlen(key), &res, &c, err, sizeof err);
	cr_assert_eq(st, TXHUB_OK, "%s", err);
	if (res == TXHUB_DEDUP_BUSY)
		(*pending)++;
	if (res != TXHUB_DEDUP_CLAIMED)
		return;
	snprintf(sql, sizeof sql, "INSERT INTO applied VALUES ('shop', '%s', %d)", key, worker);
	h_exec(db, sql);
	cr_assert_eq(txhub_dedup_done(db, &c, err, sizeof err), TXHUB_OK, "%s", err);
}

static void *race(void *arg)
{
	racer *r = arg;
	PGconn *db = connect_to(r->e);
	/* all connected before any claims: on a loaded machine the first worker
	 * connected did everything before the others had a connection */
	pthread_barrier_wait(r->start);
	/* every worker goes through every message, as a redelivered topic would */
	for (int round = 0; round < 50; round++) {
		int pending = 0;
		for (int i = 0; i < RACE_MESSAGES; i++) {
			char key[32];
			snprintf(key, sizeof key, "m-%d", (i + r->worker * 7) % RACE_MESSAGES);
			if (r->own_tx)
				apply_own_tx(db, key, r->worker, &pending);
			else
				apply_in_tx(db, key, r->worker, &pending);
		}
		if (!pending)
			break;
		h_pause_ms(20);
	}
	PQfinish(db);
	return NULL;
}

static void race_test(const char *name, int own_tx)
{
	h_env e;
	setup(&e, name);
	pthread_t t[RACE_WORKERS];
	racer r[RACE_WORKERS];
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, RACE_WORKERS);
	for (int i = 0; i < RACE_WORKERS; i++) {
		r[i] = (racer){&e, i, own_tx, &start};
		pthread_create(&t[i], NULL, race, &r[i]);
	}
	for (int i = 0; i < RACE_WORKERS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&start);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM applied"), RACE_MESSAGES,
	             "business writes applied more or less than once");
	cr_assert_eq(h_count(&e, "SELECT count(DISTINCT message_key) FROM applied"), RACE_MESSAGES);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub_dedup WHERE state = 'processed'"),
	             RACE_MESSAGES);
	cr_assert_geq(h_count(&e, "SELECT count(DISTINCT worker) FROM applied"), 2,
	              "no race happened: one worker did everything");
	h_teardown(&e);
}

Test(dedup, racing_consumers_in_their_transactions_apply_once, .timeout = 120)
{
	race_test("ddracetx", 0);
}

Test(dedup, racing_consumers_in_own_transactions_apply_once, .timeout = 120)
{
	race_test("ddraceown", 1);
}

Test(dedup, bad_input_is_refused_before_any_sql)
{
	h_env e;
	setup(&e, "ddbad");
	txhub_claim c;
	txhub_dedup_result res;
	char err[512], long_key[300];
	memset(long_key, 'k', sizeof long_key);
	struct {
		const char *biz, *key;
		size_t blen, klen;
	} bad[] = {
		{"", "k", 0, 1},          {"b", "", 1, 0},           {"b", long_key, 1, 256},
		{long_key, "k", 65, 1},   {"b", "k\xff", 1, 2},      {"b", "k\x01", 1, 2},
		{"b", "k\0x", 1, 3},      {"b\n", "k", 2, 1},        {"b", "a\xc2\x85", 1, 3},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cr_assert_eq(txhub_dedup_claim(e.db, NULL, bad[i].biz, bad[i].blen, bad[i].key,
		                               bad[i].klen, &res, &c, err, sizeof err),
		             TXHUB_ERR_INVALID, "case %zu accepted", i);
		cr_assert_gt(strlen(err), 5);
	}
	const char *tables[] = {"a;drop table x", "A", "1x", "a.b.c", "", "a-b", ".a", NULL};
	for (int i = 0; tables[i]; i++) {
		txhub_dedup_config cfg = {.table = tables[i]};
		cr_assert_eq(txhub_dedup_claim(e.db, &cfg, "b", 1, "k", 1, &res, &c, err, sizeof err),
		             TXHUB_ERR_INVALID, "table %s", tables[i]);
		cr_assert_eq(txhub_dedup_create_table(e.db, &cfg, err, sizeof err), TXHUB_ERR_INVALID);
	}
	txhub_dedup_config neg = {.lease_ms = -1};
	cr_assert_eq(txhub_dedup_claim(e.db, &neg, "b", 1, "k", 1, &res, &c, err, sizeof err), TXHUB_ERR_INVALID);
	cr_assert_eq(txhub_dedup_claim(NULL, NULL, "b", 1, "k", 1, &res, &c, err, sizeof err), TXHUB_ERR_INVALID);
	cr_assert_eq(txhub_dedup_done(e.db, NULL, err, sizeof err), TXHUB_ERR_INVALID);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub_dedup"), 0);
	/* a schema-qualified table of one's own; a missing one is a plain error */
	h_exec(e.db, "CREATE SCHEMA app");
	txhub_dedup_config own = {.table = "app.seen"};
	cr_assert_eq(txhub_dedup_create_table(e.db, &own, err, sizeof err), TXHUB_OK, "%s", err);
	cr_assert_eq(txhub_dedup_claim(e.db, &own, "b", 1, "k", 1, &res, &c, err, sizeof err), TXHUB_OK);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM app.seen"), 1);
	txhub_dedup_config missing = {.table = "nowhere"};
	cr_assert_eq(txhub_dedup_claim(e.db, &missing, "b", 1, "k", 1, &res, &c, err, sizeof err), TXHUB_ERR_DB);
	cr_assert(strstr(err, "42P01"), "%s", err);
	cr_assert(strstr(txhub_dedup_table_sql(), "CREATE TABLE IF NOT EXISTS txhub_dedup ("));
	h_teardown(&e);
}
