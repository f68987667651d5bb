/* Unit tests for envelope_parse and helpers: accepted forms and rejection
 * reasons (docs/producers.md: Envelope fields). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope.h"
#include "url.h"

#define MAXB 1048576

static envelope env;
static char err[512];

static void setup(void)
{
	memset(&env, 0, sizeof env);
	err[0] = '\0';
}

static void teardown(void) { envelope_free(&env); }

TestSuite(envelope, .init = setup, .fini = teardown);
TestSuite(envelope_reject, .init = setup, .fini = teardown);

static int parse_len(const char *s, size_t len)
{
	return envelope_parse(s, len, MAXB, &env, err, sizeof err);
}

static int parse(const char *s) { return parse_len(s, strlen(s)); }

static void must_accept(const char *s)
{
	int rc = parse(s);
	cr_assert_eq(rc, 0, "rejected: %s\ninput: %s", err, s);
}

static void must_reject(const char *s, const char *reason)
{
	int rc = parse(s);
	cr_assert_eq(rc, -1, "accepted: %s", s);
	cr_assert(strstr(err, reason), "reason \"%s\" does not mention \"%s\"\ninput: %s", err, reason, s);
}

static void assert_payload(const void *bytes, size_t len)
{
	cr_assert(env.has_payload, "no payload");
	cr_assert_not_null(env.payload);
	cr_assert_eq(env.payload_len, len, "payload is %zu bytes, want %zu: %.*s", env.payload_len, len,
	             (int)env.payload_len, (const char *)env.payload);
	cr_assert_eq(memcmp(env.payload, bytes, len), 0, "payload %.*s, want %.*s", (int)env.payload_len,
	             (const char *)env.payload, (int)len, (const char *)bytes);
}

#define PAYLOAD_IS(lit) assert_payload(lit, sizeof(lit) - 1)

/* Each in[i][0] is accepted and forwards the text in[i][1] (no NUL in it). */
static void must_accept_payloads(const char *const (*in)[2], size_t n)
{
	for (size_t i = 0; i < n; i++) {
		must_accept(in[i][0]);
		assert_payload(in[i][1], strlen(in[i][1]));
		envelope_free(&env);
	}
}

static void assert_empty(void)
{
	cr_assert_null(env.biz_id);
	cr_assert_null(env.message_key);
	cr_assert_null(env.payload);
	cr_assert_eq(env.payload_len, 0);
	cr_assert_eq(env.has_payload, 0);
	cr_assert_null(env.forward_topic);
	cr_assert_null(env.forward_key);
	cr_assert_null(env.forward_headers);
	cr_assert_null(env.checkback_url);
	cr_assert_eq(env.first_after_ms, -1);
	cr_assert_eq(env.not_before_ms, -1);
	cr_assert_eq(env.delay_ms, -1);
}

/* Building blocks for envelopes that are valid except for one field. */
#define BASE "\"biz_id\":\"shop\",\"message_key\":\"order-1\""
#define FWD "\"forward\":{\"topic\":\"orders\"}"
#define PL "\"payload\":{\"a\":1}"
/* a valid prepare, plus extra members x (each starting with a comma) */
#define PREP(x) "{\"type\":\"prepare\"," BASE "," PL "," FWD x "}"
/* a prepare whose forward object is f */
#define PREP_FWD(f) "{\"type\":\"prepare\"," BASE "," PL ",\"forward\":" f "}"
/* a prepare whose payload is the JSON string s (raw, between the quotes) */
#define PREP_STR(s) "{\"type\":\"prepare\"," BASE ",\"payload\":\"" s "\"," FWD "}"
/* a prepare whose biz_id / message_key value is the JSON text v */
#define PREP_BIZ(v) "{\"type\":\"prepare\",\"biz_id\":" v ",\"message_key\":\"k\"," PL "," FWD "}"
#define PREP_MK(v) "{\"type\":\"prepare\",\"biz_id\":\"shop\",\"message_key\":" v "," PL "," FWD "}"
#define COMMIT(x) "{\"type\":\"commit\"," BASE x "}"
/* a prepare with payload_base64 v, with forward headers h, with checkback c */
#define PREP_B64(v) "{\"type\":\"prepare\"," BASE ",\"payload_base64\":" v "," FWD "}"
#define PREP_HDR(h) PREP_FWD("{\"topic\":\"t\",\"headers\":" h "}")
#define PREP_CB(c) PREP(",\"checkback\":" c)

/* ---- accepted envelopes ---- */

Test(envelope, prepare_json_object_payload_is_compact_raw_text)
{
	must_accept("{ \"v\": 1, \"type\": \"prepare\", \"biz_id\": \"shop\", \"message_key\": \"order-1\",\n"
	       "  \"payload\": { \"id\" : 12345678901234567890, \"price\": 19.90,\n"
	       "\t\"tags\": [ \"a b\", \"c\\\"d\" ], \"n\": null, \"ok\": true, \"e\": 1E+2 } ,\n"
	       "  \"forward\": { \"topic\": \"orders.v1\" } }\n");
	cr_assert_eq(env.type, ENVELOPE_PREPARE);
	cr_assert_str_eq(env.biz_id, "shop");
	cr_assert_str_eq(env.message_key, "order-1");
	const char *want = "{\"id\":12345678901234567890,\"price\":19.90,\"tags\":[\"a b\",\"c\\\"d\"],"
	                   "\"n\":null,\"ok\":true,\"e\":1E+2}";
	assert_payload(want, strlen(want));
	cr_assert_str_eq(env.forward_topic, "orders.v1");
	cr_assert_null(env.forward_key);
	cr_assert_null(env.forward_headers);
	cr_assert_null(env.checkback_url);
	cr_assert_eq(env.first_after_ms, -1);
	cr_assert_not(envelope_is_oneshot(&env));
}

Test(envelope, big_integer_survives_digit_for_digit)
{
	must_accept("{\"type\":\"prepare\"," BASE ",\"payload\":{\"amount\":12345678901234567890}," FWD "}");
	PAYLOAD_IS("{\"amount\":12345678901234567890}");
	envelope_free(&env);
	must_accept("{\"type\":\"prepare\"," BASE ",\"payload\":12345678901234567890," FWD "}");
	PAYLOAD_IS("12345678901234567890");
	envelope_free(&env);
	must_accept("{\"type\":\"prepare\"," BASE ","
	            "\"payload\":[0.1000000000000000055511151231257827, -1e-999]," FWD "}");
	PAYLOAD_IS("[0.1000000000000000055511151231257827,-1e-999]");
}

Test(envelope, payload_position_and_string_escapes_kept)
{
	/* payload as the first member, its strings' escapes kept as written */
	must_accept("{\"payload\" : [1, 2.50, \"\\u00e9 \\n\"] , \"type\":\"prepare\"," BASE "," FWD "}");
	PAYLOAD_IS("[1,2.50,\"\\u00e9 \\n\"]");
	envelope_free(&env);
	/* payload as the last member, followed by whitespace */
	must_accept("{\"type\":\"prepare\"," BASE "," FWD ",\"payload\":{\"a\" : \"x  y\" }  }");
	PAYLOAD_IS("{\"a\":\"x  y\"}");
}

Test(envelope, payload_found_at_top_level_only)
{
	/* earlier members mention "payload" inside nested objects and strings */
	must_accept("{\"meta\":{\"payload\":1,\"s\":\"}{\\\"payload\\\":9,\"},\"note\":\"\\\"payload\\\":7\","
	       "\"type\":\"prepare\"," BASE ",\"payload\":[1,2]," FWD "}");
	PAYLOAD_IS("[1,2]");
}

