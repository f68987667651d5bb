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
 * The loop holds the set of partitions it owns (owned.h), which intake
 * keeps up to date; everything below is handed the set itself, or reads its
 * array within one call, so nothing works from an outdated copy of it.
 *
 * The loop never acknowledges a record before its transaction committed, and
 * on a PostgreSQL error it keeps the batch and retries it with backoff, so an
 * outage delays the hub but loses nothing. */
#include "hub.h"
#include "hub_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <librdkafka/rdkafka.h>

#include "alert.h"
#include "backoff.h"
#include "checkback.h"
#include "dbid.h"
#include "deadletter.h"
#include "fault.h"
#include "forward.h"
#include "intake.h"
#include "log.h"
#include "metrics.h"
#include "migrate.h"
#include "monitor.h"
#include "owned.h"
#include "signals.h"
#include "store.h"
#include "tenants.h"

/* Serve delivery reports and hand them to the writer (forward.c), which
 * records them beside the batches on a connection of its own. */
static void hand_over_deliveries(hub *h)
{
	forward_poll(h->fw, &h->owned);
	deadletter_poll(h->dl, &h->owned);
}

/* Partitions Kafka assigns here that intake refuses (intake.h): kept for
 * /readyz; the alert database_mismatch raised once for as long as some
 * are refused for another database (a rebalance in between, which
 * refuses them again, does not count as an end). */
static void watch_refusals(hub *h, int64_t now)
{
	int mismatch;
	if (intake_refusals(h->in, h->refusals, sizeof h->refusals, &mismatch) > 0)
		h->refused_seen = now;
	else if (now - h->refused_seen > 2 * STORE_HEARTBEAT_MS)
		h->mismatch_alerted = 0;
	if (mismatch && !h->mismatch_alerted) {
		alert_raise(h->al, "database_mismatch", NULL, NULL, 0, h->cfg->control_topic,
		            h->refusals);
		h->mismatch_alerted = 1;
	}
}

/* The consumer's SCRAM login was refused on a librdkafka older than 2.6.1
 * (intake_scram_hint()): the alert librdkafka_too_old, once per run (the
 * library does not change under a running hub). */
static void watch_scram(hub *h)
{
	if (h->scram_alerted || !intake_scram_hint(h->in))
		return;
	alert_raise(h->al, "librdkafka_too_old", NULL, NULL, 0, NULL, intake_trouble(h->in));
	h->scram_alerted = 1;
}

/* Why this replica is not ready, for /readyz ("" when it is): before the
 * consumer joined its group, Kafka's last error (a refused password or
 * certificate, an ACL) or what may keep it out (intake_join_hint()); a
 * PostgreSQL write failing for a second or more, partitions the broker
 * refuses to let it read, partitions refused, a clash over partitions, the forward producer failing as it starts, or
 * (exactly_once) a partition its lane has not taken for
 * alert.lane_stuck_ms. */
static const char *readiness(const hub *h, char *buf, size_t bufsz)
{
	const fault *faults[] = {&h->f_conn, &h->f_apply, &h->f_scan};
	int64_t now = hub_now_ms();
	if (!h->joined && intake_trouble(h->in)) {
		snprintf(buf, bufsz, "Kafka: %s", intake_trouble(h->in));
		return buf;
	}
	if (!h->joined && intake_join_hint(h->in))
		return intake_join_hint(h->in);
	if (config_tenants_enforce(h->cfg) && !tenants_rules(h->tenants)) {
		snprintf(buf, bufsz, "tenants.enforce is on and no tenant rules are loaded yet: intake "
		         "waits (%s)", tenants_failing(h->tenants) ? tenants_failing(h->tenants)
		                                                   : "not read yet");
		return buf;
	}
	for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
		const fault *f = faults[i];
		if (f->since_ms && (f->attempts >= 2 || now - f->since_ms >= 1000)) {
			snprintf(buf, bufsz, "PostgreSQL: %s has failed for %lld s: %s", f->what,
			         (long long)((now - f->since_ms) / 1000), f->last);
			return buf;
		}
	}
	char why[600];
	int64_t since = forward_failing(h->fw, why, sizeof why);
	if (since && now - since >= 1000) {
		snprintf(buf, bufsz, "PostgreSQL: recording delivery reports has failed for %lld s: %s",
		         (long long)((now - since) / 1000), why);
		return buf;
	}
	if (intake_unreadable(h->in, buf, bufsz) > 0)
		return buf;
	if (forward_dying(h->fw, buf, bufsz))
		return buf;
	if (h->refusals[0])
		return h->refusals;
	if (!h->problem[0] && forward_stuck(h->fw, buf, bufsz) > 0)
		return buf;
	return h->problem;
}

