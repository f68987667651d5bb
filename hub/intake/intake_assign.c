/* intake_assign.c: see intake_assign.h. */
#include "intake_assign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "intake_offsets.h"
#include "intake_state.h"
#include "log.h"
#include "metrics.h"

/* Own a partition taken in PostgreSQL. */
static void take_owned(intake *in, const owned_part *o)
{
	metrics_control_records_lost(o->tp, 0); /* the series, at 0 */
	if (owned_take(in->owned, o) != 0)
		/* not worked on, so nothing is lost: its records are dropped
		 * unread and the next owner reads them */
		log_error("intake: out of memory tracking " TP_FMT, TP_ARG(o->tp));
}

static int cmp_tp(const void *a, const void *b)
{
	tp_key x = *(const tp_key *)a, y = *(const tp_key *)b;
	return (x > y) - (x < y);
}

static void fenced_add(intake *in, tp_key p)
{
	if (intake_tp_in(in->fenced, in->nfenced, p))
		return;
	tp_key *n = array_grow(in->fenced, &in->capfenced, in->nfenced + 1, sizeof *n);
	if (!n) {
		/* it is then only taken back by the next assignment */
		log_error("intake: out of memory tracking fenced " TP_FMT, TP_ARG(p));
		return;
	}
	in->fenced = n;
	in->fenced[in->nfenced++] = p;
	qsort(in->fenced, in->nfenced, sizeof *in->fenced, cmp_tp);
}

static void fenced_remove(intake *in, tp_key p)
{
	size_t k = 0;
	for (size_t i = 0; i < in->nfenced; i++)
		if (in->fenced[i] != p)
			in->fenced[k++] = in->fenced[i];
	in->nfenced = k;
}

/* Partition p (re)started at offset: no longer stalled. */
static void slot_start(intake *in, tp_key p, int64_t offset)
{
	slot *s = intake_slot_find(in, p);
	int unreadable = s && s->unreadable; /* (librdkafka says so once) */
	if (!s) {
		slot *n = array_grow(in->slots, &in->capslots, in->nslots + 1, sizeof *n);
		if (!n) {
			/* only an eager restart of another partition asks for it: it
			 * then starts this one at the group's committed offset */
			log_error("intake: out of memory tracking " TP_FMT, TP_ARG(p));
			return;
		}
		in->slots = n;
		s = &in->slots[in->nslots++];
	}
	memset(s, 0, sizeof *s);
	s->tp = p;
	s->start = offset;
	s->unreadable = unreadable;
}

static void slot_drop(intake *in, tp_key p)
{
	size_t k = 0;
	for (size_t i = 0; i < in->nslots; i++)
		if (in->slots[i].tp != p)
			in->slots[k++] = in->slots[i];
	in->nslots = k;
}

static void set_paused(intake *in, const tp_key *parts, size_t n, int pause)
{
	if (n == 0)
		return;
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n);
	for (size_t i = 0; i < n; i++)
		intake_list_add(l, parts[i]);
	rd_kafka_resp_err_t e = pause ? rd_kafka_pause_partitions(in->rk, l)
	                              : rd_kafka_resume_partitions(in->rk, l);
	if (e)
		log_warn("intake: %s partitions: %s", pause ? "pausing" : "resuming",
		         rd_kafka_err2str(e));
	rd_kafka_topic_partition_list_destroy(l);
}

/* Add parts to the assignment (add) or take them out, as the group's
 * protocol wants it: incrementally when cooperative, all at once when
 * eager. */
static void change_assignment(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts, int coop,
                              int add)
{
	if (coop) {
		rd_kafka_error_t *e = add ? rd_kafka_incremental_assign(rk, parts)
		                          : rd_kafka_incremental_unassign(rk, parts);
		if (e) {
			log_error("intake: incremental %s: %s", add ? "assign" : "unassign",
			          rd_kafka_error_string(e));
			rd_kafka_error_destroy(e);
		}
	} else {
		rd_kafka_resp_err_t e = rd_kafka_assign(rk, add ? parts : NULL);
		if (e)
			log_error("intake: %s: %s", add ? "assign" : "unassign", rd_kafka_err2str(e));
	}
}

