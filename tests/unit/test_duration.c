/* Unit tests for duration: the forms docs/admin.md: Admin commands names, combined forms,
 * and every malformed one refused with a reason; readable ages. */
#include <criterion/criterion.h>
#include <string.h>

#include "duration.h"

static const struct {
	const char *text;
	long long ms;
} good[] = {
	{"90s", 90000},
	{"15m", 900000},
	{"12h", 43200000},
	{"7d", 604800000},
	{"1s", 1000},
	{"1h30m", 5400000},
	{"1d12h", 129600000},
	{"2m30s", 150000},
	{"1d1h1m1s", 90061000},
	{"1h0m", 3600000},
	{"007d", 604800000},
	{"36500d", 36500LL * 86400000},
	{"876000h", 36500LL * 86400000},
	{"0s", 0}, /* no time at all: `purge --older-than 0s` is every finished row */
	{"0m0s", 0},
	{"0d", 0},
};

Test(duration, accepts_contract_and_combined_forms)
{
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		int64_t ms = -1;
		char err[256] = "";
		cr_expect_eq(duration_parse(good[i].text, &ms, err, sizeof err), 0, "\"%s\": %s",
		             good[i].text, err);
		cr_expect_eq(ms, good[i].ms, "\"%s\" gave %lld", good[i].text, (long long)ms);
	}
}

static const struct {
	const char *text;
	const char *why; /* a word of the reason */
} bad[] = {
	{"", "empty"},
	{"0", "without a unit"},
	{"90", "without a unit"},
	{"-5m", "sign"},
	{"+5m", "sign"},
	{"5ms", "unknown unit"},
	{"5w", "unknown unit"},
	{"5H", "unknown unit"},
	{"5 m", "unknown unit"},
	{" 5m", "expected a number"},
	{"5m ", "expected a number"},
	{"m", "expected a number"},
	{"1.5h", "unknown unit"},
	{"30m1h", "largest down"},
	{"1h1h", "largest down"},
	{"1h30", "without a unit"},
	{"36501d", "too long"},
	{"876001h", "too long"},
	{"9223372036854775807s", "too long"},
	{"99999999999999999999999d", "too long"},
	{"1d99999999999999h", "too long"},
};

Test(duration, refuses_malformed_with_a_reason)
{
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int64_t ms = 42;
		char err[256] = "";
		cr_expect_eq(duration_parse(bad[i].text, &ms, err, sizeof err), -1, "\"%s\" accepted",
		             bad[i].text);
		cr_expect_eq(ms, 42, "\"%s\" wrote the result", bad[i].text);
		cr_expect(strstr(err, bad[i].why) != NULL, "\"%s\": \"%s\" lacks \"%s\"", bad[i].text,
		          err, bad[i].why);
		cr_expect(strstr(err, "not a duration") != NULL, "\"%s\": %s", bad[i].text, err);
	}
	int64_t ms;
	char err[64];
	cr_expect_eq(duration_parse(NULL, &ms, err, sizeof err), -1);
}

Test(duration, formats_ages_with_two_units)
{
	static const struct {
		long long s;
		const char *text;
	} cases[] = {
		{-5, "0s"},         {0, "0s"},           {42, "42s"},      {60, "1m 0s"},
		{252, "4m 12s"},    {3600, "1h 0m"},     {11100, "3h 5m"}, {86399, "23h 59m"},
		{86400, "1d 0h"},   {187200, "2d 4h"},   {31536000, "365d 0h"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char out[32];
		cr_expect_str_eq(duration_format(cases[i].s, out, sizeof out), cases[i].text, "%lld s",
		                 cases[i].s);
	}
	char tiny[4];
	cr_expect_str_eq(duration_format(187200, tiny, sizeof tiny), "2d ", "cut to the buffer");
}
