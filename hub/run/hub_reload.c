/* hub_reload.c: signals taken by the run loop; SIGHUP loads the
 * configuration again. */
#include "hub_int.h"

#include <stdio.h>
#include <stdlib.h>

#include "alert.h"
#include "checkback.h"
#include "forward.h"
#include "intake.h"
#include "log.h"
#include "monitor.h"
#include "signals.h"
#include "store.h"

/* SIGHUP: load the configuration again and apply the keys that may change
 * while running; the others keep their values (and the log says which
 * changed). A configuration that does not load leaves everything as it
 * was. */
void hub_reload(hub *h)
{
	char err[1024], fixed[512];
	txhub_config *next = calloc(1, sizeof *next);
	if (!next) {
		log_error("hub: SIGHUP: out of memory; the running configuration stays");
		return;
	}
	if (!h->reload) {
		snprintf(err, sizeof err, "no configuration source to reload from");
		goto fail;
	}
	if (h->reload(h->reload_ctx, next, err, sizeof err) != 0)
		goto fail;
	if (config_keep_fixed(h->cfg, next, fixed, sizeof fixed) != 0 || config_share(next) != 0) {
		snprintf(err, sizeof err, "out of memory");
		goto fail;
	}
	/* the loop's reference to next is the one config_share() gave; each part
	 * told below holds its own, and the last dropped frees it */
	const txhub_config *was = h->cfg;
	h->cfg = next;
	config_apply_logging(next);
	if (*fixed)
		log_warn("hub: SIGHUP: %s changed, which a running hub cannot take up: restart it "
		         "for that", fixed);
	store_set_first_after(h->st, next->checkback_first_after_ms);
	forward_reconfigure(h->fw, next);
	intake_reconfigure(h->in, next);
	checkback_reconfigure(h->cb, next);
	alert_reconfigure(h->al, next);
	monitor_reconfigure(h->mon, next);
	fault *faults[] = {&h->f_conn, &h->f_apply, &h->f_scan};
	for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
		faults[i]->alert_ms = next->alert_database_failing_ms;
	config_drop(was);
	log_info("hub: SIGHUP: configuration reloaded");
	return;
fail:
	log_error("hub: SIGHUP: %s; the running configuration stays", err);
	config_free(next);
	free(next);
}

void hub_take_signals(hub *h)
{
	int sig = signals_take();
	if (sig & SIGNALS_RELOAD)
		hub_reload(h);
	if (sig & SIGNALS_USR1)
		log_info("hub: SIGUSR1 ignored");
	if (sig & SIGNALS_USR2)
		log_info("hub: SIGUSR2 ignored");
}
