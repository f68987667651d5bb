/* checkback.c: see checkback.h.
 *
 * The thread's loop, with nothing busy-waiting:
 *
 *   take the owned partitions -> write the answers in hand (one statement)
 *   -> claim due rows for the free request slots -> start the requests of
 *   hosts below checkback.per_host -> curl_multi_poll() until a socket is
 *   ready, a time-out, the next due check, or a wake-up from
 *   checkback_assign()/checkback_stop()
 *
 * A request is attempt number check_attempts + 1 of its row; its answer is
 * written only if the row is still `prepared` at check_attempts, so a
 * decision envelope or a second answer can never be overridden.
 *
 * Per host, the checker counts its requests itself rather than leaving
 * the cap to CURLMOPT_MAX_HOST_CONNECTIONS alone: libcurl queues a
 * transfer beyond that limit but runs its CURLOPT_TIMEOUT_MS from the
 * moment it was added, so a row that waited in libcurl's queue would time
 * out against our queue, not the producer. Here a claimed row waits in its
 * slot, on its host's queue, and its request (and time-out) starts only
 * when the host has a connection to spare. */
#include "checkback.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array.h"
#include "backoff.h"
#include "checkback_http.h"
#include "clock.h"
#include "fault.h"
#include "log.h"
#include "metrics.h"
#include "store.h"
#include "trace.h"
#include "txhub.h"

/* How often the owned partitions are scanned at most when nothing is known
 * to fall due sooner (a new prepare may be due in less than this). */
#define SCAN_MAX_MS 1000
/* Answers are written when this many are in hand, or after WRITE_MS. */
#define WRITE_BATCH 256
#define WRITE_MS 20
/* A claimed row stays leased this long beyond the request time-out. */
#define LEASE_MARGIN_MS 30000
/* How long checkback_assign() waits for the thread to let go. */
#define ASSIGN_WAIT_MS 10000

/* ---- the checker ---- */

/* An answer waiting to be written; owns its strings. */
typedef struct {
	store_check_result r;
	char *biz_id, *message_key, *error;
} pending;

struct checkback {
	const txhub_config *cfg;
	alert *al;
	pthread_t thread;
	CURLM *multi;
	store *st;

	/* shared with the main thread, under mu */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	owned_set want;     /* the partitions the main thread says we own (a copy) */
	uint64_t want_gen;  /* bumped by every checkback_assign() */
	uint64_t acked_gen; /* the generation the thread has acted on */
	int stopping;
	const txhub_config *next_cfg; /* a reload's, for the thread to take up */
	checkback_stats stats;

	/* the thread's own */
	owned_set owned;    /* want, as last taken up */
	slot *slots;
	size_t nslots, busy, running; /* busy: slots claimed, running or waiting */
	host_load *hosts;            /* nslots entries; the first nhosts may be in use */
	size_t nhosts;
	pending *pend;
	size_t npend, cappend;
	int64_t first_pend_ms;   /* when the oldest unwritten answer arrived */
	int64_t next_scan_ms;
	int64_t store_retry_ms;  /* after a store error: not before this */
	int store_failures;
	fault f_store;           /* its errors, each logged once */
};

static void count(checkback *cb, uint64_t *counter)
{
	pthread_mutex_lock(&cb->mu);
	(*counter)++;
	pthread_mutex_unlock(&cb->mu);
}

/* busy and running are the thread's; stats has a copy for other threads */
static void set_load(checkback *cb, int busy_delta, int running_delta)
{
	cb->busy = (size_t)((ptrdiff_t)cb->busy + busy_delta);
	cb->running = (size_t)((ptrdiff_t)cb->running + running_delta);
	pthread_mutex_lock(&cb->mu);
	cb->stats.in_flight = cb->running;
	cb->stats.waiting = cb->busy - cb->running;
	pthread_mutex_unlock(&cb->mu);
}

