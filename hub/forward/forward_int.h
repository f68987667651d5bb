/* forward_int.h: what forward.c and its parts share, private to them: the
 * forwarder's state and the steps they call of each other. forward.c on
 * top, forward_lanes.c and forward_reports.c below it, forward_base.c at
 * the bottom; each calls only those under it. */
#ifndef TXHUB_FORWARD_INT_H
#define TXHUB_FORWARD_INT_H

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "fault.h"
#include "forward.h"
#include "lane.h"
#include "lane_watch.h"
#include "marks.h"
#include "order.h"
#include "txn.h"

/* What travels with a message as its opaque, until its report is written. */
typedef struct {
	char *biz_id;
	char *message_key;
	tp_key tp;         /* source partition */
	int32_t send_attempts;
	int64_t decided_ms;  /* from store_forward: 0 unless a first send */
	metrics_tenant tenant; /* from store_forward */
	int64_t produced_ms; /* handed to the producer; 0: refused outright */
	int ok;
	int requeue;         /* not attempted after all: the producer died */
	int64_t fwd_seq;     /* its forward sequence (0: none), for the delivery marks */
	int reported;        /* counted in the marks */
	int clear;           /* its row has a last_error: written sent (clearing it) too */
	char *error;         /* why it failed (FORWARD_ERROR_MAX bytes), only when it did */
	char trace_id[33];   /* from store_forward: for its log lines */
	/* forward.order = key (order.h) */
	int64_t src_offset;
	int hold;            /* not produced: an earlier message of its key is unsent */
	order_key *okey;     /* its key's entry, while it is the key's forward in flight */
	store_forward *queued; /* its row, while it waits for the key's forward in flight */
} fw_item;

/* A list of reports. */
typedef struct {
	fw_item **items;
	size_t n, cap;
} fw_list;

/* A partition whose lane ended on its own (failed for good, or fenced by
 * Kafka) gets a new lane no sooner than this. */
#define LANE_RESTART_MS 5000
/* The lanes are looked at this often for partitions they have not taken. */
#define LANE_WATCH_MS 200

typedef struct {
	tp_key tp;
	int64_t not_before;
} lane_cooldown;

struct forward {
	/* exactly_once: a lane per owned partition (the run loop's; the array
	 * under mu, as other threads count what is pending) */
	int eos;
	txn *txn;    /* the replica's transactions, which the lanes' runs go in */
	lane **lanes;
	size_t nlanes, caplanes;
	lane **retiring; /* asked to stop, not ended yet */
	size_t nretiring, capretiring;
	lane_cooldown *cooldown;
	size_t ncooldown, capcooldown;
	forward_stats retired; /* counters of the lanes freed */
	uint64_t lanes_gen;    /* the owned set's version the lanes were last tended to ... */
	int lanes_settled;     /* ... leaving a running lane at its epoch for each partition */
	lane_watch watch;      /* partitions not taken by their lane */
	int64_t next_watch;

	/* the run loop's */
	rd_kafka_t *rk;
	alert *al;
	int64_t delivery_timeout_ms;
	int fatal;         /* the producer failed for good: replace it */
	int64_t born_ms;   /* when the producer in use was made ... */
	int delivered;     /* ... and whether it has delivered anything since */
	int dying;         /* producers in a row that failed for good as they started */
	int64_t dying_since;
	int64_t replace_at; /* the next producer is made no sooner */
	char dying_why[512];
	fw_list done;      /* reports served, not handed over yet */
	char **topics;     /* forward topics whose metadata the producer has */
	size_t ntopics, captopics;
	order_map *order;  /* forward.order = key: the keys' blockers and queues */
	order_key **ready; /* keys whose forward was delivered, with more queued */
	size_t nready, capready;
	int release;       /* a key's forward was delivered with held ones after it */

	/* shared with the writer, under mu */
	pthread_mutex_t mu;
	pthread_cond_t cv;      /* the writer: work or stop; the loop: written */
	const txhub_config *cfg;
	fw_list queue;          /* handed over, not written yet */
	marks marks;            /* sequences in flight per partition (marks.h) */
	owned_set own;          /* the partitions owned at the last hand-over (a copy) */
	owned_set rewound;      /* exactly_once: partitions taken again at that epoch because
	                         * PostgreSQL lost their tail (forward_note_rewound) */
	int64_t in_flight;      /* produced, report not written yet */
	int stopping;
	forward_stats stats;
	int64_t failing_since;  /* a copy of the writer's fault, for readiness */
	int64_t written_ms;     /* when the writer last wrote */
	int64_t handed_ms;      /* when forward_poll last handed reports over */
	int64_t synced_ms;      /* every report handed over before this is written */
	char failing[600];

	/* the writer's */
	pthread_t writer;
	int writer_started;
	const txhub_config *start_cfg; /* to connect with */
	store *st;
	fault f_write;
	owned_set written_own;  /* own, as the writer last took it */
};

/* what the parts share (forward_base.c) */
void forward_item_free(fw_item *it);
void forward_free_queued(void *it);
int forward_list_add(fw_list *l, fw_item *it);
void forward_list_free(fw_list *l);
void forward_failed(fw_item *it, const char *topic, int refused, rd_kafka_resp_err_t e);
lane *forward_lane_of(forward *fw, tp_key partition);
void forward_count_reports(const fw_list *l, const store_forward_list *failed);

/* the lanes, exactly_once (forward_lanes.c) */
void forward_notify_lanes(forward *fw, const store_forward_list *l);
void forward_tend_lanes(forward *fw, const owned_set *own);
void forward_add_stats(forward_stats *to, forward_stats s);

/* the writer thread of delivery reports (forward_reports.c) */
void *forward_write_reports(void *arg);

#endif
