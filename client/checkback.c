/* checkback.c: the producer's side of a check-back (docs/producers.md: Check-back): read the
 * request, verify its signature, write the answer. No I/O and no
 * allocation: the caller's HTTP server does the talking. */
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define INVALID(...) txhubi_fail(TXHUB_ERR_INVALID, errstr, errsz, __VA_ARGS__)

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Decode s[0..len) (percent-escapes, '+' as a space) into out (outsz bytes
 * with room for a NUL). Returns the decoded length, or -1 when malformed or
 * too long. */
static long decode(const char *s, size_t len, char *out, size_t outsz)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (c == '+') {
			c = ' ';
		} else if (c == '%') {
			if (i + 2 >= len)
				return -1;
			int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
			if (hi < 0 || lo < 0)
				return -1;
			c = (char)(hi * 16 + lo);
			i += 2;
		}
		if (o + 1 >= outsz)
			return -1;
		out[o++] = c;
	}
	out[o] = '\0';
	return (long)o;
}

/* One of the two ids: the parameter under either of its names. `seen`
 * tracks whether a value was stored, so a second, different one is an
 * error (which one would the caller mean?). */
typedef struct {
	const char *name, *alias, *what;
	char *out;
	size_t max;
	long len;
	int seen;
} param;

static txhub_status take(param *p, const char *v, size_t vlen, char *errstr, size_t errsz)
{
	char buf[256 + 1];
	long n = decode(v, vlen, buf, p->max + 2 < sizeof buf ? p->max + 2 : sizeof buf);
	if (n < 0)
		return INVALID("query parameter %s is malformed or longer than %zu bytes", p->what, p->max);
	if (p->seen && (n != p->len || memcmp(buf, p->out, (size_t)n) != 0))
		return INVALID("query parameter %s is given twice with different values", p->what);
	txhub_status st = txhubi_check_id(p->what, buf, (size_t)n, p->max, errstr, errsz);
	if (st != TXHUB_OK)
		return st;
	memcpy(p->out, buf, (size_t)n + 1);
	p->len = n;
	p->seen = 1;
	return TXHUB_OK;
}

static txhub_status parse_query(const char *q, param *ps, size_t np, char *errstr, size_t errsz)
{
	while (q && *q) {
		size_t plen = strcspn(q, "&");
		const char *eq = memchr(q, '=', plen);
		size_t nlen = eq ? (size_t)(eq - q) : plen;
		for (size_t i = 0; eq && i < np; i++) {
			int match = (strlen(ps[i].name) == nlen && memcmp(q, ps[i].name, nlen) == 0) ||
			            (strlen(ps[i].alias) == nlen && memcmp(q, ps[i].alias, nlen) == 0);
			if (match) {
				txhub_status st = take(&ps[i], eq + 1, plen - nlen - 1, errstr, errsz);
				if (st != TXHUB_OK)
					return st;
			}
		}
		q += plen;
		if (*q == '&')
			q++;
	}
	return TXHUB_OK;
}

/* A decimal header value of at most maxdigits digits, >= min. */
static int header_number(const char *s, int maxdigits, long long min, long long *out)
{
	long long v = 0;
	int n = 0;
	for (; s[n]; n++) {
		if (s[n] < '0' || s[n] > '9' || n >= maxdigits)
			return -1;
		v = v * 10 + (s[n] - '0');
	}
	if (n == 0 || v < min)
		return -1;
	*out = v;
	return 0;
}

static txhub_status parse_headers(const char *attempt, const char *timestamp,
                                  const char *signature, txhub_checkback_request *req,
                                  char *errstr, size_t errsz)
{
	long long v;
	if (attempt) {
		if (header_number(attempt, 9, 1, &v) != 0)
			return INVALID("X-Txhub-Attempt is not a positive integer");
		req->attempt = (long)v;
	}
	if (timestamp) {
		if (header_number(timestamp, 15, 0, &v) != 0)
			return INVALID("X-Txhub-Timestamp is not a Unix time in seconds");
		req->timestamp = v;
	}
	if (signature) {
		size_t len = strlen(signature);
		if (len != 67 || strncmp(signature, "v2=", 3) != 0 ||
		    strspn(signature + 3, "0123456789abcdef") != 64)
			return INVALID("X-Txhub-Signature is not \"v2=\" and 64 lowercase hex digits");
		memcpy(req->signature, signature + 3, 65);
	}
	if ((timestamp != NULL) != (signature != NULL))
		return INVALID("X-Txhub-Timestamp and X-Txhub-Signature come together or not at all");
	return TXHUB_OK;
}

