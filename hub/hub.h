/* hub.h: `txhub run`, the main loop that wires intake -> store -> forward
 * (and check-back). One thread drives everything; librdkafka and libpq do
 * their I/O underneath. */
#ifndef TXHUB_HUB_H
#define TXHUB_HUB_H

#include "config.h"

/* Run until SIGTERM or SIGINT. Returns the process exit status: 0 after a
 * clean drain, 1 on a run-time failure. */
int hub_run(const txhub_config *cfg);

/* Ask a running hub to stop (what the signal handlers call). */
void hub_request_stop(void);

#endif
