/* intake.c: see intake.h. Records are validated here, where they enter; the
 * store never sees an unchecked byte. */
#include "intake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backoff.h"
#include "clock.h"
#include "duration.h"
#include "gap.h"
#include "intake_state.h"
#include "kafka.h"
#include "log.h"
#include "metrics.h"

void intake_batch_reset(intake_batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		envelope_free(&b->recs[i].env);
		rd_kafka_message_destroy(b->msgs[i]);
	}
	b->n = 0;
	b->bytes = 0;
	b->judged = 0;
}

void intake_batch_free(intake_batch *b)
{
	intake_batch_reset(b);
	free(b->recs);
	free(b->msgs);
	memset(b, 0, sizeof *b);
}

size_t intake_batch_drop(intake_batch *b, const tp_key *parts, size_t n)
{
	size_t kept = 0, dropped = 0, judged = 0;
	b->bytes = 0;
	for (size_t i = 0; i < b->n; i++) {
		if (intake_tp_in(parts, n, b->recs[i].tp)) {
			envelope_free(&b->recs[i].env);
			rd_kafka_message_destroy(b->msgs[i]);
			dropped++;
			continue;
		}
		judged += i < b->judged;
		b->recs[kept] = b->recs[i];
		b->msgs[kept] = b->msgs[i];
		b->bytes += b->msgs[kept]->len + b->msgs[kept]->key_len;
		kept++;
	}
	b->n = kept;
	b->judged = judged; /* still a prefix: records keep their order */
	return dropped;
}

size_t intake_lag(intake *in, tp_key *parts, int64_t *lag, size_t max)
{
	size_t n = in->owned->n < max ? in->owned->n : max, k = 0;
	if (n == 0)
		return 0;
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n);
	for (size_t i = 0; i < n; i++)
		intake_list_add(l, in->owned->parts[i].tp);
	if (rd_kafka_position(in->rk, l) == RD_KAFKA_RESP_ERR_NO_ERROR) {
		for (int i = 0; i < l->cnt; i++) {
			int64_t lo, hi;
			if (l->elems[i].offset < 0 ||
			    rd_kafka_get_watermark_offsets(in->rk, l->elems[i].topic, l->elems[i].partition,
			                                   &lo, &hi) != 0 ||
			    hi < 0)
				continue;
			parts[k] = intake_elem_tp(&l->elems[i]);
			lag[k++] = hi > l->elems[i].offset ? hi - l->elems[i].offset : 0;
		}
	}
	rd_kafka_topic_partition_list_destroy(l);
	return k;
}

/* librdkafka stopped partition p: the offset it wanted is not on the
 * broker, or it had none to start at (wanted RD_KAFKA_OFFSET_INVALID).
 * Where to read it from is decided at the next poll (serve_stalled). */
static void stall(intake *in, tp_key p, int64_t wanted, const char *why)
{
	slot *s = intake_slot_find(in, p);
	if (!s || s->stalled) /* not assigned here any more, or already waiting */
		return;
	s->stalled = 1;
	s->wanted = wanted;
	s->due_ms = 0;
	s->attempts = 0;
	s->decided = 0;
	if (wanted >= 0)
		log_info("intake: " TP_FMT " stopped at offset %lld: %s", TP_ARG(p), (long long)wanted,
		         why);
	else
		log_info("intake: " TP_FMT " stopped: %s", TP_ARG(p), why);
}

/* Put the decision about s off for a while. Returns -1. */
static int decide_later(slot *s)
{
	s->attempts++;
	s->due_ms = clock_ms() + backoff_delay(s->attempts, 1000, 10000, backoff_random());
	return -1;
}

/* Where stalled s reads from now: 0 with *to, or -1 to decide later. A
 * gap (gap.h) goes to the gap hook first, which must have said so. */
