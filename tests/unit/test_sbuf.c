/* Unit tests for sbuf: the growable buffer and its PostgreSQL array literal writers. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "sbuf.h"

static sbuf b;

static void setup(void) { memset(&b, 0, sizeof b); }
static void teardown(void) { sbuf_free(&b); }

TestSuite(sbuf, .init = setup, .fini = teardown);

Test(sbuf, empty_buffer_is_empty_string)
{
	cr_assert_str_eq(sbuf_str(&b), "");
	cr_assert_eq(b.len, 0);
}

Test(sbuf, put_puts_printf)
{
	sbuf_put(&b, "ab\0c", 4);
	cr_assert_eq(b.len, 4);
	cr_assert_eq(memcmp(b.data, "ab\0c", 4), 0);
	sbuf_reset(&b);
	cr_assert_eq(b.len, 0);
	cr_assert_str_eq(sbuf_str(&b), "");
	sbuf_puts(&b, "x=");
	sbuf_printf(&b, "%d/%s", 42, "y");
	cr_assert_str_eq(sbuf_str(&b), "x=42/y");
	cr_assert_eq(b.len, 6);
	cr_assert_eq(b.oom, 0);
}

Test(sbuf, grows_past_initial_capacity)
{
	char chunk[1000];
	memset(chunk, 'z', sizeof chunk);
	for (int i = 0; i < 100; i++)
		sbuf_put(&b, chunk, sizeof chunk);
	sbuf_printf(&b, "%s", "end");
	cr_assert_eq(b.len, 100003);
	cr_assert_eq(strlen(sbuf_str(&b)), 100003);
	cr_assert_eq(b.data[99999], 'z');
	cr_assert_str_eq(b.data + 100000, "end");
}

Test(sbuf, empty_array)
{
	sbuf_arr_begin(&b);
	sbuf_arr_end(&b);
	cr_assert_str_eq(sbuf_str(&b), "{}");
}

Test(sbuf, text_plain_and_empty)
{
	sbuf_arr_begin(&b);
	sbuf_arr_text(&b, "abc");
	sbuf_arr_text(&b, "");
	sbuf_arr_text(&b, "a b,c{d}");
	sbuf_arr_end(&b);
	cr_assert_str_eq(sbuf_str(&b), "{\"abc\",\"\",\"a b,c{d}\"}");
}

Test(sbuf, text_escapes_quotes_and_backslashes)
{
	sbuf_arr_begin(&b);
	sbuf_arr_text(&b, "say \"hi\"");
	sbuf_arr_text(&b, "C:\\dir\\");
	sbuf_arr_text(&b, "\\\"");
	sbuf_arr_end(&b);
	cr_assert_str_eq(sbuf_str(&b), "{\"say \\\"hi\\\"\",\"C:\\\\dir\\\\\",\"\\\\\\\"\"}");
}

Test(sbuf, text_null_vs_string_null)
{
	sbuf_arr_begin(&b);
	sbuf_arr_text(&b, NULL);
	sbuf_arr_text(&b, "NULL");
	sbuf_arr_text(&b, NULL);
	sbuf_arr_end(&b);
	cr_assert_str_eq(sbuf_str(&b), "{NULL,\"NULL\",NULL}");
}

Test(sbuf, text_utf8_passes_through)
{
	sbuf_arr_begin(&b);
	sbuf_arr_text(&b, "h\xc3\xa9llo \xe2\x82\xac");
	sbuf_arr_end(&b);
	cr_assert_str_eq(sbuf_str(&b), "{\"h\xc3\xa9llo \xe2\x82\xac\"}");
}

Test(sbuf, text_long_all_escapes_grows)
{
	char s[5001];
	memset(s, '"', 5000);
	s[5000] = '\0';
	sbuf_arr_begin(&b);
	sbuf_arr_text(&b, s);
	sbuf_arr_end(&b);
	cr_assert_eq(b.len, 1 + 1 + 10000 + 1 + 1);
	cr_assert_eq(strlen(sbuf_str(&b)), b.len);
	cr_assert_eq(b.data[1], '"');
	cr_assert_eq(b.data[2], '\\');
	cr_assert_eq(b.data[3], '"');
	cr_assert_eq(b.data[b.len - 2], '"');
	cr_assert_eq(b.data[b.len - 3], '"');
	cr_assert_eq(b.data[b.len - 4], '\\');
}

Test(sbuf, hex)
{
	const unsigned char bytes[] = {0x00, 0x01, 0x7f, 0x80, 0xab, 0xff};
	sbuf_arr_begin(&b);
	sbuf_arr_hex(&b, bytes, sizeof bytes);
	sbuf_arr_hex(&b, NULL, 0);
	sbuf_arr_hex(&b, bytes, 0);
	sbuf_arr_hex(&b, "\x10", 1);
	sbuf_arr_end(&b);
	cr_assert_str_eq(sbuf_str(&b), "{\"00017f80abff\",NULL,\"\",\"10\"}");
}

Test(sbuf, ints)
{
	sbuf_arr_begin(&b);
	sbuf_arr_int(&b, 0);
	sbuf_arr_int(&b, -1);
	sbuf_arr_int(&b, 42);
	sbuf_arr_int(&b, INT64_MAX);
	sbuf_arr_int(&b, INT64_MIN);
	sbuf_arr_end(&b);
	cr_assert_str_eq(sbuf_str(&b), "{0,-1,42,9223372036854775807,-9223372036854775808}");
}

Test(sbuf, bools)
{
	sbuf_arr_begin(&b);
	sbuf_arr_bool(&b, 1);
	sbuf_arr_bool(&b, 0);
	sbuf_arr_bool(&b, 2);
	sbuf_arr_bool(&b, -1);
	sbuf_arr_end(&b);
	cr_assert_str_eq(sbuf_str(&b), "{t,f,t,t}");
}

Test(sbuf, single_elements_have_no_separator)
{
	sbuf_arr_begin(&b);
	sbuf_arr_int(&b, 7);
	sbuf_arr_end(&b);
	cr_assert_str_eq(sbuf_str(&b), "{7}");
	sbuf_reset(&b);
	sbuf_arr_begin(&b);
	sbuf_arr_text(&b, NULL);
	sbuf_arr_end(&b);
	cr_assert_str_eq(sbuf_str(&b), "{NULL}");
	sbuf_reset(&b);
	sbuf_arr_begin(&b);
	sbuf_arr_bool(&b, 0);
	sbuf_arr_end(&b);
	cr_assert_str_eq(sbuf_str(&b), "{f}");
}

Test(sbuf, mixed_separators)
{
	sbuf_arr_begin(&b);
	sbuf_arr_text(&b, "a");
	sbuf_arr_int(&b, 1);
	sbuf_arr_hex(&b, "\x01", 1);
	sbuf_arr_bool(&b, 1);
	sbuf_arr_text(&b, NULL);
	sbuf_arr_hex(&b, NULL, 3);
	sbuf_arr_end(&b);
	cr_assert_str_eq(sbuf_str(&b), "{\"a\",1,\"01\",t,NULL,NULL}");
}

Test(sbuf, several_arrays_in_one_buffer_after_reset)
{
	for (int round = 0; round < 3; round++) {
		sbuf_reset(&b);
		sbuf_arr_begin(&b);
		for (int i = 0; i < 3; i++)
			sbuf_arr_int(&b, round * 10 + i);
		sbuf_arr_end(&b);
	}
	cr_assert_str_eq(sbuf_str(&b), "{20,21,22}");
}

Test(sbuf, text_element_starting_with_brace)
{
	/* the separator logic must not mistake a '{' inside an element for the
	 * start of the array */
	sbuf_arr_begin(&b);
	sbuf_arr_text(&b, "{");
	sbuf_arr_text(&b, "{");
	sbuf_arr_end(&b);
	cr_assert_str_eq(sbuf_str(&b), "{\"{\",\"{\"}");
}

