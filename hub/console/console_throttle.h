/* console_throttle.h: how many logins with a wrong token each client
 * address may try (docs/console.md: Web console tells the rules to
 * operators), and the log lines about refused logins.
 *
 * - An address may fail `failures` times within window_ms of its first
 *   failure. The try that uses the last of them starts a wait of
 *   window_ms, during which every login from the address is refused (the
 *   console answers 429 with Retry-After) without its token being looked
 *   at: the right token too. A login that succeeds forgets the failures.
 *   Refusing is cheaper than slowing the answer down: a delayed answer
 *   would hold one of the console's connection threads for its delay.
 * - IPv4 addresses count one by one; IPv6 ones by their /64 prefix (one
 *   host is usually given a whole /64 and may take any address in it).
 * - Memory is bounded: CONSOLE_THROTTLE_SLOTS addresses at once. A slot
 *   is taken again once its window has passed and its refusals are
 *   logged. When every slot holds an address still within its window, the
 *   addresses beyond share one more slot, with one allowance among them:
 *   many addresses then gain no more tries than one.
 * - A try is counted when it begins (console_throttle_begin()), before
 *   the token is compared, so requests sent in parallel get no more tries
 *   than requests sent one after the other.
 * - Log lines: the first refusal from an address is logged at once; the
 *   refusals that follow are counted and logged as one line per address
 *   per CONSOLE_THROTTLE_LOG_MS (console_throttle_sweep()).
 *
 * Pure: the time is an argument and lines are handed to the caller. Any
 * thread may call any function at once (a mutex inside). */
#ifndef TXHUB_CONSOLE_THROTTLE_H
#define TXHUB_CONSOLE_THROTTLE_H

#include <stddef.h>
#include <stdint.h>

#define CONSOLE_THROTTLE_SLOTS 1024
#define CONSOLE_THROTTLE_LOG_MS 60000
/* Room for one log line. */
#define CONSOLE_THROTTLE_LINE 384

typedef struct console_throttle console_throttle;

/* failures >= 1 tries per window_ms >= 1. NULL when out of memory. */
console_throttle *console_throttle_new(unsigned failures, int64_t window_ms);
/* NULL is fine. Refusals not logged yet are lost: sweep with all first. */
void console_throttle_free(console_throttle *t);

/* Before the token of a login from peer (an address as text, as
 * http_peer() gives it) is compared, at now_ms: returns 0 when it may be
 * compared (the try is counted as failed until console_throttle_end()
 * says otherwise), or the whole seconds, at least 1, until the address
 * may try again: the login is refused, and counted for the log. line gets
 * a line to log now, or "". */
int64_t console_throttle_begin(console_throttle *t, const char *peer, int64_t now_ms,
                               char line[CONSOLE_THROTTLE_LINE]);

/* After the comparison: ok forgets peer's failures; else the refusal of
 * a login as name (checked by the caller; NULL: none) is counted for the
 * log, and line gets a line to log now, or "". */
void console_throttle_end(console_throttle *t, const char *peer, int ok, const char *name,
                          int64_t now_ms, char line[CONSOLE_THROTTLE_LINE]);

/* Hand emit the line of every address whose refusals are not logged yet
 * and whose last line is CONSOLE_THROTTLE_LOG_MS old (all: every one, at
 * the end). Called under the table's lock: emit must not call back. */
void console_throttle_sweep(console_throttle *t, int64_t now_ms, int all,
                            void (*emit)(void *ud, const char *line), void *ud);

#endif
