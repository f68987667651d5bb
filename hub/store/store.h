/* store.h: PostgreSQL, the source of truth (docs/database.md: Inspecting with psql).
 *
 * One store owns one connection and is used by one thread. Every write of
 * the hot path is batched: store_apply() turns a whole poll batch of control
 * records into one transaction of a handful of statements, whatever the
 * batch size. All SQL uses parameters; batches travel as array parameters. */
#ifndef TXHUB_STORE_H
#define TXHUB_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "dbid.h"
#include "envelope.h"
#include "metrics.h"
#include "owned.h"
#include "record.h"
#include "tenants.h"
#include "topics.h"

typedef struct store store;

/* Result classes (docs/producers.md: Envelope fields). Nothing was written unless STORE_OK. */
typedef enum {
	STORE_OK = 0,
	STORE_RETRY = 1,   /* the database's fault or a passing one: try again later */
	STORE_REFUSED = 2, /* PostgreSQL blames the data (SQLSTATE class 22 or 23) */
	STORE_FENCED = 3,  /* store_apply: a partition of the batch is no longer ours */
	STORE_REWOUND = 4, /* store_apply: the database is behind what this store wrote for a
	                    * partition of the batch (it lost its last transactions) */
} store_rc;

/* A committed message to forward, as stored. Owns its strings. */
typedef struct {
	char *biz_id;
	char *message_key;
	unsigned char *payload;
	size_t payload_len;
	char *topic;
	char *key;      /* NULL: null record key */
	char *headers;  /* JSON object text or NULL */
	tp_key src_tp;  /* its control topic and partition */
	int64_t src_offset;
	int32_t send_attempts; /* attempts that already failed */
	int64_t decided_ms;    /* clock_ms() when its decision was applied; 0: not a first send */
	int64_t fwd_seq;       /* its partition's forward sequence; 0: none yet */
	metrics_tenant tenant; /* the message's tenant, as a metrics label */
	char *traceparent;     /* its trace context (docs/consumers.md: Trace context), or NULL */
	char *tracestate;
	char trace_id[33];     /* of traceparent, "" without one: for log lines */
	int had_error;         /* its row has a last_error, which its delivery clears (a row
	                        * write beside the delivery mark: store_sequence_forwards) */
} store_forward;

typedef struct {
	store_forward *items;
	size_t n, cap;
	int incomplete; /* some forwards of a batch could not be copied (out of memory) */
} store_forward_list;

void store_forward_list_clear(store_forward_list *l);
void store_forward_free(store_forward *f);
/* A deep copy of src into dst. Returns 0, or -1 when out of memory (dst then
 * holds nothing to free). */
int store_forward_copy(store_forward *dst, const store_forward *src);

/* What a batch did, for logs, metrics and tests. */
typedef struct {
	size_t applied, rejected, conflicts, committed, noops;
	/* exactly_once, after the database lost transactions: committed again
	 * and found forwarded before by the progress marker (stored as sent),
	 * or forwarded again because the marker cannot rule that out */
	size_t recognised, maybe_duplicated;
	metrics_envelopes by; /* each record by tenant, envelope type and outcome */
} store_stats;

/* Free what a store_stats holds (by's rows); it is zeroed again. Call it
 * after every store_apply(), whatever it returned. */
void store_stats_free(store_stats *s);

/* Connect with cfg->pg (a conninfo string or URI; empty: libpq defaults).
 * Returns NULL with a reason in err. */
store *store_connect(const txhub_config *cfg, char *err, size_t errsz);
void store_close(store *st);

/* How long a forward handed to the producer stays leased (must exceed the
 * producer's delivery time-out). */
void store_set_lease(store *st, int64_t lease_ms);

/* The default delay from prepare to first check-back (a reload changed
 * checkback.first_after_ms). */
void store_set_first_after(store *st, int64_t first_after_ms);

/* Reconnect if the connection was lost. Returns STORE_OK when usable. */
store_rc store_ensure(store *st, char *err, size_t errsz);

