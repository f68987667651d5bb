/* gap.h: where to read a control-topic partition from when the offset the
 * hub wanted is not on the broker (librdkafka's "offset out of range",
 * which the consumer reports instead of resetting: auto.offset.reset =
 * error). Pure: the caller brings the broker's watermarks.
 *
 *   wanted < low    the broker deleted [wanted, low) before any hub read
 *                   it (retention, DeleteRecords): lost for good. Read on
 *                   from low.
 *   wanted > high   the partition ends before where the hub stood: the
 *                   topic was deleted and made again, or the broker lost
 *                   records (an unclean leader election). [high, wanted)
 *                   is not there any more; what is there may be records
 *                   never read (a new topic's). Read it all again from
 *                   low: applying an envelope twice changes nothing, and
 *                   skipping a record loses it.
 *   otherwise       a passing disagreement (a new leader catching up):
 *                   read wanted again. */
#ifndef TXHUB_GAP_H
#define TXHUB_GAP_H

#include <stddef.h>
#include <stdint.h>

#include "topics.h"

typedef enum {
	GAP_NONE,      /* wanted is on the broker */
	GAP_LOST,      /* [from, to) deleted before it was read */
	GAP_TRUNCATED, /* [from, to) beyond the partition's end */
} gap_kind;

typedef struct {
	gap_kind kind;
	tp_key tp;        /* the control topic and partition */
	int64_t wanted;   /* the offset the hub wanted to read */
	int64_t low;      /* the broker's first offset of the partition */
	int64_t high;     /* ... and the offset after its last */
	int64_t from, to; /* the offsets missing: [from, to); from == to for GAP_NONE */
	int64_t resume;   /* where to read from now */
} gap;

/* Decide for partition p (wanted, low and high >= 0, low <= high). */
void gap_decide(tp_key p, int64_t wanted, int64_t low, int64_t high, gap *g);

/* "lost", "truncated" (as kept in txhub.gaps), or "none". */
const char *gap_kind_name(gap_kind k);

/* The alert kind raised for it: "control_records_lost" or
 * "control_partition_truncated" (NULL for GAP_NONE). */
const char *gap_alert_kind(gap_kind k);

/* One line for operators about g on topic (log, alert), into out. */
void gap_describe(const gap *g, const char *topic, char *out, size_t outsz);

#endif
