/* txn.c: see txn.h.
 *
 * The thread owns the transactional producer's life (made, initialised,
 * replaced after a fatal error) and every transactional call on it; the
 * lanes only produce into it between txn_join and txn_finish, while the
 * transaction they joined is open, so it is never replaced under them. */
#include "txn.h"

#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "array.h"
#include "backoff.h"
#include "clock.h"
#include "forward_record.h"
#include "kafka.h"
#include "log.h"
#include "metrics.h"
#include "secret.h"
#include "store.h"

/* How long a transactional call may block (init, flush, commit, abort). */
#define CALL_MS 60000
/* After a transaction Kafka failed on a refused topic that no record of it
 * was named for, this many transactions take one part each, so that the
 * lane at fault finds its forward alone (lane_refused.c) and no other is
 * blamed. */
#define SOLO_PER_PART 8

struct txn {
	const txhub_config *cfg;
	char id[400];
	const char *failpoint;
	pthread_t thread;
	rd_kafka_t *meta; /* txn_meta() */

	pthread_mutex_t mu; /* guards what follows */
	pthread_cond_t cv;
	rd_kafka_t *consumer;
	rd_kafka_t *rk;   /* NULL until made (and after a fatal error) */
	int stopping;
	int wanted;       /* lanes waiting in txn_join */
	int coming;       /* lanes reading a run that will join (txn_intend) */
	int64_t opened;   /* when the open transaction began */
	int open;         /* the transaction takes parts */
	txn_part **parts; /* its parts */
	size_t nparts, capparts, nready;
	int abort_wanted;
	char abort_why[300];
	int64_t last_close;
	int64_t closed_at; /* when the open transaction stopped taking parts */
	size_t solo_left;
	uint64_t commits;
	rd_kafka_resp_err_t batch_fault; /* a txn_batch_error report in the open transaction */
	char failing[512]; /* why no transaction can begin ("": one can) */
	int64_t interval_ms; /* forward.transaction_interval_ms (txn_reconfigure) */

	/* the thread's */
	store *st;
	int inited;
	int stopped_once; /* (failpoint txn_stop_before_offsets) */
};

int txn_batch_error(rd_kafka_resp_err_t e)
{
	return e == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE ||
	       e == RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE || e == RD_KAFKA_RESP_ERR_INVALID_RECORD;
}

/* (in the thread that polls: the txn's, or a lane's waiting on a full
 * queue; never under mu) */
static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	txn *t = opaque;
	txn_report *s = m->_private;
	if (s) {
		s->err = m->err;
		__atomic_store_n(&s->reported, 1, __ATOMIC_RELEASE); /* (txn_reported) */
	}
	if (txn_batch_error(m->err)) {
		pthread_mutex_lock(&t->mu);
		t->batch_fault = m->err;
		pthread_mutex_unlock(&t->mu);
	}
}

int txn_reported(const txn_report *r)
{
	return __atomic_load_n(&r->reported, __ATOMIC_ACQUIRE);
}

/* The consumer group's answers to a stale member (KIP-447's fence). */
static int group_fence_error(rd_kafka_resp_err_t e)
{
	return e == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION || e == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID ||
	       e == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID ||
	       e == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS;
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	txn *t = opaque;
	metrics_kafka_error();
	char line[1200];
	kafka_describe_error(rk, err, reason, line, sizeof line);
	log_warn("forward: transactional.id %s: kafka: %s", t->id, line);
}

int txn_fenced_error(rd_kafka_resp_err_t e)
{
	return e == RD_KAFKA_RESP_ERR__FENCED || e == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
	       e == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
}

