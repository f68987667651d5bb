/* Unit tests for backoff: nominal exponential delays, the cap, jitter bounds and backoff_random. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>

#include "backoff.h"

/* Reference: base * 2^(n-1) capped at max, computed without overflow. */
static int64_t expected_nominal(int64_t n, int64_t base, int64_t max)
{
	if (base >= max)
		return max;
	int64_t d = base;
	for (int64_t i = 1; i < n; i++) {
		if (d > max / 2)
			return max;
		d *= 2;
	}
	return d < max ? d : max;
}

Test(backoff, nominal_first_values)
{
	cr_assert_eq(backoff_nominal(1, 1000, 300000), 1000);
	cr_assert_eq(backoff_nominal(2, 1000, 300000), 2000);
	cr_assert_eq(backoff_nominal(3, 1000, 300000), 4000);
	cr_assert_eq(backoff_nominal(4, 1000, 300000), 8000);
	cr_assert_eq(backoff_nominal(9, 1000, 300000), 256000);
	cr_assert_eq(backoff_nominal(10, 1000, 300000), 300000);
	cr_assert_eq(backoff_nominal(11, 1000, 300000), 300000);
	/* the check-back defaults: 10 s doubling, capped at 10 min */
	cr_assert_eq(backoff_nominal(1, 10000, 600000), 10000);
	cr_assert_eq(backoff_nominal(6, 10000, 600000), 320000);
	cr_assert_eq(backoff_nominal(7, 10000, 600000), 600000);
	cr_assert_eq(backoff_nominal(15, 10000, 600000), 600000);
}

Test(backoff, nominal_is_base_times_power_of_two)
{
	static const int64_t bases[] = {1, 3, 7, 1000, 10000, 123456789};
	for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++)
		for (int64_t n = 1, want = bases[b]; want <= INT64_MAX / 2; n++, want *= 2)
			cr_assert_eq(backoff_nominal(n, bases[b], INT64_MAX), want,
			             "attempt %lld base %lld", (long long)n, (long long)bases[b]);
}

Test(backoff, nominal_matches_reference_with_caps)
{
	static const int64_t bases[] = {1, 2, 999, 1000, 10000, 86400000};
	static const int64_t maxes[] = {1, 1000, 1001, 300000, 600000, 2592000000LL, INT64_MAX};
	for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++)
		for (size_t m = 0; m < sizeof maxes / sizeof maxes[0]; m++)
			for (int64_t n = 1; n <= 80; n++)
				cr_assert_eq(backoff_nominal(n, bases[b], maxes[m]),
				             expected_nominal(n, bases[b], maxes[m]),
				             "attempt %lld base %lld max %lld", (long long)n,
				             (long long)bases[b], (long long)maxes[m]);
}

Test(backoff, nominal_monotonic_and_capped)
{
	static const int64_t bases[] = {1, 5, 1000, 10000, INT64_MAX / 3, INT64_MAX};
	static const int64_t maxes[] = {1, 7000, 300000, 600000, INT64_MAX};
	for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++)
		for (size_t m = 0; m < sizeof maxes / sizeof maxes[0]; m++) {
			int64_t prev = 0;
			for (int64_t n = 1; n <= 200; n++) {
				int64_t d = backoff_nominal(n, bases[b], maxes[m]);
				cr_assert_geq(d, prev, "not monotonic at attempt %lld", (long long)n);
				cr_assert_leq(d, maxes[m], "over the cap at attempt %lld", (long long)n);
				cr_assert_gt(d, 0);
				prev = d;
			}
			cr_assert_eq(prev, maxes[m], "never reaches the cap");
		}
}

Test(backoff, base_above_max_is_capped)
{
	cr_assert_eq(backoff_nominal(1, 5000, 1000), 1000);
	cr_assert_eq(backoff_nominal(3, 5000, 1000), 1000);
}

Test(backoff, attempt_below_one_is_first_attempt)
{
	cr_assert_eq(backoff_nominal(0, 1000, 300000), 1000);
	cr_assert_eq(backoff_nominal(-5, 1000, 300000), 1000);
	cr_assert_eq(backoff_nominal(INT64_MIN, 1000, 300000), 1000);
}

Test(backoff, no_overflow_for_huge_attempts_and_base)
{
	cr_assert_eq(backoff_nominal(1000, 1000, 300000), 300000);
	cr_assert_eq(backoff_nominal(1000, 1, INT64_MAX), INT64_MAX);
	cr_assert_eq(backoff_nominal(1000, INT64_MAX / 2, INT64_MAX), INT64_MAX);
	cr_assert_eq(backoff_nominal(1000, INT64_MAX / 2 + 1, INT64_MAX), INT64_MAX);
	cr_assert_eq(backoff_nominal(1000, INT64_MAX, INT64_MAX), INT64_MAX);
	cr_assert_eq(backoff_nominal(2, INT64_MAX / 2, INT64_MAX), INT64_MAX - 1);
	cr_assert_eq(backoff_nominal(INT64_MAX, 1000, 2592000000LL), 2592000000LL);
	cr_assert_eq(backoff_nominal(62, 1, INT64_MAX), (int64_t)1 << 61);
	cr_assert_eq(backoff_nominal(63, 1, INT64_MAX), (int64_t)1 << 62);
	cr_assert_eq(backoff_nominal(64, 1, INT64_MAX), INT64_MAX);
	int64_t d = backoff_delay(1000, INT64_MAX, INT64_MAX, 0.999);
	cr_assert_gt(d, 0);
	cr_assert_geq(d, INT64_MAX - INT64_MAX / 5);
}

