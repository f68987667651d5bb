/* log.c: the logger behind log.h. Writes whole lines with one fprintf so
 * lines from the librdkafka threads do not interleave mid-line. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static _Atomic int current_level = LOG_INFO;
static _Atomic int current_format = LOG_TEXT;

static const char *level_names[] = {"debug", "info", "warn", "error"};

int log_level_parse(const char *s, log_level *out)
{
	for (int i = 0; i < 4; i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (log_level)i;
			return 0;
		}
	}
	return -1;
}

int log_format_parse(const char *s, log_format *out)
{
	if (strcmp(s, "text") == 0 || strcmp(s, "json") == 0) {
		*out = s[0] == 't' ? LOG_TEXT : LOG_JSON;
		return 0;
	}
	return -1;
}

void log_set_level(log_level lvl) { current_level = lvl; }
log_level log_get_level(void) { return (log_level)current_level; }
void log_set_format(log_format f) { current_format = f; }

/* Append s to line[*n..size) as the inside of a JSON string. */
static void json_str(char *line, size_t size, size_t *n, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	for (const unsigned char *p = (const unsigned char *)s; *p && *n + 7 < size; p++) {
		if (*p == '"' || *p == '\\') {
			line[(*n)++] = '\\';
			line[(*n)++] = (char)*p;
		} else if (*p < 0x20 || *p == 0x7f) {
			memcpy(line + *n, "\\u00", 4);
			line[*n + 4] = hex[*p >> 4];
			line[*n + 5] = hex[*p & 15];
			*n += 6;
		} else {
			line[(*n)++] = (char)*p;
		}
	}
	line[*n] = '\0';
}

static void put(char *line, size_t size, size_t *n, const char *s)
{
	size_t l = strlen(s);
	if (*n + l >= size)
		l = size - *n - 1;
	memcpy(line + *n, s, l);
	*n += l;
	line[*n] = '\0';
}

void log_timestamp(char *out, size_t outsz)
{
	struct timeval tv;
	struct tm tm;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	snprintf(out, outsz, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
	         tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	         (int)(tv.tv_usec / 1000));
}

/* Write one line: msg (already formatted), and about as fields. One
 * fprintf, so lines of other threads never cut into it. */
static void emit(log_level lvl, const char *msg, const log_about *about)
{
	char line[8192], ts[48];
	size_t n = 0;
	log_timestamp(ts, sizeof ts);
	if (current_format == LOG_JSON) {
		put(line, sizeof line, &n, "{\"ts\":\"");
		put(line, sizeof line, &n, ts);
		put(line, sizeof line, &n, "\",\"level\":\"");
		put(line, sizeof line, &n, level_names[lvl]);
		put(line, sizeof line, &n, "\",\"msg\":\"");
		json_str(line, sizeof line - 2, &n, msg);
		put(line, sizeof line, &n, "\"");
		if (about && about->biz_id) {
			put(line, sizeof line, &n, ",\"biz_id\":\"");
			json_str(line, sizeof line - 2, &n, about->biz_id);
			put(line, sizeof line, &n, "\"");
		}
		if (about && about->message_key) {
			put(line, sizeof line, &n, ",\"message_key\":\"");
			json_str(line, sizeof line - 2, &n, about->message_key);
			put(line, sizeof line, &n, "\"");
		}
		if (about && about->trace_id && *about->trace_id) {
			put(line, sizeof line, &n, ",\"trace_id\":\"");
			json_str(line, sizeof line - 2, &n, about->trace_id);
			put(line, sizeof line, &n, "\"");
		}
		if (about && about->tp != -1) {
			char p[32];
			put(line, sizeof line, &n, ",\"topic\":\"");
			json_str(line, sizeof line - 2, &n, tp_topic(about->tp));
			snprintf(p, sizeof p, "\",\"partition\":%d", tp_part(about->tp));
			put(line, sizeof line, &n, p);
		}
		put(line, sizeof line, &n, "}");
	} else {
		snprintf(line, sizeof line, "%s %-5s %s", ts, level_names[lvl], msg);
		for (char *c = line; (c = strpbrk(c, "\r\n"));) /* one event, one line */
			*c = ' ';
	}
	fprintf(stderr, "%s\n", line);
}

