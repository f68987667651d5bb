/* trace.h: W3C Trace Context (level 1) in an envelope (docs/consumers.md: Trace context).
 *
 * Pure logic, no I/O: what envelope.c uses to check the optional `trace`
 * object. A malformed trace is never a reason to reject an envelope: it is
 * dropped, and the envelope says which part was and why (envelope.h). */
#ifndef TXHUB_TRACE_H
#define TXHUB_TRACE_H

#include <stddef.h>

/* A traceparent is 55 characters in version 00; a later version may carry
 * more after a '-': longer ones are not kept (the hub stores and sends it). */
#define TRACE_PARENT_MAX 512
/* The tracestate limits of the specification. */
#define TRACE_STATE_MAX 512
#define TRACE_STATE_MEMBERS_MAX 32
/* The trace id: 32 lowercase hex digits. */
#define TRACE_ID_LEN 32

/* Check a traceparent: "VV-<trace id>-<parent id>-FF" with VV two lowercase
 * hex digits other than "ff", a trace id of 32 and a parent id of 16
 * lowercase hex digits, neither all zeros, FF two lowercase hex digits;
 * version 00 is exactly 55 characters, a higher one may go on after a '-'
 * with printable ASCII (0x20-0x7e, not ending with a space): a valid one
 * is safe as an HTTP or Kafka header value as it is.
 * Returns NULL when valid, else why not (a static string). */
const char *txhubi_trace_check_parent(const char *s);

/* Check a tracestate: a comma-separated list (optional spaces and tabs
 * around members; empty members allowed) of key=value members, at most
 * TRACE_STATE_MEMBERS_MAX of them and TRACE_STATE_MAX characters, keys as
 * the specification spells them (lowercase, optionally tenant@system),
 * each once, values of 1..256 printable ASCII characters other than ',' and
 * '=' that do not end with a space. Returns NULL or why not (static). */
const char *txhubi_trace_check_state(const char *s);

/* The trace id of a valid traceparent, NUL-terminated, into out
 * (TRACE_ID_LEN + 1 bytes); "" when it is not valid (a row this hub did
 * not write, or one of an older version). */
void txhubi_trace_id_of(const char *traceparent, char *out);

#endif
