/* Unit tests for the batch fold (fold.c): sequences of steps
 * (docs/producers.md: State rules) within one batch and against stored states.
 * Each row of the table gives the stored rows, the batch (as envelope JSON,
 * parsed by envelope_parse), and what must come out: every key's final row,
 * which stored first prepares are fetched, the conflict list, and each record's
 * outcome. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>

#include "envelope.h"
#include "fold.h"

/* ---- envelopes, biz_id "shop" unless the macro takes one ---- */
#define ENV(type, biz, k, x) \
	"{\"type\":\"" type "\",\"biz_id\":\"" biz "\",\"message_key\":\"" k "\"" x "}"
#define PL(pl) ",\"payload\":\"" pl "\""
#define FWD_T(t) ",\"forward\":{\"topic\":\"" t "\"}"
#define FWD_TK(t, fk) ",\"forward\":{\"topic\":\"" t "\",\"key\":\"" fk "\"}"
/* prepare k with payload pl, forward to topic t (null key) */
#define P(k, pl) ENV("prepare", "shop", k, PL(pl) FWD_T("t"))
#define PB(biz, k, pl) ENV("prepare", biz, k, PL(pl) FWD_T("t"))
#define P_TO(k, pl, t) ENV("prepare", "shop", k, PL(pl) FWD_T(t))
#define P_KEY(k, pl, fk) ENV("prepare", "shop", k, PL(pl) FWD_TK("t", fk))
#define C(k) ENV("commit", "shop", k, "")
#define R(k) ENV("rollback", "shop", k, "")
/* one-shot commit: payload and forward */
#define O(k, pl) ENV("commit", "shop", k, PL(pl) FWD_T("t"))
#define BAD "{\"type\":\"prepare\",\"biz_id\":\"shop\"" /* not JSON: rejected */

#define MAXR 10
#define MAXK 5
#define MAXC 4

/* A stored row. key: "mk" (biz_id shop) or "biz/mk". state: a status name, or
 * "awaiting_prepare:commit" / ":rollback". first_*: its first prepare (prepared rows). */
typedef struct {
	const char *key, *state;
	const char *first_payload, *first_topic, *first_key;
} stored_row;

/* A key as the fold must leave it. payload_rec, src_rec: record index, or -1 (keeps the
 * stored prepare; unchanged). needs_first: its stored first prepare must be fetched. */
typedef struct {
	const char *key, *state;
	int existed, changed, committed, payload_rec, src_rec, needs_first;
} want_key;

typedef struct {
	int rec;
	const char *step, *met;
} want_conflict;

typedef struct {
	const char *name;
	const char *recs[MAXR];           /* NULL ends */
	stored_row stored[MAXK];          /* key NULL ends */
	want_key keys[MAXK];              /* key NULL ends; in order of first appearance */
	want_conflict conflicts[MAXC];    /* step NULL ends; in record order */
	const char *outcome;              /* per record: Applied Duplicate Conflict Rejected */
} row;

/* record i comes from partition i % 3 at offset 100 + i */
#define PART(i) ((int32_t)((i) % 3))
#define OFF(i) ((int64_t)(100 + (i)))

