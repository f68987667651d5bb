/* ops.h: what an operator does to txhub's state (docs/admin.md: Admin commands): status,
 * list, show, resolve, redrive and purge, as a library.
 *
 * The command line (admin.c) and the web console are two faces of these
 * functions; neither writes SQL of its own. Nothing here prints: each
 * function returns an ops_rc, fills a result (a struct, or a cJSON document
 * with the keys of docs/admin.md: Admin commands), and puts a one-line
 * reason into the caller's err buffer (err is written only when the result is not OPS_OK).
 *
 * Connections: every function works on a PGconn the caller owns and keeps
 * open (store_conn() of a store, whose session has lock_timeout = 10s, is
 * the usual one), and leaves no transaction open. A connection is used by
 * one thread at a time; the functions keep no state of their own, so
 * threads with connections of their own may call them at once.
 *
 * Input from outside (ids, statuses, limits, reasons, actors) is checked
 * here, where it enters, and refused with OPS_BAD_ARG: the console may pass
 * it on as it came. Every write is one short transaction that also writes
 * its txhub.history row; on any result but OPS_OK nothing was written.
 *
 * Racing a running hub: the writes lock only the message rows they change,
 * in key order (the order the hub locks them in), re-check the state after
 * the lock, and change a row only if it is still in the state the operation
 * needs. A row the hub decided a moment earlier is refused (OPS_REFUSED),
 * never decided twice. */
#ifndef TXHUB_OPS_H
#define TXHUB_OPS_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "ops_deadletter.h"
#include "ops_order.h"
#include "ops_rc.h"
#include "store.h"

struct pg_conn;

/* Longest list (ops_list_filter.limit). */
#define OPS_LIST_MAX 10000
/* Longest --reason and actor, in bytes. */
#define OPS_REASON_MAX 1000
#define OPS_ACTOR_MAX 128
/* The broker's share of `status`: lag is left unknown after this long. */
#define OPS_LAG_BUDGET_MS 2000

/* The five statuses of docs/database.md: Inspecting with psql, in the order status reports them. */
#define OPS_NSTATUS 5
extern const char *const ops_status_names[OPS_NSTATUS];

/* 1 when s is one of ops_status_names, or (send) one of pending, sent,
 * failed. */
int ops_valid_status(const char *s);
int ops_valid_send_status(const char *s);

/* Check an id under the envelope's rules (biz_id 1..64 bytes, message_key
 * 1..255, valid UTF-8, no control characters). Returns OPS_OK or
 * OPS_BAD_ARG with the reason in err. */
ops_rc ops_check_ids(const char *biz_id, const char *message_key, char *err, size_t errsz);

/* ---- status ---- */

/* What to do when replicas of two consumer groups work one control topic
 * and database (the end of every line, alert and status entry about such a
 * clash). */
#define OPS_GROUP_CLASH_ADVICE                                                      \
	"two consumer groups read one control topic into one database: give every hub " \
	"of this control topic and database the same `group`, or stop the hubs started " \
	"with the wrong one"

/* One control-topic partition: its row in txhub.partitions and, after
 * ops_status_lag(), the broker's end offset. */
typedef struct {
	char topic[256];
	int32_t partition;
	int has_row;              /* 0: the broker has it, no replica ever took it */
	char owner[128];          /* host/pid; "" without a row */
	char group[256];          /* the owner's consumer group; "" when unknown */
	int64_t epoch;            /* 0 without a row */
	int64_t next_offset;      /* first offset not yet applied; -1: unknown */
	int64_t heartbeat_age_ms; /* since the owner last refreshed it; -1: never */
	int released;             /* the owner let go cleanly */
	/* the group of a fenced replica of another group that waits for it
	 * (said within the last 30 s), or "" */
	char contested_by[256];
	int64_t high_watermark;   /* -1: unknown (the broker was not asked or did not answer) */
	int64_t lag;              /* high_watermark - next_offset (0 for an empty partition
	                           * whose next_offset is unknown); -1: unknown */
	/* txhub.gaps: offsets a hub could not read (gap.h) */
	int64_t lost_offsets;     /* deleted before a hub read them, in all */
	char gap_kind[16];        /* the last gap's kind ("lost", "truncated"), "" for none */
	int64_t gap_from, gap_to; /* ... its offsets [from, to) */
	char gap_at[32];          /* ... when a hub found it (RFC 3339, UTC) */
	int64_t gap_age_s;        /* ... how long ago */
} ops_partition;

