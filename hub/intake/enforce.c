/* enforce.c: see enforce.h. */
#include "enforce.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void enforce_init(enforce *e, int on)
{
	memset(e, 0, sizeof *e);
	e->on = on;
}

void enforce_clear(enforce *e)
{
	free(e->labels);
	enforce_init(e, e->on);
}

/* Forget what was kept for another snapshot, and label every tenant of
 * this one (a lock per tenant, once per snapshot, not per record). */
void enforce_set_rules(enforce *e, const tenant_rules *rules)
{
	free(e->labels);
	e->labels = NULL;
	e->rules = rules;
	e->have_topic = 0;
	size_t n = rules ? tenant_rules_count(rules) : 0;
	if (n > 0 && (e->labels = calloc(n, sizeof *e->labels)) != NULL)
		for (size_t i = 0; i < n; i++)
			e->labels[i] = metrics_tenant_of(tenant_rules_at(rules, i)->name);
}

/* The label of tenant t of the snapshot. */
static metrics_tenant label_of(const enforce *e, const tenant_rule *t)
{
	const tenant_rule *first = tenant_rules_at(e->rules, 0);
	size_t i = (size_t)(t - first); /* the snapshot's tenants are one array */
	return e->labels && i < tenant_rules_count(e->rules) ? e->labels[i]
	                                                      : metrics_tenant_of(t->name);
}

/* The tenant of topic (NULL: none), kept for the next record of it. */
static const tenant_rule *tenant_of(enforce *e, const char *topic)
{
	if (e->have_topic && strcmp(e->topic, topic) == 0)
		return e->tenant;
	e->tenant = e->rules ? tenant_rules_by_topic(e->rules, topic) : NULL;
	e->label = e->tenant ? label_of(e, e->tenant) : 0;
	/* a topic name is at most 249 bytes; a longer one is not kept */
	e->have_topic = strlen(topic) < sizeof e->topic;
	if (e->have_topic)
		memcpy(e->topic, topic, strlen(topic) + 1);
	return e->tenant;
}

/* The rule valid record r of tenant t (NULL: none) breaks, into why, or 0. */
static int breach(const enforce *e, const tenant_rule *t, const char *topic,
                  const store_record *r, char *why, size_t whysz)
{
	const envelope *env = &r->env;
	if (!t) {
		snprintf(why, whysz, "tenant: topic %s belongs to no enabled tenant", topic);
		return 1;
	}
	if (!tenant_envelope_fits(t, r->value_len)) {
		snprintf(why, whysz, "tenant %s: envelope of %zu bytes exceeds tenant %s's cap of "
		         "%lld bytes", t->name, r->value_len, t->name, (long long)t->max_envelope_bytes);
		return 1;
	}
	if (!tenant_owns_biz(t, env->biz_id)) {
		snprintf(why, whysz, "tenant %s: biz_id %s is not one of tenant %s's biz ids", t->name,
		         env->biz_id, t->name);
		return 1;
	}
	if (env->forward_topic && !tenant_rules_may_forward(e->rules, t, env->forward_topic)) {
		snprintf(why, whysz, "tenant %s: forward topic %s is not one of tenant %s's forward "
		         "topics", t->name, env->forward_topic, t->name);
		return 1;
	}
	char detail[256];
	if (env->checkback_url && !tenant_may_call_url(t, env->checkback_url, detail, sizeof detail)) {
		snprintf(why, whysz, "tenant %s: check-back URL %s is outside tenant %s's check-back "
		         "allow-list (%s)", t->name, env->checkback_url, t->name, detail);
		return 1;
	}
	return 0;
}

int enforce_ready(const enforce *e) { return !e->on || e->rules != NULL; }

void enforce_record(enforce *e, const char *topic, store_record *r)
{
	const tenant_rule *t = tenant_of(e, topic);
	snprintf(r->tenant, sizeof r->tenant, "%s", t ? t->name : "");
	r->label = e->label;
	if (!e->on || !r->valid)
		return;
	if (breach(e, t, topic, r, r->reason, sizeof r->reason))
		r->valid = 0; /* env kept for the caller's log line; it frees it */
}