/* The schema version the database is at (0: txhub never migrated there). */
store_rc store_schema_version(store *st, int *version, char *err, size_t errsz);

/* PostgreSQL's clock (now(), in milliseconds since the epoch): the clock the
 * due times of delayed delivery are computed on (delay_sql.h). */
store_rc store_db_now_ms(store *st, int64_t *ms, char *err, size_t errsz);

/* A control-topic partition's row in txhub.partitions, as read. */
typedef struct {
	tp_key tp;
	int64_t epoch;             /* 0: no row yet */
	char owner[128];           /* host/pid of the replica holding the epoch */
	char group[256];           /* its consumer group ("" when unknown: before 0.4) */
	int64_t heartbeat_age_ms;  /* since the owner last refreshed it; -1: never */
	int released;              /* the owner let go cleanly */
	char contested_by[256];    /* group of a fenced replica waiting for it, or "" */
	int64_t contested_age_ms;  /* since it last said so; -1: never */
	int64_t next_offset;       /* the next offset to apply; -1: none yet */
} store_partition_row;

/* A holder that refreshes its heartbeat at least this often ... */
#define STORE_HEARTBEAT_MS 5000
/* ... is taken for gone when it has not for this long. */
#define STORE_HEARTBEAT_STALE_MS 30000

/* Take ownership of partitions of the control topic: bump each one's epoch
 * and record `owner` and `group`. own[i] and next_offset[i] receive
 * partition parts[i]'s new epoch and the first offset not yet applied (-1:
 * none stored yet); prev[i] (when prev is not NULL) its row as it was
 * before. Waits for a write in progress by the previous owner to finish. */
store_rc store_take_partitions(store *st, const char *owner, const char *group,
                               const tp_key *parts, size_t n, owned_part *own,
                               int64_t *next_offset, store_partition_row *prev, char *err,
                               size_t errsz);

/* The rows of these partitions (rows[i] for parts[i]; epoch 0 where none). */
store_rc store_partition_rows(store *st, const tp_key *parts, size_t n,
                              store_partition_row *rows, char *err, size_t errsz);

/* A partition whose row is behind what this store last read or wrote: the
 * database lost its last transactions (a failover to an asynchronous
 * standby, a restore to a point in time). rewind.h. */
typedef struct {
	tp_key tp;
	int verdict;          /* a rewind_verdict above REWIND_FENCED */
	int64_t epoch;        /* the epoch this replica holds */
	int64_t known_next;   /* the next_offset it last read or wrote (-1: none) */
	int64_t db_epoch;     /* the row now: 0 and -1 when there is none */
	int64_t db_next;
} store_rewound;

/* Compare the rows of these owned partitions with what this store last
 * read or wrote for them; *out (caller frees) lists those the database
 * lost a tail of. Partitions taken by another replica are not listed. */
store_rc store_check_history(store *st, const owned_part *own, size_t nown,
                             store_rewound **out, size_t *nout, char *err, size_t errsz);

/* This replica wrote next_offset for the partition itself, outside a batch
 * (a gap in the control partition: gap_report.h): remember it, forward
 * (exact = 0: never back) or as it is (exact = 1: a truncated partition is
 * read again from its start), so that it is not taken for a database that
 * lost transactions. */
void store_note_offset(store *st, tp_key tp, int64_t next_offset, int exact);

/* 1 once after the connection was lost and made again (store_ensure):
 * the database on the other end may be another one now (a failover). */
int store_reconnected(store *st);

/* Refresh the heartbeat of the owned partitions still at their epoch, and
 * return their rows in *rows (caller frees). The others were taken by
 * another replica: *lost (caller frees) lists them. */
store_rc store_heartbeat(store *st, const owned_part *own, size_t nown,
                         store_partition_row **rows, size_t *nrows, tp_key **lost,
                         size_t *nlost, char *err, size_t errsz);

