/* fold.h: the batch fold, what one poll batch of control records does to the
 * messages it names (docs/producers.md: State rules), as pure logic: no I/O, no libpq, no log.
 *
 * store_apply() (store.c) owns the transaction and the SQL; this file owns
 * every decision in between. The split, in the order store_apply() runs it:
 *
 *   fold_begin(recs)        the batch's distinct keys (f->keys), to lock and read
 *   fold_find, fold_set_current   each stored row's state, as read (locked)
 *   fold_needs_first(k)     which stored prepared rows the batch prepares again:
 *   fold_set_first(...)     only those need their first prepare's payload and forward
 *                           (fetched lazily, rare)
 *   fold_run(f)             the rules (rules.c) in record order: one-shot commits
 *                           expanded into prepare + commit, a repeated prepare
 *                           compared with the first, conflicts noted, stats counted
 *   read f->keys, f->conflicts, f->stats   what to INSERT, UPDATE and log
 *
 * Ownership: the caller owns the fold struct (a stack variable is fine) and
 * the records. One allocation per batch (fold_begin), released by
 * fold_free(); nothing is copied: keys point into the records' envelopes, so
 * the records must outlive the fold. One fold is used by one thread. */
#ifndef TXHUB_FOLD_H
#define TXHUB_FOLD_H

#include <stddef.h>
#include <stdint.h>

#include "metrics.h"
#include "rules.h"
#include "store.h" /* store_record and store_stats only: nothing of store.c is called */

/* One conflict (docs/producers.md: State rules): a step that contradicts the state it met. At
 * most one per record: a one-shot commit whose prepare conflicts is noted
 * once. */
typedef struct {
	size_t rec;         /* index of the record in the batch */
	rules_step step;    /* what arrived */
	rules_state met;    /* the state it met, which stays */
	const char *detail; /* static text for txhub.conflicts */
	int foreign;        /* the message belongs to another tenant (detail names the
	                     * record's tenant: "tenant b: " before it) */
} fold_conflict;

/* One distinct (biz_id, message_key) of the batch's valid records. */
typedef struct {
	const char *biz_id, *message_key; /* borrowed from the first record naming it */
	int existed;          /* a stored row (fold_set_current): UPDATE it, else INSERT */
	rules_state state;    /* the stored state, then (after fold_run) the final one */
	int changed;          /* fold_run changed the state: the row must be written */
	int committed;        /* it became committed in this batch: forward it */
	/* the record whose prepare (payload, forward, check-back) the row takes;
	 * -1: keep the stored one */
	int64_t payload_rec;
	/* the record that last changed the state */
	const char *src_topic; /* interned (topics.h) */
	tp_key src_tp;
	int32_t src_partition;
	int64_t src_offset;
	/* the message's tenant ("": none): as stored, or, for a new row, the
	 * tenant of the first record naming it, which makes the row (a decision
	 * never changes a stored message's tenant) */
	char tenant[64];
	/* private to fold.c */
	uint64_t hash;
	int has_prepare;      /* a record of the batch prepares it (prepare, one-shot commit) */
	int first_set;        /* fold_set_first: the stored first prepare, borrowed */
	const unsigned char *first_payload;
	size_t first_payload_len;
	const char *first_topic, *first_key;
} fold_key;

typedef struct {
	/* read these after fold_run() */
	fold_key *keys;           /* nkeys, in order of first appearance in the batch */
	size_t nkeys;
	fold_conflict *conflicts; /* nconflicts, in record order */
	size_t nconflicts;
	unsigned char *outcome;   /* metrics_outcome of each record (METRICS_REJECTED: invalid) */
	store_stats stats;        /* applied, noops, conflicts, committed, rejected, by
	                           * (by's rows are freed by fold_free() unless moved out) */
	/* set before fold_run(): tenants.enforce. Then a record of tenant b
	 * (its topic's) for a message of tenant a is a conflict and changes
	 * nothing. A record or a message of no tenant is never one: with
	 * enforcement a record of no tenant is rejected at intake, and a
	 * message stored with no tenant (before tenants, or with enforcement
	 * off) takes the decisions of the tenant that owns its biz_id, which
	 * intake checked. */
	int enforce;
	/* private to fold.c */
	const store_record *recs;
	size_t nrecs;
	uint32_t *slots;          /* hash index: 0 empty, else 1 + index into keys */
	size_t cap;
	uint32_t *rec_key;        /* each valid record's index into keys */
} fold;

/* Start the fold of recs[0..n): collect the distinct keys of the valid
 * records (invalid ones are only counted as rejected). Every key starts as
 * having no stored row. Returns 0, or -1 when out of memory (f is then
 * still safe to fold_free). */
int fold_begin(fold *f, const store_record *recs, size_t n);

/* The key (biz_id, message_key) of the batch, or NULL when the batch does
 * not name it. */
fold_key *fold_find(fold *f, const char *biz_id, const char *message_key);

/* The stored row of key k, its state and tenant (NULL or "": none) as
 * SELECT ... FOR UPDATE read them. */
void fold_set_current(fold_key *k, rules_state stored, const char *tenant);

/* Whether the key's stored first prepare must be read before fold_run(): its
 * row is prepared and the batch prepares it again, so the two payloads and
 * forwards are compared (a different one is a conflict, the first stays). */
int fold_needs_first(const fold_key *k);

/* The stored first prepare of a key that needs it. The pointers are
 * borrowed until fold_run() returns; topic NULL or key NULL as stored. A key
 * that needs it and never gets it takes any repeated prepare as the same. */
void fold_set_first(fold_key *k, const unsigned char *payload, size_t len, const char *topic,
                    const char *key);

/* Run the rules over the batch in record order. Call once, after the
 * stored states (and first prepares) were set. */
void fold_run(fold *f);

/* Release what fold_begin() allocated; the records are the caller's. A
 * zeroed fold is fine. */
void fold_free(fold *f);

#endif
