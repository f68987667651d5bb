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

/* The check-back signature: lowercase hex HMAC-SHA256(secret,
 * "<timestamp>.<biz_id>.<message_key>"), written to out as 64 characters and
 * a NUL (out must hold at least 65 bytes). Returns 0, or -1 on bad input. */
int txhub_checkback_signature(const char *secret, long long timestamp, const char *biz_id,
                              const char *message_key, char *out, size_t outsize);

#ifdef __cplusplus
}
#endif

#endif
