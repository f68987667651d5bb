/* intake.h: the control-topic consumer. Reads records in per-partition
 * order, validates each one into a store_record, and stores offsets only
 * when told the batch is safely in PostgreSQL.
 *
 * Called from the hub's main thread only. */
#ifndef TXHUB_INTAKE_H
#define TXHUB_INTAKE_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "owned.h"
#include "store.h"

typedef struct intake intake;

/* A batch of records read but not yet acknowledged. */
typedef struct {
	store_record *recs;
	rd_kafka_message_t **msgs; /* kept alive: recs point into them */
	size_t n, cap;
	size_t bytes;
} intake_batch;

void intake_batch_reset(intake_batch *b); /* destroys the messages */
void intake_batch_free(intake_batch *b);

/* Called from inside intake_poll() on a rebalance.
 *
 * take: before new partitions are read, take them in PostgreSQL: fill
 * own[i] (the new epoch) and next_offset[i] (where to start; -1: Kafka's
 * committed offset) for parts[i]. Returns 0, or -1 when a stop came first
 * (the partitions are then not read at all).
 * assigned: after they were assigned, with their epochs (the owned set
 * holds them by then).
 * revoking: before partitions move away (they are still in the owned set);
 * the callee must finish (store and acknowledge, or drop unacknowledged)
 * the batch in hand for them. */
typedef struct {
	int (*take)(void *opaque, const int32_t *parts, size_t n, store_owned *own,
	            int64_t *next_offset);
	void (*assigned)(void *opaque, const store_owned *own, size_t n);
	void (*revoking)(void *opaque, const int32_t *partitions, size_t n);
	void *opaque;
} intake_hooks;

/* owned: the run loop's set of owned partitions, empty, which intake keeps
 * up to date from now until intake_close() (owned.h: the points at which
 * it changes); it must outlive the intake. */
intake *intake_new(const txhub_config *cfg, intake_hooks hooks, owned_set *owned, char *err,
                   size_t errsz);

/* Add records to b until it holds cfg batch_max records or batch_bytes
 * bytes, or nothing more is ready; waits up to intake.poll_ms for the first. */
void intake_poll(intake *in, intake_batch *b);

/* Store the offsets of every record of b (after its transaction committed). */
void intake_ack(intake *in, const intake_batch *b);

/* Commit stored offsets now, synchronously. */
void intake_commit(intake *in);

/* Leave the group (triggers the revoke hook) and destroy the consumer. */
void intake_close(intake *in);

/* Why the consumer failed for good (librdkafka's fatal error: with static
 * membership, another process took this group.instance.id), or NULL. */
const char *intake_fatal(const intake *in);

/* These partitions were taken by another replica: stop reading them and
 * drop them from the owned set (silently: the caller logs who took them). They stay in intake_fenced() while Kafka
 * still assigns them here, until taken again (a new assignment, or
 * intake_retake()) or revoked. */
void intake_fence(intake *in, const int32_t *parts, size_t n);

/* Partitions Kafka assigns here that were fenced off, sorted. The pointer
 * stays valid until the next call into intake. */
const int32_t *intake_fenced(const intake *in, size_t *n);

/* Take fenced partitions back (their new epochs in own, taken in
 * PostgreSQL by the caller): read each again from next_offset[i] (-1: the
 * group's committed offset) and add it to the owned set (one whose seek
 * fails stays fenced). */
void intake_retake(intake *in, const store_owned *own, const int64_t *next_offset, size_t n);

/* The lag of each owned partition: the high watermark last seen by the
 * consumer minus its position (both from librdkafka's cache, no broker
 * round trip). Fills up to max entries, skipping partitions whose position
 * or watermark is not known yet; returns how many. */
size_t intake_lag(intake *in, int32_t *parts, int64_t *lag, size_t max);

/* Pause / resume reading every owned partition (PostgreSQL is away). The
 * consumer is still polled while paused, so the replica stays in its
 * group. */
void intake_pause(intake *in);
void intake_resume(intake *in);

/* Remove the records of these partitions from b (not acknowledged: they
 * are read again by whoever owns them). Returns how many. */
size_t intake_batch_drop(intake_batch *b, const int32_t *parts, size_t n);

#endif
