/* ops_deadletter.h: the dead-letter topic's figures (docs/troubleshooting.md: Dead-letter topic,
 * forward.dead_letter_topic) for `txhub status` and the console
 * (ops_deadletter.c; ops.h). */
#ifndef TXHUB_OPS_DEADLETTER_H
#define TXHUB_OPS_DEADLETTER_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "ops_rc.h"

struct pg_conn;

typedef struct {
	int64_t dead_lettered; /* parked forwards (send failed) produced to the dead-letter topic */
	int64_t waiting;       /* parked forwards not produced there (yet) */
	/* of those waiting, the ones whose dead letter failed since they were
	 * parked (deadletter.c writes a dead_letter_failed history row, once per
	 * park): the dead_letter_failed alert's state, seen from PostgreSQL */
	int64_t failing;
	char failing_since[32]; /* the first of those failures (RFC 3339 UTC); "" when none */
	char last_error[640];   /* the latest one's detail; "" when none */
	/* forward.dead_letter_topic of the caller's configuration ("": off);
	 * the caller fills it, ops_dead_letters_read() leaves it */
	char topic[256];
} ops_dead_letters;

/* The figures of tenant's rows (NULL: everyone's) into out (topic left as
 * it is), in the open read of ops_status_read_tenant. Cheap: the waiting rows
 * come from the partial index messages_dead_letter (migration 0014), the
 * dead-lettered ones from messages_stuck (parked rows), and each waiting
 * row costs one probe of history_message. */
ops_rc ops_dead_letters_read(struct pg_conn *conn, const char *tenant, ops_dead_letters *out,
                             char *err, size_t errsz);

/* {"topic": T | null, "dead_lettered": N, "waiting": N, "failing": bool,
 * "failing_messages": N, "failing_since": T | null, "last_error": T | null} */
cJSON *ops_dead_letters_json(const ops_dead_letters *d);

#endif
