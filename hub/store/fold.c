/* fold.c: the batch fold (see fold.h), pure.
 *
 * Why a fold and not one statement per record: a message's state depends on
 * the steps before it, possibly earlier in the same batch (a prepare and its
 * commit usually arrive together), so the rules run here in memory, in
 * record order, over the states store.c read once, and store.c writes only
 * the final state of each key. */
#include "fold.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope.h"

static const char *const DETAIL_PREPARE =
	"a second prepare with a different payload or forward; the first stays";
static const char *const DETAIL_DECISION = "the decision contradicts the state; the state stays";
static const char *const DETAIL_FOREIGN = "the message belongs to another tenant";

/* FNV-1a over both ids, with a separator so ("ab","c") != ("a","bc"). */
static uint64_t key_hash(const char *biz, const char *mk)
{
	uint64_t h = 1469598103934665603ull;
	for (const char *p = biz; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	h = (h ^ 0x1f) * 1099511628211ull;
	for (const char *p = mk; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	return h;
}

/* The slot of (biz, mk) in the open-addressing index: the one holding it,
 * or the empty one where it would go. The index is at most half full. */
static uint32_t *key_slot(const fold *f, const char *biz, const char *mk, uint64_t h)
{
	size_t i = (size_t)h & (f->cap - 1);
	for (;;) {
		uint32_t *s = &f->slots[i];
		if (*s == 0)
			return s;
		const fold_key *k = &f->keys[*s - 1];
		if (k->hash == h && strcmp(k->biz_id, biz) == 0 && strcmp(k->message_key, mk) == 0)
			return s;
		i = (i + 1) & (f->cap - 1);
	}
}

fold_key *fold_find(fold *f, const char *biz_id, const char *message_key)
{
	if (f->cap == 0)
		return NULL;
	uint32_t *s = key_slot(f, biz_id, message_key, key_hash(biz_id, message_key));
	return *s ? &f->keys[*s - 1] : NULL;
}

/* The key of a valid record, added on its first appearance. */
static uint32_t key_add(fold *f, const store_record *rec)
{
	const envelope *env = &rec->env;
	uint64_t h = key_hash(env->biz_id, env->message_key);
	uint32_t *s = key_slot(f, env->biz_id, env->message_key, h);
	if (*s == 0) {
		fold_key *k = &f->keys[f->nkeys];
		memset(k, 0, sizeof *k);
		k->biz_id = env->biz_id;
		k->message_key = env->message_key;
		k->hash = h;
		k->payload_rec = -1;
		memcpy(k->tenant, rec->tenant, sizeof k->tenant);
		*s = (uint32_t)++f->nkeys;
	}
	return *s - 1;
}

/* One block for the whole batch, carved in order of alignment: keys and
 * conflicts (at most one of each per record), the index, the per-record
 * arrays. */
static int fold_alloc(fold *f, size_t n)
{
	f->cap = 16;
	while (f->cap < n * 2)
		f->cap *= 2;
	size_t m = n ? n : 1;
	size_t sz = m * sizeof *f->keys + m * sizeof *f->conflicts + f->cap * sizeof *f->slots +
	            m * sizeof *f->rec_key + m * sizeof *f->outcome;
	char *p = calloc(1, sz);
	if (!p) {
		f->cap = 0; /* fold_find() finds nothing */
		return -1;
	}
	f->keys = (fold_key *)(void *)p;
	p += m * sizeof *f->keys;
	f->conflicts = (fold_conflict *)(void *)p;
	p += m * sizeof *f->conflicts;
	f->slots = (uint32_t *)(void *)p;
	p += f->cap * sizeof *f->slots;
	f->rec_key = (uint32_t *)(void *)p;
	p += m * sizeof *f->rec_key;
	f->outcome = (unsigned char *)p;
	return 0;
}

int fold_begin(fold *f, const store_record *recs, size_t n)
{
	memset(f, 0, sizeof *f);
	f->recs = recs;
	f->nrecs = n;
	if (fold_alloc(f, n) != 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const envelope *env = &recs[i].env;
		if (!recs[i].valid)
			continue;
		f->rec_key[i] = key_add(f, &recs[i]);
		if (env->type == ENVELOPE_PREPARE || envelope_is_oneshot(env))
			f->keys[f->rec_key[i]].has_prepare = 1;
	}
	return 0;
}

void fold_set_current(fold_key *k, rules_state stored, const char *tenant)
{
	k->existed = 1;
	k->state = stored;
	snprintf(k->tenant, sizeof k->tenant, "%s", tenant ? tenant : "");
}

int fold_needs_first(const fold_key *k)
{
	return k->existed && k->state.status == STATUS_PREPARED && k->has_prepare;
}

void fold_set_first(fold_key *k, const unsigned char *payload, size_t len, const char *topic,
                    const char *key)
{
	k->first_set = 1;
	k->first_payload = payload;
	k->first_payload_len = len;
	k->first_topic = topic;
	k->first_key = key;
}

/* Whether prepare a carries the first prepare's payload and forward. */
static int same_prepare(const envelope *a, const unsigned char *payload, size_t plen,
                        const char *topic, const char *key)
{
	if (a->payload_len != plen || (plen && memcmp(a->payload, payload, plen) != 0))
		return 0;
	if (!topic || strcmp(a->forward_topic, topic) != 0)
		return 0;
	if ((a->forward_key == NULL) != (key == NULL))
		return 0;
	return !key || strcmp(a->forward_key, key) == 0;
}

/* A prepare step meeting a prepared key: compare with the first prepare,
 * from this batch or as stored. Anything else, or a first prepare not
 * known, counts as the same (rules_apply ignores it then). */
static int same_as_first(const fold *f, const fold_key *k, const envelope *env, rules_step step)
{
	if (step != STEP_PREPARE || k->state.status != STATUS_PREPARED)
		return 1;
	if (k->payload_rec >= 0) {
		const envelope *first = &f->recs[k->payload_rec].env;
		return same_prepare(env, first->payload, first->payload_len, first->forward_topic,
		                    first->forward_key);
	}
	if (k->first_set)
		return same_prepare(env, k->first_payload, k->first_payload_len, k->first_topic,
		                    k->first_key);
	return 1;
}

/* The steps an envelope stands for: a one-shot commit (payload and
 * forward, docs/producers.md: Envelope fields) is a prepare followed by a commit. */
static int record_steps(const envelope *env, rules_step steps[2])
{
	if (env->type == ENVELOPE_PREPARE) {
		steps[0] = STEP_PREPARE;
		return 1;
	}
	if (env->type == ENVELOPE_ROLLBACK) {
		steps[0] = STEP_ROLLBACK;
		return 1;
	}
	if (!envelope_is_oneshot(env)) {
		steps[0] = STEP_COMMIT;
		return 1;
	}
	steps[0] = STEP_PREPARE;
	steps[1] = STEP_COMMIT;
	return 2;
}

static void note_conflict(fold *f, size_t rec, rules_step step, rules_state met, int foreign)
{
	fold_conflict *c = &f->conflicts[f->nconflicts++];
	c->rec = rec;
	c->step = step;
	c->met = met;
	c->foreign = foreign;
	c->detail = foreign ? DETAIL_FOREIGN : step == STEP_PREPARE ? DETAIL_PREPARE : DETAIL_DECISION;
}

/* Apply record i to its key; returns its metrics outcome. */
static metrics_outcome fold_record(fold *f, size_t i)
{
	const store_record *rec = &f->recs[i];
	fold_key *k = &f->keys[f->rec_key[i]];
	rules_step steps[2];
	int nsteps = record_steps(&rec->env, steps);
	int changed = 0, noted = 0;
	if (f->enforce && rec->tenant[0] && k->tenant[0] && strcmp(rec->tenant, k->tenant) != 0) {
		note_conflict(f, i, steps[0], k->state, 1);
		return METRICS_CONFLICT;
	}
	for (int s = 0; s < nsteps; s++) {
		rules_outcome o = rules_apply(k->state, steps[s], same_as_first(f, k, &rec->env, steps[s]));
		if (o.conflict && !noted) {
			note_conflict(f, i, steps[s], k->state, 0);
			noted = 1;
		}
		if (!o.changed)
			continue;
		changed = 1;
		k->state = o.next;
		k->changed = 1;
		k->src_topic = rec->src_topic;
		k->src_tp = rec->tp;
		k->src_partition = rec->partition;
		k->src_offset = rec->offset;
		if (o.take_payload)
			k->payload_rec = (int64_t)i;
		if (o.committed)
			k->committed = 1;
	}
	return changed ? METRICS_APPLIED : noted ? METRICS_CONFLICT : METRICS_DUPLICATE;
}

static metrics_type type_of(const store_record *rec)
{
	if (!rec->valid)
		return METRICS_INVALID;
	return rec->env.type == ENVELOPE_PREPARE  ? METRICS_PREPARE
	       : rec->env.type == ENVELOPE_COMMIT ? METRICS_COMMIT
	                                          : METRICS_ROLLBACK;
}

void fold_run(fold *f)
{
	store_stats *st = &f->stats;
	for (size_t i = 0; i < f->nrecs; i++) {
		metrics_outcome o = f->recs[i].valid ? fold_record(f, i) : METRICS_REJECTED;
		f->outcome[i] = (unsigned char)o;
		metrics_envelopes_count(&st->by, f->recs[i].label, type_of(&f->recs[i]), o);
		if (o == METRICS_REJECTED)
			st->rejected++;
		else if (o == METRICS_APPLIED)
			st->applied++;
		else
			st->noops++;
	}
	st->conflicts = f->nconflicts;
	for (size_t k = 0; k < f->nkeys; k++)
		st->committed += f->keys[k].committed != 0;
}

void fold_free(fold *f)
{
	metrics_tally_free(&f->stats.by);
	free(f->keys); /* the one block of fold_alloc() */
	memset(f, 0, sizeof *f);
}
