/* txhub.h: the public interface for programs that talk to txhub, and the
 * umbrella header of the client library (libtxhub, pkg-config "txhub").
 *
 * A producer writes envelopes to the control topic (txhub/producer.h,
 * docs/producers.md: Envelope fields) and answers check-backs
 * (txhub/checkback.h, docs/producers.md: Check-back); a downstream consumer
 * deduplicates forwarded records (txhub/dedup.h, docs/consumers.md: What gets
 * forwarded). Include this header, or only the part you use. Everything else
 * about txhub is internal. */
#ifndef TXHUB_H
#define TXHUB_H

#include <stddef.h>

#include "txhub/common.h"
#include "txhub/envelope.h"
#include "txhub/producer.h"
#include "txhub/checkback.h"
#include "txhub/dedup.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library version, e.g. "0.3.0": a static string, never freed. Any
 * thread. */
const char *txhub_version(void);

/* The check-back signature, v2: lowercase hex HMAC-SHA256(secret,
 * "<timestamp>\n<biz_id>\n<message_key>"), written to out as 64 characters
 * and a NUL (out must hold at least 65 bytes); the header value is "v2="
 * followed by it. Returns 0, or -1 on bad input (NULL, out too small, an id
 * longer than 64 / 255 bytes or holding a control character); out is then
 * not written. Pure; any thread. */
int txhub_checkback_signature(const char *secret, long long timestamp, const char *biz_id,
                              const char *message_key, char *out, size_t outsize);

#ifdef __cplusplus
}
#endif

#endif
