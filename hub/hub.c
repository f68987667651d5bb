/* hub.c: the run loop.
 *
 *   poll a batch (intake) -> apply it in one transaction (store) -> store the
 *   offsets (intake) -> produce what became committed (forward) -> write
 *   delivery reports (forward -> store) -> claim due retries (store)
 *
 * Check-backs run beside it in their own thread (checkback.c), told which
 * partitions this replica owns on every rebalance; what they commit is
 * forwarded by the retry scan here.
 *
 * The loop never acknowledges a record before its transaction committed, and
 * on a PostgreSQL error it keeps the batch and retries it with backoff, so an
 * outage delays the hub but loses nothing. */
#include "hub.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "alert.h"
#include "backoff.h"
#include "checkback.h"
#include "forward.h"
#include "intake.h"
#include "log.h"
#include "migrate.h"
#include "signals.h"
#include "store.h"

typedef struct {
	const txhub_config *cfg;
	store *st;
	intake *in;
	forward *fw;
	checkback *cb;
	alert *al;
	intake_batch batch;
	uint64_t records, batches, rejected, conflicts;
	int32_t *released; /* partitions assigned since the last release */
	size_t nreleased;
} hub;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR && !signals_stop_requested())
		;
}

/* Keep the store usable; waits with backoff while PostgreSQL is away. Returns
 * 0 when connected, -1 when a stop was requested first. */
static int wait_for_store(hub *h, int even_when_stopping)
{
	char err[512];
	for (int attempt = 1;; attempt++) {
		if (store_ensure(h->st, err, sizeof err) == STORE_OK)
			return 0;
		if (signals_stop_requested() && !even_when_stopping)
			return -1;
		int64_t d = backoff_delay(attempt, 200, 5000, backoff_random());
		log_warn("hub: %s; retrying in %lld ms", err, (long long)d);
		sleep_ms(d);
		if (signals_stop_requested() && attempt > 3)
			return -1;
	}
}

/* More valid records than this refused one after the other is taken for a
 * problem of the database (a trigger or privilege on txhub.messages), not
 * of the records: they are retried, not rejected. */
#define REFUSED_IN_A_ROW_MAX 10

static void add_stats(store_stats *to, const store_stats *s)
{
	to->applied += s->applied;
	to->rejected += s->rejected;
	to->conflicts += s->conflicts;
	to->committed += s->committed;
	to->noops += s->noops;
}

/* After failed attempt number `attempt` at `what`: log, wait with backoff
 * and for the store to be back. Returns -1 when a stop was asked for and a
 * few attempts have been made (the caller gives up without acknowledging:
 * the records are read again after the restart), else 0. */
static int retry_pause(hub *h, int attempt, store_rc rc, const char *what, const char *err)
{
	int64_t d = backoff_delay(attempt, 100, 5000, backoff_random());
	log_msg(rc == STORE_FATAL ? LOG_ERROR : LOG_WARN,
	        "hub: applying %s failed (attempt %d): %s; retrying in %lld ms", what, attempt, err,
	        (long long)d);
	sleep_ms(d);
	/* a stop is honoured after a few attempts, connected or not */
	if ((wait_for_store(h, 1) != 0 || attempt > 5) && signals_stop_requested())
		return -1;
	return 0;
}

/* The slow path for a batch PostgreSQL keeps refusing with a permanent
 * error: apply its records one at a time, in order, forwarding as we go.
 * A valid record that PostgreSQL refuses on its own is kept in
 * txhub.rejected with the database's reason, so one poisonous record never
 * stops its partition (when PostgreSQL refuses every write, nothing is
 * rejected: the record is retried with backoff). Returns 0 when every record
 * is stored, -1 when a
 * stop came first (nothing is acknowledged then; what was applied is a
 * no-op when read again). */
