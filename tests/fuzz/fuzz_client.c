/* fuzz_client.c: libFuzzer target for the client library's parsers and
 * checks of outside input, with the hub's parser as the oracle:
 *   - a JSON payload or an id the encoder accepts makes an envelope the hub
 *     accepts, with the same ids and the payload's compact text (so nothing
 *     a producer sends through the library is ever rejected);
 *   - a JSON payload the hub accepts (and forwards as written) is one the
 *     library's validator accepts too, unless nested deeper than the
 *     library allows: the hub lets nothing through that strict JSON
 *     parsers of the forward topic's consumers would refuse;
 *   - a check-back request (query and three headers) the library parses
 *     has valid ids, and a reason is written when it refuses one. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "envelope.h"
#include "internal.h"
#include "txhub.h"

static void check(int ok)
{
	if (!ok)
		abort();
}

static void hub_accepts(const txhub_message *m)
{
	char *out = NULL, err[256];
	size_t len = 0;
	if (txhub_envelope_encode(TXHUB_PREPARE, m, 0, &out, &len, err, sizeof err) != TXHUB_OK) {
		check(out == NULL && err[0] != '\0');
		return;
	}
	envelope env;
	check(envelope_parse(out, len, 1048576, &env, err, sizeof err) == 0);
	check(strcmp(env.biz_id, m->biz_id) == 0 && strcmp(env.message_key, m->message_key) == 0);
	if (m->payload_kind == TXHUB_PAYLOAD_STRING)
		check(env.payload_len == m->payload_len && memcmp(env.payload, m->payload, m->payload_len) == 0);
	if (m->payload_kind == TXHUB_PAYLOAD_JSON) { /* a JSON string too: its text, quotes and all */
		char *compact = malloc(m->payload_len + 1);
		size_t n = txhubi_json_minify(m->payload, m->payload_len, compact);
		check(env.payload_len == n && memcmp(env.payload, compact, n) == 0);
		free(compact);
	}
	envelope_free(&env);
	free(out);
}

/* Put text in an envelope as its payload; when the hub takes it as a JSON
 * payload (not a string), the library must find that payload valid. */
static void library_accepts(const char *text, size_t len)
{
	static const char head[] = "{\"v\":1,\"type\":\"prepare\",\"biz_id\":\"b\","
	                           "\"message_key\":\"k\",\"forward\":{\"topic\":\"t\"},\"payload\":";
	size_t n = sizeof head - 1;
	char *doc = malloc(n + len + 1);
	memcpy(doc, head, n);
	memcpy(doc + n, text, len);
	doc[n + len] = '}';
	envelope env;
	char err[256];
	size_t i = 0;
	while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
		i++;
	if (envelope_parse(doc, n + len + 1, 1048576, &env, err, sizeof err) == 0) {
		if (i < len && text[i] != '"') {
			/* (the one rule the library keeps stricter: nesting depth) */
			const char *why = txhubi_json_check((const char *)env.payload, env.payload_len);
			check(why == NULL || strcmp(why, "JSON nested too deeply") == 0);
		}
		envelope_free(&env);
	}
	free(doc);
}

/* Split data at '\n' into up to n NUL-terminated parts (NULL when absent). */
static void split(char *s, char **parts, int n)
{
	for (int i = 0; i < n; i++) {
		parts[i] = s;
		char *nl = s ? strchr(s, '\n') : NULL;
		if (nl)
			*nl = '\0';
		s = nl ? nl + 1 : NULL;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536)
		return 0;
	char *s = malloc(size);
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	txhub_message m = {.biz_id = "b", .message_key = "k", .payload = s,
	                   .payload_len = size - 1, .forward_topic = "t"};
	switch (data[0] % 5) {
	case 0: m.payload_kind = TXHUB_PAYLOAD_JSON; hub_accepts(&m); break;
	case 1: m.payload_kind = TXHUB_PAYLOAD_STRING; hub_accepts(&m); break;
	case 2:
		m.payload_kind = TXHUB_PAYLOAD_STRING;
		m.message_key = s; /* up to the first NUL */
		hub_accepts(&m);
		break;
	case 4: library_accepts(s, size - 1); break;
	case 3: {
		char *parts[4], err[200] = "";
		split(s, parts, 4);
		txhub_checkback_request req;
		if (txhub_checkback_parse(parts[0], parts[1], parts[2], parts[3], &req, err, sizeof err) == TXHUB_OK)
			check(txhub_valid_id(req.biz_id, strlen(req.biz_id), 64) &&
			      txhub_valid_id(req.message_key, strlen(req.message_key), 255));
		else
			check(err[0] != '\0');
	}
	}
	free(s);
	return 0;
}