/* Queue an answer for writing. The strings are copied. */
static void add_pending(checkback *cb, const char *biz, const char *mk, tp_key part,
                        int32_t claimed, int32_t attempts, store_check_outcome o,
                        const char *error, int64_t retry_in_ms)
{
	pending *n = array_grow(cb->pend, &cb->cappend, cb->npend + 1, sizeof *n);
	if (!n)
		goto oom;
	cb->pend = n;
	pending *p = &cb->pend[cb->npend];
	memset(p, 0, sizeof *p);
	p->biz_id = strdup(biz);
	p->message_key = strdup(mk);
	p->error = error ? strdup(error) : NULL;
	if (!p->biz_id || !p->message_key || (error && !p->error)) {
		free(p->biz_id);
		free(p->message_key);
		free(p->error);
		goto oom;
	}
	p->r.tp = part;
	p->r.biz_id = p->biz_id;
	p->r.message_key = p->message_key;
	p->r.claimed_attempts = claimed;
	p->r.attempts = attempts;
	p->r.outcome = o;
	p->r.error = p->error;
	p->r.retry_in_ms = retry_in_ms;
	if (cb->npend++ == 0)
		cb->first_pend_ms = clock_ms();
	return;
oom:
	/* the row stays leased and is asked again when the lease ends */
	log_error("checkback: out of memory keeping an answer; the message is asked again later");
}

static void pending_clear(checkback *cb)
{
	for (size_t i = 0; i < cb->npend; i++) {
		free(cb->pend[i].biz_id);
		free(cb->pend[i].message_key);
		free(cb->pend[i].error);
	}
	cb->npend = 0;
}

/* Turn "not decided" or an error on attempt n into a retry or, at the
 * limit, check_failed. */
static void add_unresolved(checkback *cb, const char *biz, const char *mk, tp_key part,
                           int32_t claimed, const char *reason)
{
	int32_t n = claimed + 1;
	if (n >= cb->cfg->checkback_max_attempts) {
		add_pending(cb, biz, mk, part, claimed, n, CHECK_FAILED, reason, 0);
	} else {
		int64_t d = backoff_delay(n, cb->cfg->checkback_backoff_ms,
		                          cb->cfg->checkback_backoff_max_ms, backoff_random());
		add_pending(cb, biz, mk, part, claimed, n, CHECK_RETRY, reason, d);
	}
}

/* A store error: try again after a backoff; the error is logged once. */
static void store_failed(checkback *cb, const char *err)
{
	cb->store_failures++;
	cb->store_retry_ms = clock_ms() + backoff_delay(cb->store_failures, 200, 5000,
	                                               backoff_random());
	fault_fail(&cb->f_store, err);
}

static void store_succeeded(checkback *cb)
{
	cb->store_failures = 0;
	cb->store_retry_ms = 0;
	fault_ok(&cb->f_store);
}

