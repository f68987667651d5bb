/* vectors.c: see vectors.h. */
#include "vectors.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cJSON *v_load(const char *name)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/tests/vectors/%s", TXHUB_SOURCE_ROOT, name);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *text = malloc((size_t)n + 1);
	cr_assert_not_null(text);
	cr_assert_eq(fread(text, 1, (size_t)n, f), (size_t)n);
	text[n] = '\0';
	fclose(f);
	cJSON *doc = cJSON_Parse(text);
	free(text);
	cr_assert_not_null(doc, "%s is not valid JSON", path);
	return doc;
}

static int b64(char c)
{
	const char *tab = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *p = c ? strchr(tab, c) : NULL;
	return p ? (int)(p - tab) : -1;
}

unsigned char *v_unbase64(const char *s, size_t *len)
{
	size_t n = strlen(s);
	unsigned char *out = malloc(n + 1);
	cr_assert_not_null(out);
	unsigned acc = 0;
	int bits = 0;
	*len = 0;
	for (size_t i = 0; i < n && s[i] != '='; i++) {
		int v = b64(s[i]);
		cr_assert_geq(v, 0, "bad base64 in a vector: %s", s);
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[(*len)++] = (unsigned char)(acc >> bits);
		}
	}
	out[*len] = '\0';
	return out;
}

static const char *str(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A string field, or its *_base64 twin decoded; NULL when neither. */
static char *text_or_bytes(const cJSON *o, const char *name)
{
	char b64name[64];
	size_t len;
	snprintf(b64name, sizeof b64name, "%s_base64", name);
	if (str(o, name))
		return strdup(str(o, name));
	if (str(o, b64name))
		return (char *)v_unbase64(str(o, b64name), &len);
	return NULL;
}

static void payload_from(const cJSON *in, v_input *v)
{
	size_t len = 0;
	if (str(in, "payload_string")) {
		v->m.payload_kind = TXHUB_PAYLOAD_STRING;
		v->payload = (unsigned char *)strdup(str(in, "payload_string"));
		len = strlen(str(in, "payload_string"));
	} else if (str(in, "payload_string_base64")) {
		v->m.payload_kind = TXHUB_PAYLOAD_STRING;
		v->payload = v_unbase64(str(in, "payload_string_base64"), &len);
	} else if (str(in, "payload_json")) {
		v->m.payload_kind = TXHUB_PAYLOAD_JSON;
		v->payload = (unsigned char *)strdup(str(in, "payload_json"));
		len = strlen(str(in, "payload_json"));
	} else if (str(in, "payload_bytes_base64")) {
		v->m.payload_kind = TXHUB_PAYLOAD_BYTES;
		v->payload = v_unbase64(str(in, "payload_bytes_base64"), &len);
	}
	v->m.payload = v->payload;
	v->m.payload_len = len;
}

static void forward_from(const cJSON *fw, v_input *v)
{
	if (!fw)
		return;
	v->m.forward_topic = str(fw, "topic");
	v->forward_key = text_or_bytes(fw, "key");
	v->m.forward_key = v->forward_key;
	const cJSON *h;
	cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(fw, "headers")) {
		cr_assert_lt(v->nheaders, 80);
		v->headers[v->nheaders].name = cJSON_GetArrayItem(h, 0)->valuestring;
		v->headers[v->nheaders].value = cJSON_GetArrayItem(h, 1)->valuestring;
		v->nheaders++;
	}
	v->m.forward_headers = v->nheaders ? v->headers : NULL;
	v->m.header_count = v->nheaders;
}

void v_input_from(const cJSON *vector, v_input *v)
{
	memset(v, 0, sizeof *v);
	const char *t = str(vector, "type");
	v->type = strcmp(t, "prepare") == 0 ? TXHUB_PREPARE
	          : strcmp(t, "commit") == 0 ? TXHUB_COMMIT : TXHUB_ROLLBACK;
	const cJSON *in = cJSON_GetObjectItemCaseSensitive(vector, "input");
	v->biz_id = text_or_bytes(in, "biz_id");
	v->message_key = text_or_bytes(in, "message_key");
	v->m.biz_id = v->biz_id;
	v->m.message_key = v->message_key;
	payload_from(in, v);
	const cJSON *fw = cJSON_GetObjectItemCaseSensitive(in, "forward");
	forward_from(fw, v);
	if (fw) { /* delayed delivery */
		v->m.forward_not_before = str(fw, "not_before");
		const cJSON *dl = cJSON_GetObjectItemCaseSensitive(fw, "delay_ms");
		if (cJSON_IsNumber(dl)) {
			v->m.has_delay_ms = 1;
			v->m.delay_ms = (long long)dl->valuedouble;
		}
	}
	const cJSON *cb = cJSON_GetObjectItemCaseSensitive(in, "checkback");
	if (cb) {
		v->m.checkback_url = str(cb, "url");
		const cJSON *fa = cJSON_GetObjectItemCaseSensitive(cb, "first_after_ms");
		if (cJSON_IsNumber(fa)) {
			v->m.has_first_after_ms = 1;
			v->m.first_after_ms = (long long)fa->valuedouble;
		}
	}
	const cJSON *tr = cJSON_GetObjectItemCaseSensitive(in, "trace");
	if (tr) {
		v->m.traceparent = str(tr, "traceparent");
		v->m.tracestate = str(tr, "tracestate");
	}
	const cJSON *mb = cJSON_GetObjectItemCaseSensitive(in, "max_bytes");
	v->max_bytes = cJSON_IsNumber(mb) ? (size_t)mb->valuedouble : 0;
}

void v_input_free(v_input *v)
{
	free(v->biz_id);
	free(v->message_key);
	free(v->forward_key);
	free(v->payload);
	memset(v, 0, sizeof *v);
}