static int decide(intake *in, slot *s, int64_t *to)
{
	char text[600];
	if (s->decided) {
		*to = s->resume;
		return 0;
	}
	if (s->wanted == RD_KAFKA_OFFSET_INVALID) {
		log_info("intake: " TP_FMT " has no offset in txhub.partitions or the group: a first "
		         "start, reading from the beginning", TP_ARG(s->tp));
		*to = RD_KAFKA_OFFSET_BEGINNING;
		return 0;
	}
	if (s->wanted < 0) { /* a logical offset the broker did not look up: ask again */
		s->decided = 1;
		s->resume = s->wanted;
		return decide_later(s);
	}
	int64_t lo = -1, hi = -1;
	rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(in->rk, tp_topic(s->tp),
	                                                         tp_part(s->tp), &lo, &hi, 5000);
	if (e || lo < 0 || hi < lo) {
		log_warn("intake: " TP_FMT ": asking the broker where it starts and ends: %s; "
		         "asking again", TP_ARG(s->tp), e ? rd_kafka_err2str(e) : "no answer");
		return decide_later(s);
	}
	gap g;
	gap_decide(s->tp, s->wanted, lo, hi, &g);
	if (g.kind == GAP_NONE) { /* a passing disagreement: read it again in a while */
		gap_describe(&g, tp_topic(s->tp), text, sizeof text);
		log_warn("intake: " TP_FMT ": %s", TP_ARG(s->tp), text);
		s->decided = 1;
		s->resume = g.resume;
		return decide_later(s);
	}
	if (in->hooks.gap && in->hooks.gap(in->hooks.opaque, &g) != 0)
		return decide_later(s);
	*to = g.resume;
	return 0;
}

/* Decide for the stalled partitions whose time has come, and start them
 * again. Fenced ones wait to be taken back (intake_retake starts them). */
static void serve_stalled(intake *in)
{
	int64_t now = clock_ms();
	rd_kafka_topic_partition_list_t *l = NULL;
	for (size_t i = 0; i < in->nslots; i++) {
		slot *s = &in->slots[i];
		int64_t to = RD_KAFKA_OFFSET_INVALID;
		if (!s->stalled || now < s->due_ms || !owned_has(in->owned, s->tp) ||
		    decide(in, s, &to) != 0)
			continue;
		if (!l)
			l = rd_kafka_topic_partition_list_new(4);
		intake_list_add(l, s->tp)->offset = to;
	}
	if (l) {
		intake_restart(in, l);
		rd_kafka_topic_partition_list_destroy(l);
	}
}

int intake_committed(intake *in, const tp_key *parts, size_t n, int64_t *out)
{
	if (n == 0)
		return 0;
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n);
	for (size_t i = 0; i < n; i++)
		intake_list_add(l, parts[i]);
	rd_kafka_resp_err_t e = rd_kafka_committed(in->rk, l, 5000);
	for (size_t i = 0; i < n; i++) {
		out[i] = -1;
		for (int k = 0; !e && k < l->cnt; k++)
			if (intake_elem_tp(&l->elems[k]) == parts[i] && !l->elems[k].err &&
			    l->elems[k].offset >= 0)
				out[i] = l->elems[k].offset;
	}
	rd_kafka_topic_partition_list_destroy(l);
	return e ? -1 : 0;
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	intake *in = opaque;
	metrics_kafka_error();
	/* (served by the consumer poll, on the run loop's thread) */
	if (err == RD_KAFKA_RESP_ERR__FATAL && !in->fatal[0])
		rd_kafka_fatal_error(rk, in->fatal, sizeof in->fatal);
	intake_note_error(in, rk, err, reason);
}

void intake_reconfigure(intake *in, const txhub_config *cfg)
{
	const txhub_config *was = in->cfg; /* (the loop's thread is the only reader) */
	in->cfg = config_hold(cfg);
	config_drop(was);
}

/* How a full fetch queue gets looked at again, and which group protocol
 * runs, as the consumer has them (a kafka.* setting overrides the hub's). */
