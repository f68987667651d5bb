/* form.h: reading an HTML form's POST body
 * (application/x-www-form-urlencoded), the one kind of body the web
 * console accepts.
 *
 * Pure: no I/O, no state; any thread may call these. A form owns copies
 * of its names and values (form_free()). Strict on purpose: a body is
 * refused, not guessed at, when it holds a malformed %-escape, a NUL byte
 * (%00), text that is not UTF-8, a field without a name, or more than
 * max_fields fields. */
#ifndef TXHUB_FORM_H
#define TXHUB_FORM_H

#include <stddef.h>

typedef struct {
	char *name;  /* decoded, NUL-terminated */
	char *value; /* decoded, NUL-terminated; "" for "name" or "name=" */
} form_field;

typedef struct {
	form_field *fields;
	size_t n;
} form;

/* Parse body[0..len) into out (zeroed first). '+' is a space, %XX a byte.
 * Returns 0, or -1 with the reason in err (out is then empty). */
int form_parse(const char *body, size_t len, size_t max_fields, form *out, char *err,
               size_t errsz);

/* The first value of name, or NULL. Valid until form_free(). */
const char *form_get(const form *f, const char *name);

/* How many fields are called name. */
size_t form_count(const form *f, const char *name);

/* Every field name is in allowed (NULL-terminated) and only the names in
 * repeatable (NULL-terminated, may be NULL) appear more than once.
 * Returns 0, or -1 naming the field in err. */
int form_check(const form *f, const char *const *allowed, const char *const *repeatable,
               char *err, size_t errsz);

/* Free what out holds; a zeroed form is fine. */
void form_free(form *f);

#endif
