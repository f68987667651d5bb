/* array.c: see array.h. */
#include "array.h"

#include <stdint.h>
#include <stdlib.h>

void *array_grow(void *items, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return items;
	size_t grown = *cap < 8 ? 16 : *cap > SIZE_MAX / 2 ? SIZE_MAX : *cap * 2;
	if (grown < need)
		grown = need;
	if (elem && grown > SIZE_MAX / elem)
		return NULL;
	void *n = realloc(items, grown * elem);
	if (!n)
		return NULL;
	*cap = grown;
	return n;
}