static const row table[] = {
	/* ---- within one batch, nothing stored ---- */
	{"prepare and commit in one batch", {P("a", "p1"), C("a")}, {{0}},
	 {{"a", "committed", 0, 1, 1, 0, 1, 0}}, {{0}}, "AA"},
	{"prepare and rollback in one batch", {P("a", "p1"), R("a")}, {{0}},
	 {{"a", "rolled_back", 0, 1, 0, 0, 1, 0}}, {{0}}, "AA"},
	{"commit before prepare: the prepare applies the held commit", {C("a"), P("a", "p1")}, {{0}},
	 {{"a", "committed", 0, 1, 1, 1, 1, 0}}, {{0}}, "AA"},
	{"rollback before prepare: the prepare applies the held rollback", {R("a"), P("a", "p1")},
	 {{0}}, {{"a", "rolled_back", 0, 1, 0, 1, 1, 0}}, {{0}}, "AA"},
	{"a decision alone is held", {C("a")}, {{0}},
	 {{"a", "awaiting_prepare:commit", 0, 1, 0, -1, 0, 0}}, {{0}}, "A"},
	{"held rollback, then commit: conflict, rollback stands", {R("a"), C("a")}, {{0}},
	 {{"a", "awaiting_prepare:rollback", 0, 1, 0, -1, 0, 0}},
	 {{1, "commit", "awaiting_prepare:rollback"}}, "AC"},
	{"held commit, then rollback: conflict, commit stands; the prepare applies it",
	 {C("a"), R("a"), P("a", "p1")}, {{0}}, {{"a", "committed", 0, 1, 1, 2, 2, 0}},
	 {{1, "rollback", "awaiting_prepare:commit"}}, "ACA"},
	{"rollback then commit after the prepare: conflict, rollback stands",
	 {P("a", "p1"), R("a"), C("a")}, {{0}}, {{"a", "rolled_back", 0, 1, 0, 0, 1, 0}},
	 {{2, "commit", "rolled_back"}}, "AAC"},
	{"repeated prepare, same payload and forward: no-op", {P("a", "p1"), P("a", "p1")}, {{0}},
	 {{"a", "prepared", 0, 1, 0, 0, 0, 0}}, {{0}}, "AD"},
	{"repeated prepare, other payload: conflict, the first stays", {P("a", "p1"), P("a", "p2")},
	 {{0}}, {{"a", "prepared", 0, 1, 0, 0, 0, 0}}, {{1, "prepare", "prepared"}}, "AC"},
	{"repeated prepare, other forward topic: conflict", {P("a", "p1"), P_TO("a", "p1", "t2")},
	 {{0}}, {{"a", "prepared", 0, 1, 0, 0, 0, 0}}, {{1, "prepare", "prepared"}}, "AC"},
	{"repeated prepare, other forward key: conflict",
	 {P_KEY("a", "p1", "k1"), P_KEY("a", "p1", "k2")}, {{0}},
	 {{"a", "prepared", 0, 1, 0, 0, 0, 0}}, {{1, "prepare", "prepared"}}, "AC"},
	{"repeated prepare, a key where the first had none: conflict",
	 {P("a", "p1"), P_KEY("a", "p1", "k1")}, {{0}}, {{"a", "prepared", 0, 1, 0, 0, 0, 0}},
	 {{1, "prepare", "prepared"}}, "AC"},
	{"the first prepare's payload wins, then commit", {P("a", "p1"), P("a", "p2"), C("a")},
	 {{0}}, {{"a", "committed", 0, 1, 1, 0, 2, 0}}, {{1, "prepare", "prepared"}}, "ACA"},
	{"late prepares after the commit are no-ops, the row keeps the first",
	 {C("a"), P("a", "p1"), P("a", "p2")}, {{0}}, {{"a", "committed", 0, 1, 1, 1, 1, 0}},
	 {{0}}, "AAD"},
	{"one-shot commit, nothing stored", {O("a", "p1")}, {{0}},
	 {{"a", "committed", 0, 1, 1, 0, 0, 0}}, {{0}}, "A"},
	{"one-shot commit twice: the second is a no-op", {O("a", "p1"), O("a", "p1")}, {{0}},
	 {{"a", "committed", 0, 1, 1, 0, 0, 0}}, {{0}}, "AD"},
	{"one-shot commit after a prepare with the same payload", {P("a", "p1"), O("a", "p1")},
	 {{0}}, {{"a", "committed", 0, 1, 1, 0, 1, 0}}, {{0}}, "AA"},
	{"one-shot commit after a prepare with another payload: conflict noted, commit applies",
	 {P("a", "p1"), O("a", "p2")}, {{0}}, {{"a", "committed", 0, 1, 1, 0, 1, 0}},
	 {{1, "prepare", "prepared"}}, "AA"},
	{"one-shot commit after a held rollback: rolled back with its payload, commit conflicts",
	 {R("a"), O("a", "p1")}, {{0}}, {{"a", "rolled_back", 0, 1, 0, 1, 1, 0}},
	 {{1, "commit", "rolled_back"}}, "AA"},
	{"the same envelopes twice change nothing more",
	 {P("a", "p1"), C("a"), P("a", "p1"), C("a"), R("b"), R("b")}, {{0}},
	 {{"a", "committed", 0, 1, 1, 0, 1, 0}, {"b", "awaiting_prepare:rollback", 0, 1, 0, -1, 4, 0}},
	 {{0}}, "AADDAD"},
	{"many keys interleaved, each in its own record order",
	 {P("a", "pa"), P("b", "pb"), C("c"), R("a"), P("c", "pc"), C("b"), O("d", "pd"), C("a"),
	  P("b", "other"), R("d")},
	 {{0}},
	 {{"a", "rolled_back", 0, 1, 0, 0, 3, 0},
	  {"b", "committed", 0, 1, 1, 1, 5, 0},
	  {"c", "committed", 0, 1, 1, 4, 4, 0},
	  {"d", "committed", 0, 1, 1, 6, 6, 0}},
	 {{7, "commit", "rolled_back"}, {9, "rollback", "committed"}}, "AAAAAAACDC"},
	{"a key is (biz_id, message_key): same message_key, other biz_id",
	 {PB("shop", "a", "p1"), PB("other", "a", "p2"), PB("ab", "c", "p3"), PB("a", "bc", "p4"),
	  C("a")},
	 {{0}},
	 {{"a", "committed", 0, 1, 1, 0, 4, 0},
	  {"other/a", "prepared", 0, 1, 0, 1, 1, 0},
	  {"ab/c", "prepared", 0, 1, 0, 2, 2, 0},
	  {"a/bc", "prepared", 0, 1, 0, 3, 3, 0}},
	 {{0}}, "AAAAA"},
	{"invalid records are ignored by the fold, counted as rejected",
	 {BAD, P("a", "p1"), BAD, C("a")}, {{0}}, {{"a", "committed", 0, 1, 1, 1, 3, 0}}, {{0}},
	 "RARA"},
	{"a batch of invalid records only", {BAD, BAD}, {{0}}, {{0}}, {{0}}, "RR"},

	/* ---- against stored rows ---- */
	{"stored prepared, prepared again with the same payload: fetched, no-op", {P("a", "p1")},
	 {{"a", "prepared", "p1", "t", NULL}}, {{"a", "prepared", 1, 0, 0, -1, -1, 1}}, {{0}}, "D"},
	{"stored prepared, prepared again with another payload: conflict, the first stays",
	 {P("a", "p2")}, {{"a", "prepared", "p1", "t", NULL}},
	 {{"a", "prepared", 1, 0, 0, -1, -1, 1}}, {{0, "prepare", "prepared"}}, "C"},
	{"stored prepared, prepared again with another forward topic: conflict",
	 {P_TO("a", "p1", "t2")}, {{"a", "prepared", "p1", "t", NULL}},
	 {{"a", "prepared", 1, 0, 0, -1, -1, 1}}, {{0, "prepare", "prepared"}}, "C"},
	{"stored prepared, prepared again with another forward key: conflict",
	 {P_KEY("a", "p1", "k2")}, {{"a", "prepared", "p1", "t", "k1"}},
	 {{"a", "prepared", 1, 0, 0, -1, -1, 1}}, {{0, "prepare", "prepared"}}, "C"},
	{"stored prepared, prepared again with the same forward key: no-op",
	 {P_KEY("a", "p1", "k1")}, {{"a", "prepared", "p1", "t", "k1"}},
	 {{"a", "prepared", 1, 0, 0, -1, -1, 1}}, {{0}}, "D"},
	{"stored prepared: repeated prepare then commit, the row keeps the stored payload",
	 {P("a", "p2"), C("a")}, {{"a", "prepared", "p1", "t", NULL}},
	 {{"a", "committed", 1, 1, 1, -1, 1, 1}}, {{0, "prepare", "prepared"}}, "CA"},
	{"stored prepared, commit only: the first prepare is not fetched", {C("a")},
	 {{"a", "prepared", "p1", "t", NULL}}, {{"a", "committed", 1, 1, 1, -1, 0, 0}}, {{0}}, "A"},
	{"only the keys prepared again fetch their first prepare",
	 {C("a"), P("b", "p1"), R("c"), P("d", "p9")},
	 {{"a", "prepared", "p1", "t", NULL}, {"b", "prepared", "p1", "t", NULL},
	  {"c", "prepared", "p1", "t", NULL}, {"d", "committed", NULL, NULL, NULL}},
	 {{"a", "committed", 1, 1, 1, -1, 0, 0}, {"b", "prepared", 1, 0, 0, -1, -1, 1},
	  {"c", "rolled_back", 1, 1, 0, -1, 2, 0}, {"d", "committed", 1, 0, 0, -1, -1, 0}},
	 {{0}}, "ADAD"},
	{"stored prepared, one-shot commit with the same payload: committed, stored payload kept",
	 {O("a", "p1")}, {{"a", "prepared", "p1", "t", NULL}},
	 {{"a", "committed", 1, 1, 1, -1, 0, 1}}, {{0}}, "A"},
	{"stored prepared, one-shot commit with another payload: conflict noted, commit applies",
	 {O("a", "p2")}, {{"a", "prepared", "p1", "t", NULL}},
	 {{"a", "committed", 1, 1, 1, -1, 0, 1}}, {{0, "prepare", "prepared"}}, "A"},
	{"stored committed, one-shot commit: no-op, not forwarded again", {O("a", "p1")},
	 {{"a", "committed", NULL, NULL, NULL}}, {{"a", "committed", 1, 0, 0, -1, -1, 0}}, {{0}},
	 "D"},
	{"stored rolled_back, one-shot commit: conflict", {O("a", "p1")},
	 {{"a", "rolled_back", NULL, NULL, NULL}}, {{"a", "rolled_back", 1, 0, 0, -1, -1, 0}},
	 {{0, "commit", "rolled_back"}}, "C"},
	{"stored awaiting_prepare (commit): the prepare applies it with its payload",
	 {P("a", "p1"), C("a")}, {{"a", "awaiting_prepare:commit", NULL, NULL, NULL}},
	 {{"a", "committed", 1, 1, 1, 0, 0, 0}}, {{0}}, "AD"},
	{"stored awaiting_prepare (rollback): a commit conflicts, the prepare rolls back",
	 {C("a"), P("a", "p1")}, {{"a", "awaiting_prepare:rollback", NULL, NULL, NULL}},
	 {{"a", "rolled_back", 1, 1, 0, 1, 1, 0}}, {{0, "commit", "awaiting_prepare:rollback"}},
	 "CA"},
	{"stored check_failed: commit and rollback still apply, a prepare is a no-op",
	 {C("a"), R("b"), P("c", "p2")},
	 {{"a", "check_failed", NULL, NULL, NULL}, {"b", "check_failed", NULL, NULL, NULL},
	  {"c", "check_failed", NULL, NULL, NULL}},
	 {{"a", "committed", 1, 1, 1, -1, 0, 0}, {"b", "rolled_back", 1, 1, 0, -1, 1, 0},
	  {"c", "check_failed", 1, 0, 0, -1, -1, 0}},
	 {{0}}, "AAD"},
	{"stored check_failed: the first decision wins, the other conflicts", {C("a"), R("a")},
	 {{"a", "check_failed", NULL, NULL, NULL}}, {{"a", "committed", 1, 1, 1, -1, 0, 0}},
	 {{1, "rollback", "committed"}}, "AC"},
	{"terminal states never flip",
	 {R("a"), P("a", "p2"), C("a"), O("a", "p3"), C("b"), P("b", "p2"), R("b"), O("b", "p3")},
	 {{"a", "committed", NULL, NULL, NULL}, {"b", "rolled_back", NULL, NULL, NULL}},
	 {{"a", "committed", 1, 0, 0, -1, -1, 0}, {"b", "rolled_back", 1, 0, 0, -1, -1, 0}},
	 {{0, "rollback", "committed"}, {4, "commit", "rolled_back"},
	  {7, "commit", "rolled_back"}},
	 "CDDDCDDC"},
	{"stored and new keys interleaved",
	 {P("n", "p1"), C("s"), BAD, C("n"), P("s", "p1"), R("s")},
	 {{"s", "prepared", "p1", "t", NULL}},
	 {{"n", "committed", 0, 1, 1, 0, 3, 0}, {"s", "committed", 1, 1, 1, -1, 1, 1}},
	 {{5, "rollback", "committed"}}, "AARADC"},
};

