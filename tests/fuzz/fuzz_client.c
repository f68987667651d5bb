/* fuzz_client.c: libFuzzer target for the client library's parsers and
 * checks of outside input, with the hub's parser as the oracle:
 *   - a JSON payload or an id the encoder accepts makes an envelope the hub
 *     accepts, with the same ids and the payload's compact text (so nothing
 *     a producer sends through the library is ever rejected);
 *   - a check-back request (query and three headers) the library parses
 *     has valid ids, and a reason is written when it refuses one. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "envelope.h"
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
	envelope_free(&env);
	free(out);
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
	switch (data[0] % 4) {
	case 0: m.payload_kind = TXHUB_PAYLOAD_JSON; hub_accepts(&m); break;
	case 1: m.payload_kind = TXHUB_PAYLOAD_STRING; hub_accepts(&m); break;
	case 2:
		m.payload_kind = TXHUB_PAYLOAD_STRING;
		m.message_key = s; /* up to the first NUL */
		hub_accepts(&m);
		break;
	default: {
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
