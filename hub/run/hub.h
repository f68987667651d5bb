/* hub.h: `txhub run`, the main loop that wires intake -> store -> forward;
 * check-backs and alerts have threads of their own. */
#ifndef TXHUB_HUB_H
#define TXHUB_HUB_H

#include <stddef.h>

#include "config.h"

/* Load the configuration again into cfg (zeroed by the caller; freed by
 * the caller with config_free() whatever the result), from the sources it
 * came from. Returns 0, or -1 with a message in err. */
typedef int (*hub_reload_fn)(void *ctx, txhub_config *cfg, char *err, size_t errsz);

/* Run until SIGTERM or SIGINT; on SIGHUP, reload (may be NULL: SIGHUP is
 * then logged and ignored) and apply the keys that may change while
 * running. Returns the process exit status: 0 after a clean drain, 1 on a
 * run-time failure, 2 when the configuration is refused at start against
 * what the database holds (forward.dead_letter_topic a tenant's forward
 * topic). */
int hub_run(const txhub_config *cfg, hub_reload_fn reload, void *reload_ctx);

#endif
