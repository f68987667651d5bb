/* txhub/checkback.h: answer the hub's check-back requests (docs/producers.md:
 * Check-back).
 *
 * Framework-agnostic: the caller's HTTP server hands over the request's
 * query string and three header values, and sends back the status and body
 * this produces. Signed requests (the hub's checkback.secret is set) carry
 * X-Txhub-Timestamp and X-Txhub-Signature: "v2=" and the lowercase hex
 * HMAC-SHA256(secret, "<timestamp>\n<biz_id>\n<message_key>"). A request is
 * accepted only with a valid signature whose timestamp is within the window
 * (300 s each way by default) of the local clock, so a captured request
 * cannot be replayed later, nor for another message. The comparison takes
 * the same time wherever the signatures differ.
 *
 * Pure: no I/O, no allocation, any thread. */
#ifndef TXHUB_PUBLIC_CHECKBACK_H
#define TXHUB_PUBLIC_CHECKBACK_H

#include <stddef.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TXHUB_CHECKBACK_WINDOW_DEFAULT 300

/* A parsed request. Plain data (fixed buffers): copy it freely, nothing to
 * free. */
typedef struct {
	char biz_id[64 + 1];        /* decoded, validated like the envelope's */
	char message_key[255 + 1];
	long attempt;               /* X-Txhub-Attempt, 1-based; 0 when absent */
	long long timestamp;        /* X-Txhub-Timestamp; 0 when absent */
	char signature[64 + 1];     /* the hex after "v2="; "" when absent */
} txhub_checkback_request;

/* Parse the query string (the part after '?', without '#'; NULL or "" is
 * empty) and header values (NULL when the header is absent). The ids come
 * from biz_id and message_key, or from bizID and messageKey; percent-escapes
 * and '+' (a space) are decoded. A parameter given twice with different
 * values, a missing or invalid id, and a malformed header are
 * TXHUB_ERR_INVALID. Does not verify the signature. */
txhub_status txhub_checkback_parse(const char *query, const char *attempt,
                                   const char *timestamp, const char *signature,
                                   txhub_checkback_request *req, char *errstr,
                                   size_t errstr_size);

/* Verify req's signature with secret (NUL-terminated, non-empty) against
 * now (Unix seconds; 0: the current time) within window_s seconds either
 * way (0: 300). TXHUB_OK, or TXHUB_ERR_UNAUTHORIZED with the reason (no
 * signature, outside the window, wrong signature), or TXHUB_ERR_INVALID
 * for a NULL or empty secret. */
txhub_status txhub_checkback_verify(const txhub_checkback_request *req, const char *secret,
                                    long long now, long window_s, char *errstr,
                                    size_t errstr_size);

typedef enum {
	TXHUB_UNKNOWN = 1,     /* not decided yet: the hub asks again later */
	TXHUB_COMMITTED = 2,   /* the business transaction committed */
	TXHUB_ROLLED_BACK = 3, /* it did not, and now never will */
} txhub_outcome;

/* The answer body: {"status":"committed"}, {"status":"rolled_back"} or
 * {"status":"unknown"}, served with Content-Type application/json. Static;
 * NULL for a value outside the enum. */
const char *txhub_checkback_answer(txhub_outcome outcome);

/* The decision, from the producer's own database. Return 0 and set
 * *outcome, or -1 when it cannot be known now (the database is down):
 * the hub is then answered 503 and asks again. Never answer
 * TXHUB_ROLLED_BACK because a lookup failed. Called on the thread that
 * called txhub_checkback_handle(). */
typedef int txhub_decide_cb(const txhub_checkback_request *req, txhub_outcome *outcome,
                            void *opaque);

typedef struct {
	const char *secret; /* NULL or "": accept unsigned requests (only when the hub has no checkback.secret) */
	long window_s;      /* 0: 300 */
	long long now;      /* 0: the current time (tests set it) */
} txhub_checkback_config;

typedef struct {
	int http_status; /* 200, 400 (not a check-back), 401 (signature), 503 (decide failed) */
	char body[160];  /* JSON: {"status":...} or {"error":"..."} */
} txhub_checkback_response;

/* Everything in one call: parse, verify (when cfg->secret is set; cfg may
 * be NULL: no secret), ask decide, and fill *resp (required). Never fails
 * as a function: every outcome is a response to send. */
void txhub_checkback_handle(const txhub_checkback_config *cfg, const char *query,
                            const char *attempt, const char *timestamp,
                            const char *signature, txhub_decide_cb *decide, void *opaque,
                            txhub_checkback_response *resp);

#ifdef __cplusplus
}
#endif

#endif
