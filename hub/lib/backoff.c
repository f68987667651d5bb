/* backoff.c: see backoff.h. */
#include "backoff.h"

#include <time.h>
#include <unistd.h>

#include "clock.h"

int64_t backoff_nominal(int64_t attempt, int64_t base_ms, int64_t max_ms)
{
	if (attempt < 1)
		attempt = 1;
	int64_t d = base_ms;
	for (int64_t i = 1; i < attempt && d < max_ms; i++)
		d = d > max_ms / 2 ? max_ms : d * 2;
	return d < max_ms ? d : max_ms;
}

int64_t backoff_delay(int64_t attempt, int64_t base_ms, int64_t max_ms, double rnd)
{
	int64_t d = backoff_nominal(attempt, base_ms, max_ms);
	if (rnd < 0)
		rnd = 0;
	if (rnd >= 1)
		rnd = 0.999999;
	int64_t low = d - d / 5;
	return low + (int64_t)((double)(d - low) * rnd);
}

double backoff_random(void)
{
	static __thread uint64_t s;
	if (!s) {
		struct timespec ts = clock_mono();
		s = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40) ^ 0x9e3779b97f4a7c15ull;
	}
	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	return (double)(s >> 11) / 9007199254740992.0;
}