/* Which of the owned partitions are no longer at their epoch (taken by
 * another replica): *lost (caller frees), reading only. */
store_rc store_still_owned(store *st, const owned_part *own, size_t nown, tp_key **lost,
                           size_t *nlost, char *err, size_t errsz);

/* Say that a fenced replica of consumer group `group` waits for these
 * partitions, held by others at the epochs given. */
store_rc store_contest_partitions(store *st, const owned_part *held, size_t n,
                                  const char *group, char *err, size_t errsz);

/* Mark these owned partitions released (still at their epoch): a replica
 * fenced off them may take them back at once. */
store_rc store_release_partitions(store *st, const owned_part *own, size_t nown, char *err,
                                  size_t errsz);

/* Apply a batch in one transaction: state changes by the rules of
 * docs/producers.md: State rules, rejected records, conflicts, and each partition's next offset in
 * txhub.partitions. Every record's partition must be in `own` at its epoch.
 * On STORE_OK the transaction has committed and `out` holds the messages it
 * made committed, in source order (partition, offset); they are leased for
 * forwarding. On STORE_FENCED nothing was written and *lost (caller frees)
 * lists the partitions of the batch that are no longer ours. On any other
 * result nothing was written and the batch can be applied again. */
store_rc store_apply(store *st, store_record *recs, size_t n,
                     const owned_part *own, size_t nown, store_forward_list *out,
                     store_stats *stats, tp_key **lost, size_t *nlost, char *err, size_t errsz);

/* Claim up to `limit` pending forwards of the owned partitions whose next
 * attempt is due, leasing them so that no other scan returns them. */
store_rc store_claim_forwards(store *st, const owned_part *own, size_t nown, int limit,
                              store_forward_list *out, char *err, size_t errsz);

/* at_least_once after store_sequence_forwards: the rows with a sequence
 * whose lease ran out (lost), and those without one only once overdue by
 * overdue_ms (rows the sequencing could not take; -1: none), leased. */
store_rc store_claim_lost_forwards(store *st, const owned_part *own, size_t nown, int limit,
                                   int64_t overdue_ms, store_forward_list *out, char *err,
                                   size_t errsz);

/* When the next pending forward without a sequence (a retry, a scheduled
 * message: docs/consumers.md: Delayed delivery) of these partitions' numbers falls due: *in_ms
 * from now (0: due already), -1 when none waits. One index probe per
 * partition number (messages_send_retry), no lock: a hint for when to
 * claim next, never a claim. */
store_rc store_next_send_due(store *st, const owned_part *own, size_t nown, int64_t *in_ms,
                             char *err, size_t errsz);

/* Make the first-attempt leases of these owned partitions due now (a new
 * owner takes over what the old one may have left in flight). clear_seqs
 * (at_least_once): the rows of earlier owners above their partition's
 * delivery mark also lose their forward sequence, so that this owner's marks,
 * which know only what it forwarded, never pass them; they are recorded one
 * by one when delivered. */
store_rc store_release_forwards(store *st, const owned_part *own, size_t nown, int clear_seqs,
                                char *err, size_t errsz);

/* One delivery result. */
typedef struct {
	const char *biz_id;
	const char *message_key;
	tp_key tp;           /* source partition: written only while we own it */
	int ok;
	int64_t fwd_seq;     /* when ok: a sequence a mark given with it covers (the row
	                      * is not written); 0: the row is marked sent itself */
	const char *error;   /* when !ok */
	int64_t retry_in_ms; /* when !ok: delay before the next attempt */
	int requeue;         /* not attempted after all (the producer died): due
	                      * again now, no attempt counted */
	int hold;            /* forward.order = key: not attempted, an earlier message
	                      * of its key is unsent; held until store_order_release */
} store_delivery;

/* A partition's delivery mark (migration 0012): every committed row of the
 * partition with a forward sequence up to upto is delivered, or its own row
 * says otherwise (written in the same transaction at the latest). */
typedef struct {
	tp_key tp;
	int64_t upto;
} store_mark;

