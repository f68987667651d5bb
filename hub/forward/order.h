/* order.h: order per key (forward.order = key, docs/consumers.md: Order per key), the forwarder's
 * side.
 *
 * A committed message with a forward key is not produced while an earlier
 * one (its control partition's order: the offset of the record that
 * committed it) with the same forward topic and key is unsent. What is
 * unsent and not in the forwarder's hands (a retry waiting for its backoff,
 * a parked `failed` send, a delayed message, one held back for this very
 * rule) is a "blocker"; an order_map keeps, per (control partition, forward
 * topic, forward key), the lowest offset of its blockers, so that the check
 * on the hot path is a hash look-up and no query (and costs nothing for a
 * message with a null key, or when nothing is blocked: the map is empty).
 * The map is filled from PostgreSQL when partitions are taken and at each
 * due scan (store_order_blockers), and told at once of what the forwarder
 * itself sees fail or holds back.
 *
 * at_least_once also keeps, per key, whether a forward is in flight and the
 * key's next forwards waiting for its delivery report (one in flight per
 * key: a later record of the key delivered while an earlier one fails
 * would overtake it). Owned by one thread (the run loop's, or a lane's). */
#ifndef TXHUB_ORDER_H
#define TXHUB_ORDER_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

typedef struct order_key order_key;
typedef struct order_map order_map;

struct order_key {
	tp_key tp;
	char *topic;
	char *key;
	int64_t blocker;   /* lowest offset of a blocker; INT64_MAX: none */
	int64_t noted;     /* lowest offset the forwarder itself noted (INT64_MAX: none) ... */
	int64_t noted_ms;  /* ... last noted at this time */
	int busy;          /* at_least_once: a forward of the key is in flight */
	void **queue;      /* at_least_once: forwards waiting for it, in order */
	size_t nqueue, headq, capq;
	order_key *next;   /* the hash chain */
};

order_map *order_new(void);
/* free_item frees what is still queued (may be NULL when nothing can be). */
void order_free(order_map *m, void (*free_item)(void *));

/* The key's entry; NULL when there is none (create = 0) or out of memory. */
order_key *order_find(order_map *m, tp_key tp, const char *topic, const char *key, int create);

/* Whether a forward of the key at offset must wait: a blocker comes before it. */
int order_blocked(const order_map *m, tp_key tp, const char *topic, const char *key,
                  int64_t offset);

/* The forwarder itself made the row at offset a blocker (failed, requeued, held
 * back). Returns -1 when out of memory (the next refresh brings it). */
int order_note(order_map *m, tp_key tp, const char *topic, const char *key, int64_t offset);

/* Replace the blockers of the partitions parts[0..nparts) by those in b
 * (store_order_blockers, read from PostgreSQL since started_ms). A blocker
 * the forwarder noted itself within ORDER_STICKY_MS before started_ms is
 * kept: its row may not have been written yet when the read began. */
#define ORDER_STICKY_MS 5000
void order_refresh(order_map *m, const tp_key *parts, size_t nparts,
                   const store_blocker_list *b, int64_t started_ms);

/* at_least_once queue of a key. */
int order_push(order_key *k, void *item);
void *order_pop(order_key *k);

/* Drop k if it holds nothing (no blocker, nothing in flight or queued). */
void order_forget(order_map *m, order_key *k);

#endif
