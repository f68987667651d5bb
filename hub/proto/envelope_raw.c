/* envelope_raw.c: see envelope_raw.h. */
#include "envelope_raw.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static int digit_at(const char *p, size_t len, size_t i)
{
	return i < len && p[i] >= '0' && p[i] <= '9';
}

/* What cJSON lets through but RFC 8259 (or we) do not: a raw control
 * character inside a string, or outside one other than the white space
 * tab, line feed and carriage return; a number with a leading zero, or
 * with no digit after its minus sign (-.5) or its decimal point (1.,
 * 1.e5); and a \u escape with a non-hex digit (cJSON reads it as U+0000
 * and silently truncates the string there). \u0000 itself is left to
 * raw_nul_only_in(). Runs on text cJSON has accepted. Returns NULL, or
 * the reason. */
const char *raw_strict_json_check(const char *p, size_t len)
{
	int in_str = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];
		if (in_str) {
			if (c == '"') {
				in_str = 0;
			} else if (c < 0x20) {
				return "invalid JSON: a raw control character inside a string";
			} else if (c == '\\' && i + 1 < len && p[i + 1] == 'u') {
				/* cJSON reads \uZZZZ with a non-hex digit as U+0000 */
				for (size_t k = i + 2; k < i + 6; k++)
					if (k >= len || !isxdigit((unsigned char)p[k]))
						return "invalid JSON: a \\u escape without four hex digits";
				i += 5;
			} else if (c == '\\') {
				i++; /* cJSON has refused any other escape it does not know */
			}
			continue;
		}
		if (c == '"') {
			in_str = 1;
		} else if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
			/* cJSON skips every byte up to 0x20 as white space */
			return "invalid JSON: a control character outside a string";
		} else if (c == '-' && !(i > 0 && (p[i - 1] == 'e' || p[i - 1] == 'E')) &&
		           !digit_at(p, len, i + 1)) {
			return "invalid JSON: a number with no digit after its minus sign";
		} else if (c == '.' && !digit_at(p, len, i + 1)) {
			return "invalid JSON: a number with no digit after its decimal point";
		} else if (c == '0' && digit_at(p, len, i + 1)) {
			/* a leading zero, unless this 0 is inside a number already:
			 * after a digit or '.', or in an exponent, which may have
			 * leading zeros (1e05, 1E+05, 1e-05; but -05 is refused) */
			unsigned char prev = i ? (unsigned char)p[i - 1] : ' ';
			unsigned char before = i > 1 ? (unsigned char)p[i - 2] : ' ';
			int in_exponent = prev == 'e' || prev == 'E' || prev == '+' ||
			                  (prev == '-' && (before == 'e' || before == 'E'));
			if (!((prev >= '0' && prev <= '9') || prev == '.' || in_exponent))
				return "invalid JSON: a number with a leading zero";
		}
	}
	return NULL;
}

/* Does p[0..len) open more than CJSON_NESTING_LIMIT arrays and objects
 * inside one another? cJSON stops there with nothing but a position; len
 * ends just after that position, so a deeper level further on does not
 * count. */
int raw_nested_too_deep(const char *p, size_t len)
{
	int depth = 0, in_str = 0;
	for (size_t i = 0; i < len; i++) {
		char c = p[i];
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = 0;
		} else if (c == '"') {
			in_str = 1;
		} else if (c == '{' || c == '[') {
			if (++depth > CJSON_NESTING_LIMIT)
				return 1;
		} else if ((c == '}' || c == ']') && depth > 0) {
			depth--;
		}
	}
	return 0;
}

/* Raw scanner over text cJSON has already accepted. */
const char *raw_skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

static const char *skip_string(const char *p, const char *end)
{
	for (p++; p < end; p++) {
		if (*p == '\\')
			p++;
		else if (*p == '"')
			return p + 1;
	}
	return end;
}

