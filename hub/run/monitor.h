/* monitor.h: how `txhub run` is doing, seen from outside (docs/monitoring.md: Metrics and health):
 * GET /metrics, /healthz and /readyz on http.listen.
 *
 * The run loop reports every turn (monitor_turn) and what keeps it from
 * being ready; the gauges sampled from PostgreSQL are read by the HTTP
 * thread itself, on a connection of its own, at most every 10 s, so a
 * scrape never waits on, or for, the hot path. */
#ifndef TXHUB_MONITOR_H
#define TXHUB_MONITOR_H

#include <stddef.h>

#include "config.h"

typedef struct monitor monitor;

/* Serve on cfg->http_listen; with it empty nothing is served, and the
 * readiness is still kept for the txhub_ready gauge. The monitor holds
 * cfg (config_hold(); monitor_reconfigure swaps it). Returns NULL with err when the
 * address cannot be listened on. */
monitor *monitor_start(const txhub_config *cfg, char *err, size_t errsz);

/* Stop serving and free. NULL is fine. */
void monitor_stop(monitor *m);

/* The configuration in force after a reload (keys read per scrape). */
void monitor_reconfigure(monitor *m, const txhub_config *cfg);

/* Called by the run loop at every turn: it is alive (/healthz), whether the
 * consumer has joined its group, and why it is not ready ("" when it is). */
void monitor_turn(monitor *m, int joined, const char *problem);

#endif
