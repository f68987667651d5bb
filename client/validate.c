/* validate.c: the checks every input passes where it enters the library,
 * the same the hub applies (docs/producers.md: Envelope fields), so bad input fails here, before
 * anything is sent, with a reason that names the field. The hub keeps its
 * own copy of these rules in hub/proto/envelope.c; the shared test vectors
 * (tests/vectors) hold both to the same answers. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../hub/lib/topic_name.h" /* the hub's checks, compiled into this library */
#include "../hub/lib/utf8.h"
#include "internal.h"

txhub_status txhubi_fail(txhub_status st, char *errstr, size_t errstr_size, const char *fmt, ...)
{
	if (errstr && errstr_size) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(errstr, errstr_size, fmt, ap);
		va_end(ap);
	}
	return st;
}

int txhub_valid_utf8(const void *s, size_t len) { return txhubi_utf8_valid(s, len); }

/* C0, DEL and C1 (U+0080..U+009F): Unicode's control characters. */
static int is_control(uint32_t cp) { return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f); }

int txhub_valid_id(const char *s, size_t len, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;
	if (!p || len == 0 || len > max)
		return 0;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t n = txhubi_utf8_decode(p + i, len - i, &cp);
		if (!n || is_control(cp))
			return 0;
		i += n;
	}
	return 1;
}

txhub_status txhubi_check_id(const char *what, const void *s, size_t len, size_t max,
                         char *errstr, size_t errstr_size)
{
	if (!s || len == 0)
		return txhubi_fail(TXHUB_ERR_INVALID, errstr, errstr_size, "%s is empty", what);
	if (len > max)
		return txhubi_fail(TXHUB_ERR_INVALID, errstr, errstr_size,
		               "%s is %zu bytes, longer than %zu", what, len, max);
	if (memchr(s, '\0', len))
		return txhubi_fail(TXHUB_ERR_INVALID, errstr, errstr_size, "%s contains a NUL byte", what);
	if (!txhub_valid_utf8(s, len))
		return txhubi_fail(TXHUB_ERR_INVALID, errstr, errstr_size, "%s is not valid UTF-8", what);
	if (!txhub_valid_id(s, len, max))
		return txhubi_fail(TXHUB_ERR_INVALID, errstr, errstr_size,
		               "%s contains a control character", what);
	return TXHUB_OK;
}

_Static_assert(TXHUB_TOPIC_MAX == TOPIC_NAME_MAX, "one limit on topic names");

int txhub_valid_topic(const char *s) { return s && txhubi_topic_valid(s, strlen(s)); }

const char *txhub_status_name(txhub_status st)
{
	switch (st) {
	case TXHUB_OK: return "ok";
	case TXHUB_ERR_INVALID: return "invalid";
	case TXHUB_ERR_TOO_LARGE: return "too_large";
	case TXHUB_ERR_KAFKA: return "kafka";
	case TXHUB_ERR_FATAL: return "fatal";
	case TXHUB_ERR_DB: return "db";
	case TXHUB_ERR_UNAUTHORIZED: return "unauthorized";
	case TXHUB_ERR_LOST: return "lost";
	case TXHUB_ERR_NOMEM: return "nomem";
	case TXHUB_ERR_STATE: return "state";
	case TXHUB_ERR_DB_RETRY: return "db_retry";
	}
	return "unknown";
}

int txhub_status_retriable(txhub_status st)
{
	return st == TXHUB_ERR_KAFKA || st == TXHUB_ERR_DB_RETRY || st == TXHUB_ERR_NOMEM;
}
