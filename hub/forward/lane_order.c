/* lane_order.c: forward.order = key in a lane: the partition's blockers
 * read from PostgreSQL, the rows held behind them, failed rows taken out
 * of a run. */
#include "lane_int.h"

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "marker.h"
#include "order.h"
#include "store.h"

/* ---- forward.order = key (order.h) ---- */

/* The row of f is a blocker of its key now (it failed, or was held). */
static void order_noted(lane *l, const store_forward *f)
{
	if (l->order && f->key && order_note(l->order, f->src_tp, f->topic, f->key, f->src_offset) != 0)
		log_warn("lane %d of %s: out of memory noting a blocker; the next read finds it",
		         TP_ARG(l->own.tp));
}

/* Read the partition's blockers from PostgreSQL. The lane records what it
 * notes before it reads again, so nothing it noted is kept over what
 * PostgreSQL says (the read starts past every note's ORDER_STICKY_MS). */
static int order_read(lane *l, char *err, size_t errsz)
{
	store_blocker_list b = {0};
	if (store_order_blockers(l->st, &l->own, 1, 0, &b, err, errsz) != STORE_OK)
		return -1;
	tp_key tp = l->own.tp;
	order_refresh(l->order, &tp, 1, &b, clock_ms() + ORDER_STICKY_MS + 1);
	store_blocker_list_clear(&b);
	l->order_read_ms = clock_ms();
	return 0;
}

/* Whether a forward of list must wait for an earlier one of its key. */
static int order_any_blocked(lane *l, const store_forward_list *list)
{
	for (size_t i = 0; i < list->n; i++) {
		const store_forward *f = &list->items[i];
		if (f->key && order_blocked(l->order, f->src_tp, f->topic, f->key, f->src_offset))
			return 1;
	}
	return 0;
}

/* The highest sequence in list. */
static int64_t max_seq(const store_forward_list *list)
{
	int64_t m = 0;
	for (size_t i = 0; i < list->n; i++)
		if (list->items[i].fwd_seq > m)
			m = list->items[i].fwd_seq;
	return m;
}

/* Take out of list (recording them held) the forwards an earlier unsent
 * message of their key comes before. The blockers are read again, after
 * list was, when it holds a row no read of them came after: a message
 * delayed in the batch that committed the list's rows is a blocker
 * committed with them, and the run loop's word of it (reread_blockers)
 * may come only after the lane has read them. Also when one seems
 * blocked, and every second anyway (rows delayed or decided elsewhere).
 * Returns 0; 1 when PostgreSQL did not answer (list is read again after a
 * pause); -1 when the held ones could not be recorded (the lane is
 * stopping: the next owner reads them again). */
int lane_order_gate(lane *l, store_forward_list *list)
{
	char err[512];
	pthread_mutex_lock(&l->mu);
	int reread = l->reread_blockers;
	l->reread_blockers = 0;
	pthread_mutex_unlock(&l->mu);
	int64_t seen = max_seq(list);
	if (reread || seen > l->order_seen_seq || clock_ms() - l->order_read_ms >= 1000 ||
	    order_any_blocked(l, list)) {
		if (order_read(l, err, sizeof err) != 0) {
			log_warn("lane %d of %s: reading the blockers of forward keys: %s; trying again",
			         TP_ARG(l->own.tp), err);
			return 1;
		}
		if (seen > l->order_seen_seq)
			l->order_seen_seq = seen;
	}
	unsigned char *held = calloc(list->n ? list->n : 1, 1);
	if (!held)
		return -1;
	size_t nheld = 0;
	for (size_t i = 0; i < list->n; i++) {
		const store_forward *f = &list->items[i];
		if (f->key && order_blocked(l->order, f->src_tp, f->topic, f->key, f->src_offset)) {
			held[i] = 1;
			nheld++;
			order_noted(l, f); /* the later ones of its key wait too */
		}
	}
	int rc = 0;
	if (nheld > 0) {
		/* the held ones to the front, recorded, then freed */
		store_forward *sorted = malloc(list->n * sizeof *sorted);
		if (!sorted) {
			free(held);
			return -1;
		}
		size_t k = 0;
		for (size_t i = 0; i < list->n; i++)
			if (held[i])
				sorted[k++] = list->items[i];
		for (size_t i = 0; i < list->n; i++)
			if (!held[i])
				sorted[k++] = list->items[i];
		memcpy(list->items, sorted, list->n * sizeof *sorted);
		free(sorted);
		if ((rc = lane_record(l, list->items, nheld, NULL, 1)) == 0) {
			for (size_t i = 0; i < nheld; i++) {
				marker_dead_fail(&l->dead, &list->items[i]);
				store_forward_free(&list->items[i]);
			}
			memmove(list->items, list->items + nheld, (list->n - nheld) * sizeof *list->items);
			list->n -= nheld;
			log_debug("lane %d of %s: %zu forward(s) held for an earlier message of their key",
			          TP_ARG(l->own.tp), nheld);
		}
	}
	free(held);
	return rc;
}

