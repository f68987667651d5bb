/* checkback_proto.c: see checkback_proto.h. Pure, no I/O: unit-tested and
 * fuzzed on its own (tests/fuzz). libcurl's URL API (curl_url) is used
 * only to parse: the allow list must read a URL exactly as the libcurl
 * that requests it does. */
#include "checkback_proto.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "url.h"

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

/* ---- URLs and the allow list ---- */

/* Length of the "http://" or "https://" that starts s (any case), else 0.
 * Exactly two slashes and a host must follow: libcurl would also read
 * "http:/a" and "http:///a", which the envelope refuses too. */
static size_t scheme_len(const char *s)
{
	size_t n = strncasecmp(s, "http://", 7) == 0 ? 7 : strncasecmp(s, "https://", 8) == 0 ? 8 : 0;
	return n && s[n] != '/' && s[n] != '\0' ? n : 0;
}

static int printable_ascii(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p <= 0x20 || *p >= 0x7f)
			return 0;
	return 1;
}

/* The host as written: the authority after the scheme without its port
 * (an IPv6 literal keeps its brackets). Only meaningful without userinfo. */
static void written_host(const char *authority, size_t alen, const char **h, size_t *hl)
{
	const char *end = *authority == '[' ? memchr(authority, ']', alen) : NULL;
	const char *colon = memchr(authority, ':', alen);
	*h = authority;
	*hl = end ? (size_t)(end - authority) + 1 : colon ? (size_t)(colon - authority) : alen;
}

static int is_encoded(const char *p, const char *end, char hi, char lo)
{
	return end - p >= 3 && p[0] == '%' && p[1] == hi && (p[2] | 0x20) == lo;
}

/* Why one path segment would mean something else to a server that decodes
 * or strips more than libcurl does, or NULL. libcurl removes "." and ".."
 * only as written; a server may still take "%2e%2e", ".%2E" or "..;x"
 * (Tomcat's path parameters) for "..", and "%2f" or "%5c" for a separator.
 * With literal set, a plain "." or ".." counts too (a normalized path must
 * have none). */
static const char *segment_risk(const char *seg, const char *end, int literal)
{
	const char *semi = memchr(seg, ';', (size_t)(end - seg));
	const char *plain_end = semi ? semi : end;
	int dots = 0, encoded = 0;
	const char *p = seg;
	while (p < plain_end && dots < 3) {
		if (*p == '.') {
			p++;
		} else if (is_encoded(p, plain_end, '2', 'e')) {
			p += 3;
			encoded = 1;
		} else {
			break;
		}
		dots++;
	}
	if (p == plain_end && (dots == 1 || dots == 2)) {
		if (encoded)
			return "a percent-encoded dot segment";
		if (semi)
			return "a dot segment with parameters (..;)";
		if (literal)
			return "a dot segment libcurl left in place";
	}
	for (p = seg; p < end; p++)
		if (is_encoded(p, end, '2', 'f') || is_encoded(p, end, '5', 'c'))
			return "a percent-encoded / or \\ in its path";
	return NULL;
}

/* The first risk of any segment of the path [p, end). */
static const char *path_risk(const char *p, const char *end, int literal)
{
	while (p < end) {
		const char *seg = *p == '/' ? p + 1 : p;
		const char *next = memchr(seg, '/', (size_t)(end - seg));
		if (!next)
			next = end;
		const char *r = segment_risk(seg, next, literal);
		if (r)
			return r;
		p = next;
	}
	return NULL;
}

/* Why the URL as written (text) and as libcurl read it (u) could lead
 * somewhere an allow list did not mean, or NULL. */
static const char *unsafe_reason(const char *text, size_t skip, CURLU *h, const checkback_url *u)
{
	const char *authority = text + skip;
	size_t alen = strcspn(authority, "/?#");
	char *user = NULL, *password = NULL;
	int userinfo = curl_url_get(h, CURLUPART_USER, &user, 0) == CURLUE_OK ||
	               curl_url_get(h, CURLUPART_PASSWORD, &password, 0) == CURLUE_OK;
	curl_free(user);
	curl_free(password);
	if (userinfo || memchr(authority, '@', alen))
		return "userinfo (a name@ before the host)";
	if (strchr(text, '\\'))
		return "a backslash";
	/* libcurl rewrites 2130706433, 0x7f000001, 0177.0.0.1 and 127.1 into
	 * 127.0.0.1, decodes %-escapes and compresses IPv6: an entry holds a
	 * host only as written, so only the form libcurl keeps is accepted */
	const char *wh;
	size_t whl;
	written_host(authority, alen, &wh, &whl);
	if (strlen(u->host) != whl || strncasecmp(u->host, wh, whl) != 0)
		return "a host not written in its normal form";
	const char *path = authority + alen;
	const char *r = path_risk(path, path + strcspn(path, "?#"), 0);
	return r ? r : path_risk(u->path, u->path + strlen(u->path), 1);
}

