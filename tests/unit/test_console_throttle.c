/* Unit tests for the console's login throttle (console_throttle.c): tries
 * per address and window, the wait after them, addresses apart (IPv6 by
 * /64), tries sent in parallel, the bounded table and the shared slot
 * beyond it, and the log lines (one at once, then one per minute with a
 * count). The HTTP side (429, Retry-After, the log of a real console):
 * tests/integration/test_console.c. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console_throttle.h"

#define F 5
#define W 60000

static char line[CONSOLE_THROTTLE_LINE];

/* One login from peer at now: -1 when refused before its token was
 * looked at, else 1 or 0 as its token was right. */
static int login(console_throttle *t, const char *peer, int right, int64_t now)
{
	if (console_throttle_begin(t, peer, now, line) > 0)
		return -1;
	console_throttle_end(t, peer, right, "mallory", now, line);
	return right;
}

/* Wrong tokens from peer at now until the first refusal; the number let
 * through. */
static int tries_until_refused(console_throttle *t, const char *peer, int64_t now)
{
	int n = 0;
	while (login(t, peer, 0, now) == 0 && n < 10000)
		n++;
	return n;
}

typedef struct {
	int n;
	char text[8][CONSOLE_THROTTLE_LINE];
} lines;

static void keep(void *ud, const char *l)
{
	lines *ls = ud;
	if (ls->n < 8)
		snprintf(ls->text[ls->n], sizeof ls->text[0], "%s", l);
	ls->n++;
}

Test(throttle, tries_per_window_then_a_wait_even_for_the_right_token)
{
	console_throttle *t = console_throttle_new(F, W);
	cr_assert_eq(tries_until_refused(t, "127.0.0.1", 1000), F);
	int64_t wait = console_throttle_begin(t, "127.0.0.1", 1000, line);
	cr_assert_eq(wait, W / 1000, "Retry-After: the whole window from the last try");
	cr_assert_eq(login(t, "127.0.0.1", 1, 1000 + W - 1), -1, "the right token waits too");
	cr_assert_eq(console_throttle_begin(t, "127.0.0.1", 1000 + W - 1, line), 1,
	             "a part of a second left is a second");
	cr_assert_eq(login(t, "127.0.0.1", 1, 1000 + W), 1, "the wait is over");
	console_throttle_free(t);
}

Test(throttle, the_window_forgets_failures_and_a_login_too)
{
	console_throttle *t = console_throttle_new(F, W);
	for (int i = 0; i < F - 1; i++)
		cr_assert_eq(login(t, "10.0.0.1", 0, 0), 0);
	cr_assert_eq(tries_until_refused(t, "10.0.0.1", W), F, "a new window, a new allowance");
	console_throttle_free(t);
	t = console_throttle_new(F, W);
	for (int i = 0; i < F - 1; i++)
		cr_assert_eq(login(t, "10.0.0.1", 0, 0), 0);
	cr_assert_eq(login(t, "10.0.0.1", 1, 1), 1, "a typo or four, then the token");
	cr_assert_eq(tries_until_refused(t, "10.0.0.1", 2), F, "the login forgot them");
	console_throttle_free(t);
}

Test(throttle, addresses_count_apart_and_ipv6_by_its_64)
{
	console_throttle *t = console_throttle_new(F, W);
	cr_assert_eq(tries_until_refused(t, "127.0.0.1", 0), F);
	cr_assert_eq(login(t, "127.0.0.2", 1, 0), 1, "another address logs in at once");
	cr_assert_eq(login(t, "::ffff:127.0.0.1", 1, 0), -1, "the same IPv4 address mapped");
	cr_assert_eq(tries_until_refused(t, "2001:db8:1:2::1", 0), F);
	cr_assert_eq(login(t, "2001:db8:1:2:ffff::9", 1, 0), -1, "the same /64");
	cr_assert_eq(login(t, "2001:db8:1:3::1", 1, 0), 1, "another /64");
	console_throttle_free(t);
}

Test(throttle, tries_in_parallel_get_no_more)
{
	console_throttle *t = console_throttle_new(F, W);
	int passed = 0;
	for (int i = 0; i < 3 * F; i++) /* every one begun before any ends */
		passed += console_throttle_begin(t, "10.1.1.1", 0, line) == 0;
	cr_assert_eq(passed, F);
	console_throttle_free(t);
}

