/* marker.h: the progress markers of forward.mode = exactly_once.
 *
 * A lane writes one marker per Kafka transaction into the progress topic,
 * in the same transaction as the forwards: the highest forward sequence of
 * the run, that row's ids, the partition's fwd_origin. A partition's next
 * owner reads the last committed one and marks every pending row up to it
 * sent (store_recover_forwards). Version 2 markers (sequences derived from
 * control offsets, store.h) also carry the dead sequences: offset
 * sequences whose forward failed and that were not sent since under a new
 * sequence. After the database lost its last transactions, a row applied
 * again gets its offset sequence back; the marker then tells whether it
 * was forwarded before the loss (at or below seq, not dead).
 *
 * Pure logic, no I/O: unit-tested in tests/unit/test_marker.c. */
#ifndef TXHUB_MARKER_H
#define TXHUB_MARKER_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* The dead sequences a lane keeps, as its markers carry them. */
typedef struct {
	int64_t seq[STORE_MARKER_DEAD_MAX];
	size_t n;
	int64_t unsure_from; /* -1: none; else more failed than listed, from here on */
	int64_t oob;         /* highest sequence of a row decided outside the control topic
	                      * that was sent or failed (0: none) */
} marker_dead;

/* Start from what a marker of this database's lineage said (m NULL, or a
 * version 1 marker: nothing is dead). */
void marker_dead_init(marker_dead *d, const store_marker *m);

/* Add the offset sequence seq to the dead ones (found in PostgreSQL: a
 * failure recorded that no marker listed yet, the lane having ended
 * between the two). */
void marker_dead_add(marker_dead *d, int64_t seq);

/* The forward of f failed: its sequence is dead when it is f's offset
 * sequence; under another sequence, a row whose offset sequence is listed
 * (a retry) stays listed, any other (decided outside the control topic)
 * raises oob. */
void marker_dead_fail(marker_dead *d, const store_forward *f);

/* What d becomes once items[0..n) are sent: the offset sequences of
 * revived rows among them (listed, sent under a later sequence) leave it;
 * a row sent under a sequence that is not its offset's and not listed
 * (decided outside the control topic) raises oob. */
void marker_dead_sent(marker_dead *d, const store_forward *items, size_t n);

/* A version 2 marker's value for a run whose last row is last (its
 * sequence the marker's), malloc'd; NULL when out of memory. txn_id (NULL:
 * left out) names the transactional.id of the producer that writes it, so
 * that a new owner finding it in an open transaction can fence that
 * producer (lane_takeover.c). */
char *marker_encode(const store_forward *last, const char *origin, int64_t epoch,
                    int32_t partition, const marker_dead *d, const char *txn_id);

/* The transactional.id a marker's value names into out; 0, or -1 when it
 * names none (written by a hub of one producer per partition, or not a
 * marker). */
int marker_txn_of(const char *payload, size_t len, char *out, size_t outsz);

/* Read a marker's value (version 1 or 2) into m; returns 0, or -1 when it
 * is not one. */
int marker_parse(const char *payload, size_t len, store_marker *m);

#endif
