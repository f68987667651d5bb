/* forward_lanes.c: forward.mode = exactly_once: the set of lanes (lane.c),
 * one per owned partition, started, told of new forwards, restarted after
 * they fail and retired as partitions go; their counters. */
#include "forward_int.h"

#include <pthread.h>
#include <stdlib.h>

#include "alert.h"
#include "array.h"
#include "clock.h"
#include "kafka.h"
#include "lane.h"
#include "lane_watch.h"
#include "log.h"
#include "owned.h"
#include "store.h"

/* exactly_once: wake the lanes of the partitions with rows due (the rows
 * themselves they read from PostgreSQL, in sequence order). A row without
 * a sequence gets one at the loop's next scan (store_sequence_forwards). */
void forward_notify_lanes(forward *fw, const store_forward_list *l)
{
	for (size_t i = 0; i < l->n;) {
		tp_key p = l->items[i].src_tp;
		int64_t max = 0;
		for (; i < l->n && l->items[i].src_tp == p; i++)
			if (l->items[i].fwd_seq > max)
				max = l->items[i].fwd_seq;
		lane *ln = max > 0 ? forward_lane_of(fw, p) : NULL;
		if (ln)
			lane_notify(ln, max);
	}
}

/* Whether partition's lane is cooling down (any partition's, when
 * partition < 0); forgets the cooldowns that are over. */
static int cooling_down(forward *fw, tp_key partition, int64_t now)
{
	size_t k = 0;
	int found = 0;
	for (size_t i = 0; i < fw->ncooldown; i++) {
		if (fw->cooldown[i].not_before <= now)
			continue; /* over: forget it */
		found |= partition < 0 || fw->cooldown[i].tp == partition;
		fw->cooldown[k++] = fw->cooldown[i];
	}
	fw->ncooldown = k;
	return found;
}

void forward_add_stats(forward_stats *to, forward_stats s)
{
	to->produced += s.produced;
	to->delivered += s.delivered;
	to->failed_attempts += s.failed_attempts;
	to->failed_final += s.failed_final;
	to->requeued += s.requeued;
	to->replaced += s.replaced;
}

/* Move lane i of fw->lanes to the retiring ones (under mu). */
static void retire(forward *fw, size_t i)
{
	lane **r = array_grow(fw->retiring, &fw->capretiring, fw->nretiring + 1, sizeof *r);
	if (!r) { /* stop it here and now */
		forward_add_stats(&fw->retired, lane_stats(fw->lanes[i]));
		lane_free(fw->lanes[i]);
	} else {
		fw->retiring = r;
		fw->retiring[fw->nretiring++] = fw->lanes[i];
	}
	fw->lanes[i] = fw->lanes[--fw->nlanes];
}

/* Look at whether each owned partition's lane has taken it (under mu). */
static void watch_lanes(forward *fw, const owned_set *own, int64_t now)
{
	fw->next_watch = now + LANE_WATCH_MS;
	/* no transaction can begin: no lane forwards, taken or not */
	char txn_why[512];
	int txn_down = fw->txn && txn_failing(fw->txn, txn_why, sizeof txn_why);
	for (size_t i = 0; i < own->n; i++) {
		char why[512] = "", topic[300] = "";
		lane *l = forward_lane_of(fw, own->parts[i].tp);
		int taken = l && lane_taken(l, why, sizeof why, topic, sizeof topic);
		if (taken && txn_down) {
			taken = 0;
			snprintf(why, sizeof why, "%s", txn_why);
			topic[0] = '\0';
		}
		lane_watch_see(&fw->watch, own->parts[i].tp, taken, l ? why : NULL, topic, now);
	}
	lane_watch_end(&fw->watch, fw->al, fw->cfg->alert_lane_stuck_ms, now);
}

void forward_note_rewound(forward *fw, const owned_part *own, size_t n)
{
	pthread_mutex_lock(&fw->mu);
	for (size_t i = 0; i < n; i++)
		if (owned_take(&fw->rewound, &own[i]) != 0) /* (only the count suffers) */
			log_warn("forward: out of memory noting " TP_FMT " read again",
			         TP_ARG(own[i].tp));
	pthread_mutex_unlock(&fw->mu);
}

