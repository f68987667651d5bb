/* checkback_proto.h: the wire side of a check-back (docs/producers.md: Check-back), pure: no
 * I/O, no database, no Kafka. Reading the producer's answer, parsing and
 * normalizing a check-back URL (libcurl's URL API, which only parses),
 * deciding whether the allow list holds it, and building the request URL.
 * Declared apart from checkback.h so that the config check, the unit tests
 * and the fuzz target need nothing but cJSON and libcurl. Every function
 * may be called from any thread. */
#ifndef TXHUB_CHECKBACK_PROTO_H
#define TXHUB_CHECKBACK_PROTO_H

#include <stddef.h>

/* The largest answer body read; a longer one is refused as an error. */
#define CHECKBACK_BODY_MAX 65536

typedef enum {
	CHECKBACK_COMMITTED,
	CHECKBACK_ROLLED_BACK,
	CHECKBACK_UNDECIDED, /* "unknown", "prepared", 1: ask again later */
	CHECKBACK_ERROR,     /* anything else: also asked again later */
} checkback_answer;

/* Classify an HTTP answer. For CHECKBACK_UNDECIDED and CHECKBACK_ERROR a
 * printable reason (untrusted bytes escaped) is written to reason. A JSON
 * object with more than one top-level "status" is an error. */
checkback_answer checkback_parse_answer(long http_status, const char *body, size_t len,
                                        char *reason, size_t reasonsz);

/* A check-back URL as libcurl's URL parser reads it. Every string is owned
 * by the struct and freed by checkback_url_clear(). */
typedef struct {
	char *url;     /* scheme://host[:port]/path[?query], no fragment: what is requested */
	char *scheme;  /* "http" or "https" */
	char *host;    /* as written (IPv6 in brackets); compare without regard to case */
	char *path;    /* dot segments removed; at least "/" */
	long port;     /* the default port filled in: 80 or 443 */
	int has_query, has_fragment;
	/* NULL, or why no allow list can hold this URL: userinfo, a backslash,
	 * a host libcurl would rewrite, a hidden dot segment or separator */
	const char *unsafe;
} checkback_url;

/* Parse an http:// or https:// URL (printable ASCII, at most 2048 bytes).
 * Returns 0, or -1 with a reason in err (u is then empty). */
int checkback_url_parse(const char *text, checkback_url *u, char *err, size_t errsz);

/* Free u's strings and empty it; an empty u is fine. */
void checkback_url_clear(checkback_url *u);

/* Whether u may be requested under the comma-separated allow list (empty
 * or NULL: any URL). Inside means: u is not unsafe, and one entry has the
 * same scheme, host (without regard to case) and port, and a path that u's
 * equals or continues after a '/' (an entry path ending in '/' is a
 * directory). When outside, a reason goes to why. Entries that do not
 * parse hold nothing (checkback_allow_validate() keeps them out). */
int checkback_url_permitted(const char *allow, const checkback_url *u, char *why, size_t whysz);

/* checkback_url_parse() then checkback_url_permitted(): 1 inside, 0 not. */
int checkback_url_allowed(const char *allow, const char *url);

/* Check every entry of an allow list: it must parse, be safe, and have no
 * query or fragment. Returns 0, or -1 naming the bad entry in err. */
int checkback_allow_validate(const char *allow, char *err, size_t errsz);

/* One entry of an allow list (text alone, no comma splitting), under the
 * rules of checkback_allow_validate(). Returns 0, or -1 naming it in err. */
int checkback_allow_entry_check(const char *text, char *err, size_t errsz);

/* Whether the entry e (parsed, checked as above) holds u: the same scheme,
 * host (without regard to case) and port, and a path that u's equals or
 * continues after a '/'. u's safety is the caller's to check (u->unsafe):
 * checkback_url_permitted() does both, for a list given as text. */
int checkback_entry_holds(const checkback_url *e, const checkback_url *u);

/* The request URL: base with biz_id, message_key, bizID and messageKey
 * appended as percent-encoded query parameters after "?" or "&" (a fragment
 * of base is dropped: it is never sent). Returns a malloc'd string, or NULL
 * when out of memory. */
char *checkback_request_url(const char *base, const char *biz_id, const char *message_key);

#endif
