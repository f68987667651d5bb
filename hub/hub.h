/* hub.h: `txhub run`, the main loop that wires intake -> store -> forward
 * and forward; check-backs and alerts have threads of their own. */
#ifndef TXHUB_HUB_H
#define TXHUB_HUB_H

#include "config.h"

/* Run until SIGTERM or SIGINT. Returns the process exit status: 0 after a
 * clean drain, 1 on a run-time failure. */
int hub_run(const txhub_config *cfg);

/* Catch SIGTERM and SIGINT from now on (a stop asked for before the loop
 * runs makes hub_run() return 0 at once). main() calls it first thing for
 * `txhub run`, so a signal during start-up is not fatal. */
void hub_install_signals(void);

/* Ask a running hub to stop (what the signal handlers call). */
void hub_request_stop(void);

#endif
