/* order.c: see order.h. A hash map of chained entries, grown as it fills. */
#include "order.h"

#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "clock.h"

struct order_map {
	order_key **slots;
	size_t nslots, n;
	size_t nblocked; /* entries with a blocker */
};

static uint64_t hash_of(tp_key tp, const char *topic, const char *key)
{
	uint64_t h = 1469598103934665603ULL ^ (uint64_t)tp;
	for (const char *s = topic; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	h = (h ^ 0xff) * 1099511628211ULL;
	for (const char *s = key; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

order_map *order_new(void)
{
	order_map *m = calloc(1, sizeof *m);
	if (m && !(m->slots = calloc(m->nslots = 256, sizeof *m->slots))) {
		free(m);
		return NULL;
	}
	return m;
}

static void key_free(order_key *k, void (*free_item)(void *))
{
	while (free_item && k->nqueue > 0)
		free_item(order_pop(k));
	free(k->queue);
	free(k->topic);
	free(k->key);
	free(k);
}

void order_free(order_map *m, void (*free_item)(void *))
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nslots; i++)
		for (order_key *k = m->slots[i], *next; k; k = next) {
			next = k->next;
			key_free(k, free_item);
		}
	free(m->slots);
	free(m);
}

static void grow(order_map *m)
{
	size_t nslots = m->nslots * 2;
	order_key **slots = calloc(nslots, sizeof *slots);
	if (!slots)
		return; /* longer chains, still right */
	for (size_t i = 0; i < m->nslots; i++)
		for (order_key *k = m->slots[i], *next; k; k = next) {
			next = k->next;
			size_t j = hash_of(k->tp, k->topic, k->key) & (nslots - 1);
			k->next = slots[j];
			slots[j] = k;
		}
	free(m->slots);
	m->slots = slots;
	m->nslots = nslots;
}

order_key *order_find(order_map *m, tp_key tp, const char *topic, const char *key, int create)
{
	size_t i = hash_of(tp, topic, key) & (m->nslots - 1);
	for (order_key *k = m->slots[i]; k; k = k->next)
		if (k->tp == tp && strcmp(k->topic, topic) == 0 && strcmp(k->key, key) == 0)
			return k;
	if (!create)
		return NULL;
	order_key *k = calloc(1, sizeof *k);
	if (!k || !(k->topic = strdup(topic)) || !(k->key = strdup(key))) {
		if (k) {
			free(k->topic);
			free(k);
		}
		return NULL;
	}
	k->tp = tp;
	k->blocker = k->noted = INT64_MAX;
	k->next = m->slots[i];
	m->slots[i] = k;
	if (++m->n > m->nslots)
		grow(m);
	return k;
}

int order_blocked(const order_map *m, tp_key tp, const char *topic, const char *key,
                  int64_t offset)
{
	if (m->nblocked == 0)
		return 0;
	order_key *k = order_find((order_map *)m, tp, topic, key, 0);
	return k && k->blocker < offset;
}

static void set_blocker(order_map *m, order_key *k, int64_t offset)
{
	m->nblocked += (k->blocker == INT64_MAX) - (offset == INT64_MAX);
	k->blocker = offset;
}

int order_note(order_map *m, tp_key tp, const char *topic, const char *key, int64_t offset)
{
	order_key *k = order_find(m, tp, topic, key, 1);
	if (!k)
		return -1;
	if (offset < k->blocker)
		set_blocker(m, k, offset);
	int64_t now = clock_ms();
	if (k->noted == INT64_MAX || now - k->noted_ms > ORDER_STICKY_MS) {
		k->noted = offset; /* a new run of notes */
		k->noted_ms = now;
	} else {
		if (offset < k->noted)
			k->noted = offset;
		k->noted_ms = now; /* a run is kept from its last note */
	}
	return 0;
}

static int has_part(const tp_key *parts, size_t n, tp_key tp)
{
	for (size_t i = 0; i < n; i++)
		if (parts[i] == tp)
			return 1;
	return 0;
}

void order_refresh(order_map *m, const tp_key *parts, size_t nparts,
                   const store_blocker_list *b, int64_t started_ms)
{
	for (size_t i = 0; i < m->nslots; i++)
		for (order_key *k = m->slots[i]; k; k = k->next) {
			if (!has_part(parts, nparts, k->tp))
				continue;
			if (k->noted_ms < started_ms - ORDER_STICKY_MS)
				k->noted = INT64_MAX;
			set_blocker(m, k, k->noted); /* what PostgreSQL may not have yet */
		}
	for (size_t i = 0; i < b->n; i++) {
		order_key *k = order_find(m, b->items[i].tp, b->items[i].topic, b->items[i].key, 1);
		if (k && b->items[i].offset < k->blocker)
			set_blocker(m, k, b->items[i].offset);
	}
	/* what holds nothing any more goes */
	for (size_t i = 0; i < m->nslots; i++)
		for (order_key **p = &m->slots[i]; *p;) {
			order_key *k = *p;
			if (k->blocker == INT64_MAX && k->noted == INT64_MAX && !k->busy &&
			    k->nqueue == 0) {
				*p = k->next;
				key_free(k, NULL);
				m->n--;
			} else {
				p = &k->next;
			}
		}
}


int order_push(order_key *k, void *item)
{
	if (k->headq + k->nqueue == k->capq) {
		if (k->headq > 0) { /* slide to the front first */
			memmove(k->queue, k->queue + k->headq, k->nqueue * sizeof *k->queue);
			k->headq = 0;
		}
		if (k->nqueue == k->capq) {
			void **q = array_grow(k->queue, &k->capq, k->nqueue + 1, sizeof *q);
			if (!q)
				return -1;
			k->queue = q;
		}
	}
	k->queue[k->headq + k->nqueue++] = item;
	return 0;
}

void *order_pop(order_key *k)
{
	if (k->nqueue == 0)
		return NULL;
	void *it = k->queue[k->headq++];
	if (--k->nqueue == 0)
		k->headq = 0;
	return it;
}

void order_forget(order_map *m, order_key *k)
{
	if (k->blocker != INT64_MAX || k->noted != INT64_MAX || k->busy || k->nqueue > 0)
		return;
	size_t i = hash_of(k->tp, k->topic, k->key) & (m->nslots - 1);
	for (order_key **p = &m->slots[i]; *p; p = &(*p)->next)
		if (*p == k) {
			*p = k->next;
			key_free(k, NULL);
			m->n--;
			return;
		}
}
