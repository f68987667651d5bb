/* sbuf.c: see sbuf.h. */
#include "sbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(sbuf *b, size_t extra)
{
	if (b->oom)
		return -1;
	if (b->len + extra + 1 <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + extra + 1)
		cap *= 2;
	char *n = realloc(b->data, cap);
	if (!n) {
		b->oom = 1;
		return -1;
	}
	b->data = n;
	b->cap = cap;
	return 0;
}

void sbuf_reset(sbuf *b)
{
	b->len = 0;
	b->oom = 0;
	if (b->data)
		b->data[0] = '\0';
}

void sbuf_free(sbuf *b)
{
	free(b->data);
	memset(b, 0, sizeof *b);
}

void sbuf_put(sbuf *b, const void *p, size_t n)
{
	if (grow(b, n) != 0)
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void sbuf_puts(sbuf *b, const char *s) { sbuf_put(b, s, strlen(s)); }

void sbuf_printf(sbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || grow(b, (size_t)n) != 0)
		return;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

const char *sbuf_str(sbuf *b)
{
	if (grow(b, 0) != 0)
		return "";
	b->data[b->len] = '\0';
	return b->data;
}

static void sep(sbuf *b)
{
	if (b->len > 0 && b->data[b->len - 1] != '{')
		sbuf_put(b, ",", 1);
}

void sbuf_arr_begin(sbuf *b) { sbuf_put(b, "{", 1); }
void sbuf_arr_end(sbuf *b) { sbuf_put(b, "}", 1); }

void sbuf_arr_text(sbuf *b, const char *s)
{
	sep(b);
	if (!s) {
		sbuf_put(b, "NULL", 4);
		return;
	}
	size_t n = strlen(s);
	if (grow(b, 2 * n + 2) != 0)
		return;
	char *o = b->data + b->len;
	*o++ = '"';
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '"' || s[i] == '\\')
			*o++ = '\\';
		*o++ = s[i];
	}
	*o++ = '"';
	b->len = (size_t)(o - b->data);
	b->data[b->len] = '\0';
}

/* Append pre, the n bytes of p as lowercase hex, then post (room for all
 * of it made first). */
static void put_hex(sbuf *b, const char *pre, const void *p, size_t n, char post)
{
	static const char hex[] = "0123456789abcdef";
	size_t lp = strlen(pre);
	if (grow(b, lp + 2 * n + 1) != 0)
		return;
	const unsigned char *s = p;
	char *o = b->data + b->len;
	memcpy(o, pre, lp);
	o += lp;
	for (size_t i = 0; i < n; i++) {
		*o++ = hex[s[i] >> 4];
		*o++ = hex[s[i] & 15];
	}
	*o++ = post;
	b->len = (size_t)(o - b->data);
	b->data[b->len] = '\0';
}

void sbuf_arr_hex(sbuf *b, const void *p, size_t n)
{
	sep(b);
	if (!p)
		sbuf_put(b, "NULL", 4);
	else
		put_hex(b, "\"", p, n, '"');
}

void sbuf_arr_int(sbuf *b, int64_t v)
{
	sep(b);
	sbuf_printf(b, "%lld", (long long)v);
}

void sbuf_arr_bool(sbuf *b, int v)
{
	sep(b);
	sbuf_put(b, v ? "t" : "f", 1);
}

void sbuf_copy_text(sbuf *b, const char *s)
{
	if (!s) {
		sbuf_put(b, "\\N\t", 3);
		return;
	}
	size_t n = strlen(s);
	if (grow(b, 2 * n + 1) != 0)
		return;
	char *o = b->data + b->len;
	for (; *s; s++) {
		char e = *s == '\\' ? '\\' : *s == '\n' ? 'n' : *s == '\r' ? 'r' : *s == '\t' ? 't' : 0;
		if (e) {
			*o++ = '\\';
			*o++ = e;
		} else {
			*o++ = *s;
		}
	}
	*o++ = '\t';
	b->len = (size_t)(o - b->data);
	b->data[b->len] = '\0';
}

void sbuf_copy_hex(sbuf *b, const void *p, size_t n)
{
	if (!p)
		sbuf_put(b, "\\N\t", 3);
	else /* bytea's input \x<hex>, its backslash escaped for COPY */
		put_hex(b, "\\\\x", p, n, '\t');
}

void sbuf_copy_int(sbuf *b, int64_t v) { sbuf_printf(b, "%lld\t", (long long)v); }

void sbuf_copy_end(sbuf *b)
{
	if (!b->oom && b->len > 0 && b->data[b->len - 1] == '\t')
		b->data[b->len - 1] = '\n';
}
