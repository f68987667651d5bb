/* envelope_raw.h: the raw scanner of envelope.c, over the text of a record
 * value where cJSON loses information: what RFC 8259 refuses but cJSON
 * lets through, how deep it nests, the exact text of a member (a JSON
 * payload, an integer biz_id), and base64. Pure, no I/O. */
#ifndef TXHUB_ENVELOPE_RAW_H
#define TXHUB_ENVELOPE_RAW_H

#include <stddef.h>

/* Why text cJSON has accepted is still no JSON we take (a raw control
 * character, a leading zero, a \u escape without four hex digits, ...),
 * or NULL. \u0000, which cJSON decodes by cutting the string short, is
 * raw_nul_only_in()'s. */
const char *raw_strict_json_check(const char *p, size_t len);

/* Whether p[0..len) nests more than CJSON_NESTING_LIMIT levels deep. */
int raw_nested_too_deep(const char *p, size_t len);

/* p moved past JSON white space, up to end. */
const char *raw_skip_ws(const char *p, const char *end);

/* One member of an object as written: its name's body between the quotes
 * [ks, ke) (escapes undecoded) and its value's text [vs, ve). */
typedef struct {
	const char *ks, *ke, *vs, *ve;
} raw_pair;

/* The members of the object that opens text[0..len), in order: *at is
 * NULL for the first; each call returns 1 with the next in *m, 0 after the
 * last (or on text that is not an object). */
int raw_next_member(const char *text, size_t len, const char **at, raw_pair *m);

/* Whether m's name, decoded, is the ASCII name. */
int raw_pair_named(const raw_pair *m, const char *name);

/* Whether every \u0000 escape of the object text[0..len) lies in the value
 * of a top-level member called name (also when there is none at all). */
int raw_nul_only_in(const char *text, size_t len, const char *name);

/* Whether a member name of the object [s, e) holds \u0000. */
int raw_names_have_nul(const char *s, const char *e);

/* Whether a member called name of the object [s, e) holds \u0000 in its
 * value. */
int raw_value_has_nul(const char *s, const char *e, const char *name);

/* The raw text [*vstart, *vend) of text's top-level member name: 1, or 0
 * when not found. */
int raw_member_find(const char *text, size_t len, const char *name,
               const char **vstart, const char **vend);

/* [s, e) without white space outside strings, malloc'd (length in
 * *outlen); NULL when out of memory. */
unsigned char *raw_minify(const char *s, const char *e, size_t *outlen);

/* Standard base64, padding optional, into *out (malloc'd) and *outlen.
 * Returns 0, or -1 on a bad character or out of memory. */
int raw_base64_decode(const char *in, unsigned char **out, size_t *outlen);

#endif