static int apply_singly(hub *h, store_stats *total)
{
	char err[1024];
	memset(total, 0, sizeof *total);
	log_warn("hub: applying the %zu records of the batch one at a time to find the one "
	         "PostgreSQL refuses", h->batch.n);
	size_t refused_in_a_row = 0;
	for (size_t i = 0; i < h->batch.n; i++) {
		store_record *r = &h->batch.recs[i];
		int sanitized = 0;
		for (int attempt = 1;; attempt++) {
			store_forward_list committed = {0};
			store_stats stats;
			store_rc rc = store_apply(h->st, h->cfg->control_topic, r, 1, &committed, &stats,
			                          err, sizeof err);
			if (rc == STORE_OK) {
				if (r->valid)
					refused_in_a_row = 0;
				add_stats(total, &stats);
				forward_send(h->fw, &committed);
				store_forward_list_clear(&committed);
				break;
			}
			store_forward_list_clear(&committed);
			if (rc == STORE_FATAL && r->valid && refused_in_a_row >= REFUSED_IN_A_ROW_MAX)
				log_error("hub: PostgreSQL refused %zu records in a row: taking that for a "
				          "problem of the database, not of the records; retrying",
				          refused_in_a_row);
			else if (rc == STORE_FATAL && r->valid) {
				/* keep it as rejected, if PostgreSQL takes that: when it
				 * refuses every write (read-only, permissions) both fail,
				 * and the record is tried again as it is */
				store_record rej = *r;
				char esc[200];
				memset(&rej.env, 0, sizeof rej.env);
				rej.valid = 0;
				snprintf(rej.reason, sizeof rej.reason, "PostgreSQL refused the envelope: %s",
				         log_escape(err, strlen(err), esc, sizeof esc));
				char err2[1024];
				if (store_apply(h->st, h->cfg->control_topic, &rej, 1, &committed, &stats, err2,
				                sizeof err2) == STORE_OK) {
					log_error("hub: PostgreSQL refuses the record at partition %d offset %lld: "
					          "%s; kept in txhub.rejected", r->partition, (long long)r->offset,
					          err);
					refused_in_a_row++;
					add_stats(total, &stats);
					store_forward_list_clear(&committed);
					break;
				}
				store_forward_list_clear(&committed);
			} else if (rc == STORE_FATAL && !sanitized) {
				/* a rejected record refused: make its reason plain ASCII */
				char esc[sizeof r->reason];
				log_escape(r->reason, strlen(r->reason), esc, sizeof esc);
				memcpy(r->reason, esc, sizeof esc);
				sanitized = 1;
				continue;
			}
			char what[80];
			snprintf(what, sizeof what, "the record at partition %d offset %lld", r->partition,
			         (long long)r->offset);
			if (retry_pause(h, attempt, rc, what, err) != 0)
				return -1;
		}
	}
	return 0;
}

/* Apply the batch in hand until it sticks; then acknowledge and forward. */
static void flush_batch(hub *h)
{
	if (h->batch.n == 0)
		return;
	char err[1024];
	store_forward_list committed = {0};
	store_stats stats;
	for (int attempt = 1;; attempt++) {
		store_rc rc = store_apply(h->st, h->cfg->control_topic, h->batch.recs, h->batch.n,
		                          &committed, &stats, err, sizeof err);
		if (rc == STORE_OK)
			break;
		if (rc == STORE_FATAL && attempt >= 3) {
			/* not a passing trouble: find the record PostgreSQL refuses */
			store_forward_list_clear(&committed);
			log_error("hub: applying a batch of %zu records failed %d times: %s", h->batch.n,
			          attempt, err);
			if (apply_singly(h, &stats) != 0)
				goto give_up;
			break; /* stored and forwarded one by one; committed is empty */
		}
		store_forward_list_clear(&committed);
		char what[64];
		snprintf(what, sizeof what, "a batch of %zu records", h->batch.n);
		if (retry_pause(h, attempt, rc, what, err) != 0)
			goto give_up;
	}
	intake_ack(h->in, &h->batch);
	h->records += h->batch.n;
	h->batches++;
	h->rejected += stats.rejected;
	h->conflicts += stats.conflicts;
	log_debug("hub: batch of %zu: %zu applied, %zu no-op, %zu committed, %zu rejected, "
	          "%zu conflicts", h->batch.n, stats.applied, stats.noops, stats.committed,
	          stats.rejected, stats.conflicts);
	intake_batch_reset(&h->batch);
	forward_send(h->fw, &committed);
	store_forward_list_clear(&committed);
	return;
give_up:
	/* not acknowledged: the records are read again after the restart */
	log_error("hub: stopping with %zu records not stored; they will be read again",
	          h->batch.n);
	intake_batch_reset(&h->batch);
}

