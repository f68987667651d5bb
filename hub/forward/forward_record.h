/* forward_record.h: how a committed message becomes a Kafka record, for
 * both forward modes: the producer's settings, the record's headers, the
 * words for a failed delivery, and the counters. forward.c (at_least_once)
 * and lane.c (exactly_once) use it; it uses neither. */
#ifndef TXHUB_FORWARD_RECORD_H
#define TXHUB_FORWARD_RECORD_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "store.h"

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
 * txhub-message-key, then traceparent and tracestate when the message has a
 * trace context (which then replaces envelope headers of those names). The
 * caller owns the result. Any thread. */
rd_kafka_headers_t *forward_make_headers(const store_forward *f);

/* Counters since start. Any thread. */
typedef struct {
	uint64_t produced, delivered, failed_attempts, failed_final;
	uint64_t requeued; /* held by a producer that died: due again, no attempt counted */
	uint64_t replaced; /* producers replaced after a fatal error */
} forward_stats;

#endif
