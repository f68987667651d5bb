/* log.h: levelled logging to standard error, one line per event.
 *
 * Lines look like "2026-11-22T10:00:00.123Z info  intake: message" so they
 * can be grepped and shipped as they are. Anything that came from outside
 * (record keys, HTTP answers) must go through log_escape() first. */
#ifndef TXHUB_LOG_H
#define TXHUB_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "topics.h"

typedef enum {
	LOG_DEBUG = 0,
	LOG_INFO = 1,
	LOG_WARN = 2,
	LOG_ERROR = 3,
} log_level;

/* Lines are text (the default) or, with log.format = json, one JSON object
 * each: {"ts":"...","level":"info","msg":"...","biz_id":"...",
 * "message_key":"...","trace_id":"...","topic":"...","partition":3}, the last
 * five where they apply. */
typedef enum { LOG_TEXT = 0, LOG_JSON = 1 } log_format;

/* Parse "text" or "json". Returns 0 on success, -1 else. */
int log_format_parse(const char *s, log_format *out);
void log_set_format(log_format f);

/* Parse "debug", "info", "warn" or "error". Returns 0 on success, -1 else. */
int log_level_parse(const char *s, log_level *out);
void log_set_level(log_level lvl);
log_level log_get_level(void);

void log_msg(log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* What a line is about: a message and/or a control-topic partition. The
 * ids are valid UTF-8 without control characters (checked at intake). */
typedef struct {
	const char *biz_id;      /* NULL: none */
	const char *message_key; /* NULL: none */
	tp_key tp;               /* the control topic and partition (topics.h); -1: none */
	/* the message's W3C trace id (docs/consumers.md: Trace context); NULL or
	 * "": none */
	const char *trace_id;
} log_about;

/* A line about a message or partition: as text "<what>: biz_id=B
 * message_key=K trace_id=I topic=T partition=P <rest>" (ids escaped), as JSON with msg
 * "<what>: <rest>" and the ids as fields. */
void log_msg_about(log_level lvl, const char *what, const log_about *about, const char *fmt,
                   ...) __attribute__((format(printf, 4, 5)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

/* Now as RFC 3339 UTC with milliseconds ("2026-11-22T10:00:00.123Z", as
 * log lines begin), into out (48 bytes are enough). */
void log_timestamp(char *out, size_t outsz);

/* Copy at most len bytes of untrusted data into out as printable ASCII:
 * bytes outside 0x20..0x7e and the backslash become \xNN. The result is
 * truncated with "..." to fit outsize and always NUL-terminated. Returns
 * out, so it can be used inline in a log_* argument list. */
const char *log_escape(const void *data, size_t len, char *out, size_t outsize);

/* The same for text of our own that already holds \xNN escapes (a stored
 * last_error): the backslash is kept, so escapes are not escaped twice;
 * anything else unprintable still becomes \xNN. */
const char *log_printable(const char *s, char *out, size_t outsize);

/* Make a message fit on one log line, in place: drop trailing newlines and
 * spaces, turn inner newlines and tabs into spaces (libpq's messages span
 * lines). */
void log_one_line(char *s);

/* "partition 3 of T", or "partitions 0, 1 of T and 3 of U" (a topic is
 * named after each run of its partitions: sorted keys name it once), into
 * out (cut to fit, "..." then); returns out. */
const char *log_partitions(const tp_key *parts, size_t n, char *out, size_t outsize);

#endif
