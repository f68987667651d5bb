/* signals.c: see signals.h. */
#include "signals.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t stop_count;
static volatile sig_atomic_t got_hup, got_usr1, got_usr2;

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
	if (++stop_count >= 2)
		_exit(1); /* a second signal: exit at once */
}

static void on_note(int sig)
{
	if (sig == SIGHUP)
		got_hup = 1;
	else if (sig == SIGUSR1)
		got_usr1 = 1;
	else if (sig == SIGUSR2)
		got_usr2 = 1;
}

static void handle(int sig, void (*fn)(int))
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = fn;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

void signals_install(void)
{
	handle(SIGTERM, on_stop);
	handle(SIGINT, on_stop);
	handle(SIGHUP, on_note);
	handle(SIGUSR1, on_note);
	handle(SIGUSR2, on_note);
	signal(SIGPIPE, SIG_IGN);
}

int signals_stop_requested(void) { return stop_requested; }

int signals_take(void)
{
	int r = 0;
	if (got_hup) {
		got_hup = 0;
		r |= SIGNALS_RELOAD;
	}
	if (got_usr1) {
		got_usr1 = 0;
		r |= SIGNALS_USR1;
	}
	if (got_usr2) {
		got_usr2 = 0;
		r |= SIGNALS_USR2;
	}
	return r;
}
