/* dbid.h: which PostgreSQL database a hub works against, as the replicas
 * of one consumer group tell each other through Kafka.
 *
 * The identity is the cluster's system identifier (pg_control_system();
 * a physical standby has its primary's, so a failover or a point-in-time
 * restore keeps it) and the database's name. Each hub writes it into the
 * metadata of the offsets it commits to its group (intake.c); a replica
 * that takes a partition last committed against another database refuses
 * it, since its prepares and decisions would be split between two
 * databases.
 *
 * Pure: the store reads it (store_dbid()). */
#ifndef TXHUB_DBID_H
#define TXHUB_DBID_H

#include <stddef.h>

typedef struct {
	char system_id[24]; /* decimal; "": unknown */
	char name[64];      /* PostgreSQL's names are at most 63 bytes */
} dbid;

int dbid_known(const dbid *d);
int dbid_equal(const dbid *a, const dbid *b);

/* `database "orders" of the cluster with system identifier 7712...`, into
 * buf; returns buf. */
const char *dbid_describe(const dbid *d, char *buf, size_t bufsz);

/* The form pg.adopt_from takes: "7712026944935744815/orders", into buf;
 * returns buf. */
const char *dbid_format(const dbid *d, char *buf, size_t bufsz);

/* Parse that form (digits, '/', a name of 1 to 63 bytes). Returns 0, or -1
 * when s is not one. */
int dbid_parse(const char *s, dbid *out);

/* The metadata of an offset committed by a hub working against d:
 * {"db_system_identifier":"...","db_name":"..."}. Allocated (the caller
 * frees it), NULL when out of memory. */
char *dbid_metadata(const dbid *d);

/* What a committed offset's metadata says about the database its
 * partition was last worked against. */
typedef enum {
	DBID_ABSENT, /* none (no commit yet, or by txhub 0.4.0), or not txhub's */
	DBID_SAME,   /* self */
	DBID_ADOPTED, /* adopt: another database, taken over on purpose */
	DBID_OTHER,  /* another database: *other names it */
} dbid_verdict;

/* Judge metadata md (len bytes, may be NULL) for a hub working against
 * self, with adopt (may be NULL or unknown) the database it takes over
 * from. *other receives the database md names (unknown when absent). */
dbid_verdict dbid_judge(const dbid *self, const dbid *adopt, const void *md, size_t len,
                        dbid *other);

#endif
