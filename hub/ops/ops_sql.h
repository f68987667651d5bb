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
#include "sql.h"

/* A timestamp column as ISO 8601 text in UTC, to the millisecond. */
#define TS(c) "to_char(" c " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

/* The libpq helpers of hub/lib/sql.h with the operations' results: a
 * failure is OPS_DB_ERROR with its text in err. */

/* Put a failed statement's text into err (sql_error_text()); returns
 * OPS_DB_ERROR. res may be NULL. */
static inline ops_rc ops_db_fail(PGconn *conn, const PGresult *res, char *err, size_t errsz)
{
	sql_error_text(conn, res, err, errsz);
	return OPS_DB_ERROR;
}

/* Format a reason into err; returns OPS_BAD_ARG. */
ops_rc ops_bad(char *err, size_t errsz, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Run a statement without parameters (BEGIN, COMMIT, ...). */
static inline ops_rc ops_exec(PGconn *conn, const char *sql, char *err, size_t errsz)
{
	return sql_exec(conn, sql, err, errsz) == 0 ? OPS_OK : OPS_DB_ERROR;
}

/* Roll back if a transaction is open (after a failure; a no-op otherwise). */
static inline void ops_rollback(PGconn *conn) { sql_rollback(conn); }

/* Run sql with text parameters; binary: ask for binary results. Returns
 * the rows (the caller clears them), or NULL with the reason in err. */
static inline PGresult *ops_query(PGconn *conn, const char *sql, int n, const char *const *vals,
                                  int binary, char *err, size_t errsz)
{
	return sql_query(conn, sql, n, vals, binary, err, errsz);
}

/* Run a statement that returns no rows, with text parameters. */
static inline ops_rc ops_command(PGconn *conn, const char *sql, int n, const char *const *vals,
                                 char *err, size_t errsz)
{
	return sql_command(conn, sql, n, vals, err, errsz) == 0 ? OPS_OK : OPS_DB_ERROR;
}

/* A text column as an integer; -1 for SQL null. */
static inline int64_t ops_int(const PGresult *r, int row, int col) { return sql_int(r, row, col); }

#endif