/* exactly_once: a lane for each partition owned now, at its epoch; the
 * lanes of partitions no longer owned (or owned at a newer epoch) are
 * stopped, and freed once their thread ended. This runs at every turn of
 * the loop: while the set is the version last tended (own->gen) and that
 * left each owned partition a lane, nothing is compared or started, only
 * the lanes' ends are looked at. */
void forward_tend_lanes(forward *fw, const owned_set *own)
{
	int64_t now = clock_ms();
	char why[512], err[512];
	int settled = fw->lanes_settled && fw->lanes_gen == own->gen;
	pthread_mutex_lock(&fw->mu);
	for (size_t i = 0; i < fw->nlanes;) {
		lane *l = fw->lanes[i];
		int fenced = 0;
		if (lane_ended(l, &fenced, why, sizeof why)) {
			char twhy[512], topic[300];
			int taken = lane_taken(l, twhy, sizeof twhy, topic, sizeof topic);
			if (fenced) {
				log_warn("forward: the lane of " TP_FMT " was fenced (%s): another "
				         "replica forwards it now", TP_ARG(lane_tp(l)), why);
			} else if (!taken) {
				/* the partition's lane_stuck episode goes on (and alerts
				 * once), not an alert per lane */
				log_error("forward: the lane of " TP_FMT " failed before taking it (%s); a "
				          "new one starts in %d ms", TP_ARG(lane_tp(l)), why, LANE_RESTART_MS);
				lane_watch_see(&fw->watch, lane_tp(l), 0, twhy, topic, now);
				fw->stats.replaced++;
			} else {
				log_error("forward: the lane of " TP_FMT " failed for good (%s); a new "
				          "one starts in %d ms", TP_ARG(lane_tp(l)), why, LANE_RESTART_MS);
				alert_raise(fw->al, "kafka_fatal", NULL, NULL, 0, NULL, why);
				fw->stats.replaced++;
			}
			lane_cooldown *c =
				array_grow(fw->cooldown, &fw->capcooldown, fw->ncooldown + 1, sizeof *c);
			if (c) {
				fw->cooldown = c;
				c[fw->ncooldown++] = (lane_cooldown){lane_tp(l), now + LANE_RESTART_MS};
			}
			retire(fw, i);
			settled = 0; /* its partition waits for a new lane */
		} else if (!settled && !owned_has_at(own, lane_tp(l), lane_epoch(l))) {
			lane_stop(l, 0);
			retire(fw, i);
		} else {
			i++;
		}
	}
	int short_of = 0; /* a lane could not be started: tried again next time */
	for (size_t i = 0; !settled && i < own->n; i++) {
		const owned_part *o = &own->parts[i];
		if (forward_lane_of(fw, o->tp) || cooling_down(fw, o->tp, now))
			continue;
		short_of = 1;
		lane **n = array_grow(fw->lanes, &fw->caplanes, fw->nlanes + 1, sizeof *n);
		if (!n)
			break;
		fw->lanes = n;
		lane *l = lane_start(fw->cfg, fw->al, fw->txn, o, owned_has_at(&fw->rewound, o->tp, o->epoch),
		                     err, sizeof err);
		if (!l) {
			log_error("forward: starting the lane of " TP_FMT ": %s; trying again",
			          TP_ARG(o->tp), err);
			break;
		}
		fw->lanes[fw->nlanes++] = l;
		short_of = 0;
	}
	if (!settled) {
		fw->lanes_gen = own->gen;
		fw->lanes_settled = !short_of && !cooling_down(fw, -1, now);
	}
	if (now >= fw->next_watch)
		watch_lanes(fw, own, now);
	for (size_t i = 0; i < fw->nretiring;) {
		if (lane_ended(fw->retiring[i], NULL, NULL, 0)) {
			forward_add_stats(&fw->retired, lane_stats(fw->retiring[i]));
			lane_free(fw->retiring[i]);
			fw->retiring[i] = fw->retiring[--fw->nretiring];
		} else {
			i++;
		}
	}
	pthread_mutex_unlock(&fw->mu);
}