static void say_fetch_path(intake *in)
{
	char v[32] = "", proto[32] = "classic";
	size_t vs = sizeof v, ps = sizeof proto;
	const rd_kafka_conf_t *conf = rd_kafka_conf(in->rk);
	if (rd_kafka_conf_get(conf, "group.protocol", proto, &ps) != RD_KAFKA_CONF_OK)
		snprintf(proto, sizeof proto, "classic");
	in->consumer_protocol = strcmp(proto, "consumer") == 0;
	if (in->waker)
		log_info("intake: librdkafka %s has no fetch.queue.backoff.ms: a waker thread wakes "
		         "the fetcher when the fetch queue runs low; group protocol %s",
		         rd_kafka_version_str(), proto);
	else if (rd_kafka_conf_get(conf, "fetch.queue.backoff.ms", v, &vs) == RD_KAFKA_CONF_OK)
		log_info("intake: librdkafka %s looks at a full fetch queue again after "
		         "fetch.queue.backoff.ms = %s ms%s; group protocol %s", rd_kafka_version_str(),
		         v, kafka_setting(in->cfg, "fetch.queue.backoff.ms") ? " (kafka.fetch.queue.backoff.ms)"
		                                                             : "", proto);
	else
		log_warn("intake: librdkafka %s has no fetch.queue.backoff.ms, and the waker thread "
		         "could not start: a full fetch queue may wait a second", rd_kafka_version_str());
}

intake *intake_new(const txhub_config *cfg, intake_hooks hooks, owned_set *owned,
                   const dbid *self, char *err, size_t errsz)
{
	intake *in = calloc(1, sizeof *in);
	if (!in || !(in->done = rd_kafka_topic_partition_list_new(8)) ||
	    (dbid_known(self) && !(in->metadata = dbid_metadata(self)))) {
		snprintf(err, errsz, "out of memory");
		goto fail;
	}
	in->cfg = config_hold(cfg);
	enforce_init(&in->tenants, config_tenants_enforce(cfg));
	if (topics_parse(cfg->control_topic, &in->topics, err, errsz) != 0)
		goto fail;
	if (config_exactly_once(cfg))
		topics_progress_name(&in->topics, cfg->forward_progress_topic, in->progress,
		                     sizeof in->progress);
	in->hooks = hooks;
	in->owned = owned;
	in->self = *self;
	/* librdkafka drops the connection on a fetch response larger than
	 * receive.message.max.bytes and fetches it again, for ever: the
	 * largest envelope must fit (an explicit setting too small is refused
	 * at start-up) */
	char receive[24], fetch_max[24];
	int64_t need = kafka_consumer_receive_bytes(cfg), fetch = kafka_consumer_fetch_bytes(cfg);
	snprintf(receive, sizeof receive, "%lld", (long long)need);
	snprintf(fetch_max, sizeof fetch_max, "%lld", (long long)fetch);
	const char *defaults[] = {
		/* we commit after the PG commit, with our database's identity */
		"enable.auto.offset.store", "false",
		"enable.auto.commit", "false",
		/* never jump to another offset on its own: librdkafka reports an
		 * offset out of range (or none to start at) and intake decides,
		 * and says so (serve_stalled) */
		"auto.offset.reset", "error",
		/* the end of a partition is news only for one the broker
		 * refused to let us fetch (intake_unreadable): it is again */
		"enable.partition.eof", "true",
		/* partitions added to the control topic are seen at the next
		 * refresh; librdkafka's default waits 5 minutes */
		"topic.metadata.refresh.interval.ms", "10000",
		/* prefetched records held in memory: librdkafka's 64 MiB made the
		 * hub's peak 85-130 MiB while draining a backlog; 8 MiB measured as
		 * fast (a batch is at most intake.batch_max records); smaller
		 * stalls the fetcher, which looks again only after a while */
		"queued.max.messages.kbytes", "8192",
		/* three more below, where txhub sets them */
		NULL, NULL, NULL, NULL, NULL, NULL, NULL};
	size_t nd = sizeof defaults / sizeof defaults[0] - 7;
	if (rd_kafka_version() >= 0x02010000) {
		/* a full queue is looked at again after this, not after a second
		 * (librdkafka's default): what the waker does for 2.0.x */
		defaults[nd++] = "fetch.queue.backoff.ms";
		defaults[nd++] = "10";
	}
	if (fetch > 0) {
		/* the queue overshoots its bound by up to one fetch response:
		 * librdkafka's is the bound itself (8 MiB) */
		defaults[nd++] = "fetch.max.bytes";
		defaults[nd++] = fetch_max;
	}
	if (need > 0) {
		defaults[nd++] = "receive.message.max.bytes";
		defaults[nd++] = receive;
	}
	rd_kafka_conf_t *conf = kafka_conf_new(cfg, defaults, err, errsz);
	if (!conf)
		goto fail;
	char sub[512];
	if (rd_kafka_conf_set(conf, "group.id", cfg->group, sub, sizeof sub) != RD_KAFKA_CONF_OK) {
		snprintf(err, errsz, "group: %s", sub);
		rd_kafka_conf_destroy(conf);
		goto fail;
	}
	rd_kafka_conf_set_rebalance_cb(conf, intake_rebalance_cb);
	rd_kafka_conf_set_offset_commit_cb(conf, intake_offset_commit_cb);
	rd_kafka_conf_set_error_cb(conf, error_cb);
	rd_kafka_conf_set_opaque(conf, in);
	in->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, sub, sizeof sub);
	if (!in->rk) {
		snprintf(err, errsz, "cannot create consumer: %s", sub);
		rd_kafka_conf_destroy(conf);
		goto fail;
	}
	rd_kafka_poll_set_consumer(in->rk);
	in->queue = rd_kafka_queue_get_consumer(in->rk);
	if (rd_kafka_version() < 0x02010000)
		in->waker = intake_waker_new(in->rk);
	in->started_ms = clock_ms();
	say_fetch_path(in);
	/* a pattern goes to librdkafka as it is: topics created later that
	 * match it are assigned after a metadata refresh */
	rd_kafka_topic_partition_list_t *topics =
		rd_kafka_topic_partition_list_new(in->topics.pattern ? 1 : (int)in->topics.n);
	if (in->topics.pattern)
		rd_kafka_topic_partition_list_add(topics, in->topics.source, RD_KAFKA_PARTITION_UA);
	for (size_t i = 0; i < in->topics.n; i++)
		rd_kafka_topic_partition_list_add(topics, in->topics.names[i], RD_KAFKA_PARTITION_UA);
	rd_kafka_resp_err_t e = rd_kafka_subscribe(in->rk, topics);
	rd_kafka_topic_partition_list_destroy(topics);
	if (e) {
		snprintf(err, errsz, "cannot subscribe to %s: %s", cfg->control_topic, rd_kafka_err2str(e));
		goto fail;
	}
	log_info("intake: subscribed to %s%s as group %s", in->topics.pattern ? "the topics matching " : "",
	         cfg->control_topic, cfg->group);
	return in;
