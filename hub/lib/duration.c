/* duration.c: see duration.h. */
#include "duration.h"

#include <stdio.h>
#include <string.h>

/* Units from the largest down: the order a combined duration must follow,
 * so that "1h30m" reads one way only. */
static const struct {
	char name;
	int64_t ms;
} units[] = {
	{'d', 86400000LL},
	{'h', 3600000LL},
	{'m', 60000LL},
	{'s', 1000LL},
};
#define NUNITS (sizeof units / sizeof units[0])

static int unit_index(char c)
{
	for (size_t i = 0; i < NUNITS; i++)
		if (units[i].name == c)
			return (int)i;
	return -1;
}

static int fail(char *err, size_t errsz, const char *s, const char *why)
{
	snprintf(err, errsz, "\"%s\" is not a duration: %s (write e.g. 90s, 15m, 12h, 7d or 1h30m)",
	         s, why);
	return -1;
}

int duration_parse(const char *s, int64_t *ms, char *err, size_t errsz)
{
	if (!s || !*s)
		return fail(err, errsz, s ? s : "", "it is empty");
	int64_t total = 0;
	int last = -1; /* index of the previous part's unit */
	const char *p = s;
	while (*p) {
		if (*p < '0' || *p > '9')
			return fail(err, errsz, s, *p == '-' || *p == '+'
			                               ? "it has a sign (durations are positive)"
			                               : "expected a number");
		int64_t n = 0;
		for (; *p >= '0' && *p <= '9'; p++) {
			/* digits beyond the maximum are refused before they overflow */
			if (n > DURATION_MAX_MS / 10)
				return fail(err, errsz, s, "it is too long (at most 36500d)");
			n = n * 10 + (*p - '0');
		}
		if (!*p)
			return fail(err, errsz, s, "a number without a unit (s, m, h or d)");
		int u = unit_index(*p);
		if (u < 0 || (p[1] >= 'a' && p[1] <= 'z') || (p[1] >= 'A' && p[1] <= 'Z'))
			return fail(err, errsz, s, "unknown unit (use s, m, h or d)");
		if (u <= last)
			return fail(err, errsz, s, "units must go from the largest down, each once");
		last = u;
		p++;
		if (n > (DURATION_MAX_MS - total) / units[u].ms)
			return fail(err, errsz, s, "it is too long (at most 36500d)");
		total += n * units[u].ms;
	}
	*ms = total; /* 0s is well-formed: no time at all (docs/admin.md: Admin commands) */
	return 0;
}

const char *duration_format(int64_t seconds, char *out, size_t outsz)
{
	if (seconds < 0)
		seconds = 0;
	int64_t d = seconds / 86400, h = seconds % 86400 / 3600, m = seconds % 3600 / 60,
	        sec = seconds % 60;
	if (d > 0)
		snprintf(out, outsz, "%lldd %lldh", (long long)d, (long long)h);
	else if (h > 0)
		snprintf(out, outsz, "%lldh %lldm", (long long)h, (long long)m);
	else if (m > 0)
		snprintf(out, outsz, "%lldm %llds", (long long)m, (long long)sec);
	else
		snprintf(out, outsz, "%llds", (long long)sec);
	return out;
}
