/* utf8.c: see utf8.h. */
#include "utf8.h"

size_t txhubi_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	unsigned char c = s[0];
	size_t len;
	uint32_t v, min;
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2, v = c & 0x1f, min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3, v = c & 0x0f, min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4, v = c & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3f);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return len;
}

int txhubi_utf8_valid(const void *s, size_t n)
{
	const unsigned char *p = s;
	if (!p && n)
		return 0;
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		size_t len = txhubi_utf8_decode(p + i, n - i, &cp);
		if (!len)
			return 0;
		i += len;
	}
	return 1;
}

size_t txhubi_utf8_complete(const unsigned char *p, size_t n)
{
	for (size_t back = 1; back <= 3 && back <= n; back++) {
		unsigned char c = p[n - back];
		if ((c & 0xc0) == 0x80)
			continue; /* a continuation byte: look further back */
		size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
		return need > back ? n - back : n;
	}
	return n;
}
