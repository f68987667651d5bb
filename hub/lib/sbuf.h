/* sbuf.h: a growable byte buffer, and writers for PostgreSQL array literals
 * so a whole batch travels as a few array parameters of one statement, and
 * for the rows of COPY ... FROM STDIN in its text format. */
#ifndef TXHUB_SBUF_H
#define TXHUB_SBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
	char *data;
	size_t len, cap;
	int oom; /* an allocation failed; the content is incomplete */
} sbuf;

void sbuf_reset(sbuf *b);
void sbuf_free(sbuf *b);
void sbuf_put(sbuf *b, const void *p, size_t n);
void sbuf_puts(sbuf *b, const char *s);
void sbuf_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* NUL-terminated view of the content (valid until the next write). */
const char *sbuf_str(sbuf *b);

/* Array literal writers: call arr_begin, then one element writer per element,
 * then arr_end. Elements are separated automatically. */
void sbuf_arr_begin(sbuf *b);
void sbuf_arr_text(sbuf *b, const char *s);          /* NULL writes NULL */
void sbuf_arr_hex(sbuf *b, const void *p, size_t n); /* hex text; NULL p writes NULL */
void sbuf_arr_int(sbuf *b, int64_t v);
void sbuf_arr_bool(sbuf *b, int v);
void sbuf_arr_end(sbuf *b);

/* COPY's text format: each writer appends one field and a tab, copy_end
 * turns the row's last tab into its newline. Text has backslash, newline,
 * carriage return and tab escaped (so no field, and no "\." line, ends the
 * data early); NULL writes \N. */
void sbuf_copy_text(sbuf *b, const char *s);
void sbuf_copy_hex(sbuf *b, const void *p, size_t n); /* bytea as \\x<hex>; NULL p: \N */
void sbuf_copy_int(sbuf *b, int64_t v);
void sbuf_copy_end(sbuf *b);

#endif
