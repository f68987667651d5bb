/* rewind.h: noticing a database that lost its last transactions.
 *
 * A PostgreSQL primary that fails over to an asynchronous standby, or a
 * database restored to a point in time, comes back without its last
 * transactions: for a control partition, txhub.partitions then holds an
 * older next_offset (and perhaps an older epoch, or no row at all) than
 * the replica that owns it last wrote. The replica remembers, per owned
 * partition, what it last read from or wrote to that row (a rewind_table)
 * and compares it with what the database holds (rewind_judge): a database
 * behind it has lost a tail, which the replica reads again from Kafka.
 *
 * Pure logic, no I/O: unit-tested in tests/unit/test_rewind.c. A table is
 * used by one thread (the store that owns it). */
#ifndef TXHUB_REWIND_H
#define TXHUB_REWIND_H

#include <stddef.h>
#include <stdint.h>

#include "topics.h"

#define REWIND_ORIGIN_MAX 64

/* What this replica last read from or wrote to a partition's row. */
typedef struct {
	tp_key tp;
	int64_t epoch;       /* the epoch it took */
	int64_t next_offset; /* the highest next_offset it read or wrote; -1: none */
	char origin[REWIND_ORIGIN_MAX]; /* the row's fwd_origin when taken */
} rewind_mark;

typedef struct {
	rewind_mark *marks;
	size_t n, cap;
} rewind_table;

/* A partition was taken (its row read back at epoch, next_offset, origin):
 * forget what was known before. Returns 0, or -1 when out of memory (the
 * partition is then not watched, as before this module). */
int rewind_taken(rewind_table *t, tp_key tp, int64_t epoch, int64_t next_offset,
                 const char *origin);

/* A batch moved the partition's next_offset on (never back). */
void rewind_advance(rewind_table *t, tp_key tp, int64_t next_offset);

/* The partition's next_offset was set to next_offset by this replica on
 * purpose, back too (the control partition was truncated: gap.h). */
void rewind_set_offset(rewind_table *t, tp_key tp, int64_t next_offset);

/* The mark of a partition, or NULL when it was never taken here. */
const rewind_mark *rewind_find(const rewind_table *t, tp_key tp);

void rewind_table_free(rewind_table *t);

/* A partition's row as the database holds it now. */
typedef struct {
	int present;         /* 0: no row at all */
	int64_t epoch;
	int64_t next_offset; /* -1: none */
	char origin[REWIND_ORIGIN_MAX];
} rewind_row;

typedef enum {
	REWIND_SAME = 0,     /* the database holds what this replica wrote, or more */
	REWIND_FENCED,       /* a newer epoch: another replica took the partition */
	REWIND_BEHIND,       /* same epoch, an older next_offset: the last batches are gone */
	REWIND_OLDER_EPOCH,  /* an older epoch: even the take is gone */
	REWIND_NO_ROW,       /* no row at all: the database lost everything of it */
	REWIND_OTHER_ORIGIN, /* another fwd_origin: the row was made again (recreated) */
} rewind_verdict;

/* Compare what the database holds (db) with what this replica knows (k,
 * owned at epoch). A verdict above REWIND_FENCED means the database lost
 * a tail of this partition. */
rewind_verdict rewind_judge(const rewind_mark *k, int64_t epoch, const rewind_row *db);

/* A few words for logs and alerts: "the batches after offset N are gone". */
const char *rewind_verdict_text(rewind_verdict v);

#endif
