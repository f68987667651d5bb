/* hub.h: `txhub run`, the main loop that wires intake -> store -> forward;
 * check-backs and alerts have threads of their own. */
#ifndef TXHUB_HUB_H
#define TXHUB_HUB_H

#include "config.h"

/* Run until SIGTERM or SIGINT. Returns the process exit status: 0 after a
 * clean drain, 1 on a run-time failure. */
int hub_run(const txhub_config *cfg);

#endif