Test(envelope, scalar_json_payloads)
{
	static const char *const in[][2] = {
		{"{\"type\":\"prepare\"," BASE ",\"payload\":true," FWD "}", "true"},
		{"{\"type\":\"prepare\"," BASE ",\"payload\":null," FWD "}", "null"},
		{"{\"type\":\"prepare\"," BASE ",\"payload\":-0.5e3," FWD "}", "-0.5e3"},
		{"{\"type\":\"prepare\"," BASE ",\"payload\":{}," FWD "}", "{}"},
	};
	must_accept_payloads(in, sizeof in / sizeof in[0]);
}

Test(envelope, string_payload_forwarded_as_utf8_bytes)
{
	must_accept(PREP_STR("h\\u00e9llo \\\"w\\\"\\n\\ud83d\\ude00\\/\\\\"));
	const char want[] = "h\xc3\xa9llo \"w\"\n\xf0\x9f\x98\x80/\\";
	assert_payload(want, sizeof want - 1);
	envelope_free(&env);
	must_accept(PREP_STR("\xc3\xbc\xe2\x82\xac 12345678901234567890"));
	const char want2[] = "\xc3\xbc\xe2\x82\xac 12345678901234567890";
	assert_payload(want2, sizeof want2 - 1);
}

Test(envelope, empty_string_payload)
{
	must_accept(PREP_STR(""));
	cr_assert(env.has_payload);
	cr_assert_eq(env.payload_len, 0);
}

Test(envelope, payload_base64)
{
	must_accept(PREP_B64("\"AAEC/w==\""));
	PAYLOAD_IS("\x00\x01\x02\xff");
	envelope_free(&env);
	must_accept(PREP_B64("\"AAEC/w\""));
	PAYLOAD_IS("\x00\x01\x02\xff");
	envelope_free(&env);
	must_accept(PREP_B64("\"aGVsbG8gd29ybGQ=\""));
	PAYLOAD_IS("hello world");
	envelope_free(&env);
	must_accept(PREP_B64("\"+/+/\""));
	PAYLOAD_IS("\xfb\xff\xbf");
	envelope_free(&env);
	must_accept(PREP_B64("\"\""));
	cr_assert(env.has_payload);
	cr_assert_eq(env.payload_len, 0);
}

Test(envelope, integer_biz_id_stored_as_decimal_text)
{
	must_accept(PREP_BIZ("42"));
	cr_assert_str_eq(env.biz_id, "42");
	envelope_free(&env);
	must_accept(PREP_BIZ("0"));
	cr_assert_str_eq(env.biz_id, "0");
	envelope_free(&env);
	must_accept(PREP_BIZ("9007199254740991"));
	cr_assert_str_eq(env.biz_id, "9007199254740991");
	envelope_free(&env);
	must_accept(PREP_BIZ("1234567890"));
	cr_assert_str_eq(env.biz_id, "1234567890");
}

Test(envelope, forward_key_and_headers)
{
	must_accept(PREP_FWD("{\"topic\":\"orders\",\"key\":\"k-1\","
	                "\"headers\":{\"a\":\"1\",\"b-c\":\"x y\",\"Trace\":\"\\u00e9\"}}"));
	cr_assert_str_eq(env.forward_topic, "orders");
	cr_assert_str_eq(env.forward_key, "k-1");
	cr_assert_str_eq(env.forward_headers, "{\"a\":\"1\",\"b-c\":\"x y\",\"Trace\":\"\xc3\xa9\"}");
}

Test(envelope, forward_optional_parts)
{
	must_accept(PREP_FWD("{\"topic\":\"orders\",\"key\":null,\"headers\":null}"));
	cr_assert_null(env.forward_key);
	cr_assert_null(env.forward_headers);
	envelope_free(&env);
	must_accept(PREP_FWD("{\"topic\":\"orders\",\"headers\":{}}"));
	cr_assert_null(env.forward_headers);
	envelope_free(&env);
	must_accept(PREP_FWD("{\"topic\":\"orders\",\"key\":\"\"}"));
	cr_assert_not_null(env.forward_key, "an empty key is a key, not a null key");
	cr_assert_str_eq(env.forward_key, "");
	envelope_free(&env);
	must_accept(PREP_FWD("{\"topic\":\"a.b_C-9\",\"other\":1}"));
	cr_assert_str_eq(env.forward_topic, "a.b_C-9");
	envelope_free(&env);
	must_accept(PREP_FWD("{\"topic\":\"...\"}"));
	cr_assert_str_eq(env.forward_topic, "...");
	envelope_free(&env);
	/* one underscore, or two further in, is an ordinary name */
	must_accept(PREP_FWD("{\"topic\":\"_private\"}"));
	envelope_free(&env);
	must_accept(PREP_FWD("{\"topic\":\"a__b\"}"));
}

/* docs/consumers.md: Delayed delivery: a prepare or a one-shot commit may be delayed; none means
 * no delay */
Test(envelope, forward_not_before_and_delay_ms)
{
	must_accept(PREP_FWD("{\"topic\":\"orders\"}"));
	cr_assert_eq(env.not_before_ms, -1);
	cr_assert_eq(env.delay_ms, -1);
	envelope_free(&env);
	must_accept(PREP_FWD("{\"topic\":\"orders\",\"not_before\":\"2026-11-28T13:00:00.250+01:00\"}"));
	cr_assert_eq(env.not_before_ms, 1795867200250LL);
	cr_assert_eq(env.delay_ms, -1);
	envelope_free(&env);
	must_accept(PREP_FWD("{\"topic\":\"orders\",\"delay_ms\":1500}"));
	cr_assert_eq(env.delay_ms, 1500);
	cr_assert_eq(env.not_before_ms, -1);
	envelope_free(&env);
	must_accept(PREP_FWD("{\"topic\":\"orders\",\"delay_ms\":0,\"not_before\":null}"));
	cr_assert_eq(env.delay_ms, 0);
	cr_assert_eq(env.not_before_ms, -1);
	envelope_free(&env);
	must_accept(PREP_FWD("{\"topic\":\"orders\",\"delay_ms\":null}"));
	cr_assert_eq(env.delay_ms, -1);
	envelope_free(&env);
	must_accept(COMMIT("," PL ",\"forward\":{\"topic\":\"o\",\"not_before\":\"1970-01-01T00:00:00Z\"}"));
	cr_assert(envelope_is_oneshot(&env));
	cr_assert_eq(env.not_before_ms, 0);
}

Test(envelope, checkback_url_and_first_after_ms)
{
	must_accept(PREP_CB("{\"url\":\"https://shop.example/tx/check?src=hub\",\"first_after_ms\":5000}"));
	cr_assert_str_eq(env.checkback_url, "https://shop.example/tx/check?src=hub");
	cr_assert_eq(env.first_after_ms, 5000);
	envelope_free(&env);
	must_accept(PREP_CB("{\"url\":\"http://10.0.0.1:8080/c\"}"));
	cr_assert_str_eq(env.checkback_url, "http://10.0.0.1:8080/c");
	cr_assert_eq(env.first_after_ms, -1);
	envelope_free(&env);
	must_accept(PREP_CB("{\"first_after_ms\":0}"));
	cr_assert_null(env.checkback_url);
	cr_assert_eq(env.first_after_ms, 0);
	envelope_free(&env);
	must_accept(PREP_CB("{\"first_after_ms\":2592000000}"));
	cr_assert_eq(env.first_after_ms, 2592000000LL);
	envelope_free(&env);
	must_accept(PREP_CB("{}"));
	cr_assert_null(env.checkback_url);
	cr_assert_eq(env.first_after_ms, -1);
	envelope_free(&env);
	must_accept(PREP_CB("null"));
	cr_assert_null(env.checkback_url);
}

