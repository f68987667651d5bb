/* Unit tests for txhub_checkback_signature (CONTRACT §5, v2) and txhub_version.
 * tests/vectors/signatures.json holds more vectors, shared with the client
 * libraries' tests. */
#include <criterion/criterion.h>
#include <string.h>

#include "txhub.h"

static int is_lower_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

/* Sign into a 65-byte buffer, asserting success. */
static void sign(const char *secret, long long ts, const char *biz, const char *key, char *out)
{
	cr_assert_eq(txhub_checkback_signature(secret, ts, biz, key, out, 65), 0);
}

Test(sign, known_vector)
{
	/* Expected value computed independently with:
	 *   printf '1700000000\nshop\norder-1' | openssl dgst -sha256 -hmac 'secret' */
	const char *expected = "f5c8aedf7d7bed9ab4cbf910fd6a33be4e67373fa0b4cb6e697290d49f3079cd";
	char out[65];
	memset(out, 'X', sizeof out);
	cr_assert_eq(txhub_checkback_signature("secret", 1700000000LL, "shop", "order-1", out, 65), 0);
	cr_assert_eq(out[64], '\0');
	cr_assert_str_eq(out, expected);
}

Test(sign, second_vector_short_fields)
{
	/* printf '0\nb\nk' | openssl dgst -sha256 -hmac 'k' */
	char out[100];
	cr_assert_eq(txhub_checkback_signature("k", 0, "b", "k", out, sizeof out), 0);
	cr_assert_str_eq(out, "958ddbf085eab933e9d081bd95d2300df68787e966ea245e19d9d6b9601e85f2");
}

Test(sign, longest_fields_and_long_secret)
{
	/* biz_id of 64 'b', message_key of 255 'k', timestamp -1, a secret longer
	 * than the HMAC block; expected value from:
	 *   B=$(printf 'b%.0s' $(seq 64)); K=$(printf 'k%.0s' $(seq 255))
	 *   printf '%s\n%s\n%s' -1 "$B" "$K" | openssl dgst -sha256 -hmac '<the secret below>' */
	const char *secret = "a much longer secret, over the sixty-four byte HMAC block size, "
	                     "to hash first";
	char biz[65], key[256], out[65];
	memset(biz, 'b', 64);
	biz[64] = '\0';
	memset(key, 'k', 255);
	key[255] = '\0';
	cr_assert_eq(txhub_checkback_signature(secret, -1, biz, key, out, sizeof out), 0);
	cr_assert_str_eq(out, "ab8890771657b4291e3efa46a8b5acf9044db514796e92add93b2390ba4ff08a");
}

Test(sign, lowercase_hex_and_input_sensitive)
{
	char a[65], b[65], c[65], d[65], e[65];
	sign("secret", 1700000000LL, "shop", "order-1", a);
	cr_assert_eq(strlen(a), 64);
	cr_assert(is_lower_hex(a, 64));
	sign("secret", 1700000001LL, "shop", "order-1", b);
	sign("Secret", 1700000000LL, "shop", "order-1", c);
	sign("secret", 1700000000LL, "shop", "order-2", d);
	cr_assert_str_neq(a, b);
	cr_assert_str_neq(a, c);
	cr_assert_str_neq(a, d);
	/* v2 signs "<ts>\n<biz_id>\n<message_key>" (CONTRACT §5): moving a dot
	 * between the two ids, which v1 could not tell apart, signs other text.
	 *   printf '1700000000\nshop.order\n1' | openssl dgst -sha256 -hmac secret
	 *   printf '1700000000\nshop\norder.1' | openssl dgst -sha256 -hmac secret */
	sign("secret", 1700000000LL, "shop.order", "1", d);
	sign("secret", 1700000000LL, "shop", "order.1", e);
	cr_assert_str_eq(d, "559e70f1e00fa6b445b0c67825e69d838316f4f29d81accf32254e9e13f8d1ba");
	cr_assert_str_eq(e, "45a77c46e03b02a944878c46abb4e39c37565e0367b95565abd7fb2fd11ede76");
}

Test(sign, bad_input)
{
	char out[65];
	cr_assert_eq(txhub_checkback_signature(NULL, 1, "b", "k", out, sizeof out), -1);
	cr_assert_eq(txhub_checkback_signature("s", 1, NULL, "k", out, sizeof out), -1);
	cr_assert_eq(txhub_checkback_signature("s", 1, "b", NULL, out, sizeof out), -1);
	cr_assert_eq(txhub_checkback_signature("s", 1, "b", "k", NULL, 65), -1);
	/* a newline inside an id would let one id's text pass for the other's */
	cr_assert_eq(txhub_checkback_signature("s", 1, "b\nk", "k", out, sizeof out), -1);
	cr_assert_eq(txhub_checkback_signature("s", 1, "b", "k\x7f", out, sizeof out), -1);
}

Test(sign, small_buffer)
{
	char out[65];
	memset(out, 'X', sizeof out);
	cr_assert_eq(txhub_checkback_signature("s", 1, "b", "k", out, 64), -1);
	cr_assert_eq(txhub_checkback_signature("s", 1, "b", "k", out, 0), -1);
	for (size_t i = 0; i < sizeof out; i++)
		cr_assert_eq(out[i], 'X', "byte %zu of a too-small buffer was written", i);
}

Test(sign, oversized_fields_rejected)
{
	char big[1024], out[65];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	cr_assert_eq(txhub_checkback_signature("s", 1, "b", big, out, sizeof out), -1);
	cr_assert_eq(txhub_checkback_signature("s", 1, big, "k", out, sizeof out), -1);
}

Test(sign, version)
{
	const char *v = txhub_version();
	cr_assert_not_null(v);
	cr_assert_gt(strlen(v), 0);
	cr_assert_str_eq(v, TXHUB_VERSION);
}
