/* signals.h: SIGTERM and SIGINT for the long-running commands (`txhub run`,
 * `txhub devbroker`). The first one asks for a clean stop, which the
 * command polls; a second one exits at once with status 1. SIGPIPE is
 * ignored (a closed socket is an error return, not a death). */
#ifndef TXHUB_SIGNALS_H
#define TXHUB_SIGNALS_H

void signals_install(void);

/* Whether a stop was asked for. Safe to call from any thread. */
int signals_stop_requested(void);

#endif
