/* forward_reports.c: the writer thread: records the delivery reports the
 * run loop hands over, in batches on a PostgreSQL connection of its own,
 * beside the loop's transactions (store_record_deliveries). */
#include "forward_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alert.h"
#include "backoff.h"
#include "clock.h"
#include "fault.h"
#include "log.h"
#include "marks.h"
#include "owned.h"
#include "store.h"

/* ---- the writer ---- */

/* After the reports in l were written: alerts for the forwards that failed
 * for good, a log line per failed attempt, the counters. */
static void reports_written(forward *fw, const fw_list *l, const store_forward_list *failed)
{
	for (size_t i = 0; i < failed->n; i++) {
		const store_forward *f = &failed->items[i];
		const char *why = NULL; /* the final attempt's error, from its report */
		for (size_t j = 0; j < l->n && !why; j++)
			if (!l->items[j]->ok && strcmp(l->items[j]->biz_id, f->biz_id) == 0 &&
			    strcmp(l->items[j]->message_key, f->message_key) == 0)
				why = l->items[j]->error;
		alert_raise_traced(fw->al, "send_failed", f->biz_id, f->message_key, f->send_attempts,
		                   f->topic, why, f->trace_id);
	}
	forward_count_reports(l, failed);
	uint64_t ok = 0, bad = 0, requeued = 0;
	for (size_t i = 0; i < l->n; i++) {
		const fw_item *it = l->items[i];
		if (it->ok || it->requeue || it->hold) {
			ok += it->ok;
			requeued += it->requeue;
			continue;
		}
		bad++;
		log_about about = {it->biz_id, it->message_key, it->tp, it->trace_id};
		log_msg_about(LOG_WARN, "forward", &about, "attempt %d: %s", it->send_attempts + 1,
		              it->error ? it->error : "(reason unknown: out of memory)");
	}
	pthread_mutex_lock(&fw->mu);
	fw->stats.delivered += ok;
	fw->stats.failed_attempts += bad;
	fw->stats.failed_final += failed->n;
	fw->stats.requeued += requeued;
	fw->in_flight -= (int64_t)l->n;
	pthread_cond_broadcast(&fw->cv);
	pthread_mutex_unlock(&fw->mu);
}

/* Write the reports of l with the ownership snapshot own and the tuning of
 * cfg. Returns 0, or -1 with err (l is then kept for the next try). */
static int write_list(forward *fw, const fw_list *l, const owned_set *own,
                      const store_mark *marks, size_t nmarks, int64_t backoff_ms,
                      int64_t backoff_max_ms, int max_attempts, char *err, size_t errsz)
{
	char sub[512];
	if (!fw->st && !(fw->st = store_connect(fw->start_cfg, sub, sizeof sub))) {
		snprintf(err, errsz, "%s", sub);
		return -1;
	}
	if (store_ensure(fw->st, err, errsz) != STORE_OK)
		return -1;
	store_delivery *d = calloc(l->n, sizeof *d);
	if (!d) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < l->n; i++) {
		const fw_item *it = l->items[i];
		d[i].biz_id = it->biz_id;
		d[i].message_key = it->message_key;
		d[i].tp = it->tp;
		d[i].ok = it->ok;
		d[i].fwd_seq = it->ok && !it->clear ? it->fwd_seq : 0; /* 0: written sent */
		d[i].requeue = it->requeue;
		d[i].hold = it->hold;
		d[i].error = it->error ? it->error : "delivery failed (out of memory describing why)";
		d[i].retry_in_ms = backoff_delay(it->send_attempts + 1, backoff_ms, backoff_max_ms,
		                                 backoff_random());
	}
	store_forward_list failed = {0};
	int64_t t0 = clock_ms();
	store_rc rc = store_record_deliveries(fw->st, own->parts, own->n, d, l->n, max_attempts,
	                                      marks, nmarks, &failed, err, errsz);
	free(d);
	log_debug("forward: %zu delivery report(s) and %zu mark(s) written in %lld ms", l->n, nmarks,
	          (long long)(clock_ms() - t0));
	if (rc == STORE_OK)
		reports_written(fw, l, &failed);
	store_forward_list_clear(&failed);
	return rc == STORE_OK ? 0 : -1;
}

/* The writer's fault, copied for readiness (forward_failing). */
static void copy_fault(forward *fw)
{
	pthread_mutex_lock(&fw->mu);
	fw->failing_since = fault_failing_since(&fw->f_write);
	snprintf(fw->failing, sizeof fw->failing, "%s", fw->f_write.last);
	pthread_mutex_unlock(&fw->mu);
}

