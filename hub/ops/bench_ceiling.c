/* bench_ceiling.c: the bench's two ceilings (see bench_int.h): PostgreSQL
 * alone through the hub's own statements, and Kafka alone with the hub's
 * forward-producer settings. */
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_int.h"
#include "clock.h"
#include "envelope.h"
#include "forward.h"
#include "store.h"
#include "topics.h"

/* ---- ceilings ---- */

/* Delivery reports written on a connection of their own, as batches of
 * committed messages come out of store_apply. */
typedef struct batch_node {
	struct batch_node *next;
	store_forward_list l;
} batch_node;

typedef struct {
	store *st;
	const owned_part *own;
	size_t nown;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	batch_node *head, *tail;
	int closed, failed;
} deliverer;

static void *deliver(void *arg)
{
	deliverer *d = arg;
	char err[512];
	for (;;) {
		pthread_mutex_lock(&d->mu);
		while (!d->head && !d->closed)
			pthread_cond_wait(&d->cv, &d->mu);
		batch_node *b = d->head;
		if (b && !(d->head = b->next))
			d->tail = NULL;
		pthread_mutex_unlock(&d->mu);
		if (!b)
			return NULL;
		/* as the hub records them: every one delivered, so each partition's
		 * mark moves to its highest sequence, and no row is written */
		store_delivery *r = calloc(b->l.n ? b->l.n : 1, sizeof *r);
		store_mark *mk = calloc(b->l.n ? b->l.n : 1, sizeof *mk);
		size_t nmk = 0;
		for (size_t i = 0; r && mk && i < b->l.n; i++) {
			const store_forward *f = &b->l.items[i];
			r[i].biz_id = f->biz_id;
			r[i].message_key = f->message_key;
			r[i].tp = f->src_tp;
			r[i].ok = 1;
			r[i].fwd_seq = f->fwd_seq;
			size_t j = 0;
			while (j < nmk && mk[j].tp != f->src_tp)
				j++;
			if (j == nmk)
				mk[nmk++] = (store_mark){f->src_tp, 0};
			if (f->fwd_seq > mk[j].upto)
				mk[j].upto = f->fwd_seq;
		}
		if (!r || !mk ||
		    store_record_deliveries(d->st, d->own, d->nown, r, b->l.n, 15, mk, nmk, NULL, err,
		                            sizeof err) != STORE_OK) {
			fprintf(stderr, "txhub bench: PostgreSQL ceiling: deliveries: %s\n",
			        r && mk ? err : "out of memory");
			d->failed = 1;
		}
		free(r);
		free(mk);
		store_forward_list_clear(&b->l);
		free(b);
	}
}

/* The envelopes of the ceiling's n transactions (prepare and commit each),
 * parsed, in the order a hub would read them: the pairs of a partition
 * next to each other. */
static store_record *ceiling_records(const opts *o, const char *topic, int64_t n, int parts,
                                     char ***texts)
{
	store_record *recs = calloc((size_t)(2 * n), sizeof *recs);
	*texts = calloc((size_t)(2 * n), sizeof **texts);
	char *payload = malloc((size_t)o->payload_bytes + 1);
	if (!recs || !*texts || !payload) {
		free(payload);
		return recs;
	}
	memset(payload, 'x', (size_t)o->payload_bytes);
	payload[o->payload_bytes] = '\0';
	int64_t *offset = calloc((size_t)parts, sizeof *offset);
	for (int64_t i = 0; offset && i < n; i++) {
		for (int s = 0; s < 2; s++) {
			size_t len = strlen(payload) + 300;
			char *t = (*texts)[2 * i + s] = malloc(len);
			if (!t)
				continue;
			if (s == 0)
				snprintf(t, len, "{\"type\":\"prepare\",\"biz_id\":\"bench-ceiling-%s\","
				                 "\"message_key\":\"%lld\",\"payload\":\"%s\",\"forward\":"
				                 "{\"topic\":\"%s\"}}", o->run, (long long)i, payload,
				         o->forward_topic);
			else
				snprintf(t, len, "{\"type\":\"commit\",\"biz_id\":\"bench-ceiling-%s\","
				                 "\"message_key\":\"%lld\"}", o->run, (long long)i);
			store_record *r = &recs[2 * i + s];
			r->src_topic = topic_intern(topic);
			r->partition = (int32_t)(i % parts);
			r->tp = tp_of(topic, r->partition);
			r->offset = offset[r->partition]++;
			r->value = t;
			r->value_len = strlen(t);
			r->valid = envelope_parse(t, r->value_len, 1 << 24, &r->env, r->reason,
			                          sizeof r->reason) == 0;
		}
	}
	free(offset);
	free(payload);
	return recs;
}