typedef struct {
	int64_t messages[OPS_NSTATUS]; /* count per ops_status_names[i] */
	int64_t send_pending, send_sent, send_failed;
	/* parked: check_failed + send failed + awaiting_prepare rows older than
	 * alert.awaiting_prepare_ms (docs/configuration.md: Configuration) */
	int64_t parked, parked_check_failed, parked_send_failed, parked_awaiting;
	int64_t oldest_prepared_s;     /* -1: none prepared */
	int64_t oldest_pending_send_s; /* -1: none pending */
	int64_t rejected_1h, rejected, conflicts_1h, conflicts;
	ops_partition *partitions;     /* owned by this struct: ops_status_free() */
	size_t npartitions;
	char lag_note[640];            /* why some lag is unknown, or "" */
	char tenant[64];               /* the counts are this tenant's ("": everyone's) */
	int64_t blocked_messages;      /* held for their key's order, in all */
	ops_blocked_key *blocked;      /* owned: the keys (at most OPS_BLOCKED_MAX) */
	size_t nblocked;
	ops_dead_letters dead_letters; /* the dead-letter topic's (topic: the caller's to fill) */
} ops_status;

/* Ask the brokers of cfg (cfg->brokers and the kafka.* keys) for the end
 * offsets of st's partitions, and for the partitions of cfg->control_topic
 * no replica took yet (appended with has_row 0), within budget_ms in all;
 * fills high_watermark and lag where the broker answered in time, and
 * lag_note where it did not. Creates and destroys a short-lived librdkafka
 * client; never fails (an unknown lag is an answer). */
void ops_status_lag(const txhub_config *cfg, ops_status *st, int budget_ms);

/* Everything but the lag, from PostgreSQL, in one read-only transaction
 * (one snapshot), with the counts of messages, rejected and conflict rows
 * of one tenant only (txhub.*.tenant; NULL: everyone's); the partitions are
 * all of them. awaiting_prepare_ms: alert.awaiting_prepare_ms. Counts of
 * unfinished states walk the partial indexes; committed and rolled_back
 * count the messages_finished index too, which is as long as the finished
 * rows (docs/admin.md: Admin commands, on what they cost);
 * without an index on tenant, a tenant's counts of finished messages read
 * those rows (see
 * migrations/0010_tenants.sql). OPS_BAD_ARG for a malformed name. On OPS_OK
 * *out is filled (free it with ops_status_free(), also after a failure). */
ops_rc ops_status_read_tenant(struct pg_conn *conn, int64_t awaiting_prepare_ms,
                              const char *tenant, ops_status *out, char *err, size_t errsz);

void ops_status_free(ops_status *st);

/* The document of docs/admin.md: Admin commands: messages, send, parked,
 * oldest_prepared_s, oldest_pending_send_s, rejected_1h, rejected, conflicts_1h, conflicts,
 * partitions (topic, partition, owner, group, epoch, next_offset, lag,
 * high_watermark, heartbeat_age_s, released, contested_by), plus
 * parked_by, per partition lost_offsets and last_gap (kind, from_offset,
 * to_offset, at; null when none), and clashes (a partition held by one
 * consumer group while a replica of another waits for it: topic,
 * partition, owner, group, waiting_group, advice), tenant (the one
 * counted, or null), blocked (ops_blocked_json) and dead_letter
 * (ops_dead_letters_json). NULL when out of memory; the caller deletes it. */
cJSON *ops_status_json(const ops_status *st);

/* ---- list and show ---- */

