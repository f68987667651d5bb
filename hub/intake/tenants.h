/* tenants.h: txhub.tenants as a running hub sees it (docs/tenants.md: Sharing
 * one hub between teams). Keeps a snapshot of the enabled tenants' rules,
 * read again (through a tenants_source: the store) every TENANTS_REFRESH_MS
 * so that a change made with `txhub tenant` applies within 5 s, without a
 * restart.
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

/* How often tenants_refresh() looks at the table. */
#define TENANTS_REFRESH_MS 2000

/* Where tenants_refresh() reads the table: the store
 * (store_tenants_refresh()). */
typedef struct {
	/* the table's fingerprint, which changes with any change of it: 0, or
	 * -1 with err */
	int (*fingerprint)(void *ctx, char *out, size_t outsz, char *err, size_t errsz);
	/* every row, read and checked into *out (tenant_rules_build()): 0; -1
	 * when reading failed; -2 when the rows do not pass (err says why) */
	int (*rules)(void *ctx, tenant_rules **out, char *err, size_t errsz);
	void *ctx;
} tenants_source;

typedef struct tenants tenants;

/* NULL when out of memory. */
tenants *tenants_new(void);
void tenants_free(tenants *t);

/* When TENANTS_REFRESH_MS have passed since the last look (or at the
 * first call): read the table's fingerprint from src and, when it changed,
 * the rules. Returns 1 when a new snapshot is in force, 0 when nothing
 * changed or it was not due, -1 when reading or checking failed (the last
 * good snapshot stays; logged once per distinct reason). Logs the number
 * of enabled tenants whenever a new snapshot is taken. */
int tenants_refresh(tenants *t, const tenants_source *src, int64_t now_ms);

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