fail:
	if (in) {
		intake_waker_free(in->waker);
		if (in->queue)
			rd_kafka_queue_destroy(in->queue);
	}
	if (in && in->rk)
		rd_kafka_destroy(in->rk);
	if (in && in->done)
		rd_kafka_topic_partition_list_destroy(in->done);
	if (in) {
		free(in->metadata);
		topics_free(&in->topics);
		config_drop(in->cfg);
	}
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

void intake_set_rules(intake *in, const tenant_rules *rules)
{
	enforce_set_rules(&in->tenants, rules);
}

/* A valid record rejected after all (r->reason says why): the line names
 * its message and trace, then its envelope goes. */
static void rejected_valid(store_record *r, const rd_kafka_message_t *m)
{
	char ek[128];
	log_about about = {r->env.biz_id, r->env.message_key, r->tp, r->env.trace_id};
	log_msg_about(LOG_WARN, "intake: rejected", &about, "offset %lld key %s: %s",
	              (long long)m->offset,
	              m->key ? log_escape(m->key, m->key_len, ek, sizeof ek) : "(null)", r->reason);
	envelope_free(&r->env);
	r->valid = 0;
}

/* The tenant rules' verdict on a record (enforce.h), logged when it is
 * rejected for them. */
static void judge(intake *in, store_record *r, const rd_kafka_message_t *m)
{
	int was_valid = r->valid;
	const char *topic = r->src_topic ? r->src_topic : rd_kafka_topic_name(m->rkt);
	enforce_record(&in->tenants, topic, r);
	if (was_valid && !r->valid)
		rejected_valid(r, m); /* (enforce_record() leaves the envelope to us) */
}

