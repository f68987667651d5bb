/* dedup.c: claim forwarded records in the consumer's own PostgreSQL
 * database, so each message is processed once (the semantics are in
 * txhub/dedup.h). Every statement is one round trip with parameters; the
 * table name, which cannot be a parameter, is checked against a strict
 * pattern and quoted. */
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define INVALID(...) txhubi_fail(TXHUB_ERR_INVALID, errstr, errsz, __VA_ARGS__)

/* The table, with its name spliced in at compile time: once as "%s" for
 * txhub_dedup_create_table(), once with the default name. */
#define TABLE_SQL(name)                                                                      \
	"CREATE TABLE IF NOT EXISTS " name " (\n"                                              \
	"    biz_id       text        NOT NULL,\n"                                             \
	"    message_key  text        NOT NULL,\n"                                             \
	"    state        text        NOT NULL CHECK (state IN ('processing', 'processed')),\n" \
	"    holder       text        NOT NULL,\n"                                             \
	"    expires_at   timestamptz CHECK (state = 'processed' OR expires_at IS NOT NULL),\n" \
	"    processed_at timestamptz CHECK (state = 'processing' OR processed_at IS NOT NULL),\n" \
	"    PRIMARY KEY (biz_id, message_key)\n"                                              \
	")"

static const char table_sql[] = TABLE_SQL("%s");

const char *txhub_dedup_table_sql(void) { return TABLE_SQL(TXHUB_DEDUP_TABLE_DEFAULT); }

/* One part of a table name: [a-z_][a-z0-9_]*, 1..63 bytes. */
static int ident_part(const char *s, size_t len)
{
	if (len == 0 || len > 63 || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return 0;
	return 1;
}

/* cfg's table name, checked and quoted into out ("schema"."name"). */
static txhub_status table_name(const txhub_dedup_config *cfg, char *out, size_t outsz,
                               char *errstr, size_t errsz)
{
	const char *t = cfg && cfg->table ? cfg->table : TXHUB_DEDUP_TABLE_DEFAULT;
	const char *dot = strchr(t, '.');
	if (dot ? !ident_part(t, (size_t)(dot - t)) || !ident_part(dot + 1, strlen(dot + 1))
	        : !ident_part(t, strlen(t)))
		return INVALID("table must be [schema.]name of a-z, 0-9 and _, not starting with a digit");
	if (dot)
		snprintf(out, outsz, "\"%.*s\".\"%s\"", (int)(dot - t), t, dot + 1);
	else
		snprintf(out, outsz, "\"%s\"", t);
	return TXHUB_OK;
}

/* A failed result's status: retriable classes apart from the rest. */
static txhub_status db_error(PGconn *db, PGresult *r, const char *what, char *errstr,
                             size_t errsz)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	int retry = PQstatus(db) == CONNECTION_BAD || !state || strncmp(state, "08", 2) == 0 ||
	            strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0 ||
	            strcmp(state, "55P03") == 0 || strcmp(state, "57014") == 0;
	txhub_status st = txhubi_fail(retry ? TXHUB_ERR_DB_RETRY : TXHUB_ERR_DB, errstr, errsz,
	                          "%s: %s%s%s", what, state ? state : "", state ? ": " : "",
	                          msg ? msg : PQerrorMessage(db));
	/* libpq's messages end in a newline: keep the reason on one line */
	for (char *p = errstr; p && errsz && *p; p++)
		if (*p == '\n')
			*p = ' ';
	PQclear(r);
	return st;
}

/* Run sql with text parameters; *out gets the result on success. */
static txhub_status run(PGconn *db, const char *what, const char *sql, int n,
                        const char *const *params, PGresult **out, char *errstr, size_t errsz)
{
	PGresult *r = PQexecParams(db, sql, n, NULL, params, NULL, NULL, 0);
	ExecStatusType es = PQresultStatus(r);
	if (es != PGRES_TUPLES_OK && es != PGRES_COMMAND_OK)
		return db_error(db, r, what, errstr, errsz);
	*out = r;
	return TXHUB_OK;
}

txhub_status txhub_dedup_create_table(PGconn *db, const txhub_dedup_config *cfg, char *errstr,
                                      size_t errsz)
{
	char t[140], sql[sizeof table_sql + 160];
	txhub_status st = table_name(cfg, t, sizeof t, errstr, errsz);
	if (st != TXHUB_OK)
		return st;
	if (!db)
		return INVALID("no connection");
	snprintf(sql, sizeof sql, table_sql, t);
	PGresult *r = NULL;
	if ((st = run(db, "creating the dedup table", sql, 0, NULL, &r, errstr, errsz)) == TXHUB_OK)
		PQclear(r);
	return st;
}

