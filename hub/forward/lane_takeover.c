/* lane_takeover.c: a lane takes its partition: the progress topic made
 * sure of, the previous owner fenced, the last progress marker read and
 * what it says was committed marked. */
#include "lane_int.h"

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backoff.h"
#include "clock.h"
#include "kafka.h"
#include "log.h"
#include "marker.h"
#include "metrics.h"
#include "order.h"
#include "store.h"
#include "txn.h"

/* A transaction open in the marker partition when the partition is taken
 * is given this long to end before its producer is fenced. */
#define FENCE_GRACE_MS 2000

/* Make sure the progress topic exists (compacted, as many partitions as
 * the control topic) and learn which of its partitions holds this lane's
 * marker. Returns 0, or -1 with err. */
static int ensure_progress(lane *l, char *err, size_t errsz)
{
	/* a client of its own that never creates a topic by asking about it:
	 * a progress topic made by a broker's auto-creation would not be
	 * compacted */
	static const char *defaults[] = {"allow.auto.create.topics", "false", NULL};
	rd_kafka_t *rk = kafka_client_new(l->cfg, RD_KAFKA_PRODUCER, defaults,
	                                  "cannot create a Kafka client", err, errsz);
	if (!rk)
		return -1;
	char sub[512];
	int rc = -1, n = lane_partitions_of(rk, l->progress, err, errsz);
	if (n == 0) {
		int nctl = lane_partitions_of(rk, tp_topic(l->own.tp), err, errsz);
		if (nctl < 0)
			goto done;
		rd_kafka_NewTopic_t *nt =
			rd_kafka_NewTopic_new(l->progress, nctl > 0 ? nctl : -1, -1, sub, sizeof sub);
		if (!nt) {
			snprintf(err, errsz, "creating %s: %.200s", l->progress, sub);
			goto done;
		}
		rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact");
		rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
		rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
		rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
		const rd_kafka_CreateTopics_result_t *res = ev ? rd_kafka_event_CreateTopics_result(ev)
		                                               : NULL;
		size_t cnt = 0;
		const rd_kafka_topic_result_t **tr = res ? rd_kafka_CreateTopics_result_topics(res, &cnt)
		                                         : NULL;
		rd_kafka_resp_err_t e = !ev ? RD_KAFKA_RESP_ERR__TIMED_OUT
		                        : rd_kafka_event_error(ev) ? rd_kafka_event_error(ev)
		                        : cnt == 1 ? rd_kafka_topic_result_error(tr[0])
		                                   : RD_KAFKA_RESP_ERR__FAIL;
		if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
			log_info("lane %d of %s: created the progress topic %s (%d partition(s), compacted)",
			         TP_ARG(l->own.tp), l->progress, nctl);
		else if (e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
			snprintf(err, errsz, "creating the progress topic %s: %s", l->progress,
			         cnt == 1 && rd_kafka_topic_result_error_string(tr[0])
			                 ? rd_kafka_topic_result_error_string(tr[0])
			                 : rd_kafka_err2str(e));
		if (ev)
			rd_kafka_event_destroy(ev);
		rd_kafka_queue_destroy(q);
		rd_kafka_NewTopic_destroy(nt);
		if (e && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
			goto done;
		for (int i = 0; i < 20 && n <= 0; i++) { /* its metadata may lag */
			n = lane_partitions_of(rk, l->progress, err, errsz);
			if (n <= 0)
				lane_pause_ms(l, 250);
		}
		if (n <= 0) {
			if (n == 0)
				snprintf(err, errsz, "the progress topic %s was created but is not seen yet",
				         l->progress);
			goto done;
		}
	} else if (n < 0) {
		goto done;
	}
	l->marker_part = tp_part(l->own.tp) % n;
	rc = 0;
done:
	rd_kafka_destroy(rk);
	return rc;
}

/* The next record (or end-of-partition event) of the marker partition t
 * reads, this lane's marker key's or another's; NULL with err when none came
 * by until, or on an error other than the partition's end. */
static rd_kafka_message_t *next_record(lane *l, rd_kafka_topic_t *t, int64_t until, char *err,
                                       size_t errsz)
{
	for (;;) {
		rd_kafka_message_t *m = rd_kafka_consume(t, l->marker_part, 200);
		if (!m) {
			if (clock_ms() > until) {
				snprintf(err, errsz, "reading %s [%d]: timed out", l->progress, l->marker_part);
				return NULL;
			}
			continue;
		}
		if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
			snprintf(err, errsz, "reading %s [%d]: %s", l->progress, l->marker_part,
			         rd_kafka_message_errstr(m));
			rd_kafka_message_destroy(m);
			return NULL;
		}
		return m;
	}
}

/* Whether m is a record of this lane's marker key. */
static int own_key(const lane *l, const rd_kafka_message_t *m)
{
	return !m->err && m->key && m->key_len == strlen(l->marker_key) &&
	       memcmp(m->key, l->marker_key, m->key_len) == 0;
}

/* Read the marker partition from offset from to its end into *found (the
 * last marker of this lane's key; seq 0: none). Returns 0, or -1 with err. */
static int scan_markers(lane *l, rd_kafka_topic_t *t, int64_t from, store_marker *found,
                        char *txn, size_t txnsz, char *err, size_t errsz)
{
	memset(found, 0, sizeof *found);
	*txn = '\0';
	if (rd_kafka_consume_start(t, l->marker_part, from) != 0) {
		snprintf(err, errsz, "reading %s [%d]: %s", l->progress, l->marker_part,
		         rd_kafka_err2str(rd_kafka_last_error()));
		return -1;
	}
	int rc = -1;
	int64_t until = clock_ms() + 30000;
	rd_kafka_message_t *m;
	while ((m = next_record(l, t, until, err, errsz))) {
		int eof = m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF;
		if (own_key(l, m)) {
			store_marker mk = {0};
			if (m->payload && marker_parse(m->payload, m->len, &mk) == 0) {
				*found = mk; /* the later one wins */
				if (marker_txn_of(m->payload, m->len, txn, txnsz) != 0)
					*txn = '\0'; /* (0.4.0's: none) */
			} else
				log_warn("lane %d of %s: the record in %s [%d] at offset %lld is not a progress "
				         "marker txhub can read; ignored", TP_ARG(l->own.tp), l->progress,
				         l->marker_part, (long long)m->offset);
		}
		rd_kafka_message_destroy(m);
		if (eof) {
			rc = 0;
			break;
		}
	}
	rd_kafka_consume_stop(t, l->marker_part);
	return rc;
}

/* The last committed marker of the partition, from its progress partition
 * read with read_committed (seq 0: none), and the transactional.id that
 * wrote it into txn ("": none named). Returns 0, or -1 with err. The
 * reader has no consumer group (librdkafka's partition consumer): the
 * hub's principal needs no ACL for one. */
static int read_marker(lane *l, store_marker *out, char *txn, size_t txnsz, char *err,
                       size_t errsz)
{
	static const char *defaults[] = {"enable.auto.commit", "false",
	                                 "isolation.level", "read_committed",
	                                 "enable.partition.eof", "true", NULL};
	memset(out, 0, sizeof *out);
	*txn = '\0';
	rd_kafka_t *c = kafka_client_new(l->cfg, RD_KAFKA_CONSUMER, defaults,
	                                 "cannot create the progress reader", err, errsz);
	if (!c)
		return -1;
	int64_t lo = 0, hi = 0;
	int rc = -1;
	rd_kafka_topic_t *t = NULL;
	rd_kafka_resp_err_t e =
		rd_kafka_query_watermark_offsets(c, l->progress, l->marker_part, &lo, &hi, 10000);
	if (!e && !(t = rd_kafka_topic_new(c, l->progress, NULL)))
		e = rd_kafka_last_error();
	if (e) {
		snprintf(err, errsz, "reading %s [%d]: %s", l->progress, l->marker_part,
		         rd_kafka_err2str(e));
		goto done;
	}
	/* each transaction adds a marker and a commit or abort record, and
	 * compaction keeps the last marker: it is near the end, further back
	 * only when other lanes share the partition or after many aborts */
	for (int64_t back = 64; rc != 0; back *= 8) {
		int64_t from = hi - back > lo ? hi - back : lo;
		store_marker found;
		if (scan_markers(l, t, from, &found, txn, txnsz, err, errsz) != 0)
			goto done;
		if (found.seq > 0 || from == lo) {
			*out = found;
			rc = 0;
		}
	}
done:
	if (t)
		rd_kafka_topic_destroy(t);
	rd_kafka_destroy(c);
	return rc;
}

int lane_fenced_error(rd_kafka_resp_err_t e) { return txn_fenced_error(e); }

/* The marker partition's last stable offset (c reads read_committed: its
 * ListOffsets asks for that) and high watermark (u: read_uncommitted).
 * Returns 0, or -1 with err. */
static int stable_offsets(lane *l, rd_kafka_t *c, rd_kafka_t *u, int64_t *lso, int64_t *hw,
                          char *err, size_t errsz)
{
	int64_t lo;
	rd_kafka_resp_err_t e =
		rd_kafka_query_watermark_offsets(u, l->progress, l->marker_part, &lo, hw, 10000);
	if (!e)
		e = rd_kafka_query_watermark_offsets(c, l->progress, l->marker_part, &lo, lso, 10000);
	if (e)
		snprintf(err, errsz, "the offsets of %s [%d]: %s", l->progress, l->marker_part,
		         rd_kafka_err2str(e));
	return e ? -1 : 0;
}

/* The transactional.ids named by the markers of this lane's key in
 * [from, to) of the marker partition, read uncommitted: those of open
 * transactions. Returns how many (at most max) into ids, or -1 with err. */
static int open_txn_ids(lane *l, rd_kafka_t *u, int64_t from, int64_t to, char ids[][400],
                        int max, char *err, size_t errsz)
{
	rd_kafka_topic_t *t = rd_kafka_topic_new(u, l->progress, NULL);
	if (!t || rd_kafka_consume_start(t, l->marker_part, from) != 0) {
		snprintf(err, errsz, "reading %s [%d]: %s", l->progress, l->marker_part,
		         rd_kafka_err2str(rd_kafka_last_error()));
		if (t)
			rd_kafka_topic_destroy(t);
		return -1;
	}
	int n = 0, rc = -1;
	int64_t until = clock_ms() + 30000;
	rd_kafka_message_t *m;
	while ((m = next_record(l, t, until, err, errsz))) {
		int end = m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF || (!m->err && m->offset + 1 >= to);
		char id[400];
		if (own_key(l, m) && m->payload &&
		    marker_txn_of(m->payload, m->len, id, sizeof id) == 0) {
			int known = 0;
			for (int i = 0; i < n && !known; i++)
				known = strcmp(ids[i], id) == 0;
			if (!known && n < max)
				snprintf(ids[n++], sizeof ids[0], "%s", id);
		}
		rd_kafka_message_destroy(m);
		if (end) {
			rc = n;
			break;
		}
	}
	rd_kafka_consume_stop(t, l->marker_part);
	rd_kafka_topic_destroy(t);
	return rc;
}

/* The transactional.ids this process fenced lately, so that the lanes
 * taking a replica's partitions together fence it once, not once each. */
#define FENCED_RECENT 16
#define FENCED_FOR_MS 10000
static struct {
	char id[400];
	int64_t at;
} fenced_recent[FENCED_RECENT];
static pthread_mutex_t fenced_mu = PTHREAD_MUTEX_INITIALIZER;

/* Whether id was fenced in the last FENCED_FOR_MS; note (1) that it is now. */
static int fenced_lately(const char *id, int note)
{
	int64_t now = clock_ms();
	size_t slot = 0; /* id's, or the oldest */
	int found = 0;
	pthread_mutex_lock(&fenced_mu);
	for (size_t i = 0; i < FENCED_RECENT; i++) {
		if (strcmp(fenced_recent[i].id, id) == 0) {
			found = now - fenced_recent[i].at < FENCED_FOR_MS;
			slot = i;
			break;
		}
		if (fenced_recent[i].at < fenced_recent[slot].at)
			slot = i;
	}
	if (note) {
		snprintf(fenced_recent[slot].id, sizeof fenced_recent[slot].id, "%s", id);
		fenced_recent[slot].at = now;
	}
	pthread_mutex_unlock(&fenced_mu);
	return found;
}

/* After the marker is read: the transactional.id that wrote it (txn), if
 * another replica's, is fenced. Its transaction still open may hold
 * forwards of this partition without a marker of it: a lane waits for
 * its marker on the broker only in its first run after taking a partition
 * (send_run), and once a marker of its own is committed there, the next
 * owner finds its transactional.id in it. Unfenced, such a transaction
 * would hold every read_committed consumer of those forward partitions
 * until Kafka's transaction.timeout.ms. A replica alive that lost the
 * partition loses its open transaction (its lanes send their runs again).
 * Returns 0, or -1 with err (tried again). */
static int fence_last(lane *l, const char *txn, char *err, size_t errsz)
{
	if (!*txn || strcmp(txn, txn_id(l->txn)) == 0 || strcmp(txn, l->txn_id) == 0 ||
	    fenced_lately(txn, 0))
		return 0;
	int refused;
	if (txn_fence(l->cfg, txn, &refused, err, errsz) != 0) {
		if (!refused)
			return -1;
		log_warn("lane %d of %s: %s: a transaction of it left open is waited out instead "
		         "(docs/kafka.md, Kafka ACLs)", TP_ARG(l->own.tp), err);
		return 0;
	}
	fenced_lately(txn, 1);
	log_info("lane %d of %s: fenced transactional.id %s, which wrote the partition's last "
	         "progress marker (what it left open is aborted)", TP_ARG(l->own.tp), txn);
	return 0;
}

/* Wait up to ms for the marker partition's stable offset to reach hw.
 * Returns 1 when it did, 0 when not yet, -1 with err. */
static int wait_stable(lane *l, rd_kafka_t *c, rd_kafka_t *u, int64_t hw, int64_t ms, char *err,
                       size_t errsz)
{
	int64_t until = clock_ms() + ms;
	for (;;) {
		int64_t lso, now_hw;
		if (stable_offsets(l, c, u, &lso, &now_hw, err, errsz) != 0)
			return -1;
		if (lso >= hw)
			return 1;
		if (clock_ms() >= until || lane_is_stopping(l, 0))
			return 0;
		lane_pause_ms(l, 100);
	}
}

/* Before the marker is read: no transaction that may hold a later marker of
 * the partition is open. The per-partition transactional.id of hubs before
 * one producer per replica is fenced (once: a rolling upgrade); then a
 * transaction still open in the marker partition after a short grace is
 * fenced through the transactional.id its markers name (a replica paused
 * or cut off that lost the partition: its producer is fenced for all its
 * partitions, and makes a new one if it lives), and waited for. Returns 0,
 * or -1 with err (tried again). */
static int fence_previous(lane *l, int *old_fenced, char *err, size_t errsz)
{
	int refused;
	if (!*old_fenced) {
		if (txn_fence(l->cfg, l->txn_id, &refused, err, errsz) == 0) {
			*old_fenced = 1;
			log_info("lane %d of %s: fenced transactional.id %s, a hub of one producer per "
			         "partition's (what it left open is aborted)", TP_ARG(l->own.tp), l->txn_id);
		} else if (refused) {
			log_warn("lane %d of %s: %s: a transaction a hub of one producer per partition "
			         "left open is waited out instead (docs/kafka.md, Kafka ACLs)",
			         TP_ARG(l->own.tp), err);
			*old_fenced = 1;
		} else {
			return -1;
		}
	}
	static const char *rc_defaults[] = {"enable.auto.commit", "false", "isolation.level",
	                                    "read_committed", NULL};
	static const char *ru_defaults[] = {"enable.auto.commit", "false", "isolation.level",
	                                    "read_uncommitted", "enable.partition.eof", "true", NULL};
	rd_kafka_t *c = kafka_client_new(l->cfg, RD_KAFKA_CONSUMER, rc_defaults,
	                                 "cannot create the progress reader", err, errsz);
	rd_kafka_t *u = c ? kafka_client_new(l->cfg, RD_KAFKA_CONSUMER, ru_defaults,
	                                     "cannot create the progress reader", err, errsz)
	                  : NULL;
	int rc = -1;
	int64_t lso, hw;
	if (!u || stable_offsets(l, c, u, &lso, &hw, err, errsz) != 0)
		goto done;
	int w = lso >= hw ? 1 : wait_stable(l, c, u, hw, FENCE_GRACE_MS, err, errsz);
	if (w == 0) {
		char ids[8][400];
		int n = open_txn_ids(l, u, lso, hw, ids, 8, err, errsz);
		if (n < 0)
			goto done;
		for (int i = 0; i < n; i++) {
			if (strcmp(ids[i], txn_id(l->txn)) == 0)
				continue; /* this replica's own: it ends within an interval */
			if (txn_fence(l->cfg, ids[i], &refused, err, errsz) != 0)
				goto done;
			log_warn("lane %d of %s: fenced transactional.id %s, whose transaction with a "
			         "marker of the partition was still open in %s [%d] %d ms after the "
			         "partition was taken: it was aborted", TP_ARG(l->own.tp), ids[i],
			         l->progress, l->marker_part, FENCE_GRACE_MS);
		}
		w = wait_stable(l, c, u, hw, 30000, err, errsz);
	}
	if (w == 0)
		snprintf(err, errsz, "a transaction with records in %s [%d] is still open (before "
		         "offset %lld): waiting for it to end", l->progress, l->marker_part,
		         (long long)hw);
	rc = w == 1 ? 0 : -1;
done:
	if (u)
		rd_kafka_destroy(u);
	if (c)
		rd_kafka_destroy(c);
	return rc;
}

/* The lane ends: fenced, or failed for good. */
void lane_end_with(lane *l, int fenced, const char *why)
{
	pthread_mutex_lock(&l->mu);
	l->fenced = fenced;
	snprintf(l->why, sizeof l->why, "%s", why);
	pthread_mutex_unlock(&l->mu);
}

/* A failed attempt at taking the partition: err, about topic (NULL:
 * none), for lane_taken(). Returns whether err differs from the last one. */
static int take_failed(lane *l, const char *err, const char *topic)
{
	pthread_mutex_lock(&l->mu);
	int changed = strcmp(l->take_err, err) != 0;
	snprintf(l->take_err, sizeof l->take_err, "%s", err);
	snprintf(l->take_topic, sizeof l->take_topic, "%s", topic ? topic : "");
	pthread_mutex_unlock(&l->mu);
	return changed;
}

/* How long TXHUB_FAILPOINT=recover_late holds a lane's marker at most. */
#define RECOVER_LATE_MS 15000

/* The crash tests' failpoint (as lane.c's): with TXHUB_FAILPOINT=
 * recover_late in its environment the lane of a partition taken again
 * (epoch > 1) reads its marker only once the intake applied past the
 * offset the partition was taken at (at most RECOVER_LATE_MS), so that a
 * test sees what a lane that comes late after a database loss makes of
 * it: the lost offsets read again before the marker (store_recover_forwards).
 * Never set in production. Returns 0, or -1 (err) when stopping. */
static int recover_late(lane *l, char *err, size_t errsz)
{
	if (!l->failpoint || strcmp(l->failpoint, "recover_late") != 0 || l->own.epoch <= 1)
		return 0;
	log_warn("lane %d of %s: failpoint recover_late: the marker waits for the intake to apply "
	         "past offset %lld", TP_ARG(l->own.tp), (long long)l->own.from);
	for (int64_t until = clock_ms() + RECOVER_LATE_MS; clock_ms() < until;) {
		store_partition_row row;
		if (store_partition_rows(l->st, &l->own.tp, 1, &row, err, errsz) == STORE_OK &&
		    row.next_offset > l->own.from)
			break;
		if (lane_is_stopping(l, 0)) {
			snprintf(err, errsz, "stopping");
			return -1;
		}
		lane_pause_ms(l, 50);
	}
	log_warn("lane %d of %s: failpoint recover_late: reading the marker", TP_ARG(l->own.tp));
	return 0;
}

/* Take the partition: fence the previous owner, read its marker, and mark
 * what it sent. Retries (with backoff) while Kafka or PostgreSQL are away
 * or refuse (each distinct error logged as a warning once, repeats at
 * debug: forward.c alerts when it goes on); returns 0, or -1 when
 * stopping, fenced or failed for good. */
int lane_take_partition(lane *l)
{
	char err[512];
	int fenced = 0, old_fenced = 0, ensured = 0;
	for (int attempt = 1;; attempt++) {
		store_marker marker = {0};
		char last_txn[400];
		int64_t marked = 0;
		int mismatch = 0;
		store_rc rc = STORE_RETRY;
		const char *about = NULL; /* the topic a failure was about */
		if (!ensured && ensure_progress(l, err, sizeof err) == 0)
			ensured = 1;
		if (!ensured) {
			about = l->progress; /* (err says why) */
		} else if (!fenced && fence_previous(l, &old_fenced, err, sizeof err) != 0) {
			about = l->progress;
		} else if ((fenced = 1) && !l->st && !(l->st = store_connect(l->cfg, err, sizeof err))) {
			/* (err says why) */
		} else if (store_ensure(l->st, err, sizeof err) != STORE_OK) {
			/* (err says why) */
		} else if (recover_late(l, err, sizeof err) != 0 ||
		           read_marker(l, &marker, last_txn, sizeof last_txn, err, sizeof err) != 0 ||
		           fence_last(l, last_txn, err, sizeof err) != 0) {
			about = l->progress;
		} else {
			rc = store_recover_forwards(l->st, &l->own, &marker, &marked, &mismatch, l->origin,
			                            err, sizeof err);
		}
		if (rc == STORE_OK) {
			pthread_mutex_lock(&l->mu);
			l->taken = 1;
			pthread_mutex_unlock(&l->mu);
			/* from the first pending row on: after the marking, none is
			 * left at or below a marker this database wrote */
			l->done_seq = 0;
			l->order_seen_seq = 0; /* (the blockers are read before the first run) */
			l->marker_ours = 0;   /* (send_run waits for the first one on the broker) */
			marker_dead_init(&l->dead, mismatch ? NULL : &marker);
			if (config_order_by_key(l->cfg) && !l->order && !(l->order = order_new())) {
				snprintf(err, sizeof err, "out of memory");
				lane_end_with(l, 0, err);
				return -1;
			}
			/* and the failures PostgreSQL recorded that no marker listed
			 * (a lane ended between the two) */
			int64_t failed[STORE_MARKER_DEAD_MAX];
			size_t nfailed = 0;
			if (store_failed_seqs(l->st, l->own.tp, failed, STORE_MARKER_DEAD_MAX,
			                      &nfailed, err, sizeof err) != STORE_OK)
				log_warn("lane %d of %s: reading the failed forwards: %s (the markers list "
				         "only those this lane sees fail)", TP_ARG(l->own.tp), err);
			for (size_t i = 0; i < nfailed; i++)
				marker_dead_add(&l->dead, failed[i]);
			pthread_mutex_lock(&l->mu);
			l->covered = 0;
			if (l->want_seq < 1)
				l->want_seq = 1; /* look for what is due */
			pthread_mutex_unlock(&l->mu);
			if (mismatch)
				log_error("lane %d of %s: the progress marker in %s (sequence %lld, row %s/%s, "
				          "origin %s) was not written for this database (origin %s), or for "
				          "an earlier history of it (restored from a backup?): nothing is "
				          "taken as forwarded, every pending row of the partition is "
				          "forwarded again (some may be duplicates)", TP_ARG(l->own.tp),
				          l->progress, (long long)marker.seq, marker.biz_id,
				          marker.message_key, marker.origin, l->origin);
			if (l->after_rewind && marked > 0) /* (the others: assign_seqs counts them) */
				metrics_forwards_after_rewind((uint64_t)marked, 0);
			log_info("lane %d of %s: taken at epoch %lld (transactional.id %s); progress marker at "
			         "sequence %lld, %lld forward(s) of the previous owner found sent%s",
			         TP_ARG(l->own.tp), (long long)l->own.epoch, txn_id(l->txn),
			         (long long)marker.seq, (long long)marked,
			         l->after_rewind ? " (after PostgreSQL lost transactions: counted in "
			                           "txhub_forwards_after_rewind_total{outcome=\"already_sent\"})"
			                         : "");
			return 0;
		}
		if (rc == STORE_FENCED) {
			lane_end_with(l, 1, err);
			return -1;
		}
		if (lane_is_stopping(l, 0))
			return -1;
		int64_t d = backoff_delay(attempt, 200, 5000, backoff_random());
		int changed = take_failed(l, err, about);
		log_msg(changed ? LOG_WARN : LOG_DEBUG,
		        "lane %d of %s: taking the partition: %s; retrying in %lld ms%s", TP_ARG(l->own.tp), err,
		        (long long)d, changed ? " (the same error again is logged at debug)" : "");
		lane_pause_ms(l, d);
	}
}
