/* lane_watch.c: see lane_watch.h. */
#include "lane_watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "log.h"
#include "metrics.h"

/* How much longer than alert.lane_stuck_ms the alert waits for a reason. */
#define REASON_WAIT_MS 30000

static lane_wait *find(lane_watch *w, tp_key partition)
{
	for (size_t i = 0; i < w->n; i++)
		if (w->waits[i].tp == partition)
			return &w->waits[i];
	return NULL;
}

/* End the episode of w->waits[i]: logged when it was alerted. */
static void end_wait(lane_watch *w, size_t i, const char *how, int64_t now)
{
	const lane_wait *x = &w->waits[i];
	if (x->alerted)
		log_info("forward: " TP_FMT " %s after %lld s: the lane_stuck alert is over",
		         TP_ARG(x->tp), how, (long long)((now - x->since) / 1000));
	w->waits[i] = w->waits[--w->n];
}

void lane_watch_see(lane_watch *w, tp_key partition, int taken, const char *why,
                    const char *topic, int64_t now)
{
	lane_wait *x = find(w, partition);
	if (taken) {
		if (x)
			end_wait(w, (size_t)(x - w->waits), "taken", now);
		return;
	}
	if (!x) {
		lane_wait *n = array_grow(w->waits, &w->cap, w->n + 1, sizeof *n);
		if (!n)
			return; /* out of memory: looked at again next time */
		w->waits = n;
		x = &w->waits[w->n++];
		memset(x, 0, sizeof *x);
		x->tp = partition;
		x->since = now;
	}
	x->seen = 1;
	if (why && *why) {
		snprintf(x->why, sizeof x->why, "%s", why);
		snprintf(x->topic, sizeof x->topic, "%s", topic ? topic : "");
	}
}

void lane_watch_end(lane_watch *w, alert *al, int64_t stuck_ms, int64_t now)
{
	const lane_wait *first = NULL;
	w->nstuck = 0;
	for (size_t i = 0; i < w->n;) {
		lane_wait *x = &w->waits[i];
		if (!x->seen) {
			end_wait(w, i, "no longer owned", now);
			continue;
		}
		x->seen = 0;
		if (now - x->since >= stuck_ms) {
			/* the alert is raised once per episode: it waits for the
			 * reason of the lane's first failed attempt (a take-over can
			 * block on the broker longer than alert.lane_stuck_ms), at
			 * most REASON_WAIT_MS more, then goes without one */
			if (!x->alerted && (x->why[0] || now - x->since >= stuck_ms + REASON_WAIT_MS)) {
				char msg[900];
				snprintf(msg, sizeof msg, "exactly_once: " TP_FMT " not taken for %lld s: %s",
				         TP_ARG(x->tp), (long long)((now - x->since) / 1000),
				         x->why[0] ? x->why : "no attempt has ended yet");
				alert_raise(al, "lane_stuck", NULL, NULL, 0, x->topic[0] ? x->topic : NULL, msg);
				x->alerted = 1;
			}
			if (!first || x->since < first->since)
				first = x;
			w->nstuck++;
		}
		i++;
	}
	metrics_set_lanes_stuck(w->nstuck);
	w->reason[0] = '\0';
	if (first) {
		char why[512];
		snprintf(w->reason, sizeof w->reason,
		         "exactly_once: %zu partition(s) not taken by their lane for %lld s or more; "
		         TP_FMT ": %s", w->nstuck, (long long)(stuck_ms / 1000), TP_ARG(first->tp),
		         log_printable(first->why[0] ? first->why : "no attempt has ended yet", why,
		                       sizeof why));
	}
}

size_t lane_watch_stuck(const lane_watch *w, char *why, size_t whysz)
{
	snprintf(why, whysz, "%s", w->nstuck ? w->reason : "");
	return w->nstuck;
}

void lane_watch_free(lane_watch *w)
{
	free(w->waits);
	memset(w, 0, sizeof *w);
}