/* Record delivery results and move delivery marks in one transaction;
 * results and marks for partitions no longer in `own` (or fenced) are
 * dropped, and a mark never moves back. Failed ones get send_attempts + 1
 * and lose their forward sequence (due again on their own: exactly_once
 * gives them a new one, see store_sequence_forwards); those reaching
 * max_attempts become failed, and their keys are returned in failed_out
 * (caller frees with store_forward_list_clear). A requeued one loses its
 * sequence too. */
store_rc store_record_deliveries(store *st, const owned_part *own, size_t nown,
                                 const store_delivery *d, size_t n, int max_attempts,
                                 const store_mark *marks, size_t nmarks,
                                 store_forward_list *failed_out, char *err, size_t errsz);

/* ---- exactly_once forwarding (docs/consumers.md: Forwarding exactly once) ---- */

/* Give the due pending rows of the owned partitions that have no forward
 * sequence (decided by a check-back or an operator, or whose forward
 * failed) the next ones of their partitions, at most limit, and return
 * them in out (in sequence order per partition). Only partitions whose
 * lane recovered at their current epoch (store_recover_forwards) take
 * part. *again: how many of them a history of the database that was lost
 * may have decided and forwarded already (their decision made again: a
 * possible duplicate). lanes = 0 (at_least_once): every owned partition
 * takes part, and the rows come back leased for the caller to send (the
 * delivery mark records them: no `sent` write per row). */
store_rc store_sequence_forwards(store *st, const owned_part *own, size_t nown, int limit,
                                 int lanes, store_forward_list *out, size_t *again, char *err,
                                 size_t errsz);

/* Forward sequences (exactly_once): a message committed by the control
 * record at offset O has the sequence (O + 1) << STORE_SEQ_SHIFT, the same
 * whenever that record is applied (again, after the database lost it);
 * messages decided elsewhere (check-back, operators) take the sequences
 * between two offsets', at most 2^STORE_SEQ_SHIFT - 1 of them. */
#define STORE_SEQ_SHIFT 20
#define STORE_OFFSET_SEQ(offset) (((int64_t)(offset) + 1) << STORE_SEQ_SHIFT)

/* Dead sequences a marker lists at most (marker v2). */
#define STORE_MARKER_DEAD_MAX 100

/* A progress marker as a lane wrote it: the highest forward sequence of a
 * committed run, the row that sequence was given to, and the partition's
 * fwd_origin at the time. Version 2 (sequences derived from offsets) also
 * lists the dead sequences: offset sequences at or below seq whose forward
 * failed and that were not sent since, and unsure_from when there were
 * more than it can list (every sequence from there on may be unsent), and
 * oob: the highest sequence of a row decided by a check-back or an
 * operator that was sent or failed (such a decision is lost with the
 * database: a lost history in which one was made cannot vouch for what
 * came after it). */
typedef struct {
	int64_t seq; /* 0: no marker */
	int version; /* 1: 0.4.0's (no dead list), 2 */
	char origin[64];
	char biz_id[256];
	char message_key[256];
	int64_t dead[STORE_MARKER_DEAD_MAX];
	size_t ndead;
	int64_t unsure_from; /* -1: none */
	int64_t oob;         /* the highest sequence of a row decided outside the control
	                      * topic that was sent or failed (0: none) */
} store_marker;

/* A partition's new owner read its progress marker m: mark every pending
 * row of it up to m->seq sent (their Kafka transaction committed), but only
 * when the marker is this database's (same fwd_origin, and its row still
 * pending with that sequence: the last committed run is the only one that
 * can be unrecorded). *marked: how many; *mismatch: 1 when the marker was
 * written for another database or history of it (nothing is marked, what
 * is pending goes again); origin_out (64 bytes): the partition's
 * fwd_origin, for the markers to come. own: the partition at its epoch
 * (checked: STORE_FENCED when it moved on). */
