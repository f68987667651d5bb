/* intake.c: see intake.h. Records are validated here, where they enter; the
 * store never sees an unchecked byte. */
#include "intake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka.h"
#include "log.h"

struct intake {
	rd_kafka_t *rk;
	rd_kafka_queue_t *queue;
	const txhub_config *cfg;
	intake_hooks hooks;
	int32_t *owned;
	size_t nowned;
	int cooperative;
};

void intake_batch_reset(intake_batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		envelope_free(&b->recs[i].env);
		rd_kafka_message_destroy(b->msgs[i]);
	}
	b->n = 0;
	b->bytes = 0;
}

void intake_batch_free(intake_batch *b)
{
	intake_batch_reset(b);
	free(b->recs);
	free(b->msgs);
	memset(b, 0, sizeof *b);
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

static void owned_set(intake *in, const rd_kafka_topic_partition_list_t *l, int add)
{
	for (int i = 0; i < l->cnt; i++) {
		int32_t p = l->elems[i].partition;
		size_t j;
		for (j = 0; j < in->nowned && in->owned[j] != p; j++)
			;
		if (add && j == in->nowned) {
			int32_t *n = realloc(in->owned, (in->nowned + 1) * sizeof *n);
			if (!n) {
				log_error("intake: out of memory tracking partitions");
				continue;
			}
			in->owned = n;
			in->owned[in->nowned++] = p;
		} else if (!add && j < in->nowned) {
			in->owned[j] = in->owned[--in->nowned];
		}
	}
	qsort(in->owned, in->nowned, sizeof *in->owned, cmp_i32);
}

static void partitions_of(const rd_kafka_topic_partition_list_t *l, int32_t *out)
{
	for (int i = 0; i < l->cnt; i++)
		out[i] = l->elems[i].partition;
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
	intake *in = opaque;
	int coop = strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
	int32_t *ps = calloc((size_t)parts->cnt + 1, sizeof *ps);
	if (ps)
		partitions_of(parts, ps);
	if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
		log_info("intake: assigned %d partition(s) of %s (%s)", parts->cnt,
		         in->cfg->control_topic, coop ? "cooperative" : "eager");
		if (coop) {
			rd_kafka_error_t *e = rd_kafka_incremental_assign(rk, parts);
			if (e) {
				log_error("intake: incremental assign: %s", rd_kafka_error_string(e));
				rd_kafka_error_destroy(e);
			}
		} else {
			rd_kafka_assign(rk, parts);
		}
		owned_set(in, parts, 1);
		if (ps && in->hooks.assigned)
			in->hooks.assigned(in->hooks.opaque, ps, (size_t)parts->cnt);
	} else {
		log_info("intake: %s %d partition(s)",
		         err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS ? "revoking" : "lost", parts->cnt);
		/* finish the work in hand for these partitions while we own them */
		if (ps && in->hooks.revoking)
			in->hooks.revoking(in->hooks.opaque, ps, (size_t)parts->cnt);
		owned_set(in, parts, 0);
		if (coop) {
			rd_kafka_error_t *e = rd_kafka_incremental_unassign(rk, parts);
			if (e) {
				log_error("intake: incremental unassign: %s", rd_kafka_error_string(e));
				rd_kafka_error_destroy(e);
			}
		} else {
			rd_kafka_assign(rk, NULL);
		}
	}
	free(ps);
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	(void)rk;
	(void)opaque;
	log_warn("intake: kafka: %s: %s", rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

intake *intake_new(const txhub_config *cfg, intake_hooks hooks, char *err, size_t errsz)
{
	intake *in = calloc(1, sizeof *in);
	if (!in) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	in->cfg = cfg;
	in->hooks = hooks;
	static const char *defaults[] = {
		"enable.auto.offset.store", "false", /* we store after the PG commit */
		"enable.auto.commit", "true",        /* ...and librdkafka commits those */
		"auto.commit.interval.ms", "1000",
		"auto.offset.reset", "earliest",     /* a new group reads from the start */
		"enable.partition.eof", "false",
		NULL};
	rd_kafka_conf_t *conf = kafka_conf_new(cfg, defaults, err, errsz);
	if (!conf)
		goto fail;
	char sub[512];
	if (rd_kafka_conf_set(conf, "group.id", cfg->group, sub, sizeof sub) != RD_KAFKA_CONF_OK) {
		snprintf(err, errsz, "group: %s", sub);
		rd_kafka_conf_destroy(conf);
		goto fail;
	}
	rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
	rd_kafka_conf_set_error_cb(conf, error_cb);
	rd_kafka_conf_set_opaque(conf, in);
	in->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, sub, sizeof sub);
	if (!in->rk) {
		snprintf(err, errsz, "cannot create consumer: %s", sub);
		rd_kafka_conf_destroy(conf);
		goto fail;
	}
	rd_kafka_poll_set_consumer(in->rk);
	rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(topics, cfg->control_topic, RD_KAFKA_PARTITION_UA);
	rd_kafka_resp_err_t e = rd_kafka_subscribe(in->rk, topics);
	rd_kafka_topic_partition_list_destroy(topics);
	if (e) {
		snprintf(err, errsz, "cannot subscribe to %s: %s", cfg->control_topic, rd_kafka_err2str(e));
		goto fail;
	}
	log_info("intake: subscribed to %s as group %s", cfg->control_topic, cfg->group);
	return in;
fail:
	if (in->rk)
		rd_kafka_destroy(in->rk);
	free(in);
	return NULL;
}

static int batch_grow(intake_batch *b)
{
	if (b->n < b->cap)
		return 0;
	size_t cap = b->cap ? b->cap * 2 : 256;
	store_record *r = realloc(b->recs, cap * sizeof *r);
	if (!r)
		return -1;
	b->recs = r;
	rd_kafka_message_t **m = realloc(b->msgs, cap * sizeof *m);
	if (!m)
		return -1;
	b->msgs = m;
	b->cap = cap;
	return 0;
}

static void validate(const txhub_config *cfg, store_record *r)
{
	if (envelope_parse(r->value, r->value_len, (size_t)cfg->envelope_max_bytes, &r->env,
	                   r->reason, sizeof r->reason) != 0) {
		r->valid = 0;
		return;
	}
	if (r->env.forward_topic && strcmp(r->env.forward_topic, cfg->control_topic) == 0) {
		snprintf(r->reason, sizeof r->reason, "field \"forward.topic\" names the control topic");
		envelope_free(&r->env);
		r->valid = 0;
		return;
	}
	r->valid = 1;
}

void intake_poll(intake *in, intake_batch *b)
{
	int timeout = (int)in->cfg->intake_poll_ms;
	while (b->n < (size_t)in->cfg->intake_batch_max &&
	       b->bytes < (size_t)in->cfg->intake_batch_bytes) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(in->rk, timeout);
		if (!m)
			break;
		timeout = 0;
		if (m->err) {
			if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
				log_warn("intake: consume: %s", rd_kafka_message_errstr(m));
			rd_kafka_message_destroy(m);
			continue;
		}
		if (batch_grow(b) != 0) {
			/* not stored, so it is read again after a restart; but order
			 * within the partition requires we stop here */
			log_error("intake: out of memory; re-reading from the last acknowledged offset");
			rd_kafka_message_destroy(m);
			break;
		}
		store_record *r = &b->recs[b->n];
		memset(r, 0, sizeof *r);
		r->partition = m->partition;
		r->offset = m->offset;
		r->key = m->key;
		r->key_len = m->key_len;
		r->value = m->payload;
		r->value_len = m->len;
		validate(in->cfg, r);
		if (!r->valid) {
			char ek[128];
			log_warn("intake: rejected partition %d offset %lld key %s: %s", m->partition,
			         (long long)m->offset,
			         m->key ? log_escape(m->key, m->key_len, ek, sizeof ek) : "(null)",
			         r->reason);
		}
		b->msgs[b->n++] = m;
		b->bytes += m->len + m->key_len;
	}
}

