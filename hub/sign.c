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
	if (!secret || !biz_id || !message_key || !out || outsize < 65 || strchr(biz_id, '\n') ||
	    strchr(message_key, '\n'))
		return -1;
	/* v2 joins the parts with '\n', which no id holds (the envelope refuses
	 * control characters, and so do we above), so no part can be shifted
	 * into its neighbour; v1's '.' could: "a.b" + "c" and "a" + "b.c"
	 * signed the same bytes */
	unsigned char msg[32 + 64 + 1 + 255 + 1];
	int len = snprintf((char *)msg, sizeof msg, "%lld\n%s\n%s", timestamp, biz_id, message_key);
	if (len < 0 || (size_t)len >= sizeof msg)
		return -1;
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;
	if (!HMAC(EVP_sha256(), secret, (int)strlen(secret), msg, (size_t)len, mac, &maclen) ||
	    maclen != 32)
		return -1;
	for (unsigned i = 0; i < 32; i++) {
		out[2 * i] = hex[mac[i] >> 4];
		out[2 * i + 1] = hex[mac[i] & 15];
	}
	out[64] = '\0';
	return 0;
}