/* COPY's text format (the store's new rows): the characters that end a
 * field, a row or the data are escaped, NULL is \N, bytea is \\x<hex>. */
Test(sbuf, copy_row_escapes_what_would_end_a_field_or_the_data)
{
	const unsigned char bytes[] = {0x00, 0x5c, 0x0a, 0xff};
	sbuf_copy_text(&b, "plain");
	sbuf_copy_text(&b, "tab\there, nl\nthere, cr\r, back\\slash");
	sbuf_copy_text(&b, "\\.");
	sbuf_copy_text(&b, "\\N");
	sbuf_copy_text(&b, NULL);
	sbuf_copy_text(&b, "");
	sbuf_copy_hex(&b, bytes, sizeof bytes);
	sbuf_copy_hex(&b, NULL, 0);
	sbuf_copy_hex(&b, "", 0);
	sbuf_copy_int(&b, -42);
	sbuf_copy_end(&b);
	cr_assert_str_eq(sbuf_str(&b), "plain\ttab\\there, nl\\nthere, cr\\r, back\\\\slash\t\\\\.\t"
	                               "\\\\N\t\\N\t\t\\\\x005c0aff\t\\N\t\\\\x\t-42\n");
	/* exactly one newline, at the end; tabs only between fields */
	cr_assert_eq(strchr(sbuf_str(&b), '\n'), b.data + b.len - 1);
	size_t tabs = 0;
	for (size_t i = 0; i < b.len; i++)
		tabs += b.data[i] == '\t';
	cr_assert_eq(tabs, 9);
}

Test(sbuf, copy_long_text_grows)
{
	char s[5001];
	memset(s, '\t', 5000);
	s[5000] = '\0';
	sbuf_copy_text(&b, s);
	sbuf_copy_end(&b);
	cr_assert_eq(b.len, 2 * 5000 + 1);
	cr_assert_eq(b.data[b.len - 1], '\n');
	cr_assert_eq(b.data[0], '\\');
	cr_assert_eq(b.data[1], 't');
}