store_rc store_recover_forwards(store *st, const owned_part *own, const store_marker *m,
                                int64_t *marked, int *mismatch, char *origin_out, char *err,
                                size_t errsz);

/* The offset sequences (STORE_OFFSET_SEQ(src_offset)) of up to max
 * committed rows of the partition whose forward failed at least once and
 * that were not sent since (pending under another sequence or none, or
 * failed for good), highest first, into out; *n how many. A lane taking
 * the partition adds them to its dead ones (marker.h). */
store_rc store_failed_seqs(store *st, tp_key tp, int64_t *out, size_t max, size_t *n,
                           char *err, size_t errsz);

/* The pending rows of a partition with a forward sequence above `after`
 * and above its delivery mark, at most limit, in sequence order. */
store_rc store_next_forwards(store *st, tp_key tp, int64_t after, int limit,
                             store_forward_list *out, char *err, size_t errsz);

/* A message waiting in awaiting_prepare for too long (docs/configuration.md: Configuration,
 * alert.awaiting_prepare_ms). Owns its strings. */
typedef struct {
	char *biz_id;
	char *message_key;
	char *decision;    /* "commit" or "rollback": the decision held */
	tp_key tp;
	int64_t age_ms;    /* since the decision arrived */
} store_missing;

typedef struct {
	store_missing *items;
	size_t n, cap;
} store_missing_list;

void store_missing_list_clear(store_missing_list *l);

/* Mark up to `limit` awaiting_prepare rows of the owned partitions that are
 * older than older_than_ms and were never alerted, and return them: each
 * row is returned once, ever. */
store_rc store_flag_missing_prepares(store *st, const owned_part *own, size_t nown,
                                     int64_t older_than_ms, int limit,
                                     store_missing_list *out, char *err, size_t errsz);

/* ---- check-backs ---- */

/* A prepared message whose check-back is due, as claimed. Owns its strings. */
typedef struct {
	char *biz_id;
	char *message_key;
	char *url;         /* the prepare's checkback.url, or NULL */
	tp_key tp;         /* source partition */
	int32_t attempts;  /* check_attempts when claimed */
	char *last_error;  /* only in store_record_checks' failed_out */
	metrics_tenant tenant; /* the message's tenant, as a metrics label */
	char *traceparent;     /* its trace context (docs/consumers.md: Trace context), or NULL */
	char *tracestate;
} store_check;

typedef struct {
	store_check *items;
	size_t n, cap;
} store_check_list;

void store_check_list_clear(store_check_list *l);

/* Claim up to `limit` prepared messages of these partitions whose check is
 * due (oldest first, shared fairly between partitions), leasing them for
 * lease_ms so that no other scan returns them. When fewer than limit were
 * due, *next_due_ms is set to the time until the next one falls due
 * (-1: none is waiting), else to 0. */
store_rc store_claim_checks(store *st, const owned_part *own, size_t nown, int limit,
                            int64_t lease_ms, store_check_list *out, int64_t *next_due_ms,
                            char *err, size_t errsz);

/* What became of one claimed check. */
typedef enum {
	CHECK_COMMITTED,    /* -> committed, forward pending (due now) */
	CHECK_ROLLED_BACK,  /* -> rolled_back */
	CHECK_RETRY,        /* stays prepared; next check in retry_in_ms */
	CHECK_FAILED,       /* -> check_failed */
} store_check_outcome;

typedef struct {
	const char *biz_id;
	const char *message_key;
	tp_key tp;                /* source partition: written only while we own it */
	int32_t claimed_attempts; /* check_attempts when claimed */
	int32_t attempts;         /* check_attempts to write */
	store_check_outcome outcome;
	const char *error;        /* last_error to write, or NULL to keep it */
	int64_t retry_in_ms;      /* CHECK_RETRY */
} store_check_result;

/* Write results in one statement, each only if its row is still prepared at
 * claimed_attempts (a decision that arrived meanwhile wins) and its
 * partition is still ours at the epoch in `own`. Rows that
 * became check_failed are appended to failed_out (biz_id, message_key,
 * attempts; caller clears); *written counts the rows changed. */
