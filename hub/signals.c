/* signals.c: see signals.h. */
#include "signals.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t stop_count;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
	if (++stop_count >= 2)
		_exit(1); /* a second signal: exit at once */
}

void signals_install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int signals_stop_requested(void) { return stop_requested; }
