/* endpoint.c: a check-back endpoint for the benchmark that answers at once:
 * "committed" for a message_key ending in an even number, "rolled_back"
 * for an odd one. Prints its port, then serves until stdin closes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "httpd.h"

static void answer(void *opaque, const h_http_request *r, h_http_answer *a)
{
	(void)opaque;
	char mk[300] = "";
	h_http_param(r, "message_key", mk, sizeof mk);
	size_t n = strlen(mk);
	int even = n > 0 && (mk[n - 1] - '0') % 2 == 0;
	snprintf(a->body, sizeof a->body, "%s", even ? "committed" : "rolled_back");
}

int main(void)
{
	h_httpd *s = h_httpd_start(answer, NULL);
	if (!s) {
		fprintf(stderr, "endpoint: cannot listen\n");
		return 1;
	}
	printf("%d\n", h_httpd_port(s));
	fflush(stdout);
	char buf[64];
	while (read(0, buf, sizeof buf) > 0)
		;
	fprintf(stderr, "endpoint: %ld requests, at most %ld at once\n", h_httpd_requests(s),
	        h_httpd_max_in_flight(s));
	h_httpd_stop(s);
	return 0;
}