Test(envelope, version_absent_or_one)
{
	must_accept(PREP(""));
	cr_assert_eq(env.type, ENVELOPE_PREPARE);
	envelope_free(&env);
	must_accept("{\"v\":1,\"type\":\"prepare\"," BASE "," PL "," FWD "}");
	cr_assert_eq(env.type, ENVELOPE_PREPARE);
	envelope_free(&env);
	must_accept(PREP(",\"v\":1"));
	cr_assert_eq(env.type, ENVELOPE_PREPARE);
}

Test(envelope, unknown_fields_ignored)
{
	must_accept(PREP(",\"trace_id\":\"abc\",\"extra\":{\"deep\":[1,{\"x\":null}],\"payload\":5},"
	                 "\"n\":3.14,\"flag\":false,\"V\":2,\"Type\":\"nope\",\"x\":1,\"x\":2"));
	cr_assert_eq(env.type, ENVELOPE_PREPARE);
	cr_assert_str_eq(env.biz_id, "shop");
	PAYLOAD_IS("{\"a\":1}");
}

Test(envelope, one_shot_commit)
{
	must_accept("{\"type\":\"commit\"," BASE ",\"payload\":{\"id\":12345678901234567890},"
	       "\"forward\":{\"topic\":\"orders\",\"key\":\"o1\"}}");
	cr_assert_eq(env.type, ENVELOPE_COMMIT);
	cr_assert(envelope_is_oneshot(&env));
	PAYLOAD_IS("{\"id\":12345678901234567890}");
	cr_assert_str_eq(env.forward_topic, "orders");
	cr_assert_str_eq(env.forward_key, "o1");
	envelope_free(&env);
	must_accept("{\"type\":\"commit\"," BASE ",\"payload_base64\":\"AP8=\"," FWD "}");
	cr_assert(envelope_is_oneshot(&env));
	PAYLOAD_IS("\x00\xff");
}

Test(envelope, plain_commit)
{
	must_accept(COMMIT(""));
	cr_assert_eq(env.type, ENVELOPE_COMMIT);
	cr_assert_str_eq(env.biz_id, "shop");
	cr_assert_str_eq(env.message_key, "order-1");
	cr_assert_eq(env.has_payload, 0);
	cr_assert_null(env.payload);
	cr_assert_null(env.forward_topic);
	cr_assert_not(envelope_is_oneshot(&env));
}

Test(envelope, rollback)
{
	must_accept("{\"type\":\"rollback\",\"biz_id\":7,\"message_key\":\"order-1\"}");
	cr_assert_eq(env.type, ENVELOPE_ROLLBACK);
	cr_assert_str_eq(env.biz_id, "7");
	cr_assert_eq(env.has_payload, 0);
	cr_assert_not(envelope_is_oneshot(&env));
}

Test(envelope, surrounding_whitespace)
{
	must_accept(" \r\n\t" PREP("") "\n\n ");
	cr_assert_eq(env.type, ENVELOPE_PREPARE);
}

Test(envelope, max_bytes_boundary)
{
	const char *s = PREP("");
	size_t len = strlen(s);
	cr_assert_eq(envelope_parse(s, len, len, &env, err, sizeof err), 0, "%s", err);
	envelope_free(&env);
	cr_assert_eq(envelope_parse(s, len, len - 1, &env, err, sizeof err), -1);
	cr_assert(strstr(err, "envelope.max_bytes"), "reason: %s", err);
	assert_empty();
}

Test(envelope, value_not_nul_terminated)
{
	/* the value is value[0..len): bytes after it are not read */
	const char *s = COMMIT("") "garbage";
	cr_assert_eq(parse_len(s, strlen(COMMIT(""))), 0, "%s", err);
	cr_assert_str_eq(env.message_key, "order-1");
}

Test(envelope, biz_id_and_message_key_length_limits)
{
	char biz[65], mk[256], buf[1024];
	memset(biz, 'b', 64);
	biz[64] = '\0';
	memset(mk, 'm', 255);
	mk[255] = '\0';
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"%s\",\"message_key\":\"%s\"}", biz, mk);
	must_accept(buf);
	cr_assert_str_eq(env.biz_id, biz);
	cr_assert_str_eq(env.message_key, mk);
	envelope_free(&env);
	/* the limits are in bytes: 32 two-byte characters fit, 33 do not */
	char wide[128] = "";
	for (int i = 0; i < 32; i++)
		strcat(wide, "\xc3\xa9");
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"%s\",\"message_key\":\"k\"}", wide);
	must_accept(buf);
	cr_assert_eq(strlen(env.biz_id), 64);
	envelope_free(&env);
	strcat(wide, "\xc3\xa9");
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"%s\",\"message_key\":\"k\"}", wide);
	must_reject(buf, "\"biz_id\"");
}

Test(envelope, topic_249_and_url_2048_accepted)
{
	char topic[250], url[2049], buf[4096];
	memset(topic, 't', 249);
	topic[249] = '\0';
	snprintf(buf, sizeof buf, PREP_FWD("{\"topic\":\"%s\"}"), topic);
	must_accept(buf);
	cr_assert_str_eq(env.forward_topic, topic);
	envelope_free(&env);
	strcpy(url, "http://h/");
	memset(url + 9, 'u', 2048 - 9);
	url[2048] = '\0';
	snprintf(buf, sizeof buf, PREP_CB("{\"url\":\"%s\"}"), url);
	must_accept(buf);
	cr_assert_str_eq(env.checkback_url, url);
}

Test(envelope, type_names)
{
	cr_assert_str_eq(envelope_type_name(ENVELOPE_PREPARE), "prepare");
	cr_assert_str_eq(envelope_type_name(ENVELOPE_COMMIT), "commit");
	cr_assert_str_eq(envelope_type_name(ENVELOPE_ROLLBACK), "rollback");
	cr_assert_str_eq(envelope_type_name((envelope_type)0), "?");
}

Test(envelope, free_zeroed_null_and_twice)
{
	envelope z;
	memset(&z, 0, sizeof z);
	envelope_free(&z);
	cr_assert_null(z.biz_id);
	cr_assert_eq(z.first_after_ms, -1);
	envelope_free(NULL);
	must_accept(PREP_CB("{\"url\":\"http://a/\"}"));
	envelope_free(&env);
	assert_empty();
	envelope_free(&env); /* a freed envelope is zeroed: freeing again is fine */
	assert_empty();
}

/* ---- rejected envelopes ---- */

Test(envelope_reject, null_value_tombstone)
{
	cr_assert_eq(envelope_parse(NULL, 0, MAXB, &env, err, sizeof err), -1);
	cr_assert(strstr(err, "null"), "reason: %s", err);
	assert_empty();
	cr_assert_eq(envelope_parse(NULL, 10, MAXB, &env, err, sizeof err), -1);
}

Test(envelope_reject, leaves_envelope_empty_after_late_failure)
{
	/* biz_id, message_key and payload are already copied when this fails */
	memset(&env, 0x5a, sizeof env);
	cr_assert_eq(parse("{\"type\":\"commit\"," BASE ",\"payload\":{\"a\":1}}"), -1);
	assert_empty();
	cr_assert(strstr(err, "forward"), "reason: %s", err);
}

Test(envelope_reject, reason_truncated_to_buffer)
{
	char small[8];
	memset(small, 'X', sizeof small);
	cr_assert_eq(envelope_parse("[]", 2, MAXB, &env, small, sizeof small), -1);
	cr_assert_eq(strlen(small), sizeof small - 1);
}