store_rc store_record_checks(store *st, const owned_part *own, size_t nown,
                             const store_check_result *r, size_t n,
                             store_check_list *failed_out, size_t *written,
                             char *err, size_t errsz);

/* Sample the gauges of /metrics: messages by status, parked rows (an
 * awaiting_prepare row counts once older than awaiting_ms), the oldest
 * prepared row and pending send. The unfinished states are counted exactly
 * (partial indexes keep that cheap); committed and rolled_back too while
 * the table holds under STORE_EXACT_ROWS rows, above that they are
 * PostgreSQL's estimates (pg_class, pg_stats), not a scan of the table. */
#define STORE_EXACT_ROWS 1000000
store_rc store_sample(store *st, int64_t awaiting_ms, metrics_sample *out, char *err,
                      size_t errsz);

/* ---- retention (store_purge.c; docs/database.md: Purge and retention), for the
 * janitor and `txhub purge` ---- */

struct pg_conn;

/* The largest purge batch. */
#define STORE_PURGE_BATCH_MAX 5000

typedef struct {
	/* finished messages (committed and sent, or rolled_back) whose
	 * updated_at is older than this, with their history (0: every one
	 * finished up to now); < 0: none */
	int64_t finished_older_ms;
	/* rejected and conflict rows whose created_at is older than this;
	 * < 0: none */
	int64_t rejected_older_ms;
	/* only rows of these control-topic partitions: (topics[i],
	 * partitions[i]) as (src_topic, src_partition); NULL: every partition
	 * of every topic. A replica's retention passes the partitions it owns. */
	const char *const *topics;
	const int32_t *partitions;
	size_t npartitions;
	int batch;   /* 1..STORE_PURGE_BATCH_MAX rows per table per call */
	int dry_run; /* count what a purge would delete now, delete nothing */
} store_purge_opts;

typedef struct {
	int64_t committed;   /* committed and sent messages */
	int64_t rolled_back; /* rolled_back messages */
	int64_t history;     /* history rows of those messages */
	int64_t rejected;
	int64_t conflicts;
	int more;            /* a table filled its batch: call again */
} store_purge_counts;

/* One batch of retention: delete at most opts->batch rows each from
 * txhub.messages (with their history), txhub.rejected and txhub.conflicts,
 * each table in a short statement of its own that skips rows other
 * transactions hold locked (FOR UPDATE SKIP LOCKED), so it never waits on
 * the hub. Never touches a prepared, awaiting_prepare, check_failed,
 * pending or failed row. *out receives this call's counts (not added to
 * what it held). A dry run counts every row a purge would delete now, in
 * one pass, and sets more = 0. Returns 0, -1 when PostgreSQL failed, -2 when
 * the options break the rules (err says which either way). Loop while
 * out->more; whatever was deleted before a failure stays deleted (each batch
 * commits on its own). */
int store_purge_batch(struct pg_conn *conn, const store_purge_opts *opts, store_purge_counts *out,
                      char *err, size_t errsz);

/* store_purge_batch() on the store's connection. */
int store_purge(store *st, const store_purge_opts *opts, store_purge_counts *out, char *err,
                size_t errsz);

/* ---- tenants (store_tenants.c; docs/tenants.md: Sharing one hub between teams) ---- */

/* The rows of txhub.tenants as stored (every one, enabled or not), owned:
 * defs[i] points into the row's own strings. */
typedef struct {
	tenant_def *defs;
	size_t n;
	void *own; /* the strings defs point to */
} store_tenant_rows;

/* Read every row, ordered by name, in the caller's transaction if one is
 * open (the operators' commands, on their connection). A column that is not
 * what the schema says (a list with a null in it) fails with the tenant and
 * column named. Returns 0, or -1 with the reason in err (rows empty). Free
 * with store_tenant_rows_free() either way. */
