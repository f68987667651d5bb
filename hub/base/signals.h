/* signals.h: signals for the long-running commands (`txhub run`, `txhub
 * devbroker`). The handlers only set flags; the command's loop acts.
 *
 * SIGTERM and SIGINT: the first one asks for a clean stop, which the
 * command polls; a second one exits at once with status 1.
 * SIGHUP: asks for a reload of the configuration file.
 * SIGUSR1, SIGUSR2: noted, so the loop can log that they are ignored (by
 * default either would kill the process).
 * SIGPIPE is ignored (a closed socket is an error return, not a death). */
#ifndef TXHUB_SIGNALS_H
#define TXHUB_SIGNALS_H

/* Install the handlers; call before anything slow (loading configuration,
 * connecting) so that no signal finds the default action. */
void signals_install(void);

/* Whether a stop was asked for. Safe to call from any thread. */
int signals_stop_requested(void);

enum {
	SIGNALS_RELOAD = 1, /* SIGHUP */
	SIGNALS_USR1 = 2,
	SIGNALS_USR2 = 4,
};

/* The SIGNALS_* received since the last call (a bit each, however many
 * times), and forget them. For the command's loop. */
int signals_take(void);

#endif