Test(envelope_reject, long_fields)
{
	char s[300], buf[4096];
	memset(s, 'b', 65);
	s[65] = '\0';
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"%s\",\"message_key\":\"k\"}", s);
	must_reject(buf, "\"biz_id\"");
	envelope_free(&env);
	memset(s, 'm', 256);
	s[256] = '\0';
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"%s\"}", s);
	must_reject(buf, "\"message_key\"");
	envelope_free(&env);
	memset(s, 't', 250);
	s[250] = '\0';
	snprintf(buf, sizeof buf, PREP_FWD("{\"topic\":\"%s\"}"), s);
	must_reject(buf, "forward.topic");
	envelope_free(&env);
	char url[2050];
	strcpy(url, "http://h/");
	memset(url + 9, 'u', 2049 - 9);
	url[2049] = '\0';
	snprintf(buf, sizeof buf, PREP_CB("{\"url\":\"%s\"}"), url);
	must_reject(buf, "checkback.url");
	envelope_free(&env);
	char name[300];
	memset(name, 'h', 256);
	name[256] = '\0';
	snprintf(buf, sizeof buf, PREP_HDR("{\"%s\":\"v\"}"), name);
	must_reject(buf, "header");
}

typedef struct {
	const char *name;
	const char *value; /* NULL: a Kafka null value */
	size_t len;        /* 0: strlen(value) */
	size_t max_bytes;  /* 0: MAXB */
	const char *reason;
} bad_case;

#define BAD(name, value, reason) {name, value, 0, 0, reason}
/* literal values with NUL bytes: their exact size */
#define BADN(name, value, reason) {name, value, sizeof(value) - 1, 0, reason}

