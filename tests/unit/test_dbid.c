/* Unit tests for dbid: the database identity hubs write into the metadata
 * of the offsets they commit, as another hub of the group judges it
 * (absent, the same, adopted, another), and the form pg.adopt_from takes. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "dbid.h"

static dbid id(const char *text)
{
	dbid d;
	cr_assert_eq(dbid_parse(text, &d), 0, "%s", text);
	return d;
}

Test(dbid, parse_takes_system_identifier_slash_name)
{
	dbid d = id("7712026944935744815/orders");
	cr_assert_str_eq(d.system_id, "7712026944935744815");
	cr_assert_str_eq(d.name, "orders");
	/* the name is everything after the first slash */
	d = id("1/a/b c");
	cr_assert_str_eq(d.name, "a/b c");
	char buf[128];
	cr_assert_str_eq(dbid_format(&d, buf, sizeof buf), "1/a/b c");
	static const char *const bad[] = {
		"", "/orders", "77/", "77", "x77/orders", "77 /orders", "-1/orders",
		"123456789012345678901234/orders", /* longer than any system identifier */
		"1/0123456789012345678901234567890123456789012345678901234567890123", /* 64 bytes */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		dbid b;
		cr_assert_eq(dbid_parse(bad[i], &b), -1, "accepted \"%s\"", bad[i]);
		cr_assert_not(dbid_known(&b));
	}
}

Test(dbid, equal_needs_both_parts_and_known)
{
	dbid a = id("1/orders"), b = id("1/orders"), c = id("2/orders"), d = id("1/billing");
	dbid unknown = {0};
	cr_assert(dbid_equal(&a, &b));
	cr_assert_not(dbid_equal(&a, &c), "another cluster");
	cr_assert_not(dbid_equal(&a, &d), "another database of the cluster");
	cr_assert_not(dbid_equal(&unknown, &unknown), "unknown is never the same");
	cr_assert_not(dbid_equal(&a, NULL));
}

typedef struct {
	const char *md; /* metadata as committed; NULL: none */
	dbid_verdict want;
	const char *other; /* what it names, or NULL */
} judged;

Test(dbid, judge_reads_what_a_hub_committed)
{
	dbid self = id("1/orders"), adopt = id("2/orders");
	const judged cases[] = {
		{NULL, DBID_ABSENT, NULL},
		{"", DBID_ABSENT, NULL},
		/* txhub 0.4.0 committed none; other tools something else */
		{"consumer-x", DBID_ABSENT, NULL},
		{"{\"db_name\":\"orders\"}", DBID_ABSENT, NULL},
		{"{\"db_system_identifier\":1,\"db_name\":\"orders\"}", DBID_ABSENT, NULL},
		{"{\"db_system_identifier\":\"1\",\"db_name\":\"orders\"}", DBID_SAME, "1/orders"},
		{"{\"db_system_identifier\":\"2\",\"db_name\":\"orders\"}", DBID_ADOPTED, "2/orders"},
		{"{\"db_system_identifier\":\"1\",\"db_name\":\"billing\"}", DBID_OTHER, "1/billing"},
		{"{\"db_system_identifier\":\"3\",\"db_name\":\"orders\",\"more\":[1]}", DBID_OTHER,
		 "3/orders"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		dbid other;
		const char *md = cases[i].md;
		dbid_verdict v = dbid_judge(&self, &adopt, md, md ? strlen(md) : 0, &other);
		cr_assert_eq(v, cases[i].want, "%s: verdict %d", md ? md : "(none)", (int)v);
		if (cases[i].other) {
			dbid want = id(cases[i].other);
			cr_assert(dbid_equal(&other, &want), "%s", md);
		} else {
			cr_assert_not(dbid_known(&other), "%s", md);
		}
	}
	/* without pg.adopt_from, another database is just another */
	const char *md = "{\"db_system_identifier\":\"2\",\"db_name\":\"orders\"}";
	dbid other;
	cr_assert_eq(dbid_judge(&self, NULL, md, strlen(md), &other), DBID_OTHER);
}

/* What one hub commits, another hub reads back: names that need escaping
 * in JSON survive. */
Test(dbid, metadata_round_trips)
{
	const char *names[] = {"orders", "a\"b\\c", "caf\xc3\xa9 / 2", "x y"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		dbid d = {0};
		strcpy(d.system_id, "7712026944935744815");
		strcpy(d.name, names[i]);
		char *md = dbid_metadata(&d);
		cr_assert_not_null(md);
		dbid other, someone = id("9/else");
		cr_assert_eq(dbid_judge(&d, NULL, md, strlen(md), &other), DBID_SAME, "%s", md);
		cr_assert_eq(dbid_judge(&someone, NULL, md, strlen(md), &other), DBID_OTHER);
		cr_assert_str_eq(other.name, names[i]);
		free(md);
	}
}

Test(dbid, describe_names_both_parts)
{
	dbid d = id("7712026944935744815/orders"), unknown = {0};
	char buf[200];
	cr_assert_str_eq(dbid_describe(&d, buf, sizeof buf),
	                 "database \"orders\" of the cluster with system identifier "
	                 "7712026944935744815");
	cr_assert_str_eq(dbid_describe(&unknown, buf, sizeof buf), "an unknown database");
}
