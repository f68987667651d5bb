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

/* How long each migration's transaction may wait for a lock (at most; half
 * the server's deadlock_timeout when that is less) before it rolls back and
 * is tried again, and how many times a step is tried in all
 * (docs/database.md, Upgrading). */
#define MIGRATE_LOCK_TIMEOUT_MS 1000
#define MIGRATE_ATTEMPTS 30

/* The newest version this binary knows. */
int migrate_latest(void);

/* One index of a migration's concurrent part. */
typedef struct {
	char name[64]; /* in schema txhub */
	char *sql;     /* CREATE INDEX CONCURRENTLY IF NOT EXISTS name ON ... */
} migrate_index;

/* A migration's parts. A file may open with a concurrent part: the lines
 * after "-- txhub: concurrently" up to "-- txhub: transaction", statements
 * "CREATE INDEX CONCURRENTLY IF NOT EXISTS name ON ...;" each ending with ';'
 * at the end of a line, run one by one outside any transaction before the
 * rest. Without those lines the whole file is the transaction. */
typedef struct {
	migrate_index *index;
	size_t n;
	const char *transaction; /* points into the migration's text */
} migrate_parts;

/* Split sql into *mp (free with migrate_parts_free, not needed on failure).
 * Returns 0, or -1 with a reason in err. */
int migrate_split(const char *sql, migrate_parts *mp, char *err, size_t errsz);
void migrate_parts_free(migrate_parts *mp);

/* Apply every pending migration, each in its own transaction (after its
 * concurrent part), under an advisory lock so replicas may run this at the
 * same time. A transaction runs with a lock_timeout and is tried again with
 * backoff when its locks are not free in time or it meets a deadlock, so
 * that running hubs never wait long behind it; so is an index build. control_topic
 * is cfg->control_topic: migration 0009 names the topic of the messages
 * stored before by it when it is one topic. Returns 0, or -1 with a reason
 * in err. *applied receives how many were applied. */
int migrate_apply(store *st, const char *control_topic, int *applied, char *err, size_t errsz);

#endif
