/* owned.c: see owned.h. */
#include "owned.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"

/* Versions for every set: one counter, so that equal gens mean equal
 * contents even across sets (a copy and its source). Atomic only so that
 * sets on different threads (tests) never draw the same one. */
static atomic_uint_fast64_t versions;

static void changed(owned_set *s) { s->gen = (uint64_t)atomic_fetch_add(&versions, 1) + 1; }

/* Where p is, or where it would go to keep parts sorted. */
static size_t position(const owned_set *s, tp_key p)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->parts[mid].tp < p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void owned_free(owned_set *s)
{
	free(s->parts);
	memset(s, 0, sizeof *s);
}

const owned_part *owned_find(const owned_set *s, tp_key p)
{
	size_t i = position(s, p);
	return i < s->n && s->parts[i].tp == p ? &s->parts[i] : NULL;
}

int owned_has(const owned_set *s, tp_key p) { return owned_find(s, p) != NULL; }

int owned_has_at(const owned_set *s, tp_key p, int64_t epoch)
{
	const owned_part *o = owned_find(s, p);
	return o && o->epoch == epoch;
}

int owned_take(owned_set *s, const owned_part *o)
{
	size_t i = position(s, o->tp);
	if (i < s->n && s->parts[i].tp == o->tp) {
		if (s->parts[i].epoch != o->epoch) {
			s->parts[i] = *o;
			changed(s);
		}
		return 0;
	}
	owned_part *n = array_grow(s->parts, &s->cap, s->n + 1, sizeof *n);
	if (!n)
		return -1;
	s->parts = n;
	memmove(&s->parts[i + 1], &s->parts[i], (s->n - i) * sizeof *s->parts);
	s->parts[i] = *o;
	s->n++;
	changed(s);
	return 0;
}

int owned_drop(owned_set *s, tp_key p)
{
	size_t i = position(s, p);
	if (i == s->n || s->parts[i].tp != p)
		return 0;
	memmove(&s->parts[i], &s->parts[i + 1], (s->n - i - 1) * sizeof *s->parts);
	s->n--;
	changed(s);
	return 1;
}

void owned_clear(owned_set *s)
{
	if (s->n == 0)
		return;
	s->n = 0;
	changed(s);
}

int owned_copy(owned_set *dst, const owned_set *src)
{
	if (dst == src || (dst->gen == src->gen && dst->n == src->n))
		return 0; /* the same version: the same contents */
	if (src->n > dst->cap) {
		owned_part *n = realloc(dst->parts, src->n * sizeof *n);
		if (!n)
			return -1;
		dst->parts = n;
		dst->cap = src->n;
	}
	if (src->n)
		memcpy(dst->parts, src->parts, src->n * sizeof *src->parts);
	dst->n = src->n;
	dst->gen = src->gen;
	return 0;
}
