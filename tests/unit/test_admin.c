/* Unit tests for the admin commands' pure parts: argument parsing
 * (docs/admin.md: Admin commands: every bad usage refused with a message naming the argument), the
 * terminal escaping of stored text, and how show encodes a payload. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "ops.h"

/* Parse a NULL-terminated argument list for `command`. */
static int parse(const char *command, const char *const *args, admin_args *a, char *err,
                 size_t errsz)
{
	int n = 0;
	while (args[n])
		n++;
	return admin_parse(command, n, (char *const *)args, a, err, errsz);
}

Test(admin, parses_each_command)
{
	admin_args a;
	char err[512];

	const char *st[] = {"--json", NULL};
	cr_assert_eq(parse("status", st, &a, err, sizeof err), 0, "%s", err);
	cr_expect_eq(a.cmd, ADMIN_STATUS);
	cr_expect(a.json);

	const char *li[] = {"--status", "prepared", "--status=check_failed", "--send-status",
	                    "failed", "--biz", "shop", "--since", "1h30m", "--limit", "7", NULL};
	cr_assert_eq(parse("list", li, &a, err, sizeof err), 0, "%s", err);
	cr_expect_eq(a.nstatuses, 2);
	cr_expect_str_eq(a.statuses[0], "prepared");
	cr_expect_str_eq(a.statuses[1], "check_failed");
	cr_expect_str_eq(a.send_status, "failed");
	cr_expect_str_eq(a.biz_id, "shop");
	cr_expect_eq(a.since_ms, 5400000);
	cr_expect_eq(a.limit, 7);
	cr_expect_not(a.json);

	const char *li0[] = {NULL};
	cr_assert_eq(parse("list", li0, &a, err, sizeof err), 0, "%s", err);
	cr_expect_eq(a.limit, 100, "the default limit");
	cr_expect_not(a.since_set, "no --since: no filter");

	const char *sh[] = {"shop", "order-1", "--json", NULL};
	cr_assert_eq(parse("show", sh, &a, err, sizeof err), 0, "%s", err);
	cr_expect_str_eq(a.biz_id, "shop");
	cr_expect_str_eq(a.message_key, "order-1");

	const char *re[] = {"--rollback", "shop", "o-2", "--reason", "customer cancelled", NULL};
	cr_assert_eq(parse("resolve", re, &a, err, sizeof err), 0, "%s", err);
	cr_expect_eq(a.decision, OPS_ROLLBACK);
	cr_expect_str_eq(a.reason, "customer cancelled");
	cr_expect_str_eq(a.message_key, "o-2");

	const char *rd[] = {"--all-failed", "--biz", "shop", NULL};
	cr_assert_eq(parse("redrive", rd, &a, err, sizeof err), 0, "%s", err);
	cr_expect(a.all_failed);
	cr_expect_str_eq(a.biz_id, "shop");
	const char *rd1[] = {"shop", "o-3", NULL};
	cr_assert_eq(parse("redrive", rd1, &a, err, sizeof err), 0, "%s", err);
	cr_expect_not(a.all_failed);

	const char *pu[] = {"--older-than", "7d", "--dry-run", NULL};
	cr_assert_eq(parse("purge", pu, &a, err, sizeof err), 0, "%s", err);
	cr_expect_eq(a.older_than_ms, 604800000);
	cr_expect(a.dry_run);

	/* 0s is a duration (docs/admin.md: Admin commands): every finished row up to now */
	const char *pu0[] = {"--older-than", "0s", NULL};
	cr_assert_eq(parse("purge", pu0, &a, err, sizeof err), 0, "%s", err);
	cr_expect_eq(a.older_than_ms, 0);
	const char *pu0d[] = {"--older-than", "0s", "--dry-run", NULL};
	cr_assert_eq(parse("purge", pu0d, &a, err, sizeof err), 0, "%s", err);
	cr_expect(a.dry_run);
	/* and a filter that nothing is new enough for, not "no filter" */
	const char *since0[] = {"--since", "0s", NULL};
	cr_assert_eq(parse("list", since0, &a, err, sizeof err), 0, "%s", err);
	cr_expect(a.since_set);
	cr_expect_eq(a.since_ms, 0);
}

Test(admin, help_needs_no_other_argument)
{
	admin_args a;
	char err[512];
	const char *h[] = {"--help", NULL};
	cr_assert_eq(parse("resolve", h, &a, err, sizeof err), 0, "%s", err);
	cr_expect(a.help);
	const char *dash[] = {"--", "--help", "k", NULL};
	cr_assert_eq(parse("show", dash, &a, err, sizeof err), 0, "%s", err);
	cr_expect_not(a.help, "after --, --help is an id");
	cr_expect_str_eq(a.biz_id, "--help");
}

