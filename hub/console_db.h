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

#include <stddef.h>

#include "config.h"

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

#endif