#define NROWS (sizeof table / sizeof table[0])

/* ---- helpers ---- */

static void split_key(const char *key, char *biz, size_t bsz, const char **mk)
{
	const char *slash = strchr(key, '/');
	if (!slash) {
		snprintf(biz, bsz, "shop");
		*mk = key;
	} else {
		snprintf(biz, bsz, "%.*s", (int)(slash - key), key);
		*mk = slash + 1;
	}
}

static rules_state parse_state(const char *s)
{
	rules_state st = {STATUS_NONE, DECISION_NONE};
	char name[64];
	snprintf(name, sizeof name, "%s", s);
	char *colon = strchr(name, ':');
	if (colon) {
		*colon = '\0';
		st.decision = strcmp(colon + 1, "commit") == 0 ? DECISION_COMMIT : DECISION_ROLLBACK;
	}
	cr_assert_eq(rules_status_parse(name, &st.status), 0, "bad state \"%s\" in the table", s);
	return st;
}

static void state_text(rules_state st, char *buf, size_t sz)
{
	snprintf(buf, sz, "%s%s%s", rules_status_name(st.status),
	         st.status == STATUS_AWAITING_PREPARE ? ":" : "",
	         st.status == STATUS_AWAITING_PREPARE ? rules_decision_name(st.decision) : "");
}