/* Connect to PostgreSQL, retrying with backoff until it answers (readiness
 * says why meanwhile). Returns 0, or -1 when a stop was asked for first. */
static int connect_store(hub *h)
{
	char err[1024];
	for (int attempt = 1; !h->st; attempt++) {
		h->st = store_connect(h->cfg, err, sizeof err);
		if (h->st)
			break;
		char why[1100];
		snprintf(why, sizeof why, "starting: %s", err);
		monitor_turn(h->mon, 0, why);
		if (signals_stop_requested())
			return -1;
		int64_t d = backoff_delay(attempt, 200, 5000, backoff_random());
		log_warn("hub: %s; retrying in %lld ms", err, (long long)d);
		hub_sleep_ms(d);
	}
	return 0;
}

/* forward.dead_letter_topic must be no forward topic a tenant may write
 * (the rules just loaded), as it is no control topic (config.c): a forward
 * there would carry its message's txhub-biz-id and txhub-message-key and
 * pass for a dead letter of it (docs/configuration.md). Returns 0, or -1
 * (logged). Intake rejects an envelope forwarding there all the same. */
static int check_dead_letter_topic(const hub *h)
{
	const char *dlq = h->cfg->forward_dead_letter_topic;
	const tenant_rules *r = tenants_rules(h->tenants);
	for (size_t i = 0; *dlq && r && i < tenant_rules_count(r); i++) {
		const tenant_rule *t = tenant_rules_at(r, i);
		if (!tenant_may_forward(t, dlq))
			continue;
		log_error("hub: forward.dead_letter_topic: \"%s\" names a forward topic: tenant %s may "
		          "forward into it (txhub.tenants.forward_topics); its dead letters would pass "
		          "for forwards, its forwards for dead letters. Choose a topic no tenant "
		          "forwards to", dlq, t->name);
		return -1;
	}
	return 0;
}

/* With the store connected: check the schema, start alerts, check-backs,
 * forward, the dead-letter producer and intake. Returns 0, 1 (failed,
 * logged), or 2 when the configuration is refused (logged: exit status 2,
 * as for a key config_validate() refuses). */
