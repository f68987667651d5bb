/* migrate.c: see migrate.h. The history lives in txhub.schema_migrations;
 * the advisory lock serialises concurrent runs, and each one re-reads the
 * history after taking the lock, so a migration is applied exactly once. */
#include "migrate.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "topics.h"

/* pg_advisory_lock key: "txhub" in ASCII */
#define MIGRATE_LOCK_KEY "499394606690"

int migrate_latest(void)
{
	int v = 0;
	for (const migration *m = migrations; m->name; m++)
		if (m->version > v)
			v = m->version;
	return v;
}

static int run(PGconn *c, const char *sql, int nparams, const char *const *params,
               char *err, size_t errsz)
{
	/* without parameters use the simple protocol: a migration holds many statements */
	PGresult *r = nparams ? PQexecParams(c, sql, nparams, NULL, params, NULL, NULL, 0)
	                      : PQexec(c, sql);
	ExecStatusType s = PQresultStatus(r);
	if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
		snprintf(err, errsz, "%s", PQresultErrorMessage(r));
		log_one_line(err);
		PQclear(r);
		return -1;
	}
	PQclear(r);
	return 0;
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
	if (run(c, "SELECT pg_advisory_lock(" MIGRATE_LOCK_KEY ")", 0, NULL, err, errsz) != 0)
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
	for (const migration *m = migrations; m->name; m++) {
		if (m->version <= current)
			continue;
		char ver[16];
		snprintf(ver, sizeof ver, "%d", m->version);
		const char *p[2] = {ver, m->name};
		char sub[1024];
		if (run(c, "BEGIN", 0, NULL, err, errsz) != 0)
			goto unlock;
		if (run(c, m->sql, 0, NULL, sub, sizeof sub) != 0 ||
		    run(c, "INSERT INTO txhub.schema_migrations (version, name) VALUES ($1, $2)",
		        2, p, sub, sizeof sub) != 0) {
			snprintf(err, errsz, "%s: %s", m->name, sub);
			run(c, "ROLLBACK", 0, NULL, sub, sizeof sub);
			goto unlock;
		}
		if (run(c, "COMMIT", 0, NULL, err, errsz) != 0)
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