static void write_deliveries(hub *h)
{
	char err[512];
	if (forward_poll(h->fw, h->st, err, sizeof err) != STORE_OK)
		log_warn("hub: recording delivery reports: %s (kept, retried)", err);
}

static void on_assigned(void *opaque, const int32_t *parts, size_t n)
{
	hub *h = opaque;
	int32_t *r = realloc(h->released, (h->nreleased + n) * sizeof *r);
	if (!r)
		return; /* their leases expire on their own */
	memcpy(r + h->nreleased, parts, n * sizeof *parts);
	h->released = r;
	h->nreleased += n;
	size_t nowned;
	const int32_t *owned = intake_owned(h->in, &nowned);
	checkback_assign(h->cb, owned, nowned);
}

static void on_revoking(void *opaque, const int32_t *parts, size_t n)
{
	hub *h = opaque;
	/* finish the batch in hand, commit its offsets and deliver what is in
	 * flight while these partitions are still ours */
	flush_batch(h);
	intake_commit(h->in);
	forward_drain(h->fw, h->st, (int)forward_delivery_timeout_ms(h->fw));
	/* and stop checking them back */
	size_t nowned, nkeep = 0;
	const int32_t *owned = intake_owned(h->in, &nowned);
	int32_t *keep = malloc((nowned ? nowned : 1) * sizeof *keep);
	if (!keep) {
		checkback_assign(h->cb, NULL, 0); /* stop everything rather than too little */
		return;
	}
	for (size_t i = 0; i < nowned; i++) {
		size_t j;
		for (j = 0; j < n && parts[j] != owned[i]; j++)
			;
		if (j == n)
			keep[nkeep++] = owned[i];
	}
	checkback_assign(h->cb, keep, nkeep);
	free(keep);
}

static void release_assigned(hub *h)
{
	if (h->nreleased == 0)
		return;
	char err[512];
	if (store_release_forwards(h->st, h->released, h->nreleased, err, sizeof err) == STORE_OK)
		h->nreleased = 0;
	else
		log_warn("hub: taking over pending forwards: %s (retried)", err);
}

static void claim_retries(hub *h)
{
	size_t npart;
	const int32_t *parts = intake_owned(h->in, &npart);
	if (npart == 0 || forward_in_flight(h->fw) > 10000)
		return;
	char err[512];
	store_forward_list l = {0};
	if (store_claim_forwards(h->st, parts, npart, 1000, &l, err, sizeof err) != STORE_OK)
		log_warn("hub: claiming due forwards: %s", err);
	else if (l.n > 0)
		log_debug("hub: re-sending %zu forward(s)", l.n);
	forward_send(h->fw, &l);
	store_forward_list_clear(&l);
}