static size_t parse_records(const row *t, store_record *recs)
{
	size_t n = 0;
	for (; n < MAXR && t->recs[n]; n++) {
		store_record *r = &recs[n];
		memset(r, 0, sizeof *r);
		r->partition = PART(n);
		r->offset = OFF(n);
		r->value = t->recs[n];
		r->value_len = strlen(t->recs[n]);
		r->valid = envelope_parse(r->value, r->value_len, 1 << 20, &r->env, r->reason,
		                          sizeof r->reason) == 0;
		cr_assert_eq(r->valid, strcmp(t->recs[n], BAD) != 0, "%s: record %zu: %s", t->name,
		             n, r->reason);
	}
	return n;
}

/* What store.c does between its reads: the stored states, then the first prepares of
 * the keys that need them (and only those). */
static void feed_stored(const row *t, fold *f)
{
	for (size_t s = 0; s < MAXK && t->stored[s].key; s++) {
		char biz[64];
		const char *mk;
		split_key(t->stored[s].key, biz, sizeof biz, &mk);
		fold_key *k = fold_find(f, biz, mk);
		if (k)
			fold_set_current(k, parse_state(t->stored[s].state), NULL);
	}
	for (size_t s = 0; s < MAXK && t->stored[s].key; s++) {
		char biz[64];
		const char *mk;
		split_key(t->stored[s].key, biz, sizeof biz, &mk);
		fold_key *k = fold_find(f, biz, mk);
		if (!k || !fold_needs_first(k))
			continue;
		const stored_row *sr = &t->stored[s];
		cr_assert_not_null(sr->first_payload, "%s: %s needs a first prepare the table lacks",
		                   t->name, sr->key);
		fold_set_first(k, (const unsigned char *)sr->first_payload, strlen(sr->first_payload),
		               sr->first_topic, sr->first_key);
	}
}

