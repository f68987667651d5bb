/* Unit tests for marks: the delivery marks of at_least_once. A mark never
 * passes a sequence in flight, follows reports in any order, moves only
 * forward, is taken once, comes back after a failed write, and never moves
 * for a frozen partition. Also against a brute-force model on random
 * issue/report sequences. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "marks.h"

/* The mark marks_take gives for partition p now, or -1 when none moved. */
static int64_t take_one(marks *m, tp_key p)
{
	store_mark out[64];
	size_t n = marks_take(m, out, 64);
	int64_t v = -1;
	for (size_t i = 0; i < n; i++)
		if (out[i].tp == p)
			v = out[i].upto;
	return v;
}

Test(marks, in_order)
{
	marks m = {0};
	for (int64_t s = 1; s <= 5; s++)
		cr_assert_eq(marks_issue(&m, 0, s << 20), 0);
	cr_assert_eq(take_one(&m, 0), (1 << 20) - 1, "nothing reported: below the first");
	marks_done(&m, 0, 1 << 20);
	marks_done(&m, 0, 2 << 20);
	cr_assert_eq(take_one(&m, 0), (3 << 20) - 1);
	cr_assert_eq(take_one(&m, 0), -1, "taken once");
	marks_done(&m, 0, 3 << 20);
	marks_done(&m, 0, 4 << 20);
	marks_done(&m, 0, 5 << 20);
	cr_assert_eq(take_one(&m, 0), 5 << 20, "none in flight: the highest handed over");
	marks_free(&m);
}

Test(marks, out_of_order_reports_hold_the_mark)
{
	marks m = {0};
	for (int64_t s = 1; s <= 4; s++)
		marks_issue(&m, 3, s);
	marks_done(&m, 3, 3);
	marks_done(&m, 3, 4);
	cr_assert_eq(take_one(&m, 3), -1, "1 is in flight: nothing to move");
	marks_done(&m, 3, 2);
	cr_assert_eq(take_one(&m, 3), -1, "still 1");
	marks_done(&m, 3, 1);
	cr_assert_eq(take_one(&m, 3), 4);
	marks_free(&m);
}

Test(marks, issued_below_others_and_twice)
{
	marks m = {0};
	marks_issue(&m, 1, 10);
	marks_issue(&m, 1, 20);
	marks_issue(&m, 1, 5); /* a claimed row, lower than what is in flight */
	marks_issue(&m, 1, 10); /* claimed again while still in flight */
	marks_done(&m, 1, 10);
	marks_done(&m, 1, 20);
	cr_assert_eq(take_one(&m, 1), 4);
	marks_done(&m, 1, 5);
	cr_assert_eq(take_one(&m, 1), 9, "one 10 is still in flight");
	marks_done(&m, 1, 10);
	cr_assert_eq(take_one(&m, 1), 20);
	marks_done(&m, 1, 99); /* unknown: ignored */
	marks_done(&m, 7, 1);
	cr_assert_eq(take_one(&m, 1), -1);
	marks_free(&m);
}

Test(marks, unsent_comes_back_and_never_goes_back)
{
	marks m = {0};
	marks_issue(&m, 0, 100);
	marks_done(&m, 0, 100);
	store_mark out[4];
	cr_assert_eq(marks_take(&m, out, 4), 1);
	marks_unsent(&m, out, 1);
	cr_assert_eq(take_one(&m, 0), 100, "the write failed: taken again");
	marks_issue(&m, 0, 50); /* lower than the mark written: does not move it back */
	cr_assert_eq(take_one(&m, 0), -1);
	marks_free(&m);
}

Test(marks, frozen)
{
	marks m = {0};
	marks_issue(&m, 0, 1);
	marks_issue(&m, 1, 1);
	marks_done(&m, 0, 1);
	marks_done(&m, 1, 1);
	marks_freeze(&m, 1);
	cr_assert(marks_frozen(&m, 1));
	cr_assert_not(marks_frozen(&m, 0));
	cr_assert(marks_frozen(&m, 9), "unknown: nothing vouches for it");
	cr_assert_eq(take_one(&m, 1), -1);
	marks_issue(&m, 0, 2);
	marks_done(&m, 0, 2);
	marks_freeze_all(&m);
	cr_assert_eq(take_one(&m, 0), -1);
	cr_assert(marks_frozen(&m, 0));
	marks_free(&m);
}

/* Random issues (mostly increasing, some repeats and lower ones) and
 * reports in random order, against a model: the mark taken is always below
 * every sequence in flight and at most the highest issued. */
Test(marks, model)
{
	srand(22);
	for (int round = 0; round < 50; round++) {
		marks m = {0};
		int64_t flight[4096];
		size_t nf = 0;
		int64_t next = 1, issued = 0, written = 0;
		for (int step = 0; step < 3000; step++) {
			int r = rand() % 10;
			if (r < 5 && nf < 4096) {
				int64_t s = rand() % 8 == 0 && next > 3 ? 1 + rand() % (next - 1) : next++;
				if (s <= written)
					continue; /* a claim never returns a row below the mark */
				cr_assert_eq(marks_issue(&m, 2, s), 0);
				flight[nf++] = s;
				if (s > issued)
					issued = s;
			} else if (r < 9 && nf > 0) {
				size_t k = (size_t)rand() % nf;
				marks_done(&m, 2, flight[k]);
				flight[k] = flight[--nf];
			} else {
				int64_t v = take_one(&m, 2);
				if (v < 0)
					continue;
				cr_assert_gt(v, written, "moves forward only");
				cr_assert_leq(v, issued);
				for (size_t i = 0; i < nf; i++)
					cr_assert_lt(v, flight[i], "round %d step %d: mark %lld passes %lld in "
					             "flight", round, step, (long long)v, (long long)flight[i]);
				written = v;
			}
		}
		marks_free(&m);
	}
}
