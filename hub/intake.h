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

/* Called from inside intake_poll() when partitions are assigned or about to
 * be revoked. On revoke the callee must finish (store and acknowledge) the
 * batch in hand before returning: afterwards the partitions move away. */
typedef struct {
	void (*assigned)(void *opaque, const int32_t *partitions, size_t n);
	void (*revoking)(void *opaque, const int32_t *partitions, size_t n);
	void *opaque;
} intake_hooks;

intake *intake_new(const txhub_config *cfg, intake_hooks hooks, char *err, size_t errsz);

/* Add records to b until it holds cfg batch_max records or batch_bytes
 * bytes, or nothing more is ready; waits up to intake.poll_ms for the first. */
void intake_poll(intake *in, intake_batch *b);

/* Store the offsets of every record of b (after its transaction committed). */
void intake_ack(intake *in, const intake_batch *b);

/* Commit stored offsets now, synchronously. */
void intake_commit(intake *in);

/* Leave the group (triggers the revoke hook) and destroy the consumer. */
void intake_close(intake *in);

/* Partitions currently assigned, sorted. */
const int32_t *intake_owned(const intake *in, size_t *n);

#endif
