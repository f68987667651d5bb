/* secret.c: see secret.h. */
#include "secret.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>

void secret_token_hash(const char *s, unsigned char out[32])
{
	unsigned int len = 0;
	if (EVP_Digest(s, strlen(s), out, &len, EVP_sha256(), NULL) != 1)
		memset(out, 0, 32); /* cannot happen; a zero digest then matches no real token */
}

int secret_token_equal(const char *given, const char *token)
{
	unsigned char a[32], b[32];
	if (!given || !token || !*token)
		return 0;
	secret_token_hash(given, a);
	secret_token_hash(token, b);
	return CRYPTO_memcmp(a, b, sizeof a) == 0;
}

int secret_equal(const char *a, const char *b)
{
	if (!a || !b || strlen(a) != SECRET_HEX || strlen(b) != SECRET_HEX)
		return 0;
	return CRYPTO_memcmp(a, b, SECRET_HEX) == 0;
}

int secret_random_hex(char out[SECRET_HEX + 1])
{
	unsigned char raw[SECRET_HEX / 2];
	if (RAND_bytes(raw, sizeof raw) != 1)
		return -1;
	for (size_t i = 0; i < sizeof raw; i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	return 0;
}
