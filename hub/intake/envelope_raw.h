/* envelope_raw.h: the raw scanner of envelope.c, over the text of a record
 * value where cJSON loses information: what RFC 8259 refuses but cJSON
 * lets through, how deep it nests, the exact text of a member (a JSON
 * payload, an integer biz_id), and base64. Pure, no I/O. */
#ifndef TXHUB_ENVELOPE_RAW_H
#define TXHUB_ENVELOPE_RAW_H

#include <stddef.h>

/* Why text cJSON has accepted is still no JSON we take (a raw control
 * character, a leading zero, \u0000, ...), or NULL. */
const char *strict_json_check(const char *p, size_t len);

/* Whether p[0..len) nests more than CJSON_NESTING_LIMIT levels deep. */
int nested_too_deep(const char *p, size_t len);

/* p moved past JSON white space, up to end. */
const char *skip_ws(const char *p, const char *end);

/* The raw text [*vstart, *vend) of text's top-level member name: 1, or 0
 * when not found. */
int raw_member(const char *text, size_t len, const char *name,
               const char **vstart, const char **vend);

/* [s, e) without white space outside strings, malloc'd (length in
 * *outlen); NULL when out of memory. */
unsigned char *minify(const char *s, const char *e, size_t *outlen);

/* Standard base64, padding optional, into *out (malloc'd) and *outlen.
 * Returns 0, or -1 on a bad character or out of memory. */
int base64_decode(const char *in, unsigned char **out, size_t *outlen);

#endif