Test(admin, double_dash_lets_ids_start_with_a_dash)
{
	admin_args a;
	char err[512];
	const char *sh[] = {"--json", "--", "-shop", "--json", NULL};
	cr_assert_eq(parse("show", sh, &a, err, sizeof err), 0, "%s", err);
	cr_expect_str_eq(a.biz_id, "-shop");
	cr_expect_str_eq(a.message_key, "--json");
	cr_expect(a.json);
}

static const struct {
	const char *command;
	const char *args[10];
	const char *mention; /* the argument the message must name */
} bad[] = {
	{"list", {"--status", "bogus"}, "bogus"},
	{"list", {"--status=pending"}, "--status"},
	{"list", {"--send-status", "lost"}, "lost"},
	{"list", {"--since", "5"}, "--since"},
	{"list", {"--since", "-1h"}, "--since"},
	{"list", {"--since", "3w"}, "--since"},
	{"list", {"--since", ""}, "--since"},
	{"list", {"--since"}, "--since"},
	{"list", {"--limit", "0"}, "--limit"},
	{"list", {"--limit", "10001"}, "--limit"},
	{"list", {"--limit", "12x"}, "--limit"},
	{"list", {"--limit", "-3"}, "--limit"},
	{"list", {"--limit", "99999999999999999999"}, "--limit"},
	{"list", {"--limit", "5", "--limit", "6"}, "--limit"},
	{"list", {"--biz", ""}, "--biz"},
	{"list", {"--biz", "a\x01" "b"}, "--biz"},
	{"list", {"--biz", "0123456789012345678901234567890123456789012345678901234567890123456789"},
	 "--biz"},
	{"list", {"extra"}, "extra"},
	{"list", {"--frobnicate"}, "--frobnicate"},
	{"list", {"-x"}, "-x"},
	{"list", {"--commit"}, "--commit"},
	{"status", {"--since", "1h"}, "--since"},
	{"status", {"now"}, "now"},
	{"status", {"--json=yes"}, "--json"},
	{"show", {"shop"}, "KEY"},
	{"show", {NULL}, "BIZ"},
	{"show", {"shop", "k", "more"}, "more"},
	{"show", {"", "k"}, "BIZ"},
	{"show", {"shop", "k\x7f"}, "KEY"},
	{"show", {"shop", "k\xc2\x85"}, "KEY"},
	{"show", {"shop", "\xff"}, "KEY"},
	{"resolve", {"shop", "k", "--commit", "--rollback"}, "--commit and --rollback"},
	{"resolve", {"shop", "k"}, "--commit or --rollback"},
	{"resolve", {"shop", "--commit"}, "KEY"},
	{"resolve", {"shop", "k", "--commit", "--commit"}, "--commit"},
	{"resolve", {"shop", "k", "--commit", "--reason"}, "--reason"},
	{"resolve", {"shop", "k", "--commit", "--reason", ""}, "--reason"},
	{"resolve", {"shop", "k", "--commit", "--reason", "line\nbreak"}, "--reason"},
	{"resolve", {"shop", "k", "--commit", "--all-failed"}, "--all-failed"},
	{"redrive", {"shop"}, "KEY"},
	{"redrive", {"--all-failed", "shop", "k"}, "shop"},
	{"redrive", {"--biz", "shop"}, "--biz"},
	{"redrive", {"--all-failed", "--biz", "a\tb"}, "--biz"},
	{"purge", {NULL}, "--older-than"},
	{"purge", {"--older-than", "7"}, "--older-than"},
	{"purge", {"--older-than", "7d", "--dry-run=1"}, "--dry-run"},
	{"purge", {"--older-than", "7d", "old"}, "old"},
	{"frobnicate", {NULL}, "frobnicate"},
};

Test(admin, bad_usage_is_refused_naming_the_argument)
{
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		admin_args a;
		char err[512] = "";
		int rc = parse(bad[i].command, bad[i].args, &a, err, sizeof err);
		cr_expect_eq(rc, -1, "case %zu (%s %s) accepted", i, bad[i].command,
		             bad[i].args[0] ? bad[i].args[0] : "");
		cr_expect(strstr(err, bad[i].mention) != NULL, "case %zu: \"%s\" not in: %s", i,
		          bad[i].mention, err);
	}
}

