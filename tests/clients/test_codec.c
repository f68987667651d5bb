/* Unit tests of the client library's pure parts against the shared vectors
 * (tests/vectors): the envelope encoder's exact bytes, the inputs it must
 * refuse, check-back signatures, request parsing and verification. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txhub.h"
#include "vectors.h"

Test(encode, every_vector_encodes_to_its_exact_bytes)
{
	cJSON *doc = v_load("envelopes.json");
	const cJSON *vec;
	int n = 0;
	cJSON_ArrayForEach(vec, cJSON_GetObjectItemCaseSensitive(doc, "envelopes")) {
		const char *name = cJSON_GetObjectItemCaseSensitive(vec, "name")->valuestring;
		size_t want_len;
		unsigned char *want = v_unbase64(
			cJSON_GetObjectItemCaseSensitive(vec, "encoded_base64")->valuestring, &want_len);
		v_input in;
		v_input_from(vec, &in);
		char *out = NULL, err[256] = "";
		size_t len = 0;
		txhub_status st = txhub_envelope_encode(in.type, &in.m, in.max_bytes, &out, &len, err,
		                                        sizeof err);
		cr_assert_eq(st, TXHUB_OK, "%s: %s", name, err);
		cr_assert_eq(len, want_len, "%s: %zu bytes, want %zu:\n%s\n%s", name, len, want_len, out, want);
		cr_assert(memcmp(out, want, len) == 0, "%s:\n got %s\nwant %s", name, out, want);
		cr_assert_eq(out[len], '\0');
		free(out);
		free(want);
		v_input_free(&in);
		n++;
	}
	cr_assert_geq(n, 10);
	cJSON_Delete(doc);
}

Test(encode, every_invalid_input_is_refused_with_a_reason)
{
	cJSON *doc = v_load("envelopes.json");
	const cJSON *vec;
	cJSON_ArrayForEach(vec, cJSON_GetObjectItemCaseSensitive(doc, "invalid_inputs")) {
		const char *name = cJSON_GetObjectItemCaseSensitive(vec, "name")->valuestring;
		const char *want = cJSON_GetObjectItemCaseSensitive(vec, "status")->valuestring;
		v_input in;
		v_input_from(vec, &in);
		char *out = (char *)1, err[256] = "";
		size_t len = 7;
		txhub_status st = txhub_envelope_encode(in.type, &in.m, in.max_bytes, &out, &len, err,
		                                        sizeof err);
		cr_assert_str_eq(txhub_status_name(st), want, "%s: %s (%s)", name,
		                 txhub_status_name(st), err);
		cr_assert_null(out, "%s", name);
		cr_assert_eq(len, 0);
		cr_assert_gt(strlen(err), 5, "%s: no reason given", name);
		v_input_free(&in);
	}
	cJSON_Delete(doc);
}

/* TXHUB_PAYLOAD_JSON: the consumer gets the value's compact JSON text,
 * which parses back to the value. By docs/producers.md: Envelope fields the hub forwards a JSON
 * string payload as its bytes and any other payload as its compact text. */
