/* html.h: writing HTML and URLs for the web console, where everything a
 * producer wrote (keys, payloads, reasons, header values, rejected bytes)
 * must reach the page as text, never as markup.
 *
 * Pure: no I/O, no state; any thread may call these. Each appends to an
 * sbuf the caller owns (a failed allocation sets its oom flag). */
#ifndef TXHUB_HTML_H
#define TXHUB_HTML_H

#include <stddef.h>

#include "sbuf.h"

/* s as HTML text, safe both between tags and inside a double- or
 * single-quoted attribute value: & < > " ' become entities. So that what
 * is shown is what is stored, and nothing can move or hide text, control
 * characters (C0 but tab and newline, DEL, C1) and every byte of invalid
 * UTF-8 are shown as \xNN, and the invisible bidirectional controls
 * (U+200E, U+200F, U+202A..U+202E, U+2066..U+2069) as \u{NNNN}. */
void html_text(sbuf *b, const char *s);
void html_text_n(sbuf *b, const char *s, size_t len);

/* s as a value that must come back as it is (a form field a browser
 * sends back, such as an id): only & < > " ' become entities, everything
 * else is kept, so it is for text that is valid UTF-8 without control
 * characters (ids are checked to be). What a person reads goes through
 * html_text(). */
void html_attr(sbuf *b, const char *s);

/* s percent-encoded as a URL query value: every byte but A-Z a-z 0-9
 * - . _ ~ becomes %XX. The result is plain ASCII, still to be written
 * with html_text() inside an attribute (for the &). */
void html_url_param(sbuf *b, const char *s);

/* The bytes as a hex dump: lines of "OFFSET  16 hex bytes  |text|", the
 * text column holding printable ASCII and '.' for anything else, escaped
 * as HTML. At most max_bytes bytes; a line says how many more there
 * were. */
void html_hexdump(sbuf *b, const unsigned char *p, size_t len, size_t max_bytes);

/* The bytes as hex pairs, one space between them ("7b 0a ff"), that a
 * browser may wrap at any space: a preview for a narrow column. At most
 * max_bytes; a line says how many more there were. */
void html_hex_pairs(sbuf *b, const unsigned char *p, size_t len, size_t max_bytes);

#endif
