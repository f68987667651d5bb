/* tenants.c: see tenants.h. */
#include "tenants.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* ---- the snapshot ---- */

struct tenants {
	tenant_rules *rules;   /* the last good snapshot, or NULL */
	char seen[64];         /* the table's fingerprint when last read ("" never) */
	int64_t next_ms;       /* when to look again */
	int looked;
	int rows_bad;          /* the rows with that fingerprint did not pass */
	char failing[1024];    /* the last failure, "" when none */
	int64_t loaded_ms;     /* the last refresh that found the rules in force current */
};

tenants *tenants_new(void) { return calloc(1, sizeof(tenants)); }

void tenants_free(tenants *t)
{
	if (!t)
		return;
	tenant_rules_free(t->rules);
	free(t);
}

const tenant_rules *tenants_rules(const tenants *t) { return t->rules; }

const char *tenants_failing(const tenants *t) { return t->failing[0] ? t->failing : NULL; }

int64_t tenants_rules_age_ms(const tenants *t, int64_t now_ms)
{
	if (!t->rules)
		return -1;
	return now_ms > t->loaded_ms ? now_ms - t->loaded_ms : 0;
}

/* Log a failure the first time it is this one. */
static int failed(tenants *t, const char *why)
{
	if (strcmp(t->failing, why) != 0) {
		snprintf(t->failing, sizeof t->failing, "%s", why);
		if (t->rules)
			log_error("tenants: %s; the last good rules stay in force (%zu enabled "
			          "tenant(s))", why, tenant_rules_count(t->rules));
		else
			log_error("tenants: %s; no rules are loaded yet", why);
	}
	return -1;
}

int tenants_refresh(tenants *t, const tenants_source *src, int64_t now_ms)
{
	if (t->looked && now_ms < t->next_ms)
		return 0;
	t->looked = 1;
	t->next_ms = now_ms + TENANTS_REFRESH_MS;
	char fp[64], err[1024];
	if (src->fingerprint(src->ctx, fp, sizeof fp, err, sizeof err) != 0)
		return failed(t, err);
	if (strcmp(fp, t->seen) == 0) {
		if (t->rows_bad)
			return -1; /* the same rows, still wrong (said already) */
		if (t->failing[0])
			log_info("tenants: the table reads again; the rules are unchanged");
		t->failing[0] = '\0';
		t->loaded_ms = now_ms;
		return 0;
	}
	tenant_rules *next = NULL;
	int rc = src->rules(src->ctx, &next, err, sizeof err);
	if (rc == -1)
		return failed(t, err); /* read again next time */
	snprintf(t->seen, sizeof t->seen, "%s", fp);
	t->rows_bad = !next;
	if (!next)
		return failed(t, err);
	tenant_rules_free(t->rules);
	t->rules = next;
	t->loaded_ms = now_ms;
	if (t->failing[0])
		log_info("tenants: the rules load again");
	t->failing[0] = '\0';
	log_info("tenants: %zu enabled tenant(s) in force", tenant_rules_count(next));
	return 1;
}
