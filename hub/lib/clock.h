/* clock.h: the one clock of the hub: the monotonic clock for intervals and
 * timeouts, the wall clock for dates, and the deadlines that condition
 * variables wait for. Header-only; any thread may call these. */
#ifndef TXHUB_CLOCK_H
#define TXHUB_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* The monotonic clock as it is read: every interval below is made of it. */
static inline struct timespec clock_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts;
}

/* The monotonic clock in milliseconds. */
static inline int64_t clock_ms(void)
{
	struct timespec ts = clock_mono();
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The monotonic clock in microseconds (the bench's rates and latencies). */
static inline int64_t clock_us(void)
{
	struct timespec ts = clock_mono();
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The wall clock, in milliseconds since the epoch: for times that mean a
 * date, never for intervals. Dates that PostgreSQL compares (the due times
 * of forward.not_before, forward.max_delay) use PostgreSQL's clock, never
 * this one (store_db_now_ms()); the hub compares the two (hub_batch.c). For the tests only, TXHUB_TEST_CLOCK_OFFSET_MS
 * (milliseconds, may be negative) moves it: a hub whose clock is off. */
static inline int64_t clock_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	const char *off = getenv("TXHUB_TEST_CLOCK_OFFSET_MS");
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + (off ? strtoll(off, NULL, 10) : 0);
}

/* ts plus ms (ms >= 0), the nanoseconds kept below a second. */
static inline struct timespec clock_add_ms(struct timespec ts, int64_t ms)
{
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

/* The time ms from now on the clock pthread_cond_timedwait() reads by
 * default (CLOCK_REALTIME): a condition variable's deadline. */
static inline struct timespec clock_deadline(int64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return clock_add_ms(ts, ms);
}

/* A condition variable that waits on the monotonic clock (a wall clock set
 * back cannot stretch its waits); its deadlines are clock_mono_deadline()'s.
 * Returns pthread_cond_init()'s result. */
static inline int clock_cond_init(pthread_cond_t *cv)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	int rc = pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
	return rc;
}

/* The time ms from now on the monotonic clock: the deadline of a condition
 * variable made by clock_cond_init(). */
static inline struct timespec clock_mono_deadline(int64_t ms)
{
	return clock_add_ms(clock_mono(), ms);
}

#endif
