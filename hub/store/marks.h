/* marks.h: delivery marks in at_least_once (migration 0012).
 *
 * Per source partition, the forward sequences handed to the producer and
 * not reported yet. A partition's mark is the highest sequence below which
 * every sequence handed over has been reported (delivered, failed or given
 * back): the smallest one in flight minus one, or the highest handed over
 * when none is in flight. Reports that failed are written per row (the row
 * loses its sequence) in the transaction that moves the mark, so the mark
 * covers only delivered rows. Rows of the partition this tracker never saw
 * are not below it: earlier owners' rows above the stored mark lose their
 * sequence when the partition is taken (store_release_forwards), and a
 * partition whose forwards were lost before reaching the producer (out of
 * memory) is frozen: no mark until the process ends.
 *
 * Pure and single-threaded: the caller holds its lock. */
#ifndef TXHUB_MARKS_H
#define TXHUB_MARKS_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "topics.h"

typedef struct marks_part marks_part;

typedef struct {
	marks_part *parts;
	size_t n, cap;
	int frozen; /* every partition */
} marks;

/* seq (> 0) of partition handed to the producer. Returns 0, or -1 when out
 * of memory (the partition is frozen then). */
int marks_issue(marks *m, tp_key tp, int64_t seq);

/* seq of partition reported (delivered, failed or given back); one in
 * flight more than once needs as many reports. Unknown ones are ignored. */
void marks_done(marks *m, tp_key tp, int64_t seq);

/* Never move partition's mark again (something of it was lost before it
 * reached the producer). */
void marks_freeze(marks *m, tp_key tp);

/* Freeze every partition, now and to come. */
void marks_freeze_all(marks *m);

/* Whether partition is frozen (its deliveries are then recorded per row). */
int marks_frozen(const marks *m, tp_key tp);

/* The marks that moved since the last call, at most max into out; returns
 * how many. They count as written: on a failed write, marks_unsent() puts
 * them back. */
size_t marks_take(marks *m, store_mark *out, size_t max);

/* The marks of out[0..n) (from marks_take) were not written. */
void marks_unsent(marks *m, const store_mark *out, size_t n);

void marks_free(marks *m);

#endif
