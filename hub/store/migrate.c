/* migrate.c: see migrate.h. The history lives in txhub.schema_migrations;
 * the advisory lock serialises concurrent runs, and each one re-reads the
 * history after taking the lock, so a migration is applied exactly once.
 *
 * Running hubs (a rolling upgrade, ExecStartPre: docs/database.md,
 * Upgrading) keep writing while this runs, so no step may hold their tables
 * for long: each transaction runs with a short lock_timeout and is tried
 * again, from the start, when its locks are not free in time or it meets a
 * deadlock; index builds on the big tables run CONCURRENTLY, outside any
 * transaction, before it (docs/architecture.md, Migrations). */
#include "migrate.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backoff.h"
#include "clock.h"
#include "log.h"
#include "topics.h"

/* pg_advisory_lock key: "txhub" in ASCII */
#define MIGRATE_LOCK_KEY "499394606690"

/* The lines that open a migration's concurrent part and its transaction. */
#define MARK_CONCURRENT "-- txhub: concurrently\n"
#define MARK_TRANSACTION "-- txhub: transaction\n"
#define CIC_PREFIX "CREATE INDEX CONCURRENTLY IF NOT EXISTS "

int migrate_latest(void)
{
	int v = 0;
	for (const migration *m = migrations; m->name; m++)
		if (m->version > v)
			v = m->version;
	return v;
}

/* ---- a migration's parts ---- */

/* The line mark at the start of a line of sql, or NULL. */
static const char *find_line(const char *sql, const char *mark)
{
	size_t n = strlen(mark);
	for (const char *p = sql; p; p = strchr(p, '\n')) {
		if (*p == '\n')
			p++;
		if (strncmp(p, mark, n) == 0)
			return p;
	}
	return NULL;
}

/* Past blanks and whole-line comments. */
static const char *skip_blank(const char *p, const char *end)
{
	while (p < end) {
		if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
			p++;
		} else if (end - p >= 2 && p[0] == '-' && p[1] == '-') {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			p = nl ? nl + 1 : end;
		} else {
			break;
		}
	}
	return p;
}

void migrate_parts_free(migrate_parts *mp)
{
	for (size_t i = 0; i < mp->n; i++)
		free(mp->index[i].sql);
	free(mp->index);
	memset(mp, 0, sizeof *mp);
}

