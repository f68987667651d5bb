/* forward.h: republish committed messages to their forward topics
 * (docs/consumers.md: What gets forwarded, and Forwarding exactly once).
 *
 * forward.mode = at_least_once (below): one idempotent producer.
 * forward.mode = exactly_once: a lane per owned partition (lane.h), their
 * runs in the replica's Kafka transactions (txn.h); forward_send only wakes
 * the lanes, which read their rows from PostgreSQL in sequence order, and
 * forward_poll starts and stops lanes as partitions come and go.
 *
 * A message is marked sent only when its delivery report says so; failed
 * deliveries are retried with backoff until forward.max_attempts. Delivery
 * reports are collected in memory and recorded in batches by a writer
 * thread on a PostgreSQL connection of its own, beside the run loop's
 * batches. Called from the hub's main thread, but for the functions marked
 * "any thread". */
#ifndef TXHUB_FORWARD_H
#define TXHUB_FORWARD_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#include "alert.h"
#include "config.h"
#include "owned.h"
#include "forward_record.h"
#include "store.h"

typedef struct forward forward;

/* Forwards that end `failed` are reported through al (may be NULL). */
forward *forward_new(const txhub_config *cfg, alert *al, char *err, size_t errsz);
void forward_destroy(forward *fw);

/* A reload: forward.* tuning from cfg from now on (fw holds a reference to
 * it: config_hold()). */
void forward_reconfigure(forward *fw, const txhub_config *cfg);

/* The producer's delivery time-out (message.timeout.ms), for the lease. */
int64_t forward_delivery_timeout_ms(const forward *fw);

/* Produce every message of l in order. Ownership of the list's contents
 * stays with the caller. */
void forward_send(forward *fw, const store_forward_list *l);

/* Serve delivery reports (this thread: the one that produces) and hand
 * them over to the writer, which records them in PostgreSQL on a
 * connection of its own, checking each against own (copied: the partitions
 * owned now) and dropping those of partitions no longer ours (their new
 * owner sends again). Reports the writer cannot record are kept and
 * retried with backoff. exactly_once: starts and stops the lanes to match
 * own. */
void forward_poll(forward *fw, const owned_set *own);

/* Messages handed to the producer whose report has not been recorded yet.
 * Any thread. */
size_t forward_in_flight(forward *fw);

/* Since when (clock_ms) recording delivery reports fails, 0 when it does
 * not; why into why. Any thread. */
int64_t forward_failing(forward *fw, char *why, size_t whysz);

/* at_least_once: when the producer has failed for good as it started
 * twice or more in a row (librdkafka's fatal error within 10 s of
 * starting, nothing delivered: typically no right to write, "Cluster
 * authorization failed"), since when, with a one-line reason into why;
 * else 0. Ends when a producer delivers or lives 10 s. The run loop's
 * thread. */
int64_t forward_dying(const forward *fw, char *why, size_t whysz);

/* exactly_once: owned partitions their lane has not taken for
 * alert.lane_stuck_ms or more (lane_watch.h), 0 when none; a one-line
 * reason into why. Any thread. */
size_t forward_stuck(forward *fw, char *why, size_t whysz);

/* Serve and record every report of what is in flight, waiting up to
 * timeout_ms (the producing thread). */
void forward_drain(forward *fw, const owned_set *own, int timeout_ms);

/* exactly_once: the replica's transactional.id (txn.h), which its dead
 * letters' is named after; NULL under at_least_once. */
const char *forward_txn_id(const forward *fw);

/* exactly_once: the hub's consumer, whose group metadata goes with every
 * Kafka transaction (txn.h); NULL before it is destroyed. */
void forward_set_consumer(forward *fw, rd_kafka_t *consumer);

/* Raise a fatal error in the producer, as librdkafka's idempotence would
 * (rd_kafka_test_fatal_error): for tests. The next forward_poll replaces
 * the producer. */
void forward_test_fatal(forward *fw);

forward_stats forward_get_stats(forward *fw);

/* forward.order = key, at_least_once: the blockers of the partitions of own
 * as read from PostgreSQL (store_order_blockers) since started_ms (clock_ms)
 * (order.h); synced_ms: forward_reports_synced() taken before that read
 * (what the forwarder noted before it is in PostgreSQL, and not kept).
 * Nothing for exactly_once: each lane reads its own. */
void forward_order_refresh(forward *fw, const owned_part *own, size_t nown,
                           const store_blocker_list *b, int64_t started_ms, int64_t synced_ms);

/* at_least_once: every delivery report handed over before this time
 * (clock_ms) is written to PostgreSQL. */
int64_t forward_reports_synced(forward *fw);

/* forward.order = key, at_least_once: whether a key's forward was delivered
 * with held ones after it since the last call (their release is due now:
 * store_order_release). */
int forward_take_release(forward *fw);

/* forward.order = key: the messages a batch made scheduled (delayed
 * delivery: store_take_scheduled) block their keys at once, before the
 * batch's forwards are sent (at_least_once: noted in the run loop's map;
 * exactly_once: their lanes read their blockers again before their next
 * run). Call from the run loop, before forward_send() of the same batch. */
void forward_note_scheduled(forward *fw, const store_forward_list *l);

/* exactly_once: own[0..n) are taken again (at those epochs) because
 * PostgreSQL lost their last transactions (docs/database.md, When
 * PostgreSQL fails over). Their lanes' recovery then counts the rows their
 * progress marker shows forwarded already in
 * txhub_forwards_after_rewind_total{outcome="already_sent"}: rows the
 * loss set back, and rows applied again from the control topic before the
 * lane read its marker (after it, the store counts them: store_stats). */
void forward_note_rewound(forward *fw, const owned_part *own, size_t n);

#endif
