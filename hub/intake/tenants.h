/* tenants.h: txhub.tenants as a running hub sees it (docs/tenants.md: Sharing
 * one hub between teams). Reads the rows, checks every one (tenant_rules.h) and
 * keeps a snapshot of the enabled tenants' rules, read again every
 * TENANTS_REFRESH_MS so that a change made with `txhub tenant` applies within
 * 5 s, without a restart.
 *
 * Never fails open: a row edited by hand into nonsense, two rows that
 * overlap, or a database that does not answer leave the last good snapshot
 * in force; the failure is logged once (once again only when it changes)
 * and tenants_failing() says what it is. Before the first good load there
 * is no snapshot (tenants_rules() is NULL): enforcement must then accept
 * nothing rather than everything.
 *
 * A tenants object belongs to one thread (the run loop). A snapshot
 * returned by tenants_rules() is immutable and stays valid until the next
 * tenants_refresh() on that object that returns 1 (a new one replaced it)
 * or tenants_free(). */
#ifndef TXHUB_TENANTS_H
#define TXHUB_TENANTS_H

#include <stddef.h>
#include <stdint.h>

#include "tenant_rules.h"

struct pg_conn;

/* How often tenants_refresh() looks at the table. */
#define TENANTS_REFRESH_MS 2000

/* The rows of txhub.tenants as stored (every one, enabled or not), owned:
 * defs[i] points into the row's own strings. */
typedef struct {
	tenant_def *defs;
	size_t n;
	void *own; /* the strings defs point to */
} tenant_rows;

/* Read every row, ordered by name, in the caller's transaction if one is
 * open. A column that is not what the schema says (a list with a null in
 * it) fails with the tenant and column named. Returns 0, or -1 with the
 * reason in err (rows empty). Free with tenant_rows_free() either way. */
int tenant_rows_read(struct pg_conn *conn, tenant_rows *rows, char *err, size_t errsz);
void tenant_rows_free(tenant_rows *rows);

typedef struct tenants tenants;

/* NULL when out of memory. */
tenants *tenants_new(void);
void tenants_free(tenants *t);

/* When TENANTS_REFRESH_MS have passed since the last look (or at the
 * first call): read the table's fingerprint and, when it changed, the rows,
 * and build a new snapshot. Returns 1 when a new snapshot is in force, 0
 * when nothing changed or it was not due, -1 when reading or checking
 * failed (the last good snapshot stays; logged once per distinct reason).
 * Logs the number of enabled tenants whenever a new snapshot is taken. */
int tenants_refresh(tenants *t, struct pg_conn *conn, int64_t now_ms);

/* The snapshot in force, or NULL before the first good load. */
const tenant_rules *tenants_rules(const tenants *t);

/* Why the last refresh failed, or NULL while all is well. */
const char *tenants_failing(const tenants *t);

/* How long ago (ms, on tenants_refresh()'s clock) a refresh last found the
 * rules in force to be what the table holds: a new snapshot taken, or the
 * table read unchanged. Grows while reading fails or the rows do not pass
 * (the last good rules stay in force). -1 before the first good load. */
int64_t tenants_rules_age_ms(const tenants *t, int64_t now_ms);

#endif
