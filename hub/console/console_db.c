/* console_db.c: see console_db.h. */
#include "console_db.h"

#include <errno.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "rows_sql.h"
#include "tenant_rules.h"

struct console_db {
	pthread_mutex_t mu;
	pthread_cond_t freed; /* a connection was given back */
	char *conninfo;
	PGconn *conns[CONSOLE_DB_CONNS]; /* NULL: not open */
	int busy[CONSOLE_DB_CONNS];
};

console_db *console_db_new(const txhub_config *cfg)
{
	console_db *db = calloc(1, sizeof *db);
	if (!db)
		return NULL;
	if (!(db->conninfo = strdup(cfg->pg))) {
		free(db);
		return NULL;
	}
	clock_cond_init(&db->freed);
	pthread_mutex_init(&db->mu, NULL);
	return db;
}

void console_db_free(console_db *db)
{
	if (!db)
		return;
	for (int i = 0; i < CONSOLE_DB_CONNS; i++)
		if (db->conns[i])
			PQfinish(db->conns[i]);
	pthread_cond_destroy(&db->freed);
	pthread_mutex_destroy(&db->mu);
	free(db->conninfo);
	free(db);
}

static void quiet_notice(void *arg, const char *msg)
{
	(void)arg;
	(void)msg; /* the console's statements raise none worth a log line */
}

/* A new connection with the console's session settings, or NULL. */
static PGconn *open_conn(const char *conninfo, char *err, size_t errsz)
{
	/* connect_timeout first: a value in the configured conninfo (the
	 * expanded dbname, later in the list) overrides it */
	const char *keys[] = {"connect_timeout", "dbname", "fallback_application_name", NULL};
	const char *vals[] = {"5", conninfo, "txhub-console", NULL};
	PGconn *c = PQconnectdbParams(keys, vals, 1);
	if (!c || PQstatus(c) != CONNECTION_OK) {
		snprintf(err, errsz, "cannot connect to PostgreSQL: %s",
		         c ? PQerrorMessage(c) : "out of memory");
		log_one_line(err);
		PQfinish(c);
		return NULL;
	}
	PQsetNoticeProcessor(c, quiet_notice, NULL);
	char sql[200];
	snprintf(sql, sizeof sql, "SET statement_timeout = %d; SET lock_timeout = '5s'; "
	         "SET idle_in_transaction_session_timeout = '5s'", CONSOLE_DB_STATEMENT_MS);
	PGresult *r = PQexec(c, sql);
	int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	if (!ok) {
		snprintf(err, errsz, "PostgreSQL: setting the console's time-outs: %s",
		         PQerrorMessage(c));
		log_one_line(err);
		PQfinish(c);
		return NULL;
	}
	return c;
}

/* One round trip: a connection PostgreSQL dropped (a restart) fails it. */
static int alive(PGconn *c)
{
	if (PQstatus(c) != CONNECTION_OK)
		return 0;
	PGresult *r = PQexec(c, "SELECT 1");
	int ok = PQresultStatus(r) == PGRES_TUPLES_OK;
	PQclear(r);
	return ok;
}

/* A free slot, marked busy; -1 after CONSOLE_DB_WAIT_MS. */
static int claim_slot(console_db *db)
{
	struct timespec until = clock_mono_deadline(CONSOLE_DB_WAIT_MS);
	pthread_mutex_lock(&db->mu);
	int slot = -1;
	for (;;) {
		for (int i = 0; i < CONSOLE_DB_CONNS && slot < 0; i++)
			if (!db->busy[i])
				slot = i;
		if (slot >= 0 || pthread_cond_timedwait(&db->freed, &db->mu, &until) == ETIMEDOUT)
			break;
	}
	if (slot >= 0)
		db->busy[slot] = 1;
	pthread_mutex_unlock(&db->mu);
	return slot;
}

static void release_slot(console_db *db, int slot)
{
	pthread_mutex_lock(&db->mu);
	db->busy[slot] = 0;
	pthread_cond_signal(&db->freed);
	pthread_mutex_unlock(&db->mu);
}

