/* sql.c: see sql.h. */
#include "sql.h"

#include <stdio.h>
#include <stdlib.h>

#include "log.h"

void sql_error_text(PGconn *conn, const PGresult *res, char *err, size_t errsz)
{
	if (PQstatus(conn) != CONNECTION_OK) {
		snprintf(err, errsz, "connection lost: %s", PQerrorMessage(conn));
		log_one_line(err);
		return;
	}
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	const char *constraint = res ? PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME) : NULL;
	if (!msg)
		msg = res ? PQresultErrorMessage(res) : PQerrorMessage(conn);
	snprintf(err, errsz, "%s%s%s%s%s%s", state ? state : "", state ? ": " : "", msg,
	         constraint ? " (constraint " : "", constraint ? constraint : "",
	         constraint ? ")" : "");
	log_one_line(err);
}

int sql_exec(PGconn *conn, const char *sql, char *err, size_t errsz)
{
	PGresult *r = PQexec(conn, sql);
	int rc = 0;
	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
		sql_error_text(conn, r, err, errsz);
		rc = -1;
	}
	PQclear(r);
	return rc;
}

void sql_rollback(PGconn *conn)
{
	if (PQstatus(conn) == CONNECTION_OK && PQtransactionStatus(conn) != PQTRANS_IDLE)
		PQclear(PQexec(conn, "ROLLBACK"));
}

PGresult *sql_query(PGconn *conn, const char *sql, int n, const char *const *vals, int binary,
                    char *err, size_t errsz)
{
	PGresult *r = PQexecParams(conn, sql, n, NULL, vals, NULL, NULL, binary);
	if (PQresultStatus(r) == PGRES_TUPLES_OK)
		return r;
	sql_error_text(conn, r, err, errsz);
	PQclear(r);
	return NULL;
}

int sql_command(PGconn *conn, const char *sql, int n, const char *const *vals, char *err,
                size_t errsz)
{
	PGresult *r = PQexecParams(conn, sql, n, NULL, vals, NULL, NULL, 0);
	int rc = 0;
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		sql_error_text(conn, r, err, errsz);
		rc = -1;
	}
	PQclear(r);
	return rc;
}

int64_t sql_int(const PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col) ? -1 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}
