/* internal.h: helpers shared by the client library's sources; not
 * installed. */
#ifndef TXHUB_CLIENT_INTERNAL_H
#define TXHUB_CLIENT_INTERNAL_H

#include <stddef.h>

#include "txhub.h"

/* Write a reason into errstr (when there is room) and return st. */
txhub_status cl_fail(txhub_status st, char *errstr, size_t errstr_size, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Validate an id (biz_id or message_key) named `what`; TXHUB_OK or
 * TXHUB_ERR_INVALID with the reason. s may hold len bytes, not
 * NUL-terminated. */
txhub_status cl_check_id(const char *what, const void *s, size_t len, size_t max,
                         char *errstr, size_t errstr_size);

/* Strict JSON (RFC 8259, no \u0000, no lone surrogate, depth-limited):
 * NULL when s[0..len) is one valid JSON value, else the reason. */
const char *cl_json_check(const char *s, size_t len);

/* The length of s[0..len) with white space outside strings removed, and the
 * copy (out must hold that many bytes). s must have passed cl_json_check. */
size_t cl_json_minify(const char *s, size_t len, char *out);

/* Growable string for the encoder. */
typedef struct {
	char *data;
	size_t len, cap;
	int oom;
} cl_buf;
void cl_buf_put(cl_buf *b, const void *p, size_t n);
void cl_buf_puts(cl_buf *b, const char *s);
/* A JSON string with the library's escaping (txhub/envelope.h). */
void cl_buf_json_string(cl_buf *b, const char *s, size_t len);
void cl_buf_base64(cl_buf *b, const unsigned char *p, size_t n);

#endif
