/* test_gap.c: where a control-topic partition is read from when the offset
 * the hub wanted is not on the broker (gap.h), and how it is described. */
#include <criterion/criterion.h>
#include <string.h>

#include "gap.h"

Test(gap, decisions)
{
	static const struct {
		int64_t wanted, low, high;
		gap_kind kind;
		int64_t from, to, resume;
	} cases[] = {
		/* deleted before it was read: [wanted, low) lost, read on from low */
		{100, 200, 300, GAP_LOST, 100, 200, 200},
		{0, 1, 1, GAP_LOST, 0, 1, 1},           /* everything gone, nothing new */
		{199, 200, 200, GAP_LOST, 199, 200, 200},
		/* beyond the end: [high, wanted) gone, read it all again from low */
		{1000, 0, 30, GAP_TRUNCATED, 30, 1000, 0},
		{31, 5, 30, GAP_TRUNCATED, 30, 31, 5},
		{10, 0, 0, GAP_TRUNCATED, 0, 10, 0},    /* a new, empty topic */
		/* on the broker after all: read it again */
		{200, 200, 300, GAP_NONE, 200, 200, 200},
		{300, 200, 300, GAP_NONE, 300, 300, 300}, /* the end: waiting for the next */
		{250, 200, 300, GAP_NONE, 250, 250, 250},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		gap g;
		gap_decide(7, cases[i].wanted, cases[i].low, cases[i].high, &g);
		cr_assert_eq(g.kind, cases[i].kind, "case %zu", i);
		cr_assert_eq(g.tp, 7);
		cr_assert_eq(g.wanted, cases[i].wanted);
		cr_assert_eq(g.low, cases[i].low);
		cr_assert_eq(g.high, cases[i].high);
		cr_assert_eq(g.from, cases[i].from, "case %zu: from %lld", i, (long long)g.from);
		cr_assert_eq(g.to, cases[i].to, "case %zu: to %lld", i, (long long)g.to);
		cr_assert_eq(g.resume, cases[i].resume, "case %zu: resume %lld", i, (long long)g.resume);
	}
}

Test(gap, names_and_alert_kinds)
{
	cr_assert_str_eq(gap_kind_name(GAP_LOST), "lost");
	cr_assert_str_eq(gap_kind_name(GAP_TRUNCATED), "truncated");
	cr_assert_str_eq(gap_alert_kind(GAP_LOST), "control_records_lost");
	cr_assert_str_eq(gap_alert_kind(GAP_TRUNCATED), "control_partition_truncated");
	cr_assert_null(gap_alert_kind(GAP_NONE));
}

Test(gap, descriptions_name_the_offsets)
{
	char text[600];
	gap g;
	gap_decide(0, 100, 250, 400, &g);
	gap_describe(&g, "txhub.control", text, sizeof text);
	cr_assert(strstr(text, "offsets 100 to 249 (150) of txhub.control deleted by the broker "
	                       "before a hub read them"), "%s", text);
	cr_assert(strstr(text, "reading on from offset 250"), "%s", text);
	gap_decide(0, 1000, 0, 30, &g);
	gap_describe(&g, "txhub.control", text, sizeof text);
	cr_assert(strstr(text, "txhub.control ends at offset 30, before offset 1000"), "%s", text);
	cr_assert(strstr(text, "offsets 30 to 999 (970)"), "%s", text);
	cr_assert(strstr(text, "again from offset 0"), "%s", text);
	/* cut to fit, never overrun */
	char small[16];
	memset(small, 'x', sizeof small);
	gap_describe(&g, "txhub.control", small, 8);
	cr_assert_eq(strlen(small), 7);
	cr_assert_eq(small[8], 'x');
}