static int start_parts(hub *h)
{
	const txhub_config *cfg = h->cfg;
	char err[1024];
	int version;
	if (store_schema_version(h->st, &version, err, sizeof err) != STORE_OK) {
		log_error("hub: reading the schema version: %s", err);
		return 1;
	}
	if (version != migrate_latest()) {
		log_error("hub: the database schema is at version %d, this txhub needs %d: run "
		          "`txhub migrate` first", version, migrate_latest());
		return 1;
	}
	snprintf(err, sizeof err, "out of memory");
	if (!(h->tenants = tenants_new()) || !(h->al = alert_start(cfg, err, sizeof err)) ||
	    !(h->cb = checkback_start(cfg, h->al, err, sizeof err))) {
		log_error("hub: %s", err);
		return 1;
	}
	fault_init(&h->f_conn, "hub: connecting to PostgreSQL", h->al, cfg->alert_database_failing_ms);
	fault_init(&h->f_apply, "hub: storing envelopes", h->al, cfg->alert_database_failing_ms);
	fault_init(&h->f_scan, "hub: scanning owned partitions", h->al,
	           cfg->alert_database_failing_ms);
	if (!(h->fw = forward_new(cfg, h->al, err, sizeof err))) {
		log_error("hub: %s", err);
		return 1;
	}
	if (!(h->dl = deadletter_start(cfg, h->al, forward_txn_id(h->fw), err, sizeof err)) &&
	    *err) {
		log_error("hub: %s", err);
		return 1;
	}
	/* a forward in flight is leased for longer than the producer may take */
	store_set_lease(h->st, forward_delivery_timeout_ms(h->fw) + 60000);
	store_set_order_by_key(h->st, config_order_by_key(h->cfg), config_exactly_once(h->cfg));
	char host[64] = "";
	if (gethostname(host, sizeof host - 1) != 0)
		snprintf(host, sizeof host, "unknown-host");
	snprintf(h->owner, sizeof h->owner, "%s/%ld", host, (long)getpid());
	dbid self;
	char about[200];
	if (store_dbid(h->st, &self, err, sizeof err) == 0)
		log_info("hub: working against %s", dbid_describe(&self, about, sizeof about));
	else
		log_warn("hub: cannot read the database's identity (%s): offsets are committed "
		         "without it, and a replica of group %s against another database goes "
		         "unnoticed", err, cfg->group);
	intake_hooks hooks = {hub_on_take, hub_on_assigned, hub_on_revoking, hub_on_gap, h};
	if (!(h->in = intake_new(cfg, hooks, &h->owned, &self, err, sizeof err))) {
		log_error("hub: %s", err);
		return 1;
	}
	forward_set_consumer(h->fw, intake_consumer(h->in));
	/* the rules before the first record (each record's tenant is recorded,
	 * enforcement or not); failing, tenants.enforce holds intake until they
	 * load (hub_flush_batch) */
	hub_refresh_tenants(h, hub_now_ms());
	if (check_dead_letter_topic(h) != 0)
		return 2;
	log_info("hub: running (control topic %s, group %s, brokers %s)", cfg->control_topic,
	         cfg->group, cfg->brokers);
	return 0;
}

/* The counters, once a minute. */
static void log_stats(hub *h)
{
	forward_stats fs = forward_get_stats(h->fw);
	checkback_stats cs = checkback_get_stats(h->cb);
	log_info("hub: %llu records in %llu batches, %llu rejected, %llu conflicts; "
	         "forwards: %llu delivered, %llu failed attempts, %llu given up, %zu in flight; "
	         "check-backs: %llu asked, %llu committed, %llu rolled back, %llu undecided, "
	         "%llu errors, %llu check_failed, %zu in flight, %zu waiting for a "
	         "connection to their host",
	         (unsigned long long)h->records, (unsigned long long)h->batches,
	         (unsigned long long)h->rejected, (unsigned long long)h->conflicts,
	         (unsigned long long)fs.delivered, (unsigned long long)fs.failed_attempts,
	         (unsigned long long)fs.failed_final, forward_in_flight(h->fw),
	         (unsigned long long)cs.requests, (unsigned long long)cs.committed,
	         (unsigned long long)cs.rolled_back, (unsigned long long)cs.undecided,
	         (unsigned long long)cs.errors, (unsigned long long)cs.check_failed,
	         cs.in_flight, cs.waiting);
}

/* The loop, until a stop is asked for or the consumer fails for good.
 * Returns 1 when the consumer failed, else 0. */
