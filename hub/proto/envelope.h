/* envelope.h: parse and validate one control-topic record value
 * (docs/producers.md: Envelope fields).
 *
 * Pure logic, no I/O: unit-tested and fuzzed in isolation. Everything the
 * rest of the hub reads from an envelope has passed these checks. */
#ifndef TXHUB_ENVELOPE_H
#define TXHUB_ENVELOPE_H

#include <stddef.h>
#include <stdint.h>

#include "topics.h"

typedef enum {
	ENVELOPE_PREPARE = 1,
	ENVELOPE_COMMIT = 2,
	ENVELOPE_ROLLBACK = 3,
} envelope_type;

/* A validated envelope. All strings are NUL-terminated, valid UTF-8 and
 * owned by the envelope; envelope_free() releases them. */
typedef struct {
	envelope_type type;
	char *biz_id;           /* 1..64 bytes, no control characters */
	char *message_key;      /* 1..255 bytes, no control characters */
	int has_payload;
	unsigned char *payload; /* the bytes to forward (may contain NUL) */
	size_t payload_len;
	char *forward_topic;    /* NULL when the envelope has no forward */
	char *forward_key;      /* NULL: null record key */
	char *forward_headers;  /* compact JSON object of string:string, or NULL */
	char *checkback_url;    /* NULL: use checkback.default_url */
	int64_t first_after_ms; /* -1: use checkback.first_after_ms */
	/* delayed delivery (docs/consumers.md: Delayed delivery), at most one
	 * of the two; forward.max_delay is intake's to check (it needs the
	 * clock) */
	int64_t not_before_ms;  /* forward.not_before, ms since the epoch; -1: none */
	int64_t delay_ms;       /* forward.delay_ms; -1: none */
	/* trace context (docs/consumers.md: Trace context): the valid parts of `trace`, or NULL */
	char *traceparent;
	char *tracestate;       /* NULL also for an empty one */
	char trace_id[33];      /* of traceparent; "" without one */
	/* a malformed `trace` or part of it, dropped (never a rejection): the
	 * metrics label ("trace", "traceparent", "tracestate") and why, static
	 * strings; NULL when nothing was dropped */
	const char *trace_dropped;
	const char *trace_dropped_why;
} envelope;

/* Longest accepted biz_id and message_key, in bytes. */
#define ENVELOPE_BIZ_ID_MAX 64
#define ENVELOPE_MESSAGE_KEY_MAX 255
/* Most forward headers one envelope may carry. */
#define ENVELOPE_HEADERS_MAX 64
/* Largest forward.delay_ms the parser takes (100 years); forward.max_delay
 * bounds it further at intake. */
#define ENVELOPE_DELAY_MAX_MS (36500LL * 86400000LL)
/* Parse value[0..len) (not NUL-terminated; NULL means a Kafka null value).
 * On success returns 0 and fills *env, which the caller frees with
 * envelope_free(). On rejection returns -1, leaves *env empty and writes the
 * reason to err (a short English sentence, safe to store and log). */
int envelope_parse(const void *value, size_t len, size_t max_bytes,
                   envelope *env, char *err, size_t errsz);

/* A commit that carries both payload and forward (a one-shot commit). */
int envelope_is_oneshot(const envelope *env);

/* Free what env owns and zero it; NULL and zeroed envelopes are fine. */
void envelope_free(envelope *env);

const char *envelope_type_name(envelope_type t);

/* Helpers shared with the rest of the hub (txhubi_topic_valid and
 * envelope_reserved_topic: topics.h; envelope_valid_url: url.h). */
int envelope_valid_utf8(const unsigned char *s, size_t len);

/* An id given from outside an envelope (an operator's command line, the
 * console) under the envelope's rules: valid UTF-8, 1..max bytes, no
 * control character (C0, DEL, C1). `field` names it in the reason. Returns 0,
 * or -1 with the reason in err. */
int envelope_check_id(const char *field, const char *s, size_t max, char *err, size_t errsz);

#endif
