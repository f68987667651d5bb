/* rules.h: the state machine of docs/producers.md: State rules as a pure function.
 *
 * State is kept per (biz_id, message_key). rules_apply() says what one
 * arriving step does to the current state; it performs no I/O, so the whole
 * table is unit-tested cell by cell. */
#ifndef TXHUB_RULES_H
#define TXHUB_RULES_H

typedef enum {
	STATUS_NONE = 0,         /* no row yet */
	STATUS_PREPARED,
	STATUS_COMMITTED,
	STATUS_ROLLED_BACK,
	STATUS_CHECK_FAILED,
	STATUS_AWAITING_PREPARE, /* a decision arrived before its prepare */
} rules_status;

typedef enum {
	DECISION_NONE = 0,
	DECISION_COMMIT,
	DECISION_ROLLBACK,
} rules_decision;

typedef enum {
	STEP_PREPARE,
	STEP_COMMIT,
	STEP_ROLLBACK,
} rules_step;

typedef struct {
	rules_status status;
	rules_decision decision; /* only for STATUS_AWAITING_PREPARE */
} rules_state;

typedef struct {
	rules_state next;
	int changed;       /* next differs from the current state */
	int take_payload;  /* store the arriving prepare's payload and forward */
	int conflict;      /* record a conflict: the step contradicts the state */
	int committed;     /* the message just became committed: forward it */
} rules_outcome;

/* Apply one step. same_payload is consulted only for a prepare meeting a
 * prepared row: a different payload is a conflict, the first one stays. */
rules_outcome rules_apply(rules_state cur, rules_step step, int same_payload);

const char *rules_status_name(rules_status s);
/* Parse a status name as stored in PostgreSQL; returns -1 if unknown. */
int rules_status_parse(const char *s, rules_status *out);
const char *rules_decision_name(rules_decision d);
const char *rules_step_name(rules_step s);

#endif
