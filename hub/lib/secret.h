/* secret.h: tokens and secrets compared in constant time, hashed with
 * SHA-256, drawn from OpenSSL's generator: what the console's logins and
 * sessions and the tenants' tokens (txhub.tenant_tokens) share. Pure but
 * for the random bytes; any thread. */
#ifndef TXHUB_SECRET_H
#define TXHUB_SECRET_H

#define SECRET_HEX 64     /* session ids and CSRF tokens: 32 random bytes, as hex */

/* 1 when given equals token. The time taken does not depend on where they
 * differ nor on their lengths (both are hashed first). */
int secret_token_equal(const char *given, const char *token);

/* The SHA-256 of a token's bytes: what secret_token_equal() compares, and
 * what txhub.tenant_tokens keeps of a tenant's token (never the token). */
void secret_token_hash(const char *token, unsigned char out[32]);

/* 1 when a and b are equal secrets of SECRET_HEX characters, in
 * constant time; 0 for anything else (NULL, another length). */
int secret_equal(const char *a, const char *b);

/* 32 random bytes from OpenSSL's generator as hex. Returns 0, or -1 when
 * it has none to give. */
int secret_random_hex(char out[SECRET_HEX + 1]);

#endif