/* Write the answers in hand. Returns 0 when done (or nothing to do). */
static int write_pending(checkback *cb)
{
	if (cb->npend == 0)
		return 0;
	char err[1024];
	if (store_ensure(cb->st, err, sizeof err) != STORE_OK)
		goto fail;
	store_check_result *r = malloc(cb->npend * sizeof *r);
	if (!r) {
		snprintf(err, sizeof err, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < cb->npend; i++)
		r[i] = cb->pend[i].r;
	store_check_list failed = {0};
	size_t written = 0;
	store_rc rc = store_record_checks(cb->st, cb->owned.parts, cb->owned.n, r, cb->npend, &failed,
	                                  &written, err, sizeof err);
	free(r);
	if (rc != STORE_OK) {
		store_check_list_clear(&failed);
		goto fail;
	}
	if (written < cb->npend)
		log_debug("checkback: %zu of %zu answers came after a decision and were dropped",
		          cb->npend - written, cb->npend);
	/* a retry may fall due before the next planned scan */
	for (size_t i = 0; i < cb->npend; i++) {
		if (cb->pend[i].r.outcome != CHECK_RETRY)
			continue;
		int64_t due = clock_ms() + cb->pend[i].r.retry_in_ms;
		if (due < cb->next_scan_ms)
			cb->next_scan_ms = due;
	}
	for (size_t i = 0; i < failed.n; i++) {
		char tid[TRACE_ID_LEN + 1] = "";
		if (failed.items[i].traceparent)
			txhubi_trace_id_of(failed.items[i].traceparent, tid);
		alert_raise_traced(cb->al, "check_failed", failed.items[i].biz_id,
		                   failed.items[i].message_key, failed.items[i].attempts, NULL,
		                   failed.items[i].last_error, tid);
		count(cb, &cb->stats.check_failed);
	}
	store_check_list_clear(&failed);
	pending_clear(cb);
	store_succeeded(cb);
	return 0;
fail:
	store_failed(cb, err); /* the answers are kept and written next time */
	return -1;
}

/* ---- slots ---- */

static void slot_reset(checkback *cb, slot *s)
{
	int was_running = s->state == SLOT_RUNNING;
	if (s->easy) {
		curl_multi_remove_handle(cb->multi, s->easy);
		curl_easy_cleanup(s->easy);
	}
	if (s->host) {
		if (was_running)
			s->host->running--;
		else
			checkback_host_unwait(s->host, s);
		checkback_host_put(cb->hosts, &cb->nhosts, s->host);
	}
	curl_slist_free_all(s->headers);
	free(s->biz_id);
	free(s->message_key);
	free(s->url);
	free(s->traceparent);
	free(s->tracestate);
	free(s->body);
	memset(s, 0, sizeof *s);
	set_load(cb, -1, was_running ? -1 : 0);
}

/* Give back a claimed row unasked: the same attempt count, due at once. */
static void give_back(checkback *cb, slot *s)
{
	add_pending(cb, s->biz_id, s->message_key, s->tp, s->claimed_attempts,
	            s->claimed_attempts, CHECK_RETRY, NULL, 0);
	slot_reset(cb, s);
}

/* Read base as libcurl will and hold it against checkback.allow. Returns 0
 * with u filled (the caller clears it), or settles the row as check_failed,
 * never requested, and returns -1. */
static int check_target(checkback *cb, const store_check *c, const char *base,
                        checkback_url *u)
{
	char why[200], esc[512], msg[800];
	const char *shown = log_escape(base, strlen(base), esc, sizeof esc);
	if (checkback_url_parse(base, u, why, sizeof why) != 0) {
		snprintf(msg, sizeof msg, "check-back URL %s cannot be read: %s; not requested", shown,
		         why);
	} else if (!checkback_url_permitted(cb->cfg->checkback_allow, u, why, sizeof why)) {
		snprintf(msg, sizeof msg, "check-back URL %s is outside checkback.allow (%s); "
		                          "not requested", shown, why);
		checkback_url_clear(u);
	} else {
		return 0;
	}
	add_pending(cb, c->biz_id, c->message_key, c->tp, c->attempts, c->attempts,
	            CHECK_FAILED, msg, 0);
	metrics_checkback_done(c->tenant, METRICS_CB_NOT_REQUESTED, 0);
	return -1;
}

/* Take one claimed row into a free slot, waiting for a connection to its
 * host; or settle it at once when it may not be asked. */
static void take_check(checkback *cb, const store_check *c, int64_t now, int64_t lease_ms)
{
	const char *base = c->url ? c->url : cb->cfg->checkback_default_url;
	checkback_url target;
	if (!base || !*base) {
		add_pending(cb, c->biz_id, c->message_key, c->tp, c->attempts, c->attempts,
		            CHECK_FAILED,
		            "no check-back URL: the prepare named none and checkback.default_url is empty",
		            0);
		metrics_checkback_done(c->tenant, METRICS_CB_NOT_REQUESTED, 0);
		return;
	}
	if (check_target(cb, c, base, &target) != 0)
		return;
	slot *s = NULL;
	for (size_t i = 0; i < cb->nslots && !s; i++)
		if (cb->slots[i].state == SLOT_FREE)
			s = &cb->slots[i];
	if (!s) {
		checkback_url_clear(&target);
		return; /* cannot happen: we never claim more than the free slots */
	}
	s->state = SLOT_WAITING;
	set_load(cb, +1, 0);
	/* the URL that was checked, normalized, is the one requested */
	s->url = checkback_request_url(target.url, c->biz_id, c->message_key);
	s->host = checkback_host_get(cb->hosts, &cb->nhosts, checkback_host_key(&target));
	checkback_url_clear(&target);
	s->biz_id = strdup(c->biz_id);
	s->message_key = strdup(c->message_key);
	/* checked at intake, and again here: the row may be an older hub's or
	 * written by hand, and these go into request headers as they are */
	const char *tp_bad = c->traceparent ? txhubi_trace_check_parent(c->traceparent) : NULL;
	const char *ts_bad = !tp_bad && c->tracestate ? txhubi_trace_check_state(c->tracestate) : NULL;
	if (tp_bad || ts_bad) {
		log_about about = {c->biz_id, c->message_key, c->tp, NULL};
		log_msg_about(LOG_WARN, "checkback", &about, "the stored %s is not valid (%s): the "
		              "request goes without it", tp_bad ? "traceparent" : "tracestate",
		              tp_bad ? tp_bad : ts_bad);
	}
	s->traceparent = c->traceparent && !tp_bad ? strdup(c->traceparent) : NULL;
	s->tracestate = c->tracestate && !tp_bad && !ts_bad ? strdup(c->tracestate) : NULL;
	if (s->traceparent)
		txhubi_trace_id_of(s->traceparent, s->trace_id);
	s->tp = c->tp;
	s->claimed_attempts = c->attempts;
	s->tenant = c->tenant;
	s->timeout_ms = cb->cfg->checkback_timeout_ms;
	s->start_by_ms = now + lease_ms - s->timeout_ms;
	if (!s->url || !s->host || !s->biz_id || !s->message_key ||
	    (c->traceparent && !tp_bad && !s->traceparent) ||
	    (c->tracestate && !tp_bad && !ts_bad && !s->tracestate)) {
		log_error("checkback: out of memory taking a check-back; it is retried later");
		add_unresolved(cb, c->biz_id, c->message_key, c->tp, c->attempts,
		               "out of memory in txhub");
		slot_reset(cb, s);
		return;
	}
	checkback_host_wait(s->host, s);
}

/* Start the request of a waiting slot (taken off its host's queue). */
static void start_request(checkback *cb, slot *s)
{
	checkback_host_unwait(s->host, s);
	s->headers = checkback_request_headers(cb->cfg->checkback_secret, s);
	s->easy = curl_easy_init();
	if (!s->headers || !s->easy) {
		log_error("checkback: out of memory starting a request; it is retried later");
		add_unresolved(cb, s->biz_id, s->message_key, s->tp, s->claimed_attempts,
		               "out of memory in txhub");
		slot_reset(cb, s);
		return;
	}
	CURL *e = s->easy;
	curl_easy_setopt(e, CURLOPT_URL, s->url);
	/* url's path has no dot segment left; PATH_AS_IS makes libcurl send it
	 * byte for byte, so that what goes out is what the allow list held */
	curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)s->timeout_ms);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, s->headers);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, checkback_on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s->curl_err);
	curl_easy_setopt(e, CURLOPT_PRIVATE, s);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "txhub/" TXHUB_VERSION);
	if (curl_multi_add_handle(cb->multi, e) != CURLM_OK) {
		add_unresolved(cb, s->biz_id, s->message_key, s->tp, s->claimed_attempts,
		               "txhub could not start the request");
		slot_reset(cb, s);
		return;
	}
	s->state = SLOT_RUNNING;
	s->host->running++;
	set_load(cb, 0, +1);
	s->started_ms = clock_ms();
	count(cb, &cb->stats.requests);
}

