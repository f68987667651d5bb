/* alert.h: tell a human that a message needs attention.
 *
 * Every alert is an error-level log line. When alert.webhook is set it is
 * also POSTed there as one JSON object, for example
 *   {"kind":"check_failed","biz_id":"shop","message_key":"o-1","attempts":15,
 *    "last_error":"HTTP 503","at":"2026-11-22T10:00:00Z"}
 * from a thread of its own, retried with backoff a few times, so a slow or
 * dead webhook never holds up the hub. Safe to call from any thread. */
#ifndef TXHUB_ALERT_H
#define TXHUB_ALERT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef struct alert alert;

/* Start the webhook thread when cfg->alert_webhook is set (else alerts are
 * only logged). Returns NULL with err only when out of resources. */
alert *alert_start(const txhub_config *cfg, char *err, size_t errsz);

/* Raise one alert. kind: "check_failed", "send_failed", "prepare_missing"
 * (about one message), or "database_failing", "kafka_fatal", "group_clash",
 * "database_mismatch" (about the hub: biz_id and message_key NULL, sent as
 * JSON null). topic may be NULL (it is named for send_failed, and for the
 * last two, which are about partitions of the control topic). Never blocks on the network: when the queue is full the
 * webhook copy is dropped and that is logged. */
void alert_raise(alert *al, const char *kind, const char *biz_id, const char *message_key,
                 int attempts, const char *topic, const char *last_error);

/* A reload changed the configuration: take up alert.webhook (emptied: what
 * is queued is dropped as it falls due; set: later alerts go there). */
void alert_reconfigure(alert *al, const txhub_config *cfg);

/* Deliver what is queued for at most wait_ms, then stop and free. */
void alert_stop(alert *al, int wait_ms);

typedef struct {
	uint64_t raised, delivered, dropped;
} alert_stats;
alert_stats alert_get_stats(alert *al);

#endif
