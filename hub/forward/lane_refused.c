/* lane_refused.c: a forward topic Kafka refuses to put in a transaction.
 *
 * Without Write on a topic (Kafka ACLs), AddPartitionsToTxn fails with
 * TOPIC_AUTHORIZATION_FAILED for it (and OPERATION_NOT_ATTEMPTED for the
 * others of the request): the whole transaction fails, and librdkafka
 * says neither which topic nor which record (the delivery reports of an
 * aborted transaction are all "purged"). A run is a prefix of the pending
 * rows in sequence order (lane.c), so the lane finds the forward at fault
 * by halving: a refused run of n is followed by runs of at most n / 2 (a
 * committed one moves on past its rows, a refused one halves again) until
 * a refused run of one names the forward; its topic is then refused for
 * the forwards of the first refused run (they were all in a transaction
 * Kafka refused), which fail at once without another transaction. Before
 * a run of one is blamed, the progress topic (in every transaction) is
 * shown to take writes: a transaction committed since the search began, or
 * one of the last marker alone (lane_probe_progress). Each
 * refused forward is a failed attempt with its reason, as any other that
 * fails for its own sake (docs/consumers.md, Forwarding exactly once). */
#include "lane_int.h"

#include <librdkafka/rdkafka.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "log.h"

size_t lane_run_max(lane *l)
{
	if (l->search_cap && l->done_seq >= l->search_upto)
		l->search_cap = 0; /* the refused run's rows are all done */
	for (size_t i = 0; i < l->nrefused;) {
		if (l->refused[i].upto <= l->done_seq) { /* none of its rows is read again */
			free(l->refused[i].topic);
			l->refused[i] = l->refused[--l->nrefused];
		} else {
			i++;
		}
	}
	return l->singles_left ? 1 : l->search_cap ? l->search_cap : LANE_RUN_MAX;
}

rd_kafka_resp_err_t lane_refused_check(lane *l, const store_forward *f)
{
	for (size_t i = 0; i < l->nrefused; i++)
		if (f->fwd_seq <= l->refused[i].upto && strcmp(l->refused[i].topic, f->topic) == 0)
			return RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED;
	return RD_KAFKA_RESP_ERR_NO_ERROR;
}

void lane_refused_run(lane *l, const store_forward_list *list, rd_kafka_resp_err_t *failed)
{
	size_t n = list->n;
	if (n == 0)
		return;
	int first = !l->search_cap;
	if (first)
		l->search_commits = l->commits;
	if (first || l->search_upto < list->items[n - 1].fwd_seq)
		l->search_upto = list->items[n - 1].fwd_seq;
	if (n > 1) {
		l->search_cap = n / 2;
		log_msg(first ? LOG_WARN : LOG_DEBUG, "lane %d of %s: Kafka refused a topic of a transaction of %zu forward(s) "
		         "(Topic authorization failed: no Write on it?); the next go in runs of %zu "
		         "to find the one it refuses", TP_ARG(l->own.tp), n, l->search_cap);
		return;
	}
	const store_forward *f = &list->items[0];
	if (l->commits == l->search_commits && l->last_marker) {
		/* nothing committed since the search began: the progress topic
		 * may be the one refused; the lane tries it alone first */
		l->search_cap = 1;
		l->probe_due = 1;
		return;
	}
	failed[0] = RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED;
	log_warn("lane %d of %s: Kafka refuses adding %s to a transaction (Topic authorization "
	         "failed: the hub needs Write on it, docs/kafka.md: Kafka ACLs); its forwards "
	         "fail as attempts, the other topics go on", TP_ARG(l->own.tp), f->topic);
	int64_t upto = l->search_upto;
	l->search_cap = 0; /* found: the others go in full runs again */
	for (size_t i = 0; i < l->nrefused; i++)
		if (strcmp(l->refused[i].topic, f->topic) == 0) {
			if (l->refused[i].upto < upto)
				l->refused[i].upto = upto;
			return;
		}
	lane_refusal *r = array_grow(l->refused, &l->caprefused, l->nrefused + 1, sizeof *r);
	if (!r)
		return; /* (its other forwards find it out one by one) */
	l->refused = r;
	if ((r[l->nrefused].topic = strdup(f->topic))) {
		r[l->nrefused].upto = upto;
		l->nrefused++;
	}
}

static int probe_stop(void *arg) { return lane_is_stopping(arg, 1); }

int lane_probe_progress(lane *l)
{
	txn_part p;
	memset(&p, 0, sizeof p);
	p.own = l->own;
	rd_kafka_t *rk = txn_join(l->txn, &p, 0, probe_stop, l);
	if (!rk)
		return -1;
	rd_kafka_resp_err_t pe = rd_kafka_producev(
		rk, RD_KAFKA_V_TOPIC(l->progress), RD_KAFKA_V_PARTITION(l->marker_part),
		RD_KAFKA_V_KEY(l->marker_key, strlen(l->marker_key)),
		RD_KAFKA_V_VALUE(l->last_marker, strlen(l->last_marker)),
		RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
	txn_finish(l->txn, &p, pe && pe != RD_KAFKA_RESP_ERR__STATE, rd_kafka_err2str(pe));
	if (p.out.committed) {
		l->commits++;
		return 1;
	}
	if (p.out.lost) {
		lane_end_with(l, 1, p.out.why);
		return -2;
	}
	/* refused when alone in its transaction: the progress topic's fault */
	int rc = p.out.code == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED && p.out.solo ? 0 : -1;
	log_msg(rc == 0 ? LOG_ERROR : LOG_WARN, "lane %d of %s: a transaction of the progress marker "
	        "alone in %s: %s%s", TP_ARG(l->own.tp), l->progress, p.out.why,
	        rc == 0 ? " (the hub needs Write on it, docs/kafka.md: Kafka ACLs)" : "");
	return rc;
}

void lane_refused_free(lane *l)
{
	for (size_t i = 0; i < l->nrefused; i++)
		free(l->refused[i].topic);
	free(l->refused);
	l->refused = NULL;
	l->nrefused = l->caprefused = 0;
}
