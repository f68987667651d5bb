/* fuzz_envelope.c: libFuzzer target for the envelope parser, the first
 * thing every control-topic record meets. Besides crashes and sanitizer
 * reports it checks what the rest of the hub relies on: an accepted
 * envelope holds bounded, valid UTF-8 ids without control characters (C0,
 * DEL or C1) and a known type; a rejection says why in printable text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "envelope.h"

static void check(int ok)
{
	if (!ok)
		abort(); /* libFuzzer reports the input */
}

static void check_id(const char *s, size_t max)
{
	size_t n = strlen(s);
	check(n >= 1 && n <= max);
	check(envelope_valid_utf8((const unsigned char *)s, n));
	for (size_t i = 0; i < n; i++) {
		check((unsigned char)s[i] >= 0x20 && s[i] != 0x7f);
		/* C1 controls U+0080..U+009F are 0xC2 0x80..0x9F in UTF-8 */
		check(!((unsigned char)s[i] == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] <= 0x9f));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	envelope env;
	char err[256];
	memset(err, 0, sizeof err);
	if (envelope_parse(data, size, 4096, &env, err, sizeof err) == 0) {
		check(size <= 4096);
		check(env.type == ENVELOPE_PREPARE || env.type == ENVELOPE_COMMIT ||
		      env.type == ENVELOPE_ROLLBACK);
		check_id(env.biz_id, ENVELOPE_BIZ_ID_MAX);
		check_id(env.message_key, ENVELOPE_MESSAGE_KEY_MAX);
		if (env.type == ENVELOPE_PREPARE)
			check(env.has_payload && env.forward_topic != NULL);
		if (env.forward_topic)
			check(txhubi_topic_valid(env.forward_topic, strlen(env.forward_topic)));
		if (env.checkback_url)
			check(envelope_valid_url(env.checkback_url));
		check(env.has_payload || env.payload_len == 0);
		envelope_free(&env);
	} else {
		size_t n = strlen(err);
		check(n > 0 && n < sizeof err);
		for (size_t i = 0; i < n; i++)
			check((unsigned char)err[i] >= 0x20 && (unsigned char)err[i] < 0x7f);
	}
	return 0;
}