/* Start the waiting rows of every host below checkback.per_host, oldest
 * first. A row that can no longer start before its start-by time is given
 * back, due at once: asked later its request could outlast its lease, and
 * the row could be claimed a second time meanwhile. */
static void start_waiting(checkback *cb, int64_t now)
{
	size_t cap = (size_t)cb->cfg->checkback_per_host;
	for (size_t i = 0; i < cb->nhosts; i++) {
		host_load *h = &cb->hosts[i];
		slot *s;
		/* slot_reset() may empty h, which leaves h->waiting NULL */
		while ((s = h->waiting) && (h->running < cap || s->start_by_ms <= now)) {
			if (s->start_by_ms <= now)
				give_back(cb, s);
			else
				start_request(cb, s);
		}
	}
}

/* The earliest start-by time of a waiting row, or INT64_MAX. Each host's
 * queue is in claim order, so its first row is its earliest. */
static int64_t next_start_by(const checkback *cb)
{
	int64_t t = INT64_MAX;
	for (size_t i = 0; i < cb->nhosts; i++)
		if (cb->hosts[i].waiting && cb->hosts[i].waiting->start_by_ms < t)
			t = cb->hosts[i].waiting->start_by_ms;
	return t;
}

/* A request finished: classify and queue the answer. */
static void finish_check(checkback *cb, slot *s, CURLcode rc)
{
	char reason[600];
	checkback_answer a;
	if (rc != CURLE_OK) {
		a = CHECKBACK_ERROR;
		if (s->too_long)
			snprintf(reason, sizeof reason, "answer longer than %d bytes", CHECKBACK_BODY_MAX);
		else if (rc == CURLE_OPERATION_TIMEDOUT)
			snprintf(reason, sizeof reason, "no answer within checkback.timeout_ms (%lld ms)",
			         (long long)cb->cfg->checkback_timeout_ms);
		else {
			char esc[300];
			const char *m = s->curl_err[0] ? s->curl_err : curl_easy_strerror(rc);
			snprintf(reason, sizeof reason, "%s", log_escape(m, strlen(m), esc, sizeof esc));
		}
	} else {
		long code = 0;
		curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &code);
		a = checkback_parse_answer(code, s->body ? s->body : "", s->body_len, reason,
		                           sizeof reason);
	}
	static const metrics_checkback outcome[] = {METRICS_CB_COMMITTED, METRICS_CB_ROLLED_BACK,
	                                            METRICS_CB_UNDECIDED, METRICS_CB_ERROR};
	metrics_checkback_done(s->tenant, outcome[a], clock_ms() - s->started_ms);
	switch (a) {
	case CHECKBACK_COMMITTED:
		count(cb, &cb->stats.committed);
		add_pending(cb, s->biz_id, s->message_key, s->tp, s->claimed_attempts,
		            s->claimed_attempts + 1, CHECK_COMMITTED, NULL, 0);
		break;
	case CHECKBACK_ROLLED_BACK:
		count(cb, &cb->stats.rolled_back);
		add_pending(cb, s->biz_id, s->message_key, s->tp, s->claimed_attempts,
		            s->claimed_attempts + 1, CHECK_ROLLED_BACK, NULL, 0);
		break;
	case CHECKBACK_UNDECIDED:
	case CHECKBACK_ERROR: {
		count(cb, a == CHECKBACK_UNDECIDED ? &cb->stats.undecided : &cb->stats.errors);
		log_about about = {s->biz_id, s->message_key, s->tp, s->trace_id};
		log_msg_about(a == CHECKBACK_ERROR ? LOG_WARN : LOG_DEBUG, "checkback", &about,
		              "attempt %d: %s", s->claimed_attempts + 1, reason);
		add_unresolved(cb, s->biz_id, s->message_key, s->tp, s->claimed_attempts,
		               reason);
		break;
	}
	}
	slot_reset(cb, s);
}

