/* json.c: what the encoder needs of JSON: a strict validator for JSON
 * payloads (so a payload the hub would reject fails here, before it is
 * sent), white-space removal, and string escaping and base64 as
 * txhub/envelope.h defines them. A validator rather than a parser: the
 * payload is forwarded as the caller wrote it, never re-printed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct {
	const char *p, *end;
	const char *err;
	int depth;
} scan;

static void ws(scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

static int fail(scan *s, const char *why)
{
	if (!s->err)
		s->err = why;
	return -1;
}

static int hex4(const char *p, const char *end, uint32_t *v)
{
	if (end - p < 4)
		return -1;
	*v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
		        : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (h < 0)
			return -1;
		*v = *v * 16 + (uint32_t)h;
	}
	return 0;
}

/* A \u escape at s->p (just after the 'u'): no U+0000 (the hub refuses it,
 * cJSON would cut the string there) and surrogates only in valid pairs. */
static int unicode_escape(scan *s)
{
	uint32_t v, lo;
	if (hex4(s->p, s->end, &v) != 0)
		return fail(s, "invalid \\u escape in a string");
	s->p += 4;
	if (v == 0)
		return fail(s, "a string contains \\u0000, which txhub does not accept");
	if (v >= 0xdc00 && v <= 0xdfff)
		return fail(s, "a lone UTF-16 surrogate escape in a string");
	if (v >= 0xd800 && v <= 0xdbff) {
		if (s->end - s->p < 6 || s->p[0] != '\\' || s->p[1] != 'u' ||
		    hex4(s->p + 2, s->end, &lo) != 0 || lo < 0xdc00 || lo > 0xdfff)
			return fail(s, "a lone UTF-16 surrogate escape in a string");
		s->p += 6;
	}
	return 0;
}

static int string(scan *s)
{
	s->p++; /* the opening quote */
	while (s->p < s->end) {
		unsigned char c = (unsigned char)*s->p++;
		if (c == '"')
			return 0;
		if (c < 0x20)
			return fail(s, "a raw control character inside a string");
		if (c != '\\')
			continue;
		if (s->p >= s->end)
			break;
		char e = *s->p++;
		if (e == 'u') {
			if (unicode_escape(s) != 0)
				return -1;
		} else if (!strchr("\"\\/bfnrt", e) || e == '\0') {
			return fail(s, "an invalid escape in a string");
		}
	}
	return fail(s, "an unterminated string");
}

static int digits(scan *s)
{
	const char *start = s->p;
	while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
		s->p++;
	return s->p > start ? 0 : fail(s, "invalid number");
}

static int number(scan *s)
{
	if (*s->p == '-')
		s->p++;
	if (s->p < s->end && *s->p == '0') {
		s->p++;
		if (s->p < s->end && *s->p >= '0' && *s->p <= '9')
			return fail(s, "a number with a leading zero");
	} else if (digits(s) != 0) {
		return -1;
	}
	if (s->p < s->end && *s->p == '.') {
		s->p++;
		if (digits(s) != 0)
			return -1;
	}
	if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
		s->p++;
		if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
			s->p++;
		if (digits(s) != 0)
			return -1;
	}
	return 0;
}

static int literal(scan *s, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
		return fail(s, "invalid JSON");
	s->p += n;
	return 0;
}

static int value(scan *s);

/* Members or elements of an object (obj) or array, after the opening
 * bracket. */
static int container(scan *s, int obj)
{
	char close = obj ? '}' : ']';
	if (++s->depth > TXHUB_JSON_DEPTH_MAX)
		return fail(s, "JSON nested too deeply");
	s->p++;
	ws(s);
	if (s->p < s->end && *s->p == close) {
		s->p++;
		s->depth--;
		return 0;
	}
	for (;;) {
		ws(s);
		if (obj) {
			if (s->p >= s->end || *s->p != '"' || string(s) != 0)
				return fail(s, "invalid JSON: expected a member name");
			ws(s);
			if (s->p >= s->end || *s->p++ != ':')
				return fail(s, "invalid JSON: expected ':'");
		}
		if (value(s) != 0)
			return -1;
		ws(s);
		if (s->p < s->end && *s->p == ',') {
			s->p++;
			continue;
		}
		if (s->p < s->end && *s->p == close) {
			s->p++;
			s->depth--;
			return 0;
		}
		return fail(s, obj ? "invalid JSON: expected ',' or '}'" : "invalid JSON: expected ',' or ']'");
	}
}

static int value(scan *s)
{
	ws(s);
	if (s->p >= s->end)
		return fail(s, "invalid JSON: a value is missing");
	switch (*s->p) {
	case '{': return container(s, 1);
	case '[': return container(s, 0);
	case '"': return string(s);
	case 't': return literal(s, "true");
	case 'f': return literal(s, "false");
	case 'n': return literal(s, "null");
	default:
		if (*s->p == '-' || (*s->p >= '0' && *s->p <= '9'))
			return number(s);
		return fail(s, "invalid JSON");
	}
}

const char *txhubi_json_check(const char *text, size_t len)
{
	if (!txhub_valid_utf8(text, len))
		return "not valid UTF-8";
	if (memchr(text, '\0', len))
		return "contains a NUL byte";
	scan s = {text, text + len, NULL, 0};
	if (value(&s) != 0)
		return s.err;
	ws(&s);
	return s.p == s.end ? NULL : "invalid JSON: trailing data after the value";
}

size_t txhubi_json_minify(const char *s, size_t len, char *out)
{
	size_t o = 0;
	int in_str = 0;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (in_str) {
			out[o++] = c;
			if (c == '\\')
				out[o++] = s[++i]; /* validated: an escape is never last */
			else if (c == '"')
				in_str = 0;
		} else if (c == '"') {
			in_str = 1;
			out[o++] = c;
		} else if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			out[o++] = c;
		}
	}
	return o;
}

void txhubi_buf_put(txhubi_buf *b, const void *p, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *d = realloc(b->data, cap);
		if (!d) {
			b->oom = 1;
			return;
		}
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void txhubi_buf_puts(txhubi_buf *b, const char *s) { txhubi_buf_put(b, s, strlen(s)); }

void txhubi_buf_json_string(txhubi_buf *b, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	txhubi_buf_put(b, "\"", 1);
	size_t run = 0; /* bytes copied as they are, written in one go */
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[7];
		size_t n = 2;
		esc[0] = '\\';
		switch (c) {
		case '"': esc[1] = '"'; break;
		case '\\': esc[1] = '\\'; break;
		case '\b': esc[1] = 'b'; break;
		case '\t': esc[1] = 't'; break;
		case '\n': esc[1] = 'n'; break;
		case '\f': esc[1] = 'f'; break;
		case '\r': esc[1] = 'r'; break;
		default:
			if (c >= 0x20) {
				run++;
				continue;
			}
			memcpy(esc + 1, "u00", 3);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			n = 6;
		}
		txhubi_buf_put(b, s + i - run, run);
		run = 0;
		txhubi_buf_put(b, esc, n);
	}
	txhubi_buf_put(b, s + len - run, run);
	txhubi_buf_put(b, "\"", 1);
}

void txhubi_buf_base64(txhubi_buf *b, const unsigned char *p, size_t n)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		char q[4] = {tab[(v >> 18) & 63], tab[(v >> 12) & 63],
		             i + 1 < n ? tab[(v >> 6) & 63] : '=', i + 2 < n ? tab[v & 63] : '='};
		txhubi_buf_put(b, q, 4);
	}
}
