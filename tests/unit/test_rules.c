/* Unit tests for rules_apply: every cell of the state table (docs/producers.md:
 * State rules), plus the name helpers. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>

#include "rules.h"

#define ST(s, d) {STATUS_##s, DECISION_##d}

typedef struct {
	rules_state cur;
	rules_step step;
	int same_payload; /* -1: the cell ignores it, so try both 0 and 1 */
	rules_state next;
	int changed, take_payload, conflict, committed;
} cell;

/* docs/producers.md: State rules, row by row. */
static cell table[] = {
	/* none */
	{ST(NONE, NONE), STEP_PREPARE, -1, ST(PREPARED, NONE), 1, 1, 0, 0},
	{ST(NONE, NONE), STEP_COMMIT, -1, ST(AWAITING_PREPARE, COMMIT), 1, 0, 0, 0},
	{ST(NONE, NONE), STEP_ROLLBACK, -1, ST(AWAITING_PREPARE, ROLLBACK), 1, 0, 0, 0},
	/* awaiting_prepare holding a commit */
	{ST(AWAITING_PREPARE, COMMIT), STEP_PREPARE, -1, ST(COMMITTED, NONE), 1, 1, 0, 1},
	{ST(AWAITING_PREPARE, COMMIT), STEP_COMMIT, -1, ST(AWAITING_PREPARE, COMMIT), 0, 0, 0, 0},
	{ST(AWAITING_PREPARE, COMMIT), STEP_ROLLBACK, -1, ST(AWAITING_PREPARE, COMMIT), 0, 0, 1, 0},
	/* awaiting_prepare holding a rollback */
	{ST(AWAITING_PREPARE, ROLLBACK), STEP_PREPARE, -1, ST(ROLLED_BACK, NONE), 1, 1, 0, 0},
	{ST(AWAITING_PREPARE, ROLLBACK), STEP_COMMIT, -1, ST(AWAITING_PREPARE, ROLLBACK), 0, 0, 1, 0},
	{ST(AWAITING_PREPARE, ROLLBACK), STEP_ROLLBACK, -1, ST(AWAITING_PREPARE, ROLLBACK), 0, 0, 0, 0},
	/* prepared: first prepare wins */
	{ST(PREPARED, NONE), STEP_PREPARE, 1, ST(PREPARED, NONE), 0, 0, 0, 0},
	{ST(PREPARED, NONE), STEP_PREPARE, 0, ST(PREPARED, NONE), 0, 0, 1, 0},
	{ST(PREPARED, NONE), STEP_COMMIT, -1, ST(COMMITTED, NONE), 1, 0, 0, 1},
	{ST(PREPARED, NONE), STEP_ROLLBACK, -1, ST(ROLLED_BACK, NONE), 1, 0, 0, 0},
	/* committed: terminal */
	{ST(COMMITTED, NONE), STEP_PREPARE, -1, ST(COMMITTED, NONE), 0, 0, 0, 0},
	{ST(COMMITTED, NONE), STEP_COMMIT, -1, ST(COMMITTED, NONE), 0, 0, 0, 0},
	{ST(COMMITTED, NONE), STEP_ROLLBACK, -1, ST(COMMITTED, NONE), 0, 0, 1, 0},
	/* rolled_back: terminal */
	{ST(ROLLED_BACK, NONE), STEP_PREPARE, -1, ST(ROLLED_BACK, NONE), 0, 0, 0, 0},
	{ST(ROLLED_BACK, NONE), STEP_COMMIT, -1, ST(ROLLED_BACK, NONE), 0, 0, 1, 0},
	{ST(ROLLED_BACK, NONE), STEP_ROLLBACK, -1, ST(ROLLED_BACK, NONE), 0, 0, 0, 0},
	/* check_failed: a late decision still applies */
	{ST(CHECK_FAILED, NONE), STEP_PREPARE, -1, ST(CHECK_FAILED, NONE), 0, 0, 0, 0},
	{ST(CHECK_FAILED, NONE), STEP_COMMIT, -1, ST(COMMITTED, NONE), 1, 0, 0, 1},
	{ST(CHECK_FAILED, NONE), STEP_ROLLBACK, -1, ST(ROLLED_BACK, NONE), 1, 0, 0, 0},
};

#define NCELLS (sizeof table / sizeof table[0])

