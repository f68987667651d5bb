/* rfc3339.c: see rfc3339.h. */
#include "rfc3339.h"

#include <stdio.h>

/* Days from 1970-01-01 to y-m-d of the proleptic Gregorian calendar
 * (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
	z += 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

static int leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int month_days(int64_t y, int m)
{
	static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	return m == 2 && leap(y) ? 29 : days[m - 1];
}

/* n decimal digits at s[*i], into *v; 0 or -1. */
static int digits(const char *s, size_t len, size_t *i, int n, int *v)
{
	*v = 0;
	for (int k = 0; k < n; k++, (*i)++) {
		if (*i >= len || s[*i] < '0' || s[*i] > '9')
			return -1;
		*v = *v * 10 + (s[*i] - '0');
	}
	return 0;
}

static int fail(char *err, size_t errsz, const char *why)
{
	snprintf(err, errsz, "%s", why);
	return -1;
}

int rfc3339_parse(const char *s, size_t len, int64_t *ms, char *err, size_t errsz)
{
	size_t i = 0;
	int year, mon, day, hour, min, sec;
	if (digits(s, len, &i, 4, &year) != 0 || i >= len || s[i++] != '-' ||
	    digits(s, len, &i, 2, &mon) != 0 || i >= len || s[i++] != '-' ||
	    digits(s, len, &i, 2, &day) != 0)
		return fail(err, errsz, "not an RFC 3339 date (YYYY-MM-DD)");
	if (i >= len || (s[i] != 'T' && s[i] != 't'))
		return fail(err, errsz, "not an RFC 3339 date-time (a date, T, then HH:MM:SS)");
	i++;
	if (digits(s, len, &i, 2, &hour) != 0 || i >= len || s[i++] != ':' ||
	    digits(s, len, &i, 2, &min) != 0 || i >= len || s[i++] != ':' ||
	    digits(s, len, &i, 2, &sec) != 0)
		return fail(err, errsz, "not an RFC 3339 time (HH:MM:SS)");
	if (mon < 1 || mon > 12 || day < 1 || day > month_days(year, mon))
		return fail(err, errsz, "no such date");
	if (hour > 23 || min > 59 || sec > 60)
		return fail(err, errsz, "no such time of day");
	int64_t frac_ms = 0;
	if (i < len && s[i] == '.') {
		i++;
		size_t first = i;
		int64_t scale = 100;
		int rest = 0; /* a digit past the milliseconds is not zero */
		for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
			if (scale > 0)
				frac_ms += (s[i] - '0') * scale;
			else
				rest |= s[i] != '0';
			scale /= 10;
		}
		if (i == first)
			return fail(err, errsz, "a fraction of a second needs digits after the dot");
		if (i - first > 9)
			return fail(err, errsz, "a fraction of a second has at most 9 digits");
		frac_ms += rest; /* never early */
	}
	if (i >= len)
		return fail(err, errsz, "no zone (Z or +HH:MM / -HH:MM): a time without one is "
		                        "ambiguous");
	int64_t offset_min = 0;
	if (s[i] == 'Z' || s[i] == 'z') {
		i++;
	} else if (s[i] == '+' || s[i] == '-') {
		int sign = s[i++] == '-' ? -1 : 1, oh, om;
		if (digits(s, len, &i, 2, &oh) != 0 || i >= len || s[i++] != ':' ||
		    digits(s, len, &i, 2, &om) != 0)
			return fail(err, errsz, "not an RFC 3339 zone offset (+HH:MM or -HH:MM)");
		if (oh > 23 || om > 59)
			return fail(err, errsz, "no such zone offset");
		offset_min = sign * (oh * 60 + om);
	} else {
		return fail(err, errsz, "no zone (Z or +HH:MM / -HH:MM): a time without one is "
		                        "ambiguous");
	}
	if (i != len)
		return fail(err, errsz, "unexpected characters after the zone");
	int64_t secs = days_from_civil(year, mon, day) * 86400 + hour * 3600 + min * 60 + sec -
	               offset_min * 60;
	/* 1970-01-01T00:00:00Z up to 9999-12-31T23:59:60.999Z (a later second
	 * is year 10000, out of every SQL and JSON tool's range) */
	if (secs < 0 || secs > days_from_civil(10000, 1, 1) * 86400)
		return fail(err, errsz, "out of range (years 1970 to 9999 in UTC)");
	*ms = secs * 1000 + frac_ms;
	return 0;
}

const char *rfc3339_format(int64_t ms, char *out, size_t outsz)
{
	int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000, y;
	int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
	int64_t sod = secs - days * 86400;
	int m, d;
	civil_from_days(days, &y, &m, &d);
	snprintf(out, outsz, "%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ", (long long)y, m, d,
	         (int)(sod / 3600), (int)(sod / 60 % 60), (int)(sod % 60),
	         (int)(ms - secs * 1000));
	return out;
}