/* 1: inside the caller's transaction; 0: idle; -1: neither (reason set). */
static int caller_tx(PGconn *db, char *errstr, size_t errsz)
{
	switch (PQtransactionStatus(db)) {
	case PQTRANS_IDLE: return 0;
	case PQTRANS_INTRANS: return 1;
	case PQTRANS_INERROR:
		INVALID("the connection's transaction has failed: roll it back first");
		return -1;
	default:
		txhubi_fail(TXHUB_ERR_STATE, errstr, errsz, "the connection is busy or broken");
		return -1;
	}
}

static txhub_status new_holder(char *out)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char r[16];
	if (RAND_bytes(r, sizeof r) != 1)
		return TXHUB_ERR_STATE;
	for (int i = 0; i < 16; i++) {
		out[2 * i] = hex[r[i] >> 4];
		out[2 * i + 1] = hex[r[i] & 15];
	}
	out[32] = '\0';
	return TXHUB_OK;
}

static txhub_status fill_claim(txhub_claim *c, const txhub_dedup_config *cfg,
                               const void *biz, size_t biz_len, const void *key, size_t key_len,
                               char *errstr, size_t errsz)
{
	txhub_status st;
	memset(c, 0, sizeof *c);
	if ((st = table_name(cfg, c->table, sizeof c->table, errstr, errsz)) != TXHUB_OK ||
	    (st = txhubi_check_id("txhub-biz-id", biz, biz_len, TXHUB_BIZ_ID_MAX, errstr, errsz)) != TXHUB_OK ||
	    (st = txhubi_check_id("txhub-message-key", key, key_len, TXHUB_MESSAGE_KEY_MAX, errstr,
	                      errsz)) != TXHUB_OK)
		return st;
	if (cfg && cfg->lease_ms < 0)
		return INVALID("lease_ms must not be negative");
	memcpy(c->biz_id, biz, biz_len);
	memcpy(c->message_key, key, key_len);
	if (new_holder(c->holder) != TXHUB_OK)
		return txhubi_fail(TXHUB_ERR_STATE, errstr, errsz, "no random bytes for the holder token");
	return TXHUB_OK;
}

/* Insert the claim, or take over an expired 'processing' row. Inside the
 * caller's transaction the row is 'processed' at once (see dedup.h).
 * *won is 1 when the row is ours now. */
static txhub_status try_insert(PGconn *db, txhub_claim *c, long lease_ms, int *won,
                               char *errstr, size_t errsz)
{
	char sql[1024], lease[32];
	snprintf(lease, sizeof lease, "%ld", lease_ms);
	snprintf(sql, sizeof sql,
	         "INSERT INTO %s AS d (biz_id, message_key, state, holder, expires_at, processed_at) "
	         "VALUES ($1, $2, $3::text, $4, CASE WHEN $3::text = 'processing' THEN "
	         "clock_timestamp() + $5::bigint * interval '1 millisecond' END, "
	         "CASE WHEN $3::text = 'processed' THEN clock_timestamp() END) "
	         "ON CONFLICT (biz_id, message_key) DO UPDATE SET state = excluded.state, "
	         "holder = excluded.holder, expires_at = excluded.expires_at, "
	         "processed_at = excluded.processed_at "
	         "WHERE d.state = 'processing' AND d.expires_at < clock_timestamp() RETURNING 1",
	         c->table);
	const char *params[] = {c->biz_id, c->message_key,
	                        c->in_caller_tx ? "processed" : "processing", c->holder, lease};
	PGresult *r = NULL;
	txhub_status st = run(db, "claiming", sql, 5, params, &r, errstr, errsz);
	if (st == TXHUB_OK) {
		*won = PQntuples(r) == 1;
		PQclear(r);
	}
	return st;
}

/* Someone else has the row: which state, and for how long. *found is 0
 * when the row vanished meanwhile (released), and the claim is tried
 * again. */
static txhub_status who_has_it(PGconn *db, txhub_claim *c, txhub_dedup_result *result,
                               int *found, char *errstr, size_t errsz)
{
	char sql[512];
	snprintf(sql, sizeof sql,
	         "SELECT state, greatest(0, ceil(extract(epoch FROM expires_at - clock_timestamp()) "
	         "* 1000))::bigint FROM %s WHERE biz_id = $1 AND message_key = $2", c->table);
	const char *params[] = {c->biz_id, c->message_key};
	PGresult *r = NULL;
	txhub_status st = run(db, "reading the claim", sql, 2, params, &r, errstr, errsz);
	if (st != TXHUB_OK)
		return st;
	*found = PQntuples(r) == 1;
	if (*found && strcmp(PQgetvalue(r, 0, 0), "processed") == 0) {
		*result = TXHUB_DEDUP_DUPLICATE;
	} else if (*found) {
		*result = TXHUB_DEDUP_BUSY;
		c->busy_ms = PQgetisnull(r, 0, 1) ? 0 : atoll(PQgetvalue(r, 0, 1));
	}
	PQclear(r);
	return TXHUB_OK;
}