/* Give every element of l without an offset (< 0: PostgreSQL has none) the
 * group's committed offset, or RD_KAFKA_OFFSET_BEGINNING when the group has
 * none either: a new group on a new database reads from the start, which
 * is no loss. When the broker does not answer, it stays
 * RD_KAFKA_OFFSET_INVALID: librdkafka asks for it again, and reports a
 * partition without one as an offset out of range (serve_stalled). */
static void group_offsets(intake *in, rd_kafka_topic_partition_list_t *l)
{
	rd_kafka_topic_partition_list_t *ask = rd_kafka_topic_partition_list_new(l->cnt);
	for (int i = 0; i < l->cnt; i++)
		if (l->elems[i].offset < 0 && l->elems[i].offset != INTAKE_FROM_BEGINNING) {
			l->elems[i].offset = RD_KAFKA_OFFSET_INVALID;
			rd_kafka_topic_partition_list_add(ask, l->elems[i].topic, intake_elem_tp(&l->elems[i]));
		}
	rd_kafka_resp_err_t e = ask->cnt ? rd_kafka_committed(in->rk, ask, 5000) : 0;
	if (e)
		log_warn("intake: asking for the group's committed offsets: %s (librdkafka asks again)",
		         rd_kafka_err2str(e));
	for (int i = 0; !e && i < ask->cnt; i++) {
		rd_kafka_topic_partition_t *a = &ask->elems[i];
		if (a->err)
			continue;
		rd_kafka_topic_partition_list_find(l, a->topic, a->partition)->offset =
			a->offset >= 0 ? a->offset : RD_KAFKA_OFFSET_BEGINNING;
	}
	rd_kafka_topic_partition_list_destroy(ask);
}

/* Where a partition is read from, for the log: next (PostgreSQL's, or -1)
 * and the offset given to the consumer. */
static const char *start_text(int64_t next, int64_t offset, char *buf, size_t bufsz)
{
	if (next >= 0)
		snprintf(buf, bufsz, "offset %lld (txhub.partitions)", (long long)next);
	else if (offset >= 0)
		snprintf(buf, bufsz, "offset %lld (the group's committed offset)", (long long)offset);
	else if (offset == RD_KAFKA_OFFSET_BEGINNING)
		snprintf(buf, bufsz, "the beginning (no offset in txhub.partitions or the group yet)");
	else
		snprintf(buf, bufsz, "the group's committed offset");
	return buf;
}

/* Start an assigned partition taken in PostgreSQL (own, next: what the
 * take returned; st: where it stands in the group): from PostgreSQL's next
 * offset, else the group's committed one. One whose metadata is not this
 * hub's database (none yet, or adopted) gets this hub's identity committed
 * at once with its starting offset (the log's first one when nothing says
 * where to start: what auto.offset.reset = earliest would read). */
static void start_partition(intake *in, rd_kafka_topic_partition_t *e, const owned_part *own,
                            int64_t next, const intake_standing *st)
{
	tp_key p = own->tp;
	int64_t start = next >= 0 ? next : st->committed, lo, hi;
	int stamp = in->metadata && st->verdict != DBID_SAME;
	if (start < 0 && stamp &&
	    rd_kafka_query_watermark_offsets(in->rk, e->topic, e->partition, &lo, &hi,
	                                     COMMITTED_TIMEOUT_MS) == RD_KAFKA_RESP_ERR_NO_ERROR)
		start = lo;
	/* records before next_offset are in PostgreSQL already; without one,
	 * the group's committed offset, else the beginning (a new group on a
	 * new database: no loss to report) */
	e->offset = start >= 0 ? start : RD_KAFKA_OFFSET_BEGINNING;
	slot_start(in, p, e->offset);
	if (stamp && start >= 0)
		intake_done_set(in, p, start);
	take_owned(in, own);
	fenced_remove(in, p);
	intake_unrefuse(in, p);
	if (st->verdict == DBID_ADOPTED) {
		char a[200];
		log_warn("intake: " TP_FMT " was last worked against %s, which pg.adopt_from "
		         "names: taken over", TP_ARG(p), dbid_describe(&st->other, a, sizeof a));
	}
	char from[128];
	/* (the beginning may be given as the log's first offset: see above) */
	log_info("intake: " TP_FMT " taken at epoch %lld, reading from %s", TP_ARG(p),
	         (long long)own->epoch,
	         start_text(next, st->committed >= 0 ? st->committed : RD_KAFKA_OFFSET_BEGINNING,
	                    from, sizeof from));
}

