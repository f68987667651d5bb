/* forward.h: republish committed messages to their forward topics
 * (CONTRACT §4, §12).
 *
 * forward.mode = at_least_once (below): one idempotent producer.
 * forward.mode = exactly_once: a lane per owned partition (lane.h) with a
 * transactional producer; forward_send only wakes the lanes, which read
 * their rows from PostgreSQL in sequence order, and forward_poll starts
 * and stops lanes as partitions come and go.
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
#include "store.h"

typedef struct forward forward;

/* Longest Kafka topic name. */
#define FORWARD_TOPIC_MAX 249

/* Room for the reason a forward failed: the longest topic name and
 * librdkafka's longest error text (133 bytes in 2.0.2) with our words
 * around them; a unit test checks every error code fits. */
#define FORWARD_ERROR_MAX 512

/* Write why a forward to topic failed (refused: by rd_kafka_producev, else
 * in its delivery report) to buf, for last_error, the alert and the log:
 * printable ASCII, naming an unknown topic as such. Pure; any thread. */
void forward_describe_failure(char *buf, size_t size, const char *topic, int refused,
                              rd_kafka_resp_err_t e);

/* The forward producer's configuration (idempotent, acks=all, lz4,
 * message.max.bytes from envelope.max_bytes, then the kafka.* settings),
 * without callbacks; *delivery_timeout_ms receives its message.timeout.ms.
 * The caller owns the result. Also what `txhub bench` measures Kafka with. */
rd_kafka_conf_t *forward_producer_conf(const txhub_config *cfg, int64_t *delivery_timeout_ms,
                                       char *err, size_t errsz);

/* The headers of a forwarded record: the envelope's, then txhub-biz-id and
 * txhub-message-key. The caller owns the result. Any thread. */
rd_kafka_headers_t *forward_make_headers(const store_forward *f);

/* Forwards that end `failed` are reported through al (may be NULL). */
forward *forward_new(const txhub_config *cfg, alert *al, char *err, size_t errsz);
void forward_destroy(forward *fw);

/* A reload: forward.* tuning from cfg (which must outlive fw) from now on. */
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

/* Serve and record every report of what is in flight, waiting up to
 * timeout_ms (the producing thread). */
void forward_drain(forward *fw, const owned_set *own, int timeout_ms);

/* Raise a fatal error in the producer, as librdkafka's idempotence would
 * (rd_kafka_test_fatal_error): for tests. The next forward_poll replaces
 * the producer. */
void forward_test_fatal(forward *fw);

/* Counters since start. Any thread. */
typedef struct {
	uint64_t produced, delivered, failed_attempts, failed_final;
	uint64_t requeued; /* held by a producer that died: due again, no attempt counted */
	uint64_t replaced; /* producers replaced after a fatal error */
} forward_stats;
forward_stats forward_get_stats(forward *fw);

#endif