/* One statement of the concurrent part, [p, end) without its ';'. */
static int add_index(migrate_parts *mp, const char *p, const char *end, char *err,
                     size_t errsz)
{
	size_t plen = strlen(CIC_PREFIX), len = (size_t)(end - p);
	if (len <= plen || strncmp(p, CIC_PREFIX, plen) != 0) {
		snprintf(err, errsz, "its concurrent part may hold only \"" CIC_PREFIX "name ON ...;\"");
		return -1;
	}
	const char *name = p + plen;
	size_t nlen = strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_");
	if (nlen == 0 || nlen >= sizeof mp->index[0].name || (name[nlen] != ' ' && name[nlen] != '\n')) {
		snprintf(err, errsz, "an index name of [a-z0-9_], up to 63 characters, must follow "
		                     "\"" CIC_PREFIX "\"");
		return -1;
	}
	migrate_index *grown = realloc(mp->index, (mp->n + 1) * sizeof *grown);
	char *sql = malloc(len + 1);
	if (grown)
		mp->index = grown;
	if (!grown || !sql) {
		free(sql);
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	memcpy(sql, p, len);
	sql[len] = '\0';
	migrate_index *ix = &mp->index[mp->n++];
	memcpy(ix->name, name, nlen);
	ix->name[nlen] = '\0';
	ix->sql = sql;
	return 0;
}

int migrate_split(const char *sql, migrate_parts *mp, char *err, size_t errsz)
{
	memset(mp, 0, sizeof *mp);
	const char *c = find_line(sql, MARK_CONCURRENT);
	const char *t = find_line(sql, MARK_TRANSACTION);
	if (!c && !t) {
		mp->transaction = sql;
		return 0;
	}
	if (!c || !t || t < c) {
		snprintf(err, errsz, "\"%.*s\" must come before \"%.*s\"",
		         (int)strlen(MARK_CONCURRENT) - 1, MARK_CONCURRENT,
		         (int)strlen(MARK_TRANSACTION) - 1, MARK_TRANSACTION);
		return -1;
	}
	mp->transaction = t + strlen(MARK_TRANSACTION);
	/* statements end with ';' at the end of a line */
	for (const char *p = skip_blank(c + strlen(MARK_CONCURRENT), t); p < t;
	     p = skip_blank(p, t)) {
		const char *semi = p;
		while ((semi = memchr(semi, ';', (size_t)(t - semi))) && semi[1] != '\n')
			semi++;
		if (!semi) {
			snprintf(err, errsz, "a statement of its concurrent part does not end with ';' "
			                     "at the end of a line");
			migrate_parts_free(mp);
			return -1;
		}
		if (add_index(mp, p, semi, err, errsz) != 0) {
			migrate_parts_free(mp);
			return -1;
		}
		p = semi + 1;
	}
	return 0;
}

/* ---- running statements ---- */

typedef enum { STEP_OK, STEP_RETRY, STEP_FAILED } step_rc;

/* Run sql; STEP_RETRY when its locks were not free in time (lock_not_available)
 * or it met a deadlock, which trying again later solves. */
static step_rc step(PGconn *c, const char *sql, int nparams, const char *const *params,
                    PGresult **res, char *err, size_t errsz)
{
	/* without parameters use the simple protocol: a migration holds many statements */
	PGresult *r = nparams ? PQexecParams(c, sql, nparams, NULL, params, NULL, NULL, 0)
	                      : PQexec(c, sql);
	ExecStatusType s = PQresultStatus(r);
	if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK || s == PGRES_EMPTY_QUERY) {
		if (res)
			*res = r;
		else
			PQclear(r);
		return STEP_OK;
	}
	const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	int again = state && (strcmp(state, "55P03") == 0 || strcmp(state, "40P01") == 0);
	snprintf(err, errsz, "%s", PQresultErrorMessage(r));
	log_one_line(err);
	PQclear(r);
	if (res)
		*res = NULL;
	return again ? STEP_RETRY : STEP_FAILED;
}

static int run(PGconn *c, const char *sql, int nparams, const char *const *params,
               char *err, size_t errsz)
{
	return step(c, sql, nparams, params, NULL, err, errsz) == STEP_OK ? 0 : -1;
}

/* Half of the server's deadlock_timeout, at most MIGRATE_LOCK_TIMEOUT_MS: a
 * hub that waits for a lock this run holds, while this run waits for one of
 * the hub's, is then never the one PostgreSQL's deadlock check cancels (it
 * checks after deadlock_timeout); this run gives up first and tries again. */
