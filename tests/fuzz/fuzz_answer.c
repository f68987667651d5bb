/* fuzz_answer.c: libFuzzer target for what a producer's check-back
 * endpoint sends back (status code and body), for the request URL built
 * from ids, and for the URL parser behind the allow list. The reason
 * written for a rejected answer must stay printable ASCII: it goes to
 * last_error and to the log. A URL the allow list could hold must be one
 * that libcurl, told CURLOPT_PATH_AS_IS as the checker does, reads back
 * with the same host, port and path: what is checked is what is asked. */
#include <curl/curl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkback_proto.h"

static void check(int ok)
{
	if (!ok)
		abort();
}

static int same(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* The normalized URL, read again as the checker's libcurl reads it. */
static void check_requested_as_checked(const checkback_url *u)
{
	CURLU *h = curl_url();
	check(h != NULL);
	check(curl_url_set(h, CURLUPART_URL, u->url, CURLU_PATH_AS_IS) == CURLUE_OK);
	char *host = NULL, *path = NULL, *port = NULL;
	curl_url_get(h, CURLUPART_HOST, &host, 0);
	curl_url_get(h, CURLUPART_PATH, &path, 0);
	curl_url_get(h, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
	check(same(host, u->host) && same(path, u->path) && port && atol(port) == u->port);
	curl_free(host);
	curl_free(path);
	curl_free(port);
	curl_url_cleanup(h);
}

static void check_url(const char *text)
{
	checkback_url u;
	char err[200], why[300];
	if (checkback_url_parse(text, &u, err, sizeof err) != 0) {
		check(u.url == NULL && strlen(err) > 0);
		return;
	}
	check(u.url && u.host && u.path && u.path[0] == '/' && u.port >= 0 && u.port < 65536);
	if (!u.unsafe) {
		check_requested_as_checked(&u);
		/* a safe URL is inside a list made of itself (without a query) */
		if (!u.has_query && !u.has_fragment && !strchr(text, ','))
			check(checkback_url_permitted(text, &u, why, sizeof why) == 1);
	} else {
		check(checkback_url_permitted("http://a.example", &u, why, sizeof why) == 0);
	}
	(void)checkback_allow_validate(text, err, sizeof err);
	checkback_url_clear(&u);
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
	check_url(base);
	return 0;
}
