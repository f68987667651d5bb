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
	store_owned *released; /* partitions taken since the last release */
	size_t nreleased;
	char owner[128];       /* host/pid, recorded with each partition taken */
	int attempt;           /* failed attempts at the batch in hand */
	int64_t retry_at;      /* ... and when to try it again */
	int store_down;        /* attempts at reconnecting that failed */
	int64_t reconnect_at;
} hub;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms)
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
static int store_ready(hub *h)
{
	char err[512];
	int64_t now = now_ms();
	if (h->store_down > 0 && now < h->reconnect_at)
		return -1;
	if (store_ensure(h->st, err, sizeof err) == STORE_OK) {
		h->store_down = 0;
		return 0;
	}
	h->store_down++;
	int64_t d = backoff_delay(h->store_down, 200, 5000, backoff_random());
	h->reconnect_at = now + d;
	log_warn("hub: %s; retrying in %lld ms", err, (long long)d);
	return -1;
}

/* Keep the store usable, waiting with backoff while PostgreSQL is away.
 * Only for the rare places that cannot go on without it (taking
 * partitions, the one-record fallback). Returns 0 when connected, -1 when
 * a stop was requested first. */
static int wait_for_store(hub *h, int even_when_stopping)
{
	for (int attempt = 1;; attempt++) {
		h->reconnect_at = 0;
		if (store_ready(h) == 0)
			return 0;
		if (signals_stop_requested() && (!even_when_stopping || attempt > 3))
			return -1;
		sleep_ms(h->reconnect_at - now_ms());
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

/* Forward what became committed, noting per partition which epoch sends
 * it (a debug line the replica tests read to check that no two replicas
 * ever forward for one partition at the same time). */
static void send_forwards(hub *h, const store_forward_list *l)
{
	if (l->n == 0)
		return;
	if (log_get_level() <= LOG_DEBUG) {
		size_t nown;
		const store_owned *own = intake_owned(h->in, &nown);
		for (size_t i = 0; i < l->n;) {
			size_t j = i;
			while (j < l->n && l->items[j].src_partition == l->items[i].src_partition)
				j++;
			long long epoch = 0;
			for (size_t k = 0; k < nown; k++)
				if (own[k].partition == l->items[i].src_partition)
					epoch = (long long)own[k].epoch;
			log_debug("hub: forwarding %zu of partition %d at epoch %lld", j - i,
			          l->items[i].src_partition, epoch);
			i = j;
		}
	}
	forward_send(h->fw, l);
}

/* Apply recs[0..n) (the batch in hand, or one record of it) once. On
 * STORE_FENCED the partitions another replica took are fenced off here and
 * their records dropped from the batch, unacknowledged: recs is then no
 * longer valid, and the caller applies what is left of the batch again. */
static store_rc apply(hub *h, store_record *recs, size_t n, store_forward_list *out,
                      store_stats *stats, char *err, size_t errsz)
{
	size_t nown, nlost = 0;
	int32_t *lost = NULL;
	const store_owned *own = intake_owned(h->in, &nown);
	store_rc rc = store_apply(h->st, h->cfg->control_topic, recs, n, own, nown, out, stats,
	                          &lost, &nlost, err, errsz);
	if (rc == STORE_FENCED) {
		intake_fence(h->in, lost, nlost);
		own = intake_owned(h->in, &nown);
		checkback_assign(h->cb, own, nown);
		size_t d = intake_batch_drop(&h->batch, lost, nlost);
		log_warn("hub: dropped %zu record(s) of partitions another replica owns now", d);
	}
	free(lost);
	return rc;
}

/* The slow path for a batch PostgreSQL keeps refusing with a permanent
 * error: apply its records one at a time, in order, forwarding as we go.
 * A valid record that PostgreSQL refuses on its own is kept in
 * txhub.rejected with the database's reason, so one poisonous record never
 * stops its partition (when PostgreSQL refuses every write, nothing is
 * rejected: the record is retried with backoff). Returns 0 when every record
 * is stored, 1 when a partition of the batch turned out to be fenced (the
 * batch is then applied again without it: what was applied is a no-op),
 * -1 when a stop came first (nothing is acknowledged then; what was
 * applied is a no-op when read again). */
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
			store_rc rc = apply(h, r, 1, &committed, &stats, err, sizeof err);
			if (rc == STORE_FENCED) {
				store_forward_list_clear(&committed);
				return 1;
			}
			if (rc == STORE_OK) {
				if (r->valid)
					refused_in_a_row = 0;
				add_stats(total, &stats);
				send_forwards(h, &committed);
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
				rc = apply(h, &rej, 1, &committed, &stats, err2, sizeof err2);
				store_forward_list_clear(&committed);
				if (rc == STORE_FENCED)
					return 1;
				if (rc == STORE_OK) {
					log_error("hub: PostgreSQL refuses the record at partition %d offset %lld: "
					          "%s; kept in txhub.rejected", r->partition, (long long)r->offset,
					          err);
					refused_in_a_row++;
					add_stats(total, &stats);
					break;
				}
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

/* Try to apply the batch in hand (when its retry is due); on success
 * acknowledge and forward it. On a failure the batch is kept, reading is
 * paused and the attempt is scheduled again with backoff: the loop goes on
 * polling Kafka meanwhile, so an outage of PostgreSQL keeps the replica in
 * its group. Returns 0 when the batch is stored (or empty). */
static int flush_batch(hub *h)
{
	if (h->batch.n == 0) {
		/* emptied without being stored (its partitions were revoked or
		 * fenced): nothing holds reading back any more */
		intake_resume(h->in);
		h->attempt = 0;
		h->retry_at = 0;
		return 0;
	}
	if (now_ms() < h->retry_at || store_ready(h) != 0) {
		intake_pause(h->in);
		return -1;
	}
	char err[1024];
	store_forward_list committed = {0};
	store_stats stats;
	for (;;) {
		store_rc rc = apply(h, h->batch.recs, h->batch.n, &committed, &stats, err, sizeof err);
		if (rc == STORE_OK)
			break;
		store_forward_list_clear(&committed);
		if (rc == STORE_FENCED) {
			if (h->batch.n == 0)
				return 0;
			continue;
		}
		h->attempt++;
		if (rc == STORE_FATAL && h->attempt >= 3) {
			/* not a passing trouble: find the record PostgreSQL refuses */
			log_error("hub: applying a batch of %zu records failed %d times: %s", h->batch.n,
			          h->attempt, err);
			int r = apply_singly(h, &stats);
			if (r == 1)
				return -1; /* again, without the fenced partition */
			if (r != 0) {
				/* a stop: not acknowledged, read again after the restart */
				log_error("hub: stopping with %zu records not stored; they will be read "
				          "again", h->batch.n);
				intake_batch_reset(&h->batch);
				return -1;
			}
			break; /* stored and forwarded one by one; committed is empty */
		}
		int64_t d = backoff_delay(h->attempt, 100, 5000, backoff_random());
		log_msg(rc == STORE_FATAL ? LOG_ERROR : LOG_WARN,
		        "hub: applying a batch of %zu records failed (attempt %d): %s; retrying in "
		        "%lld ms", h->batch.n, h->attempt, err, (long long)d);
		h->retry_at = now_ms() + d;
		intake_pause(h->in);
		return -1;
	}
	intake_ack(h->in, &h->batch);
	intake_resume(h->in);
	h->attempt = 0;
	h->retry_at = 0;
	h->records += h->batch.n;
	h->batches++;
	h->rejected += stats.rejected;
	h->conflicts += stats.conflicts;
	log_debug("hub: batch of %zu: %zu applied, %zu no-op, %zu committed, %zu rejected, "
	          "%zu conflicts", h->batch.n, stats.applied, stats.noops, stats.committed,
	          stats.rejected, stats.conflicts);
	intake_batch_reset(&h->batch);
	send_forwards(h, &committed);
	store_forward_list_clear(&committed);
	return 0;
}

static void write_deliveries(hub *h)
{
	char err[512];
	size_t nown;
	const store_owned *own = intake_owned(h->in, &nown);
	if (forward_poll(h->fw, h->st, own, nown, err, sizeof err) != STORE_OK)
		log_warn("hub: recording delivery reports: %s (kept, retried)", err);
}

/* Take newly assigned partitions in PostgreSQL. This must succeed before
 * they are read, so while PostgreSQL is away it waits here, inside the
 * rebalance (librdkafka's own thread keeps the group's heartbeats going). */
static int on_take(void *opaque, const int32_t *parts, size_t n, store_owned *own,
                   int64_t *next_offset)
{
	hub *h = opaque;
	char err[512];
	if (n == 0) /* cooperative rebalances assign nothing now and then */
		return 0;
	int64_t t0 = now_ms();
	for (int attempt = 1;; attempt++) {
		if (wait_for_store(h, 0) != 0)
			return -1;
		if (store_take_partitions(h->st, h->owner, parts, n, own, next_offset, err,
		                          sizeof err) == STORE_OK) {
			int64_t waited = now_ms() - t0;
			if (waited > 1000)
				log_info("hub: taking %zu partition(s) waited %lld ms (PostgreSQL away, or "
				         "the previous owner's transaction still open)", n, (long long)waited);
			return 0;
		}
		int64_t d = backoff_delay(attempt, 200, 5000, backoff_random());
		log_warn("hub: taking %zu partition(s): %s; retrying in %lld ms", n, err,
		         (long long)d);
		sleep_ms(d);
		if (signals_stop_requested())
			return -1;
	}
}

static void on_assigned(void *opaque, const store_owned *taken, size_t n)
{
	hub *h = opaque;
	/* (n == 0 happens in cooperative rebalances: realloc to 0 would free) */
	store_owned *r = n ? realloc(h->released, (h->nreleased + n) * sizeof *r) : NULL;
	if (r) { /* else their leases expire on their own */
		memcpy(r + h->nreleased, taken, n * sizeof *taken);
		h->released = r;
		h->nreleased += n;
	}
	size_t nowned;
	const store_owned *owned = intake_owned(h->in, &nowned);
	checkback_assign(h->cb, owned, nowned);
}

static int listed(const int32_t *parts, size_t n, int32_t p)
{
	for (size_t i = 0; i < n; i++)
		if (parts[i] == p)
			return 1;
	return 0;
}

static void on_revoking(void *opaque, const int32_t *parts, size_t n)
{
	hub *h = opaque;
	/* finish the batch in hand, commit its offsets and deliver what is in
	 * flight while these partitions are still ours; what cannot be stored
	 * now (PostgreSQL away) is dropped unacknowledged and read again by
	 * the new owner */
	h->retry_at = 0;
	h->reconnect_at = 0;
	if (flush_batch(h) != 0 && h->batch.n > 0) {
		size_t d = intake_batch_drop(&h->batch, parts, n);
		if (d > 0)
			log_warn("hub: %zu record(s) of revoked partitions not stored; their new owner "
			         "reads them again", d);
	}
	intake_commit(h->in);
	size_t nowned, nkeep = 0;
	const store_owned *owned = intake_owned(h->in, &nowned);
	/* (with PostgreSQL away the reports could not be written: the leases
	 * cover those messages, the new owner sends them again) */
	if (store_ready(h) == 0)
		forward_drain(h->fw, h->st, owned, nowned, (int)forward_delivery_timeout_ms(h->fw));
	/* and stop checking them back */
	store_owned *keep = malloc((nowned ? nowned : 1) * sizeof *keep);
	if (!keep) {
		checkback_assign(h->cb, NULL, 0); /* stop everything rather than too little */
		return;
	}
	for (size_t i = 0; i < nowned; i++)
		if (!listed(parts, n, owned[i].partition))
			keep[nkeep++] = owned[i];
	checkback_assign(h->cb, keep, nkeep);
	free(keep);
	/* no longer ours: no release for them either */
	size_t k = 0;
	for (size_t i = 0; i < h->nreleased; i++)
		if (!listed(parts, n, h->released[i].partition))
			h->released[k++] = h->released[i];
	h->nreleased = k;
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
	size_t nown;
	const store_owned *own = intake_owned(h->in, &nown);
	if (nown == 0 || forward_in_flight(h->fw) > 10000)
		return;
	char err[512];
	store_forward_list l = {0};
	if (store_claim_forwards(h->st, own, nown, 1000, &l, err, sizeof err) != STORE_OK)
		log_warn("hub: claiming due forwards: %s", err);
	else if (l.n > 0)
		log_debug("hub: re-sending %zu forward(s)", l.n);
	send_forwards(h, &l);
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
	char host[64] = "";
	if (gethostname(host, sizeof host - 1) != 0)
		snprintf(host, sizeof host, "unknown-host");
	snprintf(h.owner, sizeof h.owner, "%s/%ld", host, (long)getpid());
	intake_hooks hooks = {on_take, on_assigned, on_revoking, &h};
	if (!(h.in = intake_new(cfg, hooks, err, sizeof err))) {
		log_error("hub: %s", err);
		goto done;
	}
	log_info("hub: running (control topic %s, group %s, brokers %s)", cfg->control_topic,
	         cfg->group, cfg->brokers);

	int64_t next_scan = 0, next_stats = now_ms() + 60000;
	while (!signals_stop_requested()) {
		intake_poll(h.in, &h.batch);
		flush_batch(&h);
		int64_t now = now_ms();
		if (store_ready(&h) == 0) {
			write_deliveries(&h);
			if (h.nreleased > 0 || now >= next_scan) {
				release_assigned(&h);
				claim_retries(&h);
				next_scan = now + 1000;
			}
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
	h.retry_at = 0;
	h.reconnect_at = 0;
	if (flush_batch(&h) != 0 && h.batch.n > 0)
		log_warn("hub: stopping with %zu records not stored; they will be read again",
		         h.batch.n);
	intake_batch_reset(&h.batch);
	intake_commit(h.in);
	size_t nown;
	const store_owned *own = intake_owned(h.in, &nown);
	if (store_ready(&h) == 0)
		forward_drain(h.fw, h.st, own, nown, 10000);
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