static void check_cell(const cell *c, int same)
{
	char what[128];
	snprintf(what, sizeof what, "%s(%s) + %s, same_payload=%d", rules_status_name(c->cur.status),
	         rules_decision_name(c->cur.decision), rules_step_name(c->step), same);
	rules_outcome o = rules_apply(c->cur, c->step, same);
	cr_expect_eq(o.next.status, c->next.status, "%s: next status %s, want %s", what,
	             rules_status_name(o.next.status), rules_status_name(c->next.status));
	cr_expect_eq(o.next.decision, c->next.decision, "%s: decision %d, want %d", what,
	             (int)o.next.decision, (int)c->next.decision);
	cr_expect_eq(o.changed, c->changed, "%s: changed %d", what, o.changed);
	cr_expect_eq(o.take_payload, c->take_payload, "%s: take_payload %d", what, o.take_payload);
	cr_expect_eq(o.conflict, c->conflict, "%s: conflict %d", what, o.conflict);
	cr_expect_eq(o.committed, c->committed, "%s: committed %d", what, o.committed);
}

ParameterizedTestParameters(rules, table_cell)
{
	return cr_make_param_array(cell, table, NCELLS);
}

ParameterizedTest(cell *c, rules, table_cell)
{
	if (c->same_payload >= 0) {
		check_cell(c, c->same_payload);
	} else {
		check_cell(c, 0);
		check_cell(c, 1);
	}
}

Test(rules, table_covers_every_state_and_step)
{
	/* 5 plain states + awaiting_prepare with 2 held decisions = 7 rows,
	 * x 3 steps, + the extra prepared/prepare cell for a different payload */
	cr_assert_eq(NCELLS, 7 * 3 + 1);
	static const rules_state states[] = {
		ST(NONE, NONE), ST(PREPARED, NONE), ST(COMMITTED, NONE), ST(ROLLED_BACK, NONE),
		ST(CHECK_FAILED, NONE), ST(AWAITING_PREPARE, COMMIT), ST(AWAITING_PREPARE, ROLLBACK),
	};
	for (size_t s = 0; s < sizeof states / sizeof states[0]; s++) {
		for (int step = STEP_PREPARE; step <= STEP_ROLLBACK; step++) {
			int n = 0;
			for (size_t i = 0; i < NCELLS; i++)
				if (table[i].cur.status == states[s].status &&
				    table[i].cur.decision == states[s].decision &&
				    (int)table[i].step == step)
					n++;
			int want = states[s].status == STATUS_PREPARED && step == STEP_PREPARE ? 2 : 1;
			cr_assert_eq(n, want, "state %s(%s) step %s has %d cells",
			             rules_status_name(states[s].status),
			             rules_decision_name(states[s].decision),
			             rules_step_name((rules_step)step), n);
		}
	}
}

Test(rules, terminal_states_never_flip)
{
	static const rules_status terminal[] = {STATUS_COMMITTED, STATUS_ROLLED_BACK};
	for (size_t t = 0; t < 2; t++)
		for (int step = STEP_PREPARE; step <= STEP_ROLLBACK; step++)
			for (int same = 0; same <= 1; same++) {
				rules_state cur = {terminal[t], DECISION_NONE};
				rules_outcome o = rules_apply(cur, (rules_step)step, same);
				cr_assert_eq(o.next.status, terminal[t]);
				cr_assert_eq(o.changed, 0);
				cr_assert_eq(o.committed, 0);
				cr_assert_eq(o.take_payload, 0);
			}
}

Test(rules, applying_the_same_step_twice_changes_nothing)
{
	static const rules_state states[] = {
		ST(NONE, NONE), ST(PREPARED, NONE), ST(COMMITTED, NONE), ST(ROLLED_BACK, NONE),
		ST(CHECK_FAILED, NONE), ST(AWAITING_PREPARE, COMMIT), ST(AWAITING_PREPARE, ROLLBACK),
	};
	for (size_t s = 0; s < sizeof states / sizeof states[0]; s++)
		for (int step = STEP_PREPARE; step <= STEP_ROLLBACK; step++) {
			rules_outcome first = rules_apply(states[s], (rules_step)step, 1);
			rules_outcome again = rules_apply(first.next, (rules_step)step, 1);
			cr_assert_eq(again.changed, 0, "%s then %s again changed the state",
			             rules_status_name(states[s].status), rules_step_name((rules_step)step));
			cr_assert_eq(again.next.status, first.next.status);
			cr_assert_eq(again.next.decision, first.next.decision);
			cr_assert_eq(again.committed, 0, "a repeated %s forwarded twice",
			             rules_step_name((rules_step)step));
			cr_assert_eq(again.take_payload, 0);
		}
}

