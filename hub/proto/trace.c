/* trace.c: see trace.h. */
#include "trace.h"

#include <string.h>

static int lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* Whether s[0..n) is lowercase hex, and (nonzero) not all zeros. */
static int hex_field(const char *s, size_t n, int nonzero)
{
	int any = 0;
	for (size_t i = 0; i < n; i++) {
		if (!lower_hex(s[i]))
			return 0;
		any |= s[i] != '0';
	}
	return !nonzero || any;
}

const char *txhubi_trace_check_parent(const char *s)
{
	size_t len = strlen(s);
	if (len < 55)
		return "traceparent is shorter than 55 characters";
	if (len > TRACE_PARENT_MAX)
		return "traceparent is longer than 512 characters";
	if (!hex_field(s, 2, 0))
		return "traceparent version is not two lowercase hex digits";
	if (s[0] == 'f' && s[1] == 'f')
		return "traceparent version ff is invalid";
	if (s[2] != '-' || s[35] != '-' || s[52] != '-')
		return "traceparent fields are not separated by '-'";
	if (!hex_field(s + 3, TRACE_ID_LEN, 0))
		return "traceparent trace-id is not 32 lowercase hex digits";
	if (!hex_field(s + 3, TRACE_ID_LEN, 1))
		return "traceparent trace-id is all zeros";
	if (!hex_field(s + 36, 16, 0))
		return "traceparent parent-id is not 16 lowercase hex digits";
	if (!hex_field(s + 36, 16, 1))
		return "traceparent parent-id is all zeros";
	if (!hex_field(s + 53, 2, 0))
		return "traceparent trace-flags are not two lowercase hex digits";
	if (s[0] == '0' && s[1] == '0') {
		if (len != 55)
			return "traceparent of version 00 is not exactly 55 characters";
		return NULL;
	}
	/* a later version: what follows the flags is the future's, but it
	 * goes into HTTP and Kafka headers as it is, so it must be a header
	 * value that cannot end the header line or start another: printable
	 * ASCII, and not ending with a space (RFC 9110 field-value) */
	if (len > 55 && s[55] != '-')
		return "traceparent goes on after its flags without a '-'";
	for (size_t i = 55; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return "traceparent has a byte that is not printable ASCII (0x20-0x7e)";
	if (s[len - 1] == ' ')
		return "traceparent ends with a space";
	return NULL;
}

static int key_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
	       c == '*' || c == '/';
}

/* A member key, k[0..n): simple-key, or tenant-id@system-id. */
static int valid_key(const char *k, size_t n)
{
	const char *at = memchr(k, '@', n);
	if (!at) {
		if (n < 1 || n > 256 || !(k[0] >= 'a' && k[0] <= 'z'))
			return 0;
		for (size_t i = 1; i < n; i++)
			if (!key_char(k[i]))
				return 0;
		return 1;
	}
	size_t tn = (size_t)(at - k), sn = n - tn - 1;
	if (tn < 1 || tn > 241 || sn < 1 || sn > 14)
		return 0;
	if (!((k[0] >= 'a' && k[0] <= 'z') || (k[0] >= '0' && k[0] <= '9')))
		return 0;
	for (size_t i = 1; i < tn; i++)
		if (!key_char(k[i]))
			return 0;
	if (!(at[1] >= 'a' && at[1] <= 'z'))
		return 0;
	for (size_t i = 2; i <= sn; i++)
		if (!key_char(at[i]))
			return 0;
	return 1;
}

/* A member value, v[0..n): 1..256 of 0x20..0x7e except ',' and '=', not
 * ending with a space. */
static int valid_value(const char *v, size_t n)
{
	if (n < 1 || n > 256 || v[n - 1] == ' ')
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e || v[i] == ',' ||
		    v[i] == '=')
			return 0;
	return 1;
}

const char *txhubi_trace_check_state(const char *s)
{
	size_t len = strlen(s);
	if (len > TRACE_STATE_MAX)
		return "tracestate is longer than 512 characters";
	struct {
		const char *k;
		size_t n;
	} keys[TRACE_STATE_MEMBERS_MAX];
	size_t nkeys = 0;
	for (const char *p = s;;) {
		const char *end = strchr(p, ',');
		if (!end)
			end = s + len;
		const char *a = p, *b = end;
		while (a < b && (*a == ' ' || *a == '\t'))
			a++;
		while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
			b--;
		if (a < b) { /* an empty member is allowed */
			const char *eq = memchr(a, '=', (size_t)(b - a));
			if (!eq || !valid_key(a, (size_t)(eq - a)))
				return "tracestate has a member whose key is malformed";
			if (!valid_value(eq + 1, (size_t)(b - eq - 1)))
				return "tracestate has a member whose value is malformed";
			if (nkeys == TRACE_STATE_MEMBERS_MAX)
				return "tracestate has more than 32 members";
			for (size_t i = 0; i < nkeys; i++)
				if (keys[i].n == (size_t)(eq - a) && memcmp(keys[i].k, a, keys[i].n) == 0)
					return "tracestate names a key twice";
			keys[nkeys].k = a;
			keys[nkeys++].n = (size_t)(eq - a);
		}
		if (!*end)
			break;
		p = end + 1;
	}
	return NULL;
}

void txhubi_trace_id_of(const char *traceparent, char *out)
{
	out[0] = '\0';
	if (txhubi_trace_check_parent(traceparent))
		return;
	memcpy(out, traceparent + 3, TRACE_ID_LEN);
	out[TRACE_ID_LEN] = '\0';
}
