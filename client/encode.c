/* encode.c: txhub_message -> envelope bytes, deterministically (the rules
 * are in txhub/envelope.h). Validation comes first and covers every field,
 * so an envelope this returns is one the hub accepts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "../hub/proto/trace.h" /* the hub's own checks, compiled into this library */

const char *txhub_type_name(txhub_type t)
{
	switch (t) {
	case TXHUB_PREPARE: return "prepare";
	case TXHUB_COMMIT: return "commit";
	case TXHUB_ROLLBACK: return "rollback";
	}
	return "?";
}

#define INVALID(...) txhubi_fail(TXHUB_ERR_INVALID, errstr, errsz, __VA_ARGS__)

static txhub_status check_payload(const txhub_message *m, char *errstr, size_t errsz)
{
	if (m->payload_kind == TXHUB_PAYLOAD_NONE)
		return TXHUB_OK;
	if (!m->payload && m->payload_len)
		return INVALID("payload is NULL with a length of %zu", m->payload_len);
	if (m->payload_kind == TXHUB_PAYLOAD_BYTES)
		return TXHUB_OK;
	if (m->payload_kind == TXHUB_PAYLOAD_STRING) {
		if (memchr(m->payload, '\0', m->payload_len))
			return INVALID("payload string contains a NUL byte");
		if (!txhub_valid_utf8(m->payload, m->payload_len))
			return INVALID("payload string is not valid UTF-8");
		return TXHUB_OK;
	}
	if (m->payload_kind == TXHUB_PAYLOAD_JSON) {
		const char *why = txhubi_json_check(m->payload, m->payload_len);
		return why ? INVALID("payload JSON: %s", why) : TXHUB_OK;
	}
	return INVALID("unknown payload kind %d", (int)m->payload_kind);
}

static int valid_url(const char *s)
{
	size_t skip = strncasecmp(s, "http://", 7) == 0 ? 7 : strncasecmp(s, "https://", 8) == 0 ? 8 : 0;
	size_t len = strlen(s);
	if (!skip || len > TXHUB_URL_MAX || len == skip || s[skip] == '/' || s[skip] == '?')
		return 0;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return 0; /* no spaces, controls or raw non-ASCII, as the hub */
	return 1;
}

static txhub_status check_headers(const txhub_message *m, char *errstr, size_t errsz)
{
	if (m->header_count > TXHUB_HEADERS_MAX)
		return INVALID("%zu forward headers, more than %d", m->header_count, TXHUB_HEADERS_MAX);
	if (m->header_count && !m->forward_headers)
		return INVALID("forward_headers is NULL with a count of %zu", m->header_count);
	for (size_t i = 0; i < m->header_count; i++) {
		const txhub_header *h = &m->forward_headers[i];
		if (!h->name || !h->value)
			return INVALID("forward header %zu has a NULL name or value", i);
		if (txhubi_check_id("a forward header name", h->name, strlen(h->name),
		                TXHUB_HEADER_NAME_MAX, errstr, errsz) != TXHUB_OK)
			return TXHUB_ERR_INVALID;
		if (strncasecmp(h->name, "txhub-", 6) == 0)
			return INVALID("forward header \"%s\" uses the reserved prefix txhub-", h->name);
		if (!txhub_valid_utf8(h->value, strlen(h->value)))
			return INVALID("forward header \"%s\" has a value that is not valid UTF-8", h->name);
		for (size_t j = 0; j < i; j++)
			if (strcmp(m->forward_headers[j].name, h->name) == 0)
				return INVALID("forward header \"%s\" appears more than once", h->name);
	}
	return TXHUB_OK;
}

static txhub_status check_forward(const txhub_message *m, char *errstr, size_t errsz)
{
	if (!m->forward_topic) {
		if (m->forward_key || m->header_count)
			return INVALID("forward_key or forward_headers without forward_topic");
		return TXHUB_OK;
	}
	if (!txhub_valid_topic(m->forward_topic))
		return INVALID("forward_topic must be a valid Kafka topic name (1..249 of a-z A-Z 0-9 . _ -)");
	if (strncmp(m->forward_topic, "__", 2) == 0)
		return INVALID("forward_topic names a topic Kafka reserves for itself (names beginning "
		               "with __, such as __consumer_offsets)");
	if (m->forward_key && !txhub_valid_utf8(m->forward_key, strlen(m->forward_key)))
		return INVALID("forward_key is not valid UTF-8");
	return check_headers(m, errstr, errsz);
}

