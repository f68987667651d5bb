/* clock.h: the one monotonic clock of the hub, in milliseconds. */
#ifndef TXHUB_CLOCK_H
#define TXHUB_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t clock_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The wall clock, in milliseconds since the epoch: for times that mean a
 * date (forward.not_before), never for intervals. */
static inline int64_t clock_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The time ms from now on the clock pthread_cond_timedwait() reads by
 * default (CLOCK_REALTIME): a condition variable's deadline. */
static inline struct timespec clock_deadline(int64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

#endif
