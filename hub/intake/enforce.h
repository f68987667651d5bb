/* enforce.h: each control record's tenant, and tenants.enforce at intake
 * (docs/tenants.md: Sharing one hub between teams). Pure: no I/O; intake.c
 * calls it where envelopes are validated, before a batch reaches the store.
 *
 * A record's tenant is the enabled tenant whose control topics own the
 * topic it arrived on (tenant_rules_by_topic: unique, by the overlap
 * rules), or none. It is recorded whether enforcement is on or not. With
 * enforcement on, a valid envelope is rejected (docs/producers.md: Envelope fields: it goes to
 * txhub.rejected with the reason) when
 *   its topic belongs to no enabled tenant,
 *   it is larger than its tenant's cap,
 *   its biz_id is not one of its tenant's (every type: prepare, commit,
 *     rollback),
 *   its forward topic (prepare, one-shot commit) is not one of its tenant's
 *     forward topics, or is a tenant's control topic,
 *   its check-back URL is outside its tenant's check-back allow-list;
 * checked in that order, the first breach named. A reason names the rule
 * and the record's own tenant, never another tenant's details.
 *
 * One enforce object per thread (the run loop's intake); it keeps the
 * last topic's tenant and every tenant's metrics label, for the snapshot
 * it was last handed. */
#ifndef TXHUB_ENFORCE_H
#define TXHUB_ENFORCE_H

#include "metrics.h"
#include "record.h"
#include "tenant_rules.h"

typedef struct {
	int on;                       /* tenants.enforce */
	const tenant_rules *rules;    /* the snapshot the rest is for */
	metrics_tenant *labels;       /* each tenant's label, by its index in rules */
	char topic[256];              /* the last topic looked up ... */
	const tenant_rule *tenant;    /* ... its tenant (NULL: none) */
	metrics_tenant label;         /* ... and label */
	int have_topic;
} enforce;

/* on: tenants.enforce. e is zeroed first; free with enforce_clear(). */
void enforce_init(enforce *e, int on);
void enforce_clear(enforce *e);

/* The snapshot to judge by from now on (NULL: none loaded), after every
 * change of it (tenants.h: a refresh that returned 1): what was kept for
 * the last one is forgotten. rules must stay valid until the next call,
 * or enforce_clear(). */
void enforce_set_rules(enforce *e, const tenant_rules *rules);

/* Whether records can be judged now: with enforcement on, only by a
 * snapshot (none loaded: intake must hold them, never let them through). */
int enforce_ready(const enforce *e);

/* Judge record r (validated: r->valid and r->env, or the reason), which
 * arrived on topic, when enforce_ready(). Sets r->tenant and r->label
 * (none without a snapshot); with enforcement on, a valid record that
 * breaks a rule becomes invalid with the reason, its env still filled (to
 * name the message in a log line): the caller frees it with
 * envelope_free(). */
void enforce_record(enforce *e, const char *topic, store_record *r);

#endif