PGconn *console_db_take(console_db *db, char *err, size_t errsz)
{
	int slot = claim_slot(db);
	if (slot < 0) {
		snprintf(err, errsz, "all %d PostgreSQL connections of the console stayed busy for "
		         "%d s", CONSOLE_DB_CONNS, CONSOLE_DB_WAIT_MS / 1000);
		return NULL;
	}
	/* the slot is ours alone now: its connection is used without the lock */
	pthread_mutex_lock(&db->mu);
	PGconn *c = db->conns[slot];
	pthread_mutex_unlock(&db->mu);
	if (c && !alive(c)) {
		log_info("console: a PostgreSQL connection was lost; reconnecting");
		PQfinish(c);
		c = NULL;
	}
	if (!c)
		c = open_conn(db->conninfo, err, errsz);
	pthread_mutex_lock(&db->mu);
	db->conns[slot] = c;
	pthread_mutex_unlock(&db->mu);
	if (!c)
		release_slot(db, slot);
	return c;
}

void console_db_give(console_db *db, PGconn *conn)
{
	if (!conn)
		return;
	int broken = PQstatus(conn) != CONNECTION_OK || PQtransactionStatus(conn) != PQTRANS_IDLE;
	if (broken)
		PQfinish(conn);
	pthread_mutex_lock(&db->mu);
	for (int slot = 0; slot < CONSOLE_DB_CONNS; slot++) {
		if (db->conns[slot] != conn)
			continue;
		if (broken)
			db->conns[slot] = NULL;
		db->busy[slot] = 0;
		pthread_cond_signal(&db->freed);
	}
	pthread_mutex_unlock(&db->mu);
}

int console_db_schema_version(PGconn *conn, int *version, char *err, size_t errsz)
{
	*version = 0;
	/* two statements: a query naming a missing table fails as a whole */
	PGresult *r = PQexec(conn, "SELECT to_regclass('txhub.schema_migrations') IS NOT NULL");
	int ok = PQresultStatus(r) == PGRES_TUPLES_OK;
	int exists = ok && PQgetvalue(r, 0, 0)[0] == 't';
	PQclear(r);
	if (exists) {
		r = PQexec(conn, "SELECT coalesce(max(version), 0) FROM txhub.schema_migrations");
		ok = PQresultStatus(r) == PGRES_TUPLES_OK;
		if (ok)
			*version = atoi(PQgetvalue(r, 0, 0));
		PQclear(r);
	}
	if (!ok) {
		snprintf(err, errsz, "PostgreSQL: %s", PQerrorMessage(conn));
		log_one_line(err);
	}
	return ok ? 0 : -1;
}

/* ---- what a session may see ---- */

int console_db_in_scope(PGconn *conn, const char *tenant, const char *biz_id,
                        const char *message_key, char *err, size_t errsz)
{
	const char *p[3] = {biz_id, message_key, tenant};
	PGresult *r = PQexecParams(conn, "SELECT 1 FROM txhub.messages WHERE biz_id = $1 AND "
	                           "message_key = $2 AND tenant = $3", 3, NULL, p, NULL, NULL, 0);
	int ok = PQresultStatus(r) == PGRES_TUPLES_OK, in = ok && PQntuples(r) == 1;
	if (!ok)
		snprintf(err, errsz, "PostgreSQL: %s", PQerrorMessage(conn));
	PQclear(r);
	return ok ? in : -1;
}

/* At most $2 rows of txhub.messages m of t matching cond, counted. */
#define CAPPED(table, cond)                                                                  \
	"(SELECT count(*) FROM (SELECT 1 FROM txhub." table " x WHERE x.tenant = t.name AND "   \
	cond " LIMIT $2::int) c)"
#define SINCE(col, span) "x." col " > now() - interval '" span "'"
/* sent (rows_sql.h), on messages_tenant_committed (tenant, updated_at) */
#define SENT "x.status = 'committed' AND (x.send_status = 'sent' OR " SQL_MARKED("x") ")"