/* forward_not_before or delay_ms (docs/consumers.md: Delayed delivery), read as
 * the hub reads them. */
static txhub_status check_delay(const txhub_message *m, char *errstr, size_t errsz)
{
	if ((m->forward_not_before || m->has_delay_ms) && !m->forward_topic)
		return INVALID("forward_not_before or delay_ms without forward_topic");
	if (m->forward_not_before && m->has_delay_ms)
		return INVALID("give forward_not_before or delay_ms, not both");
	if (m->has_delay_ms && (m->delay_ms < 0 || m->delay_ms > TXHUB_DELAY_MS_MAX))
		return INVALID("delay_ms must be from 0 to %lld", TXHUB_DELAY_MS_MAX);
	int64_t ms;
	char why[128];
	if (m->forward_not_before &&
	    txhubi_rfc3339_parse(m->forward_not_before, strlen(m->forward_not_before), &ms, why,
	                         sizeof why) != 0)
		return INVALID("forward_not_before is not an RFC 3339 time with a zone: %s", why);
	return TXHUB_OK;
}

static txhub_status check_message(txhub_type t, const txhub_message *m, char *errstr,
                                  size_t errsz)
{
	txhub_status st;
	if (!m)
		return INVALID("no message");
	if (t != TXHUB_PREPARE && t != TXHUB_COMMIT && t != TXHUB_ROLLBACK)
		return INVALID("unknown envelope type %d", (int)t);
	if ((st = txhubi_check_id("biz_id", m->biz_id, m->biz_id ? strlen(m->biz_id) : 0,
	                      TXHUB_BIZ_ID_MAX, errstr, errsz)) != TXHUB_OK ||
	    (st = txhubi_check_id("message_key", m->message_key,
	                      m->message_key ? strlen(m->message_key) : 0,
	                      TXHUB_MESSAGE_KEY_MAX, errstr, errsz)) != TXHUB_OK)
		return st;
	if (t == TXHUB_ROLLBACK)
		return TXHUB_OK; /* payload and forward are left out of a rollback */
	int has_payload = m->payload_kind != TXHUB_PAYLOAD_NONE;
	if (t == TXHUB_PREPARE && (!has_payload || !m->forward_topic))
		return INVALID("a prepare needs a payload and forward_topic");
	if (t == TXHUB_COMMIT && has_payload != (m->forward_topic != NULL))
		return INVALID("a one-shot commit needs both a payload and forward_topic");
	if ((st = check_payload(m, errstr, errsz)) != TXHUB_OK ||
	    (st = check_forward(m, errstr, errsz)) != TXHUB_OK)
		return st;
	if (m->checkback_url && !valid_url(m->checkback_url))
		return INVALID("checkback_url must be an http:// or https:// URL of at most %d "
		               "printable ASCII characters", TXHUB_URL_MAX);
	if (m->has_first_after_ms &&
	    (m->first_after_ms < 0 || m->first_after_ms > TXHUB_FIRST_AFTER_MS_MAX))
		return INVALID("first_after_ms must be from 0 to %lld", TXHUB_FIRST_AFTER_MS_MAX);
	const char *why = NULL;
	if (m->tracestate && !m->traceparent)
		return INVALID("a tracestate needs a traceparent");
	if (m->traceparent && (why = txhubi_trace_check_parent(m->traceparent)))
		return INVALID("%s", why);
	if (m->tracestate && (why = txhubi_trace_check_state(m->tracestate)))
		return INVALID("%s", why);
	return check_delay(m, errstr, errsz);
}

static void put_string_field(txhubi_buf *b, const char *name, const char *value)
{
	txhubi_buf_puts(b, name);
	txhubi_buf_json_string(b, value, strlen(value));
}

/* A JSON payload as its compact text. The hub forwards a JSON string
 * payload as the string's bytes (docs/producers.md: Envelope fields), so a JSON value that is a
 * string goes as a JSON string whose content is its compact text: the
 * consumer gets "hello" with its quotes, not hello. */
static void put_json_payload(txhubi_buf *b, const char *json, size_t len)
{
	char *text = malloc(len + 1);
	if (!text) {
		b->oom = 1;
		return;
	}
	size_t n = txhubi_json_minify(json, len, text);
	txhubi_buf_puts(b, ",\"payload\":");
	if (n && text[0] == '"')
		txhubi_buf_json_string(b, text, n);
	else
		txhubi_buf_put(b, text, n);
	free(text);
}

