/* txhub/common.h: status codes shared by every part of the client library.
 *
 * Every function that can fail returns a txhub_status and, where it takes
 * one, writes a one-line English reason into the caller's buffer
 * (errstr, errstr_size; NUL-terminated, cut to fit; may be NULL with size 0).
 * The library never logs, never prints and never exits. */
#ifndef TXHUB_PUBLIC_COMMON_H
#define TXHUB_PUBLIC_COMMON_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
	TXHUB_OK = 0,
	/* Bad input from the caller: nothing was sent or written. Permanent. */
	TXHUB_ERR_INVALID = 1,
	/* The envelope would exceed max_bytes: nothing was sent. Permanent. */
	TXHUB_ERR_TOO_LARGE = 2,
	/* Kafka did not confirm the envelope (time-out, broker error, queue
	 * full). Retriable: the envelope may or may not have arrived, and
	 * sending the same envelope again is always safe (the hub applies it
	 * once). */
	TXHUB_ERR_KAFKA = 3,
	/* The idempotent producer hit a fatal error: the handle is dead.
	 * Destroy it and create a new one. */
	TXHUB_ERR_FATAL = 4,
	/* A PostgreSQL error that will happen again (a missing table, no
	 * permission, a constraint): the SQLSTATE is in the message. */
	TXHUB_ERR_DB = 5,
	/* A check-back request whose signature or timestamp does not verify. */
	TXHUB_ERR_UNAUTHORIZED = 6,
	/* A dedup claim that was lost: it expired and another consumer took
	 * it over. */
	TXHUB_ERR_LOST = 7,
	TXHUB_ERR_NOMEM = 8,
	/* Something the library cannot do right now (e.g. the producer is
	 * being destroyed). */
	TXHUB_ERR_STATE = 9,
	/* A PostgreSQL error that goes away when the transaction is run again:
	 * serialization failure, deadlock, lock time-out, lost connection. */
	TXHUB_ERR_DB_RETRY = 10,
} txhub_status;

/* A short constant name, e.g. "invalid" ("unknown" for anything else).
 * Static; any thread. */
const char *txhub_status_name(txhub_status st);

/* 1 when trying the same call again later may succeed (TXHUB_ERR_KAFKA,
 * TXHUB_ERR_DB_RETRY, TXHUB_ERR_NOMEM), else 0. Any thread. */
int txhub_status_retriable(txhub_status st);

/* One forward header: both strings NUL-terminated UTF-8, borrowed. */
typedef struct {
	const char *name;
	const char *value;
} txhub_header;

#ifdef __cplusplus
}
#endif

#endif
