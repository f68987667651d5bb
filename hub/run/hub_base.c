/* hub_base.c: what the run loop's parts stand on: the clock, PostgreSQL
 * ready or reconnecting, handing committed forwards to the producer,
 * partitions fenced off or no longer to release, the replica's problem,
 * and partitions taken (reading their forward keys' blockers). */
#include "hub_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alert.h"
#include "backoff.h"
#include "checkback.h"
#include "clock.h"
#include "fault.h"
#include "forward.h"
#include "intake.h"
#include "janitor.h"
#include "log.h"
#include "owned.h"
#include "signals.h"
#include "store.h"

int64_t hub_now_ms(void) { return clock_ms(); }

void hub_sleep_ms(int64_t ms)
{
	if (ms <= 0)
		return;
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR && !signals_stop_requested())
		;
}

/* Whether the store is usable now; while PostgreSQL is away, reconnects
 * at most on a backoff schedule and returns -1 without waiting, so that the
 * loop goes on polling Kafka. */
int hub_store_ready(hub *h)
{
	char err[512];
	int64_t now = hub_now_ms();
	if (h->store_down > 0 && now < h->reconnect_at)
		return -1;
	if (store_ensure(h->st, err, sizeof err) == STORE_OK) {
		h->store_down = 0;
		fault_ok(&h->f_conn);
		/* the database on the other end may have failed over and lost its
		 * last transactions: compare at the next scan, not in 5 s */
		if (store_reconnected(h->st))
			h->next_owners = 0;
		return 0;
	}
	h->store_down++;
	h->reconnect_at = now + backoff_delay(h->store_down, 200, 5000, backoff_random());
	fault_fail(&h->f_conn, err);
	return -1;
}

/* Keep the store usable, waiting with backoff while PostgreSQL is away.
 * Only for the rare place that cannot go on without it (taking
 * partitions). Returns 0 when connected, -1 when a stop was requested
 * first. */
int hub_wait_for_store(hub *h)
{
	for (;;) {
		h->reconnect_at = 0;
		if (hub_store_ready(h) == 0)
			return 0;
		if (signals_stop_requested())
			return -1;
		hub_sleep_ms(h->reconnect_at - hub_now_ms());
	}
}

/* Forward what became committed, noting per partition which epoch sends
 * it (a debug line the replica tests read to check that no two replicas
 * ever forward for one partition at the same time). */
void hub_send_forwards(hub *h, const store_forward_list *l)
{
	if (l->n == 0 && !l->incomplete)
		return;
	if (log_get_level() <= LOG_DEBUG) {
		for (size_t i = 0; i < l->n;) {
			size_t j = i;
			while (j < l->n && l->items[j].src_tp == l->items[i].src_tp)
				j++;
			const owned_part *o = owned_find(&h->owned, l->items[i].src_tp);
			long long epoch = o ? (long long)o->epoch : 0;
			log_debug("hub: forwarding %zu of " TP_FMT " at epoch %lld", j - i,
			          TP_ARG(l->items[i].src_tp), epoch);
			i = j;
		}
	}
	forward_send(h->fw, l);
}

/* Forget the pending lease releases of these partitions. */
void hub_unrelease(hub *h, const tp_key *parts, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		owned_drop(&h->released, parts[i]);
		owned_drop(&h->fw_unreleased, parts[i]);
	}
}

/* The forwards the previous owners of the partitions taken had in flight,
 * due again (store_release_forwards). It must come before this hub
 * sequences anything of theirs: at_least_once's delivery marks
 * (marks.h) would move past those rows, counting them sent, and the
 * release spares rows below the mark. Returns 0, or -1 with err when
 * PostgreSQL failed (the batch in hand then waits). */
int hub_release_forwards(hub *h, char *err, size_t errsz)
{
	if (h->fw_unreleased.n == 0)
		return 0;
	if (hub_store_ready(h) != 0) {
		snprintf(err, errsz, "PostgreSQL is not reachable");
		return -1;
	}
	if (store_release_forwards(h->st, h->fw_unreleased.parts, h->fw_unreleased.n,
	                           !config_exactly_once(h->cfg), err, errsz) != STORE_OK)
		return -1;
	owned_clear(&h->fw_unreleased);
	return 0;
}