Test(admin, every_command_is_known)
{
	const char *names[] = {"status", "list", "show", "resolve", "redrive", "purge"};
	for (size_t i = 0; i < 6; i++)
		cr_expect(admin_is_command(names[i]), "%s", names[i]);
	cr_expect_not(admin_is_command("run"));
	cr_expect_not(admin_is_command("console"), "issue 13, not here");
}

Test(admin, escape_keeps_printable_utf8_and_escapes_the_rest)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"plain text", "plain text"},
		{"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"},
		{"a\x1b[31mred", "a\\x1B[31mred"},
		{"line\nbreak\ttab\r", "line\\x0Abreak\\x09tab\\x0D"},
		{"del\x7f", "del\\x7F"},
		{"c1\xc2\x85|\xc2\x9b", "c1\\xC2\\x85|\\xC2\\x9B"},
		{"nbsp\xc2\xa0", "nbsp\xc2\xa0"},
		{"bad\xff\xfe", "bad\\xFF\\xFE"},
		{"cut\xe2\x82", "cut\\xE2\\x82"},
		{"overlong\xc0\xaf", "overlong\\xC0\\xAF"},
		{"surrogate\xed\xa0\x80", "surrogate\\xED\\xA0\\x80"},
		{"back\\slash", "back\\x5Cslash"},
		{"", ""},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *e = admin_escape(cases[i].in);
		cr_assert_not_null(e);
		cr_expect_str_eq(e, cases[i].out, "case %zu", i);
		free(e);
	}
}

Test(admin, width_counts_characters)
{
	cr_expect_eq(admin_width(""), 0);
	cr_expect_eq(admin_width("abc"), 3);
	cr_expect_eq(admin_width("h\xc3\xa9llo"), 5);
	cr_expect_eq(admin_width("\xe2\x82\xac\xf0\x9f\x98\x80"), 2);
}

Test(admin, payload_is_text_when_utf8_else_base64)
{
	const char *enc = NULL;
	char *t = ops_payload_text((const unsigned char *)"{\"a\":\"\xc3\xa9\"}", 10, &enc);
	cr_assert_not_null(t);
	cr_expect_str_eq(enc, "utf8");
	cr_expect_str_eq(t, "{\"a\":\"\xc3\xa9\"}");
	free(t);

	t = ops_payload_text((const unsigned char *)"\x00\x01\x02\xff", 4, &enc);
	cr_expect_str_eq(enc, "base64");
	cr_expect_str_eq(t, "AAEC/w==");
	free(t);

	/* valid UTF-8 but with a NUL byte: JSON text could not hold it whole */
	t = ops_payload_text((const unsigned char *)"a\0b", 3, &enc);
	cr_expect_str_eq(enc, "base64");
	cr_expect_str_eq(t, "YQBi");
	free(t);

	t = ops_payload_text((const unsigned char *)"", 0, &enc);
	cr_expect_str_eq(enc, "utf8");
	cr_expect_str_eq(t, "");
	free(t);
}

Test(admin, ids_follow_the_envelope_rules)
{
	char err[256];
	cr_expect_eq(ops_check_ids("shop", "o-1", err, sizeof err), OPS_OK);
	cr_expect_eq(ops_check_ids("", "o-1", err, sizeof err), OPS_BAD_ARG);
	cr_expect(strstr(err, "biz_id"), "%s", err);
	char long_key[300];
	memset(long_key, 'k', 256);
	long_key[256] = '\0';
	cr_expect_eq(ops_check_ids("shop", long_key, err, sizeof err), OPS_BAD_ARG);
	cr_expect(strstr(err, "message_key"), "%s", err);
	long_key[255] = '\0';
	cr_expect_eq(ops_check_ids("shop", long_key, err, sizeof err), OPS_OK, "255 bytes is fine");
	cr_expect_eq(ops_check_ids("shop", "a\xc2\x85", err, sizeof err), OPS_BAD_ARG);
	cr_expect(strstr(err, "U+0085"), "%s", err);
	cr_expect_eq(ops_check_ids(NULL, "k", err, sizeof err), OPS_BAD_ARG);
	cr_expect_eq(ops_check_ids("b", NULL, err, sizeof err), OPS_BAD_ARG);
}

Test(admin, actor_is_a_valid_id)
{
	char actor[OPS_ACTOR_MAX + 1];
	admin_actor(actor, sizeof actor);
	char err[256];
	cr_expect_eq(ops_check_ids(actor, actor, err, sizeof err), OPS_OK, "%s: %s", actor, err);
}
