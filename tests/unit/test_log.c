/* test_log.c: escaping outside bytes for log lines. */
#include <criterion/criterion.h>
#include <string.h>

#include "log.h"

Test(log, escape_makes_every_byte_printable)
{
	char out[64];
	const char raw[] = "a\\b\n\x01\xc3\xa9z";
	cr_assert_str_eq(log_escape(raw, sizeof raw - 1, out, sizeof out),
	                 "a\\x5cb\\x0a\\x01\\xc3\\xa9z");
	/* a NUL inside the data is data, too */
	cr_assert_str_eq(log_escape("a\0b", 3, out, sizeof out), "a\\x00b");
}

Test(log, escape_cuts_with_an_ellipsis_and_never_overflows)
{
	char out[12];
	memset(out, 'X', sizeof out);
	log_escape("0123456789abcdef", 16, out, sizeof out);
	cr_assert_str_eq(out, "01234567...");
	cr_assert_lt(strlen(out), sizeof out);
	/* an escape is never cut in half */
	log_escape("01234\x01\x02\x03", 8, out, sizeof out);
	cr_assert_str_eq(out, "01234...");
}

Test(log, printable_keeps_existing_escapes_once)
{
	char out[64];
	/* a stored last_error already escaped by the hub */
	cr_assert_str_eq(log_printable("unreadable answer: <html>\\x01\\xff", out, sizeof out),
	                 "unreadable answer: <html>\\x01\\xff");
	/* but raw control bytes are still escaped */
	cr_assert_str_eq(log_printable("a\tb\x7f", out, sizeof out), "a\\x09b\\x7f");
}
