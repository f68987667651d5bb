/* test_log.c: escaping outside bytes for log lines. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

/* Lines written to stderr, captured through a pipe. */
static char captured[16384];

static void capture(void (*write_lines)(void))
{
	int fds[2];
	cr_assert_eq(pipe(fds), 0);
	fflush(stderr);
	int saved = dup(2);
	dup2(fds[1], 2);
	write_lines();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(fds[1]);
	ssize_t n = read(fds[0], captured, sizeof captured - 1);
	captured[n > 0 ? n : 0] = '\0';
	close(fds[0]);
}

static void two_lines(void)
{
	log_about about = {"shop", "k\"1\\", tp_of("txhub.control", 3), NULL};
	log_msg_about(LOG_WARN, "forward", &about, "attempt %d: %s", 2, "bad\nthing");
	log_info("plain %s", "line");
	log_debug("not shown at info");
}

Test(log, json_lines_carry_the_ids_as_fields)
{
	log_set_level(LOG_INFO);
	log_set_format(LOG_JSON);
	capture(two_lines);
	log_set_format(LOG_TEXT);
	char *nl = strchr(captured, '\n');
	cr_assert_not_null(nl);
	*nl = '\0';
	cr_assert(strstr(captured, "\"level\":\"warn\",\"msg\":\"forward: attempt 2: bad\\u000athing\","
	                           "\"biz_id\":\"shop\",\"message_key\":\"k\\\"1\\\\\","
	                           "\"topic\":\"txhub.control\",\"partition\":3}"), "%s", captured);
	cr_assert_eq(strncmp(captured, "{\"ts\":\"20", 9), 0, "%s", captured);
	cr_assert(strstr(nl + 1, "\"level\":\"info\",\"msg\":\"plain line\"}\n"), "%s", nl + 1);
	cr_assert_null(strstr(nl + 1, "not shown"));
}

Test(log, text_lines_put_the_ids_after_the_subsystem)
{
	log_set_level(LOG_INFO);
	log_set_format(LOG_TEXT);
	capture(two_lines);
	/* one line, whatever the message held */
	cr_assert(strstr(captured, " warn  forward: biz_id=shop message_key=k\"1\\x5c topic=txhub.control partition=3 "
	                           "attempt 2: bad thing\n"), "%s", captured);
}

static void traced_line(void)
{
	log_about about = {"shop", "o-1", tp_of("txhub.control", 0),
	                   "4bf92f3577b34da6a3ce929d0e0e4736"};
	log_msg_about(LOG_WARN, "checkback", &about, "attempt %d", 1);
}

Test(log, a_line_about_a_traced_message_carries_its_trace_id)
{
	log_set_level(LOG_INFO);
	log_set_format(LOG_JSON);
	capture(traced_line);
	cr_assert(strstr(captured, "\"message_key\":\"o-1\",\"trace_id\":"
	                           "\"4bf92f3577b34da6a3ce929d0e0e4736\",\"topic\":"), "%s", captured);
	log_set_format(LOG_TEXT);
	capture(traced_line);
	cr_assert(strstr(captured, "checkback: biz_id=shop message_key=o-1 trace_id="
	                           "4bf92f3577b34da6a3ce929d0e0e4736 topic=txhub.control partition=0 "
	                           "attempt 1\n"), "%s", captured);
	capture(two_lines); /* none: no trace_id at all */
	cr_assert_null(strstr(captured, "trace_id"), "%s", captured);
}

Test(log, format_names)
{
	log_format f;
	cr_assert_eq(log_format_parse("json", &f), 0);
	cr_assert_eq(f, LOG_JSON);
	cr_assert_eq(log_format_parse("text", &f), 0);
	cr_assert_eq(f, LOG_TEXT);
	cr_assert_eq(log_format_parse("JSON", &f), -1);
	cr_assert_eq(log_format_parse("", &f), -1);
}