rd_kafka_t *txn_producer_new(const txhub_config *cfg, const char *id, void *opaque, char *err,
                             size_t errsz)
{
	int64_t tmo;
	rd_kafka_conf_t *conf = forward_producer_conf(cfg, &tmo, err, errsz);
	char sub[512];
	if (!conf)
		return NULL;
	if (id && rd_kafka_conf_set(conf, "transactional.id", id, sub, sizeof sub) !=
	              RD_KAFKA_CONF_OK) {
		snprintf(err, errsz, "transactional.id: %.400s", sub);
		rd_kafka_conf_destroy(conf);
		return NULL;
	}
	if (opaque) {
		rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
		rd_kafka_conf_set_error_cb(conf, error_cb);
		rd_kafka_conf_set_opaque(conf, opaque);
	}
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, sub, sizeof sub);
	if (!rk) {
		snprintf(err, errsz, "cannot create a %sproducer: %.400s", id ? "transactional " : "",
		         sub);
		rd_kafka_conf_destroy(conf);
	}
	return rk;
}

static int txn_stopping(txn *t)
{
	pthread_mutex_lock(&t->mu);
	int s = t->stopping;
	pthread_mutex_unlock(&t->mu);
	return s;
}

/* Sleep ms on the txn's condition, or until it stops. */
static void pause_ms(txn *t, int64_t ms)
{
	struct timespec ts = clock_deadline(ms);
	pthread_mutex_lock(&t->mu);
	while (!t->stopping)
		if (pthread_cond_timedwait(&t->cv, &t->mu, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&t->mu);
}

/* The producer made and initialised: init_transactions ends what an
 * earlier producer of the id left open. Returns 0, or -1 with err. */
static int ready_producer(txn *t, char *err, size_t errsz)
{
	if (t->rk && t->inited)
		return 0;
	if (!t->rk) {
		rd_kafka_t *rk = txn_producer_new(t->cfg, t->id, t, err, errsz);
		if (!rk)
			return -1;
		pthread_mutex_lock(&t->mu);
		t->rk = rk;
		pthread_mutex_unlock(&t->mu);
	}
	rd_kafka_error_t *e = rd_kafka_init_transactions(t->rk, CALL_MS);
	if (e) {
		snprintf(err, errsz, "init_transactions (transactional.id %.200s): %.250s", t->id,
		         rd_kafka_error_string(e));
		int dead = rd_kafka_error_is_fatal(e) || txn_fenced_error(rd_kafka_error_code(e));
		rd_kafka_error_destroy(e);
		if (dead) { /* a new producer next time */
			pthread_mutex_lock(&t->mu);
			rd_kafka_t *rk = t->rk;
			t->rk = NULL;
			pthread_mutex_unlock(&t->mu);
			rd_kafka_destroy(rk);
		}
		return -1;
	}
	t->inited = 1;
	pthread_mutex_lock(&t->mu);
	t->failing[0] = '\0';
	pthread_mutex_unlock(&t->mu);
	log_info("forward: transactional.id %s initialised (one producer for every partition of "
	         "this replica)", t->id);
	return 0;
}

/* The producer failed for good: made anew before the next transaction. No
 * part is open. */
static void drop_producer(txn *t)
{
	pthread_mutex_lock(&t->mu);
	rd_kafka_t *rk = t->rk;
	t->rk = NULL;
	t->inited = 0;
	pthread_mutex_unlock(&t->mu);
	if (rk)
		rd_kafka_destroy(rk); /* (its records' reports are served or purged meanwhile) */
}

/* Every part still holds its partition at its epoch in PostgreSQL; those
 * that do not are marked lost. Returns 0, -1 with why (lost), or -2 with
 * why (PostgreSQL cannot tell: the lanes back off). */
static int check_owned(txn *t, txn_part **parts, size_t n, char *why, size_t whysz)
{
	char err[512];
	owned_part *own = calloc(n ? n : 1, sizeof *own);
	if (!own) {
		snprintf(why, whysz, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		own[i] = parts[i]->own;
	tp_key *lost = NULL;
	size_t nlost = 0;
	store_rc rc = STORE_RETRY;
	if (!t->st)
		t->st = store_connect(t->cfg, err, sizeof err);
	if (t->st && (rc = store_ensure(t->st, err, sizeof err)) == STORE_OK)
		rc = store_still_owned(t->st, own, n, &lost, &nlost, err, sizeof err);
	free(own);
	if (rc != STORE_OK) {
		snprintf(why, whysz, "PostgreSQL cannot say whether this replica still owns the "
		         "transaction's partitions: %.400s", err);
		return -2;
	}
	for (size_t k = 0; k < nlost; k++)
		for (size_t i = 0; i < n; i++)
			if (parts[i]->own.tp == lost[k])
				parts[i]->out.lost = 1;
	if (nlost > 0)
		snprintf(why, whysz, "fenced: partition %d of %s%s was taken by another replica (its "
		         "epoch in txhub.partitions moved on)", TP_ARG(lost[0]),
		         nlost > 1 ? " and others" : "");
	free(lost);
	return nlost > 0 ? -1 : 0;
}

/* The offsets sent in the transaction (KIP-447): for each progress
 * partition the transaction wrote a marker to, its highest sequence. Not
 * a position anyone reads: the consumer group's coordinator checks the
 * metadata they come with, which is what fences. */
static rd_kafka_topic_partition_list_t *fence_offsets(txn_part **parts, size_t n)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n);
	for (size_t i = 0; l && i < n; i++) {
		if (!parts[i]->marker_seq)
			continue;
		rd_kafka_topic_partition_t *e = rd_kafka_topic_partition_list_find(
			l, parts[i]->progress, parts[i]->marker_part);
		if (!e)
			e = rd_kafka_topic_partition_list_add(l, parts[i]->progress, parts[i]->marker_part);
		if (e->offset < parts[i]->marker_seq)
			e->offset = parts[i]->marker_seq;
	}
	return l;
}

/* The crash tests' failpoint txn_stop_before_offsets: the hub stops itself
 * (SIGSTOP) once, with a transaction of forwards open and flushed, before
 * it sends its offsets: as a replica paused past its session time-out.
 * Never set in production. */
static void stop_at(txn *t, size_t n)
{
	if (t->failpoint && strcmp(t->failpoint, "txn_stop_before_offsets") == 0 && n > 0 &&
	    !t->stopped_once) {
		t->stopped_once = 1;
		log_warn("forward: failpoint txn_stop_before_offsets: stopping (SIGSTOP) with a "
		         "transaction of %zu part(s) open", n);
		raise(SIGSTOP);
		log_warn("forward: failpoint txn_stop_before_offsets: going on");
	}
}

/* Abort the open transaction. Returns 0, or -1 when the producer is to be
 * replaced (the transaction is the broker's to abort then). */
static int abort_open(txn *t, char *why, size_t whysz)
{
	rd_kafka_error_t *e;
	for (int tries = 0; (e = rd_kafka_abort_transaction(t->rk, CALL_MS)); tries++) {
		int again = rd_kafka_error_is_retriable(e) && !rd_kafka_error_is_fatal(e) && tries < 3;
		if (!again) {
			log_warn("forward: transactional.id %s: aborting the transaction: %s; a new "
			         "producer ends it", t->id, rd_kafka_error_string(e));
			if (!*why)
				snprintf(why, whysz, "abort: %.400s", rd_kafka_error_string(e));
			rd_kafka_error_destroy(e);
			return -1;
		}
		rd_kafka_error_destroy(e);
	}
	/* the aborted records' reports, before their lanes look at them (and
	 * free where they go): every one served, or the producer replaced
	 * (rd_kafka_destroy serves none) */
	int64_t until = clock_ms() + CALL_MS;
	while (rd_kafka_outq_len(t->rk) > 0 && clock_ms() < until)
		rd_kafka_poll(t->rk, 50);
	rd_kafka_poll(t->rk, 0);
	if (rd_kafka_outq_len(t->rk) > 0) {
		log_warn("forward: transactional.id %s: %d record(s) of the aborted transaction not "
		         "reported after %d s; a new producer takes the transactional.id", t->id,
		         rd_kafka_outq_len(t->rk), CALL_MS / 1000);
		return -1;
	}
	return 0;
}

/* End the closed transaction of parts[0..n): flushed, checked in
 * PostgreSQL, its offsets sent with the group metadata cgmd (NULL: none),
 * committed; or aborted (abort_why: a part asked for it). Sets every part's
 * outcome. */
static void end_txn(txn *t, txn_part **parts, size_t n,
                    const rd_kafka_consumer_group_metadata_t *cgmd, const char *abort_why)
{
	txn_outcome o;
	memset(&o, 0, sizeof o);
	rd_kafka_error_t *e = NULL;
	int renew = 0;
	int64_t at[4] = {0}; /* flushed, owned, offsets sent, committed (debug) */
	int64_t began = clock_ms();
	if (abort_why) {
		o.code = RD_KAFKA_RESP_ERR__FAIL;
		snprintf(o.why, sizeof o.why, "aborted at a lane's request: %.400s", abort_why);
		goto abort;
	}
	if (n > 0) {
		rd_kafka_resp_err_t fe = rd_kafka_flush(t->rk, CALL_MS);
		if (fe) {
			o.code = fe;
			snprintf(o.why, sizeof o.why, "flush: %s", rd_kafka_err2str(fe));
			goto abort;
		}
		at[0] = clock_ms();
		int owned = check_owned(t, parts, n, o.why, sizeof o.why);
		at[1] = clock_ms();
		if (owned != 0) {
			o.code = owned == -1 ? RD_KAFKA_RESP_ERR__FENCED : RD_KAFKA_RESP_ERR__TRANSPORT;
			goto abort;
		}
		stop_at(t, n);
		rd_kafka_topic_partition_list_t *offs = fence_offsets(parts, n);
		if (cgmd && offs && offs->cnt > 0 &&
		    (e = rd_kafka_send_offsets_to_transaction(t->rk, offs, cgmd, CALL_MS))) {
			if (txn_fenced_error(rd_kafka_error_code(e)))
				snprintf(o.why, sizeof o.why, "fenced: another replica that took partitions "
				         "of this transaction fenced its transactional.id (%.300s)",
				         rd_kafka_error_string(e));
			else if (group_fence_error(rd_kafka_error_code(e)))
				snprintf(o.why, sizeof o.why, "fenced by the consumer group: it refused the "
				         "transaction's offsets (%.300s): this replica's membership or "
				         "generation is no longer the group's, its partitions may have a new "
				         "owner", rd_kafka_error_string(e));
			else /* (a record's failure makes the transaction abortable) */
				snprintf(o.why, sizeof o.why, "%.400s", rd_kafka_error_string(e));
		}
		if (offs)
			rd_kafka_topic_partition_list_destroy(offs);
		at[2] = clock_ms();
		if (e)
			goto error;
	}
	/* a commit that timed out may have reached the coordinator: retried,
	 * never aborted, until it says how it ended (reported as aborted, its
	 * runs would be sent again beside a committed copy). Stopping, the
	 * lanes end with the hub and the next owner's fence settles it, its
	 * marker says how. */
	while ((e = rd_kafka_commit_transaction(t->rk, CALL_MS))) {
		if (!rd_kafka_error_is_retriable(e) || rd_kafka_error_is_fatal(e) ||
		    rd_kafka_error_txn_requires_abort(e) || txn_stopping(t))
			break;
		log_warn("forward: transactional.id %s: committing: %s; trying again", t->id,
		         rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
	}
	if (!e) {
		o.committed = 1;
		pthread_mutex_lock(&t->mu);
		t->commits++;
		int64_t opened = t->opened, closed = t->closed_at;
		pthread_mutex_unlock(&t->mu);
		rd_kafka_poll(t->rk, 0);
		if (n > 0) { /* where a transaction's time goes (docs/benchmark.md) */
			at[3] = clock_ms();
			log_debug("forward: transactional.id %s: committed %zu part(s): open %lld ms, "
			          "ready %lld ms later, flushed in %lld ms, owned in %lld, offsets in "
			          "%lld, committed in %lld", t->id, n, (long long)(closed - opened),
			          (long long)(began - closed), (long long)(at[0] - began),
			          (long long)(at[1] - at[0]), (long long)(at[2] - at[1]),
			          (long long)(at[3] - at[2]));
		}
		goto outcomes;
	}
	snprintf(o.why, sizeof o.why, "%s", rd_kafka_error_string(e));
error:
	o.code = rd_kafka_error_code(e);
	if (rd_kafka_error_is_fatal(e) || txn_fenced_error(o.code)) {
		renew = 1;
		log_error("forward: transactional.id %s: the transaction of %zu part(s) is aborted: "
		          "%s; a new producer takes the transactional.id", t->id, n, o.why);
		rd_kafka_error_destroy(e);
		e = NULL;
		goto outcomes;
	}
	rd_kafka_error_destroy(e);
	e = NULL;
abort:
	if (abort_open(t, o.why, sizeof o.why) != 0)
		renew = 1;
	log_msg(abort_why ? LOG_DEBUG : LOG_WARN, "forward: transactional.id %s: the transaction of "
	        "%zu part(s) is aborted: %s", t->id, n, o.why);
outcomes:
	if (renew)
		drop_producer(t);
	pthread_mutex_lock(&t->mu);
	o.record_fault = !o.committed && t->batch_fault != RD_KAFKA_RESP_ERR_NO_ERROR;
	t->batch_fault = RD_KAFKA_RESP_ERR_NO_ERROR;
	/* a refused topic, aborted or (librdkafka 2.0) fatal at the commit, or
	 * a batch the broker failed for a record in it: the next transactions
	 * take one lane each, to find whose it is */
	if (!o.committed && (o.code == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
	                     o.record_fault) && n > 1)
		t->solo_left = n * SOLO_PER_PART;
	for (size_t i = 0; i < n; i++) {
		int lost = parts[i]->out.lost;
		parts[i]->out = o;
		parts[i]->out.lost = lost;
		parts[i]->out.solo = n == 1;
		parts[i]->done = 1;
	}
	t->nparts = t->nready = 0;
	t->abort_wanted = 0;
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

/* Wait (under mu) until the open transaction is to close: no sooner than
 * the interval after the last one closed, and once a part joined (the lane
 * that wanted it); then until every part is ready. */
static void wait_close(txn *t)
{
	for (;;) {
		int64_t now = clock_ms(), due = t->last_close + t->interval_ms;
		/* (lanes reading a run are waited for, at most an interval) */
		int all_in = t->coming == 0 || now >= t->opened + t->interval_ms;
		if (t->open && (t->stopping || t->abort_wanted || (t->solo_left && t->nparts > 0) ||
		                (now >= due && ((t->nparts > 0 && all_in) || t->wanted == 0)))) {
			t->open = 0;
			t->closed_at = now;
		}
		if (!t->open && t->nready == t->nparts)
			return;
		int64_t wait = t->open && due > now ? due - now : 100;
		struct timespec ts = clock_deadline(wait < 100 ? wait : 100);
		pthread_cond_timedwait(&t->cv, &t->mu, &ts);
	}
}

static void *run(void *arg)
{
	txn *t = arg;
	int attempt = 0;
	for (;;) {
		char err[512];
		rd_kafka_error_t *e = NULL;
		/* the producer first, before a lane wants it: a transactional.id
		 * the hub may not use shows at once (txn_failing) */
		int ready = ready_producer(t, err, sizeof err) == 0;
		pthread_mutex_lock(&t->mu);
		while (ready && !t->stopping && t->wanted == 0)
			pthread_cond_wait(&t->cv, &t->mu);
		int stop = t->stopping;
		pthread_mutex_unlock(&t->mu);
		if (stop)
			break;
		if (ready && t->inited && !(e = rd_kafka_begin_transaction(t->rk))) {
			attempt = 0;
			pthread_mutex_lock(&t->mu);
			t->failing[0] = '\0';
			pthread_mutex_unlock(&t->mu);
		} else {
			if (e) {
				snprintf(err, sizeof err, "begin_transaction: %.400s", rd_kafka_error_string(e));
				if (rd_kafka_error_is_fatal(e))
					drop_producer(t);
				rd_kafka_error_destroy(e);
			}
			int64_t d = backoff_delay(++attempt, 200, 5000, backoff_random());
			pthread_mutex_lock(&t->mu);
			int changed = strcmp(t->failing, err) != 0;
			snprintf(t->failing, sizeof t->failing, "%s", err);
			pthread_mutex_unlock(&t->mu);
			log_msg(changed ? LOG_WARN : LOG_DEBUG, "forward: transactional.id %s: %s; retrying "
			        "in %lld ms%s", t->id, err, (long long)d,
			        changed ? " (the same error again is logged at debug)" : "");
			pause_ms(t, d);
			continue;
		}
		/* the group's generation as the transaction begins: a replica
		 * that loses it meanwhile cannot commit (KIP-447) */
		pthread_mutex_lock(&t->mu);
		rd_kafka_consumer_group_metadata_t *cgmd =
			t->consumer ? rd_kafka_consumer_group_metadata(t->consumer) : NULL;
		t->open = 1;
		t->opened = clock_ms();
		pthread_cond_broadcast(&t->cv);
		wait_close(t);
		t->last_close = clock_ms();
		size_t n = t->nparts;
		if (t->solo_left)
			t->solo_left--;
		char why[300];
		int abort = t->abort_wanted;
		snprintf(why, sizeof why, "%s", t->abort_why);
		pthread_mutex_unlock(&t->mu);
		end_txn(t, t->parts, n, cgmd, abort ? why : NULL);
		if (cgmd)
			rd_kafka_consumer_group_metadata_destroy(cgmd);
	}
	return NULL;
}

int txn_fence(const txhub_config *cfg, const char *id, int *refused, char *err, size_t errsz)
{
	*refused = 0;
	rd_kafka_t *rk = txn_producer_new(cfg, id, NULL, err, errsz);
	if (!rk)
		return -1;
	rd_kafka_error_t *e = rd_kafka_init_transactions(rk, CALL_MS);
	int rc = 0;
	if (e) {
		snprintf(err, errsz, "fencing transactional.id %.200s: %.250s", id,
		         rd_kafka_error_string(e));
		*refused = rd_kafka_error_code(e) ==
		           RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
		rd_kafka_error_destroy(e);
		rc = -1;
	}
	rd_kafka_destroy(rk);
	return rc;
}

txn *txn_new(const txhub_config *cfg, char *err, size_t errsz)
{
	char host[64] = "";
	if (gethostname(host, sizeof host - 1) != 0)
		snprintf(host, sizeof host, "unknown-host");
	txn *t = calloc(1, sizeof *t);
	if (!t) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	t->cfg = cfg;
	t->interval_ms = cfg->forward_transaction_interval_ms;
	t->failpoint = getenv("TXHUB_FAILPOINT");
	/* host and pid say whose it is; the random part keeps two replicas
	 * apart where hosts share a name and pids repeat (containers with the
	 * host's UTS namespace, each hub pid 1) */
	char rnd[SECRET_HEX + 1];
	if (secret_random_hex(rnd) != 0)
		snprintf(rnd, sizeof rnd, "%08lx", (unsigned long)clock_ms());
	snprintf(t->id, sizeof t->id, "txhub-%s-r-%s-%ld-%.8s", cfg->group, host, (long)getpid(),
	         rnd);
	snprintf(t->failing, sizeof t->failing, "the transactional producer (transactional.id %.300s) "
	         "is not initialised yet", t->id);
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
	if (!(t->meta = txn_producer_new(cfg, NULL, NULL, err, errsz)))
		goto fail;
	int e = pthread_create(&t->thread, NULL, run, t);
	if (e != 0) {
		snprintf(err, errsz, "cannot start the transaction thread: %s", strerror(e));
		goto fail;
	}
	return t;
fail:
	if (t->meta)
		rd_kafka_destroy(t->meta);
	pthread_mutex_destroy(&t->mu);
	pthread_cond_destroy(&t->cv);
	free(t);
	return NULL;
}

void txn_set_consumer(txn *t, rd_kafka_t *consumer)
{
	pthread_mutex_lock(&t->mu);
	t->consumer = consumer;
	pthread_mutex_unlock(&t->mu);
}

void txn_reconfigure(txn *t, const txhub_config *cfg)
{
	pthread_mutex_lock(&t->mu);
	t->interval_ms = cfg->forward_transaction_interval_ms;
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

const char *txn_id(const txn *t) { return t->id; }
rd_kafka_t *txn_meta(txn *t) { return t->meta; }

int txn_failing(txn *t, char *why, size_t whysz)
{
	pthread_mutex_lock(&t->mu);
	int f = t->failing[0] != '\0';
	if (f)
		snprintf(why, whysz, "%s", t->failing);
	pthread_mutex_unlock(&t->mu);
	return f;
}

uint64_t txn_commits(txn *t)
{
	pthread_mutex_lock(&t->mu);
	uint64_t c = t->commits;
	pthread_mutex_unlock(&t->mu);
	return c;
}

void txn_intend(txn *t)
{
	pthread_mutex_lock(&t->mu);
	t->coming++;
	pthread_mutex_unlock(&t->mu);
}

void txn_unintend(txn *t)
{
	pthread_mutex_lock(&t->mu);
	if (t->coming > 0)
		t->coming--;
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

rd_kafka_t *txn_join(txn *t, txn_part *p, int intended, int (*stop)(void *), void *arg)
{
	memset(&p->out, 0, sizeof p->out);
	p->ready = p->abort = p->done = 0;
	p->abort_why[0] = '\0';
	rd_kafka_t *rk = NULL;
	pthread_mutex_lock(&t->mu);
	t->wanted++;
	pthread_cond_broadcast(&t->cv);
	for (;;) {
		if (t->stopping)
			break;
		if (t->open && (!t->solo_left || t->nparts == 0)) {
			txn_part **np = array_grow(t->parts, &t->capparts, t->nparts + 1, sizeof *np);
			if (np) {
				t->parts = np;
				np[t->nparts++] = p;
				rk = t->rk;
				break;
			}
		}
		pthread_mutex_unlock(&t->mu);
		int s = stop(arg);
		pthread_mutex_lock(&t->mu);
		if (s)
			break;
		struct timespec ts = clock_deadline(100);
		pthread_cond_timedwait(&t->cv, &t->mu, &ts);
	}
	t->wanted--;
	if (intended && t->coming > 0)
		t->coming--;
	pthread_mutex_unlock(&t->mu);
	return rk;
}

void txn_finish(txn *t, txn_part *p, int abort, const char *why)
{
	pthread_mutex_lock(&t->mu);
	p->ready = 1;
	t->nready++;
	if (abort && !t->abort_wanted) {
		t->abort_wanted = 1;
		snprintf(t->abort_why, sizeof t->abort_why, "%s", why ? why : "");
	}
	pthread_cond_broadcast(&t->cv);
	while (!p->done)
		pthread_cond_wait(&t->cv, &t->mu);
	pthread_mutex_unlock(&t->mu);
}

void txn_stop(txn *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	t->stopping = 1;
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

void txn_free(txn *t)
{
	if (!t)
		return;
	txn_stop(t);
	pthread_join(t->thread, NULL);
	if (t->rk)
		rd_kafka_destroy(t->rk); /* (nothing open: the lanes are gone) */
	rd_kafka_destroy(t->meta);
	store_close(t->st);
	free(t->parts);
	pthread_mutex_destroy(&t->mu);
	pthread_cond_destroy(&t->cv);
	free(t);
}
