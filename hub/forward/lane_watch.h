/* lane_watch.h: exactly_once partitions whose lane has not taken them
 * (lane.h: fencing the previous owner, reading its progress marker).
 *
 * A lane retries while Kafka or PostgreSQL refuse it, for good when an ACL
 * denies the hub the progress topic or its transactional id. An episode
 * starts when an owned partition is first seen without a lane that took
 * it, and lasts across the lanes that fail and are started again for it;
 * after alert.lane_stuck_ms it raises the alert lane_stuck once (naming
 * the topic and the broker's reason: it waits up to 30 s more for a lane's
 * first failed attempt to give one), counts in txhub_forward_lanes_stuck
 * and gives /readyz its reason. It ends, logged, when a lane takes the
 * partition or the partition is no longer owned.
 *
 * Plain data owned by forward.c's run-loop side (under its mutex); no
 * locking of its own. */
#ifndef TXHUB_LANE_WATCH_H
#define TXHUB_LANE_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "alert.h"
#include "topics.h"

typedef struct {
	tp_key tp;       /* the control topic and partition */
	int64_t since;   /* clock_ms: not taken since */
	int alerted;     /* lane_stuck raised for this episode */
	int seen;        /* seen in the current look */
	char why[512];   /* the last failure ("": none yet) */
	char topic[300]; /* the Kafka topic it was about ("": none) */
} lane_wait;

typedef struct {
	lane_wait *waits;
	size_t n, cap;
	size_t nstuck;    /* waits of alert.lane_stuck_ms or more, at the last look */
	char reason[700]; /* one line for /readyz while nstuck > 0 */
} lane_watch;

/* One look at partition (owned now): whether its lane has taken it, and
 * when not, why its last attempt failed and which topic that was about
 * (why NULL: no lane now, the last failure stands). */
void lane_watch_see(lane_watch *w, tp_key partition, int taken, const char *why,
                    const char *topic, int64_t now);

/* After lane_watch_see() for every owned partition: episodes of partitions
 * not seen end; those of stuck_ms or more raise lane_stuck (once) through
 * al (may be NULL), naming the partition and its control topic; the gauge
 * and the reason follow. */
void lane_watch_end(lane_watch *w, alert *al, int64_t stuck_ms, int64_t now);

/* Partitions stuck at the last look (0: none), with the reason. */
size_t lane_watch_stuck(const lane_watch *w, char *why, size_t whysz);

void lane_watch_free(lane_watch *w);

#endif
