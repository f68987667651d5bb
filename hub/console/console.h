/* console.h: `txhub console`, the web console for operators (docs/admin.md:
 * Admin commands, and docs/console.md: Web console): the operations of ops.h
 * in a browser, behind console.token, on console.listen.
 *
 * It talks to PostgreSQL only (through ops.h, on console_db.h's pool) and
 * to the brokers for the lag of the Overview; it never touches a hub's
 * hot path and runs anywhere with database access. */
#ifndef TXHUB_CONSOLE_H
#define TXHUB_CONSOLE_H

#include "config.h"

/* Run the console until SIGTERM or SIGINT (signals_install() must have
 * been called). cfg is validated and lives as long as the call. Returns
 * the exit status: 0 after a stop, 1 when it could not serve (the
 * address is taken, the database behind this binary's schema), 2 when
 * the configuration is refused (console_check_config(): no token off
 * loopback, a short token). Called from main's thread. */
int console_main(const txhub_config *cfg);

#endif
