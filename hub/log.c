/* log.c: the logger behind log.h. Writes whole lines with one fprintf so
 * lines from the librdkafka threads do not interleave mid-line. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static log_level current_level = LOG_INFO;

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

void log_set_level(log_level lvl) { current_level = lvl; }
log_level log_get_level(void) { return current_level; }

void log_msg(log_level lvl, const char *fmt, ...)
{
	if (lvl < current_level)
		return;
	char line[4096];
	struct timeval tv;
	struct tm tm;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ %-5s ",
	                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	                 tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000), level_names[lvl]);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", line);
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

void log_one_line(char *s)
{
	size_t l = strlen(s);
	while (l > 0 && (s[l - 1] == '\n' || s[l - 1] == ' '))
		s[--l] = '\0';
	for (; *s; s++)
		if (*s == '\n' || *s == '\t')
			*s = ' ';
}
