/* envelope.c: the envelope parser. cJSON checks the grammar and builds the
 * tree; a small raw scanner complements it where cJSON loses information:
 * it rejects \u0000 (cJSON silently truncates strings there) outside the
 * trace context, finds it inside (which drops the trace), and recovers the
 * exact text of a JSON payload and of an integer biz_id, so numbers are
 * forwarded and stored digit for digit rather than through a double. */
#include "envelope.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "envelope_raw.h"
#include "log.h"
#include "rfc3339.h"
#include "topics.h"
#include "url.h"
#include "trace.h"
#include "utf8.h"

static int reject(char *err, size_t errsz, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int reject(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	return -1;
}

const char *envelope_type_name(envelope_type t)
{
	switch (t) {
	case ENVELOPE_PREPARE: return "prepare";
	case ENVELOPE_COMMIT: return "commit";
	case ENVELOPE_ROLLBACK: return "rollback";
	}
	return "?";
}

int envelope_valid_utf8(const unsigned char *s, size_t len) { return txhubi_utf8_valid(s, len); }

/* A name from the envelope, fit for a rejection reason: printable ASCII
 * (other bytes as \xNN, so a reason is always valid UTF-8 and one log
 * line), at most about 64 bytes of it. */
static const char *shown(const char *name, char *buf, size_t bufsz)
{
	return log_escape(name, strlen(name), buf, bufsz);
}

/* The code point of the first control character in s, or -1: C0, DEL, and
 * C1 (U+0080..U+009F, which UTF-8 writes as 0xC2 0x80..0x9F; U+0085 is a
 * line break to some readers). s is valid UTF-8. */
static long first_control(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p < 0x20 || *p == 0x7f)
			return *p;
		if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
			return p[1];
	}
	return -1;
}

/* An id (biz_id, message_key) of 1..max bytes without control characters. */
static int check_id(const char *field, const char *s, size_t max, char *err, size_t errsz)
{
	size_t n = strlen(s);
	if (n == 0 || n > max)
		return reject(err, errsz, "field \"%s\" must be 1..%zu bytes, got %zu", field, max, n);
	long c = first_control(s);
	if (c >= 0)
		return reject(err, errsz, "field \"%s\" contains the control character U+%04lX",
		              field, (unsigned long)c);
	return 0;
}

int envelope_check_id(const char *field, const char *s, size_t max, char *err, size_t errsz)
{
	if (!envelope_valid_utf8((const unsigned char *)s, strlen(s)))
		return reject(err, errsz, "field \"%s\" is not valid UTF-8", field);
	return check_id(field, s, max, err, errsz);
}

static int is_whole(double d, double max)
{
	return isfinite(d) && d >= 0 && d <= max && floor(d) == d;
}

/* The largest integer biz_id, 2^53 - 1: the largest integer that every JSON
 * reader holds exactly (JavaScript's, and any other that reads numbers as
 * doubles), so no reader of the envelope can take it for another id. */
#define BIZ_ID_INT_MAX "9007199254740991"

/* An integer biz_id as its decimal text, cut from the raw JSON text so that
 * nothing goes through a double (which turns 1.00000000000000001 into 1
 * and 1e-400 into 0): digits only, no sign, fraction or exponent; leading
 * zeros never get here (raw_strict_json_check refuses them). On success *out
 * is the text, or NULL when out of memory. */