static const bad_case bad_cases[] = {
	BAD("empty value", "", "empty"),
	{"over max_bytes", PREP(""), 0, 64, "envelope.max_bytes"},
	BADN("NUL byte inside a string", "{\"type\":\"com\0mit\"," BASE "}", "NUL"),
	BADN("NUL byte at the end (C string length + 1)", COMMIT("") "\0", "NUL"),
	BADN("NUL byte at the start", "\0" COMMIT(""), "NUL"),
	/* invalid UTF-8, raw bytes inside a string */
	BAD("lone continuation byte 0x80", PREP_STR("a\x80z"), "UTF-8"),
	BAD("lone continuation byte 0xbf", PREP_STR("\xbf"), "UTF-8"),
	BAD("overlong 2-byte slash", PREP_STR("\xc0\xaf"), "UTF-8"),
	BAD("overlong 2-byte 0xc1", PREP_STR("\xc1\xbf"), "UTF-8"),
	BAD("overlong 3-byte", PREP_STR("\xe0\x80\xaf"), "UTF-8"),
	BAD("overlong 3-byte U+07FF", PREP_STR("\xe0\x9f\xbf"), "UTF-8"),
	BAD("overlong 4-byte", PREP_STR("\xf0\x80\x80\xaf"), "UTF-8"),
	BAD("overlong 4-byte U+FFFF", PREP_STR("\xf0\x8f\xbf\xbf"), "UTF-8"),
	BAD("surrogate U+D800", PREP_STR("\xed\xa0\x80"), "UTF-8"),
	BAD("surrogate U+DFFF", PREP_STR("\xed\xbf\xbf"), "UTF-8"),
	BAD("encoded surrogate pair", PREP_STR("\xed\xa0\xbd\xed\xb8\x80"), "UTF-8"),
	BAD("above U+10FFFF", PREP_STR("\xf4\x90\x80\x80"), "UTF-8"),
	BAD("lead byte 0xf5", PREP_STR("\xf5\x80\x80\x80"), "UTF-8"),
	BAD("byte 0xfe", PREP_STR("\xfe"), "UTF-8"),
	BAD("byte 0xff", PREP_STR("\xff"), "UTF-8"),
	BAD("truncated 2-byte sequence", PREP_STR("\xc3"), "UTF-8"),
	BAD("truncated 3-byte sequence", PREP_STR("\xe2\x82"), "UTF-8"),
	BAD("truncated 4-byte sequence", PREP_STR("\xf0\x9f\x98"), "UTF-8"),
	BAD("bad continuation", PREP_STR("\xe2\x28\xa1"), "UTF-8"),
	BAD("truncated sequence at the very end", COMMIT("") "\xe2\x82", "UTF-8"),
	BAD("invalid UTF-8 in biz_id", PREP_BIZ("\"sh\xc3op\""), "UTF-8"),
	BAD("invalid UTF-8 in an unknown field name", PREP(",\"\x80\":1"), "UTF-8"),
	/* JSON grammar */
	BAD("invalid JSON: missing value", "{\"type\":}", "JSON"),
	BAD("invalid JSON: bare key", "{type:\"commit\"," BASE "}", "JSON"),
	BAD("invalid JSON: single quotes", "{'type':'commit','biz_id':'a','message_key':'b'}", "JSON"),
	BAD("invalid JSON: trailing comma", COMMIT(","), "JSON"),
	BAD("invalid JSON: NaN", "{\"type\":\"prepare\"," BASE ",\"payload\":NaN," FWD "}", "JSON"),
	BAD("invalid JSON: comment", "{\"type\":\"commit\",/*c*/" BASE "}", "JSON"),
	BAD("invalid JSON: lone surrogate escape", PREP_STR("a\\ud800b"), "JSON"),
	BAD("invalid JSON: bad escape", PREP_STR("a\\qb"), "JSON"),
	BAD("invalid JSON: just text", "commit", "JSON"),
	BAD("truncated JSON", "{\"type\":\"prepare\"," BASE ",\"payload\":{\"a\":1}", "JSON"),
	BAD("truncated JSON inside a string", "{\"type\":\"prep", "JSON"),
	BAD("truncated JSON: only a brace", "{", "JSON"),
	BAD("trailing garbage", PREP("") "x", "trailing"),
	BAD("trailing second object", PREP("") "{}", "trailing"),
	BAD("two envelopes in one value", COMMIT("") "\n" COMMIT(""), "trailing"),
	/* top level */
	BAD("top level array", "[" COMMIT("") "]", "object"),
	BAD("top level empty array", "[]", "object"),
	BAD("top level string", "\"commit\"", "object"),
	BAD("top level number", "42", "object"),
	BAD("top level null", "null", "object"),
	BAD("top level true", "true", "object"),
	/* \u0000 */
	BAD("\\u0000 in payload string", PREP_STR("a\\u0000b"), "\\u0000"),
	BAD("\\u0000 in message_key", PREP_MK("\"a\\u0000b\""), "\\u0000"),
	BAD("\\u0000 in a nested payload string", "{\"type\":\"prepare\"," BASE
	    ",\"payload\":{\"k\":[\"\\u0000\"]}," FWD "}", "\\u0000"),
	BAD("\\u0000 in an unknown field", PREP(",\"note\":\"x\\u0000\""), "\\u0000"),
	BAD("\\u0000 in a member name", PREP(",\"n\\u0000\":1"), "\\u0000"),
	/* duplicates */
	BAD("duplicate type", "{\"type\":\"commit\"," BASE ",\"type\":\"rollback\"}",
	    "\"type\" appears more than once"),
	BAD("duplicate biz_id", COMMIT(",\"biz_id\":\"other\""), "\"biz_id\" appears more than once"),
	BAD("duplicate message_key", COMMIT(",\"message_key\":\"order-1\""),
	    "\"message_key\" appears more than once"),
	BAD("duplicate payload", PREP(",\"payload\":2"), "\"payload\" appears more than once"),
	BAD("duplicate forward", PREP("," FWD), "\"forward\" appears more than once"),
	BAD("duplicate v", PREP(",\"v\":1,\"v\":1"), "\"v\" appears more than once"),
	BAD("duplicate checkback", PREP_CB("{},\"checkback\":{}"), "\"checkback\" appears more than once"),
	/* v */
	BAD("v=2", PREP(",\"v\":2"), "version 2"),
	BAD("v=0", PREP(",\"v\":0"), "version 0"),
	BAD("v=\"1\"", PREP(",\"v\":\"1\""), "\"v\""),
	BAD("v=1.5", PREP(",\"v\":1.5"), "\"v\""),
	BAD("v=-1", PREP(",\"v\":-1"), "\"v\""),
	BAD("v=true", PREP(",\"v\":true"), "\"v\""),
	BAD("v={}", PREP(",\"v\":{}"), "\"v\""),
	/* type */
	BAD("missing type", "{" BASE "}", "\"type\""),
	BAD("type publish", "{\"type\":\"publish\"," BASE "}", "\"type\""),
	BAD("type uppercase", "{\"type\":\"COMMIT\"," BASE "}", "\"type\""),
	BAD("type with a space", "{\"type\":\"commit \"," BASE "}", "\"type\""),
	BAD("type empty", "{\"type\":\"\"," BASE "}", "\"type\""),
	BAD("type number", "{\"type\":2," BASE "}", "\"type\""),
	BAD("type null", "{\"type\":null," BASE "}", "\"type\""),
	BAD("type array", "{\"type\":[\"commit\"]," BASE "}", "\"type\""),
	/* biz_id */
	BAD("missing biz_id", "{\"type\":\"commit\",\"message_key\":\"k\"}", "\"biz_id\""),
	BAD("biz_id empty", PREP_BIZ("\"\""), "\"biz_id\""),
	BAD("biz_id negative", PREP_BIZ("-1"), "\"biz_id\""),
	BAD("biz_id 1.5", PREP_BIZ("1.5"), "\"biz_id\""),
	BAD("biz_id 1e400", PREP_BIZ("1e400"), "\"biz_id\""),
	BAD("biz_id true", PREP_BIZ("true"), "\"biz_id\""),
	BAD("biz_id false", PREP_BIZ("false"), "\"biz_id\""),
	BAD("biz_id null", PREP_BIZ("null"), "\"biz_id\""),
	BAD("biz_id object", PREP_BIZ("{}"), "\"biz_id\""),
	BAD("biz_id array", PREP_BIZ("[\"a\"]"), "\"biz_id\""),
	BAD("biz_id tab", PREP_BIZ("\"a\\tb\""), "\"biz_id\""),
	BAD("biz_id newline", PREP_BIZ("\"a\\n\""), "\"biz_id\""),
	BAD("biz_id escaped control", PREP_BIZ("\"\\u0001\""), "\"biz_id\""),
	BAD("biz_id DEL", PREP_BIZ("\"a\x7f\""), "\"biz_id\""),
	BAD("biz_id raw control byte", PREP_BIZ("\"a\x1f\""), "control character"),
	/* C1 controls, U+0080..U+009F: raw (0xC2 0x80..0x9F) and escaped */
	BAD("biz_id NEL U+0085", PREP_BIZ("\"a\xc2\x85\""), "control character U+0085"),
	BAD("biz_id U+0080", PREP_BIZ("\"\xc2\x80\""), "control character U+0080"),
	BAD("biz_id U+009F", PREP_BIZ("\"a\xc2\x9f" "b\""), "control character U+009F"),
	BAD("biz_id escaped NEL", PREP_BIZ("\"a\\u0085\""), "control character U+0085"),
	/* an integer biz_id: digits only, taken as written, never rounded */
	BAD("biz_id 1.00000000000000001", PREP_BIZ("1.00000000000000001"), "digits only"),
	BAD("biz_id 9007199254740990.6", PREP_BIZ("9007199254740990.6"), "digits only"),
	BAD("biz_id 1e-400", PREP_BIZ("1e-400"), "digits only"),
	BAD("biz_id 1.0", PREP_BIZ("1.0"), "digits only"),
	BAD("biz_id 1e3", PREP_BIZ("1e3"), "digits only"),
	BAD("biz_id 1E+2", PREP_BIZ("1E+2"), "digits only"),
	BAD("biz_id 0.0", PREP_BIZ("0.0"), "digits only"),
	BAD("biz_id -0", PREP_BIZ("-0"), "non-negative integer"),
	BAD("biz_id 9007199254740992", PREP_BIZ("9007199254740992"), "send it as a string"),
	BAD("biz_id 20 digits", PREP_BIZ("12345678901234567890"), "send it as a string"),
	BAD("biz_id leading zero", PREP_BIZ("007"), "leading zero"),
	/* message_key */
	BAD("missing message_key", "{\"type\":\"commit\",\"biz_id\":\"b\"}", "\"message_key\""),
	BAD("message_key empty", PREP_MK("\"\""), "\"message_key\""),
	BAD("message_key number", PREP_MK("12"), "\"message_key\""),
	BAD("message_key null", PREP_MK("null"), "\"message_key\""),
	BAD("message_key object", PREP_MK("{\"k\":\"v\"}"), "\"message_key\""),
	BAD("message_key tab", PREP_MK("\"a\\tb\""), "\"message_key\""),
	BAD("message_key carriage return", PREP_MK("\"a\\r\""), "\"message_key\""),
	BAD("message_key DEL", PREP_MK("\"\\u007f\""), "\"message_key\""),
	BAD("message_key NEL U+0085", PREP_MK("\"k\xc2\x85\""), "control character U+0085"),
	BAD("message_key escaped U+009B", PREP_MK("\"k\\u009b\""), "control character U+009B"),
	/* payload */
	BAD("payload and payload_base64", PREP(",\"payload_base64\":\"AA==\""), "payload_base64"),
	BAD("bad base64 character", PREP_B64("\"AA$A\""), "payload_base64"),
	BAD("bad base64 length", PREP_B64("\"QUJDR\""), "payload_base64"),
	BAD("bad base64 padding in the middle", PREP_B64("\"QU=JD\""), "payload_base64"),
	BAD("bad base64 too much padding", PREP_B64("\"QQ===\""), "payload_base64"),
	BAD("bad base64 only padding", PREP_B64("\"====\""), "payload_base64"),
	BAD("bad base64 with a space", PREP_B64("\"QUJD RA==\""), "payload_base64"),
	BAD("bad base64 url alphabet", PREP_B64("\"-_-_\""), "payload_base64"),
	BAD("payload_base64 number", PREP_B64("12"), "payload_base64"),
	BAD("payload_base64 null", PREP_B64("null"), "payload_base64"),
	BAD("prepare without payload", "{\"type\":\"prepare\"," BASE "," FWD "}", "payload"),
	/* forward */
	BAD("prepare without forward", "{\"type\":\"prepare\"," BASE "," PL "}", "\"forward\""),
	BAD("forward string", PREP_FWD("\"orders\""), "\"forward\""),
	BAD("forward array", PREP_FWD("[\"orders\"]"), "\"forward\""),
	BAD("forward null", PREP_FWD("null"), "\"forward\""),
	BAD("forward without topic", PREP_FWD("{\"key\":\"k\"}"), "forward.topic"),
	BAD("forward topic empty", PREP_FWD("{\"topic\":\"\"}"), "forward.topic"),
	BAD("forward topic with space", PREP_FWD("{\"topic\":\"my orders\"}"), "forward.topic"),
	BAD("forward topic with slash", PREP_FWD("{\"topic\":\"a/b\"}"), "forward.topic"),
	BAD("forward topic with colon", PREP_FWD("{\"topic\":\"a:b\"}"), "forward.topic"),
	BAD("forward topic non-ASCII", PREP_FWD("{\"topic\":\"b\xc3\xa9\"}"), "forward.topic"),
	BAD("forward topic .", PREP_FWD("{\"topic\":\".\"}"), "forward.topic"),
	BAD("forward topic ..", PREP_FWD("{\"topic\":\"..\"}"), "forward.topic"),
	BAD("forward topic number", PREP_FWD("{\"topic\":5}"), "forward.topic"),
	/* Kafka's own topics: every forward failed until the row was parked */
	BAD("forward topic __consumer_offsets", PREP_FWD("{\"topic\":\"__consumer_offsets\"}"),
	    "reserves for itself"),
	BAD("forward topic __transaction_state", PREP_FWD("{\"topic\":\"__transaction_state\"}"),
	    "reserves for itself"),
	BAD("forward topic __", PREP_FWD("{\"topic\":\"__\"}"), "reserves for itself"),
	BAD("forward topic null", PREP_FWD("{\"topic\":null}"), "forward.topic"),
	BAD("forward.key number", PREP_FWD("{\"topic\":\"t\",\"key\":5}"), "forward.key"),
	BAD("forward.key object", PREP_FWD("{\"topic\":\"t\",\"key\":{}}"), "forward.key"),
	BAD("forward.key bool", PREP_FWD("{\"topic\":\"t\",\"key\":true}"), "forward.key"),
	BAD("headers not an object", PREP_HDR("\"a=b\""), "forward.headers"),
	BAD("headers array", PREP_HDR("[\"a\"]"), "forward.headers"),
	BAD("header value number", PREP_HDR("{\"h1\":1}"), "header \"h1\""),
	BAD("header value null", PREP_HDR("{\"h2\":null}"), "header \"h2\""),
	BAD("header value object", PREP_HDR("{\"h3\":{}}"), "header \"h3\""),
	BAD("header reserved prefix txhub-", PREP_HDR("{\"txhub-biz-id\":\"x\"}"), "txhub-"),
	BAD("header reserved prefix any case", PREP_HDR("{\"TxHub-Message-Key\":\"x\"}"), "reserved"),
	BAD("header name empty", PREP_HDR("{\"\":\"x\"}"), "header name"),
	BAD("header name with control", PREP_HDR("{\"a\\nb\":\"x\"}"), "header name"),
	BAD("header name with C1 control", PREP_HDR("{\"a\xc2\x85\":\"x\"}"), "header name"),
	BAD("rollback with a bad forward", "{\"type\":\"rollback\"," BASE ",\"forward\":5}", "\"forward\""),
	/* delayed delivery (docs/consumers.md: Delayed delivery) */
	BAD("not_before and delay_ms", PREP_FWD("{\"topic\":\"t\",\"delay_ms\":5,"
	    "\"not_before\":\"2026-11-28T12:00:00Z\"}"), "mutually exclusive"),
	BAD("not_before without a zone", PREP_FWD("{\"topic\":\"t\",\"not_before\":"
	    "\"2026-11-28T12:00:00\"}"), "no zone"),
	BAD("not_before a date", PREP_FWD("{\"topic\":\"t\",\"not_before\":\"2026-11-28\"}"),
	    "forward.not_before"),
	BAD("not_before malformed", PREP_FWD("{\"topic\":\"t\",\"not_before\":\"soon\"}"),
	    "forward.not_before"),
	BAD("not_before no such day", PREP_FWD("{\"topic\":\"t\",\"not_before\":"
	    "\"2026-02-30T12:00:00Z\"}"), "no such date"),
	BAD("not_before before 1970", PREP_FWD("{\"topic\":\"t\",\"not_before\":"
	    "\"1969-12-31T23:59:59Z\"}"), "out of range"),
	BAD("not_before a number", PREP_FWD("{\"topic\":\"t\",\"not_before\":1795867200}"),
	    "forward.not_before"),
	BAD("delay_ms negative", PREP_FWD("{\"topic\":\"t\",\"delay_ms\":-1}"), "forward.delay_ms"),
	BAD("delay_ms fraction", PREP_FWD("{\"topic\":\"t\",\"delay_ms\":1.5}"), "forward.delay_ms"),
	BAD("delay_ms string", PREP_FWD("{\"topic\":\"t\",\"delay_ms\":\"100\"}"),
	    "forward.delay_ms"),
	BAD("delay_ms over 100 years", PREP_FWD("{\"topic\":\"t\",\"delay_ms\":1e300}"),
	    "forward.delay_ms"),
	BAD("delay_ms twice", PREP_FWD("{\"topic\":\"t\",\"delay_ms\":1,\"delay_ms\":2}"),
	    "appears more than once"),
	/* checkback */
	BAD("checkback not an object", PREP_CB("\"http://a/\""), "\"checkback\""),
	BAD("checkback array", PREP_CB("[]"), "\"checkback\""),
	BAD("checkback url ftp", PREP_CB("{\"url\":\"ftp://shop/check\"}"), "checkback.url"),
	BAD("checkback url with space", PREP_CB("{\"url\":\"http://shop/a b\"}"), "checkback.url"),
	BAD("checkback url with tab", PREP_CB("{\"url\":\"http://shop/a\\tb\"}"), "checkback.url"),
	BAD("checkback url non-ASCII", PREP_CB("{\"url\":\"http://sh\xc3\xb6p/\"}"), "checkback.url"),
	BAD("checkback url no scheme", PREP_CB("{\"url\":\"shop/check\"}"), "checkback.url"),
	BAD("checkback url no host", PREP_CB("{\"url\":\"http://\"}"), "checkback.url"),
	BAD("checkback url empty host", PREP_CB("{\"url\":\"https:///check\"}"), "checkback.url"),
	BAD("checkback url empty", PREP_CB("{\"url\":\"\"}"), "checkback.url"),
	BAD("checkback url number", PREP_CB("{\"url\":80}"), "checkback.url"),
	BAD("first_after_ms negative", PREP_CB("{\"first_after_ms\":-1}"), "checkback.first_after_ms"),
	BAD("first_after_ms fraction", PREP_CB("{\"first_after_ms\":1.5}"), "checkback.first_after_ms"),
	BAD("first_after_ms string", PREP_CB("{\"first_after_ms\":\"100\"}"), "checkback.first_after_ms"),
	BAD("first_after_ms over 30 days", PREP_CB("{\"first_after_ms\":2592000001}"),
	    "checkback.first_after_ms"),
	/* commit */
	BAD("commit with payload but no forward", COMMIT(",\"payload\":{\"a\":1}"), "\"forward\""),
	BAD("commit with payload_base64 but no forward", COMMIT(",\"payload_base64\":\"AA==\""),
	    "\"forward\""),
	BAD("commit with forward but no payload", COMMIT("," FWD), "payload"),
};

