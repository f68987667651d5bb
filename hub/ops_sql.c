/* ops_sql.c: the libpq helpers of ops_sql.h. */
#include "ops_sql.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "store.h"

ops_rc ops_bad(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	return OPS_BAD_ARG;
}

ops_rc ops_db_fail(PGconn *conn, const PGresult *res, char *err, size_t errsz)
{
	store_error_text(conn, res, err, errsz);
	return OPS_DB_ERROR;
}

ops_rc ops_exec(PGconn *conn, const char *sql, char *err, size_t errsz)
{
	PGresult *r = PQexec(conn, sql);
	ops_rc rc = OPS_OK;
	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
		rc = ops_db_fail(conn, r, err, errsz);
	PQclear(r);
	return rc;
}

void ops_rollback(PGconn *conn)
{
	if (PQstatus(conn) == CONNECTION_OK && PQtransactionStatus(conn) != PQTRANS_IDLE)
		PQclear(PQexec(conn, "ROLLBACK"));
}

PGresult *ops_query(PGconn *conn, const char *sql, int n, const char *const *vals, int binary,
                    char *err, size_t errsz)
{
	PGresult *r = PQexecParams(conn, sql, n, NULL, vals, NULL, NULL, binary);
	if (PQresultStatus(r) == PGRES_TUPLES_OK)
		return r;
	ops_db_fail(conn, r, err, errsz);
	PQclear(r);
	return NULL;
}

ops_rc ops_command(PGconn *conn, const char *sql, int n, const char *const *vals, char *err,
                   size_t errsz)
{
	PGresult *r = PQexecParams(conn, sql, n, NULL, vals, NULL, NULL, 0);
	ops_rc rc = OPS_OK;
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		rc = ops_db_fail(conn, r, err, errsz);
	PQclear(r);
	return rc;
}

int64_t ops_int(const PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col) ? -1 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}
