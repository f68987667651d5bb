/* alert.h: tell a human that a message needs attention.
 *
 * Every alert is an error-level log line. When alert.webhook is set it is
 * also POSTed there as one JSON object, for example
 *   {"kind":"check_failed","biz_id":"shop","message_key":"o-1","attempts":15,
 *    "last_error":"HTTP 503","at":"2026-11-22T10:00:00Z"}
 * or, about control-topic offsets (alert_raise_offsets),
 *   {"kind":"control_records_lost","biz_id":null,"message_key":null,"attempts":0,
 *    "topic":"txhub.control","partition":0,"from_offset":100,"to_offset":200,
 *    "last_error":"offsets 100 to 199 (100) of ...","at":"2026-11-22T10:00:00Z"}
 * from a thread of its own, retried with backoff a few times, so a slow or
 * dead webhook never holds up the hub. Safe to call from any thread. */
#ifndef TXHUB_ALERT_H
#define TXHUB_ALERT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef struct alert alert;

/* The kinds of alert, the table docs/producers.md: Alerts lists (`txhub
 * reference alerts` prints it): each kind's name, what it is about ("a
 * message", "the hub", ...) and when it is raised (markdown).
 * txhub_alerts_total{kind} counts each, and "other" for a kind not here. */
typedef struct {
	const char *kind;
	const char *about;
	const char *md;
} alert_kind;
#define ALERT_NKINDS 14
extern const alert_kind alert_kinds[ALERT_NKINDS];

/* Start the webhook thread when cfg->alert_webhook is set (else alerts are
 * only logged). Returns NULL with err only when out of resources. */
alert *alert_start(const txhub_config *cfg, char *err, size_t errsz);

/* Raise one alert. kind: one of alert_kinds, about one message (with its
 * biz_id and message_key) or about the hub (biz_id and message_key NULL,
 * sent as JSON null). topic may be NULL (it is named for send_failed,
 * for lane_stuck when the failure was about a topic, and for the control
 * topic's partitions). Never blocks on the network: when the queue is full
 * the webhook copy is dropped and that is logged. */
void alert_raise(alert *al, const char *kind, const char *biz_id, const char *message_key,
                 int attempts, const char *topic, const char *last_error);

/* The same about a message with a trace context (docs/consumers.md: Trace context): the log
 * line and the webhook's JSON carry its trace_id ("" or NULL: none). */
void alert_raise_traced(alert *al, const char *kind, const char *biz_id,
                        const char *message_key, int attempts, const char *topic,
                        const char *last_error, const char *trace_id);

/* Raise one alert about offsets of a control-topic partition (kind:
 * "control_records_lost", "control_partition_truncated"): the webhook's
 * JSON names the topic, the partition and the offsets [from_offset,
 * to_offset), with text as last_error (biz_id and message_key null,
 * attempts 0). */
typedef struct {
	int32_t partition;
	int64_t from, to;
} alert_offsets;
void alert_raise_offsets(alert *al, const char *kind, const char *topic,
                         const alert_offsets *offsets, const char *text);

/* A reload changed the configuration: take up alert.webhook (emptied: what
 * is queued is dropped as it falls due; set: later alerts go there). */
void alert_reconfigure(alert *al, const txhub_config *cfg);

/* Deliver what is queued for at most wait_ms, then stop and free. */
void alert_stop(alert *al, int wait_ms);

#endif