txhub_status txhub_checkback_parse(const char *query, const char *attempt,
                                   const char *timestamp, const char *signature,
                                   txhub_checkback_request *req, char *errstr, size_t errsz)
{
	if (!req)
		return INVALID("no request struct");
	memset(req, 0, sizeof *req);
	param ps[] = {
		{"biz_id", "bizID", "biz_id", req->biz_id, TXHUB_BIZ_ID_MAX, 0, 0},
		{"message_key", "messageKey", "message_key", req->message_key, TXHUB_MESSAGE_KEY_MAX, 0, 0},
	};
	txhub_status st = parse_query(query, ps, 2, errstr, errsz);
	if (st == TXHUB_OK && (!ps[0].seen || !ps[1].seen))
		st = INVALID("not a check-back: the query has no %s", ps[0].seen ? "message_key" : "biz_id");
	if (st == TXHUB_OK)
		st = parse_headers(attempt, timestamp, signature, req, errstr, errsz);
	if (st != TXHUB_OK)
		memset(req, 0, sizeof *req);
	return st;
}

txhub_status txhub_checkback_verify(const txhub_checkback_request *req, const char *secret,
                                    long long now, long window_s, char *errstr, size_t errsz)
{
	if (!req || !secret || !*secret)
		return INVALID("a request and a non-empty secret are required");
	if (!req->signature[0])
		return txhubi_fail(TXHUB_ERR_UNAUTHORIZED, errstr, errsz, "the request is not signed");
	if (!now)
		now = (long long)time(NULL);
	if (window_s <= 0)
		window_s = TXHUB_CHECKBACK_WINDOW_DEFAULT;
	long long skew = now - req->timestamp;
	if (skew > window_s || skew < -window_s)
		return txhubi_fail(TXHUB_ERR_UNAUTHORIZED, errstr, errsz,
		               "the timestamp is %lld s from now, outside the %ld s window", skew,
		               window_s);
	char want[65];
	if (txhub_checkback_signature(secret, req->timestamp, req->biz_id, req->message_key, want,
	                              sizeof want) != 0)
		return INVALID("cannot compute the signature for these ids");
	/* constant time: how much of a guess matched must not show in timing */
	if (CRYPTO_memcmp(want, req->signature, 64) != 0)
		return txhubi_fail(TXHUB_ERR_UNAUTHORIZED, errstr, errsz, "wrong signature");
	return TXHUB_OK;
}

const char *txhub_checkback_answer(txhub_outcome outcome)
{
	switch (outcome) {
	case TXHUB_COMMITTED: return "{\"status\":\"committed\"}";
	case TXHUB_ROLLED_BACK: return "{\"status\":\"rolled_back\"}";
	case TXHUB_UNKNOWN: return "{\"status\":\"unknown\"}";
	}
	return NULL;
}

/* {"error":"<reason>"}: the reason is our own ASCII text, but quotes and
 * backslashes are dropped so the body stays valid JSON whatever it says. */
static void error_body(txhub_checkback_response *resp, int status, const char *reason)
{
	char clean[120];
	size_t o = 0;
	for (const char *p = reason; *p && o + 1 < sizeof clean; p++)
		if (*p != '"' && *p != '\\' && (unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f)
			clean[o++] = *p;
	clean[o] = '\0';
	resp->http_status = status;
	snprintf(resp->body, sizeof resp->body, "{\"error\":\"%s\"}", clean);
}

void txhub_checkback_handle(const txhub_checkback_config *cfg, const char *query,
                            const char *attempt, const char *timestamp,
                            const char *signature, txhub_decide_cb *decide, void *opaque,
                            txhub_checkback_response *resp)
{
	txhub_checkback_request req;
	char why[120];
	if (!resp)
		return; /* nowhere to put the answer: nothing to do */
	resp->http_status = 0;
	txhub_outcome outcome = TXHUB_UNKNOWN;
	if (txhub_checkback_parse(query, attempt, timestamp, signature, &req, why, sizeof why) !=
	    TXHUB_OK)
		error_body(resp, 400, why);
	else if (cfg && cfg->secret && *cfg->secret &&
	         txhub_checkback_verify(&req, cfg->secret, cfg->now, cfg->window_s, why,
	                                sizeof why) != TXHUB_OK)
		error_body(resp, 401, why);
	else if (!decide || decide(&req, &outcome, opaque) != 0 || !txhub_checkback_answer(outcome))
		error_body(resp, 503, "the outcome cannot be told now; ask again later");
	else
		resp->http_status = 200;
	if (resp->http_status != 200)
		return;
	snprintf(resp->body, sizeof resp->body, "%s", txhub_checkback_answer(outcome));
}