#define NBAD (sizeof bad_cases / sizeof bad_cases[0])

/* Criterion passes parameters to a test process that may not share this
 * one's address space, so the parameter is an index into bad_cases. */
ParameterizedTestParameters(envelope_reject, table)
{
	static size_t idx[NBAD];
	for (size_t i = 0; i < NBAD; i++)
		idx[i] = i;
	return cr_make_param_array(size_t, idx, NBAD);
}

ParameterizedTest(size_t *i, envelope_reject, table)
{
	const bad_case *c = &bad_cases[*i];
	size_t len = c->value ? (c->len ? c->len : strlen(c->value)) : 0;
	size_t max = c->max_bytes ? c->max_bytes : MAXB;
	memset(&env, 0x5a, sizeof env); /* the parser must reset it */
	int rc = envelope_parse(c->value, len, max, &env, err, sizeof err);
	cr_assert_eq(rc, -1, "[%s] accepted", c->name);
	cr_assert(err[0], "[%s] no reason given", c->name);
	cr_assert(strstr(err, c->reason), "[%s] reason \"%s\" does not mention \"%s\"", c->name, err,
	          c->reason);
	assert_empty();
}

/* ---- where cJSON alone would lose or change data ---- */

Test(envelope_strict, biz_id_above_2_pow_53_is_rejected_not_rounded, .init = setup, .fini = teardown)
{
	/* 9007199254740993 is not a double: it would become "...992" */
	must_reject(PREP_BIZ("9007199254740993"), "send it as a string");
	envelope_free(&env);
	must_accept(PREP_BIZ("9007199254740991"));
	cr_assert_str_eq(env.biz_id, "9007199254740991");
}

