/* bench_kafka.c: the bench's Kafka clients (see bench_int.h): clients with
 * the hub's settings, its topics, and producing records. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_int.h"
#include "kafka.h"

/* ---- Kafka helpers ---- */

rd_kafka_t *bench_client(const txhub_config *cfg, rd_kafka_type_t type,
                         const char *const *defaults, rd_kafka_conf_t *conf)
{
	char err[512];
	if (!conf && !(conf = kafka_conf_new(cfg, defaults, err, sizeof err))) {
		fprintf(stderr, "txhub bench: %s\n", err);
		return NULL;
	}
	rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof err);
	if (!rk) {
		fprintf(stderr, "txhub bench: %s\n", err);
		rd_kafka_conf_destroy(conf);
	}
	return rk;
}

/* Create topic with o->partitions partitions unless it exists. The embedded
 * broker answers no admin requests: its topics are created on first use,
 * which is said and accepted. */
void bench_create_topic(rd_kafka_t *rk, const char *topic, int partitions)
{
	char err[256];
	rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, -1, err, sizeof err);
	rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
	rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
	rd_kafka_AdminOptions_set_request_timeout(ao, 3000, err, sizeof err);
	rd_kafka_CreateTopics(rk, &nt, 1, ao, q);
	rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 4000);
	const char *why = ev ? NULL : "no answer";
	if (ev && rd_kafka_event_error(ev))
		why = rd_kafka_event_error_string(ev);
	const rd_kafka_CreateTopics_result_t *res = ev ? rd_kafka_event_CreateTopics_result(ev) : NULL;
	size_t n = 0;
	const rd_kafka_topic_result_t **tr = res ? rd_kafka_CreateTopics_result_topics(res, &n) : NULL;
	if (!why && n == 1 && rd_kafka_topic_result_error(tr[0]) &&
	    rd_kafka_topic_result_error(tr[0]) != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
		why = rd_kafka_topic_result_error_string(tr[0]);
	if (why)
		fprintf(stderr, "txhub bench: creating %s with %d partitions: %s (using it as the "
		                "broker makes it)\n", topic, partitions, why);
	if (ev)
		rd_kafka_event_destroy(ev);
	rd_kafka_AdminOptions_destroy(ao);
	rd_kafka_queue_destroy(q);
	rd_kafka_NewTopic_destroy(nt);
}

/* The partitions of topic and their high watermarks now (the verifier reads
 * from there). Returns the partition count (0 on failure); *high is
 * malloc'd. */
int bench_topic_ends(rd_kafka_t *rk, const char *topic, int64_t **high)
{
	const rd_kafka_metadata_t *md = NULL;
	rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
	int n = 0;
	for (int tries = 0; tries < 50 && n == 0; tries++) {
		if (rd_kafka_metadata(rk, 0, t, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
			if (md->topic_cnt == 1 && !md->topics[0].err)
				n = md->topics[0].partition_cnt;
			rd_kafka_metadata_destroy(md);
		}
		if (n == 0)
			usleep(100000);
	}
	rd_kafka_topic_destroy(t);
	*high = calloc((size_t)(n ? n : 1), sizeof **high);
	for (int p = 0; p < n && *high; p++) {
		int64_t lo, hi;
		(*high)[p] = rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi, 5000) ? 0 : hi;
	}
	return *high ? n : 0;
}

/* How many records the broker deleted from topic's n partitions past
 * start[] (their high watermarks when the run began): its retention ran
 * ahead of the hub, and a "lost" verdict may be the broker's. */
int64_t bench_deleted_since(rd_kafka_t *rk, const char *topic, const int64_t *start, int n)
{
	int64_t deleted = 0;
	for (int p = 0; start && p < n; p++) {
		int64_t lo, hi;
		if (rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi, 5000) ==
		        RD_KAFKA_RESP_ERR_NO_ERROR && lo > start[p])
			deleted += lo - start[p];
	}
	return deleted;
}

/* ---- the generator's producer ---- */

_Atomic int64_t bench_produce_errors;

void bench_gen_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	(void)opaque;
	if (m->err)
		atomic_fetch_add(&bench_produce_errors, 1);
}

void bench_produce(rd_kafka_t *rk, const char *topic, const char *key, const char *value)
{
	for (;;) {
		rd_kafka_resp_err_t e = rd_kafka_producev(
			rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, strlen(key)),
			RD_KAFKA_V_VALUE((void *)value, strlen(value)), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
			RD_KAFKA_V_END);
		if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
			if (e)
				atomic_fetch_add(&bench_produce_errors, 1);
			return;
		}
		rd_kafka_poll(rk, 10);
	}
}
