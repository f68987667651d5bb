/* rules.c: docs/producers.md: State rules, one switch per current state. */
#include "rules.h"

#include <string.h>

static rules_outcome to(rules_status s, rules_decision d)
{
	rules_outcome o = {{s, d}, 1, 0, 0, s == STATUS_COMMITTED};
	return o;
}

static rules_outcome stay(rules_state cur, int conflict)
{
	rules_outcome o = {cur, 0, 0, conflict, 0};
	return o;
}

rules_outcome rules_apply(rules_state cur, rules_step step, int same_payload)
{
	rules_outcome o;
	switch (cur.status) {
	case STATUS_NONE:
		if (step == STEP_PREPARE) {
			o = to(STATUS_PREPARED, DECISION_NONE);
			o.take_payload = 1;
			return o;
		}
		return to(STATUS_AWAITING_PREPARE,
		          step == STEP_COMMIT ? DECISION_COMMIT : DECISION_ROLLBACK);
	case STATUS_AWAITING_PREPARE:
		if (step == STEP_PREPARE) {
			o = to(cur.decision == DECISION_COMMIT ? STATUS_COMMITTED : STATUS_ROLLED_BACK,
			       DECISION_NONE);
			o.take_payload = 1;
			return o;
		}
		/* the same decision again is a no-op, the other one a conflict */
		return stay(cur, (step == STEP_COMMIT) != (cur.decision == DECISION_COMMIT));
	case STATUS_PREPARED:
		if (step == STEP_PREPARE)
			return stay(cur, !same_payload);
		return to(step == STEP_COMMIT ? STATUS_COMMITTED : STATUS_ROLLED_BACK, DECISION_NONE);
	case STATUS_COMMITTED:
		return stay(cur, step == STEP_ROLLBACK);
	case STATUS_ROLLED_BACK:
		return stay(cur, step == STEP_COMMIT);
	case STATUS_CHECK_FAILED:
		if (step == STEP_PREPARE)
			return stay(cur, 0);
		return to(step == STEP_COMMIT ? STATUS_COMMITTED : STATUS_ROLLED_BACK, DECISION_NONE);
	}
	return stay(cur, 0);
}

static const char *status_names[] = {"none", "prepared", "committed", "rolled_back",
                                     "check_failed", "awaiting_prepare"};

const char *rules_status_name(rules_status s)
{
	return (unsigned)s < 6 ? status_names[s] : "?";
}

int rules_status_parse(const char *s, rules_status *out)
{
	for (int i = 1; i < 6; i++) {
		if (strcmp(s, status_names[i]) == 0) {
			*out = (rules_status)i;
			return 0;
		}
	}
	return -1;
}

const char *rules_decision_name(rules_decision d)
{
	return d == DECISION_COMMIT ? "commit" : d == DECISION_ROLLBACK ? "rollback" : "";
}

const char *rules_step_name(rules_step s)
{
	return s == STEP_PREPARE ? "prepare" : s == STEP_COMMIT ? "commit" : "rollback";
}
