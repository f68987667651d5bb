/* Unit tests for array: growth by doubling from 16, the room asked for at
 * the least, the array kept when it has room, and a size that cannot be
 * had refused with the array and its capacity untouched. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "array.h"

Test(array, grows_by_doubling_and_keeps_what_it_holds)
{
	int *a = NULL;
	size_t n = 0, cap = 0;
	for (int i = 0; i < 1000; i++) {
		int *g = array_grow(a, &cap, n + 1, sizeof *g);
		cr_assert_not_null(g);
		a = g;
		a[n++] = i;
		cr_expect_geq(cap, n);
	}
	cr_expect_eq(cap, 1024, "16, 32, ... 1024: %zu", cap);
	for (int i = 0; i < 1000; i++)
		cr_expect_eq(a[i], i);
	free(a);
}

Test(array, has_room_returns_the_same_array_and_a_big_need_is_met_at_once)
{
	size_t cap = 0;
	char *a = array_grow(NULL, &cap, 1, 1);
	cr_assert_not_null(a);
	cr_expect_eq(cap, 16);
	cr_expect_eq(array_grow(a, &cap, 16, 1), a, "room for 16: unchanged");
	cr_expect_eq(cap, 16);
	char *b = array_grow(a, &cap, 100, 1);
	cr_assert_not_null(b);
	cr_expect_eq(cap, 100, "more than twice: what was asked");
	free(b);
}

Test(array, a_size_past_size_max_is_refused_and_nothing_changes)
{
	size_t cap = 0;
	long *a = array_grow(NULL, &cap, 4, sizeof *a);
	cr_assert_not_null(a);
	a[3] = 42;
	cr_expect_null(array_grow(a, &cap, SIZE_MAX / 2, sizeof *a));
	cr_expect_eq(cap, 16, "capacity untouched");
	cr_expect_eq(a[3], 42, "the array is still the caller's");
	free(a);
}