void intake_ack(intake *in, const intake_batch *b)
{
	if (b->n == 0)
		return;
	/* the highest offset per partition is enough: store offset + 1 */
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(8);
	for (size_t i = 0; i < b->n; i++) {
		rd_kafka_message_t *m = b->msgs[i];
		rd_kafka_topic_partition_t *p =
			rd_kafka_topic_partition_list_find(l, in->cfg->control_topic, m->partition);
		if (!p)
			p = rd_kafka_topic_partition_list_add(l, in->cfg->control_topic, m->partition);
		if (m->offset + 1 > p->offset)
			p->offset = m->offset + 1;
	}
	rd_kafka_resp_err_t e = rd_kafka_offsets_store(in->rk, l);
	if (e)
		log_warn("intake: storing offsets: %s (the records are in PostgreSQL and will be "
		         "re-read harmlessly)", rd_kafka_err2str(e));
	rd_kafka_topic_partition_list_destroy(l);
}

void intake_commit(intake *in)
{
	rd_kafka_resp_err_t e = rd_kafka_commit(in->rk, NULL, 0);
	if (e && e != RD_KAFKA_RESP_ERR__NO_OFFSET)
		log_warn("intake: committing offsets: %s", rd_kafka_err2str(e));
}

void intake_close(intake *in)
{
	if (!in)
		return;
	rd_kafka_resp_err_t e = rd_kafka_consumer_close(in->rk);
	if (e)
		log_warn("intake: closing consumer: %s", rd_kafka_err2str(e));
	rd_kafka_destroy(in->rk);
	free(in->owned);
	free(in);
}

const int32_t *intake_owned(const intake *in, size_t *n)
{
	*n = in->nowned;
	return in->owned;
}
