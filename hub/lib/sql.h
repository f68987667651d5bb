/* sql.h: the libpq helpers every part's statements go through: a failed
 * statement's text as txhub keeps it, a statement without parameters, one
 * with text parameters that returns rows or none, the roll-back after a
 * failure, an integer column. SQL always travels with parameters here;
 * the callers map a failure to their own result codes (ops_sql.h's
 * OPS_DB_ERROR, for one). One thread per connection, as libpq has it. */
#ifndef TXHUB_SQL_H
#define TXHUB_SQL_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

/* The error of a failed statement (res, or NULL for one that got no result
 * or the connection) as txhub keeps it: "SQLSTATE: primary message
 * (constraint name)", or "connection lost: ..." on one line. PostgreSQL's
 * DETAIL is left out on purpose: for a constraint it repeats the row,
 * payload bytes included. */
void sql_error_text(PGconn *conn, const PGresult *res, char *err, size_t errsz);

/* Run a statement without parameters (BEGIN, COMMIT, SET ...). Returns 0,
 * or -1 with the reason in err. */
int sql_exec(PGconn *conn, const char *sql, char *err, size_t errsz);

/* Roll back if a transaction is open (after a failure; a no-op otherwise,
 * and on a lost connection). */
void sql_rollback(PGconn *conn);

/* Run sql with n text parameters; binary: ask for binary results. Returns
 * the rows (the caller clears them), or NULL with the reason in err. */
PGresult *sql_query(PGconn *conn, const char *sql, int n, const char *const *vals, int binary,
                    char *err, size_t errsz);

/* Run a statement that returns no rows, with n text parameters. Returns 0,
 * or -1 with the reason in err. */
int sql_command(PGconn *conn, const char *sql, int n, const char *const *vals, char *err,
                size_t errsz);

/* A text column as an integer; -1 for SQL null. */
int64_t sql_int(const PGresult *r, int row, int col);

#endif
