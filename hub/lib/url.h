/* url.h: the rule every URL the hub calls must pass (check-back URLs in
 * envelopes and tenants' rules, alert.webhook): http or https, a host, at
 * most ENVELOPE_URL_MAX characters, no spaces, controls or raw non-ASCII.
 * Pure; libcurl's URL API parses them after this (checkback_proto.h). */
#ifndef TXHUB_URL_H
#define TXHUB_URL_H

/* Longest accepted check-back URL. */
#define ENVELOPE_URL_MAX 2048

int envelope_valid_url(const char *s);

#endif
