/* array.h: the growable array every list of the hub is made of: a pointer,
 * a count and a capacity, grown by doubling. Pure; no state. */
#ifndef TXHUB_ARRAY_H
#define TXHUB_ARRAY_H

#include <stddef.h>

/* Room for need items (need > 0) of elem bytes each in items, an array
 * (NULL when empty) whose capacity is *cap items. Returns items when it has
 * the room; else the array reallocated to twice its capacity (16 items at
 * the least, need if more) with *cap set to that. NULL when out of memory
 * or the size would not fit a size_t: items and *cap are then unchanged,
 * and items is still the caller's.
 *
 *     thing *n = array_grow(l->items, &l->cap, l->n + 1, sizeof *n);
 *     if (!n)
 *             return -1;
 *     l->items = n;
 *     n[l->n++] = ...;
 */
void *array_grow(void *items, size_t *cap, size_t need, size_t elem);

#endif
