/* sign.c: the check-back request signature (docs/producers.md: Check-back, v2) and the
 * library version. The hub signs its requests with this function and the
 * client library verifies them with it, so the two can never disagree.
 * HMAC comes from OpenSSL's libcrypto rather than our own code: a
 * cryptographic primitive is the last thing to write twice. */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

#include "txhub.h"

#ifndef TXHUB_VERSION
#define TXHUB_VERSION "0.0.0"
#endif

const char *txhub_version(void) { return TXHUB_VERSION; }

/* An id fit for signing: at most max bytes and no control character, so
 * the newlines that separate the signed parts cannot come from an id. */
static int signable(const char *s, size_t max)
{
	size_t n = 0;
	for (; s[n]; n++) {
		unsigned char c = (unsigned char)s[n];
		if (n >= max || c < 0x20 || c == 0x7f)
			return 0;
	}
	return 1;
}

int txhub_checkback_signature(const char *secret, long long timestamp, const char *biz_id,
                              const char *message_key, char *out, size_t outsize)
{
	static const char hex[] = "0123456789abcdef";
	if (!secret || !biz_id || !message_key || !out || outsize < 65)
		return -1;
	if (!signable(biz_id, 64) || !signable(message_key, 255))
		return -1;
	/* "<timestamp>\n<biz_id>\n<message_key>": 20 + 1 + 64 + 1 + 255 bytes at most */
	char msg[24 + 64 + 1 + 255 + 1];
	int len = snprintf(msg, sizeof msg, "%lld\n%s\n%s", timestamp, biz_id, message_key);
	if (len < 0 || (size_t)len >= sizeof msg)
		return -1;
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;
	if (!HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)msg,
	          (size_t)len, mac, &maclen) || maclen != 32)
		return -1;
	for (unsigned i = 0; i < 32; i++) {
		out[2 * i] = hex[mac[i] >> 4];
		out[2 * i + 1] = hex[mac[i] & 15];
	}
	out[64] = '\0';
	return 0;
}