static void collect_finished(checkback *cb)
{
	int left;
	CURLMsg *m;
	while ((m = curl_multi_info_read(cb->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		char *priv = NULL;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
		CURLcode rc = m->data.result; /* m is invalid once the handle is removed */
		if (priv)
			finish_check(cb, (slot *)priv, rc);
	}
}

/* Take up the partitions the main thread set. For the ones taken away:
 * write what we have, drop their requests and make those rows due again
 * (the new owner asks them at once), then acknowledge. */
static void take_assignment(checkback *cb)
{
	pthread_mutex_lock(&cb->mu);
	if (cb->want_gen == cb->acked_gen) {
		pthread_mutex_unlock(&cb->mu);
		return;
	}
	uint64_t gen = cb->want_gen;
	owned_set n = {0};
	int copied = owned_copy(&n, &cb->want);
	pthread_mutex_unlock(&cb->mu);
	if (copied != 0)
		return; /* tried again next round */

	int lost = 0;
	for (size_t i = 0; i < cb->owned.n; i++)
		if (!owned_has(&n, cb->owned.parts[i].tp))
			lost = 1;
	if (lost) {
		for (size_t i = 0; i < cb->nslots; i++) {
			slot *s = &cb->slots[i];
			/* same attempt count: only the lease is given back */
			if (s->state != SLOT_FREE && !owned_has(&n, s->tp))
				give_back(cb, s);
		}
		for (int attempt = 0; attempt < 3 && write_pending(cb) != 0; attempt++) {
			struct timespec ts = {0, 200 * 1000000L};
			nanosleep(&ts, NULL);
		}
		if (cb->npend > 0) {
			/* their leases run out on their own; the new owner asks again */
			log_warn("checkback: dropping %zu unwritten answers for revoked partitions",
			         cb->npend);
			pending_clear(cb);
		}
	}
	owned_free(&cb->owned);
	cb->owned = n;
	cb->next_scan_ms = 0; /* scan the new set at once */
	pthread_mutex_lock(&cb->mu);
	cb->acked_gen = gen;
	pthread_cond_broadcast(&cb->cv);
	pthread_mutex_unlock(&cb->mu);
}

/* Whether enough slots are free to claim: with requests in flight we wait
 * for half the slots, so that claims come in batches rather than one row at
 * a time. */
static int slots_to_claim(const checkback *cb)
{
	size_t free_slots = cb->nslots - cb->busy;
	if (cb->owned.n == 0 || free_slots == 0)
		return 0;
	if (cb->busy > 0 && free_slots < (cb->nslots + 1) / 2)
		return 0;
	return 1;
}

static void claim(checkback *cb, int64_t now)
{
	size_t free_slots = cb->nslots - cb->busy;
	if (!slots_to_claim(cb) || now < cb->next_scan_ms || now < cb->store_retry_ms)
		return;
	char err[1024];
	if (store_ensure(cb->st, err, sizeof err) != STORE_OK) {
		store_failed(cb, err);
		return;
	}
	store_check_list l = {0};
	int64_t next_due = -1;
	int64_t lease = cb->cfg->checkback_timeout_ms + LEASE_MARGIN_MS;
	if (store_claim_checks(cb->st, cb->owned.parts, cb->owned.n, (int)free_slots, lease, &l,
	                       &next_due, err, sizeof err) != STORE_OK) {
		store_failed(cb, err);
		return;
	}
	store_succeeded(cb);
	if (l.n > 0)
		log_debug("checkback: %zu check-back(s) due", l.n);
	for (size_t i = 0; i < l.n; i++)
		take_check(cb, &l.items[i], now, lease);
	store_check_list_clear(&l);
	if (next_due == 0 && l.n == 0)
		cb->next_scan_ms = now + 10; /* due rows locked by a batch being applied */
	else if (next_due == 0)
		cb->next_scan_ms = now; /* more are due: claim as slots free up */
	else
		cb->next_scan_ms = now + (next_due < 0 || next_due > SCAN_MAX_MS ? SCAN_MAX_MS
		                                                                 : next_due);
}

static void *run(void *arg)
{
	checkback *cb = arg;
	pthread_setname_np(pthread_self(), "txhub:checkbk");
	for (;;) {
		pthread_mutex_lock(&cb->mu);
		int stopping = cb->stopping;
		const txhub_config *reload = cb->next_cfg;
		cb->next_cfg = NULL;
		pthread_mutex_unlock(&cb->mu);
		if (reload) {
			config_drop(cb->cfg); /* (this thread's alone) */
			cb->cfg = reload;     /* the reference next_cfg held */
			/* libcurl's own limit as a backstop: the checker never starts
			 * more requests for a host than this anyway */
			curl_multi_setopt(cb->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
			                  (long)cb->cfg->checkback_per_host);
		}
		if (stopping)
			break;
		take_assignment(cb);
		int64_t now = clock_ms();
		if (cb->npend > 0 && now >= cb->store_retry_ms &&
		    (cb->npend >= WRITE_BATCH || now - cb->first_pend_ms >= WRITE_MS || cb->busy == 0))
			write_pending(cb);
		claim(cb, clock_ms());
		start_waiting(cb, clock_ms());

		int running = 0;
		curl_multi_perform(cb->multi, &running);
		collect_finished(cb);
		/* the answers just read freed connections: start what waits for
		 * them now (curl_multi_poll() returns at once for new transfers) */
		start_waiting(cb, clock_ms());

		/* sleep until a socket is ready or the next thing to do */
		now = clock_ms();
		int64_t wait = SCAN_MAX_MS;
		if (slots_to_claim(cb)) {
			int64_t t = cb->next_scan_ms > cb->store_retry_ms ? cb->next_scan_ms
			                                                  : cb->store_retry_ms;
			if (t - now < wait)
				wait = t - now;
		}
		if (cb->npend > 0) {
			int64_t t = cb->first_pend_ms + WRITE_MS;
			if (t < cb->store_retry_ms)
				t = cb->store_retry_ms;
			if (cb->busy == 0 || cb->npend >= WRITE_BATCH)
				t = cb->store_retry_ms;
			if (t - now < wait)
				wait = t - now;
		}
		int64_t start_by = next_start_by(cb);
		if (start_by != INT64_MAX && start_by - now < wait)
			wait = start_by - now;
		if (wait < 0)
			wait = 0;
		if (wait > 0 || cb->busy > 0)
			curl_multi_poll(cb->multi, NULL, 0, (int)wait, NULL);
	}
	/* stopping: give back the leases of what is in flight or waiting */
	for (size_t i = 0; i < cb->nslots; i++)
		if (cb->slots[i].state != SLOT_FREE)
			give_back(cb, &cb->slots[i]);
	if (write_pending(cb) != 0)
		pending_clear(cb);
	return NULL;
}

/* Free what the thread left (it has stopped, or never started). */
static void destroy(checkback *cb)
{
	if (cb->multi)
		curl_multi_cleanup(cb->multi);
	store_close(cb->st);
	free(cb->slots);
	free(cb->hosts);
	owned_free(&cb->want);
	owned_free(&cb->owned);
	free(cb->pend);
	config_drop(cb->cfg);
	config_drop(cb->next_cfg);
	pthread_mutex_destroy(&cb->mu);
	pthread_cond_destroy(&cb->cv);
	free(cb);
}

checkback *checkback_start(const txhub_config *cfg, alert *al, char *err, size_t errsz)
{
	checkback *cb = calloc(1, sizeof *cb);
	if (!cb) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	cb->cfg = config_hold(cfg);
	cb->al = al;
	cb->nslots = (size_t)cfg->checkback_concurrency;
	/* no alert of its own: the main loop's writes fail alike and alert */
	fault_init(&cb->f_store, "checkback: writing to PostgreSQL", NULL, INT64_MAX);
	pthread_mutex_init(&cb->mu, NULL);
	pthread_cond_init(&cb->cv, NULL);
	cb->slots = calloc(cb->nslots, sizeof *cb->slots);
	cb->hosts = calloc(cb->nslots, sizeof *cb->hosts);
	cb->multi = curl_multi_init();
	if (!cb->slots || !cb->hosts || !cb->multi) {
		snprintf(err, errsz, "out of memory");
		goto fail;
	}
	/* connections are kept and reused across requests, one per slot at most */
	curl_multi_setopt(cb->multi, CURLMOPT_MAXCONNECTS, (long)cb->nslots);
	curl_multi_setopt(cb->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)cb->nslots);
	curl_multi_setopt(cb->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)cfg->checkback_per_host);
	if (!(cb->st = store_connect(cfg, err, errsz)))
		goto fail;
	if (pthread_create(&cb->thread, NULL, run, cb) != 0) {
		snprintf(err, errsz, "cannot start the check-back thread: %s", strerror(errno));
		goto fail;
	}
	return cb;
fail:
	destroy(cb);
	return NULL;
}