txhub_status txhub_dedup_claim(PGconn *db, const txhub_dedup_config *cfg, const void *biz_id,
                               size_t biz_len, const void *message_key, size_t key_len,
                               txhub_dedup_result *result, txhub_claim *claim,
                               char *errstr, size_t errsz)
{
	if (!db || !result || !claim)
		return INVALID("db, result and claim are required");
	txhub_status st = fill_claim(claim, cfg, biz_id, biz_len, message_key, key_len, errstr, errsz);
	if (st != TXHUB_OK)
		return st;
	int in_tx = caller_tx(db, errstr, errsz);
	if (in_tx < 0)
		return PQtransactionStatus(db) == PQTRANS_INERROR ? TXHUB_ERR_INVALID : TXHUB_ERR_STATE;
	claim->in_caller_tx = in_tx;
	long lease = cfg && cfg->lease_ms ? cfg->lease_ms : TXHUB_DEDUP_LEASE_MS_DEFAULT;
	/* a row released between our two statements lets the next try insert */
	for (int attempt = 0; attempt < 3; attempt++) {
		int won = 0, found = 0;
		if ((st = try_insert(db, claim, lease, &won, errstr, errsz)) != TXHUB_OK)
			return st;
		if (won) {
			*result = TXHUB_DEDUP_CLAIMED;
			return TXHUB_OK;
		}
		if ((st = who_has_it(db, claim, result, &found, errstr, errsz)) != TXHUB_OK || found)
			return st;
	}
	return txhubi_fail(TXHUB_ERR_DB_RETRY, errstr, errsz, "the claim row kept changing; try again");
}

/* UPDATE or DELETE of this holder's row; *rows gets the count. */
static txhub_status holder_stmt(PGconn *db, const txhub_claim *c, const char *what,
                                const char *fmt, int nparams, long *rows, char *errstr,
                                size_t errsz)
{
	if (!db || !c || !c->holder[0])
		return INVALID("db and a claim from txhub_dedup_claim() are required");
	char sql[512];
	snprintf(sql, sizeof sql, fmt, c->table);
	const char *params[] = {c->biz_id, c->message_key, c->holder, c->in_caller_tx ? "t" : "f"};
	PGresult *r = NULL;
	txhub_status st = run(db, what, sql, nparams, params, &r, errstr, errsz);
	if (st == TXHUB_OK) {
		*rows = atol(PQcmdTuples(r));
		PQclear(r);
	}
	return st;
}

txhub_status txhub_dedup_done(PGconn *db, const txhub_claim *claim, char *errstr,
                              size_t errsz)
{
	long rows = 0;
	txhub_status st = holder_stmt(
		db, claim, "marking processed",
		"UPDATE %s SET state = 'processed', expires_at = NULL, "
		"processed_at = coalesce(processed_at, clock_timestamp()) "
		"WHERE biz_id = $1 AND message_key = $2 AND holder = $3", 3, &rows, errstr, errsz);
	if (st == TXHUB_OK && rows != 1)
		return txhubi_fail(TXHUB_ERR_LOST, errstr, errsz,
		               "the claim expired and another consumer took it over");
	return st;
}

txhub_status txhub_dedup_release(PGconn *db, const txhub_claim *claim, char *errstr,
                                 size_t errsz)
{
	long rows = 0;
	/* outside the caller's transaction a processed row is final: never
	 * delete it, even when asked after txhub_dedup_done() */
	return holder_stmt(db, claim, "releasing",
	                   "DELETE FROM %s WHERE biz_id = $1 AND message_key = $2 AND holder = $3 "
	                   "AND (state = 'processing' OR $4::boolean)",
	                   4, &rows, errstr, errsz);
}

txhub_status txhub_dedup_purge(PGconn *db, const txhub_dedup_config *cfg,
                               long long older_than_ms, long long *deleted, char *errstr,
                               size_t errsz)
{
	char t[140], sql[512], age[32];
	txhub_status st = table_name(cfg, t, sizeof t, errstr, errsz);
	if (st != TXHUB_OK)
		return st;
	if (!db || older_than_ms < 0)
		return INVALID("a connection and a non-negative age are required");
	snprintf(age, sizeof age, "%lld", older_than_ms);
	snprintf(sql, sizeof sql,
	         "DELETE FROM %s WHERE state = 'processed' "
	         "AND processed_at < clock_timestamp() - $1::bigint * interval '1 millisecond'", t);
	const char *params[] = {age};
	PGresult *r = NULL;
	if ((st = run(db, "purging", sql, 1, params, &r, errstr, errsz)) != TXHUB_OK)
		return st;
	if (deleted)
		*deleted = atoll(PQcmdTuples(r));
	PQclear(r);
	return TXHUB_OK;
}
