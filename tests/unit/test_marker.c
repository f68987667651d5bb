/* Unit tests for marker: progress markers written and read back (version
 * 1 and 2, sequences beyond what a double holds), malformed ones refused,
 * and the dead sequences a lane keeps. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "marker.h"

static store_forward row(const char *key, int64_t offset, int64_t seq)
{
	store_forward f;
	memset(&f, 0, sizeof f);
	f.biz_id = (char *)"b";
	f.message_key = (char *)key;
	f.src_offset = offset;
	f.fwd_seq = seq;
	return f;
}

static void parse_ok(const char *text, store_marker *m)
{
	cr_assert_eq(marker_parse(text, strlen(text), m), 0, "refused: %s", text);
}

Test(marker, round_trip_version_2)
{
	marker_dead d;
	marker_dead_init(&d, NULL);
	store_forward f1 = row("a", 9, STORE_OFFSET_SEQ(9)), f2 = row("b", 11, STORE_OFFSET_SEQ(11));
	marker_dead_fail(&d, &f1);
	marker_dead_fail(&d, &f1); /* listed once */
	store_forward last = row("last", 20, STORE_OFFSET_SEQ(20));
	char *v = marker_encode(&last, "orig", 3, 2, &d, "txhub-g-r-h-1");
	cr_assert_not_null(v);
	store_marker m;
	parse_ok(v, &m);
	char id[64];
	cr_assert_eq(marker_txn_of(v, strlen(v), id, sizeof id), 0);
	cr_assert_str_eq(id, "txhub-g-r-h-1"); /* the producer a new owner fences */
	free(v);
	cr_assert_eq(m.version, 2);
	cr_assert_eq(m.seq, STORE_OFFSET_SEQ(20));
	cr_assert_str_eq(m.origin, "orig");
	cr_assert_str_eq(m.message_key, "last");
	cr_assert_eq(m.ndead, 1);
	cr_assert_eq(m.dead[0], STORE_OFFSET_SEQ(9));
	cr_assert_eq(m.unsure_from, -1);
	/* and a lane that takes over starts from it */
	marker_dead n;
	marker_dead_init(&n, &m);
	cr_assert_eq(n.n, 1);
	marker_dead_fail(&n, &f2);
	cr_assert_eq(n.n, 2);
}

Test(marker, sequences_beyond_a_double_travel_as_text)
{
	int64_t big = STORE_OFFSET_SEQ(9000000000LL); /* past 2^53 */
	store_forward last = row("k", 9000000000LL, big);
	marker_dead d;
	marker_dead_init(&d, NULL);
	marker_dead_fail(&d, &last);
	char *v = marker_encode(&last, "o", 1, 0, &d, NULL);
	cr_assert_not_null(v);
	char id[64];
	cr_assert_eq(marker_txn_of(v, strlen(v), id, sizeof id), -1); /* (names none) */
	cr_assert(strstr(v, "\"seq\":\""), "%s", v);
	store_marker m;
	parse_ok(v, &m);
	free(v);
	cr_assert_eq(m.seq, big);
	cr_assert_eq(m.dead[0], big);
}

Test(marker, version_1_of_0_4_0)
{
	store_marker m;
	parse_ok("{\"seq\":42,\"origin\":\"o\",\"biz_id\":\"b\",\"message_key\":\"k\",\"epoch\":1,"
	         "\"partition\":0}", &m);
	cr_assert_eq(m.version, 1);
	cr_assert_eq(m.seq, 42);
	cr_assert_eq(m.ndead, 0);
	cr_assert_eq(m.unsure_from, -1);
	marker_dead d;
	marker_dead_init(&d, &m); /* nothing to carry over */
	cr_assert_eq(d.n, 0);
	cr_assert_eq(d.unsure_from, -1);
}

Test(marker, malformed_ones_are_refused)
{
	static const char *bad[] = {
		"", "[]", "{}", "not json",
		"{\"seq\":0,\"origin\":\"o\",\"biz_id\":\"b\",\"message_key\":\"k\"}",
		"{\"seq\":-5,\"origin\":\"o\",\"biz_id\":\"b\",\"message_key\":\"k\"}",
		"{\"seq\":1.5,\"origin\":\"o\",\"biz_id\":\"b\",\"message_key\":\"k\"}",
		"{\"seq\":\"12x\",\"origin\":\"o\",\"biz_id\":\"b\",\"message_key\":\"k\"}",
		"{\"seq\":1,\"biz_id\":\"b\",\"message_key\":\"k\"}",
		/* version 2 needs its dead list, of sequences */
		"{\"v\":2,\"seq\":1,\"origin\":\"o\",\"biz_id\":\"b\",\"message_key\":\"k\"}",
		"{\"v\":2,\"seq\":1,\"origin\":\"o\",\"biz_id\":\"b\",\"message_key\":\"k\",\"dead\":[0]}",
		"{\"v\":2,\"seq\":1,\"origin\":\"o\",\"biz_id\":\"b\",\"message_key\":\"k\",\"dead\":{}}",
		"{\"v\":2,\"seq\":1,\"origin\":\"o\",\"biz_id\":\"b\",\"message_key\":\"k\",\"dead\":[],"
		"\"unsure_from\":\"x\"}",
		/* a version this hub does not know */
		"{\"v\":3,\"seq\":1,\"origin\":\"o\",\"biz_id\":\"b\",\"message_key\":\"k\",\"dead\":[]}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		store_marker m;
		cr_expect_eq(marker_parse(bad[i], strlen(bad[i]), &m), -1, "accepted: %s", bad[i]);
		cr_expect_eq(m.seq, 0);
	}
}