static int run_loop(hub *h)
{
	int64_t next_scan = 0, next_stats = hub_now_ms() + 60000;
	int64_t next_lag = 0;
	while (!signals_stop_requested()) {
		if (intake_fatal(h->in)) {
			/* a dead consumer cannot be replaced in place: its group
			 * membership went with it. Stop cleanly; the supervisor starts
			 * the hub again, which joins as a new member */
			log_error("hub: the Kafka consumer failed for good (%s); stopping so that a "
			          "restart replaces it", intake_fatal(h->in));
			alert_raise(h->al, "kafka_fatal", NULL, NULL, 0, NULL, intake_fatal(h->in));
			return 1;
		}
		hub_take_signals(h);
		intake_poll(h->in, &h->batch);
		hub_flush_batch(h);
		intake_commit_due(h->in);
		int64_t now = hub_now_ms();
		watch_refusals(h, now);
		watch_scram(h);
		char why[sizeof h->problem + 600];
		metrics_set_owned_partitions(h->owned.n);
		hub_watch_tenant_rules(h, now);
		monitor_turn(h->mon, h->joined, readiness(h, why, sizeof why));
		if (now >= next_lag) {
			hub_publish_lag(h);
			next_lag = now + 1000;
		}
		hand_over_deliveries(h);
		if (forward_take_release(h->fw)) { /* a blocker delivered: release its key's held ones */
			int64_t at = h->claimed_at + 100 > now ? h->claimed_at + 100 : now;
			if (h->next_claim == 0 || h->next_claim > at)
				h->next_claim = at;
		}
		if (hub_store_ready(h) == 0 &&
		    (h->scan_step > 0 || h->released.n > 0 || now >= next_scan) && hub_scan_step(h, now))
			next_scan = now + 1000;
		else if (hub_store_ready(h) == 0 && h->scan_step == 0 && h->released.n == 0 &&
		         (h->claim_more || (h->next_claim > 0 && now >= h->next_claim)))
			hub_claim_retries(h); /* between two scans (hub_plan_next_claim) */
		if (now >= next_stats) {
			log_stats(h);
			next_stats = now + 60000;
		}
	}
	return 0;
}

/* A stop asked for: store the batch in hand, commit its offsets, drain the
 * forwards in flight. */
static void finish(hub *h)
{
	log_info("hub: stopping: finishing the batch in hand");
	h->retry_at = 0;
	h->reconnect_at = 0;
	if (hub_flush_batch(h) != 0 && h->batch.n > 0)
		log_warn("hub: stopping with %zu records not stored; they will be read again",
		         h->batch.n);
	intake_batch_reset(&h->batch);
	intake_commit(h->in);
	if (hub_store_ready(h) == 0)
		forward_drain(h->fw, &h->owned, 10000);
}

/* Close and free what start_parts started (any of it may be missing). */
static void close_parts(hub *h)
{
	if (h->in) {
		if (h->fw) /* (the transactions after it: not fenced by the group) */
			forward_set_consumer(h->fw, NULL);
		intake_close(h->in); /* may call hub_on_revoking: batch is empty by now */
	}
	intake_batch_free(&h->batch);
	checkback_stop(h->cb); /* after intake_close: the revoke hook talks to it */
	forward_destroy(h->fw);
	deadletter_stop(h->dl);
	alert_stop(h->al, 3000);
	monitor_stop(h->mon);
	tenants_free(h->tenants);
	store_close(h->st);
	owned_free(&h->owned); /* after intake_close, its writer */
	owned_free(&h->released);
	owned_free(&h->fw_unreleased);
	config_drop(h->cfg); /* a reload's, after every part that held it */
}

int hub_run(const txhub_config *cfg, hub_reload_fn reload_fn, void *reload_ctx)
{
	hub h;
	memset(&h, 0, sizeof h);
	h.cfg = cfg;
	h.reload = reload_fn;
	h.reload_ctx = reload_ctx;
	h.failpoint = getenv("TXHUB_FAILPOINT"); /* crash tests only (hub_scan.c) */
	char err[1024];
	int status = 1;

	signals_install();
	/* what a report of trouble with Kafka needs first (docs/kafka.md:
	 * Which librdkafka) */
	log_info("hub: txhub %s with librdkafka %s", TXHUB_VERSION, rd_kafka_version_str());
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		log_error("hub: cannot initialise libcurl");
		return 1;
	}

	/* first, so that /healthz and /readyz answer during a slow start-up */
	if (!(h.mon = monitor_start(cfg, err, sizeof err))) {
		log_error("hub: %s", err);
		curl_global_cleanup();
		return 1;
	}
	if (connect_store(&h) != 0) {
		monitor_stop(h.mon);
		curl_global_cleanup();
		return 0;
	}
	int started = start_parts(&h);
	if (started == 0) {
		int consumer_died = run_loop(&h);
		finish(&h);
		status = consumer_died ? 1 : 0;
	} else {
		status = started;
	}
	close_parts(&h);
	curl_global_cleanup();
	if (status == 0)
		log_info("hub: stopped cleanly");
	return status;
}
