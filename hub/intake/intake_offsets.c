/* intake_offsets.c: the consumer group's committed offsets (see
 * intake_offsets.h): committed after PostgreSQL's commit, at most once a
 * second, each with this hub's database as metadata; read on assignment to
 * refuse partitions last worked against another database. */
#include "intake_offsets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "clock.h"
#include "intake_state.h"
#include "intake_trouble.h"
#include "log.h"

/* ---- offsets committed to the group, with this hub's database ---- */

void intake_done_reset(intake *in, tp_key p, int64_t offset)
{
	rd_kafka_topic_partition_t *e =
		rd_kafka_topic_partition_list_find(in->done, tp_topic(p), tp_part(p));
	if (!e)
		e = intake_list_add(in->done, p);
	e->offset = offset;
}

void intake_done_set(intake *in, tp_key p, int64_t offset)
{
	rd_kafka_topic_partition_t *e =
		rd_kafka_topic_partition_list_find(in->done, tp_topic(p), tp_part(p));
	if (!e) {
		e = intake_list_add(in->done, p);
		e->offset = offset;
	} else if (offset > e->offset) {
		e->offset = offset;
	}
}

/* A commit's outcome (the synchronous ones', and the background ones'
 * through offset_commit_cb): what failed for a partition still owned is
 * noted again for the next commit; a failure is logged when it changes. */
static void commit_result(intake *in, rd_kafka_resp_err_t err,
                          const rd_kafka_topic_partition_list_t *offsets)
{
	if (err == RD_KAFKA_RESP_ERR__NO_OFFSET)
		return;
	if (err == RD_KAFKA_RESP_ERR__ASSIGNMENT_LOST) {
		/* expected after a lost assignment: the group has moved on, and
		 * PostgreSQL holds where each partition stands */
		log_info("intake: not committing offsets of lost partitions (their new owner reads "
		         "on from txhub.partitions)");
		return;
	}
	const char *why = err ? rd_kafka_err2str(err) : NULL;
	for (int i = 0; offsets && i < offsets->cnt; i++) {
		const rd_kafka_topic_partition_t *e = &offsets->elems[i];
		if (!err && !e->err) {
			if (in->unreadable) /* (committing takes Read on the topic too) */
				intake_note_readable(in, intake_elem_tp(e));
			continue;
		}
		if (!why)
			why = rd_kafka_err2str(e->err);
		if (owned_has(in->owned, intake_elem_tp(e)))
			intake_done_set(in, intake_elem_tp(e), e->offset);
	}
	if (why && strcmp(why, in->commit_err) != 0) {
		log_warn("intake: committing offsets to the group: %s; tried again at the next commit "
		         "(PostgreSQL holds where each partition stands)", why);
		snprintf(in->commit_err, sizeof in->commit_err, "%s", why);
	} else if (!why && in->commit_err[0]) {
		log_info("intake: committing offsets to the group succeeds again");
		in->commit_err[0] = '\0';
	}
}

void intake_offset_commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                             rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
	(void)rk;
	commit_result(opaque, err, offsets); /* (served by the consumer poll: the loop's thread) */
}

/* Commit the offsets noted for owned partitions, each with this hub's
 * database as metadata; in the background (async) or now. */
static void commit_done(intake *in, int async)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(in->done->cnt + 1);
	for (int i = 0; i < in->done->cnt; i++) {
		const rd_kafka_topic_partition_t *d = &in->done->elems[i];
		if (!owned_has(in->owned, intake_elem_tp(d)))
			continue; /* revoked or fenced since: its owner commits it */
		rd_kafka_topic_partition_t *e =
			intake_list_add(l, intake_elem_tp(d));
		e->offset = d->offset;
		if (in->metadata && (e->metadata = strdup(in->metadata)))
			e->metadata_size = strlen(in->metadata);
	}
	rd_kafka_topic_partition_list_destroy(in->done);
	in->done = rd_kafka_topic_partition_list_new(8);
	if (l->cnt > 0) {
		rd_kafka_resp_err_t e = rd_kafka_commit(in->rk, l, async);
		if (!async || e)
			commit_result(in, e, l);
	}
	rd_kafka_topic_partition_list_destroy(l);
}

void intake_commit_due(intake *in)
{
	int64_t now = clock_ms();
	if (now < in->next_commit_ms || in->done->cnt == 0)
		return;
	in->next_commit_ms = now + COMMIT_EVERY_MS;
	commit_done(in, 1);
}

void intake_commit(intake *in) { commit_done(in, 0); }

/* ---- partitions refused: last worked against another database ---- */

static refusal *refused_find(intake *in, tp_key p)
{
	for (size_t i = 0; i < in->nrefused; i++)
		if (in->refused[i].tp == p)
			return &in->refused[i];
	return NULL;
}

int intake_refuse(intake *in, tp_key p, const dbid *other, const char *why)
{
	static const dbid unknown;
	const dbid *o = other ? other : &unknown;
	refusal *r = refused_find(in, p);
	int news = !r || dbid_known(&r->other) != dbid_known(o) ||
	           (dbid_known(o) && !dbid_equal(&r->other, o));
	if (!r) {
		refusal *n = array_grow(in->refused, &in->caprefused, in->nrefused + 1, sizeof *n);
		if (!n) {
			/* then it is assigned here and read by nobody: unread is safe */
			log_error("intake: out of memory refusing " TP_FMT, TP_ARG(p));
			return 0;
		}
		in->refused = n;
		r = &in->refused[in->nrefused++];
		r->tp = p;
	}
	r->other = *o;
	snprintf(r->why, sizeof r->why, "%s", dbid_known(o) ? "" : why);
	return news;
}