static const char *SQL_TENANTS =
	"SELECT coalesce(jsonb_agg(jsonb_build_object("
	"'name', t.name, 'control_topics', t.control_topics, 'biz_ids', t.biz_ids, "
	"'forward_topics', t.forward_topics, 'checkback_allow', t.checkback_allow, "
	"'max_envelope_bytes', t.max_envelope_bytes, 'enabled', t.enabled, "
	"'updated_at', to_char(t.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), "
	"'stored_1m', " CAPPED("messages", SINCE("created_at", "1 minute")) ", "
	"'stored_1h', " CAPPED("messages", SINCE("created_at", "1 hour")) ", "
	"'rejected_1m', " CAPPED("rejected", SINCE("created_at", "1 minute")) ", "
	"'rejected_1h', " CAPPED("rejected", SINCE("created_at", "1 hour")) ", "
	"'sent_1m', " CAPPED("message_rows", SENT " AND " SINCE("updated_at", "1 minute"))
	", 'sent_1h', " CAPPED("message_rows", SENT " AND " SINCE("updated_at", "1 hour"))
	", 'check_failed', " CAPPED("message_rows", "x.status = 'check_failed'") ", "
	"'send_failed', " CAPPED("message_rows", "x.send_status = 'failed'") ") ORDER BY t.name), "
	"'[]')::text FROM txhub.tenants t WHERE ($1::text IS NULL OR t.name = $1)";

int console_db_tenants(PGconn *conn, const char *tenant, cJSON **out, char *err, size_t errsz)
{
	char cap[32];
	snprintf(cap, sizeof cap, "%d", CONSOLE_RATE_CAP + 1);
	const char *p[2] = {tenant, cap};
	*out = NULL;
	PGresult *r = PQexecParams(conn, SQL_TENANTS, 2, NULL, p, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		snprintf(err, errsz, "PostgreSQL: %s", PQerrorMessage(conn));
		log_one_line(err);
		PQclear(r);
		return -1;
	}
	*out = cJSON_Parse(PQgetvalue(r, 0, 0));
	PQclear(r);
	if (!*out)
		snprintf(err, errsz, "out of memory");
	return *out ? 0 : -1;
}

/* The strings of a JSON array of text, borrowed from it, into a new array
 * (*n of them). NULL when out of memory or not an array of text. */
static const char **json_strings(const cJSON *a, size_t *n)
{
	*n = 0;
	int len = cJSON_GetArraySize(a);
	const char **v = calloc(len > 0 ? (size_t)len : 1, sizeof *v);
	const cJSON *e;
	cJSON_ArrayForEach(e, a) {
		if (!v || !cJSON_IsString(e)) {
			free(v);
			return NULL;
		}
		v[(*n)++] = e->valuestring;
	}
	return v;
}

int console_scope_partitions(const cJSON *tenant, ops_status *st, char *err, size_t errsz)
{
	tenant_def d;
	tenant_rule rule;
	tenant_field bad;
	memset(&d, 0, sizeof d);
	memset(&rule, 0, sizeof rule);
	d.name = cJSON_GetStringValue(cJSON_GetObjectItem(tenant, "name"));
	const char **topics = json_strings(cJSON_GetObjectItem(tenant, "control_topics"),
	                                   &d.ncontrol);
	const char **biz = json_strings(cJSON_GetObjectItem(tenant, "biz_ids"), &d.nbiz);
	const char **fwd = json_strings(cJSON_GetObjectItem(tenant, "forward_topics"), &d.nforward);
	d.control_topics = topics;
	d.biz_ids = biz;
	d.forward_topics = fwd;
	int rc = -1;
	if (!topics || !biz || !fwd || !d.name)
		snprintf(err, errsz, "the tenant's rules cannot be read");
	else if (tenant_rule_compile(&d, &rule, &bad, err, errsz) == 0)
		rc = 0;
	size_t kept = 0;
	for (size_t i = 0; rc == 0 && i < st->npartitions; i++)
		if (tenant_owns_topic(&rule, st->partitions[i].topic))
			st->partitions[kept++] = st->partitions[i];
	if (rc != 0)
		kept = 0; /* never fall open: no partition rather than every one */
	st->npartitions = kept;
	if (st->lag_note[0])
		snprintf(st->lag_note, sizeof st->lag_note, "the brokers did not give the end offsets "
		         "of every partition in time");
	tenant_rule_clear(&rule);
	free(topics);
	free(biz);
	free(fwd);
	return rc;
}