static void check_key(const row *t, fold *f, const want_key *w)
{
	char biz[64], got[64];
	const char *mk;
	split_key(w->key, biz, sizeof biz, &mk);
	fold_key *k = fold_find(f, biz, mk);
	cr_assert_not_null(k, "%s: key %s not in the fold", t->name, w->key);
	state_text(k->state, got, sizeof got);
	cr_expect_str_eq(got, w->state, "%s: %s ends %s, want %s", t->name, w->key, got, w->state);
	cr_expect_eq(k->existed, w->existed, "%s: %s existed %d", t->name, w->key, k->existed);
	cr_expect_eq(k->changed, w->changed, "%s: %s changed %d", t->name, w->key, k->changed);
	cr_expect_eq(k->committed, w->committed, "%s: %s committed %d", t->name, w->key,
	             k->committed);
	cr_expect_eq(k->payload_rec, w->payload_rec, "%s: %s takes the prepare of record %lld, "
	             "want %d", t->name, w->key, (long long)k->payload_rec, w->payload_rec);
	if (w->src_rec >= 0) {
		cr_expect_eq(k->src_partition, PART(w->src_rec), "%s: %s src_partition %d", t->name,
		             w->key, k->src_partition);
		cr_expect_eq(k->src_offset, OFF(w->src_rec), "%s: %s src_offset %lld, want %lld",
		             t->name, w->key, (long long)k->src_offset, (long long)OFF(w->src_rec));
	}
}

