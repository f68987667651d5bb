/* txhub/dedup.h: process each forwarded record once, downstream
 * (docs/consumers.md: What gets forwarded, and Consuming without duplicates:
 * delivery is at least once; the pair of headers txhub-biz-id and
 * txhub-message-key identifies the message).
 *
 * The consumer keeps a table in its own PostgreSQL database
 * (txhub_dedup_table_sql(), or txhub_dedup_create_table()):
 *   txhub_dedup(biz_id, message_key, state 'processing' | 'processed',
 *               holder, expires_at, processed_at,
 *               PRIMARY KEY (biz_id, message_key))
 * and claims each record before acting on it. Two ways, chosen by the
 * connection's state when txhub_dedup_claim() is called:
 *
 * In the caller's transaction (db is inside BEGIN ... : the business write
 * goes through the same connection). The claim writes the row as
 * 'processed' at once, inside that transaction: it becomes visible only
 * when the caller commits, together with the business write, and vanishes
 * if the caller rolls back. A concurrent claim of the same message waits on
 * the row lock until the first transaction ends, then sees "duplicate" (it
 * committed) or claims it (it rolled back). A holder that dies is rolled
 * back by PostgreSQL, so nothing expires here.
 *
 * In its own transactions (db is idle, outside a transaction: the business
 * write goes elsewhere). The claim commits a 'processing' row with
 * holder = a random token and expires_at = now + lease; other claims see
 * "busy" until it expires, and take it over after that (the first to get
 * there wins). txhub_dedup_done() then marks it 'processed' (only if this
 * holder still has it: else TXHUB_ERR_LOST, someone took it over, and the
 * business write may have happened twice), or txhub_dedup_release()
 * deletes it so the message can be claimed again at once. Choose a lease
 * longer than processing ever takes.
 *
 * Every claim outcome:
 *   TXHUB_DEDUP_CLAIMED   no row, or an expired 'processing' row: yours now;
 *   TXHUB_DEDUP_DUPLICATE a 'processed' row: skip the record;
 *   TXHUB_DEDUP_BUSY      a live 'processing' row of another holder: try
 *                         again later (do not commit the record's offset).
 * Times come from PostgreSQL's clock only (clock_timestamp()), so consumers'
 * clocks need not agree. All SQL is parameterized; the table name is
 * checked and quoted.
 *
 * Threads: a PGconn is used by one thread at a time (libpq's rule); these
 * functions add no state of their own beyond the caller's claim struct. */
#ifndef TXHUB_PUBLIC_DEDUP_H
#define TXHUB_PUBLIC_DEDUP_H

#include <libpq-fe.h>
#include <stddef.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TXHUB_DEDUP_TABLE_DEFAULT "txhub_dedup"
#define TXHUB_DEDUP_LEASE_MS_DEFAULT 60000

typedef struct {
	/* NULL: "txhub_dedup". Else [schema.]name, each part of a-z, 0-9 and _
	 * (not starting with a digit), at most 63 bytes. */
	const char *table;
	long lease_ms; /* 'processing' lease in its own transactions; 0: 60000 */
} txhub_dedup_config;

typedef enum {
	TXHUB_DEDUP_CLAIMED = 1,
	TXHUB_DEDUP_DUPLICATE = 2,
	TXHUB_DEDUP_BUSY = 3,
} txhub_dedup_result;

/* A claim: plain data, nothing to free. Filled by txhub_dedup_claim(). */
typedef struct {
	char table[128];        /* quoted table name */
	char biz_id[64 + 1];
	char message_key[255 + 1];
	char holder[33];        /* random hex token of this claim */
	int in_caller_tx;       /* 1: written in the caller's transaction */
	long long busy_ms;      /* TXHUB_DEDUP_BUSY: ms until the holder's lease ends */
} txhub_claim;

/* The CREATE TABLE IF NOT EXISTS statement for the default table name, for
 * migrations of your own. Static. */
const char *txhub_dedup_table_sql(void);

/* Create the table (cfg->table, or the default) if it does not exist. */
txhub_status txhub_dedup_create_table(PGconn *db, const txhub_dedup_config *cfg,
                                      char *errstr, size_t errstr_size);

/* Claim the message whose txhub-biz-id and txhub-message-key header values
 * are biz_id[0..biz_len) and message_key[0..key_len) (the raw header bytes;
 * validated: UTF-8, lengths, no control characters). cfg may be NULL.
 * On TXHUB_OK, *result says what happened and *claim is filled. db must be
 * idle or inside a transaction (not failed). A PostgreSQL error inside the
 * caller's transaction leaves it failed: roll it back. */
txhub_status txhub_dedup_claim(PGconn *db, const txhub_dedup_config *cfg, const void *biz_id,
                               size_t biz_len, const void *message_key, size_t key_len,
                               txhub_dedup_result *result, txhub_claim *claim,
                               char *errstr, size_t errstr_size);

/* The business write is done: mark the claim 'processed'. Inside the
 * caller's transaction this only checks the row is there (the caller's
 * COMMIT makes it final). TXHUB_ERR_LOST when the claim expired and was
 * taken over. */
txhub_status txhub_dedup_done(PGconn *db, const txhub_claim *claim, char *errstr,
                              size_t errstr_size);

/* The business write failed: give the claim up so the message can be
 * claimed again at once (deletes this holder's row). Inside the caller's
 * transaction, rolling back does the same; calling this too is harmless. */
txhub_status txhub_dedup_release(PGconn *db, const txhub_claim *claim, char *errstr,
                                 size_t errstr_size);

/* Delete 'processed' rows older than older_than_ms. A very late duplicate
 * of a purged message is processed again: keep rows longer than the
 * longest redelivery you expect (a hub's forward retries last ~30 min with
 * the defaults). *deleted (may be NULL) gets the count. */
txhub_status txhub_dedup_purge(PGconn *db, const txhub_dedup_config *cfg,
                               long long older_than_ms, long long *deleted, char *errstr,
                               size_t errstr_size);

#ifdef __cplusplus
}
#endif

#endif