void checkback_assign(checkback *cb, const owned_set *owned)
{
	if (!cb)
		return;
	pthread_mutex_lock(&cb->mu);
	int taken = 0;
	for (size_t i = 0; i < cb->want.n; i++)
		if (!owned_has(owned, cb->want.parts[i].tp))
			taken = 1;
	if (owned_copy(&cb->want, owned) != 0) {
		pthread_mutex_unlock(&cb->mu);
		log_error("checkback: out of memory tracking partitions");
		return;
	}
	uint64_t gen = ++cb->want_gen;
	pthread_mutex_unlock(&cb->mu);
	curl_multi_wakeup(cb->multi);
	if (!taken)
		return;
	struct timespec ts = clock_deadline(ASSIGN_WAIT_MS);
	pthread_mutex_lock(&cb->mu);
	int rc = 0;
	while (cb->acked_gen < gen && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&cb->cv, &cb->mu, &ts);
	pthread_mutex_unlock(&cb->mu);
	if (rc == ETIMEDOUT)
		log_warn("checkback: the checker did not let go of revoked partitions within %d ms",
		         ASSIGN_WAIT_MS);
}

void checkback_stop(checkback *cb)
{
	if (!cb)
		return;
	pthread_mutex_lock(&cb->mu);
	cb->stopping = 1;
	pthread_mutex_unlock(&cb->mu);
	curl_multi_wakeup(cb->multi);
	pthread_join(cb->thread, NULL);
	destroy(cb);
}

void checkback_reconfigure(checkback *cb, const txhub_config *cfg)
{
	pthread_mutex_lock(&cb->mu);
	const txhub_config *untaken = cb->next_cfg;
	cb->next_cfg = config_hold(cfg);
	pthread_mutex_unlock(&cb->mu);
	config_drop(untaken);
	curl_multi_wakeup(cb->multi);
}

checkback_stats checkback_get_stats(checkback *cb)
{
	checkback_stats s;
	memset(&s, 0, sizeof s);
	if (!cb)
		return s;
	pthread_mutex_lock(&cb->mu);
	s = cb->stats;
	pthread_mutex_unlock(&cb->mu);
	return s;
}
