/* duration.h: durations as operators write them (docs/admin.md: Admin commands: `90s`, `15m`,
 * `12h`, `7d`) and ages as people read them.
 *
 * Pure logic, no I/O: unit-tested in tests/unit/test_duration.c. Any thread
 * may call these; they keep no state. */
#ifndef TXHUB_DURATION_H
#define TXHUB_DURATION_H

#include <stddef.h>
#include <stdint.h>

/* The longest duration accepted: 36500 days (about 100 years). Anything
 * longer is a typo, and PostgreSQL's interval arithmetic stays far away
 * from its limits. */
#define DURATION_MAX_MS (36500LL * 86400000LL)

/* Parse s into milliseconds. Accepted: one or more <digits><unit> parts
 * with unit s, m, h or d, units in descending order, each at most once
 * ("90s", "15m", "12h", "7d", "1h30m", "1d12h"). Refused, with the reason
 * in err: empty text, a part without a unit ("90"), an unknown unit
 * ("5ms", "5w", "5H"), a sign ("-5m", "+5m"), spaces, units out of order
 * or repeated ("30m1h", "1h1h"), and anything above DURATION_MAX_MS. A
 * total of zero ("0s", "0m0s") is well-formed: no time at all. Returns 0 or -1; *ms is written only on
 * success. */
int duration_parse(const char *s, int64_t *ms, char *err, size_t errsz);

/* An age for people: "0s", "42s", "4m 12s", "3h 5m", "2d 4h" (the two
 * largest units; seconds are dropped from an hour up). Negative ages are
 * shown as "0s". Writes at most outsz bytes (NUL included); returns out. */
const char *duration_format(int64_t seconds, char *out, size_t outsz);

#endif
