/* The hub's parser against the shared test vectors (tests/vectors,
 * docs/producers.md: Producing from C): every envelope the client libraries encode is accepted
 * with the fields the vector names, and every negative vector that the
 * JSON Schema refuses is refused here as well. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "envelope.h"
#include "vectors.h"

static const char *field(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void assert_str_or_null(const char *got, const char *want, const char *what,
                               const char *name)
{
	if (!want)
		cr_assert_null(got, "%s: %s is \"%s\", want none", name, what, got);
	else
		cr_assert(got && strcmp(got, want) == 0, "%s: %s is \"%s\", want \"%s\"", name, what,
		          got ? got : "(null)", want);
}

/* The parsed forward headers (compact JSON) equal the vector's pairs, in
 * order. */
static void assert_headers(const envelope *env, const cJSON *want, const char *name)
{
	int n = cJSON_GetArraySize(want);
	if (n == 0) {
		cr_assert_null(env->forward_headers, "%s: headers %s", name, env->forward_headers);
		return;
	}
	cJSON *got = cJSON_Parse(env->forward_headers);
	cr_assert_not_null(got);
	cr_assert_eq(cJSON_GetArraySize(got), n, "%s", name);
	const cJSON *h = got->child;
	for (int i = 0; i < n; i++, h = h->next) {
		const cJSON *pair = cJSON_GetArrayItem(want, i);
		cr_assert_str_eq(h->string, cJSON_GetArrayItem(pair, 0)->valuestring, "%s", name);
		cr_assert_str_eq(h->valuestring, cJSON_GetArrayItem(pair, 1)->valuestring, "%s", name);
	}
	cJSON_Delete(got);
}

static void check_one(const cJSON *vec)
{
	const char *name = field(vec, "name");
	const cJSON *hub = cJSON_GetObjectItemCaseSensitive(vec, "hub");
	size_t len, plen = 0;
	unsigned char *raw = v_unbase64(field(vec, "encoded_base64"), &len);
	envelope env;
	char err[256];
	cr_assert_eq(envelope_parse(raw, len, 1048576, &env, err, sizeof err), 0, "%s: %s", name, err);
	cr_assert_str_eq(envelope_type_name(env.type), field(hub, "type"), "%s", name);
	cr_assert_str_eq(env.biz_id, field(hub, "biz_id"), "%s", name);
	cr_assert_str_eq(env.message_key, field(hub, "message_key"), "%s", name);
	const char *fwd = field(hub, "forwarded_base64");
	if (fwd) {
		unsigned char *want = v_unbase64(fwd, &plen);
		cr_assert(env.has_payload, "%s: no payload", name);
		cr_assert_eq(env.payload_len, plen, "%s: payload of %zu bytes, want %zu", name,
		             env.payload_len, plen);
		cr_assert(memcmp(env.payload, want, plen) == 0, "%s: payload differs", name);
		free(want);
	} else {
		cr_assert(!env.has_payload, "%s: a payload", name);
	}
	assert_str_or_null(env.forward_topic, field(hub, "forward_topic"), "forward.topic", name);
	assert_str_or_null(env.forward_key, field(hub, "forward_key"), "forward.key", name);
	assert_str_or_null(env.checkback_url, field(hub, "checkback_url"), "checkback.url", name);
	assert_headers(&env, cJSON_GetObjectItemCaseSensitive(hub, "forward_headers"), name);
	cr_assert_eq(env.first_after_ms,
	             (int64_t)cJSON_GetObjectItemCaseSensitive(hub, "first_after_ms")->valuedouble,
	             "%s", name);
	const char *tid = field(hub, "trace_id"); /* absent: no trace context */
	cr_assert_str_eq(env.trace_id, tid ? tid : "", "%s", name);
	assert_str_or_null(env.tracestate, field(hub, "tracestate"), "trace.tracestate", name);
	cr_assert_null(env.trace_dropped, "%s", name);
	/* delayed delivery: -1 where the vector has none */
	const cJSON *nb = cJSON_GetObjectItemCaseSensitive(hub, "not_before_ms");
	const cJSON *dl = cJSON_GetObjectItemCaseSensitive(hub, "delay_ms");
	cr_assert_eq(env.not_before_ms, nb ? (int64_t)nb->valuedouble : -1, "%s", name);
	cr_assert_eq(env.delay_ms, dl ? (int64_t)dl->valuedouble : -1, "%s", name);
	envelope_free(&env);
	free(raw);
}

Test(vectors, every_envelope_parses_to_its_fields)
{
	cJSON *doc = v_load("envelopes.json");
	const cJSON *vec;
	int n = 0;
	cJSON_ArrayForEach(vec, cJSON_GetObjectItemCaseSensitive(doc, "envelopes")) {
		check_one(vec);
		n++;
	}
	cr_assert_geq(n, 10);
	cJSON_Delete(doc);
}

/* A vector given as JSON text (input.payload_json): what the hub forwards
 * from the encoded envelope is JSON text that parses back to the caller's
 * value, whatever the value (a string too: docs/producers.md: Envelope fields forwards a JSON
 * string payload as its bytes, so the client must send its JSON text). */
static int json_round_trip(const cJSON *vec)
{
	const char *name = field(vec, "name");
	const char *text = field(cJSON_GetObjectItemCaseSensitive(vec, "input"), "payload_json");
	if (!text)
		return 0;
	size_t len;
	unsigned char *raw = v_unbase64(field(vec, "encoded_base64"), &len);
	envelope env;
	char err[256];
	cr_assert_eq(envelope_parse(raw, len, 1048576, &env, err, sizeof err), 0, "%s: %s", name, err);
	cJSON *want = cJSON_Parse(text);
	char *fwd = strndup((const char *)env.payload, env.payload_len);
	cJSON *got = cJSON_ParseWithOpts(fwd, NULL, 1); /* one value, nothing after it */
	cr_assert_not_null(got, "%s: the consumer gets %.*s, not JSON", name, (int)env.payload_len, fwd);
	cr_assert(cJSON_Compare(got, want, 1), "%s: the consumer gets %.*s, not the value of %s", name,
	          (int)env.payload_len, fwd, text);
	cJSON_Delete(want);
	cJSON_Delete(got);
	free(fwd);
	envelope_free(&env);
	free(raw);
	return 1;
}

Test(vectors, every_json_payload_reaches_the_consumer_as_its_value)
{
	cJSON *doc = v_load("envelopes.json");
	const cJSON *vec;
	int n = 0;
	cJSON_ArrayForEach(vec, cJSON_GetObjectItemCaseSensitive(doc, "envelopes"))
		n += json_round_trip(vec);
	cr_assert_geq(n, 10);
	cJSON_Delete(doc);
}

Test(vectors, every_negative_envelope_is_rejected)
{
	cJSON *doc = v_load("envelopes.json");
	const cJSON *vec;
	int n = 0;
	cJSON_ArrayForEach(vec, cJSON_GetObjectItemCaseSensitive(doc, "invalid_envelopes")) {
		const char *name = field(vec, "name");
		const char *text = field(vec, "envelope");
		envelope env;
		char err[256] = "";
		cr_assert_eq(envelope_parse(text, strlen(text), 1048576, &env, err, sizeof err), -1,
		             "%s: accepted", name);
		cr_assert_gt(strlen(err), 0);
		n++;
	}
	cr_assert_geq(n, 20);
	cJSON_Delete(doc);
}