int intake_judge(intake *in, intake_batch *b)
{
	if (!enforce_ready(&in->tenants))
		return b->judged == b->n;
	for (; b->judged < b->n; b->judged++)
		judge(in, &b->recs[b->judged], b->msgs[b->judged]);
	return 1;
}

/* A delay beyond forward.max_delay (docs/consumers.md: Delayed delivery): 1 with the reason.
 * ahead_ms: how far ahead the envelope asks for (a delay_ms as it is, it
 * counts from the commit, whenever that comes; a not_before from the
 * database's now: intake_date). */
static int too_far(const intake *in, const envelope *env, int64_t ahead_ms, char *reason,
                   size_t sz)
{
	if (ahead_ms <= config_max_delay_ms(in->cfg))
		return 0;
	char a[32];
	snprintf(reason, sz, "field \"forward.%s\" is %s ahead, beyond forward.max_delay (%s)",
	         env->delay_ms >= 0 ? "delay_ms" : "not_before",
	         duration_format(ahead_ms / 1000, a, sizeof a), in->cfg->forward_max_delay);
	return 1;
}

int intake_needs_date(const intake_batch *b)
{
	for (size_t i = 0; i < b->n; i++)
		if (b->recs[i].valid && !b->recs[i].dated && b->recs[i].env.not_before_ms >= 0)
			return 1;
	return 0;
}

void intake_date(intake *in, intake_batch *b, int64_t db_now_ms)
{
	for (size_t i = 0; i < b->n; i++) {
		store_record *r = &b->recs[i];
		if (!r->valid || r->dated || r->env.not_before_ms < 0)
			continue;
		r->dated = 1;
		/* a not_before in the past is due at once */
		if (too_far(in, &r->env, r->env.not_before_ms - db_now_ms, r->reason, sizeof r->reason))
			rejected_valid(r, b->msgs[i]);
	}
}

/* A forward into a control topic (any of them) would come back as an
 * envelope, one into the progress topic would corrupt the markers, and one
 * into the dead-letter topic would pass for a dead letter of the message
 * (the same txhub-biz-id and txhub-message-key: docs/troubleshooting.md, Dead-letter
 * topic). */
static void validate(const intake *in, store_record *r)
{
	if (envelope_parse(r->value, r->value_len, (size_t)in->cfg->envelope_max_bytes, &r->env,
	                   r->reason, sizeof r->reason) != 0) {
		r->valid = 0;
		return;
	}
	if (r->env.trace_dropped) { /* never a rejection (docs/consumers.md: Trace context) */
		/* a dropped tracestate leaves the traceparent, and its trace id */
		log_about about = {r->env.biz_id, r->env.message_key, r->tp, r->env.trace_id};
		log_msg_about(LOG_WARN, "intake: trace context dropped", &about,
		              "offset %lld: %s; the message is kept without it", (long long)r->offset,
		              r->env.trace_dropped_why);
		metrics_trace_dropped(r->env.trace_dropped);
	}
	const char *ft = r->env.forward_topic;
	const char *named = !ft ? NULL
	                    : topics_match(&in->topics, ft) ? "a control topic"
	                    : *in->progress && strcmp(ft, in->progress) == 0 ? "the progress topic"
	                    : *in->cfg->forward_dead_letter_topic &&
	                              strcmp(ft, in->cfg->forward_dead_letter_topic) == 0
	                        ? "the dead-letter topic (forward.dead_letter_topic)"
	                        : NULL;
	if (named) {
		snprintf(r->reason, sizeof r->reason, "field \"forward.topic\" names %s", named);
		envelope_free(&r->env);
		r->valid = 0;
		return;
	}
	/* (a not_before is held to the limit on the database's clock when the
	 * batch is stored: intake_date) */
	if (r->env.delay_ms >= 0 && too_far(in, &r->env, r->env.delay_ms, r->reason,
	                                    sizeof r->reason)) {
		envelope_free(&r->env);
		r->valid = 0;
		return;
	}
	r->valid = 1;
}

