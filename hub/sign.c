/* sign.c: the check-back request signature (CONTRACT §5) and the library
 * version: the part of txhub that producers link against (include/txhub.h).
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

int txhub_checkback_signature(const char *secret, long long timestamp, const char *biz_id,
                              const char *message_key, char *out, size_t outsize)
{
	static const char hex[] = "0123456789abcdef";
	if (!secret || !biz_id || !message_key || !out || outsize < 65)
		return -1;
	char prefix[32];
	int pl = snprintf(prefix, sizeof prefix, "%lld.", timestamp);
	size_t bl = strlen(biz_id), ml = strlen(message_key);
	size_t len = (size_t)pl + bl + 1 + ml;
	unsigned char msg[32 + 64 + 1 + 256 + 1];
	if (len >= sizeof msg)
		return -1;
	memcpy(msg, prefix, (size_t)pl);
	memcpy(msg + pl, biz_id, bl);
	msg[(size_t)pl + bl] = '.';
	memcpy(msg + pl + bl + 1, message_key, ml);
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;
	if (!HMAC(EVP_sha256(), secret, (int)strlen(secret), msg, len, mac, &maclen) || maclen != 32)
		return -1;
	for (unsigned i = 0; i < 32; i++) {
		out[2 * i] = hex[mac[i] >> 4];
		out[2 * i + 1] = hex[mac[i] & 15];
	}
	out[64] = '\0';
	return 0;
}