static int lock_timeout_ms(PGconn *c)
{
	PGresult *r = NULL;
	int ms = MIGRATE_LOCK_TIMEOUT_MS;
	char err[256];
	if (step(c, "SELECT setting::int FROM pg_catalog.pg_settings WHERE name = "
	            "'deadlock_timeout'", 0, NULL, &r, err, sizeof err) == STEP_OK &&
	    PQntuples(r) == 1) {
		int half = atoi(PQgetvalue(r, 0, 0)) / 2;
		if (half < ms)
			ms = half < 10 ? 10 : half;
	}
	PQclear(r);
	return ms;
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* ---- the steps of one migration ---- */

/* Build one index of the concurrent part; an invalid one of that name (a
 * concurrent build that failed or was interrupted leaves it) is dropped and
 * built again. No lock_timeout: these wait for the hubs' transactions without
 * stopping them. */
static step_rc build_index(PGconn *c, const migration *m, const migrate_index *ix, char *err,
                           size_t errsz)
{
	char qualified[80];
	snprintf(qualified, sizeof qualified, "txhub.%s", ix->name);
	const char *p[1] = {qualified};
	PGresult *r = NULL;
	step_rc rc = step(c, "SELECT NOT i.indisvalid FROM pg_catalog.pg_index i "
	                     "WHERE i.indexrelid = to_regclass($1)", 1, p, &r, err, errsz);
	if (rc != STEP_OK)
		return rc;
	int invalid = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
	PQclear(r);
	if (invalid) {
		log_warn("migrate: %s: index %s is invalid (a concurrent build of it failed): "
		         "dropping it and building it again", m->name, qualified);
		char *id = PQescapeIdentifier(c, ix->name, strlen(ix->name));
		char drop[160];
		snprintf(drop, sizeof drop, "DROP INDEX CONCURRENTLY IF EXISTS txhub.%s", id ? id : "");
		PQfreemem(id);
		if (!id) {
			snprintf(err, errsz, "out of memory");
			return STEP_FAILED;
		}
		if ((rc = step(c, drop, 0, NULL, NULL, err, errsz)) != STEP_OK)
			return rc;
	}
	return step(c, ix->sql, 0, NULL, NULL, err, errsz);
}

/* The transaction: its locks within timeout_ms, the migration's SQL and its
 * row in txhub.schema_migrations; rolled back on any failure. */
static step_rc transaction(PGconn *c, const migration *m, const char *sql, int timeout_ms,
                           char *err, size_t errsz)
{
	char ver[16], set[64];
	snprintf(ver, sizeof ver, "%d", m->version);
	snprintf(set, sizeof set, "SET LOCAL lock_timeout = %d", timeout_ms);
	const char *p[2] = {ver, m->name};
	step_rc rc = step(c, "BEGIN", 0, NULL, NULL, err, errsz);
	if (rc != STEP_OK)
		return rc;
	if ((rc = step(c, set, 0, NULL, NULL, err, errsz)) == STEP_OK &&
	    (rc = step(c, sql, 0, NULL, NULL, err, errsz)) == STEP_OK &&
	    (rc = step(c, "INSERT INTO txhub.schema_migrations (version, name) VALUES ($1, $2)",
	               2, p, NULL, err, errsz)) == STEP_OK &&
	    (rc = step(c, "COMMIT", 0, NULL, NULL, err, errsz)) == STEP_OK)
		return STEP_OK;
	char sub[256];
	run(c, "ROLLBACK", 0, NULL, sub, sizeof sub);
	return rc;
}

/* Apply m: its concurrent part, then its transaction, each step tried again
 * with backoff while it returns STEP_RETRY, up to MIGRATE_ATTEMPTS times. */
static int apply_one(PGconn *c, const migration *m, int timeout_ms, char *err, size_t errsz)
{
	migrate_parts mp;
	char sub[1024];
	if (migrate_split(m->sql, &mp, sub, sizeof sub) != 0) {
		snprintf(err, errsz, "%s: %s", m->name, sub);
		return -1;
	}
	int64_t start = clock_ms();
	int attempt = 1;
	step_rc rc = STEP_OK;
	for (size_t i = 0; i <= mp.n; i++) {
		for (;;) {
			rc = i < mp.n ? build_index(c, m, &mp.index[i], sub, sizeof sub)
			              : transaction(c, m, mp.transaction, timeout_ms, sub, sizeof sub);
			if (rc != STEP_RETRY || attempt >= MIGRATE_ATTEMPTS)
				break;
			int64_t wait = backoff_delay(attempt, 100, 2000, backoff_random());
			log_info("migrate: %s: attempt %d: %s; trying again in %lld ms", m->name, attempt,
			         sub, (long long)wait);
			sleep_ms(wait);
			attempt++;
		}
		if (rc != STEP_OK)
			break;
	}
	migrate_parts_free(&mp);
	if (rc == STEP_RETRY)
		snprintf(err, errsz, "%s: gave up after %d attempts in %.1f s: its locks were not free "
		         "within %d ms (lock_timeout) each time, or it met a deadlock, last: %s; the "
		         "hubs' transactions on those tables held them. The migration was not applied "
		         "(any index it built stays and is kept); run txhub migrate again",
		         m->name, attempt, (double)(clock_ms() - start) / 1000.0, timeout_ms, sub);
	else if (rc == STEP_FAILED)
		snprintf(err, errsz, "%s: %s", m->name, sub);
	return rc == STEP_OK ? 0 : -1;
}

/* The advisory lock, however long another replica's run holds it. Tried,
 * not waited for: a session waiting in pg_advisory_lock() keeps a snapshot
 * open all along, which that run's CREATE INDEX CONCURRENTLY waits for
 * (a deadlock); nor may the session's lock_timeout (hub/store/store.c) cut
 * the wait short. */
static int take_lock(PGconn *c, char *err, size_t errsz)
{
	for (int said = 0;; said = 1) {
		PGresult *r = NULL;
		if (step(c, "SELECT pg_try_advisory_lock(" MIGRATE_LOCK_KEY ")", 0, NULL, &r, err,
		         errsz) != STEP_OK)
			return -1;
		int got = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
		PQclear(r);
		if (got)
			return 0;
		if (!said)
			log_info("migrate: another txhub migrate is running: waiting for it to finish");
		sleep_ms(200);
	}
}

/* The one topic control_topic names, or "" (a list or a pattern). */
static void single_topic(const char *control_topic, char *out, size_t outsz)
{
	topics_spec s;
	char err[256];
	out[0] = '\0';
	if (topics_parse(control_topic, &s, err, sizeof err) == 0 && topics_single(&s))
		snprintf(out, outsz, "%s", s.names[0]);
	topics_free(&s);
}

int migrate_apply(store *st, const char *control_topic, int *applied, char *err, size_t errsz)
{
	char topic[300];
	single_topic(control_topic, topic, sizeof topic);
	const char *tp[1] = {topic};
	PGconn *c = (PGconn *)store_conn(st);
	*applied = 0;
	if (take_lock(c, err, errsz) != 0)
		return -1;
	int rc = -1;
	/* "already exists, skipping" notices are noise on every later run */
	if (run(c, "SET client_min_messages = warning", 0, NULL, err, errsz) != 0 ||
	    run(c, "SELECT set_config('txhub.migrate_control_topic', $1, false)", 1, tp, err,
	        errsz) != 0 ||
	    run(c, "CREATE SCHEMA IF NOT EXISTS txhub", 0, NULL, err, errsz) != 0 ||
	    run(c, "CREATE TABLE IF NOT EXISTS txhub.schema_migrations ("
	           "version integer PRIMARY KEY, name text NOT NULL, "
	           "applied_at timestamptz NOT NULL DEFAULT now())", 0, NULL, err, errsz) != 0)
		goto unlock;
	int current = 0;
	if (store_schema_version(st, &current, err, errsz) != STORE_OK)
		goto unlock;
	if (current > migrate_latest()) {
		snprintf(err, errsz, "the database is at schema version %d, newer than this "
		                     "txhub (%d); upgrade txhub", current, migrate_latest());
		goto unlock;
	}
	int timeout_ms = lock_timeout_ms(c);
	for (const migration *m = migrations; m->name; m++) {
		if (m->version <= current)
			continue;
		if (apply_one(c, m, timeout_ms, err, errsz) != 0)
			goto unlock;
		log_info("migrate: applied %s", m->name);
		(*applied)++;
	}
	rc = 0;
unlock:;
	char sub[256];
	run(c, "SELECT pg_advisory_unlock(" MIGRATE_LOCK_KEY ")", 0, NULL, sub, sizeof sub);
	return rc;
}
