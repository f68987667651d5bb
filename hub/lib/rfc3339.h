/* rfc3339.h: RFC 3339 date-times with a zone (forward.not_before,
 * docs/consumers.md: Delayed delivery).
 *
 * The internet profile of ISO 8601 (RFC 3339 §5.6): YYYY-MM-DDTHH:MM:SS, an
 * optional fraction of a second, and a zone, Z or +HH:MM / -HH:MM. "T" and
 * "Z" may be lower case (§5.6 note). Nothing else: no time without a zone,
 * no week or ordinal dates, no leading or trailing spaces.
 *
 * Pure logic, no I/O, no locale and no TZ: unit-tested in
 * tests/unit/test_rfc3339.c and fuzzed with the envelope. */
#ifndef TXHUB_RFC3339_H
#define TXHUB_RFC3339_H

#include <stddef.h>
#include <stdint.h>

/* Parse s[0..len) into milliseconds since 1970-01-01T00:00:00Z. A fraction
 * finer than a millisecond is rounded up (a due time is never early); a
 * leap second (:60, RFC 3339 §5.7) is read as the first second of the next minute. Years
 * 1970 to 9999 only (zone applied). Returns 0, or -1 with the reason (a
 * short English phrase) in err; *ms is written only on success. */
int rfc3339_parse(const char *s, size_t len, int64_t *ms, char *err, size_t errsz);

/* Format ms (since the epoch, UTC) as YYYY-MM-DDTHH:MM:SS.mmmZ into out
 * (at least 25 bytes). Returns out. */
const char *rfc3339_format(int64_t ms, char *out, size_t outsz);

#endif
