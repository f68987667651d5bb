/* txhub.h: the public interface for programs that talk to txhub.
 *
 * A producer needs two things from us: to write envelopes (CONTRACT §2) and,
 * when it answers check-backs, to verify their signature (CONTRACT §5).
 * Everything else about txhub is internal. Link with the txhub library. */
#ifndef TXHUB_H
#define TXHUB_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library version, e.g. "0.1.0". */
const char *txhub_version(void);

/* The check-back signature, version 2 (CONTRACT §5): lowercase hex
 * HMAC-SHA256(secret, "<timestamp>\n<biz_id>\n<message_key>"), with the
 * timestamp in decimal and "\n" one newline byte, written to out as 64
 * characters and a NUL (out must hold at least 65 bytes). The request's
 * header is "X-Txhub-Signature: v2=" followed by these 64 characters; compare
 * it in constant time. Returns 0, or -1 on bad input: a NULL argument, a
 * small buffer, an id holding a newline (no valid id does), or ids longer
 * than an envelope allows. Thread-safe; borrows every argument only for the
 * call. */
int txhub_checkback_signature(const char *secret, long long timestamp, const char *biz_id,
                              const char *message_key, char *out, size_t outsize);

#ifdef __cplusplus
}
#endif

#endif
