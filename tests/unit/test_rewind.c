/* Unit tests for rewind: what a replica wrote against what the database
 * holds, every verdict, and the table's bookkeeping. */
#include <criterion/criterion.h>
#include <string.h>

#include "rewind.h"

static rewind_table t;

static void fini(void) { rewind_table_free(&t); }

TestSuite(rewind, .fini = fini);

static rewind_row row(int64_t epoch, int64_t next, const char *origin)
{
	rewind_row r = {1, epoch, next, ""};
	strcpy(r.origin, origin);
	return r;
}

Test(rewind, verdicts)
{
	cr_assert_eq(rewind_taken(&t, 3, 7, 100, "o1"), 0);
	rewind_advance(&t, 3, 250);
	const rewind_mark *k = rewind_find(&t, 3);
	cr_assert_not_null(k);
	static const struct {
		rewind_row db;
		rewind_verdict want;
	} cases[] = {
		{{1, 7, 250, "o1"}, REWIND_SAME},
		{{1, 7, 300, "o1"}, REWIND_SAME},         /* more than written: another batch of ours */
		{{1, 7, 249, "o1"}, REWIND_BEHIND},       /* one batch gone */
		{{1, 7, -1, "o1"}, REWIND_BEHIND},        /* every batch gone, the take kept */
		{{1, 6, 250, "o1"}, REWIND_OLDER_EPOCH},  /* even the take gone */
		{{1, 8, 100, "o1"}, REWIND_FENCED},       /* taken by another replica */
		{{1, 8, 100, "o2"}, REWIND_FENCED},
		{{1, 7, 250, "o2"}, REWIND_OTHER_ORIGIN}, /* the row was made again */
		{{1, 1, -1, "o2"}, REWIND_OTHER_ORIGIN},
		{{0, 0, -1, ""}, REWIND_NO_ROW},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		cr_expect_eq(rewind_judge(k, 7, &cases[i].db), cases[i].want, "case %zu: %d", i,
		             rewind_judge(k, 7, &cases[i].db));
	/* a partition owned at another epoch than the mark's, or never
	 * taken here, has nothing to be compared with */
	rewind_row behind = row(7, 0, "o1");
	cr_expect_eq(rewind_judge(k, 8, &behind), REWIND_SAME);
	cr_expect_eq(rewind_judge(rewind_find(&t, 4), 7, &behind), REWIND_SAME);
	cr_expect_str_neq(rewind_verdict_text(REWIND_BEHIND), "?");
}

Test(rewind, advance_never_goes_back_and_a_take_starts_over)
{
	rewind_taken(&t, 1, 1, -1, "o");
	rewind_advance(&t, 1, 40);
	rewind_advance(&t, 1, 30); /* a smaller batch after a larger one */
	cr_assert_eq(rewind_find(&t, 1)->next_offset, 40);
	rewind_advance(&t, 2, 99); /* not taken: nothing noted */
	cr_assert_null(rewind_find(&t, 2));
	rewind_taken(&t, 1, 2, 10, "o"); /* taken again, read from 10 */
	cr_assert_eq(rewind_find(&t, 1)->next_offset, 10);
	cr_assert_eq(rewind_find(&t, 1)->epoch, 2);
	for (int p = 0; p < 100; p++)
		cr_assert_eq(rewind_taken(&t, p, 1, p, "o"), 0);
	cr_assert_eq(t.n, 100);
	cr_assert_eq(rewind_find(&t, 57)->next_offset, 57);
}
