/* Unit tests for utf8: the one decoder of the hub and the client library
 * (RFC 3629: shortest forms only, no surrogates, nothing above U+10FFFF),
 * and the length of a text cut at a byte count without its cut sequence. */
#include <criterion/criterion.h>
#include <string.h>

#include "utf8.h"

Test(utf8, decodes_each_length_to_its_code_point)
{
	static const struct {
		const char *s;
		size_t len;
		uint32_t cp;
	} ok[] = {
		{"A", 1, 0x41},
		{"\x00", 1, 0x00},
		{"\xc2\x80", 2, 0x80},
		{"\xc3\xa9", 2, 0xe9},
		{"\xe0\xa0\x80", 3, 0x800},
		{"\xe2\x82\xac", 3, 0x20ac},
		{"\xed\x9f\xbf", 3, 0xd7ff},
		{"\xee\x80\x80", 3, 0xe000},
		{"\xf0\x90\x80\x80", 4, 0x10000},
		{"\xf4\x8f\xbf\xbf", 4, 0x10ffff},
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		uint32_t cp = 0xffffffff;
		size_t n = txhubi_utf8_decode((const unsigned char *)ok[i].s, ok[i].len, &cp);
		cr_expect_eq(n, ok[i].len, "case %zu: length %zu", i, n);
		cr_expect_eq(cp, ok[i].cp, "case %zu: U+%04X", i, (unsigned)cp);
		cr_expect(txhubi_utf8_valid(ok[i].s, ok[i].len), "case %zu", i);
	}
}

Test(utf8, refuses_overlong_surrogates_beyond_range_and_cut_sequences)
{
	static const struct {
		const char *s;
		size_t len;
		const char *why;
	} bad[] = {
		{"\x80", 1, "a lone continuation byte"},
		{"\xc0\xaf", 2, "overlong /"},
		{"\xc1\xbf", 2, "overlong, 2 bytes"},
		{"\xe0\x9f\xbf", 3, "overlong, 3 bytes"},
		{"\xf0\x8f\xbf\xbf", 4, "overlong, 4 bytes"},
		{"\xed\xa0\x80", 3, "a high surrogate"},
		{"\xed\xbf\xbf", 3, "a low surrogate"},
		{"\xf4\x90\x80\x80", 4, "above U+10FFFF"},
		{"\xf5\x80\x80\x80", 4, "a byte that starts nothing"},
		{"\xff", 1, "0xff"},
		{"\xc3", 1, "cut after the first byte"},
		{"\xe2\x82", 2, "cut after two of three"},
		{"\xc3\x41", 2, "a continuation that is none"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		uint32_t cp = 7;
		cr_expect_eq(txhubi_utf8_decode((const unsigned char *)bad[i].s, bad[i].len, &cp), 0,
		             "%s", bad[i].why);
		cr_expect_eq(cp, 7, "%s: the code point is untouched", bad[i].why);
		cr_expect_not(txhubi_utf8_valid(bad[i].s, bad[i].len), "%s", bad[i].why);
	}
	/* valid up to the last sequence */
	cr_expect_not(txhubi_utf8_valid("ok \xe2\x82", 5));
	cr_expect(txhubi_utf8_valid("", 0));
	cr_expect(txhubi_utf8_valid(NULL, 0));
	cr_expect_not(txhubi_utf8_valid(NULL, 1));
}

Test(utf8, complete_drops_only_a_sequence_cut_at_the_end)
{
	static const struct {
		const char *s;
		size_t n, want;
	} cases[] = {
		{"abc", 3, 3},
		{"", 0, 0},
		{"ab\xc3\xa9", 4, 4},          /* whole */
		{"ab\xc3", 3, 2},              /* é cut after its first byte */
		{"ab\xe2\x82", 4, 2},          /* € cut after two */
		{"ab\xe2\x82\xac", 5, 5},      /* € whole */
		{"a\xf0\x9f\x98", 4, 1},       /* an emoji cut after three */
		{"a\xf0\x9f\x98\x80", 5, 5},   /* whole */
		{"\xc3", 1, 0},                /* nothing left */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		cr_expect_eq(txhubi_utf8_complete((const unsigned char *)cases[i].s, cases[i].n),
		             cases[i].want, "case %zu", i);
}