Test(envelope_strict, integer_biz_id_is_its_digits_as_written, .init = setup, .fini = teardown)
{
	/* cJSON reads each of these as a double that is a whole number; the
	 * id is the text, so they are refused instead of rounded */
	const char *rounded[] = {"1.00000000000000001", "9007199254740990.6", "1e-400", "-0", NULL};
	for (const char **r = rounded; *r; r++) {
		char buf[256];
		snprintf(buf, sizeof buf, PREP_BIZ("%s"), *r);
		cr_assert_eq(parse(buf), -1, "%s accepted as biz_id %s", *r, env.biz_id);
		envelope_free(&env);
	}
	must_accept(PREP_BIZ(" 9007199254740990 "));
	cr_assert_str_eq(env.biz_id, "9007199254740990");
}

Test(envelope_strict, characters_just_outside_c1_are_accepted, .init = setup, .fini = teardown)
{
	/* U+00A0 (0xC2 0xA0) and U+007E border the refused ranges */
	must_accept(PREP_BIZ("\"~\xc2\xa0\xc2\xbf\""));
	cr_assert_str_eq(env.biz_id, "~\xc2\xa0\xc2\xbf");
	envelope_free(&env);
	must_accept(PREP_MK("\"\\u00a0\""));
	cr_assert_str_eq(env.message_key, "\xc2\xa0");
}

/* A document nested deeper than cJSON reads: `depth` arrays in the payload. */
static char *nested_payload(int depth, size_t *len)
{
	const char *head = "{\"type\":\"prepare\"," BASE "," FWD ",\"payload\":";
	size_t hl = strlen(head);
	char *s = malloc(hl + 2 * (size_t)depth + 3);
	cr_assert_not_null(s);
	memcpy(s, head, hl);
	memset(s + hl, '[', (size_t)depth);
	memset(s + hl + depth, ']', (size_t)depth);
	memcpy(s + hl + 2 * (size_t)depth, "}", 2);
	*len = hl + 2 * (size_t)depth + 1;
	return s;
}

Test(envelope_strict, deep_nesting_is_named_with_its_limit, .init = setup, .fini = teardown)
{
	size_t len;
	int depths[] = {1000, 10000};
	for (int i = 0; i < 2; i++) {
		char *s = nested_payload(depths[i], &len);
		cr_assert_eq(parse_len(s, len), -1);
		cr_assert(strstr(err, "nested more than 1000 levels deep"), "%d levels: %s", depths[i], err);
		free(s);
	}
	/* 999 arrays inside the envelope object: 1000 levels, the limit */
	char *s = nested_payload(999, &len);
	cr_assert_eq(parse_len(s, len), 0, "%s", err);
	free(s);
	envelope_free(&env);
	/* brackets inside strings are not nesting */
	must_reject("{\"type\":\"prepare\"," BASE ",\"payload\":[\"[[[[\",}", "invalid JSON near byte");
}

Test(envelope_strict, escaped_payload_name_keeps_big_integer, .init = setup, .fini = teardown)
{
	must_accept("{\"type\":\"prepare\"," BASE ",\"pay\\u006coad\":12345678901234567890," FWD "}");
	PAYLOAD_IS("12345678901234567890");
}

Test(envelope_strict, byte_order_mark_is_rejected, .init = setup, .fini = teardown)
{
	must_reject("\xef\xbb\xbf{\"type\":\"prepare\"," BASE ",\"payload\":12345678901234567890,"
	            FWD "}", "byte-order mark");
}

