/* html.c: see html.h. The escaping walks UTF-8 itself rather than trusting
 * it: a page holds bytes from producers, and a browser that met an invalid
 * sequence would guess, where we show the bytes. */
#include "html.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "utf8.h"

static int invisible_bidi(uint32_t cp)
{
	return cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
	       (cp >= 0x2066 && cp <= 0x2069);
}

static void put_hex_bytes(sbuf *b, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sbuf_printf(b, "\\x%02x", p[i]);
}

/* One ASCII character as HTML text. */
static void put_ascii(sbuf *b, unsigned char c)
{
	switch (c) {
	case '&': sbuf_puts(b, "&amp;"); return;
	case '<': sbuf_puts(b, "&lt;"); return;
	case '>': sbuf_puts(b, "&gt;"); return;
	case '"': sbuf_puts(b, "&quot;"); return;
	case '\'': sbuf_puts(b, "&#39;"); return;
	default: break;
	}
	if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
		put_hex_bytes(b, &c, 1);
	else
		sbuf_put(b, &c, 1);
}

void html_text_n(sbuf *b, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;
	while (i < len) {
		uint32_t cp;
		size_t n = txhubi_utf8_decode(p + i, len - i, &cp);
		if (n == 0)
			put_hex_bytes(b, p + i, n = 1);
		else if (n == 1)
			put_ascii(b, p[i]);
		else if (cp >= 0x80 && cp <= 0x9f)
			put_hex_bytes(b, p + i, n);
		else if (invisible_bidi(cp))
			sbuf_printf(b, "\\u{%04x}", (unsigned)cp);
		else
			sbuf_put(b, p + i, n);
		i += n;
	}
}

void html_text(sbuf *b, const char *s)
{
	if (s)
		html_text_n(b, s, strlen(s));
}

void html_attr(sbuf *b, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
		if (strchr("&<>\"'", *p))
			put_ascii(b, *p);
		else
			sbuf_put(b, p, 1);
	}
}

void html_url_param(sbuf *b, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		    *p == '-' || *p == '.' || *p == '_' || *p == '~')
			sbuf_put(b, p, 1);
		else
			sbuf_printf(b, "%%%02X", *p);
	}
}

/* The line that says a value was cut. */
static void more_bytes(sbuf *b, size_t shown, size_t len)
{
	if (shown < len)
		sbuf_printf(b, "... %zu more byte(s)\n", len - shown);
}

void html_hex_pairs(sbuf *b, const unsigned char *p, size_t len, size_t max_bytes)
{
	size_t shown = len < max_bytes ? len : max_bytes;
	for (size_t i = 0; i < shown; i++)
		sbuf_printf(b, i + 1 < shown ? "%02x " : "%02x\n", p[i]);
	more_bytes(b, shown, len);
}

void html_hexdump(sbuf *b, const unsigned char *p, size_t len, size_t max_bytes)
{
	size_t shown = len < max_bytes ? len : max_bytes;
	for (size_t off = 0; off < shown; off += 16) {
		sbuf_printf(b, "%08zx  ", off);
		for (size_t i = 0; i < 16; i++) {
			if (off + i < shown)
				sbuf_printf(b, "%02x ", p[off + i]);
			else
				sbuf_puts(b, "   ");
			if (i == 7)
				sbuf_puts(b, " ");
		}
		sbuf_puts(b, " |");
		for (size_t i = 0; i < 16 && off + i < shown; i++) {
			unsigned char c = p[off + i];
			put_ascii(b, c >= 0x20 && c < 0x7f ? c : '.');
		}
		sbuf_puts(b, "|\n");
	}
	more_bytes(b, shown, len);
}
