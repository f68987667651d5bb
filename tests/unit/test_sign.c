/* Unit tests for txhub_checkback_signature (docs/producers.md: Check-back, signature v2) and
 * txhub_version. */
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

/* Known answers for v2, HMAC-SHA256(secret, "<ts>\n<biz_id>\n<message_key>")
 * (docs/producers.md: Check-back), each computed independently of this code with
 *   printf '<ts>\n<biz_id>\n<message_key>' | openssl dgst -sha256 -hmac '<secret>'
 * (and checked again with Python's hmac module). */
typedef struct {
	const char *secret;
	long long ts;
	const char *biz_id, *message_key, *hex;
} vector;

static const vector vectors[] = {
	{"secret", 1700000000LL, "shop", "order-1",
	 "f5c8aedf7d7bed9ab4cbf910fd6a33be4e67373fa0b4cb6e697290d49f3079cd"},
	{"k", 0, "b", "k", "958ddbf085eab933e9d081bd95d2300df68787e966ea245e19d9d6b9601e85f2"},
	/* the worked example of docs/producers.md */
	{"example-secret", 1795000000LL, "shop", "order-1",
	 "9fd5cbe1b22b375c44b91bd44dd750cc6075b225f0f3f067eaa641a43c2ec942"},
	/* an integer biz_id is signed as its decimal text; UTF-8 bytes as they are */
	{"secret", 1700000000LL, "42", "order-1",
	 "9c0a05ebf8b3d95364802db16601eb48634e2154b024be738b10510c49bfe2d7"},
	{"secret", 1700000000LL, "shop", "s 2/\xc3\xa9",
	 "13f2c971b10b033a4b67e41ba05b6be7d0c317ed8f19f25656aaa28e242a6295"},
	/* the two messages v1 could not tell apart */
	{"secret", 1700000000LL, "a.b", "c",
	 "3c538b48e1d71abe5eeb2085c8f605072d2b773bb304bff5a334f1183d4ea8c7"},
	{"secret", 1700000000LL, "a", "b.c",
	 "caeb7f16444910a53f15d2514f20738513dce6e13bbf8c477eebdb082cd8348a"},
};

Test(sign, known_vectors_v2)
{
	for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
		const vector *v = &vectors[i];
		char out[65];
		memset(out, 'X', sizeof out);
		cr_assert_eq(txhub_checkback_signature(v->secret, v->ts, v->biz_id, v->message_key, out,
		                                       sizeof out), 0, "vector %zu", i);
		cr_assert_eq(out[64], '\0');
		cr_assert_str_eq(out, v->hex, "vector %zu (%s, %s)", i, v->biz_id, v->message_key);
	}
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
	char a[65], b[65], c[65], d[65];
	sign("secret", 1700000000LL, "shop", "order-1", a);
	cr_assert_eq(strlen(a), 64);
	cr_assert(is_lower_hex(a, 64));
	sign("secret", 1700000001LL, "shop", "order-1", b);
	sign("Secret", 1700000000LL, "shop", "order-1", c);
	sign("secret", 1700000000LL, "shop", "order-2", d);
	cr_assert_str_neq(a, b);
	cr_assert_str_neq(a, c);
	cr_assert_str_neq(a, d);
}

Test(sign, no_part_can_be_shifted_into_its_neighbour)
{
	/* v1 signed "<ts>.<biz_id>.<message_key>": moving a dot from one id to
	 * the other, or from the timestamp into the biz_id, signed the same text
	 * and let a captured request be replayed as another message */
	static const char *const pairs[][4] = {
		{"a.b", "c", "a", "b.c"},
		{"shop.order", "1", "shop", "order.1"},
		{"x", ".y", "x.", "y"},
		{"a b", "c", "a", "b c"},
	};
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
		char x[65], y[65];
		sign("secret", 1700000000LL, pairs[i][0], pairs[i][1], x);
		sign("secret", 1700000000LL, pairs[i][2], pairs[i][3], y);
		cr_assert_str_neq(x, y, "%s + %s signs like %s + %s", pairs[i][0], pairs[i][1],
		                  pairs[i][2], pairs[i][3]);
	}
	char t1[65], t2[65];
	sign("secret", 17, "1.shop", "k", t1); /* v1: "17.1.shop.k" both times */
	sign("secret", 171, "shop", "k", t2);
	cr_assert_str_neq(t1, t2);
}

Test(sign, an_id_with_a_newline_is_refused)
{
	/* no valid id holds one; signing it would make v2 ambiguous again */
	char out[65];
	cr_assert_eq(txhub_checkback_signature("s", 1, "a\nb", "c", out, sizeof out), -1);
	cr_assert_eq(txhub_checkback_signature("s", 1, "a", "b\nc", out, sizeof out), -1);
}

Test(sign, bad_input)
{
	char out[65];
	cr_assert_eq(txhub_checkback_signature(NULL, 1, "b", "k", out, sizeof out), -1);
	cr_assert_eq(txhub_checkback_signature("s", 1, NULL, "k", out, sizeof out), -1);
	cr_assert_eq(txhub_checkback_signature("s", 1, "b", NULL, out, sizeof out), -1);
	cr_assert_eq(txhub_checkback_signature("s", 1, "b", "k", NULL, 65), -1);
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