/* New partitions: refuse those last worked against another database (or
 * whose standing cannot be read); take the others in PostgreSQL first
 * (bumping their epochs), then start each one at the offset PostgreSQL
 * holds for it. Refused ones are assigned too, but paused and not owned:
 * nothing of them is read. */
static void on_assign(intake *in, rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts,
                      int coop)
{
	size_t n = (size_t)parts->cnt, nt = 0, nr = 0;
	tp_key *ps = calloc(n + 1, sizeof *ps), *taken = calloc(n + 1, sizeof *taken);
	tp_key *refused = calloc(n + 1, sizeof *refused);
	size_t *at = calloc(n + 1, sizeof *at); /* taken[k] is parts->elems[at[k]] */
	owned_part *own = calloc(n + 1, sizeof *own);
	int64_t *next = calloc(n + 1, sizeof *next);
	intake_standing *st = calloc(n + 1, sizeof *st);
	char why[256] = "";
	int news = 0;
	if (!ps || !taken || !refused || !at || !own || !next || !st) {
		log_error("intake: out of memory taking %zu partition(s); leaving them unread", n);
		goto done;
	}
	for (size_t i = 0; i < n; i++)
		ps[i] = intake_elem_tp(&parts->elems[i]);
	int rc = intake_read_standing(in, ps, n, st, why, sizeof why);
	for (size_t i = 0; i < n; i++) {
		if (rc == 0 && intake_may_take(st[i].verdict)) {
			at[nt] = i;
			taken[nt++] = ps[i];
		} else {
			refused[nr++] = ps[i];
			news |= intake_refuse(in, ps[i], rc == 0 ? &st[i].other : NULL, why);
		}
	}
	if (nt > 0 && in->hooks.take(in->hooks.opaque, taken, nt, own, next) != 0) {
		log_warn("intake: stopping before %zu assigned partition(s) could be taken", nt);
		goto done;
	}
	for (size_t k = 0; k < nt; k++)
		start_partition(in, &parts->elems[at[k]], &own[k], next[k], &st[at[k]]);
	change_assignment(rk, parts, coop, 1);
	/* librdkafka keeps a partition's pause across unassign and assign: a
	 * partition fenced or paused here before must be resumed explicitly;
	 * while PostgreSQL is away the new ones wait like the rest */
	set_paused(in, taken, nt, in->paused);
	set_paused(in, refused, nr, 1);
	if (in->hooks.assigned)
		in->hooks.assigned(in->hooks.opaque, own, nt);
	if (news)
		intake_log_refusals(in);
done:
	free(ps);
	free(taken);
	free(refused);
	free(at);
	free(own);
	free(next);
	free(st);
}

