/* internal.h: helpers shared by the client library's sources; not
 * installed. Their prefix, txhubi_, keeps them out of the shared library's
 * exports (the version script exports txhub_*) and out of the way of a
 * program that links the static archive. */
#ifndef TXHUB_CLIENT_INTERNAL_H
#define TXHUB_CLIENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "txhub.h"

/* Write a reason into errstr (when there is room) and return st. */
txhub_status txhubi_fail(txhub_status st, char *errstr, size_t errstr_size, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Validate an id (biz_id or message_key) named `what`; TXHUB_OK or
 * TXHUB_ERR_INVALID with the reason. s may hold len bytes, not
 * NUL-terminated. */
/* hub/lib/rfc3339.h's rfc3339_parse, under an internal name (client/rfc3339.c). */
int txhubi_rfc3339_parse(const char *s, size_t len, int64_t *ms, char *err, size_t errsz);

txhub_status txhubi_check_id(const char *what, const void *s, size_t len, size_t max,
                         char *errstr, size_t errstr_size);

/* Strict JSON (RFC 8259, no \u0000, no lone surrogate, depth-limited):
 * NULL when s[0..len) is one valid JSON value, else the reason. */
const char *txhubi_json_check(const char *s, size_t len);

/* The length of s[0..len) with white space outside strings removed, and the
 * copy (out must hold that many bytes). s must have passed txhubi_json_check. */
size_t txhubi_json_minify(const char *s, size_t len, char *out);

/* Growable string for the encoder. */
typedef struct {
	char *data;
	size_t len, cap;
	int oom;
} txhubi_buf;
void txhubi_buf_put(txhubi_buf *b, const void *p, size_t n);
void txhubi_buf_puts(txhubi_buf *b, const char *s);
/* A JSON string with the library's escaping (txhub/envelope.h). */
void txhubi_buf_json_string(txhubi_buf *b, const char *s, size_t len);
void txhubi_buf_base64(txhubi_buf *b, const unsigned char *p, size_t n);

#endif
