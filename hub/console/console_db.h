/* console_db.h: the web console's PostgreSQL connections: a small pool,
 * so that a page waits on PostgreSQL on its own connection thread without
 * holding up the others, and so that the console takes at most
 * CONSOLE_DB_CONNS connections from the server however many browsers are
 * open.
 *
 * Each connection has statement_timeout = CONSOLE_DB_STATEMENT_MS (a
 * page never waits on one statement longer), lock_timeout 5 s and an idle
 * in-transaction time-out, and is checked with a round trip before each
 * use: after PostgreSQL restarted, the first request reconnects instead
 * of failing. Nothing is kept across requests but the connections.
 *
 * Threads: any thread may take and give; a taken connection belongs to
 * that thread until it gives it back. */
#ifndef TXHUB_CONSOLE_DB_H
#define TXHUB_CONSOLE_DB_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "config.h"
#include "ops.h"

struct pg_conn;

#define CONSOLE_DB_CONNS 4
#define CONSOLE_DB_STATEMENT_MS 10000
/* longest wait for a free connection before a request is answered 503 */
#define CONSOLE_DB_WAIT_MS 10000

typedef struct console_db console_db;

/* Connections are opened on first use, with cfg->pg (copied). NULL when
 * out of memory. */
console_db *console_db_new(const txhub_config *cfg);

/* Close every connection and free. No connection may be out. */
void console_db_free(console_db *db);

/* A connection that answered a round trip just now (reconnected when it
 * had to be), or NULL with the reason in err (PostgreSQL unreachable, or
 * every connection busy for CONSOLE_DB_WAIT_MS). Give it back with
 * console_db_give(). */
struct pg_conn *console_db_take(console_db *db, char *err, size_t errsz);

/* Return conn (NULL is ignored). A connection left in a transaction or
 * broken is closed, to be opened again when next needed. */
void console_db_give(console_db *db, struct pg_conn *conn);

/* The schema version of the database (0: txhub never migrated there).
 * Returns 0, or -1 with the reason in err. */
int console_db_schema_version(struct pg_conn *conn, int *version, char *err, size_t errsz);

/* ---- what a session may see ----
 *
 * The console's own reads (ops.h has the rest: its list, status, rejected
 * and conflicts reads take a tenant too). tenant: the session's scope, as
 * console_scope() gives it; NULL: every tenant. It always travels as a
 * parameter of the statement. */

/* Whether the message (biz_id, message_key) exists and is tenant's: 1, 0
 * (no such message, or another tenant's, or no tenant's: the same answer),
 * or -1 with the reason in err. A message's tenant is written when it is
 * stored and never changed (resolve and redrive cannot write it), so the
 * answer still holds for the action that follows it. */
int console_db_in_scope(struct pg_conn *conn, const char *tenant, const char *biz_id,
                        const char *message_key, char *err, size_t errsz);

/* Most rows each count of console_db_tenants() reads: a count that
 * reaches it is shown as "more than" (the reads stay bounded however busy
 * a tenant is). */
#define CONSOLE_RATE_CAP 100000

/* The tenants (tenant's own row only, when not NULL), by name, as a JSON
 * array of {"name", "control_topics", "biz_ids", "forward_topics",
 * "checkback_allow", "max_envelope_bytes" (null: none), "enabled",
 * "updated_at", "stored_1m", "stored_1h" (messages it stored, by
 * created_at), "rejected_1m", "rejected_1h" (by created_at), "sent_1m",
 * "sent_1h" (forwards delivered, by updated_at), "check_failed",
 * "send_failed"}: each count capped at CONSOLE_RATE_CAP + 1, each read
 * through an index of migrations/0011_tenant_indexes.sql (or
 * messages_stuck for the parked rows). *out: the caller deletes it.
 * Returns 0, or -1 with the reason in err. */
int console_db_tenants(struct pg_conn *conn, const char *tenant, cJSON **out, char *err,
                       size_t errsz);

/* Keep in st only the partitions of tenant's control topics (its names,
 * or its pattern, as the hubs match them: tenant_rules.h); tenant is one
 * element of console_db_tenants()'s array. A lag note, which may name
 * other topics, is replaced by one that names none. Returns 0, or -1 with
 * the reason in err (a stored rule that does not compile). */
int console_scope_partitions(const cJSON *tenant, ops_status *st, char *err, size_t errsz);

#endif