static int integer_biz_id(const char *text, size_t len, char **out, char *err, size_t errsz)
{
	const char *vs, *ve;
	if (!raw_member_find(text, len, "biz_id", &vs, &ve))
		return reject(err, errsz, "field \"biz_id\" could not be located in the text");
	if (*vs == '-')
		return reject(err, errsz, "field \"biz_id\" must be a string or a non-negative integer");
	for (const char *p = vs; p < ve; p++)
		if (*p < '0' || *p > '9')
			return reject(err, errsz, "field \"biz_id\" must be an integer written with digits "
			                          "only (no fraction or exponent), or a string");
	size_t n = (size_t)(ve - vs), nmax = strlen(BIZ_ID_INT_MAX);
	if (n > nmax || (n == nmax && memcmp(vs, BIZ_ID_INT_MAX, n) > 0))
		return reject(err, errsz, "field \"biz_id\" is an integer above " BIZ_ID_INT_MAX
		                          "; send it as a string");
	*out = strndup(vs, n);
	return 0;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* The first member name of obj that appears twice, or NULL. Objects here are
 * small (forward, checkback, at most ENVELOPE_HEADERS_MAX headers). */
static const char *duplicate_member(const cJSON *obj)
{
	for (const cJSON *a = obj->child; a; a = a->next)
		for (const cJSON *b = a->next; b; b = b->next)
			if (a->string && b->string && strcmp(a->string, b->string) == 0)
				return a->string;
	return NULL;
}

/* forward.not_before or forward.delay_ms (docs/consumers.md: Delayed delivery), into env; a null
 * is the field's absence. Returns 0, or -1 with the reason in err. */
static int parse_delay(const cJSON *fw, envelope *env, char *err, size_t errsz)
{
	const cJSON *nb = cJSON_GetObjectItemCaseSensitive(fw, "not_before");
	const cJSON *dl = cJSON_GetObjectItemCaseSensitive(fw, "delay_ms");
	if (nb && cJSON_IsNull(nb))
		nb = NULL;
	if (dl && cJSON_IsNull(dl))
		dl = NULL;
	if (nb && dl)
		return reject(err, errsz, "fields \"forward.not_before\" and \"forward.delay_ms\" "
		                          "are mutually exclusive");
	if (nb) {
		char why[128];
		if (!cJSON_IsString(nb))
			return reject(err, errsz, "field \"forward.not_before\" must be an RFC 3339 "
			                          "time with a zone (a string)");
		if (rfc3339_parse(nb->valuestring, strlen(nb->valuestring), &env->not_before_ms, why,
		                  sizeof why) != 0)
			return reject(err, errsz, "field \"forward.not_before\" is not an RFC 3339 time "
			                          "with a zone: %s", why);
	}
	if (dl) {
		if (!cJSON_IsNumber(dl) || !is_whole(dl->valuedouble, (double)ENVELOPE_DELAY_MAX_MS))
			return reject(err, errsz, "field \"forward.delay_ms\" must be an integer from 0 "
			                          "to %lld", (long long)ENVELOPE_DELAY_MAX_MS);
		env->delay_ms = (int64_t)dl->valuedouble;
	}
	return 0;
}

/* Fields the hub reads; each may appear once. */
static const char *known_fields[] = {"v", "type", "biz_id", "message_key", "payload",
                                     "payload_base64", "forward", "checkback", NULL};

/* The optional `trace` object (docs/consumers.md: Trace context): what is valid of it is kept,
 * what is not is dropped and noted in env, never rejected. A malformed
 * traceparent takes its tracestate with it (W3C: the state means nothing
 * without its parent); a malformed tracestate alone leaves the traceparent.
 * A \u0000 in them (cJSON cuts the string there, and no valid value holds
 * one) is looked for in the raw text; one in a member name of the object
 * drops the whole trace.
 * Returns -1 only when out of memory. */
static int parse_trace(const cJSON *root, const char *text, size_t len, envelope *env)
{
	int seen = 0;
	for (const cJSON *c = root->child; c; c = c->next)
		seen += c->string && strcmp(c->string, "trace") == 0;
	const cJSON *tr = cJSON_GetObjectItemCaseSensitive(root, "trace");
	if (!tr || cJSON_IsNull(tr))
		return 0;
	const char *why = NULL;
	if (seen > 1)
		why = "field \"trace\" appears more than once";
	else if (!cJSON_IsObject(tr))
		why = "field \"trace\" is not an object";
	else if (duplicate_member(tr))
		why = "field \"trace\" names a member twice";
	const char *rs = NULL, *re = NULL;
	if (!why && raw_member_find(text, len, "trace", &rs, &re) && raw_names_have_nul(rs, re))
		why = "field \"trace\" has a member name with \\u0000";
	if (why) {
		env->trace_dropped = "trace";
		env->trace_dropped_why = why;
		return 0;
	}
	const cJSON *tp = cJSON_GetObjectItemCaseSensitive(tr, "traceparent");
	const cJSON *ts = cJSON_GetObjectItemCaseSensitive(tr, "tracestate");
	if (!tp || cJSON_IsNull(tp))
		why = "trace has no traceparent";
	else if (!cJSON_IsString(tp))
		why = "traceparent is not a string";
	else if (rs && raw_value_has_nul(rs, re, "traceparent"))
		why = "traceparent contains \\u0000";
	else
		why = txhubi_trace_check_parent(tp->valuestring);
	if (why) {
		env->trace_dropped = "traceparent";
		env->trace_dropped_why = why;
		return 0;
	}
	if (!(env->traceparent = strdup(tp->valuestring)))
		return -1;
	txhubi_trace_id_of(env->traceparent, env->trace_id);
	if (!ts || cJSON_IsNull(ts))
		return 0;
	why = !cJSON_IsString(ts)                                 ? "tracestate is not a string"
	      : rs && raw_value_has_nul(rs, re, "tracestate") ? "tracestate contains \\u0000"
	                                                          : txhubi_trace_check_state(ts->valuestring);
	if (why) {
		env->trace_dropped = "tracestate";
		env->trace_dropped_why = why;
		return 0;
	}
	if (*ts->valuestring && !(env->tracestate = strdup(ts->valuestring)))
		return -1;
	return 0;
}

/* ---- envelope_parse, step by step: each returns 0, or -1 with the
 * reason in err (what it filled in env is freed by the caller) ---- */

/* The record value as bytes, before any JSON: a Kafka null, empty, too
 * large, with a NUL, not UTF-8, or opening with a byte-order mark. */
static int check_value(const void *value, size_t len, size_t max_bytes, char *err, size_t errsz)
{
	const char *text = value;
	if (!value)
		return reject(err, errsz, "null record value (tombstone)");
	if (len == 0)
		return reject(err, errsz, "empty record value");
	if (len > max_bytes)
		return reject(err, errsz, "record value of %zu bytes exceeds envelope.max_bytes (%zu)",
		              len, max_bytes);
	if (memchr(text, '\0', len))
		return reject(err, errsz, "record value contains a NUL byte");
	if (!envelope_valid_utf8(value, len))
		return reject(err, errsz, "record value is not valid UTF-8");
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		return reject(err, errsz, "invalid JSON: the record value starts with a byte-order mark");
	return 0;
}

/* -1 with the reason when a field of known_fields appears twice. */
static int duplicate_known_field(const cJSON *root, char *err, size_t errsz)
{
	for (const char **f = known_fields; *f; f++) {
		int n = 0;
		for (const cJSON *c = root->child; c; c = c->next)
			if (c->string && strcmp(c->string, *f) == 0)
				n++;
		if (n > 1)
			return reject(err, errsz, "field \"%s\" appears more than once", *f);
	}
	return 0;
}

/* text[0..len) as one JSON object, by cJSON and the strict checks, each
 * field the hub reads at most once. Returns 0 with the tree in *out (the
 * caller deletes it), or -1 with nothing to free. */
static int parse_json(const char *text, size_t len, cJSON **out, char *err, size_t errsz)
{
	const char *parse_end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(text, len, &parse_end, 0);
	*out = NULL;
	if (!root) {
		size_t at = parse_end && parse_end >= text ? (size_t)(parse_end - text) : 0;
		if (raw_nested_too_deep(text, at < len ? at + 1 : len))
			return reject(err, errsz, "invalid JSON: nested more than %d levels deep (the "
			                          "envelope object is the first), near byte %zu",
			              CJSON_NESTING_LIMIT, at);
		return reject(err, errsz, "invalid JSON near byte %zu", at);
	}
	const char *tail = raw_skip_ws(parse_end, text + len);
	const char *strict = NULL;
	if (tail != text + len)
		reject(err, errsz, "invalid JSON: trailing data at byte %zu", (size_t)(tail - text));
	else if (!cJSON_IsObject(root))
		reject(err, errsz, "envelope is not a JSON object");
	else if ((strict = raw_strict_json_check(text, len)))
		reject(err, errsz, "%s", strict);
	else if (!raw_nul_only_in(text, len, "trace")) /* there: parse_trace drops it */
		reject(err, errsz, "a string contains \\u0000, which is not supported");
	else if (duplicate_known_field(root, err, errsz) == 0) {
		*out = root;
		return 0;
	}
	cJSON_Delete(root);
	return -1;
}

/* The version (absent, null or 1) and the type. */
static int parse_head(const cJSON *root, envelope *env, char *err, size_t errsz)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "v");
	if (v && !cJSON_IsNull(v)) {
		if (!cJSON_IsNumber(v) || !is_whole(v->valuedouble, 1e9))
			return reject(err, errsz, "field \"v\" must be a non-negative integer");
		if (v->valuedouble != 1)
			return reject(err, errsz, "unsupported envelope version %.0f (this hub reads "
			                          "version 1)", v->valuedouble);
	}
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "type");
	if (!type)
		return reject(err, errsz, "missing field \"type\"");
	if (!cJSON_IsString(type))
		return reject(err, errsz, "field \"type\" must be a string");
	if (strcmp(type->valuestring, "prepare") == 0)
		env->type = ENVELOPE_PREPARE;
	else if (strcmp(type->valuestring, "commit") == 0)
		env->type = ENVELOPE_COMMIT;
	else if (strcmp(type->valuestring, "rollback") == 0)
		env->type = ENVELOPE_ROLLBACK;
	else
		return reject(err, errsz, "field \"type\" must be \"prepare\", \"commit\" or "
		                          "\"rollback\"");
	return 0;
}

