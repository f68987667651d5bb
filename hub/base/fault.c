/* fault.c: see fault.h. */
#include "fault.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "metrics.h"

void fault_init(fault *f, const char *what, alert *al, int64_t alert_ms)
{
	memset(f, 0, sizeof *f);
	f->what = what;
	f->al = al;
	f->alert_ms = alert_ms;
}

void fault_fail(fault *f, const char *err)
{
	int64_t now = clock_ms();
	if (f->since_ms == 0)
		f->since_ms = now;
	f->attempts++;
	metrics_database_error();
	if (strcmp(f->last, err) != 0) {
		snprintf(f->last, sizeof f->last, "%s", err);
		log_error("%s failed: %s; retried with backoff until it succeeds (the same error "
		          "is not logged again)", f->what, err);
	}
	if (!f->alerted && now - f->since_ms >= f->alert_ms) {
		char why[640];
		snprintf(why, sizeof why, "%s has failed for %lld s: %s", f->what,
		         (long long)((now - f->since_ms) / 1000), err);
		alert_raise(f->al, "database_failing", NULL, NULL, (int)f->attempts, NULL, why);
		f->alerted = 1;
	}
}

void fault_ok(fault *f)
{
	if (f->since_ms == 0)
		return;
	log_info("%s succeeds again, after %llu failed attempt(s) in %lld ms", f->what,
	         (unsigned long long)f->attempts, (long long)(clock_ms() - f->since_ms));
	f->since_ms = 0;
	f->attempts = 0;
	f->alerted = 0;
	f->last[0] = '\0';
}

int64_t fault_failing_since(const fault *f) { return f->since_ms; }
