/* tenant_rules.h: the rules of tenants (docs/tenants.md: Sharing one hub
 * between teams), pure: no I/O, no database, no Kafka. What `txhub tenant
 * add|set` checks before it writes a row, what a hub checks again when it loads
 * the rows (tenants.h), and the questions intake will ask of each record: which
 * tenant owns the topic it arrived on, whether that tenant owns its biz_id, may
 * write its forward topic, may be called back at its URL, and how large its
 * envelope may be.
 *
 * Rule entries, as stored in txhub.tenants (text arrays):
 *   control_topics   topic names, or one pattern: a POSIX extended regular
 *                    expression beginning with '^' (as librdkafka reads a
 *                    subscription pattern); names and a pattern do not mix
 *   biz_ids          biz_ids, or prefixes written "abc*" (only a trailing
 *                    '*'; "*" alone: every biz_id)
 *   forward_topics   topic names, or prefixes written "abc*" (at least one
 *                    character, not "_", nothing of Kafka's "__" topics)
 *   checkback_allow  entries as in checkback.allow (docs/producers.md: Check-back), each
 *                    alone; none: the tenant may name no check-back URL
 *
 * Between tenants (tenant_rule_overlap()): biz_ids are disjoint (exact vs
 * exact, prefix vs exact, prefix vs prefix), control topics are disjoint
 * (name vs name; name vs pattern: the pattern matches the name; pattern vs
 * pattern: disjoint only when each pattern starts with a literal prefix,
 * "^team-a\\." say, and neither prefix starts the other: two regular
 * expressions are not compared otherwise), and no tenant forwards into a
 * control topic (its own or another's), judged the same way.
 *
 * Strings passed in are copied; a compiled rule owns its memory. All
 * functions may be called from any thread; a tenant_rules snapshot is
 * immutable once built, so threads may read one at once. */
#ifndef TXHUB_TENANT_RULES_H
#define TXHUB_TENANT_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "checkback_proto.h"

#define TENANT_NAME_MAX 63        /* bytes of a tenant's name */
#define TENANT_LIST_MAX 1000      /* entries of one list */
#define TENANT_PATTERN_MAX 1000   /* bytes of a control-topic pattern */
#define TENANT_ENVELOPE_MAX (100 * 1024 * 1024) /* largest cap: envelope.max_bytes's */

/* The parts of a tenant, by their column in txhub.tenants. */
typedef enum {
	TENANT_F_NAME,
	TENANT_F_CONTROL_TOPICS,
	TENANT_F_BIZ_IDS,
	TENANT_F_FORWARD_TOPICS,
	TENANT_F_CHECKBACK_ALLOW,
	TENANT_F_MAX_ENVELOPE_BYTES,
} tenant_field;

/* The column's name, e.g. "biz_ids". */
const char *tenant_field_column(tenant_field f);

/* A tenant as written (a command's arguments, a row read back). Borrowed:
 * nothing here is freed by this module. */
typedef struct {
	const char *name;
	const char *const *control_topics;
	size_t ncontrol;
	const char *const *biz_ids;
	size_t nbiz;
	const char *const *forward_topics;
	size_t nforward;
	const char *const *checkback_allow;
	size_t nallow;
	int64_t max_envelope_bytes; /* 0: no cap of its own */
	int enabled;
} tenant_def;

/* A name or a prefix ("abc*" without its '*'). */
typedef struct {
	char *text;
	size_t len;
	int prefix;
} tenant_match;

struct tenant_regex; /* regex_t, kept out of this header */

/* A tenant compiled for matching. */
typedef struct {
	char *name;
	char **topics;             /* control topic names (none with a pattern) */
	size_t ntopics;
	char *pattern;             /* the control-topic pattern, or NULL */
	char *pattern_prefix;      /* what every topic it matches starts with ("" unknown) */
	struct tenant_regex *re;   /* pattern, compiled */
	tenant_match *biz;
	size_t nbiz;
	tenant_match *fwd;
	size_t nfwd;
	checkback_url *allow;      /* parsed entries */
	size_t nallow;
	int64_t max_envelope_bytes; /* 0: none */
	int enabled;
} tenant_rule;