static void check_conflicts(const row *t, const fold *f)
{
	size_t want = 0;
	while (want < MAXC && t->conflicts[want].step)
		want++;
	cr_expect_eq(f->nconflicts, want, "%s: %zu conflicts, want %zu", t->name, f->nconflicts,
	             want);
	for (size_t i = 0; i < want && i < f->nconflicts; i++) {
		const fold_conflict *c = &f->conflicts[i];
		const want_conflict *w = &t->conflicts[i];
		char met[64];
		state_text(c->met, met, sizeof met);
		cr_expect_eq(c->rec, (size_t)w->rec, "%s: conflict %zu on record %zu, want %d",
		             t->name, i, c->rec, w->rec);
		cr_expect_str_eq(rules_step_name(c->step), w->step, "%s: conflict %zu step %s",
		                 t->name, i, rules_step_name(c->step));
		cr_expect_str_eq(met, w->met, "%s: conflict %zu met %s, want %s", t->name, i, met,
		                 w->met);
		cr_expect(strstr(c->detail, c->step == STEP_PREPARE ? "second prepare" : "decision"),
		          "%s: conflict %zu detail \"%s\"", t->name, i, c->detail);
	}
}

static metrics_outcome outcome_of(char c)
{
	return c == 'A' ? METRICS_APPLIED : c == 'D' ? METRICS_DUPLICATE
	     : c == 'C' ? METRICS_CONFLICT : METRICS_REJECTED;
}

static void check_outcomes(const row *t, const fold *f, const store_record *recs, size_t n)
{
	static const char letter[] = {'A', 'R', 'C', 'D'}; /* by metrics_outcome */
	metrics_envelopes by;
	memset(&by, 0, sizeof by);
	size_t applied = 0, noops = 0, rejected = 0, committed = 0;
	cr_assert_eq(strlen(t->outcome), n, "%s: the table's outcome has %zu letters for %zu "
	             "records", t->name, strlen(t->outcome), n);
	for (size_t i = 0; i < n; i++) {
		metrics_outcome o = outcome_of(t->outcome[i]);
		cr_expect_eq(f->outcome[i], o, "%s: record %zu is %c, want %c", t->name, i,
		             letter[f->outcome[i] & 3], t->outcome[i]);
		metrics_type ty = !recs[i].valid                        ? METRICS_INVALID
		                  : recs[i].env.type == ENVELOPE_PREPARE ? METRICS_PREPARE
		                  : recs[i].env.type == ENVELOPE_COMMIT  ? METRICS_COMMIT
		                                                         : METRICS_ROLLBACK;
		metrics_envelopes_count(&by, 0, ty, o);
		applied += o == METRICS_APPLIED;
		noops += o == METRICS_DUPLICATE || o == METRICS_CONFLICT;
		rejected += o == METRICS_REJECTED;
	}
	for (size_t i = 0; i < MAXK && t->keys[i].key; i++)
		committed += t->keys[i].committed != 0;
	cr_expect_eq(f->stats.by.nrows, by.nrows, "%s: stats.by has %zu tenants", t->name,
	             f->stats.by.nrows);
	for (size_t r = 0; r < by.nrows && r < f->stats.by.nrows; r++)
		cr_expect_eq(memcmp(&f->stats.by.rows[r], &by.rows[r], sizeof by.rows[r]), 0,
		             "%s: stats.by differs", t->name);
	metrics_tally_free(&by);
	cr_expect_eq(f->stats.applied, applied, "%s: applied %zu", t->name, f->stats.applied);
	cr_expect_eq(f->stats.noops, noops, "%s: noops %zu", t->name, f->stats.noops);
	cr_expect_eq(f->stats.rejected, rejected, "%s: rejected %zu", t->name, f->stats.rejected);
	cr_expect_eq(f->stats.conflicts, f->nconflicts, "%s: conflicts %zu", t->name,
	             f->stats.conflicts);
	cr_expect_eq(f->stats.committed, committed, "%s: committed %zu", t->name,
	             f->stats.committed);
}

