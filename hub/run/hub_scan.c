/* hub_scan.c: the run loop's scan of its owned partitions, one step at a
 * time: heartbeats and fenced partitions, releasing, sequencing and
 * claiming forwards due, retention, the tenants' rules, consumer lag. */
#include "hub_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "forward.h"
#include "intake.h"
#include "janitor.h"
#include "log.h"
#include "metrics.h"
#include "owned.h"
#include "store.h"
#include "tenants.h"

/* How long TXHUB_FAILPOINT=scan_late holds the scan's releasing and
 * claiming after partitions were taken. */
#define SCAN_LATE_MS 10000

/* The crash tests' failpoint (as lane.c's): with TXHUB_FAILPOINT=scan_late
 * in its environment the hub holds the scan's releasing and claiming step
 * for SCAN_LATE_MS after it took partitions, while its batches go on, so
 * that whatever must happen at the take, before any batch of the
 * partitions (hub_on_assigned), cannot be left to that step unseen (the
 * kill -9 window of docs/architecture.md: Storage: each message written
 * once). Never set in production. Returns whether the step waits. */
static int scan_late(hub *h, int64_t now)
{
	if (!h->failpoint || strcmp(h->failpoint, "scan_late") != 0)
		return 0;
	if (h->released.n == 0) {
		h->late_until = 0;
		return 0;
	}
	if (h->late_until == 0) { /* (-1: held already for these partitions) */
		h->late_until = now + SCAN_LATE_MS;
		log_warn("hub: failpoint scan_late: releasing and claiming held for %d ms",
		         SCAN_LATE_MS);
	}
	if (h->late_until < 0 || now < h->late_until)
		return h->late_until > 0;
	h->late_until = -1;
	log_warn("hub: failpoint scan_late: releasing and claiming again");
	return 0;
}

/* Returns 0, or -1 when the store failed (recorded in f_scan). */
static int release_assigned(hub *h)
{
	if (h->released.n == 0)
		return 0;
	char err[512];
	if (hub_release_forwards(h, err, sizeof err) != 0) { /* (done when taken, unless it failed) */
		fault_fail(&h->f_scan, err);
		return -1;
	}
	/* rows a hub with forward.order = key held are not held by this one */
	size_t unheld = 0;
	if (!config_order_by_key(h->cfg) &&
	    store_order_release(h->st, h->released.parts, h->released.n, 1, &unheld, err,
	                        sizeof err) != STORE_OK) {
		fault_fail(&h->f_scan, err);
		return -1;
	}
	if (unheld > 0)
		log_info("hub: %zu forward(s) held for their key's order (forward.order = key) are "
		         "due now (forward.order = partition)", unheld);
	owned_clear(&h->released);
	return 0;
}

/* forward.order = key: the held rows whose blockers are gone made due.
 * Returns 0, or -1 with err. */
static int order_release(hub *h, char *err, size_t errsz)
{
	const owned_set *own = &h->owned;
	size_t released = 0;
	if (store_order_release(h->st, own->parts, own->n, 0, &released, err, errsz) != STORE_OK)
		return -1;
	if (released > 0)
		log_debug("hub: %zu forward(s) held for their key's order released", released);
	return 0;
}

/* Rows claimed (or sequenced) by one due scan at most: again at once while
 * a claim comes back full. */
#define DUE_CLAIM_MAX 5000

/* The forwards due again (retries, leases run out, delayed messages due,
 * chains of held ones released) and those decided outside a batch
 * (check-back answers, operators): they get the next forward sequences of
 * their partitions, so that the delivery marks record them (no `sent`
 * write per row); exactly_once wakes the lanes, at_least_once sends them,
 * and claims besides what has a sequence and was lost (a lease run out).
 * forward.order = key: released first, and the blockers read after the
 * claim: what was sequenced is in the forwarder's hands (its keys' queues
 * keep their order), and a released chain goes whole. */