static void put_payload(txhubi_buf *b, const txhub_message *m)
{
	if (m->payload_kind == TXHUB_PAYLOAD_BYTES) {
		txhubi_buf_puts(b, ",\"payload_base64\":\"");
		txhubi_buf_base64(b, m->payload, m->payload_len);
		txhubi_buf_puts(b, "\"");
	} else if (m->payload_kind == TXHUB_PAYLOAD_STRING) {
		txhubi_buf_puts(b, ",\"payload\":");
		txhubi_buf_json_string(b, m->payload, m->payload_len);
	} else if (m->payload_kind == TXHUB_PAYLOAD_JSON) {
		put_json_payload(b, m->payload, m->payload_len);
	}
}

static void put_forward(txhubi_buf *b, const txhub_message *m)
{
	put_string_field(b, ",\"forward\":{\"topic\":", m->forward_topic);
	if (m->forward_key)
		put_string_field(b, ",\"key\":", m->forward_key);
	if (m->header_count) {
		txhubi_buf_puts(b, ",\"headers\":{");
		for (size_t i = 0; i < m->header_count; i++) {
			if (i)
				txhubi_buf_puts(b, ",");
			const txhub_header *h = &m->forward_headers[i];
			txhubi_buf_json_string(b, h->name, strlen(h->name));
			txhubi_buf_puts(b, ":");
			txhubi_buf_json_string(b, h->value, strlen(h->value));
		}
		txhubi_buf_puts(b, "}");
	}
	if (m->forward_not_before)
		put_string_field(b, ",\"not_before\":", m->forward_not_before);
	if (m->has_delay_ms) {
		char num[48];
		snprintf(num, sizeof num, ",\"delay_ms\":%lld", m->delay_ms);
		txhubi_buf_puts(b, num);
	}
	txhubi_buf_puts(b, "}");
}

static void put_checkback(txhubi_buf *b, const txhub_message *m)
{
	if (!m->checkback_url && !m->has_first_after_ms)
		return;
	txhubi_buf_puts(b, ",\"checkback\":{");
	if (m->checkback_url)
		put_string_field(b, "\"url\":", m->checkback_url);
	if (m->has_first_after_ms) {
		char num[40];
		snprintf(num, sizeof num, "%s\"first_after_ms\":%lld", m->checkback_url ? "," : "",
		         m->first_after_ms);
		txhubi_buf_puts(b, num);
	}
	txhubi_buf_puts(b, "}");
}

txhub_status txhub_envelope_encode(txhub_type t, const txhub_message *m, size_t max_bytes,
                                   char **out, size_t *outlen, char *errstr, size_t errsz)
{
	if (!out || !outlen)
		return INVALID("out and outlen are required");
	*out = NULL;
	*outlen = 0;
	txhub_status st = check_message(t, m, errstr, errsz);
	if (st != TXHUB_OK)
		return st;
	if (!max_bytes)
		max_bytes = TXHUB_MAX_BYTES_DEFAULT;
	txhubi_buf b = {0};
	txhubi_buf_puts(&b, "{\"v\":1,\"type\":\"");
	txhubi_buf_puts(&b, txhub_type_name(t));
	put_string_field(&b, "\",\"biz_id\":", m->biz_id);
	put_string_field(&b, ",\"message_key\":", m->message_key);
	if (t != TXHUB_ROLLBACK) {
		put_payload(&b, m);
		if (m->forward_topic)
			put_forward(&b, m);
		put_checkback(&b, m);
		if (m->traceparent) {
			put_string_field(&b, ",\"trace\":{\"traceparent\":", m->traceparent);
			if (m->tracestate)
				put_string_field(&b, ",\"tracestate\":", m->tracestate);
			txhubi_buf_puts(&b, "}");
		}
	}
	txhubi_buf_puts(&b, "}");
	if (b.oom) {
		free(b.data);
		return txhubi_fail(TXHUB_ERR_NOMEM, errstr, errsz, "out of memory");
	}
	if (b.len > max_bytes) {
		free(b.data);
		return txhubi_fail(TXHUB_ERR_TOO_LARGE, errstr, errsz,
		               "the envelope would be %zu bytes, over max_bytes (%zu)", b.len, max_bytes);
	}
	*out = b.data;
	*outlen = b.len;
	return TXHUB_OK;
}