/* Another replica took these partitions (a write or the heartbeat found
 * their epoch moved on): stop reading and checking them back, and drop
 * their records from the batch in hand, unacknowledged. */
void hub_fence_lost(hub *h, const tp_key *lost, size_t nlost)
{
	janitor_log_fenced(h->st, h->cfg, lost, nlost);
	intake_fence(h->in, lost, nlost);
	checkback_assign(h->cb, &h->owned);
	hub_unrelease(h, lost, nlost);
	size_t d = intake_batch_drop(&h->batch, lost, nlost);
	h->single = 0; /* the batch changed: what is left is applied again whole */
	if (d > 0)
		log_warn("hub: dropped %zu record(s) of partitions another replica owns now", d);
}

/* The clash over partitions with a replica of another consumer group (or
 * "": none), as the janitor or a take found it: logged when it changes,
 * the alert group_clash raised when one begins. */
void hub_set_problem(hub *h, const char *problem)
{
	if (strcmp(problem, h->problem) == 0)
		return;
	if (*problem && !h->problem[0])
		alert_raise(h->al, "group_clash", NULL, NULL, 0, h->cfg->control_topic, problem);
	else if (*problem)
		log_error("hub: %s", problem);
	else
		log_info("hub: the clash over partitions is over");
	snprintf(h->problem, sizeof h->problem, "%s", problem);
}

/* Note partitions taken: their forwards in flight under the previous
 * owner are released now (else before their first batch), the held ones
 * of forward.order = key at the next scan, and the checker asks about
 * them. */
void hub_on_assigned(void *opaque, const owned_part *taken, size_t n)
{
	hub *h = opaque;
	h->joined = 1;
	for (size_t i = 0; i < n; i++) { /* out of memory: their leases expire on their own */
		owned_take(&h->released, &taken[i]);
		owned_take(&h->fw_unreleased, &taken[i]);
	}
	char err[512];
	if (hub_release_forwards(h, err, sizeof err) != 0)
		log_warn("hub: releasing the forwards the previous owners of %zu partition(s) had in "
		         "flight: %s; their records wait until it is done", h->fw_unreleased.n, err);
	checkback_assign(h->cb, &h->owned);
	/* before the partitions' first batch (else their first scan), with what a
	 * previous owner had in flight */
	if (hub_order_read(h, taken, n, 1, err, sizeof err) != 0)
		log_warn("hub: reading the blockers of forward keys of the partitions taken: %s; the "
		         "next scan reads them", err);
}

/* When to claim next, after a claim that took n of at most limit: at once
 * while they come back full, else when the next one falls due within the
 * second (at least 100 ms on: a flow of due times is claimed ten times a
 * second at most), else at the next scan. */
void hub_plan_next_claim(hub *h, size_t n, size_t limit)
{
	h->claim_more = n >= limit;
	h->next_claim = 0;
	int64_t in_ms;
	char err[512];
	if (h->claim_more || store_next_send_due(h->st, h->owned.parts, h->owned.n, &in_ms, err,
	                                         sizeof err) != STORE_OK ||
	    in_ms < 0 || in_ms >= 1000)
		return; /* (a failed probe: the scan claims them) */
	h->next_claim = hub_now_ms() + (in_ms < 100 ? 100 : in_ms);
}

/* forward.order = key, at_least_once: the forwarder's blockers of own[0..n)
 * as PostgreSQL has them now (each lane reads its own). Returns 0, or -1
 * with err. */
int hub_order_read(hub *h, const owned_part *own, size_t n, int taken, char *err,
                   size_t errsz)
{
	if (!config_order_by_key(h->cfg) || config_exactly_once(h->cfg))
		return 0;
	store_blocker_list b = {0};
	int64_t started = hub_now_ms(), synced = forward_reports_synced(h->fw);
	if (store_order_blockers(h->st, own, n, taken, &b, err, errsz) != STORE_OK)
		return -1;
	forward_order_refresh(h->fw, own, n, &b, started, synced);
	store_blocker_list_clear(&b);
	return 0;
}