int store_tenant_rows_read(struct pg_conn *conn, store_tenant_rows *rows, char *err,
                           size_t errsz);
void store_tenant_rows_free(store_tenant_rows *rows);

/* tenants_refresh() of the run loop's snapshot t from the table. */
int store_tenants_refresh(store *st, tenants *t, int64_t now_ms);
/* ... on a connection of its own (the tests). */
int store_tenants_refresh_on(struct pg_conn *conn, tenants *t, int64_t now_ms);

/* The identity of the database the store is connected to (dbid.h). Returns
 * 0, or -1 with err (out is then unknown). */
int store_dbid(store *st, dbid *out, char *err, size_t errsz);

/* Raw access for migrate.c, the operators' commands (hub/ops/) and the
 * tests. Every statement the hub itself runs on txhub.* is a store_*
 * function. */
struct pg_conn;
struct pg_result;
struct pg_conn *store_conn(store *st);

/* The text of a failed statement (res may be NULL: a failure of the
 * connection) as txhub keeps it: "SQLSTATE: primary message (constraint
 * name)", or "connection lost: ..." on one line. PostgreSQL's DETAIL is
 * left out on purpose: for a constraint it repeats the row, payload bytes
 * included. */
void store_error_text(struct pg_conn *conn, const struct pg_result *res, char *err,
                      size_t errsz);

/* ---- order per key (forward.order = key, docs/consumers.md: Order per key; order.h) ----
 *
 * A row held back for an earlier message of its forward key is stored
 * pending, without a sequence, due at 'infinity' (a store_delivery with
 * hold), so that no scan finds it until it is released. */

/* A blocker: the lowest offset of the unsent rows of a forward key in a
 * partition that no forwarder has in hand (retrying, failed, delayed,
 * held). */
typedef struct {
	tp_key tp;
	char *topic;
	char *key;
	int64_t offset;
} store_blocker;

typedef struct {
	store_blocker *items;
	size_t n;
} store_blocker_list;

void store_blocker_list_clear(store_blocker_list *l);

/* The blockers of the partitions own[0..nown) (two index walks: the rows
 * without a sequence, messages_send_retry, and the failed ones,
 * messages_stuck). With taken (partitions just taken, at_least_once): the
 * rows above the partition's delivery mark too (messages_fwd_seq), which
 * a previous owner had in flight and nobody has in hand now. */
store_rc store_order_blockers(store *st, const owned_part *own, size_t nown, int taken,
                              store_blocker_list *out, char *err, size_t errsz);

/* Make due now every held row of the partitions still ours whose key has no
 * unsent row before it other than held ones: a key's whole chain goes
 * once its head is sent or skipped; with all, every held row (a hub with
 * forward.order = partition taking partitions a hub with key held rows
 * of). *released: how many. */
store_rc store_order_release(store *st, const owned_part *own, size_t nown, int all,
                             size_t *released, char *err, size_t errsz);

/* forward.order = key: store_sequence_forwards numbers a partition's rows in
 * offset order (a released chain keeps its order), not by age; in
 * at_least_once (!exactly_once), a retry that has a sequence blocks its key
 * in store_order_blockers and store_order_release. */
void store_set_order_by_key(store *st, int by_key, int exactly_once);

/* With forward.order = key: the messages the last successful store_apply()
 * made scheduled (delayed delivery, docs/consumers.md: Delayed delivery: committed, not forwarded
 * before their due time), moved into *out (the caller clears it; empty
 * otherwise), so that they block their keys at once (forward.h). */
void store_take_scheduled(store *st, store_forward_list *out);

/* ---- dead letters (store_deadletter.c; docs/troubleshooting.md: Dead-letter
 * topic), for the dead-letter thread ---- */

/* A parked row to dead-letter, as stored. Owns its strings. */
typedef struct {
	store_forward f;  /* biz_id, message_key, payload, topic, key, headers, trace */
	char *error;      /* its last_error */
	char attempts[16];
	char parked_at[64]; /* its updated_at (the park), as text */
} store_parked;