Test(marker, dead_sequences_leave_when_their_row_is_sent_again)
{
	marker_dead d;
	marker_dead_init(&d, NULL);
	store_forward a = row("a", 5, STORE_OFFSET_SEQ(5)), b = row("b", 6, STORE_OFFSET_SEQ(6));
	marker_dead_fail(&d, &a);
	marker_dead_fail(&d, &b);
	/* a row decided by a check-back fails under a sequence between
	 * offsets: not listed, but the history now holds such a decision */
	store_forward oob = row("c", 3, STORE_OFFSET_SEQ(6) + 3);
	marker_dead_fail(&d, &oob);
	cr_assert_eq(d.n, 2);
	cr_assert_eq(d.oob, STORE_OFFSET_SEQ(6) + 3);
	/* a retry of a listed row failing again: no such decision */
	store_forward retry = row("b", 6, STORE_OFFSET_SEQ(7) + 1);
	marker_dead_fail(&d, &retry);
	cr_assert_eq(d.oob, STORE_OFFSET_SEQ(6) + 3);
	/* sent under its own offset sequence again (a re-read): nothing revived */
	store_forward same = row("x", 8, STORE_OFFSET_SEQ(8));
	marker_dead_sent(&d, &same, 1);
	cr_assert_eq(d.n, 2);
	/* a sent again under a later sequence: its offset sequence is no longer dead */
	store_forward revived = row("a", 5, STORE_OFFSET_SEQ(9) + 1);
	marker_dead_sent(&d, &revived, 1);
	cr_assert_eq(d.n, 1);
	cr_assert_eq(d.seq[0], STORE_OFFSET_SEQ(6));
	cr_assert_eq(d.oob, STORE_OFFSET_SEQ(6) + 3, "a revival is no outside decision");
	/* a check-back's commit sent: oob rises; the marker carries it */
	store_forward cb = row("e", 9, STORE_OFFSET_SEQ(12) + 2);
	marker_dead_sent(&d, &cb, 1);
	cr_assert_eq(d.oob, STORE_OFFSET_SEQ(12) + 2);
	char *v = marker_encode(&cb, "o", 1, 0, &d, NULL);
	store_marker m;
	parse_ok(v, &m);
	free(v);
	cr_assert_eq(m.oob, STORE_OFFSET_SEQ(12) + 2);
	marker_dead n2;
	marker_dead_init(&n2, &m);
	cr_assert_eq(n2.oob, m.oob);
}

Test(marker, more_dead_than_listed_makes_the_rest_unsure)
{
	marker_dead d;
	marker_dead_init(&d, NULL);
	for (int64_t o = 1000; o < 1000 + STORE_MARKER_DEAD_MAX; o++) {
		store_forward f = row("k", o, STORE_OFFSET_SEQ(o));
		marker_dead_fail(&d, &f);
	}
	cr_assert_eq(d.unsure_from, -1);
	store_forward late = row("k", 5000, STORE_OFFSET_SEQ(5000)),
	              early = row("k", 10, STORE_OFFSET_SEQ(10));
	marker_dead_fail(&d, &late);
	cr_assert_eq(d.unsure_from, STORE_OFFSET_SEQ(5000));
	marker_dead_fail(&d, &early);
	cr_assert_eq(d.unsure_from, STORE_OFFSET_SEQ(10), "the lowest one counts");
	char *v = marker_encode(&late, "o", 1, 0, &d, NULL);
	store_marker m;
	parse_ok(v, &m);
	free(v);
	cr_assert_eq(m.ndead, STORE_MARKER_DEAD_MAX);
	cr_assert_eq(m.unsure_from, STORE_OFFSET_SEQ(10));
}

Test(marker, failures_found_in_postgresql_join_the_dead_ones)
{
	marker_dead d;
	marker_dead_init(&d, NULL);
	store_forward a = row("a", 5, STORE_OFFSET_SEQ(5));
	marker_dead_fail(&d, &a);
	marker_dead_add(&d, STORE_OFFSET_SEQ(5)); /* listed already: once */
	marker_dead_add(&d, STORE_OFFSET_SEQ(8));
	cr_assert_eq(d.n, 2);
	for (int64_t o = 100; o < 100 + STORE_MARKER_DEAD_MAX; o++)
		marker_dead_add(&d, STORE_OFFSET_SEQ(o));
	cr_assert_eq(d.n, STORE_MARKER_DEAD_MAX);
	cr_assert_eq(d.unsure_from, STORE_OFFSET_SEQ(100 + STORE_MARKER_DEAD_MAX - 2),
	             "the ones past the room make the rest unsure");
}
