/* test_rejects.c: malformed control records each land in txhub.rejected
 * with their raw bytes and a reason, and the hub keeps going. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

typedef struct {
	const char *value; /* NULL: a null (tombstone) value */
	size_t len;        /* 0: strlen(value) unless empty is set */
	int empty;
	const char *reason; /* a substring the reason must hold */
} bad;

#define S(v, r) {v, 0, 0, r}

Test(rejects, forty_kinds_of_malformed_record_are_kept_with_a_reason, .timeout = 180)
{
	h_env e;
	h_setup(&e, "rej");
	char fwd[128];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	static char big[5000], longkey[400], longbiz[200], ctlfwd[400];
	memset(big, ' ', sizeof big - 1);
	memcpy(big, "{\"type\":\"rollback\",\"biz_id\":\"b\",\"message_key\":\"big\"}", 52);
	snprintf(longkey, sizeof longkey, "{\"type\":\"rollback\",\"biz_id\":\"b\",\"message_key\":\"%0300d\"}", 7);
	snprintf(longbiz, sizeof longbiz, "{\"type\":\"rollback\",\"biz_id\":\"%065d\",\"message_key\":\"k\"}", 7);
	snprintf(ctlfwd, sizeof ctlfwd, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"loop\","
	                                "\"payload\":1,\"forward\":{\"topic\":\"%s\"}}", e.topic);
	/* a duplicate header name of 30 three-byte characters: a reason that
	 * quoted it cut at byte 64 would split a character, and PostgreSQL
	 * refuses text that is not UTF-8 (found by the fuzzer) */
	static char euro[400], euros[91];
	for (int i = 0; i < 30; i++)
		memcpy(euros + 3 * i, "\xe2\x82\xac", 3);
	snprintf(euro, sizeof euro, "{\"type\":\"prepare\",\"biz_id\":\"b\",\"message_key\":\"k\","
	                            "\"payload\":1,\"forward\":{\"topic\":\"t\",\"headers\":"
	                            "{\"%s\":\"1\",\"%s\":\"2\"}}}", euros, euros);
	/* 1,500 arrays inside one another: cJSON stops at 1,000 levels */
	static char deep[3300];
	int dn = snprintf(deep, sizeof deep, "{\"type\":\"rollback\",\"biz_id\":\"b\","
	                                     "\"message_key\":\"deep\",\"x\":");
	memset(deep + dn, '[', 1500);
	memset(deep + dn + 1500, ']', 1500);
	deep[dn + 3000] = '}';
	static const char garbage[] = "\x00\x01\xfe\xff\x80garbage\x00";
	const char *P = "\"payload\":\"p\",\"forward\":{\"topic\":\"t\"}";
	char cases_buf[40][256];
	(void)cases_buf;
	bad cases[] = {
		S("not json", "invalid JSON"),
		S("{", "invalid JSON"),
		S("{\"type\":\"prepare\",\"biz_id\":\"b\"", "invalid JSON"),
		S("[]", "not a JSON object"),
		S("\"prepare\"", "not a JSON object"),
		S("42", "not a JSON object"),
		S("null", "not a JSON object"),
		S("{}", "missing field \"type\""),
		S("{\"type\":\"bogus\",\"biz_id\":\"b\",\"message_key\":\"k\"}", "\"type\""),
		S("{\"type\":1,\"biz_id\":\"b\",\"message_key\":\"k\"}", "\"type\""),
		S("{\"type\":\"rollback\",\"message_key\":\"k\"}", "missing field \"biz_id\""),
		S("{\"type\":\"rollback\",\"biz_id\":\"\",\"message_key\":\"k\"}", "biz_id"),
		{longbiz, 0, 0, "biz_id"},
		S("{\"type\":\"rollback\",\"biz_id\":-1,\"message_key\":\"k\"}", "biz_id"),
		S("{\"type\":\"rollback\",\"biz_id\":1.5,\"message_key\":\"k\"}", "biz_id"),
		S("{\"type\":\"rollback\",\"biz_id\":true,\"message_key\":\"k\"}", "biz_id"),
		S("{\"type\":\"rollback\",\"biz_id\":\"a\\tb\",\"message_key\":\"k\"}", "control character"),
		S("{\"type\":\"rollback\",\"biz_id\":\"b\"}", "missing field \"message_key\""),
		S("{\"type\":\"rollback\",\"biz_id\":\"b\",\"message_key\":\"\"}", "message_key"),
		{longkey, 0, 0, "message_key"},
		S("{\"type\":\"rollback\",\"biz_id\":\"b\",\"message_key\":7}", "message_key"),
		S("{\"type\":\"rollback\",\"biz_id\":\"b\",\"message_key\":\"a\\nb\"}", "control character"),
		S("\xff\xfe{}", "UTF-8"),
		S("{\"type\":\"rollback\",\"biz_id\":\"b\xc3\",\"message_key\":\"k\"}", "UTF-8"),
		S("{\"v\":2,\"type\":\"rollback\",\"biz_id\":\"b\",\"message_key\":\"k\"}", "version 2"),
		{big, sizeof big - 1, 0, "envelope.max_bytes"},
		{garbage, sizeof garbage - 1, 0, "NUL"},
		{"", 0, 1, "empty"},
		{NULL, 0, 0, "null record value"},
		S("{\"type\":\"prepare\",\"biz_id\":\"b\",\"message_key\":\"k\",\"forward\":{\"topic\":\"t\"}}", "payload"),
		S("{\"type\":\"prepare\",\"biz_id\":\"b\",\"message_key\":\"k\",\"payload\":1}", "forward"),
		S("{\"type\":\"prepare\",\"biz_id\":\"b\",\"message_key\":\"k\",\"payload\":1,\"forward\":{\"topic\":\"bad topic!\"}}", "forward.topic"),
		S("{\"type\":\"prepare\",\"biz_id\":\"b\",\"message_key\":\"k\",\"payload\":1,\"payload_base64\":\"AA==\",\"forward\":{\"topic\":\"t\"}}", "mutually exclusive"),
		S("{\"type\":\"prepare\",\"biz_id\":\"b\",\"message_key\":\"k\",\"payload_base64\":\"%%%\",\"forward\":{\"topic\":\"t\"}}", "base64"),
		S("{\"type\":\"rollback\",\"biz_id\":\"b\",\"message_key\":\"k\\u0000x\"}", "\\u0000"),
		S("{\"type\":\"rollback\",\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"k\"}", "more than once"),
		S("{\"type\":\"rollback\",\"biz_id\":\"b\",\"message_key\":\"k\"} trailing", "trailing"),
		{ctlfwd, 0, 0, "control topic"},
		S("{\"type\":\"prepare\",\"biz_id\":\"b\",\"message_key\":\"k\",\"payload\":1,\"forward\":{\"topic\":\"t\"},\"checkback\":{\"url\":\"ftp://x/\"}}", "checkback.url"),
		S("{\"type\":\"prepare\",\"biz_id\":\"b\",\"message_key\":\"k\",\"payload\":1,\"forward\":{\"topic\":\"t\",\"headers\":{\"txhub-biz-id\":\"x\"}}}", "reserved"),
		S("{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"k\",\"payload\":1}", "one-shot"),
		{euro, 0, 0, "appears more than once"},
		{deep, 0, 0, "nested more than 1000 levels deep"},
		S("{\"type\":\"rollback\",\"biz_id\":\"b\xc2\x85\",\"message_key\":\"k\"}",
		  "control character U+0085"),
		S("{\"type\":\"rollback\",\"biz_id\":\"b\",\"message_key\":\"k\\u0085\"}",
		  "control character U+0085"),
		S("{\"type\":\"rollback\",\"biz_id\":1.00000000000000001,\"message_key\":\"k\"}",
		  "digits only"),
		S("{\"type\":\"rollback\",\"biz_id\":1e-400,\"message_key\":\"k\"}", "digits only"),
	};
	(void)P;
	size_t ncases = sizeof cases / sizeof cases[0];
	cr_assert_geq(ncases, 30);

	const char *settings[] = {"envelope.max_bytes=4096", NULL};
	pid_t hub = h_hub_start(&e, settings);
	/* everything into one partition, so offsets map to cases */
	for (size_t i = 0; i < ncases; i++) {
		size_t len = cases[i].value ? (cases[i].len ? cases[i].len : strlen(cases[i].value)) : 0;
		h_send(&e, 0, "bad", cases[i].value, len);
	}
	/* the hub keeps going: a valid transaction after all of them */
	char buf[512];
	snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"after\","
	                          "\"payload\":\"ok\",\"forward\":{\"topic\":\"%s\"}}", fwd);
	h_send_str(&e, 0, "good", buf);
	h_flush();
	cr_assert(h_wait(&e, "SELECT status || '/' || send_status FROM txhub.messages "
	                     "WHERE message_key = 'after'", "committed/sent", 30000));
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.rejected"), (long)ncases);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages"), 1,
	             "no malformed record may create state");

	for (size_t i = 0; i < ncases; i++) {
		char sql[512], reason[512], raw[16];
		snprintf(sql, sizeof sql, "SELECT reason FROM txhub.rejected WHERE src_partition = 0 "
		                          "AND src_offset = %zu AND src_topic = '%s'", i, e.topic);
		h_query(&e, sql, reason, sizeof reason);
		cr_expect(strstr(reason, cases[i].reason) != NULL,
		          "case %zu: reason \"%s\" should mention \"%s\"", i, reason, cases[i].reason);
		/* the raw value is kept byte for byte */
		size_t len = cases[i].value ? (cases[i].len ? cases[i].len : strlen(cases[i].value)) : 0;
		snprintf(sql, sizeof sql, "SELECT CASE WHEN record_value IS NULL THEN 'null' "
		                          "ELSE length(record_value)::text END FROM txhub.rejected "
		                          "WHERE src_offset = %zu AND src_topic = '%s'", i, e.topic);
		h_query(&e, sql, raw, sizeof raw);
		char want[16];
		if (cases[i].value)
			snprintf(want, sizeof want, "%zu", len);
		else
			snprintf(want, sizeof want, "null");
		cr_expect_str_eq(raw, want, "case %zu: stored value length", i);
	}
	snprintf(buf, sizeof buf, "SELECT encode(record_value, 'hex') || '/' || encode(record_key, 'escape') "
	                          "FROM txhub.rejected WHERE src_offset = 26 AND src_topic = '%s'", e.topic);
	char got[256];
	cr_assert_str_eq(h_query(&e, buf, got, sizeof got), "0001feff80676172626167650" "0/bad");
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}