/* biz_id (a string, or an integer kept as its digits) and message_key. */
static int parse_ids(const cJSON *root, const char *text, size_t len, envelope *env, char *err,
                     size_t errsz)
{
	const cJSON *biz = cJSON_GetObjectItemCaseSensitive(root, "biz_id");
	if (!biz)
		return reject(err, errsz, "missing field \"biz_id\"");
	if (cJSON_IsString(biz)) {
		if (check_id("biz_id", biz->valuestring, ENVELOPE_BIZ_ID_MAX, err, errsz) != 0)
			return -1;
		env->biz_id = strdup(biz->valuestring);
	} else if (cJSON_IsNumber(biz)) {
		if (integer_biz_id(text, len, &env->biz_id, err, errsz) != 0)
			return -1;
	} else {
		return reject(err, errsz, "field \"biz_id\" must be a string or a non-negative integer");
	}
	if (!env->biz_id)
		return reject(err, errsz, "out of memory");
	const cJSON *mk = cJSON_GetObjectItemCaseSensitive(root, "message_key");
	if (!mk)
		return reject(err, errsz, "missing field \"message_key\"");
	if (!cJSON_IsString(mk))
		return reject(err, errsz, "field \"message_key\" must be a string");
	if (check_id("message_key", mk->valuestring, ENVELOPE_MESSAGE_KEY_MAX, err, errsz) != 0)
		return -1;
	if (!(env->message_key = strdup(mk->valuestring)))
		return reject(err, errsz, "out of memory");
	return 0;
}

