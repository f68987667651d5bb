/* fault.h: one kind of PostgreSQL write that may keep failing (applying
 * envelopes, recording deliveries, ...), as the thread that retries it sees
 * it. Each distinct error is logged once, not at every try; the alert
 * database_failing is raised once when the failure has lasted
 * alert.database_failing_ms; the recovery is logged with how long it took.
 *
 * One fault belongs to one thread; no locking. fault_failing_since() may be
 * read from other threads (a word-sized read; a stale value is fine). */
#ifndef TXHUB_FAULT_H
#define TXHUB_FAULT_H

#include <stdint.h>

#include "alert.h"

typedef struct {
	const char *what;  /* e.g. "applying envelopes" (a string literal) */
	alert *al;         /* may be NULL */
	int64_t alert_ms;  /* raise the alert after failing this long */
	char last[512];    /* the last error logged */
	int64_t since_ms;  /* monotonic time of the first failure; 0: not failing */
	uint64_t attempts; /* failed attempts since then */
	int alerted;
} fault;

void fault_init(fault *f, const char *what, alert *al, int64_t alert_ms);

/* An attempt failed with err (SQLSTATE and message). */
void fault_fail(fault *f, const char *err);

/* An attempt succeeded. */
void fault_ok(fault *f);

/* Monotonic ms since which it fails, 0 when it does not. */
int64_t fault_failing_since(const fault *f);

#endif