int hub_claim_retries(hub *h)
{
	const owned_set *own = &h->owned;
	if (own->n == 0 || forward_in_flight(h->fw) > 10000) {
		h->claim_more = 0;
		h->next_claim = 0;
		return 0;
	}
	char err[512];
	int eos = config_exactly_once(h->cfg), by_key = config_order_by_key(h->cfg);
	if (by_key && order_release(h, err, sizeof err) != 0) {
		fault_fail(&h->f_scan, err);
		return -1;
	}
	store_forward_list l = {0};
	size_t again = 0;
	int64_t t0 = hub_now_ms();
	h->claimed_at = t0;
	store_rc rc = store_sequence_forwards(h->st, own->parts, own->n, DUE_CLAIM_MAX, eos, &l,
	                                      &again, err, sizeof err);
	size_t nseq = l.n; /* (the claim adds to l, all in offset order) */
	int64_t t1 = hub_now_ms();
	/* (rows falling due meanwhile wait for the next sequencing; a full one
	 * comes back at once) */
	if (rc == STORE_OK && !eos)
		rc = store_claim_lost_forwards(h->st, own->parts, own->n, DUE_CLAIM_MAX,
		                               nseq >= DUE_CLAIM_MAX ? -1 : 1000, &l, err, sizeof err);
	if (rc == STORE_OK && by_key && hub_order_read(h, own->parts, own->n, 0, err, sizeof err) != 0)
		rc = STORE_RETRY;
	if (rc != STORE_OK)
		fault_fail(&h->f_scan, err);
	if (l.n > 0)
		log_debug("hub: sending %zu due forward(s), %zu of them without a new sequence "
		          "(sequenced in %lld ms, claimed in %lld ms)", l.n, l.n - nseq,
		          (long long)(t1 - t0), (long long)(hub_now_ms() - t1));
	if (again > 0) {
		log_warn("hub: %zu message(s) decided again by a check-back or an operator after "
		         "PostgreSQL lost their first decision may be forwarded twice (counted in "
		         "txhub_forwards_after_rewind_total{outcome=\"decided_again\"})", again);
		metrics_forwards_decided_again(again);
	}
	/* (what was sequenced is sent even when a later step failed: it is
	 * leased, and would wait for its lease otherwise) */
	hub_send_forwards(h, &l);
	hub_plan_next_claim(h, nseq > l.n - nseq ? nseq : l.n - nseq, DUE_CLAIM_MAX);
	store_forward_list_clear(&l);
	return rc == STORE_OK ? 0 : -1;
}

/* Take back fenced partitions (Kafka still assigns them here) whose holder
 * is gone: at new epochs, read again from PostgreSQL's offsets. */
static int retake(hub *h, const tp_key *parts, size_t n)
{
	char err[512];
	owned_part *own = calloc(n, sizeof *own);
	int64_t *next = calloc(n, sizeof *next);
	int rc = -1;
	if (!own || !next)
		snprintf(err, sizeof err, "out of memory");
	else if (store_take_partitions(h->st, h->owner, h->cfg->group, parts, n, own, next, NULL,
	                               err, sizeof err) == STORE_OK)
		rc = 0;
	if (rc == 0) {
		intake_retake(h->in, own, next, n);
		hub_on_assigned(h, own, n);
	} else {
		fault_fail(&h->f_scan, err);
	}
	free(own);
	free(next);
	return rc;
}

/* Every STORE_HEARTBEAT_MS (janitor.h): heartbeats and fenced partitions,
 * then missing prepares. Returns -1 when a store operation failed. */
static int tend_partitions(hub *h)
{
	char err[512];
	/* first: a partition whose row went back in time would look taken */
	if (hub_check_history(h, err, sizeof err) != 0) {
		fault_fail(&h->f_scan, err);
		return -1;
	}
	size_t nfenced;
	const tp_key *fenced = intake_fenced(h->in, &nfenced);
	janitor_findings f;
	int rc = janitor_partitions(h->st, h->cfg, h->owned.parts, h->owned.n, fenced, nfenced, &f,
	                            err, sizeof err);
	if (rc != 0)
		fault_fail(&h->f_scan, err);
	if (f.nlost > 0)
		hub_fence_lost(h, f.lost, f.nlost);
	if (rc == 0 && f.ngone > 0)
		rc = retake(h, f.gone, f.ngone);
	tp_key accept[256];
	size_t naccept = intake_recheck(h->in, accept, 256);
	if (rc == 0 && naccept > 0)
		rc = retake(h, accept, naccept);
	if (rc == 0)
		hub_set_problem(h, f.problem);
	janitor_findings_clear(&f);
	/* (hub_fence_lost and retake changed the set: read it again here) */
	if (janitor_missing_prepares(h->st, h->cfg, h->al, h->owned.parts, h->owned.n, err,
	                             sizeof err) != 0) {
		fault_fail(&h->f_scan, err);
		rc = -1;
	}
	return rc;
}