/* payload (a string as its text, any other JSON value as its exact text,
 * minified) or payload_base64 (decoded). */
static int parse_payload(const cJSON *root, const char *text, size_t len, envelope *env,
                         char *err, size_t errsz)
{
	const cJSON *pl = cJSON_GetObjectItemCaseSensitive(root, "payload");
	const cJSON *pb = cJSON_GetObjectItemCaseSensitive(root, "payload_base64");
	if (pl && pb)
		return reject(err, errsz, "fields \"payload\" and \"payload_base64\" are mutually "
		                          "exclusive");
	if (pb) {
		if (!cJSON_IsString(pb))
			return reject(err, errsz, "field \"payload_base64\" must be a string");
		if (raw_base64_decode(pb->valuestring, &env->payload, &env->payload_len) != 0)
			return reject(err, errsz, "field \"payload_base64\" is not valid base64");
		env->has_payload = 1;
	} else if (pl) {
		if (cJSON_IsString(pl)) {
			env->payload_len = strlen(pl->valuestring);
			env->payload = malloc(env->payload_len + 1);
			if (!env->payload)
				return reject(err, errsz, "out of memory");
			memcpy(env->payload, pl->valuestring, env->payload_len + 1);
		} else {
			const char *vs, *ve;
			if (!raw_member_find(text, len, "payload", &vs, &ve))
				/* cannot happen for text cJSON accepted; never re-print
				 * through a double, which would change numbers */
				return reject(err, errsz, "field \"payload\" could not be located in the text");
			if (!(env->payload = raw_minify(vs, ve, &env->payload_len)))
				return reject(err, errsz, "out of memory");
		}
		env->has_payload = 1;
	}
	return 0;
}

