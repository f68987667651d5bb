/* test_migrate.c: `txhub migrate` beside running hubs (docs/database.md,
 * Upgrading). A session here plays the hub's part with the hub's own lock
 * order (its partitions' rows, then txhub.messages): migrate neither
 * deadlocks with it nor makes its writes wait behind an index build; when
 * the locks stay taken it gives up with a clear message, having applied
 * nothing of that migration, and the next run goes on; an invalid index left
 * by a concurrent build that failed is built again. The upgrade under load,
 * with a 0.4.0 hub, is tests/upgrade/run.sh. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "migrate.h"

/* A database of e's at schema version `version`, the migrations applied by
 * hand as the release that stopped there did; e then uses it (e->db too). */
static void at_version(h_env *e, int version)
{
	char name[96], conninfo[700];
	snprintf(name, sizeof name, "%s_v%d", e->name, version);
	PGconn *c = h_fresh_database(name, conninfo, sizeof conninfo);
	char q[256];
	h_exec(c, "CREATE SCHEMA txhub");
	h_exec(c, "CREATE TABLE txhub.schema_migrations (version integer PRIMARY KEY, name text "
	          "NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
	for (const migration *m = migrations; m->name && m->version <= version; m++) {
		migrate_parts mp;
		char err[256];
		cr_assert_eq(migrate_split(m->sql, &mp, err, sizeof err), 0, "%s", err);
		cr_assert_eq(mp.n, 0, "%s has a concurrent part: apply it with txhub migrate", m->name);
		h_exec(c, m->sql);
		snprintf(q, sizeof q, "INSERT INTO txhub.schema_migrations (version, name) VALUES (%d, "
		         "'%s')", m->version, m->name);
		h_exec(c, q);
		migrate_parts_free(&mp);
	}
	snprintf(q, sizeof q, "INSERT INTO txhub.partitions (topic, partition, epoch, owner, "
	         "next_offset) VALUES ('%s', 0, 1, 'old-hub', 0)", e->topic);
	h_exec(c, q);
	h_exec(c, "INSERT INTO txhub.messages (biz_id, message_key, status, send_status, payload, "
	          "forward_topic, src_partition, src_offset) SELECT 'old', 'k' || i, 'committed', "
	          "'sent', 'p', 'fw', 0, i FROM generate_series(1, 1000) i");
	cr_assert_lt(strlen(conninfo), sizeof e->conninfo);
	memcpy(e->conninfo, conninfo, strlen(conninfo) + 1);
	PQfinish(e->db);
	e->db = c;
}

static PGconn *session(const h_env *e)
{
	PGconn *c = PQconnectdb(e->conninfo);
	cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
	return c;
}

/* sql on c; 1 when it succeeded, else 0 with PostgreSQL's words in err */
static int try_exec(PGconn *c, const char *sql, char *err, size_t errsz)
{
	PGresult *r = PQexec(c, sql);
	int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
	snprintf(err, errsz, "%s", ok ? "" : PQresultErrorMessage(r));
	PQclear(r);
	return ok;
}

/* `txhub migrate` on e's database, in the background */
static pid_t migrate_start(h_env *e)
{
	const char *args[] = {"migrate", NULL};
	return h_command_start(e, args, NULL);
}

/* Wait until a session of the database other than c's waits for a lock:
 * migrate, behind the lock c holds. */
static void wait_blocked(h_env *e, PGconn *c)
{
	char q[256];
	snprintf(q, sizeof q, "SELECT count(*) > 0 FROM pg_stat_activity WHERE datname = "
	         "current_database() AND wait_event_type = 'Lock' AND pid <> %d", PQbackendPID(c));
	cr_assert(h_wait(e, q, "t", 30000), "migrate never waited for the lock");
}

static void assert_migrated(h_env *e)
{
	cr_assert_eq(h_count(e, "SELECT max(version) FROM txhub.schema_migrations"),
	             migrate_latest());
	cr_assert_eq(h_count(e, "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = "
	                        "i.indexrelid WHERE c.relnamespace = 'txhub'::regnamespace "
	                        "AND NOT i.indisvalid"), 0, "an invalid index was left");
}

/* With holder's lock taken and migrate started and waiting behind it,
 * writer (holder itself, or another session) writes as a hub does: it must
 * not wait for migrate (at most 5 s, below the 10 s lock_timeout of
 * migrate's session, after which f063dde's migrate failed and let it
 * through); then holder commits and migrate must finish. */
static void write_beside_migrate(h_env *e, PGconn *holder, PGconn *writer, const char *sql)
{
	char err[1024], log[256];
	pid_t mig = migrate_start(e);
	wait_blocked(e, holder);
	h_exec(writer, "SET statement_timeout = '5s'");
	int wrote = try_exec(writer, sql, err, sizeof err);
	h_exec(holder, writer == holder && !wrote ? "ROLLBACK" : "COMMIT");
	cr_assert(wrote, "the hub's write failed or waited behind migrate: %s", err);
	cr_assert_eq(h_wait_exit(mig, 120000), 0, "migrate failed (see %s)",
	             h_hub_log(log, sizeof log, e));
	assert_migrated(e);
}

/* The deadlock of issue 30 (item 7): 0010 took txhub.messages by its ALTER and
 * then waited for txhub.partitions (CREATE POLICY), held by a hub's batch that
 * then wrote to txhub.messages. */
Test(migrate, takes_its_locks_in_the_hubs_order, .timeout = 180)
{
	h_env e;
	h_setup(&e, "miglk");
	at_version(&e, 9);
	PGconn *hub = session(&e);
	char q[512];
	h_exec(hub, "BEGIN");
	snprintf(q, sizeof q, "SELECT epoch FROM txhub.partitions WHERE topic = '%s' "
	         "FOR NO KEY UPDATE", e.topic);
	h_exec(hub, q);
	/* the batch's write then: waits for nothing migrate holds */
	write_beside_migrate(&e, hub, hub, "UPDATE txhub.messages SET updated_at = now() "
	                                   "WHERE biz_id = 'old' AND message_key = 'k1'");
	PQfinish(hub);
	h_teardown(&e);
}

/* 0011 built its indexes in the transaction: SHARE on txhub.messages, queued
 * behind a hub's open write, and every later write of the hubs queued behind
 * it. Concurrently, only the build waits. */
Test(migrate, index_builds_let_the_hubs_write, .timeout = 180)
{
	h_env e;
	h_setup(&e, "migix");
	at_version(&e, 10);
	PGconn *a = session(&e), *b = session(&e);
	h_exec(a, "BEGIN");
	h_exec(a, "UPDATE txhub.messages SET updated_at = now() WHERE message_key = 'k1'");
	write_beside_migrate(&e, a, b, "UPDATE txhub.messages SET updated_at = now() "
	                               "WHERE message_key = 'k2'");
	PQfinish(a);
	PQfinish(b);
	h_teardown(&e);
}

/* A concurrent build that failed (or was interrupted) leaves an invalid index
 * of that name, which IF NOT EXISTS would keep for good. */
Test(migrate, an_invalid_index_is_built_again, .timeout = 180)
{
	h_env e;
	h_setup(&e, "miginv");
	at_version(&e, 10);
	char err[1024];
	cr_assert(!try_exec(e.db, "CREATE UNIQUE INDEX CONCURRENTLY messages_tenant_created "
	                        "ON txhub.messages (status)", err, sizeof err),
	          "the duplicate statuses did not fail the build");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM pg_index WHERE NOT indisvalid AND "
	                         "indexrelid = 'txhub.messages_tenant_created'::regclass"), 1);
	const char *args[] = {"migrate", NULL};
	cr_assert_eq(h_txhub(&e, args, err, sizeof err), 0, "%s", err);
	assert_migrated(&e);
	cr_assert(strstr(err, "messages_tenant_created is invalid") != NULL, "%s", err);
	char def[512];
	h_query(&e, "SELECT pg_get_indexdef('txhub.messages_tenant_created'::regclass)", def,
	        sizeof def);
	cr_assert(strstr(def, "(tenant, created_at) WHERE (tenant IS NOT NULL)") != NULL, "%s", def);
	h_teardown(&e);
}