Test(encode, json_payload_reaches_the_consumer_as_its_compact_text)
{
	static const char *cases[][2] = {
		{"\"hello\"", "\"hello\""},
		{" \"\" ", "\"\""},
		{"\"q\\\" b\\\\ s\\/ \\n\\u00e9 \xc3\xa9 \\ud83d\\ude00\"\n",
		 "\"q\\\" b\\\\ s\\/ \\n\\u00e9 \xc3\xa9 \\ud83d\\ude00\""},
		{" -12.50e-1 ", "-12.50e-1"},
		{"true", "true"}, {"false", "false"}, {" null", "null"},
		{"[ 1 , \"a \\\" b\" , {} ]", "[1,\"a \\\" b\",{}]"},
		{"{ \"k\" : { \"s\" : \" x \" } }", "{\"k\":{\"s\":\" x \"}}"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *text = cases[i][0], *compact = cases[i][1];
		txhub_message m = {.biz_id = "b", .message_key = "k", .payload_kind = TXHUB_PAYLOAD_JSON,
		                   .payload = text, .payload_len = strlen(text), .forward_topic = "t"};
		char *out = NULL, err[256] = "";
		size_t len;
		cr_assert_eq(txhub_envelope_encode(TXHUB_PREPARE, &m, 0, &out, &len, err, sizeof err),
		             TXHUB_OK, "%s: %s", text, err);
		cJSON *env = cJSON_Parse(out);
		const cJSON *pl = cJSON_GetObjectItemCaseSensitive(env, "payload");
		if (cJSON_IsString(pl)) { /* forwarded as the string's bytes */
			cr_assert_str_eq(pl->valuestring, compact, "%s: %s", text, out);
		} else { /* forwarded as the envelope's text of it, which is compact */
			char want[256];
			snprintf(want, sizeof want, "\"payload\":%s,\"forward\"", compact);
			cr_assert(strstr(out, want), "%s: %s", text, out);
		}
		cJSON *a = cJSON_Parse(compact), *b = cJSON_Parse(text);
		cr_assert(a && cJSON_Compare(a, b, 1), "case %zu parses to another value", i);
		cJSON_Delete(a);
		cJSON_Delete(b);
		cJSON_Delete(env);
		free(out);
	}
}

Test(encode, default_limit_is_one_mebibyte)
{
	size_t n = 1048576;
	char *big = malloc(n);
	cr_assert_not_null(big);
	memset(big, 'x', n);
	txhub_message m = {.biz_id = "b", .message_key = "k", .payload_kind = TXHUB_PAYLOAD_BYTES,
	                   .payload = big, .payload_len = n - 2000, .forward_topic = "t"};
	char *out = NULL, err[200];
	size_t len;
	/* base64 makes 1046576 bytes about 1.4 MB: too large */
	cr_assert_eq(txhub_envelope_encode(TXHUB_PREPARE, &m, 0, &out, &len, err, sizeof err),
	             TXHUB_ERR_TOO_LARGE);
	cr_assert(strstr(err, "1048576"), "%s", err);
	m.payload_kind = TXHUB_PAYLOAD_STRING;
	m.payload_len = n - 200; /* fits with the envelope around it */
	cr_assert_eq(txhub_envelope_encode(TXHUB_PREPARE, &m, 0, &out, &len, err, sizeof err), TXHUB_OK, "%s", err);
	cr_assert_leq(len, n);
	free(out);
	m.payload_len = n;
	cr_assert_eq(txhub_envelope_encode(TXHUB_PREPARE, &m, 0, &out, &len, err, sizeof err),
	             TXHUB_ERR_TOO_LARGE);
	free(big);
}

Test(encode, null_arguments)
{
	char *out;
	size_t len;
	char err[100];
	cr_assert_eq(txhub_envelope_encode(TXHUB_COMMIT, NULL, 0, &out, &len, err, sizeof err),
	             TXHUB_ERR_INVALID);
	txhub_message m = {.biz_id = "b", .message_key = NULL};
	cr_assert_eq(txhub_envelope_encode(TXHUB_COMMIT, &m, 0, &out, &len, err, sizeof err),
	             TXHUB_ERR_INVALID);
	m.message_key = "k";
	cr_assert_eq(txhub_envelope_encode((txhub_type)9, &m, 0, &out, &len, err, sizeof err),
	             TXHUB_ERR_INVALID);
	cr_assert_eq(txhub_envelope_encode(TXHUB_COMMIT, &m, 0, NULL, &len, NULL, 0), TXHUB_ERR_INVALID);
}

Test(sign, every_signature_vector)
{
	cJSON *doc = v_load("checkback.json");
	const cJSON *vec;
	cJSON_ArrayForEach(vec, cJSON_GetObjectItemCaseSensitive(doc, "signatures")) {
		const char *name = cJSON_GetObjectItemCaseSensitive(vec, "name")->valuestring;
		const char *secret = cJSON_GetObjectItemCaseSensitive(vec, "secret")->valuestring;
		long long ts = (long long)cJSON_GetObjectItemCaseSensitive(vec, "timestamp")->valuedouble;
		const char *biz = cJSON_GetObjectItemCaseSensitive(vec, "biz_id")->valuestring;
		const char *key = cJSON_GetObjectItemCaseSensitive(vec, "message_key")->valuestring;
		const char *header = cJSON_GetObjectItemCaseSensitive(vec, "header")->valuestring;
		char out[65], e[200];
		cr_assert_eq(txhub_checkback_signature(secret, ts, biz, key, out, sizeof out), 0, "%s", name);
		cr_assert_str_eq(out, header + 3, "%s", name);
		/* and the request verifies, at its own time and within the window */
		txhub_checkback_request req;
		memset(&req, 0, sizeof req);
		snprintf(req.biz_id, sizeof req.biz_id, "%s", biz);
		snprintf(req.message_key, sizeof req.message_key, "%s", key);
		req.timestamp = ts;
		snprintf(req.signature, sizeof req.signature, "%s", header + 3);
		cr_assert_eq(txhub_checkback_verify(&req, secret, ts ? ts : 1, 0, e, sizeof e), TXHUB_OK,
		             "%s: %s", name, e);
		cr_assert_eq(txhub_checkback_verify(&req, secret, ts + 300, 0, e, sizeof e), TXHUB_OK);
		cr_assert_eq(txhub_checkback_verify(&req, secret, ts + 301, 0, e, sizeof e),
		             TXHUB_ERR_UNAUTHORIZED, "%s: an old request passed", name);
	}
	cJSON_Delete(doc);
}

Test(checkback, every_query_vector)
{
	cJSON *doc = v_load("checkback.json");
	const cJSON *vec;
	cJSON_ArrayForEach(vec, cJSON_GetObjectItemCaseSensitive(doc, "queries")) {
		const char *name = cJSON_GetObjectItemCaseSensitive(vec, "name")->valuestring;
		const char *query = cJSON_GetObjectItemCaseSensitive(vec, "query")->valuestring;
		txhub_checkback_request req;
		char err[200] = "";
		txhub_status st = txhub_checkback_parse(query, "1", NULL, NULL, &req, err, sizeof err);
		if (cJSON_GetObjectItemCaseSensitive(vec, "error")) {
			cr_assert_eq(st, TXHUB_ERR_INVALID, "%s: accepted", name);
			cr_assert_gt(strlen(err), 5);
			continue;
		}
		cr_assert_eq(st, TXHUB_OK, "%s: %s", name, err);
		cr_assert_str_eq(req.biz_id, cJSON_GetObjectItemCaseSensitive(vec, "biz_id")->valuestring, "%s", name);
		cr_assert_str_eq(req.message_key,
		                 cJSON_GetObjectItemCaseSensitive(vec, "message_key")->valuestring, "%s", name);
		cr_assert_eq(req.attempt, 1);
	}
	cJSON_Delete(doc);
}

/* A signed request for biz "shop", key "order-1" at ts, as the hub sends it. */
static void signed_request(const char *secret, long long ts, char *tsbuf, char *sigbuf)
{
	char hex[65];
	cr_assert_eq(txhub_checkback_signature(secret, ts, "shop", "order-1", hex, sizeof hex), 0);
	sprintf(tsbuf, "%lld", ts);
	sprintf(sigbuf, "v2=%s", hex);
}

static const char *query = "biz_id=shop&message_key=order-1&bizID=shop&messageKey=order-1";

static txhub_status verify(const char *q, const char *ts, const char *sig, const char *secret,
                           long long now)
{
	txhub_checkback_request req;
	char err[200];
	txhub_status st = txhub_checkback_parse(q, "1", ts, sig, &req, err, sizeof err);
	return st != TXHUB_OK ? st : txhub_checkback_verify(&req, secret, now, 0, err, sizeof err);
}

Test(checkback, refused_requests)
{
	long long now = 1795000000;
	char ts[32], sig[80];
	signed_request("s3cret", now, ts, sig);
	cr_assert_eq(verify(query, ts, sig, "s3cret", now), TXHUB_OK);
	cr_assert_eq(verify(query, ts, sig, "s3cret", 0), TXHUB_ERR_UNAUTHORIZED, "now = the real clock");
	cr_assert_eq(verify(query, ts, sig, "wrong", now), TXHUB_ERR_UNAUTHORIZED, "wrong secret");
	cr_assert_eq(verify(query, ts, sig, "s3cret", now + 301), TXHUB_ERR_UNAUTHORIZED, "old");
	cr_assert_eq(verify(query, ts, sig, "s3cret", now - 301), TXHUB_ERR_UNAUTHORIZED, "future");
	cr_assert_eq(verify(query, ts, sig, "s3cret", now - 300), TXHUB_OK);
	cr_assert_eq(verify("biz_id=shop&message_key=order-2", ts, sig, "s3cret", now),
	             TXHUB_ERR_UNAUTHORIZED, "changed key");
	cr_assert_eq(verify("biz_id=shop.&message_key=order-1", ts, sig, "s3cret", now),
	             TXHUB_ERR_UNAUTHORIZED, "changed biz_id");
	char other[32];
	sprintf(other, "%lld", now + 1);
	cr_assert_eq(verify(query, other, sig, "s3cret", now), TXHUB_ERR_UNAUTHORIZED, "changed ts");
	cr_assert_eq(verify(query, NULL, NULL, "s3cret", now), TXHUB_ERR_UNAUTHORIZED, "unsigned");
	/* malformed headers */
	const char *bad_sigs[] = {"v1=00", "", "v2=", "v2=XYZ", sig + 3, "V2=0", NULL};
	for (int i = 0; bad_sigs[i]; i++)
		cr_assert_eq(verify(query, ts, bad_sigs[i], "s3cret", now), TXHUB_ERR_INVALID, "%s", bad_sigs[i]);
	char upper[80];
	strcpy(upper, sig);
	for (char *p = upper + 3; *p; p++)
		if (*p >= 'a' && *p <= 'f')
			*p = (char)(*p - 32);
	cr_assert_eq(verify(query, ts, upper, "s3cret", now), TXHUB_ERR_INVALID, "uppercase hex");
	cr_assert_eq(verify(query, "-5", sig, "s3cret", now), TXHUB_ERR_INVALID);
	cr_assert_eq(verify(query, "12a", sig, "s3cret", now), TXHUB_ERR_INVALID);
	cr_assert_eq(verify(query, "", sig, "s3cret", now), TXHUB_ERR_INVALID);
	cr_assert_eq(verify(query, ts, NULL, "s3cret", now), TXHUB_ERR_INVALID, "timestamp alone");
	txhub_checkback_request req;
	char err[100];
	cr_assert_eq(txhub_checkback_parse(query, "0", NULL, NULL, &req, err, sizeof err), TXHUB_ERR_INVALID);
	cr_assert_eq(txhub_checkback_parse(query, "x", NULL, NULL, &req, err, sizeof err), TXHUB_ERR_INVALID);
	cr_assert_eq(txhub_checkback_parse(query, NULL, NULL, NULL, &req, err, sizeof err), TXHUB_OK);
	cr_assert_eq(txhub_checkback_verify(&req, "", now, 0, err, sizeof err), TXHUB_ERR_INVALID);
	cr_assert_eq(txhub_checkback_verify(&req, NULL, now, 0, err, sizeof err), TXHUB_ERR_INVALID);
}

static int decide_committed(const txhub_checkback_request *req, txhub_outcome *o, void *opaque)
{
	*(int *)opaque += 1;
	*o = strcmp(req->message_key, "order-1") == 0 ? TXHUB_COMMITTED : TXHUB_ROLLED_BACK;
	return 0;
}

static int decide_fails(const txhub_checkback_request *req, txhub_outcome *o, void *opaque)
{
	(void)req, (void)o, (void)opaque;
	return -1;
}

Test(checkback, handle_answers_every_case)
{
	long long now = 1795000000;
	char ts[32], sig[80];
	signed_request("s3cret", now, ts, sig);
	txhub_checkback_config cfg = {.secret = "s3cret", .now = now};
	txhub_checkback_response r;
	int calls = 0;
	txhub_checkback_handle(&cfg, query, "1", ts, sig, decide_committed, &calls, &r);
	cr_assert_eq(r.http_status, 200);
	cr_assert_str_eq(r.body, "{\"status\":\"committed\"}");
	cr_assert_eq(calls, 1);
	txhub_checkback_handle(&cfg, query, "1", ts, "v2=0000000000000000000000000000000000000000000000000000000000000000",
	                       decide_committed, &calls, &r);
	cr_assert_eq(r.http_status, 401);
	cr_assert(strstr(r.body, "wrong signature"), "%s", r.body);
	txhub_checkback_handle(&cfg, "biz_id=shop", "1", ts, sig, decide_committed, &calls, &r);
	cr_assert_eq(r.http_status, 400);
	txhub_checkback_handle(&cfg, query, "1", ts, sig, decide_fails, NULL, &r);
	cr_assert_eq(r.http_status, 503);
	cr_assert_eq(calls, 1, "decide ran for a refused request");
	/* no secret configured: unsigned requests are answered */
	txhub_checkback_config open = {0};
	txhub_checkback_handle(&open, "biz_id=shop&message_key=order-9", NULL, NULL, NULL,
	                       decide_committed, &calls, &r);
	cr_assert_eq(r.http_status, 200);
	cr_assert_str_eq(r.body, "{\"status\":\"rolled_back\"}");
	cr_assert_str_eq(txhub_checkback_answer(TXHUB_UNKNOWN), "{\"status\":\"unknown\"}");
	cr_assert_null(txhub_checkback_answer((txhub_outcome)7));
}

Test(common, status_names_and_classes)
{
	cr_assert_str_eq(txhub_status_name(TXHUB_OK), "ok");
	cr_assert_str_eq(txhub_status_name(TXHUB_ERR_TOO_LARGE), "too_large");
	cr_assert_str_eq(txhub_status_name((txhub_status)99), "unknown");
	cr_assert(txhub_status_retriable(TXHUB_ERR_KAFKA));
	cr_assert(txhub_status_retriable(TXHUB_ERR_DB_RETRY));
	cr_assert(!txhub_status_retriable(TXHUB_ERR_INVALID));
	cr_assert(!txhub_status_retriable(TXHUB_ERR_FATAL));
	cr_assert(txhub_valid_topic("a.b_c-1"));
	cr_assert(!txhub_valid_topic(".."));
	cr_assert(txhub_valid_id("商店", strlen("商店"), 64));
	cr_assert(!txhub_valid_id("a\xc2\x85", 3, 64), "C1 control");
	cr_assert_str_eq(txhub_type_name(TXHUB_ROLLBACK), "rollback");
	cr_assert_str_eq(txhub_version(), TXHUB_VERSION);
}