static void ceiling_cleanup(const txhub_config *cfg, const opts *o, const char *topic)
{
	PGconn *c = PQconnectdb(cfg->pg);
	char biz[96];
	snprintf(biz, sizeof biz, "bench-ceiling-%s", o->run);
	const char *p1[1] = {biz}, *p2[1] = {topic};
	PQclear(PQexecParams(c, "DELETE FROM txhub.message_rows WHERE biz_id = $1", 1, NULL, p1, NULL,
	                     NULL, 0));
	PQclear(PQexecParams(c, "DELETE FROM txhub.partitions WHERE topic = $1", 1, NULL, p2, NULL,
	                     NULL, 0));
	PQfinish(c);
}

/* PostgreSQL alone: transactions per second through the hub's own apply
 * and delivery statements, batches of intake.batch_max records, on two
 * connections. Rows of a control topic of its own, deleted afterwards. */
double bench_ceiling_pg(const txhub_config *cfg, const opts *o)
{
	txhub_config c = *cfg; /* (the store copies the strings it keeps) */
	char topic[300], err[512];
	snprintf(topic, sizeof topic, "%s.bench-ceiling", cfg->control_topic);
	c.control_topic = topic;
	int64_t n = o->ceiling_tx;
	int parts = o->partitions;
	char **texts = NULL;
	store_record *recs = ceiling_records(o, topic, n, parts, &texts);
	store *a = store_connect(&c, err, sizeof err), *b = a ? store_connect(&c, err, sizeof err) : NULL;
	tp_key *ps = calloc((size_t)parts, sizeof *ps);
	owned_part *own = calloc((size_t)parts, sizeof *own);
	int64_t *next = calloc((size_t)parts, sizeof *next);
	double rate = -1;
	for (int p = 0; ps && p < parts; p++)
		ps[p] = tp_of(topic, p);
	if (!recs || !texts || !a || !b || !ps || !own || !next ||
	    store_take_partitions(a, "bench", "bench", ps, (size_t)parts, own, next, NULL, err,
	                          sizeof err) != STORE_OK) {
		fprintf(stderr, "txhub bench: PostgreSQL ceiling: %s\n", err);
		goto done;
	}
	deliverer d = {b, own, (size_t)parts, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
	               NULL, NULL, 0, 0};
	pthread_t th;
	pthread_create(&th, NULL, deliver, &d);
	int64_t t0 = clock_us();
	size_t per = (size_t)cfg->intake_batch_max, total = (size_t)(2 * n);
	for (size_t i = 0; i < total && !d.failed; i += per) {
		size_t k = total - i < per ? total - i : per;
		batch_node *node = calloc(1, sizeof *node);
		store_stats stats = {0};
		store_rc rc = node ? store_apply(a, recs + i, k, own, (size_t)parts, &node->l,
		                                 &stats, NULL, NULL, err, sizeof err)
		                   : STORE_RETRY;
		store_stats_free(&stats);
		if (rc != STORE_OK) {
			fprintf(stderr, "txhub bench: PostgreSQL ceiling: %s\n", err);
			d.failed = 1;
			free(node);
			break;
		}
		pthread_mutex_lock(&d.mu);
		if (d.tail)
			d.tail->next = node;
		else
			d.head = node;
		d.tail = node;
		pthread_cond_signal(&d.cv);
		pthread_mutex_unlock(&d.mu);
	}
	pthread_mutex_lock(&d.mu);
	d.closed = 1;
	pthread_cond_signal(&d.cv);
	pthread_mutex_unlock(&d.mu);
	pthread_join(th, NULL);
	if (!d.failed)
		rate = (double)n / ((double)(clock_us() - t0) / 1e6);
done:
	for (int64_t i = 0; recs && texts && i < 2 * n; i++) {
		envelope_free(&recs[i].env);
		free(texts[i]);
	}
	free(recs);
	free(texts);
	free(ps);
	free(own);
	free(next);
	store_close(a);
	store_close(b);
	ceiling_cleanup(cfg, o, topic);
	return rate;
}