int hub_run(const txhub_config *cfg)
{
	hub h;
	memset(&h, 0, sizeof h);
	h.cfg = cfg;
	char err[1024];
	int status = 1;

	signals_install();
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		log_error("hub: cannot initialise libcurl");
		return 1;
	}

	for (int attempt = 1; !h.st; attempt++) {
		h.st = store_connect(cfg, err, sizeof err);
		if (h.st)
			break;
		if (signals_stop_requested()) {
			curl_global_cleanup();
			return 0;
		}
		int64_t d = backoff_delay(attempt, 200, 5000, backoff_random());
		log_warn("hub: %s; retrying in %lld ms", err, (long long)d);
		sleep_ms(d);
	}
	int version;
	if (store_schema_version(h.st, &version, err, sizeof err) != STORE_OK) {
		log_error("hub: reading the schema version: %s", err);
		goto done;
	}
	if (version != migrate_latest()) {
		log_error("hub: the database schema is at version %d, this txhub needs %d: run "
		          "`txhub migrate` first", version, migrate_latest());
		goto done;
	}
	if (!(h.al = alert_start(cfg, err, sizeof err)) ||
	    !(h.cb = checkback_start(cfg, h.al, err, sizeof err))) {
		log_error("hub: %s", err);
		goto done;
	}
	if (!(h.fw = forward_new(cfg, h.al, err, sizeof err))) {
		log_error("hub: %s", err);
		goto done;
	}
	/* a forward in flight is leased for longer than the producer may take */
	store_set_lease(h.st, forward_delivery_timeout_ms(h.fw) + 60000);
	intake_hooks hooks = {on_assigned, on_revoking, &h};
	if (!(h.in = intake_new(cfg, hooks, err, sizeof err))) {
		log_error("hub: %s", err);
		goto done;
	}
	log_info("hub: running (control topic %s, group %s, brokers %s)", cfg->control_topic,
	         cfg->group, cfg->brokers);

	int64_t next_scan = 0, next_stats = now_ms() + 60000;
	while (!signals_stop_requested()) {
		intake_poll(h.in, &h.batch);
		if (h.batch.n > 0 && wait_for_store(&h, 0) == 0)
			flush_batch(&h);
		write_deliveries(&h);
		int64_t now = now_ms();
		if (h.nreleased > 0 || now >= next_scan) {
			if (wait_for_store(&h, 0) == 0) {
				release_assigned(&h);
				claim_retries(&h);
			}
			next_scan = now + 1000;
		}
		if (now >= next_stats) {
			forward_stats fs = forward_get_stats(h.fw);
			checkback_stats cs = checkback_get_stats(h.cb);
			log_info("hub: %llu records in %llu batches, %llu rejected, %llu conflicts; "
			         "forwards: %llu delivered, %llu failed attempts, %llu given up, %zu in flight; "
			         "check-backs: %llu asked, %llu committed, %llu rolled back, %llu undecided, "
			         "%llu errors, %llu check_failed, %zu in flight",
			         (unsigned long long)h.records, (unsigned long long)h.batches,
			         (unsigned long long)h.rejected, (unsigned long long)h.conflicts,
			         (unsigned long long)fs.delivered, (unsigned long long)fs.failed_attempts,
			         (unsigned long long)fs.failed_final, forward_in_flight(h.fw),
			         (unsigned long long)cs.requests, (unsigned long long)cs.committed,
			         (unsigned long long)cs.rolled_back, (unsigned long long)cs.undecided,
			         (unsigned long long)cs.errors, (unsigned long long)cs.check_failed,
			         cs.in_flight);
			next_stats = now + 60000;
		}
	}
	log_info("hub: stopping: finishing the batch in hand");
	flush_batch(&h);
	intake_commit(h.in);
	forward_drain(h.fw, h.st, 10000);
	status = 0;
done:
	if (h.in)
		intake_close(h.in); /* may call on_revoking: batch is empty by now */
	intake_batch_free(&h.batch);
	checkback_stop(h.cb); /* after intake_close: the revoke hook talks to it */
	forward_destroy(h.fw);
	alert_stop(h.al, 3000);
	store_close(h.st);
	free(h.released);
	curl_global_cleanup();
	if (status == 0)
		log_info("hub: stopped cleanly");
	return status;
}
