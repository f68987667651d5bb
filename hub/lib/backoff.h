/* backoff.h: exponential retry delays with jitter, for check-backs and
 * forwards. Pure; the caller supplies the random number. */
#ifndef TXHUB_BACKOFF_H
#define TXHUB_BACKOFF_H

#include <stdint.h>

/* Nominal delay before retry number `attempt` (1-based: the delay after the
 * first failed attempt is base_ms): base_ms * 2^(attempt-1), capped at
 * max_ms. Never overflows. */
int64_t backoff_nominal(int64_t attempt, int64_t base_ms, int64_t max_ms);

/* The nominal delay with jitter: uniformly within [80%, 100%] of it, chosen
 * by rnd in [0, 1). Spreads retries of messages that failed together. */
int64_t backoff_delay(int64_t attempt, int64_t base_ms, int64_t max_ms, double rnd);

/* A random number in [0, 1) from a thread-local xorshift generator. */
double backoff_random(void);

#endif
