/* checkback_proto.c: the wire side of a check-back (CONTRACT §5): the
 * request URL, the allow list, and reading the producer's answer. Pure, no
 * I/O: unit-tested and fuzzed on its own (tests/fuzz). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "checkback.h"
#include "log.h"

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Classify one status word or number (already trimmed). */
static int status_word(const char *s, size_t len, checkback_answer *out)
{
	static const struct {
		const char *word;
		checkback_answer a;
	} words[] = {
		{"committed", CHECKBACK_COMMITTED},   {"commit", CHECKBACK_COMMITTED},
		{"2", CHECKBACK_COMMITTED},           {"rolled_back", CHECKBACK_ROLLED_BACK},
		{"rollback", CHECKBACK_ROLLED_BACK},  {"3", CHECKBACK_ROLLED_BACK},
		{"unknown", CHECKBACK_UNDECIDED},     {"prepared", CHECKBACK_UNDECIDED},
		{"1", CHECKBACK_UNDECIDED},
	};
	for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
		if (strlen(words[i].word) == len && strncasecmp(words[i].word, s, len) == 0) {
			*out = words[i].a;
			return 0;
		}
	}
	return -1;
}

/* How many top-level members of obj are named "status". cJSON keeps every
 * duplicate and its lookup returns the first, so a body with two would be
 * read by whichever member a producer's JSON library happened to put
 * first: an error, as a field twice in an envelope is. */
static int status_count(const cJSON *obj)
{
	int n = 0;
	for (const cJSON *c = obj->child; c; c = c->next)
		n += c->string && strcmp(c->string, "status") == 0;
	return n;
}

checkback_answer checkback_parse_answer(long http_status, const char *body, size_t len,
                                        char *reason, size_t reasonsz)
{
	char esc[96];
	if (reasonsz)
		reason[0] = '\0';
	if (http_status < 200 || http_status > 299) {
		snprintf(reason, reasonsz, "HTTP %ld%s%s", http_status, len ? ": " : "",
		         len ? log_escape(body, len < 64 ? len : 64, esc, sizeof esc) : "");
		return CHECKBACK_ERROR;
	}
	while (len > 0 && is_space(*body)) {
		body++;
		len--;
	}
	while (len > 0 && is_space(body[len - 1]))
		len--;
	if (len == 0) {
		snprintf(reason, reasonsz, "empty answer");
		return CHECKBACK_ERROR;
	}
	checkback_answer a;
	if (body[0] == '{' || body[0] == '"') {
		cJSON *doc = cJSON_ParseWithLength(body, len);
		const cJSON *st = NULL;
		if (doc && cJSON_IsObject(doc))
			st = cJSON_GetObjectItemCaseSensitive(doc, "status");
		else if (doc && cJSON_IsString(doc))
			st = doc;
		int ok = -1;
		if (!doc) {
			snprintf(reason, reasonsz, "unreadable answer: %s",
			         log_escape(body, len < 64 ? len : 64, esc, sizeof esc));
		} else if (st && st != doc && status_count(doc) > 1) {
			snprintf(reason, reasonsz, "the JSON answer has more than one \"status\" field");
		} else if (!st) {
			snprintf(reason, reasonsz, "the JSON answer has no \"status\" field");
		} else if (cJSON_IsString(st)) {
			ok = status_word(st->valuestring, strlen(st->valuestring), &a);
			if (ok != 0)
				snprintf(reason, reasonsz, "unknown status \"%s\"",
				         log_escape(st->valuestring, strlen(st->valuestring), esc,
				                    sizeof esc));
		} else if (cJSON_IsNumber(st) && (st->valuedouble == 1 || st->valuedouble == 2 ||
		                                  st->valuedouble == 3)) {
			char num[2] = {(char)('0' + (int)st->valuedouble), '\0'};
			ok = status_word(num, 1, &a);
		} else {
			snprintf(reason, reasonsz, "the JSON \"status\" is not 1, 2, 3 or a status word");
		}
		cJSON_Delete(doc);
		if (ok != 0)
			return CHECKBACK_ERROR;
	} else if (status_word(body, len, &a) != 0) {
		snprintf(reason, reasonsz, "unreadable answer: %s",
		         log_escape(body, len < 64 ? len : 64, esc, sizeof esc));
		return CHECKBACK_ERROR;
	}
	if (a == CHECKBACK_UNDECIDED)
		snprintf(reason, reasonsz, "not decided yet (the producer answered %s)",
		         log_escape(body, len < 48 ? len : 48, esc, sizeof esc));
	return a;
}

/* Append s percent-encoded (RFC 3986: all but unreserved characters). */
static char *put_escaped(char *o, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		    *p == '-' || *p == '.' || *p == '_' || *p == '~') {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	return o;
}

char *checkback_request_url(const char *base, const char *biz_id, const char *message_key)
{
	size_t blen = strcspn(base, "#"); /* a fragment is never sent */
	size_t need = blen + 1 + 3 * 2 * (strlen(biz_id) + strlen(message_key)) +
	              sizeof "biz_id=&message_key=&bizID=&messageKey=";
	char *url = malloc(need);
	if (!url)
		return NULL;
	memcpy(url, base, blen);
	char *o = url + blen;
	const char *q = memchr(base, '?', blen);
	if (!q)
		*o++ = '?';
	else if (o[-1] != '?' && o[-1] != '&')
		*o++ = '&';
	static const char *names[] = {"biz_id=", "&message_key=", "&bizID=", "&messageKey="};
	for (int i = 0; i < 4; i++) {
		size_t nl = strlen(names[i]);
		memcpy(o, names[i], nl);
		o = put_escaped(o + nl, i % 2 == 0 ? biz_id : message_key);
	}
	*o = '\0';
	return url;
}

int checkback_url_allowed(const char *allow, const char *url)
{
	if (!allow || !*allow)
		return 1;
	const char *p = allow;
	while (*p) {
		while (*p == ',' || is_space(*p))
			p++;
		const char *end = p;
		while (*end && *end != ',')
			end++;
		const char *last = end;
		while (last > p && is_space(last[-1]))
			last--;
		size_t len = (size_t)(last - p);
		if (len > 0 && strncmp(url, p, len) == 0) {
			char next = url[len];
			if (p[len - 1] == '/' || next == '\0' || next == '/' || next == '?' || next == '#')
				return 1;
		}
		p = end;
	}
	return 0;
}