Test(throttle, a_full_table_shares_one_allowance_beyond_it)
{
	console_throttle *t = console_throttle_new(F, W);
	char peer[32];
	for (int i = 0; i < CONSOLE_THROTTLE_SLOTS; i++) {
		snprintf(peer, sizeof peer, "10.%d.%d.1", i / 256, i % 256);
		cr_assert_eq(login(t, peer, 0, 0), 0);
	}
	/* the table is full of addresses within their window: the next ones
	 * share a slot, F tries among all of them */
	int passed = 0;
	for (int i = 0; i < 4 * F; i++) {
		snprintf(peer, sizeof peer, "172.16.%d.%d", i / 256, i % 256);
		passed += login(t, peer, 0, 1000) == 0;
	}
	cr_assert_eq(passed, F, "%d addresses beyond the table got %d tries", 4 * F, passed);
	cr_assert_eq(login(t, "192.168.9.9", 1, 1000), -1, "the shared slot waits");
	cr_assert_eq(login(t, "10.0.7.1", 1, 1000), 1, "an address in the table keeps its own");
	lines ls = {0};
	console_throttle_sweep(t, 1000, 1, keep, &ls);
	cr_assert_eq(ls.n, 1, "the shared slot's refusals, in one line (%d)", ls.n);
	cr_assert(strstr(ls.text[0], "addresses beyond the 1024 tracked"), "%s", ls.text[0]);
	cr_assert(strstr(ls.text[0], "while throttled"), "%s", ls.text[0]);
	/* their windows over and their lines logged, the slots are taken again */
	console_throttle_sweep(t, 1000 + W + CONSOLE_THROTTLE_LOG_MS, 0, keep, &ls);
	cr_assert_eq(tries_until_refused(t, "192.168.9.9", 1000 + W + CONSOLE_THROTTLE_LOG_MS), F,
	             "an address of its own again");
	cr_assert_eq(login(t, "192.168.9.10", 1, 1000 + W + CONSOLE_THROTTLE_LOG_MS), 1);
	console_throttle_free(t);
}

Test(throttle, expired_slots_are_taken_before_the_shared_one)
{
	console_throttle *t = console_throttle_new(F, W);
	char peer[32];
	for (int i = 0; i < CONSOLE_THROTTLE_SLOTS; i++) {
		snprintf(peer, sizeof peer, "10.%d.%d.1", i / 256, i % 256);
		cr_assert_eq(login(t, peer, 0, i < 10 ? 0 : W), 0);
	}
	lines ls = {0};
	console_throttle_sweep(t, W + 1, 1, keep, &ls); /* every refusal logged */
	/* the first ten windows are over, without a sweep to free them */
	for (int i = 0; i < 10; i++) {
		snprintf(peer, sizeof peer, "172.16.0.%d", i);
		cr_assert_eq(tries_until_refused(t, peer, W + 1), F, "%s: a slot of its own", peer);
	}
	cr_assert_eq(tries_until_refused(t, "172.16.1.1", W + 1), F, "the shared slot");
	cr_assert_eq(tries_until_refused(t, "172.16.1.2", W + 1), 0, "used up");
	console_throttle_free(t);
}

Test(throttle, one_line_at_once_then_one_a_minute_with_a_count)
{
	console_throttle *t = console_throttle_new(F, W);
	int logged = 0;
	for (int i = 0; i < 100; i++) {
		if (console_throttle_begin(t, "127.0.0.1", i, line) == 0)
			console_throttle_end(t, "127.0.0.1", 0, "mallory", i, line);
		if (line[0]) {
			logged++;
			cr_assert(strstr(line, "console: refused 1 login from 127.0.0.1 (1 wrong token, 0 "
			                       "while throttled; the last as mallory)"), "%s", line);
		}
	}
	cr_assert_eq(logged, 1, "the first refusal only");
	lines ls = {0};
	console_throttle_sweep(t, CONSOLE_THROTTLE_LOG_MS - 1, 0, keep, &ls);
	cr_assert_eq(ls.n, 0, "not a minute yet");
	console_throttle_sweep(t, CONSOLE_THROTTLE_LOG_MS, 0, keep, &ls);
	cr_assert_eq(ls.n, 1);
	cr_assert(strstr(ls.text[0], "refused 99 logins from 127.0.0.1 over 0.0 s (4 wrong "
	                             "tokens, 95 while throttled; the last as mallory)"),
	          "%s", ls.text[0]);
	console_throttle_sweep(t, 2 * CONSOLE_THROTTLE_LOG_MS, 1, keep, &ls);
	cr_assert_eq(ls.n, 1, "nothing left to log");
	/* a minute after its last line, a refusal is logged at once again */
	login(t, "127.0.0.1", 0, 2 * CONSOLE_THROTTLE_LOG_MS + 5);
	cr_assert(strstr(line, "refused 1 login from 127.0.0.1"), "%s", line);
	login(t, "127.0.0.1", 0, 2 * CONSOLE_THROTTLE_LOG_MS + 6);
	cr_assert_str_eq(line, "");
	console_throttle_sweep(t, 2 * CONSOLE_THROTTLE_LOG_MS + 7, 1, keep, &ls);
	cr_assert_eq(ls.n, 2, "all: what is left, at the end");
	cr_assert(strstr(ls.text[1], "refused 1 login from 127.0.0.1"), "%s", ls.text[1]);
	console_throttle_free(t);
}
