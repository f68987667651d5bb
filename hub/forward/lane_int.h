/* lane_int.h: what lane.c and its parts share, private to them: the lane's
 * state and the steps they call of each other. lane.c on top (the thread,
 * a run, the lane's face), lane_takeover.c, lane_order.c and
 * lane_refused.c below it, lane_record.c at the bottom; each calls only
 * those under it (and lane_takeover.c's lane_end_with and
 * lane_fenced_error). */
#ifndef TXHUB_LANE_INT_H
#define TXHUB_LANE_INT_H

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "alert.h"
#include "config.h"
#include "lane.h"
#include "marker.h"
#include "order.h"
#include "store.h"
#include "txn.h"

/* How long a Kafka call of the lane may block (init, commit, abort). */
#define CALL_MS 60000
/* An idle lane looks in PostgreSQL this often anyway. */
#define IDLE_LOOK_MS 5000
/* Forward topics whose existence a lane remembers. */
#define TOPICS_MAX 10000

/* A topic Kafka refused in a transaction (lane_refused.c): its forwards
 * up to sequence upto were in that transaction. */
typedef struct {
	char *topic;
	int64_t upto;
} lane_refusal;

struct lane {
	const txhub_config *cfg;
	alert *al;
	owned_part own;
	char progress[300];     /* the progress topic */
	char txn_id[600];       /* the per-partition transactional.id of hubs before one per replica */
	txn *txn;               /* the replica's transactions (txn.h) */
	char marker_key[600];   /* group/partition */
	int32_t marker_part;    /* the partition of the progress topic */
	char origin[64];        /* the partition's fwd_origin, for the markers */
	const char *failpoint;  /* TXHUB_FAILPOINT, for the crash tests */
	pthread_t thread;

	pthread_mutex_t mu; /* guards what follows */
	int reread_blockers; /* lane_blockers_changed(): read them before the next run */
	pthread_cond_t cv;
	int64_t want_seq;   /* rows up to here are due (lane_notify) */
	int64_t covered;    /* rows up to here are sent, or were not there */
	int stopping, ended, fenced;
	int64_t stop_by;    /* stopping: give up what is left after this */
	char why[512];      /* why it ended */
	int taken;          /* take_partition succeeded */
	int after_rewind;   /* taken again after PostgreSQL lost its tail (lane_start) */
	char take_err[512]; /* until then: why its last attempt failed ... */
	char take_topic[300]; /* ... and the Kafka topic that was about ("": none) */
	forward_stats stats;

	/* the thread's */
	store *st;
	int64_t done_seq; /* the last marker committed */
	int marker_ours;  /* a marker of this replica's is committed since the take (send_run) */
	marker_dead dead;  /* what its markers say was not sent (marker.h) */
	size_t singles_left; /* runs of one forward to go (finding a bad one) */
	size_t search_cap;   /* > 0: runs of at most this many (finding a refused topic) ... */
	int64_t search_upto; /* ... until the rows up to here are done (lane_refused.c) */
	lane_refusal *refused; /* topics Kafka refused in a transaction */
	size_t nrefused, caprefused;
	int probe_due;       /* a run of one refused: does the progress topic take writes? */
	uint64_t commits;    /* transactions committed */
	uint64_t search_commits; /* ... when the search for a refused topic began */
	char *marker_out;    /* the marker of the run in hand ... */
	char *last_marker;   /* ... and of the last one committed (cJSON_free) */
	char **topics;    /* forward topics known to exist */
	size_t ntopics, captopics;
	order_map *order; /* forward.order = key: the partition's blockers (order.h) */
	int64_t order_read_ms; /* when they were last read from PostgreSQL */
	int64_t order_seen_seq; /* the highest sequence read before a read of them */
};

/* what the parts stand on (lane_record.c) */
int lane_is_stopping(lane *l, int past_grace);
void lane_pause_ms(lane *l, int64_t ms);
int lane_partitions_of(rd_kafka_t *rk, const char *topic, char *err, size_t errsz);
int lane_record(lane *l, const store_forward *items, size_t n, const rd_kafka_resp_err_t *failed,
                int held);

/* taking the partition (lane_takeover.c) */
void lane_end_with(lane *l, int fenced, const char *why);
int lane_fenced_error(rd_kafka_resp_err_t e);
int lane_take_partition(lane *l);

/* a topic Kafka refuses in a transaction (lane_refused.c) */
/* The most forwards the next run may hold (1 while finding a bad one). */
size_t lane_run_max(lane *l);
/* TOPIC_AUTHORIZATION_FAILED when f's topic was refused in a transaction f
 * was in; else 0. */
rd_kafka_resp_err_t lane_refused_check(lane *l, const store_forward *f);
/* list's transaction failed on a topic Kafka refuses: a run of one names
 * its forward (failed[0] set, its topic noted); a longer one makes the
 * next runs shorter. */
void lane_refused_run(lane *l, const store_forward_list *list, rd_kafka_resp_err_t *failed);
/* Whether the progress topic takes the lane's writes: a transaction of its
 * last committed marker alone (the same value again: nothing changes).
 * Returns 1 when it committed, 0 when Kafka refused the topic, -1 when it
 * could not tell, -2 when the lane must stop (fenced). */
int lane_probe_progress(lane *l);
void lane_refused_free(lane *l);

/* forward.order = key (lane_order.c) */
int lane_order_gate(lane *l, store_forward_list *list);
int lane_take_out_failed(lane *l, store_forward_list *list, rd_kafka_resp_err_t *failed);

#endif
