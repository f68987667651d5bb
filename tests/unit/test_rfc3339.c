/* Unit tests for rfc3339: the forms RFC 3339 §5.6 allows, against epoch
 * milliseconds computed independently (date -u +%s); every malformed or
 * zoneless form refused with a reason; the round trip through
 * rfc3339_format. */
#include <criterion/criterion.h>
#include <string.h>

#include "rfc3339.h"

static const struct {
	const char *text;
	long long ms;
} good[] = {
	{"1970-01-01T00:00:00Z", 0},
	{"1970-01-01T00:00:00.001Z", 1},
	{"2026-11-28T12:00:00Z", 1795867200000LL},
	{"2026-11-28t12:00:00z", 1795867200000LL},
	{"2026-11-28T13:00:00+01:00", 1795867200000LL},
	{"2026-11-28T06:30:00-05:30", 1795867200000LL},
	{"2026-11-28T12:00:00.5Z", 1795867200500LL},
	{"2026-11-28T12:00:00.123Z", 1795867200123LL},
	{"2026-11-28T12:00:00.123000000Z", 1795867200123LL},
	{"2026-11-28T12:00:00.1230001Z", 1795867200124LL}, /* rounded up: never early */
	{"2024-02-29T00:00:00Z", 1709164800000LL},          /* a leap day */
	{"2000-02-29T23:59:59Z", 951868799000LL},           /* 2000 is a leap year */
	{"2016-12-31T23:59:60Z", 1483228800000LL},          /* a leap second */
	{"1970-01-01T01:00:00+01:00", 0},
	{"9999-12-31T23:59:59Z", 253402300799000LL},
	{"2026-01-01T00:00:00+23:59", 1767139260000LL},
};

Test(rfc3339, parses_the_profile)
{
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		int64_t ms = -1;
		char err[256] = "";
		cr_expect_eq(rfc3339_parse(good[i].text, strlen(good[i].text), &ms, err, sizeof err), 0,
		             "\"%s\": %s", good[i].text, err);
		cr_expect_eq(ms, good[i].ms, "\"%s\" gave %lld", good[i].text, (long long)ms);
	}
}

static const struct {
	const char *text;
	const char *why; /* a word of the reason */
} bad[] = {
	{"", "date"},
	{"2026-11-28", "date-time"},
	{"2026-11-28T12:00:00", "no zone"},
	{"2026-11-28T12:00:00.5", "no zone"},
	{"2026-11-28 12:00:00Z", "date-time"},
	{"2026-11-28T12:00Z", "time"},
	{"2026-11-28T12:00:00+0100", "zone offset"},
	{"2026-11-28T12:00:00+01", "zone offset"},
	{"2026-11-28T12:00:00+24:00", "no such zone"},
	{"2026-11-28T12:00:00+01:60", "no such zone"},
	{"2026-11-28T12:00:00UTC", "no zone"},
	{"2026-11-28T12:00:00Z ", "after the zone"},
	{" 2026-11-28T12:00:00Z", "date"},
	{"2026-11-28T12:00:00.Z", "digits after the dot"},
	{"2026-11-28T12:00:00.1234567890Z", "at most 9"},
	{"2026-13-01T00:00:00Z", "no such date"},
	{"2026-00-01T00:00:00Z", "no such date"},
	{"2026-02-29T00:00:00Z", "no such date"},
	{"1900-02-29T00:00:00Z", "no such date"},
	{"2026-04-31T00:00:00Z", "no such date"},
	{"2026-11-00T00:00:00Z", "no such date"},
	{"2026-11-28T24:00:00Z", "no such time"},
	{"2026-11-28T12:60:00Z", "no such time"},
	{"2026-11-28T12:00:61Z", "no such time"},
	{"1969-12-31T23:59:59Z", "out of range"},
	{"1970-01-01T00:30:00+01:00", "out of range"},
	{"0000-01-01T00:00:00Z", "out of range"},
	{"+2026-11-28T12:00:00Z", "date"},
	{"20261128T120000Z", "date"},
	{"2026-W48-6T12:00:00Z", "date"},
	{"2026-11-28T12:00:00-", "zone offset"},
	{"１９７０-01-01T00:00:00Z", "date"},
	{"tomorrow", "date"},
};

Test(rfc3339, refuses_with_a_reason)
{
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int64_t ms = 42;
		char err[256] = "";
		cr_expect_eq(rfc3339_parse(bad[i].text, strlen(bad[i].text), &ms, err, sizeof err), -1,
		             "\"%s\" was accepted", bad[i].text);
		cr_expect(strstr(err, bad[i].why) != NULL, "\"%s\": reason \"%s\" lacks \"%s\"",
		          bad[i].text, err, bad[i].why);
		cr_expect_eq(ms, 42, "\"%s\": *ms written on failure", bad[i].text);
	}
}

Test(rfc3339, length_bounds_the_text)
{
	/* the value is not NUL-terminated where it ends (a JSON string is, but
	 * the parser must not read past len) */
	const char *s = "2026-11-28T12:00:00Zjunk";
	int64_t ms;
	char err[128];
	cr_expect_eq(rfc3339_parse(s, 20, &ms, err, sizeof err), 0, "%s", err);
	cr_expect_eq(ms, 1795867200000LL);
	cr_expect_eq(rfc3339_parse(s, 19, &ms, err, sizeof err), -1);
}

Test(rfc3339, formats_and_reads_back)
{
	const long long samples[] = {0, 1, 999, 1795867200123LL, 951868799000LL, 253402300799999LL};
	for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
		char out[32];
		int64_t back = -1;
		char err[128] = "";
		rfc3339_format(samples[i], out, sizeof out);
		cr_expect_eq(strlen(out), 24, "%s", out);
		cr_expect_eq(rfc3339_parse(out, strlen(out), &back, err, sizeof err), 0, "%s: %s", out,
		             err);
		cr_expect_eq(back, samples[i], "%s read back as %lld", out, (long long)back);
	}
	char out[32];
	cr_expect_str_eq(rfc3339_format(1795867200123LL, out, sizeof out), "2026-11-28T12:00:00.123Z");
}