/* Delivery marks are written this often at most, unless a report needs a
 * row written (a failure, a retry, a row without a sequence). */
#define MARKS_EVERY_MS 100

/* Whether every report of l is a delivery a mark records (under mu). */
static int marks_only(const fw_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		if (!l->items[i]->ok || l->items[i]->fwd_seq <= 0)
			return 0;
	return 1;
}

/* Wait on the writer's condition at most ms (under mu). */
static void timed_wait(forward *fw, int64_t ms)
{
	struct timespec ts = clock_deadline(ms);
	pthread_cond_timedwait(&fw->cv, &fw->mu, &ts);
}

/* Count the reports of l in the marks (once each), and have those of a
 * frozen partition's deliveries written per row. Returns how many marks
 * may move (under mu). */
static size_t count_reported(forward *fw, fw_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		fw_item *it = l->items[i];
		if (it->reported || it->fwd_seq <= 0)
			continue;
		it->reported = 1;
		marks_done(&fw->marks, it->tp, it->fwd_seq);
		if (marks_frozen(&fw->marks, it->tp))
			it->fwd_seq = 0;
	}
	return fw->marks.n;
}

/* Wait for the queue, take it whole with the ownership snapshot and the
 * tuning, write it, and on failure put it back and wait a backoff. When
 * stopping, what cannot be written after one more try is dropped: those
 * rows stay pending and leased and are sent again. */
void *forward_write_reports(void *arg)
{
	forward *fw = arg;
	pthread_setname_np(pthread_self(), "txhub:reports");
	char err[512];
	int failures = 0;
	pthread_mutex_lock(&fw->mu);
	for (;;) {
		while (fw->queue.n == 0 && !fw->stopping)
			pthread_cond_wait(&fw->cv, &fw->mu);
		if (fw->queue.n == 0)
			break; /* stopping, nothing left */
		/* reports that only move marks wait for the next ~100 ms: one
		 * statement per partition then, whatever the rate */
		int64_t now = clock_ms();
		if (!fw->stopping && now - fw->written_ms < MARKS_EVERY_MS && marks_only(&fw->queue)) {
			timed_wait(fw, MARKS_EVERY_MS - (now - fw->written_ms));
			continue;
		}
		fw_list l = fw->queue;
		int64_t handed = fw->handed_ms; /* l holds all handed over before it */
		memset(&fw->queue, 0, sizeof fw->queue);
		size_t nmarks = count_reported(fw, &l);
		store_mark *mk = calloc(nmarks ? nmarks : 1, sizeof *mk);
		nmarks = mk ? marks_take(&fw->marks, mk, nmarks) : 0;
		fw->written_ms = now;
		int copied = owned_copy(&fw->written_own, &fw->own);
		const txhub_config *cfg = fw->cfg;
		int64_t bo = cfg->forward_backoff_ms, bmax = cfg->forward_backoff_max_ms;
		int max = (int)cfg->forward_max_attempts, stopping = fw->stopping;
		pthread_mutex_unlock(&fw->mu);
		int rc = copied != 0 ? (snprintf(err, sizeof err, "out of memory"), -1)
		                     : write_list(fw, &l, &fw->written_own, mk, nmarks, bo, bmax, max,
		                                  err, sizeof err);
		if (rc == 0) {
			fault_ok(&fw->f_write);
			failures = 0;
		} else {
			fault_fail(&fw->f_write, err);
		}
		copy_fault(fw);
		pthread_mutex_lock(&fw->mu);
		if (rc != 0)
			marks_unsent(&fw->marks, mk, nmarks);
		free(mk);
		if (rc == 0) {
			fw->synced_ms = handed;
			forward_list_free(&l);
			continue;
		}
		if (stopping) {
			log_warn("forward: stopping with %zu delivery report(s) not recorded (%s); those "
			         "messages are sent again after their lease", l.n, err);
			fw->in_flight -= (int64_t)l.n;
			forward_list_free(&l);
			pthread_cond_broadcast(&fw->cv);
			continue;
		}
		for (size_t i = 0; i < fw->queue.n; i++) /* newer ones after the kept */
			if (forward_list_add(&l, fw->queue.items[i]) != 0) {
				forward_item_free(fw->queue.items[i]);
				fw->in_flight--;
			}
		free(fw->queue.items);
		fw->queue = l;
		timed_wait(fw, backoff_delay(++failures, 200, 5000, backoff_random()));
	}
	pthread_mutex_unlock(&fw->mu);
	return NULL;
}