/* forward.headers: an object of at most ENVELOPE_HEADERS_MAX string
 * values, each name 1..255 bytes without control characters and without
 * the reserved prefix txhub-; kept as compact JSON. */
static int parse_forward_headers(const cJSON *fh, envelope *env, char *err, size_t errsz)
{
	char nb[72];
	if (!cJSON_IsObject(fh))
		return reject(err, errsz, "field \"forward.headers\" must be an object of strings");
	if (cJSON_GetArraySize(fh) > ENVELOPE_HEADERS_MAX)
		return reject(err, errsz, "more than %d forward headers", ENVELOPE_HEADERS_MAX);
	const char *dup = duplicate_member(fh);
	if (dup)
		return reject(err, errsz, "forward header \"%s\" appears more than once",
		              shown(dup, nb, sizeof nb));
	for (const cJSON *h = fh->child; h; h = h->next) {
		if (!cJSON_IsString(h))
			return reject(err, errsz, "forward header \"%s\" must have a string value",
			              shown(h->string, nb, sizeof nb));
		if (!*h->string || strlen(h->string) > 255 || first_control(h->string) >= 0)
			return reject(err, errsz, "a forward header name must be 1..255 bytes "
			                          "without control characters");
		if (strncasecmp(h->string, "txhub-", 6) == 0)
			return reject(err, errsz, "forward header \"%s\" uses the reserved "
			                          "prefix txhub-", shown(h->string, nb, sizeof nb));
	}
	if (fh->child && !(env->forward_headers = cJSON_PrintUnformatted(fh)))
		return reject(err, errsz, "out of memory");
	return 0;
}

/* The forward object: topic, key, headers, and a delay. */
static int parse_forward(const cJSON *root, envelope *env, char *err, size_t errsz)
{
	const cJSON *fw = cJSON_GetObjectItemCaseSensitive(root, "forward");
	if (!fw)
		return 0;
	if (!cJSON_IsObject(fw))
		return reject(err, errsz, "field \"forward\" must be an object");
	const char *dup = duplicate_member(fw);
	if (dup) {
		char nb[72];
		return reject(err, errsz, "field \"forward.%s\" appears more than once",
		              shown(dup, nb, sizeof nb));
	}
	const cJSON *ft = cJSON_GetObjectItemCaseSensitive(fw, "topic");
	if (!ft)
		return reject(err, errsz, "missing field \"forward.topic\"");
	if (!cJSON_IsString(ft) || !txhubi_topic_valid(ft->valuestring, strlen(ft->valuestring)))
		return reject(err, errsz, "field \"forward.topic\" must be a valid Kafka topic name "
		                          "(1..249 of a-z A-Z 0-9 . _ -)");
	if (envelope_reserved_topic(ft->valuestring, strlen(ft->valuestring)))
		/* every forward would fail until the row was parked */
		return reject(err, errsz, "field \"forward.topic\" names a topic Kafka reserves for "
		                          "itself (names beginning with __, such as __consumer_offsets)");
	const cJSON *fk = cJSON_GetObjectItemCaseSensitive(fw, "key");
	if (fk && !cJSON_IsNull(fk) && !cJSON_IsString(fk))
		return reject(err, errsz, "field \"forward.key\" must be a string");
	const cJSON *fh = cJSON_GetObjectItemCaseSensitive(fw, "headers");
	if (fh && !cJSON_IsNull(fh) && parse_forward_headers(fh, env, err, errsz) != 0)
		return -1;
	if (parse_delay(fw, env, err, errsz) != 0)
		return -1;
	if (!(env->forward_topic = strdup(ft->valuestring)))
		return reject(err, errsz, "out of memory");
	if (fk && cJSON_IsString(fk) && !(env->forward_key = strdup(fk->valuestring)))
		return reject(err, errsz, "out of memory");
	return 0;
}

