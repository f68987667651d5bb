/* lane_record.c: what lane.c and its parts stand on: pausing, a topic's
 * partition count, recording a run's results in PostgreSQL, whether the
 * lane has taken its partition. */
#include "lane_int.h"

#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alert.h"
#include "backoff.h"
#include "clock.h"
#include "forward_record.h"
#include "log.h"
#include "metrics.h"
#include "store.h"

int lane_is_stopping(lane *l, int past_grace)
{
	pthread_mutex_lock(&l->mu);
	int s = l->stopping && (!past_grace || clock_ms() >= l->stop_by);
	pthread_mutex_unlock(&l->mu);
	return s;
}

/* Sleep ms, or until asked to stop. */
void lane_pause_ms(lane *l, int64_t ms)
{
	struct timespec ts = clock_deadline(ms);
	pthread_mutex_lock(&l->mu);
	while (!l->stopping)
		if (pthread_cond_timedwait(&l->cv, &l->mu, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&l->mu);
}

/* The number of partitions of topic as the broker has it: 0 when it has
 * no such topic, -1 with err when it cannot be asked. */
int lane_partitions_of(rd_kafka_t *rk, const char *topic, char *err, size_t errsz)
{
	rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_resp_err_t e = t ? rd_kafka_metadata(rk, 0, t, &md, 10000)
	                          : rd_kafka_last_error();
	int n = -1;
	if (e) {
		snprintf(err, errsz, "metadata of %s: %s", topic, rd_kafka_err2str(e));
	} else if (md->topic_cnt != 1) {
		snprintf(err, errsz, "metadata of %s: no answer for it", topic);
	} else if (md->topics[0].err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
		n = 0;
	} else if (md->topics[0].err && md->topics[0].err != RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE) {
		snprintf(err, errsz, "metadata of %s: %s", topic, rd_kafka_err2str(md->topics[0].err));
	} else {
		n = md->topics[0].partition_cnt;
	}
	if (md)
		rd_kafka_metadata_destroy(md);
	if (t)
		rd_kafka_topic_destroy(t);
	return n;
}

/* ---- recording results in PostgreSQL ---- */

/* Record the results of items[0..n): sent, or (failed[i] set) a failed
 * attempt that loses its sequence. Retries while PostgreSQL is away: what
 * Kafka committed stays committed, and a new owner marks it sent from the
 * marker anyway. Returns 0, or -1 when stopping. */
int lane_record(lane *l, const store_forward *items, size_t n, const rd_kafka_resp_err_t *failed,
                int held)
{
	char err[512];
	store_delivery *d = calloc(n ? n : 1, sizeof *d);
	char (*why)[FORWARD_ERROR_MAX] = calloc(n ? n : 1, sizeof *why);
	size_t nfailed = 0;
	int rc = -1;
	if (!d || !why)
		goto done; /* committed ones are marked by the next owner's recovery */
	for (size_t i = 0; i < n; i++) {
		const store_forward *f = &items[i];
		d[i].biz_id = f->biz_id;
		d[i].message_key = f->message_key;
		d[i].tp = f->src_tp;
		if (held) { /* forward.order = key: not sent, held for its key */
			d[i].hold = 1;
			continue;
		}
		d[i].ok = !failed || !failed[i];
		/* a committed run: its rows are covered by the mark, not written */
		d[i].fwd_seq = !failed ? f->fwd_seq : 0;
		if (!d[i].ok) {
			forward_describe_failure(why[i], sizeof why[i], f->topic, 0, failed[i]);
			d[i].error = why[i];
			d[i].retry_in_ms = backoff_delay(f->send_attempts + 1, l->cfg->forward_backoff_ms,
			                                 l->cfg->forward_backoff_max_ms, backoff_random());
			nfailed++;
		}
	}
	/* a committed run (items in sequence order, none failed): every pending
	 * row of the partition up to its last sequence is sent (the lane reads
	 * them in sequence order, and failed ones were recorded first) */
	store_mark mark = {l->own.tp, n > 0 ? items[n - 1].fwd_seq : 0};
	size_t nmarks = !failed && !held && mark.upto > 0 ? 1 : 0;
	for (int attempt = 1;; attempt++) {
		store_forward_list gave_up = {0};
		if (store_ensure(l->st, err, sizeof err) == STORE_OK &&
		    store_record_deliveries(l->st, &l->own, 1, d, n, (int)l->cfg->forward_max_attempts,
		                            &mark, nmarks, &gave_up, err, sizeof err) == STORE_OK) {
			for (size_t i = 0; i < gave_up.n; i++) {
				const store_forward *g = &gave_up.items[i];
				log_about about = {g->biz_id, g->message_key, l->own.tp, g->trace_id};
				log_msg_about(LOG_ERROR, "lane", &about, "forwarding to %s failed %d times: "
				              "send_status failed", g->topic, g->send_attempts);
				alert_raise_traced(l->al, "send_failed", g->biz_id, g->message_key,
				                   g->send_attempts, g->topic, NULL, g->trace_id);
			}
			metrics_forwards m;
			memset(&m, 0, sizeof m);
			for (size_t i = 0; i < n; i++)
				if (!d[i].ok && !d[i].hold)
					metrics_forwards_count(&m, items[i].tenant, METRICS_FW_RETRIED, 1);
			for (size_t i = 0; i < gave_up.n; i++) {
				metrics_forwards_count(&m, gave_up.items[i].tenant, METRICS_FW_RETRIED, -1);
				metrics_forwards_count(&m, gave_up.items[i].tenant, METRICS_FW_FAILED, 1);
			}
			pthread_mutex_lock(&l->mu);
			l->stats.failed_attempts += nfailed;
			l->stats.failed_final += gave_up.n;
			pthread_mutex_unlock(&l->mu);
			if (nfailed)
				metrics_add_forwards(&m);
			metrics_tally_free(&m.outcomes);
			store_forward_list_clear(&gave_up);
			rc = 0;
			break;
		}
		store_forward_list_clear(&gave_up);
		if (lane_is_stopping(l, 1))
			break;
		int64_t wait = backoff_delay(attempt, 200, 5000, backoff_random());
		log_warn("lane %d of %s: recording forwards: %s; retrying in %lld ms", TP_ARG(l->own.tp), err,
		         (long long)wait);
		lane_pause_ms(l, wait);
	}
done:
	free(d);
	free(why);
	return rc;
}

int lane_taken(lane *l, char *why, size_t whysz, char *topic, size_t topicsz)
{
	pthread_mutex_lock(&l->mu);
	int taken = l->taken;
	snprintf(why, whysz, "%s", l->ended && !taken && l->why[0] ? l->why : l->take_err);
	snprintf(topic, topicsz, "%s", l->take_topic);
	pthread_mutex_unlock(&l->mu);
	return taken;
}
