/* fuzz_answer.c: libFuzzer target for what a producer's check-back
 * endpoint sends back (status code and body) and for the request URL built
 * from ids. The reason written for a rejected answer must stay printable
 * ASCII: it goes to last_error and to the log. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkback.h"

static void check(int ok)
{
	if (!ok)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	long status = 100 + (long)data[0] * 2; /* 100..610, the 2xx band included */
	const char *body = (const char *)data + 1;
	size_t len = size - 1;
	char reason[300];
	checkback_answer a = checkback_parse_answer(status, body, len, reason, sizeof reason);
	check(a == CHECKBACK_COMMITTED || a == CHECKBACK_ROLLED_BACK || a == CHECKBACK_UNDECIDED ||
	      a == CHECKBACK_ERROR);
	if (status < 200 || status > 299)
		check(a == CHECKBACK_ERROR);
	if (a == CHECKBACK_ERROR || a == CHECKBACK_UNDECIDED) {
		size_t n = strlen(reason);
		check(n > 0 && n < sizeof reason);
		for (size_t i = 0; i < n; i++)
			check((unsigned char)reason[i] >= 0x20 && (unsigned char)reason[i] < 0x7f);
	}

	/* the same bytes as ids and as a base URL */
	char biz[65], mk[256], base[128];
	size_t bl = len < 64 ? len : 64, ml = len < 255 ? len : 255, ul = len < 127 ? len : 127;
	memcpy(biz, body, bl);
	biz[bl] = '\0';
	memcpy(mk, body, ml);
	mk[ml] = '\0';
	memcpy(base, body, ul);
	base[ul] = '\0';
	char *url = checkback_request_url(base, biz, mk);
	check(url != NULL);
	/* nothing after the base but unreserved characters, '%', '=', '&' */
	const char *q = url + strcspn(base, "#");
	for (const char *p = q; *p; p++)
		check(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~%=&?",
		             *p) != NULL);
	free(url);
	(void)checkback_url_allowed(base, biz);
	return 0;
}