void intake_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
	intake *in = opaque;
	int coop = strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
	if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
		log_info("intake: assigned %d partition(s) of %s (%s)", parts->cnt,
		         in->cfg->control_topic,
		         in->consumer_protocol ? "consumer protocol, incremental"
		         : coop               ? "cooperative"
		                              : "eager");
		on_assign(in, rk, parts, coop);
		return;
	}
	int lost = rd_kafka_assignment_lost(rk);
	log_info("intake: %s %d partition(s)", lost ? "lost" : "revoking", parts->cnt);
	tp_key *ps = calloc((size_t)parts->cnt + 1, sizeof *ps);
	if (ps) {
		for (int i = 0; i < parts->cnt; i++)
			ps[i] = intake_elem_tp(&parts->elems[i]);
		/* finish the work in hand for these partitions while they are ours
		 * (when lost, a new owner may have taken them already: its epoch
		 * fences off whatever we still try to write) */
		if (in->hooks.revoking)
			in->hooks.revoking(in->hooks.opaque, ps, (size_t)parts->cnt);
	}
	for (int i = 0; i < parts->cnt; i++) {
		owned_drop(in->owned, intake_elem_tp(&parts->elems[i]));
		fenced_remove(in, intake_elem_tp(&parts->elems[i]));
		slot_drop(in, intake_elem_tp(&parts->elems[i]));
		intake_unrefuse(in, intake_elem_tp(&parts->elems[i]));
		rd_kafka_topic_partition_list_del(in->done, parts->elems[i].topic,
		                                  parts->elems[i].partition);
	}
	free(ps);
	change_assignment(rk, parts, coop, 0);
}

void intake_fence(intake *in, const tp_key *parts, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!owned_drop(in->owned, parts[i]))
			continue;
		fenced_add(in, parts[i]); /* (the caller says who took it) */
	}
	set_paused(in, parts, n, 1);
}

const tp_key *intake_fenced(const intake *in, size_t *n)
{
	*n = in->nfenced;
	return in->fenced;
}

/* Start the partitions of l again at their offsets: librdkafka stopped
 * them (an offset out of range, with auto.offset.reset = error), and a
 * stopped partition cannot seek, only be assigned again. Cooperatively
 * just these; eagerly the whole assignment at once, every other partition
 * at its position (the next record it hands over) or, before it handed
 * any, where it was started. Pauses stay as they were (librdkafka keeps
 * them across assignments). */
void intake_restart(intake *in, rd_kafka_topic_partition_list_t *l)
{
	for (int i = 0; i < l->cnt; i++) {
		char at[32] = "the beginning";
		slot_start(in, intake_elem_tp(&l->elems[i]), l->elems[i].offset);
		if (l->elems[i].offset != RD_KAFKA_OFFSET_BEGINNING)
			snprintf(at, sizeof at, "offset %lld", (long long)l->elems[i].offset);
		log_info("intake: " TP_FMT " starts again at %s", TP_ARG(intake_elem_tp(&l->elems[i])),
		         at);
	}
	if (strcmp(rd_kafka_rebalance_protocol(in->rk), "COOPERATIVE") == 0) {
		change_assignment(in->rk, l, 1, 0);
		change_assignment(in->rk, l, 1, 1);
		return;
	}
	rd_kafka_topic_partition_list_t *all = NULL;
	rd_kafka_resp_err_t e = rd_kafka_assignment(in->rk, &all);
	if (!e)
		e = rd_kafka_position(in->rk, all);
	if (e) {
		log_error("intake: reading the assignment to start partitions again: %s (retried at "
		          "the next rebalance)", rd_kafka_err2str(e));
		if (all)
			rd_kafka_topic_partition_list_destroy(all);
		return;
	}
	for (int i = 0; i < all->cnt; i++) {
		rd_kafka_topic_partition_t *a = &all->elems[i];
		const rd_kafka_topic_partition_t *r = rd_kafka_topic_partition_list_find(l, a->topic,
		                                                                         a->partition);
		const slot *s = intake_slot_find(in, intake_elem_tp(a));
		if (r)
			a->offset = r->offset;
		else if (a->offset < 0)
			a->offset = s ? s->start : RD_KAFKA_OFFSET_INVALID;
	}
	change_assignment(in->rk, all, 0, 1);
	rd_kafka_topic_partition_list_destroy(all);
}