static void run_row(const row *t)
{
	store_record recs[MAXR];
	size_t n = parse_records(t, recs);
	fold f;
	cr_assert_eq(fold_begin(&f, recs, n), 0);
	/* the keys to look up: exactly the table's, in order of first appearance */
	size_t nk = 0;
	for (; nk < MAXK && t->keys[nk].key; nk++) {
		char biz[64];
		const char *mk;
		split_key(t->keys[nk].key, biz, sizeof biz, &mk);
		cr_assert(nk < f.nkeys, "%s: only %zu keys", t->name, f.nkeys);
		cr_expect_str_eq(f.keys[nk].biz_id, biz, "%s: key %zu", t->name, nk);
		cr_expect_str_eq(f.keys[nk].message_key, mk, "%s: key %zu", t->name, nk);
	}
	cr_assert_eq(f.nkeys, nk, "%s: %zu keys to look up, want %zu", t->name, f.nkeys, nk);
	feed_stored(t, &f);
	/* asked before the run, as store.c asks it: which first prepares to fetch */
	for (size_t i = 0; i < nk; i++)
		cr_expect_eq(fold_needs_first(&f.keys[i]), t->keys[i].needs_first,
		             "%s: %s needs its first prepare: %d", t->name, t->keys[i].key,
		             fold_needs_first(&f.keys[i]));
	fold_run(&f);
	for (size_t i = 0; i < nk; i++)
		check_key(t, &f, &t->keys[i]);
	check_conflicts(t, &f);
	check_outcomes(t, &f, recs, n);
	fold_free(&f);
	for (size_t i = 0; i < n; i++)
		envelope_free(&recs[i].env);
}

/* ---- the table ---- */

ParameterizedTestParameters(fold, table)
{
	static size_t idx[NROWS];
	for (size_t i = 0; i < NROWS; i++)
		idx[i] = i;
	return cr_make_param_array(size_t, idx, NROWS);
}

ParameterizedTest(size_t *i, fold, table) { run_row(&table[*i]); }

/* ---- the rest ---- */

Test(fold, empty_batch)
{
	fold f;
	cr_assert_eq(fold_begin(&f, NULL, 0), 0);
	cr_assert_eq(f.nkeys, 0);
	cr_assert_null(fold_find(&f, "shop", "a"));
	fold_run(&f);
	cr_assert_eq(f.nconflicts, 0);
	cr_assert_eq(f.stats.applied + f.stats.noops + f.stats.rejected + f.stats.committed, 0);
	fold_free(&f);
	fold_free(&f); /* a zeroed fold is fine */
}

Test(fold, a_missing_first_prepare_counts_as_the_same)
{
	/* the row went between the two reads (it cannot while locked): nothing to compare */
	store_record r;
	memset(&r, 0, sizeof r);
	const char *v = P("a", "p2");
	r.valid = envelope_parse(v, strlen(v), 1 << 20, &r.env, r.reason, sizeof r.reason) == 0;
	cr_assert(r.valid);
	fold f;
	cr_assert_eq(fold_begin(&f, &r, 1), 0);
	fold_set_current(fold_find(&f, "shop", "a"), (rules_state){STATUS_PREPARED, DECISION_NONE},
	                 NULL);
	cr_assert(fold_needs_first(&f.keys[0]));
	fold_run(&f);
	cr_assert_eq(f.nconflicts, 0);
	cr_assert_eq(f.outcome[0], METRICS_DUPLICATE);
	fold_free(&f);
	envelope_free(&r.env);
}

Test(fold, keys_borrow_the_records_strings)
{
	/* no copies: the key table points into the first record naming each key */
	store_record r[2];
	const char *v[2] = {P("a", "p1"), C("a")};
	for (int i = 0; i < 2; i++) {
		memset(&r[i], 0, sizeof r[i]);
		cr_assert_eq(envelope_parse(v[i], strlen(v[i]), 1 << 20, &r[i].env, r[i].reason,
		                            sizeof r[i].reason), 0);
		r[i].valid = 1;
	}
	fold f;
	cr_assert_eq(fold_begin(&f, r, 2), 0);
	cr_assert_eq(f.nkeys, 1);
	cr_assert_eq(f.keys[0].biz_id, r[0].env.biz_id);
	cr_assert_eq(f.keys[0].message_key, r[0].env.message_key);
	fold_free(&f);
	for (int i = 0; i < 2; i++)
		envelope_free(&r[i].env);
}