Test(rules, changed_matches_next_state)
{
	/* "changed" means next differs from the current state, in every cell */
	for (size_t i = 0; i < NCELLS; i++) {
		rules_outcome o = rules_apply(table[i].cur, table[i].step, table[i].same_payload != 0);
		int differs = o.next.status != table[i].cur.status ||
		              o.next.decision != table[i].cur.decision;
		cr_assert_eq(o.changed, differs, "cell %zu", i);
		cr_assert_eq(o.committed, o.changed && o.next.status == STATUS_COMMITTED, "cell %zu", i);
		if (o.next.status != STATUS_AWAITING_PREPARE)
			cr_assert_eq(o.next.decision, DECISION_NONE, "cell %zu", i);
	}
}

Test(rules, one_shot_commit_is_prepare_then_commit)
{
	/* none + commit with payload+forward = committed: the hub applies it as
	 * a prepare followed by a commit */
	rules_state cur = ST(NONE, NONE);
	rules_outcome p = rules_apply(cur, STEP_PREPARE, 1);
	cr_assert(p.take_payload);
	rules_outcome c = rules_apply(p.next, STEP_COMMIT, 1);
	cr_assert_eq(c.next.status, STATUS_COMMITTED);
	cr_assert(c.committed);
	cr_assert_not(c.conflict);
}

Test(rules, early_decision_then_prepare_then_repeat)
{
	rules_state s = ST(NONE, NONE);
	s = rules_apply(s, STEP_COMMIT, 1).next;
	s = rules_apply(s, STEP_COMMIT, 1).next; /* producer retried its commit */
	cr_assert_eq(s.status, STATUS_AWAITING_PREPARE);
	cr_assert_eq(s.decision, DECISION_COMMIT);
	rules_outcome o = rules_apply(s, STEP_PREPARE, 1);
	cr_assert_eq(o.next.status, STATUS_COMMITTED);
	cr_assert(o.committed);
	o = rules_apply(o.next, STEP_PREPARE, 0); /* a late duplicate prepare */
	cr_assert_eq(o.next.status, STATUS_COMMITTED);
	cr_assert_not(o.committed);
	cr_assert_not(o.take_payload);
}

Test(rules, status_name_parse_round_trip)
{
	static const struct {
		rules_status s;
		const char *name;
	} names[] = {
		{STATUS_PREPARED, "prepared"},       {STATUS_COMMITTED, "committed"},
		{STATUS_ROLLED_BACK, "rolled_back"}, {STATUS_CHECK_FAILED, "check_failed"},
		{STATUS_AWAITING_PREPARE, "awaiting_prepare"},
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		cr_assert_str_eq(rules_status_name(names[i].s), names[i].name);
		rules_status out = STATUS_NONE;
		cr_assert_eq(rules_status_parse(names[i].name, &out), 0, "%s", names[i].name);
		cr_assert_eq(out, names[i].s);
		cr_assert_eq(rules_status_parse(rules_status_name(out), &out), 0);
		cr_assert_eq(out, names[i].s);
	}
	cr_assert_str_eq(rules_status_name(STATUS_NONE), "none");
}

Test(rules, status_parse_rejects_unknown)
{
	static const char *bad[] = {"", "none", "Committed", "committed ", "commit", "rolledback",
	                            "pending", "sent"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		rules_status out = STATUS_PREPARED;
		cr_assert_eq(rules_status_parse(bad[i], &out), -1, "\"%s\" parsed", bad[i]);
		cr_assert_eq(out, STATUS_PREPARED, "\"%s\" wrote to out", bad[i]);
	}
	cr_assert_str_eq(rules_status_name((rules_status)99), "?");
}

Test(rules, decision_and_step_names)
{
	cr_assert_str_eq(rules_decision_name(DECISION_COMMIT), "commit");
	cr_assert_str_eq(rules_decision_name(DECISION_ROLLBACK), "rollback");
	cr_assert_str_eq(rules_decision_name(DECISION_NONE), "");
	cr_assert_str_eq(rules_step_name(STEP_PREPARE), "prepare");
	cr_assert_str_eq(rules_step_name(STEP_COMMIT), "commit");
	cr_assert_str_eq(rules_step_name(STEP_ROLLBACK), "rollback");
}
