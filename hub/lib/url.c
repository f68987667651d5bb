/* url.c: see url.h. */
#include "url.h"

#include <string.h>
#include <strings.h>

int envelope_valid_url(const char *s)
{
	size_t skip;
	if (strncasecmp(s, "http://", 7) == 0)
		skip = 7;
	else if (strncasecmp(s, "https://", 8) == 0)
		skip = 8;
	else
		return 0;
	size_t len = strlen(s);
	if (len > ENVELOPE_URL_MAX || len == skip || s[skip] == '/' || s[skip] == '?')
		return 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c <= 0x20 || c >= 0x7f)
			return 0; /* no spaces, controls or raw non-ASCII */
	}
	return 1;
}
