/* txhub/envelope.h: the envelope a producer sends (docs/producers.md: Envelope
 * fields), and its encoder.
 *
 * The encoding is deterministic, so tests/vectors/envelopes.json can state
 * the exact bytes and the C and Python encoders produce the same ones:
 *   - fields in this order, each only when present: "v":1, "type",
 *     "biz_id", "message_key", "payload" or "payload_base64", "forward"
 *     ("topic", "key", "headers" in the caller's order), "checkback"
 *     ("url", "first_after_ms"), "trace" ("traceparent", "tracestate");
 *   - compact: no white space outside strings;
 *   - strings: UTF-8 as given; '"' and '\' escaped with a backslash;
 *     U+0008, U+0009, U+000A, U+000C, U+000D as \b \t \n \f \r; other
 *     characters below U+0020 as \u00xx (lowercase hex); nothing else
 *     escaped (not '/', not U+007F, not non-ASCII);
 *   - a byte payload as standard base64 with padding;
 *   - a JSON payload as the caller's JSON text with the white space outside
 *     strings removed, everything else byte for byte (numbers keep their
 *     digits: the hub forwards them so); when that value is a string, its
 *     compact text goes as a JSON string (by the rule above), since the hub
 *     forwards a string payload as its bytes: "hello" as "\"hello\"".
 * Pure: no I/O, any thread. */
#ifndef TXHUB_PUBLIC_ENVELOPE_H
#define TXHUB_PUBLIC_ENVELOPE_H

#include <stddef.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits, as the hub enforces them (docs/producers.md: Envelope fields).
 * Lengths are in bytes. */
#define TXHUB_BIZ_ID_MAX 64
#define TXHUB_MESSAGE_KEY_MAX 255
#define TXHUB_TOPIC_MAX 249
#define TXHUB_HEADERS_MAX 64
#define TXHUB_HEADER_NAME_MAX 255
#define TXHUB_URL_MAX 2048
#define TXHUB_FIRST_AFTER_MS_MAX 2592000000LL /* 30 days */
/* Largest delay_ms an envelope may carry (100 years); the hub's
 * forward.max_delay bounds it further. */
#define TXHUB_DELAY_MS_MAX 3153600000000LL
/* Deepest nesting of arrays and objects accepted in a JSON payload. */
#define TXHUB_JSON_DEPTH_MAX 512
/* envelope.max_bytes' default, the producer's too. */
#define TXHUB_MAX_BYTES_DEFAULT 1048576

typedef enum {
	TXHUB_PREPARE = 1,
	TXHUB_COMMIT = 2,
	TXHUB_ROLLBACK = 3,
} txhub_type;

typedef enum {
	TXHUB_PAYLOAD_NONE = 0,
	/* arbitrary bytes: sent as "payload_base64", forwarded as they are */
	TXHUB_PAYLOAD_BYTES = 1,
	/* UTF-8 text: sent as a JSON string, forwarded as the text's bytes */
	TXHUB_PAYLOAD_STRING = 2,
	/* one JSON value as text (RFC 8259, no \u0000, no lone surrogate):
	 * the consumer receives its compact text (white space outside strings
	 * removed), which parses back to the same value; a JSON string too,
	 * quotes and escapes included ("hello" arrives as "hello", not hello) */
	TXHUB_PAYLOAD_JSON = 3,
} txhub_payload_kind;

/* One message, as the caller describes it. Every pointer is borrowed for
 * the duration of the call only: the library copies what it keeps. A
 * zeroed struct plus biz_id and message_key is a valid commit or rollback.
 * Strings are NUL-terminated UTF-8. */
typedef struct {
	const char *biz_id;      /* 1..64 bytes, no control characters */
	const char *message_key; /* 1..255 bytes, no control characters */
	txhub_payload_kind payload_kind;
	const void *payload;     /* payload_len bytes (STRING and JSON: no NUL) */
	size_t payload_len;
	const char *forward_topic; /* NULL: no "forward" */
	const char *forward_key;   /* NULL: forwarded with a null record key */
	const txhub_header *forward_headers; /* header_count names and values */
	size_t header_count;                 /* 0..64; names unique, not "txhub-*" */
	const char *checkback_url;           /* NULL: the hub's checkback.default_url */
	int has_first_after_ms;              /* 0: the hub's checkback.first_after_ms */
	long long first_after_ms;            /* 0..2592000000 when has_first_after_ms */
	/* W3C trace context (docs/consumers.md: Trace context), sent as "trace"
	 * in a prepare or commit: the hub keeps the prepare's (or one-shot
	 * commit's) with the message and passes it on as traceparent/tracestate
	 * headers. NULL: none. Checked here as the hub checks it (a malformed
	 * one the hub would drop is refused), a tracestate needs a
	 * traceparent. */
	/* "00-<32 hex>-<16 hex>-<2 hex>", lowercase; a later version may go
	 * on after a '-' with printable ASCII (docs/producers.md) */
	const char *traceparent;
	const char *tracestate;  /* key=value list, <= 512 chars, <= 32 members */
	/* Delayed delivery (docs/consumers.md: Delayed delivery), at most one of
	 * the two, with a forward_topic: forwarded no earlier than
	 * forward_not_before (RFC 3339 with a zone, e.g.
	 * "2026-12-01T09:00:00+01:00"), or than delay_ms after the commit. The
	 * hub also rejects a delay beyond its forward.max_delay (default 30
	 * days). Added in soversion 2. */
	const char *forward_not_before;      /* NULL: none */
	int has_delay_ms;                    /* 0: none */
	long long delay_ms;                  /* 0..TXHUB_DELAY_MS_MAX when has_delay_ms */
} txhub_message;

/* Validate m for an envelope of type t and encode it. A prepare needs a
 * payload and forward_topic; a commit needs both (a one-shot commit) or
 * neither; a rollback's payload and forward are left out. On success
 * returns TXHUB_OK and *out is a malloc'd, NUL-terminated string of *outlen
 * bytes that the caller frees with free(). Otherwise returns
 * TXHUB_ERR_INVALID, TXHUB_ERR_TOO_LARGE (over max_bytes; 0 means
 * TXHUB_MAX_BYTES_DEFAULT) or TXHUB_ERR_NOMEM with the reason in errstr,
 * and *out is NULL. */
txhub_status txhub_envelope_encode(txhub_type t, const txhub_message *m, size_t max_bytes,
                                   char **out, size_t *outlen, char *errstr,
                                   size_t errstr_size);

/* "prepare", "commit", "rollback" ("?" otherwise). Static. */
const char *txhub_type_name(txhub_type t);

/* Checks the library uses on everything that enters it, for callers that
 * want to check early: 1 when valid, else 0. Any thread. */
int txhub_valid_id(const char *s, size_t len, size_t max); /* UTF-8, no C0/C1/DEL */
int txhub_valid_topic(const char *s);                      /* Kafka's topic rules */
int txhub_valid_utf8(const void *s, size_t len);

#ifdef __cplusplus
}
#endif

#endif