typedef struct {
	const char *const *statuses; /* any of these (each checked); none: every status */
	size_t nstatuses;
	const char *send_status;     /* NULL: any */
	const char *biz_id;          /* NULL: any */
	int64_t since_ms;            /* > 0 or since_set: updated_at newer than now() - since_ms */
	int since_set;               /* filter on since_ms even when it is 0 */
	int limit;                   /* 1..OPS_LIST_MAX */
	/* NULL: any. Exact; with biz_id it names one message (the primary
	 * key), without it PostgreSQL reads the whole table (no index on the
	 * key alone) */
	const char *message_key;
	int64_t older_ms;            /* > 0: created_at older than now() - older_ms */
	const char *tenant;          /* NULL: any; else only that tenant's (txhub.messages.tenant) */
	/* only the scheduled messages (docs/consumers.md: Delayed delivery:
	 * committed, due later, not sent), the next due first instead of the
	 * newest */
	int scheduled;
	const char *trace_id;        /* NULL: any; else the messages of that W3C trace id */
} ops_list_filter;

/* 1 for a W3C trace id: 32 lowercase hex digits, not all zeros. */
int ops_valid_trace_id(const char *s);

/* Matching messages, newest updated_at first, as a JSON array of row
 * objects with the column names of docs/database.md: Inspecting with psql
 * (payload_bytes instead of payload; timestamps as ISO 8601 UTC text, plus updated_age_s and
 * created_age_s in whole seconds). *out: the caller deletes it. */
ops_rc ops_list(struct pg_conn *conn, const ops_list_filter *f, cJSON **out, char *err,
                size_t errsz);

/* One message and its history, oldest first:
 * {"message": {row..., "payload": text, "payload_encoding": "utf8"|"base64",
 *  "forward_headers": {...}|null}, "history": [{"at", "event", "detail",
 *  "actor", "derived"}...]}. Events with "derived": true (actor null) come
 * from the row's own timestamps: "created" at created_at, and the state it
 * is in now at updated_at. OPS_NOT_FOUND when there is no such message. */
ops_rc ops_show(struct pg_conn *conn, const char *biz_id, const char *message_key, cJSON **out,
                char *err, size_t errsz);

/* The payload bytes as shown: text when they are valid UTF-8 without a NUL
 * byte ("utf8"), else standard base64 ("base64"). Returns a new string (the
 * caller frees it; NULL when out of memory) and sets *encoding to a static
 * name. Pure. */
char *ops_payload_text(const unsigned char *p, size_t len, const char **encoding);

/* ---- rejected records and conflicts ---- */

/* Most bytes of a rejected record's value one listing returns. */
#define OPS_VALUE_MAX (1 << 20)

typedef struct {
	int64_t id;        /* > 0: only the row with this id */
	int64_t before_id; /* > 0: only rows with a smaller id (the next page) */
	int limit;         /* 1..OPS_LIST_MAX */
	int value_max;     /* 0..OPS_VALUE_MAX: bytes of each key and value returned */
	const char *tenant; /* NULL: any; else only that tenant's (txhub.rejected.tenant) */
} ops_rejected_filter;

/* txhub.rejected, newest (largest id) first, as a JSON array of
 * {"id", "src_topic", "src_partition", "src_offset", "reason", "created_at",
 *  "created_age_s", "key", "key_encoding", "key_bytes", "value",
 *  "value_encoding", "value_bytes", "value_truncated"}: key and value are
 * the record's bytes as ops_payload_text() shows them (null for a null
 * key or value), cut to value_max bytes (a UTF-8 sequence the cut split is
 * left out); *_bytes are the whole sizes. *out: the caller deletes it. */
ops_rc ops_rejected_list(struct pg_conn *conn, const ops_rejected_filter *f, cJSON **out,
                         char *err, size_t errsz);

typedef struct {
	const char *biz_id;      /* NULL: any */
	const char *message_key; /* NULL: any (with biz_id: one message's, by its index) */
	int64_t before_id;       /* > 0: only rows with a smaller id */
	int limit;               /* 1..OPS_LIST_MAX */
	const char *tenant;      /* NULL: any; else only that tenant's (txhub.conflicts.tenant) */
} ops_conflicts_filter;

/* txhub.conflicts, newest first, as a JSON array of {"id", "biz_id",
 * "message_key", "arrived", "met_status", "detail", "src_topic",
 * "src_partition", "src_offset", "created_at", "created_age_s"} (null
 * where the row has none). *out: the caller deletes it. */