/* Fill u from the parsed handle. Returns 0, or -1 when out of memory. */
static int take_parts(CURLU *h, checkback_url *u)
{
	char *port = NULL, *query = NULL, *fragment = NULL;
	if (curl_url_get(h, CURLUPART_SCHEME, &u->scheme, 0) != CURLUE_OK ||
	    curl_url_get(h, CURLUPART_HOST, &u->host, 0) != CURLUE_OK ||
	    curl_url_get(h, CURLUPART_PATH, &u->path, 0) != CURLUE_OK ||
	    curl_url_get(h, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
		return -1;
	u->port = strtol(port, NULL, 10);
	curl_free(port);
	u->has_query = curl_url_get(h, CURLUPART_QUERY, &query, 0) == CURLUE_OK;
	u->has_fragment = curl_url_get(h, CURLUPART_FRAGMENT, &fragment, 0) == CURLUE_OK;
	curl_free(query);
	curl_free(fragment);
	/* the fragment is never sent, so the URL requested has none */
	if (curl_url_set(h, CURLUPART_FRAGMENT, NULL, 0) != CURLUE_OK ||
	    curl_url_get(h, CURLUPART_URL, &u->url, 0) != CURLUE_OK)
		return -1;
	return 0;
}

int checkback_url_parse(const char *text, checkback_url *u, char *err, size_t errsz)
{
	memset(u, 0, sizeof *u);
	size_t skip = scheme_len(text);
	if (!skip || strlen(text) > ENVELOPE_URL_MAX) {
		snprintf(err, errsz, "not an http:// or https:// URL of at most %d bytes",
		         ENVELOPE_URL_MAX);
		return -1;
	}
	if (!printable_ascii(text)) {
		snprintf(err, errsz, "spaces, control characters and non-ASCII bytes must be "
		                     "percent-encoded");
		return -1;
	}
	CURLU *h = curl_url();
	CURLUcode rc = h ? curl_url_set(h, CURLUPART_URL, text, 0) : CURLUE_OUT_OF_MEMORY;
	if (rc == CURLUE_OK && take_parts(h, u) != 0)
		rc = CURLUE_OUT_OF_MEMORY;
	if (rc == CURLUE_OK)
		u->unsafe = unsafe_reason(text, skip, h, u);
	curl_url_cleanup(h);
	if (rc != CURLUE_OK) {
		snprintf(err, errsz, "%s", curl_url_strerror(rc));
		checkback_url_clear(u);
		return -1;
	}
	return 0;
}

void checkback_url_clear(checkback_url *u)
{
	curl_free(u->url);
	curl_free(u->scheme);
	curl_free(u->host);
	curl_free(u->path);
	memset(u, 0, sizeof *u);
}

/* Whether path equals entry or continues it after a '/'. */
static int path_under(const char *entry, const char *path)
{
	size_t n = strlen(entry);
	if (strncmp(path, entry, n) != 0)
		return 0;
	return path[n] == '\0' || path[n] == '/' || (n > 0 && entry[n - 1] == '/');
}

int checkback_entry_holds(const checkback_url *e, const checkback_url *u)
{
	return strcmp(e->scheme, u->scheme) == 0 && strcasecmp(e->host, u->host) == 0 &&
	       e->port == u->port && path_under(e->path, u->path);
}

/* The next entry of a comma-separated list, trimmed, malloc'd (NULL when
 * out of memory). Returns 0 when the list is done. */
static int next_entry(const char **cursor, char **entry)
{
	const char *p = *cursor;
	while (*p == ',' || *p == ' ' || *p == '\t')
		p++;
	if (!*p)
		return 0;
	const char *end = p + strcspn(p, ",");
	const char *last = end;
	while (last > p && (last[-1] == ' ' || last[-1] == '\t'))
		last--;
	*entry = strndup(p, (size_t)(last - p));
	*cursor = end;
	return 1;
}

int checkback_url_permitted(const char *allow, const checkback_url *u, char *why, size_t whysz)
{
	if (!allow || !*allow)
		return 1;
	if (u->unsafe) {
		snprintf(why, whysz, "it has %s", u->unsafe);
		return 0;
	}
	int inside = 0;
	char *text, err[8];
	for (const char *p = allow; !inside && next_entry(&p, &text);) {
		checkback_url e;
		if (text && checkback_url_parse(text, &e, err, sizeof err) == 0) {
			inside = !e.unsafe && checkback_entry_holds(&e, u);
			checkback_url_clear(&e);
		}
		free(text);
	}
	if (!inside)
		snprintf(why, whysz, "no entry has its scheme, host and port and a path it is under");
	return inside;
}

int checkback_url_allowed(const char *allow, const char *url)
{
	checkback_url u;
	char why[128];
	if (checkback_url_parse(url, &u, why, sizeof why) != 0)
		return 0; /* a URL libcurl cannot read is never requested */
	int inside = checkback_url_permitted(allow, &u, why, sizeof why);
	checkback_url_clear(&u);
	return inside;
}

int checkback_allow_entry_check(const char *text, char *err, size_t errsz)
{
	char why[160], esc[256];
	checkback_url e;
	const char *shown = log_escape(text, strlen(text), esc, sizeof esc);
	if (checkback_url_parse(text, &e, why, sizeof why) != 0) {
		snprintf(err, errsz, "\"%s\": %s", shown, why);
		return -1;
	}
	const char *bad = e.unsafe ? e.unsafe
	                  : e.has_query ? "a query (entries compare scheme, host, port and path)"
	                  : e.has_fragment ? "a fragment" : NULL;
	checkback_url_clear(&e);
	if (bad)
		snprintf(err, errsz, "\"%s\" has %s", shown, bad);
	return bad ? -1 : 0;
}

int checkback_allow_validate(const char *allow, char *err, size_t errsz)
{
	char *text;
	for (const char *p = allow ? allow : ""; next_entry(&p, &text);) {
		int rc = text ? checkback_allow_entry_check(text, err, errsz) : -1;
		if (!text)
			snprintf(err, errsz, "out of memory");
		free(text);
		if (rc != 0)
			return -1;
	}
	return 0;
}
