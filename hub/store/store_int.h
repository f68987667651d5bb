/* store_int.h: what the parts of the store share (store.c, the base: the
 * connection, results and errors, forward lists, the ownership locks;
 * store_owners.c, store_apply.c, store_write.c, store_forwards.c,
 * store_lanes.c, store_sample.c, store_checks.c, store_order.c). Internal
 * to hub/store/: the rest of the hub uses store.h. */
#ifndef TXHUB_STORE_INT_H
#define TXHUB_STORE_INT_H

#include <libpq-fe.h>

#include "fold.h"
#include "rewind.h"
#include "sbuf.h"
#include "store.h"

struct store {
	PGconn *conn;
	char *conninfo;
	int64_t first_after_ms; /* default check-back delay */
	int64_t lease_ms;       /* how long a forward in flight is leased */
	rewind_table known;     /* what this store last read or wrote per partition */
	int reconnected;        /* the connection was made again since last asked */
	int enforce;            /* tenants.enforce (fold.h: a decision of another tenant) */
	int order_by_key;       /* forward.order = key (store_set_order_by_key) */
	int retries_block;      /* ... in at_least_once: SQL_RETRIES_ABOVE_MARK */
	/* ... and then the messages the last store_apply() made scheduled (delayed
	 * delivery): store_take_scheduled() */
	store_forward_list scheduled;
	int copy_refused;       /* COPY into txhub.message_rows refused (row-level security
	                         * applies to this role): new rows go in by INSERT */
};

/* How a write holds the ownership rows of its partitions. */
typedef enum {
	/* the batch, which moves next_offset: one at a time per partition */
	OWNED_EXCLUSIVE,
	/* every other write of state: beside each other, never beside a take */
	OWNED_SHARED,
	/* delivery reports: beside anything but a change of the row's key, so
	 * they never wait for the batch; the epoch is still checked, but a take
	 * may complete before the report commits. A report states a fact (this
	 * delivery happened, this attempt failed) that stays true whoever owns
	 * the partition, and it only ever moves a pending row on. */
	OWNED_CHECK_ONLY,
} owned_lock;

/* In the open transaction, lock the ownership rows of own[0..nown) in
 * (topic, partition) order (see owned_lock) and return in *kept
 * (allocated, caller frees, also on failure) those still at their epoch.
 * A new owner's take waits for the exclusive and shared locks, and a write
 * that comes after the take sees the new epoch: so such a write either
 * lands before the hand-over, where the new owner sees it, or not at all. */
/* A locked partition row: its next forward sequence, what rewind_judge()
 * compares, and what its last progress marker said was forwarded
 * (migration 0006). */
typedef struct {
	int64_t next_seq;
	rewind_row db;
	int64_t sent_upto;   /* -1: no marker noted */
	int64_t unsure_from; /* -1: none */
	int64_t dead[STORE_MARKER_DEAD_MAX];
	size_t ndead;
} owned_row;

/* Columns, in this order, of every query that returns forwards (binary). */
#define FORWARD_COLUMNS                                                         \
	"m.biz_id, m.message_key, m.payload, m.forward_topic, m.forward_key, "  \
	"m.forward_headers::text, m.src_partition, m.src_offset, m.send_attempts, "       \
	"floor(extract(epoch FROM now() - m.updated_at) * 1000)::bigint, "              \
	"coalesce(m.fwd_seq, 0), m.src_topic, m.tenant, m.traceparent, m.tracestate, "   \
	"coalesce(m.trace_id, '')"

/* A message row (alias prefix m: "" or "m.") of the partitions given as
 * topics t and partitions p (array parameters): the partition numbers
 * first, which the partial indexes on src_partition serve, then the
 * pairs. */
#define OF_PARTS(m, t, p)                                                        \
	m "src_partition = ANY(" p "::int[]) AND (" m "src_topic, " m "src_partition) IN " \
	"(SELECT * FROM unnest(" t "::text[], " p "::int[]))"

store_rc store_classify(PGconn *conn, const PGresult *res, char *err, size_t errsz);

store_rc store_exec_simple(store *st, const char *sql, char *err, size_t errsz);

void store_rollback(store *st);

PGresult *store_exec_params(store *st, const char *sql, int n, const char *const *vals,
                             int fmt);

store_rc store_exec_command(store *st, const char *sql, int n, const char *const *vals,
                             char *err, size_t errsz);

int store_collect_forwards(const PGresult *r, int first, int flag, store_forward_list *out);

int store_cmp_forward(const void *a, const void *b);

tp_key store_row_tp(const PGresult *r, int row);

/* Column col of row as a NUL-terminated copy (binary or text results; NULL
 * for SQL NULL, and when out of memory). */
char *store_col_text(const PGresult *r, int row, int col);

void store_owned_arrays(sbuf *tb, sbuf *pb, sbuf *eb, const owned_part *own, size_t n);

int64_t store_epoch_of(const owned_part *own, size_t nown, tp_key tp);

store_rc store_lock_owned_seq(store *st, const owned_part *own, size_t nown, owned_lock mode,
                               owned_part **kept, size_t *nkept, owned_row *rows, char *err,
                               size_t errsz);

store_rc store_begin_locked(store *st, owned_lock mode, const owned_part *own, size_t nown,
                             owned_part **kept, size_t *nkept, char *err, size_t errsz);

store_rc store_begin_owned(store *st, const owned_part *own, size_t nown, owned_part **kept,
                            size_t *nkept, char *err, size_t errsz);

store_rc store_run_owned(store *st, const owned_part *own, size_t nown, const char *sql,
                          const char *const *extra, int nextra, int fmt, PGresult **res,
                          size_t *nkept, char *err, size_t errsz);

store_rc store_arrays_ok(const sbuf *w, size_t n, char *err, size_t errsz);

store_rc store_not_the_datas(const PGresult *r, store_rc rc, char *err, size_t errsz);

store_rc store_copy_rows(store *st, const fold *f, const int64_t *seq,
                          const unsigned char *sent, const store_record *recs, PGresult **res,
                          char *err, size_t errsz);

store_rc store_write_messages(store *st, const fold *f, const int64_t *seq,
                               const unsigned char *sent, const store_record *recs,
                               PGresult **ins, PGresult **upd, char *err, size_t errsz);

store_rc store_write_conflicts(store *st, const fold *f,
                                const store_record *recs, char *err, size_t errsz);

store_rc store_write_rejected(store *st, const store_record *recs, size_t n, char *err,
                               size_t errsz);

#endif