/* Locks that stay taken: migrate gives up after its attempts, saying so,
 * with nothing of the migration applied; run again once they are free, it
 * goes on from there. */
Test(migrate, gives_up_clearly_and_runs_again, .timeout = 300)
{
	h_env e;
	h_setup(&e, "miggu");
	at_version(&e, 9);
	PGconn *hold = session(&e);
	char log[256], first[1024];
	h_exec(hold, "BEGIN");
	h_exec(hold, "LOCK TABLE txhub.partitions IN ACCESS SHARE MODE");
	pid_t mig = migrate_start(&e);
	cr_assert_eq(h_wait_exit(mig, 200000), 1, "migrate did not give up");
	h_hub_log(log, sizeof log, &e);
	cr_assert_eq(h_log_first(log, "gave up after", first, sizeof first), 1, "see %s", log);
	cr_assert(strstr(first, "0010_tenants.sql") && strstr(first, "lock_timeout") &&
	          strstr(first, "run txhub migrate again"), "%s", first);
	cr_assert_eq(h_count(&e, "SELECT max(version) FROM txhub.schema_migrations"), 9);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM pg_attribute WHERE attrelid = "
	                         "'txhub.messages'::regclass AND attname = 'tenant'"), 0);
	h_exec(hold, "COMMIT");
	const char *args[] = {"migrate", NULL};
	char err[4096];
	cr_assert_eq(h_txhub(&e, args, err, sizeof err), 0, "%s", err);
	assert_migrated(&e);
	PQfinish(hold);
	h_teardown(&e);
}
