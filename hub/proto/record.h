/* record.h: one control-topic record as intake hands it to the store:
 * where it came from, its bytes, and the envelope parsed from them (or why
 * not). store.h applies batches of them. */
#ifndef TXHUB_RECORD_H
#define TXHUB_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "envelope.h"
#include "metrics.h"
#include "topics.h"

/* One control-topic record of a batch. The byte pointers belong to the
 * caller (intake keeps the Kafka message alive until the batch is done). */
typedef struct {
	const char *src_topic; /* the control topic it arrived on: interned (topics.h), never
	                        * freed per record; the tenant rules trust this, never the envelope */
	tp_key tp;             /* (src_topic, partition) */
	int32_t partition;
	int64_t offset;
	const void *key;
	size_t key_len;
	const void *value; /* NULL for a null (tombstone) value */
	size_t value_len;
	int valid;          /* env holds a parsed envelope; else reason says why not */
	envelope env;
	int dated;          /* its forward.not_before was held to forward.max_delay (intake_date) */
	char reason[512];
	/* the tenant of the topic it arrived on (docs/tenants.md: Sharing one
	 * hub between teams), "" for none: stored with the rows it makes
	 * (messages, rejected, conflicts); and its tenant label in the
	 * metrics */
	char tenant[64];
	metrics_tenant label;
} store_record;

#endif