ops_rc ops_conflicts_list(struct pg_conn *conn, const ops_conflicts_filter *f, cJSON **out,
                          char *err, size_t errsz);

/* ---- resolve and redrive ---- */

typedef enum {
	OPS_COMMIT = 1,
	OPS_ROLLBACK = 2,
} ops_decision;

/* What one resolve or redrive did. */
typedef struct {
	char previous[32];     /* resolve: the status before; redrive: "check_failed" or
	                        * "send_failed" */
	char status[32];       /* after */
	char send_status[16];  /* after; "" for null */
	int32_t attempts;      /* redrive: the attempts reset to 0 */
	char detail[OPS_REASON_MAX + 128]; /* the history row's detail */
	/* the message's W3C trace id (docs/consumers.md: Trace context), "" without one: for log
	 * lines about it; also filled when the change is refused */
	char trace_id[33];
} ops_change;

/* Decide a prepared or check_failed message as its producer would have:
 * commit -> committed with a pending forward due now (the owning replica
 * sends it within about a second); rollback -> rolled_back. reason (NULL
 * or 1..OPS_REASON_MAX bytes) and actor (1..OPS_ACTOR_MAX bytes) go into a
 * history row 'resolve' in the same transaction. OPS_REFUSED for any other
 * state, with the state named in err. */
ops_rc ops_resolve(struct pg_conn *conn, const char *biz_id, const char *message_key,
                   ops_decision d, const char *reason, const char *actor, ops_change *out,
                   char *err, size_t errsz);

/* Send status failed -> pending (send_attempts 0, due now; last_error is
 * kept until the next attempt replaces it or a delivery clears it), or
 * check_failed -> prepared (check_attempts 0, check due now). History row
 * 'redrive' in the same transaction. OPS_REFUSED for any other state. */
ops_rc ops_redrive(struct pg_conn *conn, const char *biz_id, const char *message_key,
                   const char *actor, ops_change *out, char *err, size_t errsz);

/* A scheduled message (committed, its not_before still ahead, not sent:
 * docs/consumers.md: Delayed delivery) made due now: not_before = now(), with a
 * history row 'redrive' by actor naming the due time it had. OPS_REFUSED for
 * any other state. */
ops_rc ops_redrive_now(struct pg_conn *conn, const char *biz_id, const char *message_key,
                       const char *actor, ops_change *out, char *err, size_t errsz);
/* forward.order = key (docs/consumers.md: Order per key): give up on a parked forward (send
 * status failed) or on one held for an earlier message of its key, so that
 * the key's later messages flow: send_status skipped. reason (1..
 * OPS_REASON_MAX bytes, required) and actor go into a history row 'skip'
 * in the same transaction. OPS_REFUSED for any other state. */
ops_rc ops_skip(struct pg_conn *conn, const char *biz_id, const char *message_key,
                const char *reason, const char *actor, ops_change *out, char *err, size_t errsz);

typedef struct {
	int64_t checks; /* check_failed -> prepared */
	int64_t sends;  /* failed -> pending */
} ops_redrive_counts;

/* ops_redrive() for every check_failed row and failed send (of biz_id only,
 * when not NULL), in one transaction, a history row each. */
ops_rc ops_redrive_all(struct pg_conn *conn, const char *biz_id, const char *actor,
                       ops_redrive_counts *out, char *err, size_t errsz);

/* Resolve/redrive results as JSON (biz_id, message_key, action, previous,
 * status, send_status, detail, actor). NULL when out of memory. */
cJSON *ops_change_json(const char *biz_id, const char *message_key, const char *action,
                       const char *actor, const ops_change *c);

/* ---- purge and retention ---- */

/* One batch of retention (store_purge_batch, which says what it does) on
 * the operator's connection. */
ops_rc ops_purge_batch(struct pg_conn *conn, const store_purge_opts *opts, store_purge_counts *out,
                       char *err, size_t errsz);

/* Purge results as JSON: {"dry_run", "messages": {"committed",
 * "rolled_back"}, "history", "rejected", "conflicts"}. */
cJSON *ops_purge_json(const store_purge_counts *c, int dry_run);

#endif