/* forward.order = key: of the forwards failed[] marks, those an earlier
 * unsent message of their key comes before (a blocker already known, or
 * another of them earlier in the control partition) are not a failed
 * attempt of their own: they wait behind it, held, never attempted (the
 * same rule as at_least_once). Marks them in hold[] and clears them in
 * failed[]; returns how many. */
static size_t hold_behind_failed(lane *l, const store_forward_list *list,
                                 rd_kafka_resp_err_t *failed, unsigned char *hold)
{
	size_t nheld = 0;
	for (size_t i = 0; i < list->n; i++) {
		const store_forward *f = &list->items[i];
		if (!failed[i] || !f->key)
			continue;
		int behind = order_blocked(l->order, f->src_tp, f->topic, f->key, f->src_offset);
		for (size_t j = 0; j < list->n && !behind; j++) {
			const store_forward *g = &list->items[j];
			behind = j != i && failed[j] && g->key && g->src_tp == f->src_tp &&
			         g->src_offset < f->src_offset && strcmp(g->key, f->key) == 0 &&
			         strcmp(g->topic, f->topic) == 0;
		}
		hold[i] = (unsigned char)behind;
	}
	for (size_t i = 0; i < list->n; i++)
		if (hold[i])
			failed[i] = 0, nheld++;
	return nheld;
}

/* Take the forwards failed[i] marks out of list, recording them first
 * (with forward.order = key, those behind an earlier one of their key
 * recorded held instead: hold_behind_failed). Returns 0, or -1 when they
 * could not be recorded (the lane stops: the next owner sends them
 * again). */
int lane_take_out_failed(lane *l, store_forward_list *list, rd_kafka_resp_err_t *failed)
{
	size_t k = 0, nout = 0, nheld = 0;
	for (size_t i = 0; i < list->n; i++)
		nout += failed[i] != 0;
	if (nout == 0)
		return 0;
	unsigned char *hold = calloc(list->n, 1);
	/* held, then failed to the front, the others after them in order */
	store_forward *sorted = malloc(list->n * sizeof *sorted);
	rd_kafka_resp_err_t *errs = malloc(list->n * sizeof *errs);
	if (!hold || !sorted || !errs) {
		free(hold);
		free(sorted);
		free(errs);
		return -1;
	}
	if (l->order)
		nheld = hold_behind_failed(l, list, failed, hold);
	for (size_t i = 0; i < list->n; i++)
		if (hold[i])
			errs[k] = 0, sorted[k++] = list->items[i];
	for (size_t i = 0; i < list->n; i++)
		if (failed[i])
			errs[k] = failed[i], sorted[k++] = list->items[i];
	for (size_t i = 0; i < list->n; i++)
		if (!failed[i] && !hold[i])
			errs[k] = 0, sorted[k++] = list->items[i];
	memcpy(list->items, sorted, list->n * sizeof *sorted);
	free(sorted);
	free(hold);
	int rc = nheld ? lane_record(l, list->items, nheld, NULL, 1) : 0;
	if (rc == 0)
		rc = lane_record(l, list->items + nheld, nout - nheld, errs + nheld, 0);
	free(errs);
	if (rc != 0)
		return -1;
	for (size_t i = 0; i < nout; i++) {
		marker_dead_fail(&l->dead, &list->items[i]);
		order_noted(l, &list->items[i]); /* the later ones of its key wait too */
	}
	if (nheld)
		log_debug("lane %d of %s: %zu failed forward(s) held for an earlier message of their key",
		          TP_ARG(l->own.tp), nheld);
	for (size_t i = 0; i < nout; i++)
		store_forward_free(&list->items[i]);
	memmove(list->items, list->items + nout, (list->n - nout) * sizeof *list->items);
	list->n -= nout;
	memset(failed, 0, list->n * sizeof *failed);
	return 0;
}