/* [80%, 100%] of the nominal delay: low = d - floor(d/5) = ceil(0.8 d). */
static void assert_in_band(int64_t delay, int64_t nominal, const char *what, double rnd)
{
	cr_assert_geq(delay, nominal - nominal / 5, "%s rnd=%.17g: %lld below 80%% of %lld", what,
	              rnd, (long long)delay, (long long)nominal);
	cr_assert_leq(delay, nominal, "%s rnd=%.17g: %lld above %lld", what, rnd, (long long)delay,
	              (long long)nominal);
}

Test(backoff, jitter_within_band_for_many_values)
{
	static const int64_t bases[] = {1, 4, 5, 1000, 10000, 86400000, INT64_MAX / 4};
	static const int64_t maxes[] = {300000, 600000, 2592000000LL, INT64_MAX};
	for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++)
		for (size_t m = 0; m < sizeof maxes / sizeof maxes[0]; m++)
			for (int64_t n = 1; n <= 70; n += 3) {
				int64_t nominal = backoff_nominal(n, bases[b], maxes[m]);
				for (int i = 0; i < 200; i++) {
					double rnd = i < 100 ? i / 100.0 : backoff_random();
					assert_in_band(backoff_delay(n, bases[b], maxes[m], rnd), nominal,
					               "band", rnd);
				}
			}
}

Test(backoff, jitter_extremes)
{
	double below_one = nextafter(1.0, 0.0);
	cr_assert_lt(below_one, 1.0);
	/* rnd = 0 gives exactly the low end */
	cr_assert_eq(backoff_delay(1, 10000, 600000, 0.0), 8000);
	cr_assert_eq(backoff_delay(7, 10000, 600000, 0.0), 480000);
	/* just below 1 gives (almost) the nominal delay, never more */
	int64_t hi = backoff_delay(1, 10000, 600000, below_one);
	cr_assert_geq(hi, 9999);
	cr_assert_leq(hi, 10000);
	hi = backoff_delay(20, 10000, 600000, below_one);
	cr_assert_geq(hi, 599999);
	cr_assert_leq(hi, 600000);
	/* out-of-range rnd is clamped into the band */
	assert_in_band(backoff_delay(3, 1000, 300000, -0.5), 4000, "negative", -0.5);
	assert_in_band(backoff_delay(3, 1000, 300000, 1.0), 4000, "one", 1.0);
	assert_in_band(backoff_delay(3, 1000, 300000, 7.0), 4000, "seven", 7.0);
	cr_assert_eq(backoff_delay(3, 1000, 300000, -0.5), 3200);
}

Test(backoff, jitter_midpoint_and_linearity)
{
	cr_assert_eq(backoff_delay(1, 10000, 600000, 0.5), 9000);
	cr_assert_eq(backoff_delay(2, 10000, 600000, 0.25), 17000);
	int64_t prev = 0;
	for (int i = 0; i < 1000; i++) {
		int64_t d = backoff_delay(4, 10000, 600000, i / 1000.0);
		cr_assert_geq(d, prev, "jitter not monotonic in rnd at %d", i);
		prev = d;
	}
}

Test(backoff, jitter_spreads_retries)
{
	/* messages that failed together must not all retry at the same instant */
	int64_t lo = INT64_MAX, hi = 0;
	int distinct_low = 0, distinct_high = 0;
	for (int i = 0; i < 2000; i++) {
		int64_t d = backoff_delay(1, 10000, 600000, backoff_random());
		assert_in_band(d, 10000, "random", 0);
		if (d < lo)
			lo = d;
		if (d > hi)
			hi = d;
		if (d < 8500)
			distinct_low++;
		if (d > 9500)
			distinct_high++;
	}
	cr_assert_lt(lo, 8200);
	cr_assert_gt(hi, 9800);
	cr_assert_gt(distinct_low, 0);
	cr_assert_gt(distinct_high, 0);
}

Test(backoff, random_in_unit_interval)
{
	double sum = 0, lo = 1, hi = 0;
	int n = 200000;
	for (int i = 0; i < n; i++) {
		double r = backoff_random();
		cr_assert(r >= 0.0 && r < 1.0, "backoff_random() = %.17g", r);
		sum += r;
		if (r < lo)
			lo = r;
		if (r > hi)
			hi = r;
	}
	double mean = sum / n;
	cr_assert(mean > 0.49 && mean < 0.51, "mean %f", mean);
	cr_assert_lt(lo, 0.001);
	cr_assert_gt(hi, 0.999);
}

Test(backoff, random_not_constant)
{
	double a = backoff_random(), b = backoff_random(), c = backoff_random();
	cr_assert(a != b || b != c);
}