Test(envelope_strict, non_json_accepted_by_cjson_is_rejected, .init = setup, .fini = teardown)
{
	/* what RFC 8259 forbids and cJSON reads anyway: leading zeros, raw control
	 * characters in strings; 1. and 1.e5 and -.5 as numbers; \u with a
	 * non-hex digit as U+0000 (cutting the string there); and any byte up to
	 * 0x20 as white space (JSON has four) */
	static const char *const bad[][2] = {
		{"{\"type\":\"prepare\"," BASE ",\"payload\":01," FWD "}", "leading zero"},
		{"{\"type\":\"prepare\"," BASE ",\"payload\":{\"a\":\"x\ny\"}," FWD "}", "control character"},
		{"{\"type\":\"prepare\"," BASE ",\"payload\":[1e-05,-05]," FWD "}", "leading zero"},
		{"{\"type\":\"prepare\"," BASE ",\"payload\":[1.5,1.]," FWD "}", "no digit after its decimal point"},
		{"{\"type\":\"prepare\"," BASE ",\"payload\":{\"a\":1.e5}," FWD "}", "no digit after its decimal point"},
		{"{\"type\":\"prepare\"," BASE ",\"payload\":[-0.5,-.5]," FWD "}", "no digit after its minus sign"},
		{"{\"type\":\"prepare\"," BASE ",\"payload\":\"x\\u%0e9\"," FWD "}", "without four hex digits"},
		{"{\"type\":\"commit\",\"biz_id\":\"b\\uzzzz\",\"message_key\":\"k\"}", "without four hex digits"},
		{"{\"type\":\"prepare\"," BASE ",\"payload\":[\x10" "1]," FWD "}", "control character outside a string"},
		{"{\x01\"type\":\"prepare\"," BASE ",\"payload\":1," FWD "}", "control character outside a string"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		must_reject(bad[i][0], bad[i][1]);
		envelope_free(&env);
	}
	/* and what it allows: \u escapes, white space, "1." in a string, zeros
	 * inside numbers, and an exponent starting with zeros after its sign
	 * too (found by fuzz-client: the hub refused 1e-05) */
	static const char *const good[][2] = {
		{"{\"type\":\"prepare\"," BASE ",\"payload\":\"\\u00e9\\uABCD\"," FWD "}",
		 "\xc3\xa9\xea\xaf\x8d"},
		{"{\"type\":\"prepare\",\t\r\n " BASE ",\"payload\":[\"1.\",\n0.5e1]," FWD "}",
		 "[\"1.\",0.5e1]"},
		{"{\"type\":\"prepare\"," BASE ",\"payload\":[\"1.\",0.5e1]," FWD "}", "[\"1.\",0.5e1]"},
		{"{\"type\":\"prepare\"," BASE ",\"payload\":[0,0.05,10,1e05,-0.0,1e-05,2E-007,3e+08,"
		 "-4.0e-0]," FWD "}",
		 "[0,0.05,10,1e05,-0.0,1e-05,2E-007,3e+08,-4.0e-0]"},
	};
	must_accept_payloads(good, sizeof good / sizeof good[0]);
}

Test(envelope_strict, nested_duplicates_and_too_many_headers_are_rejected, .init = setup,
     .fini = teardown)
{
	must_reject("{\"type\":\"prepare\"," BASE ",\"payload\":1,\"forward\":{\"topic\":\"t\","
	            "\"topic\":\"u\"}}", "more than once");
	envelope_free(&env);
	must_reject("{\"type\":\"prepare\"," BASE ",\"payload\":1,\"forward\":{\"topic\":\"t\","
	            "\"headers\":{\"a\":\"1\",\"a\":\"2\"}}}", "more than once");
	envelope_free(&env);
	char buf[4096];
	int o = snprintf(buf, sizeof buf, "{\"type\":\"prepare\"," BASE ",\"payload\":1,"
	                                  "\"forward\":{\"topic\":\"t\",\"headers\":{");
	for (int i = 0; i < 65; i++)
		o += snprintf(buf + o, sizeof buf - (size_t)o, "%s\"h%d\":\"v\"", i ? "," : "", i);
	snprintf(buf + o, sizeof buf - (size_t)o, "}}}");
	must_reject(buf, "more than 64");
}

/* ---- helpers ---- */

static int utf8(const char *s) { return envelope_valid_utf8((const unsigned char *)s, strlen(s)); }

Test(envelope_helpers, valid_utf8_accepts)
{
	cr_assert(envelope_valid_utf8(NULL, 0));
	cr_assert(utf8(""));
	cr_assert(utf8("plain ASCII ~\x7f"));
	cr_assert(utf8("\xc2\x80"));             /* U+0080 */
	cr_assert(utf8("\xc3\xa9"));             /* é */
	cr_assert(utf8("\xdf\xbf"));             /* U+07FF */
	cr_assert(utf8("\xe0\xa0\x80"));         /* U+0800 */
	cr_assert(utf8("\xe2\x82\xac"));         /* € */
	cr_assert(utf8("\xed\x9f\xbf"));         /* U+D7FF */
	cr_assert(utf8("\xee\x80\x80"));         /* U+E000 */
	cr_assert(utf8("\xef\xbf\xbf"));         /* U+FFFF */
	cr_assert(utf8("\xf0\x90\x80\x80"));     /* U+10000 */
	cr_assert(utf8("\xf0\x9f\x98\x80"));     /* 😀 */
	cr_assert(utf8("\xf4\x8f\xbf\xbf"));     /* U+10FFFF */
	cr_assert(envelope_valid_utf8((const unsigned char *)"a\0b", 3), "NUL is valid UTF-8");
}

Test(envelope_helpers, valid_utf8_rejects)
{
	static const char *bad[] = {
		/* stray continuation bytes */
		"\x80", "\xbf", "a\x80",
		/* overlong forms */
		"\xc0\x80", "\xc0\xaf", "\xc1\xbf", "\xe0\x80\x80", "\xe0\x9f\xbf", "\xf0\x80\x80\x80",
		"\xf0\x8f\xbf\xbf",
		/* UTF-16 surrogates */
		"\xed\xa0\x80", "\xed\xaf\xbf", "\xed\xb0\x80", "\xed\xbf\xbf",
		/* above U+10FFFF, and bytes never used */
		"\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xf7\xbf\xbf\xbf", "\xf8\x88\x80\x80\x80", "\xfe",
		"\xff",
		/* truncated sequences */
		"\xc3", "\xe2\x82", "\xf0\x9f\x98", "ok\xc3",
		/* bad continuation bytes */
		"\xc3\x41", "\xe2\x28\xa1", "\xe2\x82\x28", "\xf0\x9f\x98\x28", "\xc3\xa9\x80",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_not(utf8(bad[i]), "case %zu accepted", i);
	/* the length bounds the scan: a sequence cut by len is truncated */
	cr_assert_not(envelope_valid_utf8((const unsigned char *)"\xe2\x82\xac", 2));
	cr_assert(envelope_valid_utf8((const unsigned char *)"a\xe2\x82\xac", 1));
}

static int topic(const char *s) { return txhubi_topic_valid(s, strlen(s)); }

Test(envelope_helpers, valid_topic)
{
	cr_assert(topic("orders"));
	cr_assert(topic("a"));
	cr_assert(topic("a.b_c-D9"));
	cr_assert(topic("..."));
	cr_assert(topic(".hidden"));
	cr_assert(topic("txhub.control"));
	char t[251];
	memset(t, 'x', 250);
	t[250] = '\0';
	cr_assert(txhubi_topic_valid(t, 249));
	cr_assert_not(txhubi_topic_valid(t, 250));
	cr_assert_not(topic(""));
	cr_assert_not(topic("."));
	cr_assert_not(topic(".."));
	cr_assert_not(topic("a b"));
	cr_assert_not(topic("a/b"));
	cr_assert_not(topic("a:b"));
	cr_assert_not(topic("a+b"));
	cr_assert_not(topic("a\tb"));
	cr_assert_not(topic("caf\xc3\xa9"));
	cr_assert(txhubi_topic_valid("orders!", 6), "only len bytes are checked");
	cr_assert_not(txhubi_topic_valid("ab", 0));
}

Test(envelope_helpers, valid_url)
{
	static const char *good[] = {
		"http://a", "https://a", "http://shop.example/tx/check",
		"https://shop.example:8443/c?x=1&y=%20", "HTTP://SHOP/", "HttpS://shop/",
		"http://10.0.0.1:8080/check", "http://[::1]:80/c",
	};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
		cr_assert(envelope_valid_url(good[i]), "%s rejected", good[i]);
	static const char *bad[] = {
		"", "http://", "https://", "http:///x", "https://?q", "ftp://shop/",
		"file:///etc/passwd", "http:/shop", "//shop/check", "shop/check", "javascript:alert(1)",
		"http://shop/a b", "http://shop/a\tb", "http://shop/\x7f", "http://sh\xc3\xb6p/",
		" http://shop/", "http://shop/\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_not(envelope_valid_url(bad[i]), "\"%s\" accepted", bad[i]);
	char url[2100];
	strcpy(url, "https://h/");
	memset(url + 10, 'p', sizeof url - 10);
	url[ENVELOPE_URL_MAX] = '\0';
	cr_assert(envelope_valid_url(url), "%d characters rejected", ENVELOPE_URL_MAX);
	url[ENVELOPE_URL_MAX] = 'p';
	url[ENVELOPE_URL_MAX + 1] = '\0';
	cr_assert_not(envelope_valid_url(url), "%d characters accepted", ENVELOPE_URL_MAX + 1);
}

/* Names from the envelope appear in a rejection reason escaped: the reason
 * goes to txhub.rejected (which needs valid UTF-8) and to one log line. A
 * name the fuzzer found, with a DEL byte, and a long non-ASCII name whose
 * cut would split a UTF-8 sequence. */
static void reason_is_printable_ascii(void)
{
	cr_assert_gt(strlen(err), 0);
	for (const char *p = err; *p; p++)
		cr_assert((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f,
		          "byte 0x%02x in reason \"%s\"", (unsigned char)*p, err);
}

Test(envelope_reject, names_in_reasons_are_escaped)
{
	must_reject(PREP_HDR("{\"a\x7f" "b\":\"1\",\"a\x7f" "b\":\"2\"}"),
	            "forward header \"a\\x7fb\" appears more than once");
	reason_is_printable_ascii();
	/* 40 two-byte characters: 80 bytes, longer than a reason shows */
	char name[81], json[512];
	for (int i = 0; i < 40; i++)
		memcpy(name + 2 * i, "\xc3\xa9", 2);
	name[80] = '\0';
	snprintf(json, sizeof json, PREP_HDR("{\"%s\":\"1\",\"%s\":\"2\"}"), name, name);
	must_reject(json, "appears more than once");
	reason_is_printable_ascii();
	cr_assert(strstr(err, "\\xc3\\xa9"), "%s", err);
	snprintf(json, sizeof json, PREP_HDR("{\"%s\":1}"), name);
	must_reject(json, "must have a string value");
	reason_is_printable_ascii();
	must_reject(PREP_HDR("{\"TXHUB-\xc3\xa9\":\"1\"}"), "forward header \"TXHUB-\\xc3\\xa9\" uses");
	reason_is_printable_ascii();
	must_reject(PREP_CB("{\"u\xc3\xa9\":1,\"u\xc3\xa9\":2}"), "field \"checkback.u\\xc3\\xa9\"");
	reason_is_printable_ascii();
	must_reject(PREP_FWD("{\"topic\":\"t\",\"\xe2\x82\xac\":1,\"\xe2\x82\xac\":2}"),
	            "field \"forward.\\xe2\\x82\\xac\"");
	reason_is_printable_ascii();
}
