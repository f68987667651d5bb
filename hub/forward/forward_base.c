/* forward_base.c: what forward.c and its parts stand on: the items in
 * flight and their lists, a forward that failed, a partition's lane, the
 * counters of reports written, whether the producer is failing. */
#include "forward_int.h"

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "clock.h"
#include "lane.h"
#include "metrics.h"
#include "store.h"

void forward_item_free(fw_item *it)
{
	if (!it)
		return;
	if (it->queued) {
		store_forward_free(it->queued);
		free(it->queued);
	}
	free(it->biz_id);
	free(it->message_key);
	free(it->error);
	free(it);
}

void forward_free_queued(void *it) { forward_item_free(it); }

int forward_list_add(fw_list *l, fw_item *it)
{
	fw_item **n = array_grow(l->items, &l->cap, l->n + 1, sizeof *n);
	if (!n)
		return -1;
	l->items = n;
	l->items[l->n++] = it;
	return 0;
}

void forward_list_free(fw_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		forward_item_free(l->items[i]);
	free(l->items);
	memset(l, 0, sizeof *l);
}

/* Mark it failed, with why. */
void forward_failed(fw_item *it, const char *topic, int refused, rd_kafka_resp_err_t e)
{
	it->ok = 0;
	if ((it->error = malloc(FORWARD_ERROR_MAX)))
		forward_describe_failure(it->error, FORWARD_ERROR_MAX, topic, refused, e);
}

lane *forward_lane_of(forward *fw, tp_key partition)
{
	for (size_t i = 0; i < fw->nlanes; i++)
		if (lane_tp(fw->lanes[i]) == partition)
			return fw->lanes[i];
	return NULL;
}

/* The metrics of the reports in l, nfailed of which ended the forward for
 * good: one update of the shared counters for all of them. */
void forward_count_reports(const fw_list *l, const store_forward_list *failed)
{
	metrics_forwards m;
	memset(&m, 0, sizeof m);
	int64_t now = clock_ms();
	for (size_t i = 0; i < l->n; i++) {
		const fw_item *it = l->items[i];
		if (it->requeue || it->hold)
			continue;
		if (!it->ok) {
			metrics_forwards_count(&m, it->tenant, METRICS_FW_RETRIED, 1);
			continue;
		}
		metrics_forwards_count(&m, it->tenant, METRICS_FW_SENT, 1);
		if (it->produced_ms)
			metrics_forwards_observe(m.produce_bucket, &m.produce_count, &m.produce_sum_us,
			                         now - it->produced_ms);
		if (it->decided_ms)
			metrics_forwards_observe(m.commit_bucket, &m.commit_count, &m.commit_sum_us,
			                         now - it->decided_ms);
	}
	/* those that failed for good were counted as retried above */
	for (size_t i = 0; i < failed->n; i++) {
		metrics_forwards_count(&m, failed->items[i].tenant, METRICS_FW_RETRIED, -1);
		metrics_forwards_count(&m, failed->items[i].tenant, METRICS_FW_FAILED, 1);
	}
	metrics_add_forwards(&m);
	metrics_tally_free(&m.outcomes);
}

int64_t forward_failing(forward *fw, char *why, size_t whysz)
{
	pthread_mutex_lock(&fw->mu);
	int64_t since = fw->failing_since;
	snprintf(why, whysz, "%s", fw->failing);
	pthread_mutex_unlock(&fw->mu);
	return since;
}