/* The checkback object: url and first_after_ms, both optional. */
static int parse_checkback(const cJSON *root, envelope *env, char *err, size_t errsz)
{
	const cJSON *cb = cJSON_GetObjectItemCaseSensitive(root, "checkback");
	if (!cb || cJSON_IsNull(cb))
		return 0;
	if (!cJSON_IsObject(cb))
		return reject(err, errsz, "field \"checkback\" must be an object");
	const char *dup = duplicate_member(cb);
	if (dup) {
		char nb[72];
		return reject(err, errsz, "field \"checkback.%s\" appears more than once",
		              shown(dup, nb, sizeof nb));
	}
	const cJSON *url = cJSON_GetObjectItemCaseSensitive(cb, "url");
	if (url && !cJSON_IsNull(url)) {
		if (!cJSON_IsString(url) || !envelope_valid_url(url->valuestring))
			return reject(err, errsz, "field \"checkback.url\" must be an http:// or https:// "
			                          "URL of at most %d characters", ENVELOPE_URL_MAX);
		if (!(env->checkback_url = dup_or_null(url->valuestring)))
			return reject(err, errsz, "out of memory");
	}
	const cJSON *fa = cJSON_GetObjectItemCaseSensitive(cb, "first_after_ms");
	if (fa && !cJSON_IsNull(fa)) {
		if (!cJSON_IsNumber(fa) || !is_whole(fa->valuedouble, 30.0 * 86400000.0))
			return reject(err, errsz, "field \"checkback.first_after_ms\" must be an integer "
			                          "from 0 to 2592000000");
		env->first_after_ms = (int64_t)fa->valuedouble;
	}
	return 0;
}

/* What the type needs: a prepare a payload and a forward; a commit both
 * or neither (a one-shot commit, or a decision). */
static int check_type_needs(const envelope *env, char *err, size_t errsz)
{
	if (env->type == ENVELOPE_PREPARE) {
		if (!env->has_payload)
			return reject(err, errsz, "a prepare needs \"payload\" or \"payload_base64\"");
		if (!env->forward_topic)
			return reject(err, errsz, "missing field \"forward\"");
	} else if (env->type == ENVELOPE_COMMIT) {
		if (env->has_payload != (env->forward_topic != NULL))
			return reject(err, errsz, "a one-shot commit needs both a payload and \"forward\"");
	}
	return 0;
}

int envelope_parse(const void *value, size_t len, size_t max_bytes,
                   envelope *env, char *err, size_t errsz)
{
	memset(env, 0, sizeof *env);
	env->first_after_ms = -1;
	env->not_before_ms = -1;
	env->delay_ms = -1;
	const char *text = value;
	cJSON *root = NULL;
	if (check_value(value, len, max_bytes, err, errsz) != 0 ||
	    parse_json(text, len, &root, err, errsz) != 0)
		return -1;
	int rc = parse_head(root, env, err, errsz);
	if (rc == 0)
		rc = parse_ids(root, text, len, env, err, errsz);
	if (rc == 0)
		rc = parse_payload(root, text, len, env, err, errsz);
	if (rc == 0)
		rc = parse_forward(root, env, err, errsz);
	if (rc == 0)
		rc = parse_checkback(root, env, err, errsz);
	if (rc == 0 && parse_trace(root, text, len, env) != 0)
		rc = reject(err, errsz, "out of memory");
	if (rc == 0)
		rc = check_type_needs(env, err, errsz);
	cJSON_Delete(root);
	if (rc != 0)
		envelope_free(env);
	return rc;
}

int envelope_is_oneshot(const envelope *env)
{
	return env->type == ENVELOPE_COMMIT && env->has_payload && env->forward_topic;
}

void envelope_free(envelope *env)
{
	if (!env)
		return;
	free(env->biz_id);
	free(env->message_key);
	free(env->payload);
	free(env->forward_topic);
	free(env->forward_key);
	free(env->forward_headers);
	free(env->checkback_url);
	free(env->traceparent);
	free(env->tracestate);
	memset(env, 0, sizeof *env);
	env->first_after_ms = -1;
	env->not_before_ms = -1;
	env->delay_ms = -1;
}