Test(fold, many_keys_in_one_batch)
{
	/* enough keys to make the index probe and wrap: prepare all, then commit the odd ones */
	enum { N = 600 };
	static store_record r[2 * N];
	static char vals[2 * N][160];
	for (int i = 0; i < 2 * N; i++) {
		int k = i % N;
		if (i < N)
			snprintf(vals[i], sizeof vals[i], P("k%d", "p%d"), k, k);
		else
			snprintf(vals[i], sizeof vals[i], k % 2 ? C("k%d") : R("k%d"), k);
		memset(&r[i], 0, sizeof r[i]);
		r[i].offset = i;
		r[i].valid = envelope_parse(vals[i], strlen(vals[i]), 1 << 20, &r[i].env, r[i].reason,
		                            sizeof r[i].reason) == 0;
		cr_assert(r[i].valid, "%s: %s", vals[i], r[i].reason);
	}
	fold f;
	cr_assert_eq(fold_begin(&f, r, 2 * N), 0);
	cr_assert_eq(f.nkeys, N);
	fold_run(&f);
	for (int k = 0; k < N; k++) {
		char mk[16];
		snprintf(mk, sizeof mk, "k%d", k);
		fold_key *fk = fold_find(&f, "shop", mk);
		cr_assert_not_null(fk, "%s", mk);
		cr_assert_eq(fk->state.status, k % 2 ? STATUS_COMMITTED : STATUS_ROLLED_BACK, "%s", mk);
		cr_assert_eq(fk->payload_rec, k);
		cr_assert_eq(fk->src_offset, N + k);
	}
	cr_assert_eq(f.stats.applied, 2 * N);
	cr_assert_eq(f.stats.committed, N / 2);
	cr_assert_eq(f.nconflicts, 0);
	fold_free(&f);
	for (int i = 0; i < 2 * N; i++)
		envelope_free(&r[i].env);
}

/* A record for the tenant tests: envelope json of tenant tn. */
static void tenant_rec(store_record *r, const char *json, const char *tn)
{
	memset(r, 0, sizeof *r);
	r->valid = envelope_parse(json, strlen(json), 1 << 20, &r->env, r->reason,
	                          sizeof r->reason) == 0;
	cr_assert(r->valid, "%s", r->reason);
	snprintf(r->tenant, sizeof r->tenant, "%s", tn);
}

Test(fold, a_record_for_another_tenants_message_is_a_conflict_with_enforcement)
{
	/* one batch: team-a makes m, team-b's commit of it conflicts, team-a's applies;
	 * a stored message of no tenant takes team-b's rollback */
	store_record r[4];
	tenant_rec(&r[0], P("m", "p"), "team-a");
	tenant_rec(&r[1], "{\"type\":\"commit\",\"biz_id\":\"shop\",\"message_key\":\"m\"}",
	           "team-b");
	tenant_rec(&r[2], "{\"type\":\"commit\",\"biz_id\":\"shop\",\"message_key\":\"m\"}",
	           "team-a");
	tenant_rec(&r[3], "{\"type\":\"rollback\",\"biz_id\":\"shop\",\"message_key\":\"old\"}",
	           "team-b");
	for (int enforce = 0; enforce < 2; enforce++) {
		fold f;
		cr_assert_eq(fold_begin(&f, r, 4), 0);
		fold_set_current(fold_find(&f, "shop", "old"),
		                 (rules_state){STATUS_PREPARED, DECISION_NONE}, NULL);
		f.enforce = enforce;
		fold_run(&f);
		cr_assert_str_eq(f.keys[0].tenant, "team-a", "the row's tenant is its maker's");
		cr_assert_eq(f.keys[1].tenant[0], '\0');
		cr_assert_eq(f.outcome[3], METRICS_APPLIED);
		if (enforce) {
			cr_assert_eq(f.nconflicts, 1);
			cr_assert_eq(f.conflicts[0].rec, 1);
			cr_assert(f.conflicts[0].foreign);
			cr_assert_str_eq(f.conflicts[0].detail, "the message belongs to another tenant");
			cr_assert_eq(f.outcome[1], METRICS_CONFLICT);
			cr_assert_eq(f.outcome[2], METRICS_APPLIED); /* its own: committed by it */
		} else {
			cr_assert_eq(f.nconflicts, 0);
			cr_assert_eq(f.outcome[1], METRICS_APPLIED);
			cr_assert_eq(f.outcome[2], METRICS_DUPLICATE);
		}
		cr_assert_eq(f.keys[0].state.status, STATUS_COMMITTED);
		fold_free(&f);
	}
	for (int i = 0; i < 4; i++)
		envelope_free(&r[i].env);
}
