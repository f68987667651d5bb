/* topics.c: see topics.h. */
#include "topics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- what control_topic says ---- */

void topics_free(topics_spec *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->names[i]);
	free(s->names);
	if (s->pattern)
		regfree(&s->re);
	free(s->source);
	memset(s, 0, sizeof *s);
}

static int parse_pattern(const char *text, topics_spec *out, char *err, size_t errsz)
{
	size_t len = strlen(text);
	if (len > TOPICS_PATTERN_MAX) {
		snprintf(err, errsz, "a pattern of %zu bytes is longer than %d", len,
		         TOPICS_PATTERN_MAX);
		return -1;
	}
	if (strchr(text, ',')) {
		/* a comma in a pattern is legal, but a list with a pattern in it is
		 * what it looks like: refused rather than guessed at */
		snprintf(err, errsz, "\"%s\": a pattern (beginning with ^) stands alone; it cannot "
		         "be part of a list, and may hold no comma", text);
		return -1;
	}
	int rc = regcomp(&out->re, text, REG_EXTENDED | REG_NOSUB);
	if (rc != 0) {
		char why[128];
		regerror(rc, &out->re, why, sizeof why);
		snprintf(err, errsz, "\"%s\" is not a valid regular expression: %s", text, why);
		return -1;
	}
	out->pattern = 1;
	if (!(out->source = strdup(text))) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	return 0;
}

/* The next item of a list from *p, trimmed, into item; *p moves past it
 * and its comma. Returns 1 when a comma followed it (another item is due). */
static int next_item(const char **p, char *item, size_t itemsz)
{
	const char *s = *p, *comma = strchr(s, ',');
	const char *end = comma ? comma : s + strlen(s);
	*p = comma ? comma + 1 : end;
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	size_t n = (size_t)(end - s);
	if (n >= itemsz)
		n = itemsz - 1; /* too long for a topic name anyway: refused as such */
	memcpy(item, s, n);
	item[n] = '\0';
	return comma != NULL;
}

int topics_parse(const char *text, topics_spec *out, char *err, size_t errsz)
{
	memset(out, 0, sizeof *out);
	const char *s = text;
	while (*s == ' ' || *s == '\t')
		s++;
	if (*s == '^')
		return parse_pattern(s, out, err, errsz);
	if (!(out->names = calloc(TOPICS_LIST_MAX, sizeof *out->names))) {
		snprintf(err, errsz, "out of memory");
		return -1;
	}
	const char *p = text;
	for (size_t pos = 1, more = 1; more; pos++) {
		char item[300];
		more = (size_t)next_item(&p, item, sizeof item);
		if (!*item) {
			snprintf(err, errsz, "item %zu of the list is empty", pos);
			return -1;
		}
		if (*item == '^') {
			snprintf(err, errsz, "item %zu (\"%s\") is a pattern: a pattern stands alone, "
			         "never in a list", pos, item);
			return -1;
		}
		if (!txhubi_topic_valid(item, strlen(item))) {
			snprintf(err, errsz, "\"%s\" is not a valid topic name (1..249 of a-z A-Z 0-9 "
			         ". _ -, not . or ..)", item);
			return -1;
		}
		for (size_t i = 0; i < out->n; i++) {
			if (strcmp(out->names[i], item) == 0) {
				snprintf(err, errsz, "\"%s\" is named twice", item);
				return -1;
			}
		}
		if (out->n == TOPICS_LIST_MAX) {
			snprintf(err, errsz, "more than %d topics", TOPICS_LIST_MAX);
			return -1;
		}
		if (!(out->names[out->n] = strdup(item))) {
			snprintf(err, errsz, "out of memory");
			return -1;
		}
		out->n++;
	}
	return 0;
}

int topics_match(const topics_spec *s, const char *topic)
{
	if (!topic)
		return 0;
	if (s->pattern)
		return regexec(&s->re, topic, 0, NULL, 0) == 0;
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->names[i], topic) == 0)
			return 1;
	return 0;
}

int topics_single(const topics_spec *s) { return !s->pattern && s->n == 1; }

void topics_progress_name(const topics_spec *s, const char *configured, char *out,
                          size_t outsz)
{
	if (configured && *configured)
		snprintf(out, outsz, "%s", configured);
	else if (topics_single(s))
		snprintf(out, outsz, "%s.progress", s->names[0]);
	else
		snprintf(out, outsz, "%s", TOPICS_PROGRESS_DEFAULT);
}

/* ---- topic names ---- */

int envelope_reserved_topic(const char *s, size_t len)
{
	return len >= 2 && s[0] == '_' && s[1] == '_';
}

/* ---- interned names ----
 *
 * Append-only: a name, once published at its id, never moves or changes,
 * so readers need no lock; the count is published after the name. */

static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *names[TOPICS_IDS_MAX];
static atomic_int nnames;

int32_t topic_id(const char *name)
{
	int n = atomic_load_explicit(&nnames, memory_order_acquire);
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	pthread_mutex_lock(&intern_lock);
	int32_t id = -1;
	n = atomic_load_explicit(&nnames, memory_order_relaxed);
	for (int i = 0; i < n && id < 0; i++)
		if (strcmp(names[i], name) == 0)
			id = i;
	if (id < 0 && n < TOPICS_IDS_MAX && (names[n] = strdup(name))) {
		id = n;
		atomic_store_explicit(&nnames, n + 1, memory_order_release);
	}
	pthread_mutex_unlock(&intern_lock);
	return id;
}

const char *topic_name(int32_t id)
{
	int n = atomic_load_explicit(&nnames, memory_order_acquire);
	return id >= 0 && id < n ? names[id] : NULL;
}

const char *topic_intern(const char *name) { return topic_name(topic_id(name)); }

const char *tp_topic(tp_key k)
{
	const char *s = topic_name(tp_tid(k));
	return s ? s : "?";
}

tp_key tp_of(const char *name, int32_t partition)
{
	int32_t id = topic_id(name);
	return id < 0 ? -1 : tp_make(id, partition);
}