/* A trigger that refuses one message key. While it raises a plain
 * exception (SQLSTATE P0001, not a data error) the record is the
 * database's problem: its partition waits, nothing is rejected, the record
 * after it waits too. Once the same trigger blames the data (23514), the
 * batch is applied one record at a time, the refused record is kept in
 * txhub.rejected with the database's reason, and the others go through. */
Test(rejects, a_record_postgresql_refuses_is_kept_and_the_rest_goes_on, .timeout = 180)
{
	h_env e;
	h_setup(&e, "poison");
	char fwd[128], buf[512];
	snprintf(fwd, sizeof fwd, "fw.%s", e.name);
	h_query(&e, "CREATE FUNCTION public.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ "
	            "BEGIN IF NEW.message_key = 'poison' THEN RAISE EXCEPTION 'no poison here'; "
	            "END IF; RETURN NEW; END $$; SELECT 1", buf, sizeof buf);
	h_query(&e, "CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON txhub.message_rows "
	            "FOR EACH ROW EXECUTE FUNCTION public.refuse(); SELECT 1", buf, sizeof buf);
	pid_t hub = h_hub_start(&e, NULL);
	const char *keys[] = {"good-1", "poison", "good-2"};
	for (int i = 0; i < 3; i++) {
		snprintf(buf, sizeof buf, "{\"type\":\"commit\",\"biz_id\":\"b\",\"message_key\":\"%s\","
		                          "\"payload\":\"x\",\"forward\":{\"topic\":\"%s\"}}", keys[i], fwd);
		h_send_str(&e, 0, keys[i], buf);
		h_flush();
		if (i == 0) /* good-1 stored before the others arrive */
			cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = "
			                     "'sent'", "1", 60000), "the first record was not applied");
	}
	h_pause_ms(4000);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.rejected"), 0,
	             "a plain exception from a trigger was blamed on the record");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages"), 1,
	             "the partition did not wait at the refused record");
	h_query(&e, "CREATE OR REPLACE FUNCTION public.refuse() RETURNS trigger LANGUAGE plpgsql "
	            "AS $$ BEGIN IF NEW.message_key = 'poison' THEN RAISE EXCEPTION 'no poison here' "
	            "USING ERRCODE = 'check_violation'; END IF; RETURN NEW; END $$; SELECT 1", buf,
	            sizeof buf);
	cr_assert(h_wait(&e, "SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", "2",
	                 60000), "the records around the refused one were not applied");
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.messages WHERE message_key = 'poison'"), 0);
	h_query(&e, "SELECT reason FROM txhub.rejected WHERE src_offset = 1", buf, sizeof buf);
	cr_assert(strstr(buf, "PostgreSQL refused the envelope: 23514: no poison here"),
	          "reason: %s", buf);
	cr_assert_eq(h_count(&e, "SELECT count(*) FROM txhub.rejected"), 1);
	cr_assert_eq(h_hub_stop(hub), 0);
	h_teardown(&e);
}
