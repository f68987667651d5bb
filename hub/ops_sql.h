/* ops_sql.h: libpq helpers shared by ops.c (reads), ops_write.c (writes)
 * and the tenants' operations (tenant_ops.c, tenant_access.c). Internal to
 * those: the console and the command line use ops.h and tenant_ops.h. Same
 * threading rules as ops.h: one thread per connection. */
#ifndef TXHUB_OPS_SQL_H
#define TXHUB_OPS_SQL_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "ops_rc.h"

/* A timestamp column as ISO 8601 text in UTC, to the millisecond. */
#define TS(c) "to_char(" c " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

/* Put a failed statement's text into err (store_error_text()); returns
 * OPS_DB_ERROR. res may be NULL. */
ops_rc ops_db_fail(PGconn *conn, const PGresult *res, char *err, size_t errsz);

/* Format a reason into err; returns OPS_BAD_ARG. */
ops_rc ops_bad(char *err, size_t errsz, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Run a statement without parameters (BEGIN, COMMIT, ...). */
ops_rc ops_exec(PGconn *conn, const char *sql, char *err, size_t errsz);

/* Roll back if a transaction is open (after a failure; a no-op otherwise). */
void ops_rollback(PGconn *conn);

/* Run sql with text parameters; binary: ask for binary results. Returns
 * the rows (the caller clears them), or NULL with the reason in err. */
PGresult *ops_query(PGconn *conn, const char *sql, int n, const char *const *vals, int binary,
                    char *err, size_t errsz);

/* Run a statement that returns no rows, with text parameters. */
ops_rc ops_command(PGconn *conn, const char *sql, int n, const char *const *vals, char *err,
                   size_t errsz);

/* A text column as an integer; -1 for SQL null. */
int64_t ops_int(const PGresult *r, int row, int col);

#endif