void intake_unrefuse(intake *in, tp_key p)
{
	size_t k = 0;
	for (size_t i = 0; i < in->nrefused; i++)
		if (in->refused[i].tp != p)
			in->refused[k++] = in->refused[i];
	in->nrefused = k;
}

int intake_may_take(dbid_verdict v) { return v != DBID_OTHER; }

int intake_read_standing(intake *in, const tp_key *parts, size_t n, intake_standing *out,
                         char *err, size_t errsz)
{
	memset(out, 0, n * sizeof *out);
	for (size_t i = 0; i < n; i++)
		out[i].committed = -1;
	if (!in->metadata || n == 0)
		return 0;
	dbid adopt;
	int adopting = dbid_parse(in->cfg->pg_adopt_from, &adopt) == 0;
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)n);
	for (size_t i = 0; i < n; i++)
		intake_list_add(l, parts[i]);
	rd_kafka_resp_err_t e = rd_kafka_committed(in->rk, l, COMMITTED_TIMEOUT_MS);
	for (size_t i = 0; !e && i < n; i++) {
		const rd_kafka_topic_partition_t *p = &l->elems[i];
		if ((e = p->err))
			break;
		out[i].committed = p->offset >= 0 ? p->offset : -1;
		out[i].verdict = dbid_judge(&in->self, adopting ? &adopt : NULL, p->metadata,
		                            p->metadata_size, &out[i].other);
	}
	rd_kafka_topic_partition_list_destroy(l);
	if (e)
		snprintf(err, errsz, "reading the group's committed offsets: %s", rd_kafka_err2str(e));
	return e ? -1 : 0;
}

size_t intake_refusals(const intake *in, char *why, size_t whysz, int *mismatch)
{
	*mismatch = 0;
	if (whysz)
		why[0] = '\0';
	if (in->nrefused == 0)
		return 0;
	const refusal *first = NULL;
	tp_key parts[32] = {0};
	size_t np = 0;
	for (size_t i = 0; i < in->nrefused; i++)
		if (dbid_known(&in->refused[i].other) && !first)
			first = &in->refused[i];
	for (size_t i = 0; i < in->nrefused && np < 32; i++)
		if (first ? dbid_equal(&in->refused[i].other, &first->other) : 1)
			parts[np++] = in->refused[i].tp;
	char named[256], a[200], b[200], f[128];
	log_partitions(parts, np, named, sizeof named);
	if (!first) {
		snprintf(why, whysz, "%s not read for now: cannot tell which database %s last "
		         "worked against (%s); checked again every 5 s", named,
		         np == 1 ? "it was" : "they were", in->refused[0].why);
		return in->nrefused;
	}
	*mismatch = 1;
	snprintf(why, whysz, "%s refused: last worked against %s, while this hub works "
	         "against %s. Two databases behind consumer group \"%s\" split transactions "
	         "between them (a prepare in one, its decision in the other): point every hub of "
	         "the group at one database (pg); if this database takes over from the other on "
	         "purpose (a move, a restore into a new cluster), set pg.adopt_from = %s on this "
	         "hub. Nothing of %s is read or applied until then", named,
	         dbid_describe(&first->other, a, sizeof a), dbid_describe(&in->self, b, sizeof b),
	         in->cfg->group, dbid_format(&first->other, f, sizeof f), np == 1 ? "it" : "them");
	return in->nrefused;
}

void intake_log_refusals(const intake *in)
{
	char why[1200];
	int mismatch;
	if (intake_refusals(in, why, sizeof why, &mismatch) > 0) {
		if (mismatch)
			log_error("intake: %s", why);
		else
			log_warn("intake: %s", why);
	}
}

size_t intake_recheck(intake *in, tp_key *accept, size_t max)
{
	size_t n = in->nrefused, k = 0;
	if (n == 0)
		return 0;
	tp_key *ps = calloc(n + 1, sizeof *ps);
	intake_standing *st = calloc(n + 1, sizeof *st);
	char why[256];
	int news = 0;
	if (!ps || !st)
		goto done;
	for (size_t i = 0; i < n; i++)
		ps[i] = in->refused[i].tp;
	int rc = intake_read_standing(in, ps, n, st, why, sizeof why);
	for (size_t i = 0; i < n; i++) {
		if (rc == 0 && intake_may_take(st[i].verdict) && k < max)
			accept[k++] = ps[i];
		else if (rc == 0)
			news |= intake_refuse(in, ps[i], &st[i].other, "");
		else if (!dbid_known(&refused_find(in, ps[i])->other))
			intake_refuse(in, ps[i], NULL, why); /* (a mismatch stays one) */
	}
	if (news)
		intake_log_refusals(in);
done:
	free(ps);
	free(st);
	return k;
}

void intake_ack(intake *in, const intake_batch *b)
{
	/* the highest offset per partition is enough: commit offset + 1 */
	for (size_t i = 0; i < b->n; i++)
		intake_done_set(in, b->recs[i].tp, b->msgs[i]->offset + 1);
}