/* A tenant's name: 1..TENANT_NAME_MAX of a-z 0-9 . _ -, beginning with a
 * letter or digit (it is a label value and a part of URLs). Returns 0, or -1
 * with the reason in err. */
int tenant_name_check(const char *name, char *err, size_t errsz);

/* Check every entry of d and compile it into *out (zeroed first; free it
 * with tenant_rule_clear(), also after a failure). Returns 0, or -1 with
 * the field at fault in *bad and the reason, naming the entry, in err. */
int tenant_rule_compile(const tenant_def *d, tenant_rule *out, tenant_field *bad, char *err,
                        size_t errsz);
void tenant_rule_clear(tenant_rule *t);

/* One list alone (control topics, biz ids, forward topics or check-back
 * allow entries), as tenant_rule_compile() checks it: for a change that
 * gives some lists only. Rules between lists (no forwarding into one's own
 * control topics) need the whole tenant. Returns 0, or -1 with the reason
 * in err. */
int tenant_field_check(tenant_field f, const char *const *list, size_t n, char *err,
                       size_t errsz);

/* Whether two tenants' rules collide (see the top of this file): 1 with
 * the field of a at fault in *field and what collides in what (a's entry,
 * then b's), else 0. */
int tenant_rule_overlap(const tenant_rule *a, const tenant_rule *b, tenant_field *field,
                        char *what, size_t whatsz);

/* ---- one tenant's questions ---- */

/* The topic is one of t's control topics (a name, or its pattern matches). */
int tenant_owns_topic(const tenant_rule *t, const char *topic);
/* t owns biz_id (an entry equals it, or a prefix starts it). */
int tenant_owns_biz(const tenant_rule *t, const char *biz_id);
/* topic is in t's forward list (and not one of Kafka's "__" topics). */
int tenant_may_forward(const tenant_rule *t, const char *topic);
/* u (parsed, checkback_proto.h) is inside t's check-back allow-list, under
 * checkback.allow's rules; an empty list holds nothing. When not, why says
 * so. */
int tenant_may_call(const tenant_rule *t, const checkback_url *u, char *why, size_t whysz);
/* The same for a URL as text (parsed with checkback_url_parse()). */
int tenant_may_call_url(const tenant_rule *t, const char *url, char *why, size_t whysz);
/* An envelope of this many bytes is within t's cap (or t has none). */
int tenant_envelope_fits(const tenant_rule *t, size_t bytes);

/* ---- a snapshot of the enabled tenants ---- */

typedef struct tenant_rules tenant_rules;

/* Compile the enabled tenants of defs[0..n) (disabled ones are left out)
 * and check them against each other. Returns the snapshot, or NULL with
 * the reason in err: a row that does not pass names the tenant and its
 * column ("tenant \"a\": biz_ids: ..."), a collision both tenants. */
tenant_rules *tenant_rules_build(const tenant_def *defs, size_t n, char *err, size_t errsz);
void tenant_rules_free(tenant_rules *r);

size_t tenant_rules_count(const tenant_rules *r);
/* The i-th tenant (by name), i < tenant_rules_count(). */
const tenant_rule *tenant_rules_at(const tenant_rules *r, size_t i);
/* The tenant of that name, or NULL. */
const tenant_rule *tenant_rules_by_name(const tenant_rules *r, const char *name);
/* The tenant whose control topic this is, or NULL: names by binary search,
 * then patterns (their literal prefix first, then the expression). */
const tenant_rule *tenant_rules_by_topic(const tenant_rules *r, const char *topic);
/* The tenant that owns biz_id, or NULL. */
const tenant_rule *tenant_rules_by_biz(const tenant_rules *r, const char *biz_id);
/* t may write topic: it is in t's forward list and is no tenant's control
 * topic. */
int tenant_rules_may_forward(const tenant_rules *r, const tenant_rule *t, const char *topic);

#endif
