/* migrate.h: `txhub migrate`, the schema migrations embedded from
 * migrations/NNNN_name.sql at build time (tools/embed_sql.py). */
#ifndef TXHUB_MIGRATE_H
#define TXHUB_MIGRATE_H

#include <stddef.h>

#include "store.h"

typedef struct {
	int version;      /* 1, 2, 3, ... */
	const char *name; /* file name */
	const char *sql;
} migration;

/* The embedded migrations, terminated by a row with name == NULL. */
extern const migration migrations[];

/* The newest version this binary knows. */
int migrate_latest(void);

/* Apply every pending migration, each in its own transaction, under an
 * advisory lock so replicas may run this at the same time. control_topic
 * is cfg->control_topic: migration 0009 names the topic of the messages
 * stored before by it when it is one topic. Returns 0, or -1 with a reason
 * in err. *applied receives how many were applied. */
int migrate_apply(store *st, const char *control_topic, int *applied, char *err, size_t errsz);

#endif