void intake_retake(intake *in, const owned_part *own, const int64_t *next_offset, size_t n)
{
	if (n == 0)
		return;
	/* PostgreSQL's next offset, or else the group's committed one
	 * (records read since the fence were dropped unacknowledged, so the
	 * consumer's position is past them) */
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n);
	rd_kafka_topic_partition_list_t *stopped = rd_kafka_topic_partition_list_new((int)n);
	tp_key *ps = calloc(n, sizeof *ps);
	for (size_t i = 0; i < n; i++)
		intake_list_add(l, own[i].tp)->offset =
			next_offset[i];
	group_offsets(in, l);
	for (size_t i = 0; i < n; i++) {
		char from[128];
		take_owned(in, &own[i]);
		fenced_remove(in, own[i].tp);
		slot_start(in, own[i].tp, l->elems[i].offset);
		intake_unrefuse(in, own[i].tp);
		if (ps)
			ps[i] = own[i].tp;
		log_info("intake: " TP_FMT " taken back at epoch %lld, reading from %s",
		         TP_ARG(own[i].tp), (long long)own[i].epoch,
		         start_text(next_offset[i], l->elems[i].offset, from, sizeof from));
	}
	/* a partition that did not seek would be read on from where the fence
	 * left it, past records never applied: fenced again, retried later;
	 * one librdkafka stopped (an offset out of range before the fence)
	 * cannot seek, but starts again */
	rd_kafka_error_t *e = rd_kafka_seek_partitions(in->rk, l, 5000);
	for (int i = 0; i < l->cnt; i++) {
		int stalled = !e && l->elems[i].err == RD_KAFKA_RESP_ERR__STATE;
		/* this hub's from now on, and back with the database's offset: a
		 * group offset past it would be taken at the next start for a
		 * database that lost transactions (hub.c, check_taken) */
		if ((stalled || (!e && !l->elems[i].err)) && l->elems[i].offset >= 0)
			intake_done_reset(in, intake_elem_tp(&l->elems[i]), l->elems[i].offset);
		if (!e && !l->elems[i].err)
			continue;
		if (stalled) {
			intake_list_add(stopped, intake_elem_tp(&l->elems[i]))->offset = l->elems[i].offset;
			continue;
		}
		log_error("intake: seeking " TP_FMT " taken back: %s", TP_ARG(intake_elem_tp(&l->elems[i])),
		          e ? rd_kafka_error_string(e) : rd_kafka_err2str(l->elems[i].err));
		owned_drop(in->owned, intake_elem_tp(&l->elems[i]));
		fenced_add(in, intake_elem_tp(&l->elems[i]));
	}
	if (e)
		rd_kafka_error_destroy(e);
	if (stopped->cnt > 0)
		intake_restart(in, stopped);
	rd_kafka_topic_partition_list_destroy(stopped);
	rd_kafka_topic_partition_list_destroy(l);
	size_t k = 0;
	for (size_t i = 0; ps && i < n; i++)
		if (owned_has(in->owned, ps[i]))
			ps[k++] = ps[i];
	if (ps)
		set_paused(in, ps, k, in->paused);
	else
		log_error("intake: out of memory resuming partitions taken back");
	free(ps);
}

static void pause_owned(intake *in, int pause)
{
	tp_key *ps = calloc(in->owned->n + 1, sizeof *ps);
	if (!ps) {
		log_error("intake: out of memory %s partitions", pause ? "pausing" : "resuming");
		return;
	}
	for (size_t i = 0; i < in->owned->n; i++)
		ps[i] = in->owned->parts[i].tp;
	set_paused(in, ps, in->owned->n, pause);
	free(ps);
	in->paused = pause;
}

void intake_pause(intake *in)
{
	if (!in->paused) {
		pause_owned(in, 1);
		log_warn("intake: reading paused until PostgreSQL takes the records in hand");
	}
}

void intake_resume(intake *in)
{
	if (in->paused) {
		pause_owned(in, 0);
		log_info("intake: reading resumed");
	}
}