void log_msg(log_level lvl, const char *fmt, ...)
{
	if ((int)lvl < current_level)
		return;
	char msg[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	emit(lvl, msg, NULL);
}

void log_msg_about(log_level lvl, const char *what, const log_about *about, const char *fmt,
                   ...)
{
	if ((int)lvl < current_level)
		return;
	char rest[4096], msg[4800];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rest, sizeof rest, fmt, ap);
	va_end(ap);
	if (current_format == LOG_JSON) {
		snprintf(msg, sizeof msg, "%s: %s", what, rest);
		emit(lvl, msg, about);
		return;
	}
	char eb[160], ek[600], part[300] = "", trace[80] = "";
	if (about->trace_id && *about->trace_id)
		snprintf(trace, sizeof trace, "trace_id=%s ",
		         log_escape(about->trace_id, strlen(about->trace_id), eb, 64));
	if (about->tp != -1)
		snprintf(part, sizeof part, "topic=%s partition=%d ", tp_topic(about->tp),
		         tp_part(about->tp));
	snprintf(msg, sizeof msg, "%s: %s%s%s%s%s%s", what, about->biz_id ? "biz_id=" : "",
	         about->biz_id ? log_escape(about->biz_id, strlen(about->biz_id), eb, sizeof eb) : "",
	         about->biz_id ? " " : "", about->message_key ? "message_key=" : "",
	         about->message_key
	             ? log_escape(about->message_key, strlen(about->message_key), ek, sizeof ek)
	             : "",
	         about->message_key ? " " : "");
	size_t l = strlen(msg);
	snprintf(msg + l, sizeof msg - l, "%s%s%s", trace, part, rest);
	emit(lvl, msg, NULL);
}

static const char *escape(const void *data, size_t len, char *out, size_t outsize,
                          int keep_backslash)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = data;
	size_t o = 0;
	if (outsize == 0)
		return out;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = p[i];
		int plain = c >= 0x20 && c < 0x7f && (c != '\\' || keep_backslash);
		size_t need = plain ? 1 : 4;
		if (o + need + 4 > outsize) { /* room for "..." and NUL */
			if (o + 4 <= outsize) {
				memcpy(out + o, "...", 3);
				o += 3;
			}
			break;
		}
		if (plain) {
			out[o++] = (char)c;
		} else {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	out[o] = '\0';
	return out;
}

const char *log_escape(const void *data, size_t len, char *out, size_t outsize)
{
	return escape(data, len, out, outsize, 0);
}

const char *log_printable(const char *s, char *out, size_t outsize)
{
	return escape(s, strlen(s), out, outsize, 1);
}

const char *log_partitions(const tp_key *parts, size_t n, char *out, size_t outsize)
{
	size_t used = (size_t)snprintf(out, outsize, "partition%s", n == 1 ? "" : "s");
	for (size_t i = 0; i < n && used < outsize; i++) {
		/* a topic's name after its last partition of a run */
		int last = i + 1 == n || tp_tid(parts[i + 1]) != tp_tid(parts[i]);
		used += (size_t)snprintf(out + used, outsize - used, "%s%d%s%s",
		                         i == 0 ? " " : i + 1 == n ? " and " : ", ", tp_part(parts[i]),
		                         last ? " of " : "", last ? tp_topic(parts[i]) : "");
	}
	if (used >= outsize && outsize > 4)
		memcpy(out + outsize - 4, "...", 4);
	return out;
}

void log_one_line(char *s)
{
	size_t l = strlen(s);
	while (l > 0 && (s[l - 1] == '\n' || s[l - 1] == ' '))
		s[--l] = '\0';
	for (; *s; s++)
		if (*s == '\n' || *s == '\t')
			*s = ' ';
}
