/* form.c: see form.h. */
#include "form.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope.h"
#include "log.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decode s[0..len) into a new string; NULL with the reason in err. */
static char *decode(const char *s, size_t len, char *err, size_t errsz)
{
	char *out = malloc(len + 1);
	size_t o = 0;
	if (!out) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '+') {
			out[o++] = ' ';
		} else if (s[i] != '%') {
			out[o++] = s[i];
		} else if (i + 2 < len && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
			out[o++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
			i += 2;
		} else {
			snprintf(err, errsz, "a malformed %%-escape");
			free(out);
			return NULL;
		}
	}
	out[o] = '\0';
	if (memchr(out, '\0', o)) {
		snprintf(err, errsz, "a NUL byte (%%00)");
		free(out);
		return NULL;
	}
	if (!envelope_valid_utf8((const unsigned char *)out, o)) {
		snprintf(err, errsz, "text that is not UTF-8");
		free(out);
		return NULL;
	}
	return out;
}

/* Decode one "name=value" piece into f. */
static int add_field(form *f, const char *piece, size_t len, char *err, size_t errsz)
{
	const char *eq = memchr(piece, '=', len);
	size_t nlen = eq ? (size_t)(eq - piece) : len;
	char why[64];
	if (nlen == 0) {
		snprintf(err, errsz, "the form holds a field without a name");
		return -1;
	}
	form_field *fl = &f->fields[f->n];
	if (!(fl->name = decode(piece, nlen, why, sizeof why))) {
		snprintf(err, errsz, "a field name holds %s", why);
		return -1;
	}
	const char *v = eq ? eq + 1 : piece + len;
	if (!(fl->value = decode(v, (size_t)(piece + len - v), why, sizeof why))) {
		char shown[64];
		snprintf(err, errsz, "field %s holds %s", log_escape(fl->name, strlen(fl->name), shown,
		         sizeof shown), why);
		free(fl->name);
		fl->name = NULL;
		return -1;
	}
	f->n++;
	return 0;
}

int form_parse(const char *body, size_t len, size_t max_fields, form *out, char *err,
               size_t errsz)
{
	memset(out, 0, sizeof *out);
	size_t pieces = 0;
	for (size_t i = 0; i < len; i++)
		pieces += body[i] == '&';
	pieces++;
	if (pieces > max_fields) {
		snprintf(err, errsz, "the form has more than %zu fields", max_fields);
		return -1;
	}
	if (!(out->fields = calloc(pieces, sizeof *out->fields))) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	const char *p = body, *end = body + len;
	while (p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		size_t plen = amp ? (size_t)(amp - p) : (size_t)(end - p);
		/* an empty piece ("a=1&&b=2", a trailing '&') carries nothing */
		if (plen > 0 && add_field(out, p, plen, err, errsz) != 0) {
			form_free(out);
			return -1;
		}
		p += plen + 1;
	}
	return 0;
}

const char *form_get(const form *f, const char *name)
{
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->fields[i].name, name) == 0)
			return f->fields[i].value;
	return NULL;
}

size_t form_count(const form *f, const char *name)
{
	size_t n = 0;
	for (size_t i = 0; i < f->n; i++)
		n += strcmp(f->fields[i].name, name) == 0;
	return n;
}

static int listed(const char *const *names, const char *name)
{
	for (; names && *names; names++)
		if (strcmp(*names, name) == 0)
			return 1;
	return 0;
}

int form_check(const form *f, const char *const *allowed, const char *const *repeatable,
               char *err, size_t errsz)
{
	for (size_t i = 0; i < f->n; i++) {
		const char *name = f->fields[i].name;
		char shown[64];
		log_escape(name, strlen(name), shown, sizeof shown);
		if (!listed(allowed, name)) {
			snprintf(err, errsz, "unknown field \"%s\"", shown);
			return -1;
		}
		if (!listed(repeatable, name) && form_count(f, name) > 1) {
			snprintf(err, errsz, "field %s: given more than once", shown);
			return -1;
		}
	}
	return 0;
}

void form_free(form *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n; i++) {
		free(f->fields[i].name);
		free(f->fields[i].value);
	}
	free(f->fields);
	f->fields = NULL;
	f->n = 0;
}