void store_parked_free(store_parked *p, size_t n);

/* Up to limit parked rows of own[0..nown) not dead-lettered yet, oldest
 * park first (eos: without those with a pending entry, whose record may be
 * committed already), into *out (store_parked_free). */
store_rc store_dl_parked(store *st, const owned_part *own, size_t nown, int limit, int eos,
                         store_parked **out, size_t *n, char *err, size_t errsz);

/* A row by its key, and a value whose meaning the call names. */
typedef struct {
	const char *biz_id, *message_key, *value;
} store_dl_key;

/* The dead letters of keys[0..n) failed (value: why): a dead_letter_failed
 * history row each, once per park, while the row still waits. */
store_rc store_dl_note_failed(store *st, const store_dl_key *keys, size_t n, char *err,
                              size_t errsz);

/* at_least_once: the dead letters of keys[0..n) are on topic since at:
 * their rows recorded dead-lettered with a history row, while still parked
 * and not recorded (a redrive meanwhile wins); pending entries of theirs
 * go. */
store_rc store_dl_done(store *st, const store_dl_key *keys, size_t n, const char *at,
                       const char *topic, char *err, size_t errsz);

/* A record of an exactly_once dead-letter transaction, where the broker put it. */
typedef struct {
	const char *biz_id, *message_key, *parked_at;
	int32_t partition;
	int64_t offset;
} store_dl_placed;

/* exactly_once, before the commit: the pending entries of recs[0..n) on
 * topic, for rows still at that park and only while own is this replica's
 * at its epoch (the partition's row held FOR SHARE); *written: how many
 * (fewer than n: the transaction is to be aborted). */
store_rc store_dl_pending_add(store *st, const store_dl_placed *recs, size_t n,
                              const char *topic, const owned_part *own, size_t *written,
                              char *err, size_t errsz);

/* exactly_once: the records of keys[0..n) are committed (value: when each
 * was produced): their pending entries go, their rows are recorded
 * dead-lettered with a history row while still at that park. */
store_rc store_dl_pending_done(store *st, const store_dl_key *keys, size_t n, char *err,
                               size_t errsz);

/* exactly_once: the pending entries of keys[0..n) go (their transaction
 * was aborted: produced again). */
store_rc store_dl_pending_clear(store *st, const store_dl_key *keys, size_t n, char *err,
                                size_t errsz);

/* A pending entry. Owns its strings. */
typedef struct {
	char *biz_id, *message_key, *topic;
	int32_t partition;
	int64_t offset;
	char trace_id[33]; /* its row's, "" without one */
} store_dl_entry;

void store_dl_entries_free(store_dl_entry *e, size_t n);

/* exactly_once: the pending entries of control partition tp, by topic,
 * partition and offset. */
store_rc store_dl_pending_of(store *st, tp_key tp, store_dl_entry **out, size_t *n, char *err,
                             size_t errsz);

/* exactly_once, before the first dead letter of partition own at its
 * epoch (migration 0017): the dead-letter transactional.id written in the
 * partition's row into prev ("" when none) and the epoch it was written at
 * (*prev_epoch, 0 when none), read while own is this replica's at its
 * epoch ... */
store_rc store_dl_claim_read(store *st, const owned_part *own, char *prev, size_t prevsz,
                             int64_t *prev_epoch, char *err, size_t errsz);

/* ... and, once that one is fenced, txn_id (this replica's) written there at
 * own's epoch. STORE_FENCED (both): the partition is not own's any more. */
store_rc store_dl_claim(store *st, const owned_part *own, const char *txn_id, char *err,
                        size_t errsz);

/* exactly_once: the partitions of own[0..nown) with parked rows to
 * dead-letter or pending entries to resolve (free *out). */
store_rc store_dl_work(store *st, const owned_part *own, size_t nown, tp_key **out, size_t *n,
                       char *err, size_t errsz);

#endif