void intake_poll(intake *in, intake_batch *b)
{
	int timeout = (int)in->cfg->intake_poll_ms;
	serve_stalled(in);
	/* while paused the batch in hand may be full, but the consumer is
	 * still polled: that keeps this replica in the group and serves
	 * rebalances (paused partitions deliver nothing more) */
	while (in->paused || (b->n < (size_t)in->cfg->intake_batch_max &&
	                      b->bytes < (size_t)in->cfg->intake_batch_bytes)) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(in->rk, timeout);
		if (!m)
			break;
		timeout = 0;
		tp_key tp = intake_msg_tp(m);
		if (in->unreadable && (!m->err || m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF))
			intake_note_readable(in, tp);
		if (m->err) {
			/* auto.offset.reset = error: librdkafka stopped the partition
			 * rather than jump to another offset on its own */
			if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET && m->rkt)
				stall(in, tp, m->offset, rd_kafka_message_errstr(m));
			else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
				intake_note_consume_error(in, m);
			/* the consumer group protocol reports a fatal error here, not
			 * to error_cb (an instance id still held by a member the broker
			 * has not let go: UNRELEASED_INSTANCE_ID) */
			if (!in->fatal[0])
				rd_kafka_fatal_error(in->rk, in->fatal, sizeof in->fatal);
			rd_kafka_message_destroy(m);
			continue;
		}
		if (!owned_has(in->owned, tp)) {
			/* fenced, or fetched before a revoke: not ours to apply, and
			 * not acknowledged, so the owner reads it */
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
		r->src_topic = tp_topic(tp); /* (owned: interned) */
		r->tp = tp;
		r->partition = m->partition;
		r->offset = m->offset;
		r->key = m->key;
		r->key_len = m->key_len;
		r->value = m->payload;
		r->value_len = m->len;
		validate(in, r);
		if (!r->valid) {
			char ek[128];
			log_about about = {NULL, NULL, tp, NULL};
			log_msg_about(LOG_WARN, "intake: rejected", &about, "offset %lld key %s: %s",
			              (long long)m->offset,
			              m->key ? log_escape(m->key, m->key_len, ek, sizeof ek) : "(null)",
			              r->reason);
		}
		b->msgs[b->n++] = m;
		b->bytes += m->len + m->key_len;
	}
	size_t max = (size_t)in->cfg->intake_batch_max;
	int full = b->n >= max || b->bytes >= (size_t)in->cfg->intake_batch_bytes;
	if (in->waker && !in->paused && b->n > 0 && in->queue &&
	    intake_waker_due(full, (size_t)rd_kafka_queue_length(in->queue), max)) {
		const store_record *last = &b->recs[b->n - 1];
		intake_waker_poke(in->waker, last->src_topic, last->partition);
	}
	intake_judge(in, b);
}

rd_kafka_t *intake_consumer(intake *in) { return in->rk; }

void intake_close(intake *in)
{
	if (!in)
		return;
	intake_waker_free(in->waker);
	rd_kafka_resp_err_t e = rd_kafka_consumer_close(in->rk);
	if (e)
		log_warn("intake: closing consumer: %s", rd_kafka_err2str(e));
	if (in->queue)
		rd_kafka_queue_destroy(in->queue);
	rd_kafka_destroy(in->rk);
	rd_kafka_topic_partition_list_destroy(in->done);
	free(in->metadata);
	free(in->fenced);
	free(in->slots);
	free(in->refused);
	enforce_clear(&in->tenants);
	topics_free(&in->topics);
	config_drop(in->cfg);
	free(in);
}

const char *intake_join_hint(const intake *in)
{
	if (!in->consumer_protocol || clock_ms() - in->started_ms < INTAKE_JOIN_HINT_MS)
		return NULL;
	return "kafka.group.protocol = consumer (KIP-848) needs Apache Kafka 4.0 or later as the "
	       "group's coordinator: an older broker takes no member of that protocol, and "
	       "librdkafka says nothing of it";
}

const char *intake_fatal(const intake *in) { return in->fatal[0] ? in->fatal : NULL; }