static const char *skip_value(const char *p, const char *end)
{
	int depth = 0;
	while (p < end) {
		char c = *p;
		if (c == '"') {
			p = skip_string(p, end);
		} else if (c == '{' || c == '[') {
			depth++;
			p++;
		} else if (c == '}' || c == ']') {
			if (depth == 0)
				return p;
			depth--;
			p++;
		} else if (c == ',' && depth == 0) {
			return p;
		} else {
			p++;
		}
		if (depth == 0 && (c == '"' || c == '}' || c == ']'))
			return p;
	}
	return p;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Does the raw JSON string body [ks, ke) decode to name? (ASCII names.) */
static int key_equals(const char *ks, const char *ke, const char *name, size_t nlen)
{
	size_t o = 0;
	for (const char *p = ks; p < ke; p++, o++) {
		char c = *p;
		if (c == '\\' && p + 1 < ke) {
			char e = *++p;
			if (e == 'u') {
				if (ke - p < 5)
					return 0;
				int v = 0;
				for (int k = 1; k <= 4; k++) {
					int h = hexval(p[k]);
					if (h < 0)
						return 0;
					v = v * 16 + h;
				}
				if (v >= 0x80)
					return 0;
				c = (char)v;
				p += 4;
			} else {
				c = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'b' ? '\b'
				    : e == 'f' ? '\f' : e;
			}
		}
		if (o >= nlen || name[o] != c)
			return 0;
	}
	return o == nlen;
}

int raw_next_member(const char *text, size_t len, const char **at, raw_pair *m)
{
	const char *p = *at, *end = text + len;
	p = raw_skip_ws(p ? p : text, end);
	if (p >= end || *p != (*at ? ',' : '{'))
		return 0;
	p = raw_skip_ws(p + 1, end);
	if (p >= end || *p != '"')
		return 0;
	m->ks = p + 1;
	p = skip_string(p, end);
	m->ke = p - 1;
	p = raw_skip_ws(p, end);
	if (p >= end || *p != ':')
		return 0;
	m->vs = raw_skip_ws(p + 1, end);
	p = skip_value(m->vs, end);
	m->ve = p;
	while (m->ve > m->vs &&
	       (m->ve[-1] == ' ' || m->ve[-1] == '\t' || m->ve[-1] == '\n' || m->ve[-1] == '\r'))
		m->ve--;
	*at = p;
	return 1;
}

int raw_pair_named(const raw_pair *m, const char *name)
{
	return key_equals(m->ks, m->ke, name, strlen(name));
}

int raw_member_find(const char *text, size_t len, const char *name,
               const char **vstart, const char **vend)
{
	const char *at = NULL;
	raw_pair m;
	while (raw_next_member(text, len, &at, &m)) {
		if (raw_pair_named(&m, name)) {
			*vstart = m.vs;
			*vend = m.ve;
			return 1;
		}
	}
	return 0;
}

/* How many \u0000 escapes the strings of the JSON text [s, e) hold. */
static size_t count_nul(const char *s, const char *e)
{
	size_t n = 0;
	int in_str = 0;
	for (const char *p = s; p < e; p++) {
		if (!in_str) {
			in_str = *p == '"';
		} else if (*p == '"') {
			in_str = 0;
		} else if (*p == '\\' && p + 1 < e) {
			n += e - p >= 6 && memcmp(p + 1, "u0000", 5) == 0;
			p++; /* the escaped character: never a quote that ends it */
		}
	}
	return n;
}

int raw_nul_only_in(const char *text, size_t len, const char *name)
{
	size_t all = memmem(text, len, "\\u0000", 6) ? count_nul(text, text + len) : 0, in = 0;
	if (all == 0)
		return 1;
	/* counted against the whole text: a member the scan did not reach
	 * counts as outside */
	const char *at = NULL;
	raw_pair m;
	while (raw_next_member(text, len, &at, &m))
		if (raw_pair_named(&m, name))
			in += count_nul(m.vs, m.ve);
	return in == all;
}

int raw_names_have_nul(const char *s, const char *e)
{
	const char *at = NULL;
	raw_pair m;
	while (raw_next_member(s, (size_t)(e - s), &at, &m))
		if (count_nul(m.ks - 1, m.ke + 1))
			return 1;
	return 0;
}

int raw_value_has_nul(const char *s, const char *e, const char *name)
{
	const char *at = NULL;
	raw_pair m;
	while (raw_next_member(s, (size_t)(e - s), &at, &m))
		if (raw_pair_named(&m, name) && count_nul(m.vs, m.ve))
			return 1;
	return 0;
}

/* Copy JSON text dropping whitespace outside strings. */
unsigned char *raw_minify(const char *s, const char *e, size_t *outlen)
{
	unsigned char *out = malloc((size_t)(e - s) + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	int in_str = 0;
	for (const char *p = s; p < e; p++) {
		char c = *p;
		if (in_str) {
			out[o++] = (unsigned char)c;
			if (c == '\\' && p + 1 < e)
				out[o++] = (unsigned char)*++p;
			else if (c == '"')
				in_str = 0;
		} else if (c == '"') {
			in_str = 1;
			out[o++] = (unsigned char)c;
		} else if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			out[o++] = (unsigned char)c;
		}
	}
	*outlen = o;
	return out;
}

static int b64val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z') return c - 'A';
	if (c >= 'a' && c <= 'z') return c - 'a' + 26;
	if (c >= '0' && c <= '9') return c - '0' + 52;
	if (c == '+') return 62;
	if (c == '/') return 63;
	return -1;
}

/* Standard base64, padding optional. Returns 0, or -1 on a bad character. */
int raw_base64_decode(const char *in, unsigned char **out, size_t *outlen)
{
	size_t len = strlen(in);
	while (len > 0 && in[len - 1] == '=')
		len--;
	if (strlen(in) - len > 2 || len % 4 == 1)
		return -1;
	unsigned char *buf = malloc(len * 3 / 4 + 1);
	if (!buf)
		return -1;
	size_t o = 0;
	unsigned int acc = 0;
	int bits = 0;
	for (size_t i = 0; i < len; i++) {
		int v = b64val((unsigned char)in[i]);
		if (v < 0) {
			free(buf);
			return -1;
		}
		acc = (acc << 6) | (unsigned int)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			buf[o++] = (unsigned char)(acc >> bits);
		}
	}
	*out = buf;
	*outlen = o;
	return 0;
}
