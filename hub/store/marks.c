/* marks.c: delivery marks in at_least_once (see marks.h).
 *
 * A partition keeps its sequences in flight in a sorted array with a start
 * index: sequences arrive almost always in increasing order (a batch's
 * forwards, then the next batch's) and are reported almost in order, so
 * an issue appends and a report of the oldest moves the start; anything
 * else is a binary search and a memmove over what is in flight. */
#include "marks.h"

#include <stdlib.h>
#include <string.h>

#include "array.h"

struct marks_part {
	tp_key tp;
	int frozen;
	int64_t issued;  /* highest sequence handed over */
	int64_t written; /* the mark last taken */
	int64_t *seq;    /* in flight, sorted, from seq[start] to seq[end - 1] */
	size_t start, end, cap;
};

static marks_part *find(marks *m, tp_key tp, int add)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->parts[i].tp == tp)
			return &m->parts[i];
	if (!add)
		return NULL;
	marks_part *n = array_grow(m->parts, &m->cap, m->n + 1, sizeof *n);
	if (!n)
		return NULL;
	m->parts = n;
	marks_part *p = &m->parts[m->n++];
	memset(p, 0, sizeof *p);
	p->tp = tp;
	return p;
}

/* The first index in [start, end) whose sequence is >= seq. */
static size_t lower_bound(const marks_part *p, int64_t seq)
{
	size_t lo = p->start, hi = p->end;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->seq[mid] < seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int marks_issue(marks *m, tp_key tp, int64_t seq)
{
	marks_part *p = find(m, tp, 1);
	if (!p)
		return -1; /* nothing tracked for it: it never gets a mark */
	if (p->end == p->cap || (p->start > 0 && p->start == p->end)) {
		/* move what is in flight to the front, then grow if still full */
		size_t n = p->end - p->start;
		if (p->start > 0) {
			memmove(p->seq, p->seq + p->start, n * sizeof *p->seq);
			p->start = 0;
			p->end = n;
		}
		int64_t *s = array_grow(p->seq, &p->cap, p->end + 1, sizeof *s);
		if (!s) {
			p->frozen = 1;
			return -1;
		}
		p->seq = s;
	}
	size_t at = p->end > p->start && p->seq[p->end - 1] > seq ? lower_bound(p, seq) : p->end;
	memmove(p->seq + at + 1, p->seq + at, (p->end - at) * sizeof *p->seq);
	p->seq[at] = seq;
	p->end++;
	if (seq > p->issued)
		p->issued = seq;
	return 0;
}

void marks_done(marks *m, tp_key tp, int64_t seq)
{
	marks_part *p = find(m, tp, 0);
	if (!p || p->start == p->end)
		return;
	size_t at = p->seq[p->start] == seq ? p->start : lower_bound(p, seq);
	if (at == p->end || p->seq[at] != seq)
		return;
	if (at == p->start) {
		p->start++;
	} else {
		memmove(p->seq + at, p->seq + at + 1, (p->end - at - 1) * sizeof *p->seq);
		p->end--;
	}
	if (p->start == p->end)
		p->start = p->end = 0;
}

void marks_freeze(marks *m, tp_key tp)
{
	marks_part *p = find(m, tp, 1);
	if (p)
		p->frozen = 1;
	/* else: never tracked, never marked */
}

void marks_freeze_all(marks *m) { m->frozen = 1; }

int marks_frozen(const marks *m, tp_key tp)
{
	if (m->frozen)
		return 1;
	for (size_t i = 0; i < m->n; i++)
		if (m->parts[i].tp == tp)
			return m->parts[i].frozen;
	return 1; /* unknown: nothing vouches for it */
}

size_t marks_take(marks *m, store_mark *out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < m->n && n < max; i++) {
		marks_part *p = &m->parts[i];
		if (p->frozen || m->frozen)
			continue;
		int64_t upto = p->start < p->end ? p->seq[p->start] - 1 : p->issued;
		if (upto <= p->written)
			continue;
		out[n].tp = p->tp;
		out[n].upto = upto;
		n++;
		p->written = upto;
	}
	return n;
}

void marks_unsent(marks *m, const store_mark *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		marks_part *p = find(m, out[i].tp, 0);
		if (p && p->written == out[i].upto)
			p->written = 0; /* taken again next time */
	}
}

void marks_free(marks *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->parts[i].seq);
	free(m->parts);
	memset(m, 0, sizeof *m);
}
