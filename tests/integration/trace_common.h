/* trace_common.h: helpers of the trace tests (test_tracedlq.c,
 * test_traceinject.c): a message's state, a record by its message key and
 * the count of dropped trace contexts.
 * Header only (static): each test program includes it once. */
#ifndef TXHUB_TRACE_COMMON_H
#define TXHUB_TRACE_COMMON_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static char sqlbuf[1024];

/* The query of message mk's "status/send_status" ("-" for no send status),
 * in sqlbuf. */
static const char *status_of(const char *mk)
{
	snprintf(sqlbuf, sizeof sqlbuf, "SELECT status || '/' || coalesce(send_status, '-') "
	                                "FROM txhub.messages WHERE message_key = '%s'", mk);
	return sqlbuf;
}

/* The record of r[0..n) whose txhub-message-key is mk, or NULL. */
static const h_record *record_of(const h_record *r, size_t n, const char *mk)
{
	char want[128];
	snprintf(want, sizeof want, "txhub-message-key=%s\n", mk);
	for (size_t i = 0; i < n; i++)
		if (r[i].headers && strstr(r[i].headers, want))
			return &r[i];
	return NULL;
}

/* txhub_trace_context_dropped_total{reason} of the hub listening on port. */
static double dropped_count(int port, const char *reason)
{
	char name[96], *body = NULL;
	snprintf(name, sizeof name, "txhub_trace_context_dropped_total{reason=\"%s\"}", reason);
	cr_assert(h_http_wait(port, "/metrics", 200, 10000, &body), "no /metrics on %d", port);
	double v = h_series(body, name);
	free(body);
	return v;
}

#endif