/* Retention, a batch at a time: again at the next scan while there is
 * more, else at the next heartbeat. Returns -1 when the store failed. */
static int retention(hub *h, int64_t now)
{
	if (now < h->next_retention)
		return 0;
	char err[512];
	int more;
	if (janitor_retention_batch(h->st, h->cfg, h->owned.parts, h->owned.n, &h->sweep, &more, err,
	                            sizeof err) != 0) {
		fault_fail(&h->f_scan, err);
		h->next_retention = now + STORE_HEARTBEAT_MS;
		return -1;
	}
	h->next_retention = more ? now : now + STORE_HEARTBEAT_MS;
	return 0;
}

/* Read the tenants' rules again when due (tenants.h), and hand a new
 * snapshot to intake. */
void hub_refresh_tenants(hub *h, int64_t now)
{
	if (store_tenants_refresh(h->st, h->tenants, now) == 1) /* logs its count */
		intake_set_rules(h->in, tenants_rules(h->tenants));
}

void hub_watch_tenant_rules(hub *h, int64_t now)
{
	int64_t age = tenants_rules_age_ms(h->tenants, now);
	const char *failing = tenants_failing(h->tenants);
	metrics_set_tenant_rules_age(age);
	if (!failing) { /* (read every TENANTS_REFRESH_MS: a few seconds old while all is well) */
		h->rules_alerted = 0;
		return;
	}
	if (age < h->cfg->alert_database_failing_ms)
		return;
	if (h->rules_alerted)
		return;
	h->rules_alerted = 1;
	char why[1400];
	snprintf(why, sizeof why, "the tenant rules in force (%zu enabled tenant(s)) were last found "
	         "current in txhub.tenants %lld s ago: %s. They stay in force; a change made "
	         "since then (txhub tenant) does not apply until the table reads again",
	         tenant_rules_count(tenants_rules(h->tenants)), (long long)(age / 1000),
	         failing);
	alert_raise(h->al, "tenant_rules_stale", NULL, NULL, 0, NULL, why);
}

void hub_publish_lag(hub *h)
{
	tp_key parts[256];
	int64_t lag[256];
	size_t n = intake_lag(h->in, parts, lag, 256);
	metrics_set_lag(parts, lag, n);
}

/* The scan, one step per turn of the loop, so that a batch waits for one
 * step at most (the whole scan took up to 30 ms at 2,000 tx/s, and held
 * every batch behind it): heartbeats and fenced partitions when due
 * first (nothing is sequenced for a database that lost transactions
 * before it is found out; a reconnect makes them due at once), then
 * releasing and claiming forwards, retention, the tenants' rules. Returns
 * whether the scan is over. */
int hub_scan_step(hub *h, int64_t now)
{
	switch (h->scan_step) {
	case 0:
		h->scan_failed = 0;
		h->scan_step = 1;
		/* fall through */
	case 1:
		/* (checked again here: a reconnect between two steps makes them
		 * due before anything is claimed) */
		if (now >= h->next_owners) {
			h->scan_failed |= tend_partitions(h);
			h->next_owners = now + STORE_HEARTBEAT_MS;
			return 0; /* claiming next turn */
		}
		if (scan_late(h, now))
			return 0; /* (the crash tests' failpoint: this step again next turn) */
		h->scan_failed |= release_assigned(h) | hub_claim_retries(h);
		break;
	case 2:
		h->scan_failed |= retention(h, now);
		break;
	default:
		hub_refresh_tenants(h, now);
		if (!h->scan_failed)
			fault_ok(&h->f_scan);
		h->scan_step = 0;
		return 1;
	}
	h->scan_step++;
	return 0;
}
