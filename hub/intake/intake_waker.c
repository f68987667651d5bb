/* intake_waker.c: see intake_waker.h. */
#include "intake_waker.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

struct intake_waker {
	rd_kafka_t *rk;
	pthread_t thread;
	pthread_mutex_t mu; /* guards what follows */
	pthread_cond_t cv;
	int stopping;
	int poked;          /* a question to ask */
	char topic[256];
	int32_t partition;
};

static void *run(void *arg)
{
	intake_waker *w = arg;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->poked && !w->stopping)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->stopping)
			break;
		char topic[sizeof w->topic];
		memcpy(topic, w->topic, sizeof topic);
		int32_t partition = w->partition;
		pthread_mutex_unlock(&w->mu);
		int64_t lo, hi;
		rd_kafka_resp_err_t e =
			rd_kafka_query_watermark_offsets(w->rk, topic, partition, &lo, &hi, 2000);
		if (e)
			log_debug("intake: waking the fetcher of %s [%d]: %s", topic, (int)partition,
			          rd_kafka_err2str(e));
		struct timespec gap = {0, INTAKE_WAKER_GAP_MS * 1000000L};
		nanosleep(&gap, NULL);
		pthread_mutex_lock(&w->mu);
		w->poked = 0; /* (pokes meanwhile: the question just asked served them) */
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

intake_waker *intake_waker_new(rd_kafka_t *rk)
{
	intake_waker *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	w->rk = rk;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (pthread_create(&w->thread, NULL, run, w) != 0) {
		pthread_mutex_destroy(&w->mu);
		pthread_cond_destroy(&w->cv);
		free(w);
		return NULL;
	}
	return w;
}

void intake_waker_poke(intake_waker *w, const char *topic, int32_t partition)
{
	if (!w || !topic)
		return;
	pthread_mutex_lock(&w->mu);
	if (!w->poked) {
		w->poked = 1;
		snprintf(w->topic, sizeof w->topic, "%s", topic);
		w->partition = partition;
		pthread_cond_signal(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
}

void intake_waker_free(intake_waker *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stopping = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
}

int intake_waker_due(int batch_full, size_t queued, size_t batch_max)
{
	return batch_full && queued < 2 * batch_max;
}
