/* owned.h: the control-topic partitions this replica owns, each a (topic,
 * partition) pair (tp_key, topics.h) at the epoch it was taken at in
 * txhub.partitions: one small set, sorted by key, that the run loop holds
 * and passes down.
 *
 * Lifetime. The run loop (hub.c) holds the one live set for as long as it
 * runs; intake (intake.h) is its only writer, always on the loop's thread,
 * at three named points:
 *   - a rebalance, served inside intake_poll() or intake_close(): partitions
 *     assigned are taken (owned_take), revoked or lost ones dropped;
 *   - intake_fence(): partitions another replica took are dropped;
 *   - intake_retake(): fenced partitions taken back at new epochs.
 * Everything else only reads it, handed down as const owned_set * (or as
 * parts and n to store.c's functions, which bind them as arrays, for one
 * call). Between two of those points the set does not change; a pointer
 * into it (parts, or what owned_find returns) is valid only until the next
 * of them, so whoever keeps ownership beyond a call (the check-back thread,
 * the forward writer) keeps a copy (owned_copy), and whoever only needs to
 * know whether it changed keeps gen (forward.c's lanes).
 *
 * Not thread-safe: a set shared between threads is guarded by its
 * holder's lock. */
#ifndef TXHUB_OWNED_H
#define TXHUB_OWNED_H

#include <stddef.h>
#include <stdint.h>

#include "topics.h"

/* A control-topic partition (topic, partition: topics.h's tp_key) this
 * replica owns, at the epoch its assignment took in txhub.partitions. Every
 * write for a partition first locks that row and checks the epoch is still
 * this one: a replica that lost the partition without noticing (paused,
 * cut off) can no longer write for it. */
typedef struct {
	tp_key tp;
	int64_t epoch;
	/* The partition's next offset in txhub.partitions when it was taken at
	 * this epoch (0 when it had none): where a database that lost its last
	 * transactions stood then, before this owner read anything again
	 * (store_recover_forwards). 0 where unknown, which takes more of the
	 * lost history for unsure, never less. */
	int64_t from;
} owned_part;

typedef struct {
	owned_part *parts; /* sorted by key, one entry each: read-only to all but the writer */
	size_t n;
	size_t cap;
	/* The version of the contents: every change draws a new one from a
	 * counter shared by all sets, and a copy keeps its source's, so two
	 * sets with the same gen hold the same partitions at the same epochs.
	 * 0: empty and never changed. */
	uint64_t gen;
} owned_set;

/* An empty set is all zeros ({0}); owned_free makes it one again. */
void owned_free(owned_set *s);

/* The entry of partition p (a tp_key), or NULL when it is not owned (binary search).
 * Valid until the set next changes. */
const owned_part *owned_find(const owned_set *s, tp_key p);

/* Whether partition p is owned (at any epoch) ... */
int owned_has(const owned_set *s, tp_key p);

/* ... and whether at exactly this epoch (0: not owned is never at an epoch). */
int owned_has_at(const owned_set *s, tp_key p, int64_t epoch);

/* Own o->tp at o->epoch: added, or its epoch (and from) replaced when it
 * is owned already (a retake). Returns 0, or -1 when out of memory (the set
 * is then unchanged). gen changes only when the contents do. */
int owned_take(owned_set *s, const owned_part *o);

/* Stop owning p (revoked, lost or fenced). Returns 1 when it was owned, 0
 * when not (the set is then unchanged). */
int owned_drop(owned_set *s, tp_key p);

/* Stop owning everything (gen changes when the set was not empty). */
void owned_clear(owned_set *s);

/* Make dst a copy of src, gen included (nothing to do when dst holds that
 * version already). Returns 0, or -1 when out of memory (dst is then
 * unchanged). */
int owned_copy(owned_set *dst, const owned_set *src);

#endif