static _Atomic int64_t ceiling_delivered;

static void ceiling_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	(void)opaque;
	if (!m->err)
		atomic_fetch_add(&ceiling_delivered, 1);
}

/* Kafka alone: transactions per second consumed from one topic and
 * produced to another with the hub's forward-producer settings. */
double bench_ceiling_kafka(const txhub_config *cfg, const opts *o, rd_kafka_t *admin,
                           const char *payload)
{
	char in[300], out[300], err[512];
	snprintf(in, sizeof in, "%s.bench-ceiling-in", cfg->control_topic);
	snprintf(out, sizeof out, "%s.bench-ceiling-out", cfg->control_topic);
	bench_create_topic(admin, in, o->partitions);
	bench_create_topic(admin, out, o->partitions);
	int64_t *start = NULL, n = o->ceiling_tx;
	int parts = bench_topic_ends(admin, in, &start);
	double rate = -1;
	static const char *pdef[] = {"linger.ms", "5", NULL};
	static const char *cdef[] = {"group.id", "txhub-bench-ceiling", "enable.auto.commit", "false",
	                             "enable.partition.eof", "false", NULL};
	int64_t tmo;
	rd_kafka_conf_t *fconf = forward_producer_conf(cfg, &tmo, err, sizeof err);
	if (fconf)
		rd_kafka_conf_set_dr_msg_cb(fconf, ceiling_dr);
	rd_kafka_t *src = bench_client(cfg, RD_KAFKA_PRODUCER, pdef, NULL);
	rd_kafka_t *con = bench_client(cfg, RD_KAFKA_CONSUMER, cdef, NULL);
	rd_kafka_t *fwd = fconf ? bench_client(cfg, RD_KAFKA_PRODUCER, NULL, fconf) : NULL;
	if (!parts || !src || !con || !fwd)
		goto done;
	/* warm up: the out topic's metadata and leaders, outside the timing */
	bench_produce(fwd, out, "warm-up", payload);
	rd_kafka_flush(fwd, 30000);
	for (int64_t i = 0; i < n; i++) {
		char key[32];
		snprintf(key, sizeof key, "%lld", (long long)i);
		bench_produce(src, in, key, payload);
	}
	rd_kafka_flush(src, 60000);
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(parts);
	for (int p = 0; p < parts; p++)
		rd_kafka_topic_partition_list_add(l, in, p)->offset = start[p];
	rd_kafka_assign(con, l);
	rd_kafka_topic_partition_list_destroy(l);
	atomic_store(&ceiling_delivered, 0);
	int64_t t0 = 0, got = 0, deadline = clock_us() + 120000000;
	/* (the warm-up's report was served by the flush above) */
	while (atomic_load(&ceiling_delivered) < n && clock_us() < deadline) {
		rd_kafka_message_t *m = got < n ? rd_kafka_consumer_poll(con, 100) : NULL;
		if (m && !m->err) {
			if (!t0)
				t0 = clock_us();
			got++;
			for (;;) {
				rd_kafka_resp_err_t e = rd_kafka_producev(
					fwd, RD_KAFKA_V_TOPIC(out), RD_KAFKA_V_KEY(m->key, m->key_len),
					RD_KAFKA_V_VALUE(m->payload, m->len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
					RD_KAFKA_V_END);
				if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
					break;
				rd_kafka_poll(fwd, 10);
			}
		}
		if (m)
			rd_kafka_message_destroy(m);
		rd_kafka_poll(fwd, got < n ? 0 : 50);
	}
	if (t0 && atomic_load(&ceiling_delivered) >= n)
		rate = (double)n / ((double)(clock_us() - t0) / 1e6);
	else
		fprintf(stderr, "txhub bench: Kafka ceiling: %lld of %lld delivered\n",
		        (long long)atomic_load(&ceiling_delivered), (long long)n);
done:
	if (!fwd && fconf)
		fprintf(stderr, "txhub bench: Kafka ceiling: cannot create the producer\n");
	else if (!fconf)
		fprintf(stderr, "txhub bench: Kafka ceiling: %s\n", err);
	if (con) {
		rd_kafka_consumer_close(con);
		rd_kafka_destroy(con);
	}
	if (src)
		rd_kafka_destroy(src);
	if (fwd) {
		rd_kafka_flush(fwd, 10000);
		rd_kafka_destroy(fwd);
	}
	free(start);
	return rate;
}
