/* tenant_rules.c: see tenant_rules.h. Every entry is checked and compiled
 * once, when a rule is made: patterns into regex_t (with the literal prefix
 * that rules most topics out before the expression runs), allow entries
 * into parsed URLs, so that matching a record costs string compares. */
#include "tenant_rules.h"

#include <ctype.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envelope.h"
#include "log.h"

struct tenant_regex {
	regex_t re;
};

static const char *const columns[] = {
	[TENANT_F_NAME] = "name",
	[TENANT_F_CONTROL_TOPICS] = "control_topics",
	[TENANT_F_BIZ_IDS] = "biz_ids",
	[TENANT_F_FORWARD_TOPICS] = "forward_topics",
	[TENANT_F_CHECKBACK_ALLOW] = "checkback_allow",
	[TENANT_F_MAX_ENVELOPE_BYTES] = "max_envelope_bytes",
};

const char *tenant_field_column(tenant_field f)
{
	return f <= TENANT_F_MAX_ENVELOPE_BYTES ? columns[f] : "?";
}

static int fail(char *err, size_t errsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errsz, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errsz, fmt, ap);
	va_end(ap);
	return -1;
}

/* An entry as it may be shown: escaped, cut. */
static const char *shown(const char *s, char *buf, size_t bufsz)
{
	return log_escape(s, strlen(s), buf, bufsz);
}

int tenant_name_check(const char *name, char *err, size_t errsz)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n > TENANT_NAME_MAX)
		return fail(err, errsz, "a tenant's name has 1 to %d characters", TENANT_NAME_MAX);
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-'))) {
			char b[96];
			return fail(err, errsz, "\"%s\": a tenant's name is lower-case letters, digits, "
			            ". _ and -, beginning with a letter or digit", shown(name, b, sizeof b));
		}
	}
	return 0;
}

/* ---- entries ---- */

/* Past the bracket expression that starts at p ('['), or NULL when it
 * does not end: "[]a]" and "[^]a]" hold a ']', "[[:alpha:]]" a class. */
static const char *skip_bracket(const char *p)
{
	p++;
	if (*p == '^')
		p++;
	if (*p == ']')
		p++;
	for (; *p && *p != ']'; p++) {
		if (*p == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
			char close[3] = {p[1], ']', '\0'};
			const char *end = strstr(p + 2, close);
			if (!end)
				return NULL;
			p = end + 1;
		}
	}
	return *p ? p + 1 : NULL;
}

/* Whether a '|' outside parentheses and brackets splits the pattern ('^'
 * then anchors only its first branch); 1 too when it cannot tell. */
static int top_level_alternation(const char *p)
{
	int depth = 0;
	while (*p) {
		if (*p == '\\') {
			if (!p[1])
				return 1;
			p += 2;
		} else if (*p == '[') {
			if (!(p = skip_bracket(p)))
				return 1;
		} else {
			if (*p == '|' && depth == 0)
				return 1;
			depth += *p == '(' ? 1 : *p == ')' ? -1 : 0;
			if (depth < 0)
				return 1;
			p++;
		}
	}
	return 0;
}

/* The literal text every match of a '^' pattern starts with: the atoms
 * after '^' up to the first that is not a plain character (an escaped
 * punctuation character counts as plain), less the last one when a
 * quantifier that allows zero follows it. "" when the pattern has an
 * alternation at its top level. */
static char *literal_prefix(const char *pattern)
{
	char *out = calloc(1, strlen(pattern) + 1);
	if (!out || top_level_alternation(pattern))
		return out;
	size_t n = 0;
	for (const char *p = pattern + 1; *p;) {
		char lit;
		if (*p == '\\' && p[1] && ispunct((unsigned char)p[1])) {
			lit = p[1];
			p += 2;
		} else if (*p != '\\' && !strchr(".[]()*+?{}|^$", *p)) {
			lit = *p++;
		} else {
			break;
		}
		if (*p == '*' || *p == '?' || *p == '{')
			break;
		out[n++] = lit;
		if (*p == '+')
			break;
	}
	out[n] = '\0';
	return out;
}

static int compile_pattern(const char *text, tenant_rule *t, char *err, size_t errsz)
{
	char b[128];
	if (text[0] != '^')
		return fail(err, errsz, "\"%s\": a pattern begins with ^", shown(text, b, sizeof b));
	if (strlen(text) > TENANT_PATTERN_MAX)
		return fail(err, errsz, "a pattern has at most %d bytes", TENANT_PATTERN_MAX);
	if (!(t->re = calloc(1, sizeof *t->re)))
		return fail(err, errsz, "out of memory");
	int rc = regcomp(&t->re->re, text, REG_EXTENDED | REG_NOSUB);
	if (rc != 0) {
		char why[128];
		regerror(rc, &t->re->re, why, sizeof why);
		free(t->re);
		t->re = NULL;
		return fail(err, errsz, "\"%s\": %s", shown(text, b, sizeof b), why);
	}
	if (!(t->pattern = strdup(text)) || !(t->pattern_prefix = literal_prefix(text)))
		return fail(err, errsz, "out of memory");
	return 0;
}

static int topic_name_check(const char *s, char *err, size_t errsz)
{
	char b[128];
	size_t n = strlen(s);
	if (!txhubi_topic_valid(s, n))
		return fail(err, errsz, "\"%s\" is not a valid Kafka topic name (1 to 249 of "
		            "a-z A-Z 0-9 . _ -)", shown(s, b, sizeof b));
	if (envelope_reserved_topic(s, n))
		return fail(err, errsz, "\"%s\": topics beginning with __ are Kafka's own",
		            shown(s, b, sizeof b));
	return 0;
}

static int add_control(const tenant_def *d, tenant_rule *t, char *err, size_t errsz)
{
	if (d->ncontrol == 0)
		return fail(err, errsz, "at least one control topic");
	for (size_t i = 0; i < d->ncontrol; i++) {
		const char *s = d->control_topics[i];
		if (s[0] == '^') {
			if (d->ncontrol > 1)
				return fail(err, errsz, "a pattern stands alone: topic names, or one pattern");
			return compile_pattern(s, t, err, errsz);
		}
		if (topic_name_check(s, err, errsz) != 0)
			return -1;
		for (size_t j = 0; j < t->ntopics; j++)
			if (strcmp(t->topics[j], s) == 0)
				return fail(err, errsz, "\"%s\" given twice", s);
		if (!(t->topics[t->ntopics] = strdup(s)))
			return fail(err, errsz, "out of memory");
		t->ntopics++;
	}
	return 0;
}

/* A biz_id entry: an id under the envelope's rules, or such a prefix and
 * '*'. */
static int biz_check(const char *s, tenant_match *m, char *err, size_t errsz)
{
	char b[128], why[160];
	size_t n = strlen(s);
	m->prefix = n > 0 && s[n - 1] == '*';
	m->len = m->prefix ? n - 1 : n;
	if (memchr(s, '*', m->len))
		return fail(err, errsz, "\"%s\": a pattern is a prefix and one '*' at its end (abc*)",
		            shown(s, b, sizeof b));
	if (m->len == 0 && m->prefix)
		return 0; /* "*": every biz_id */
	char *id = strndup(s, m->len);
	if (!id)
		return fail(err, errsz, "out of memory");
	int rc = envelope_check_id("biz_id", id, ENVELOPE_BIZ_ID_MAX, why, sizeof why);
	free(id);
	return rc == 0 ? 0 : fail(err, errsz, "\"%s\": %s", shown(s, b, sizeof b), why);
}

/* A forward topic entry: a topic name, or a prefix of one and '*'. */
static int forward_check(const char *s, tenant_match *m, char *err, size_t errsz)
{
	char b[128];
	size_t n = strlen(s);
	m->prefix = n > 0 && s[n - 1] == '*';
	m->len = m->prefix ? n - 1 : n;
	if (!m->prefix)
		return topic_name_check(s, err, errsz);
	if (m->len == 0 || (m->len == 1 && s[0] == '_') || envelope_reserved_topic(s, m->len))
		return fail(err, errsz, "\"%s\": a prefix would take in Kafka's own topics (__*): give "
		            "one that starts with a letter, a digit, . or -", shown(s, b, sizeof b));
	if (memchr(s, '*', m->len) || !txhubi_topic_valid(s, m->len))
		return fail(err, errsz, "\"%s\": a pattern is the start of a topic name (a-z A-Z 0-9 "
		            ". _ -) and one '*' at its end", shown(s, b, sizeof b));
	return 0;
}

typedef int (*match_check)(const char *s, tenant_match *m, char *err, size_t errsz);

static int add_matches(const char *const *list, size_t n, match_check check, tenant_match *out,
                       size_t *nout, char *err, size_t errsz)
{
	if (n == 0)
		return fail(err, errsz, "at least one entry");
	for (size_t i = 0; i < n; i++) {
		tenant_match m = {0};
		if (check(list[i], &m, err, errsz) != 0)
			return -1;
		for (size_t j = 0; j < *nout; j++)
			if (out[j].prefix == m.prefix && out[j].len == m.len &&
			    memcmp(out[j].text, list[i], m.len) == 0)
				return fail(err, errsz, "\"%s\" given twice", list[i]);
		if (!(m.text = strndup(list[i], m.len)))
			return fail(err, errsz, "out of memory");
		out[(*nout)++] = m;
	}
	return 0;
}

static int add_allow(const tenant_def *d, tenant_rule *t, char *err, size_t errsz)
{
	for (size_t i = 0; i < d->nallow; i++) {
		const char *s = d->checkback_allow[i];
		char b[128];
		if (strchr(s, ','))
			return fail(err, errsz, "\"%s\": one entry per argument, without commas",
			            shown(s, b, sizeof b));
		if (checkback_allow_entry_check(s, err, errsz) != 0)
			return -1;
		if (checkback_url_parse(s, &t->allow[t->nallow], err, errsz) != 0)
			return -1;
		t->nallow++;
	}
	return 0;
}

/* ---- overlap ---- */

/* Neither string starts the other: nothing can start with both. */
static int prefixes_apart(const char *a, size_t al, const char *b, size_t bl)
{
	size_t n = al < bl ? al : bl;
	return memcmp(a, b, n) != 0;
}

static int match_overlap(const tenant_match *a, const tenant_match *b)
{
	if (!a->prefix && !b->prefix)
		return a->len == b->len && memcmp(a->text, b->text, a->len) == 0;
	if (a->prefix && b->prefix)
		return !prefixes_apart(a->text, a->len, b->text, b->len);
	const tenant_match *p = a->prefix ? a : b, *x = a->prefix ? b : a;
	return x->len >= p->len && memcmp(x->text, p->text, p->len) == 0;
}

static int pattern_matches(const tenant_rule *t, const char *topic)
{
	size_t pl = strlen(t->pattern_prefix);
	return strncmp(topic, t->pattern_prefix, pl) == 0 &&
	       regexec(&t->re->re, topic, 0, NULL, 0) == 0;
}

/* Whether a forward entry (a name or prefix) may name a control topic of
 * c. */
static int forward_hits_control(const tenant_match *f, const tenant_rule *c, char *what,
                                size_t whatsz)
{
	char ft[260];
	snprintf(ft, sizeof ft, "%s%s", f->text, f->prefix ? "*" : "");
	for (size_t i = 0; i < c->ntopics; i++) {
		tenant_match n = {c->topics[i], strlen(c->topics[i]), 0};
		if (match_overlap(f, &n)) {
			snprintf(what, whatsz, "forward topic \"%s\" takes in control topic \"%s\"", ft,
			         c->topics[i]);
			return 1;
		}
	}
	if (!c->pattern)
		return 0;
	int hit = f->prefix ? !prefixes_apart(f->text, f->len, c->pattern_prefix,
	                                      strlen(c->pattern_prefix))
	                    : pattern_matches(c, f->text);
	if (hit)
		snprintf(what, whatsz, "forward topic \"%s\" %s control-topic pattern \"%s\"", ft,
		         f->prefix ? "is not apart from" : "matches", c->pattern);
	return hit;
}

static int controls_overlap(const tenant_rule *a, const tenant_rule *b, char *what, size_t whatsz)
{
	for (size_t i = 0; i < a->ntopics; i++) {
		if (tenant_owns_topic(b, a->topics[i])) {
			snprintf(what, whatsz, "control topic \"%s\" is also %s", a->topics[i],
			         b->pattern ? "matched by its pattern" : "its control topic");
			return 1;
		}
	}
	for (size_t i = 0; a->pattern && i < b->ntopics; i++) {
		if (pattern_matches(a, b->topics[i])) {
			snprintf(what, whatsz, "control-topic pattern \"%s\" matches its control topic "
			         "\"%s\"", a->pattern, b->topics[i]);
			return 1;
		}
	}
	if (a->pattern && b->pattern &&
	    !prefixes_apart(a->pattern_prefix, strlen(a->pattern_prefix), b->pattern_prefix,
	                    strlen(b->pattern_prefix))) {
		snprintf(what, whatsz, "control-topic pattern \"%s\" is not apart from its pattern \"%s\" "
		         "(two patterns must begin with literal prefixes neither of which starts the "
		         "other)", a->pattern, b->pattern);
		return 1;
	}
	return 0;
}

static int forwards_hit(const tenant_rule *f, const tenant_rule *c, char *what, size_t whatsz)
{
	for (size_t i = 0; i < f->nfwd; i++)
		if (forward_hits_control(&f->fwd[i], c, what, whatsz))
			return 1;
	return 0;
}

int tenant_rule_overlap(const tenant_rule *a, const tenant_rule *b, tenant_field *field,
                        char *what, size_t whatsz)
{
	for (size_t i = 0; i < a->nbiz; i++) {
		for (size_t j = 0; j < b->nbiz; j++) {
			if (match_overlap(&a->biz[i], &b->biz[j])) {
				*field = TENANT_F_BIZ_IDS;
				snprintf(what, whatsz, "biz id \"%s%s\" overlaps its \"%s%s\"", a->biz[i].text,
				         a->biz[i].prefix ? "*" : "", b->biz[j].text, b->biz[j].prefix ? "*" : "");
				return 1;
			}
		}
	}
	*field = TENANT_F_CONTROL_TOPICS;
	if (controls_overlap(a, b, what, whatsz))
		return 1;
	*field = TENANT_F_FORWARD_TOPICS;
	if (forwards_hit(a, b, what, whatsz))
		return 1;
	/* b forwarding into a control topic of a: a's control topics are at fault */
	char sub[512];
	if (forwards_hit(b, a, sub, sizeof sub)) {
		*field = TENANT_F_CONTROL_TOPICS;
		snprintf(what, whatsz, "its %s", sub);
		return 1;
	}
	return 0;
}

/* ---- compile ---- */

static int compile_lists(const tenant_def *d, tenant_rule *t, tenant_field *bad, char *err,
                         size_t errsz)
{
	*bad = TENANT_F_CONTROL_TOPICS;
	if (add_control(d, t, err, errsz) != 0)
		return -1;
	*bad = TENANT_F_BIZ_IDS;
	if (add_matches(d->biz_ids, d->nbiz, biz_check, t->biz, &t->nbiz, err, errsz) != 0)
		return -1;
	*bad = TENANT_F_FORWARD_TOPICS;
	if (add_matches(d->forward_topics, d->nforward, forward_check, t->fwd, &t->nfwd, err,
	                errsz) != 0)
		return -1;
	char what[600];
	if (forwards_hit(t, t, what, sizeof what))
		return fail(err, errsz, "%s of the same tenant", what);
	*bad = TENANT_F_CHECKBACK_ALLOW;
	return add_allow(d, t, err, errsz);
}

int tenant_rule_compile(const tenant_def *d, tenant_rule *t, tenant_field *bad, char *err,
                        size_t errsz)
{
	memset(t, 0, sizeof *t);
	*bad = TENANT_F_NAME;
	if (tenant_name_check(d->name, err, errsz) != 0)
		return -1;
	size_t lists[] = {d->ncontrol, d->nbiz, d->nforward, d->nallow};
	tenant_field fields[] = {TENANT_F_CONTROL_TOPICS, TENANT_F_BIZ_IDS, TENANT_F_FORWARD_TOPICS,
	                         TENANT_F_CHECKBACK_ALLOW};
	for (size_t i = 0; i < 4; i++) {
		*bad = fields[i];
		if (lists[i] > TENANT_LIST_MAX)
			return fail(err, errsz, "at most %d entries", TENANT_LIST_MAX);
	}
	if (!(t->name = strdup(d->name)) ||
	    !(t->topics = calloc(d->ncontrol + 1, sizeof *t->topics)) ||
	    !(t->biz = calloc(d->nbiz + 1, sizeof *t->biz)) ||
	    !(t->fwd = calloc(d->nforward + 1, sizeof *t->fwd)) ||
	    !(t->allow = calloc(d->nallow + 1, sizeof *t->allow)))
		return fail(err, errsz, "out of memory");
	if (compile_lists(d, t, bad, err, errsz) != 0)
		return -1;
	*bad = TENANT_F_MAX_ENVELOPE_BYTES;
	if (d->max_envelope_bytes < 0 || d->max_envelope_bytes > TENANT_ENVELOPE_MAX)
		return fail(err, errsz, "%lld is not a size from 1 to %d bytes",
		            (long long)d->max_envelope_bytes, TENANT_ENVELOPE_MAX);
	t->max_envelope_bytes = d->max_envelope_bytes;
	t->enabled = d->enabled;
	return 0;
}

int tenant_field_check(tenant_field f, const char *const *list, size_t n, char *err,
                       size_t errsz)
{
	if (n > TENANT_LIST_MAX)
		return fail(err, errsz, "at most %d entries", TENANT_LIST_MAX);
	tenant_def d = {.name = "x"};
	tenant_rule t = {0};
	int rc = -1;
	if (!(t.topics = calloc(n + 1, sizeof *t.topics)) || !(t.biz = calloc(n + 1, sizeof *t.biz)) ||
	    !(t.fwd = calloc(n + 1, sizeof *t.fwd)) || !(t.allow = calloc(n + 1, sizeof *t.allow))) {
		fail(err, errsz, "out of memory");
	} else if (f == TENANT_F_CONTROL_TOPICS) {
		d.control_topics = list, d.ncontrol = n;
		rc = add_control(&d, &t, err, errsz);
	} else if (f == TENANT_F_BIZ_IDS) {
		rc = add_matches(list, n, biz_check, t.biz, &t.nbiz, err, errsz);
	} else if (f == TENANT_F_FORWARD_TOPICS) {
		rc = add_matches(list, n, forward_check, t.fwd, &t.nfwd, err, errsz);
	} else if (f == TENANT_F_CHECKBACK_ALLOW) {
		d.checkback_allow = list, d.nallow = n;
		rc = add_allow(&d, &t, err, errsz);
	} else {
		fail(err, errsz, "not a list");
	}
	tenant_rule_clear(&t);
	return rc;
}

static void matches_free(tenant_match *m, size_t n)
{
	for (size_t i = 0; m && i < n; i++)
		free(m[i].text);
	free(m);
}

void tenant_rule_clear(tenant_rule *t)
{
	if (!t)
		return;
	free(t->name);
	for (size_t i = 0; t->topics && i < t->ntopics; i++)
		free(t->topics[i]);
	free(t->topics);
	free(t->pattern);
	free(t->pattern_prefix);
	if (t->re) {
		regfree(&t->re->re);
		free(t->re);
	}
	matches_free(t->biz, t->nbiz);
	matches_free(t->fwd, t->nfwd);
	for (size_t i = 0; t->allow && i < t->nallow; i++)
		checkback_url_clear(&t->allow[i]);
	free(t->allow);
	memset(t, 0, sizeof *t);
}

/* ---- one tenant's questions ---- */

int tenant_owns_topic(const tenant_rule *t, const char *topic)
{
	for (size_t i = 0; i < t->ntopics; i++)
		if (strcmp(t->topics[i], topic) == 0)
			return 1;
	return t->pattern && pattern_matches(t, topic);
}

static int in_list(const tenant_match *m, size_t n, const char *s)
{
	size_t len = strlen(s);
	for (size_t i = 0; i < n; i++) {
		if (m[i].prefix ? len >= m[i].len && memcmp(s, m[i].text, m[i].len) == 0
		                : len == m[i].len && memcmp(s, m[i].text, len) == 0)
			return 1;
	}
	return 0;
}

int tenant_owns_biz(const tenant_rule *t, const char *biz_id)
{
	return in_list(t->biz, t->nbiz, biz_id);
}

int tenant_may_forward(const tenant_rule *t, const char *topic)
{
	return !envelope_reserved_topic(topic, strlen(topic)) && in_list(t->fwd, t->nfwd, topic);
}

int tenant_may_call(const tenant_rule *t, const checkback_url *u, char *why, size_t whysz)
{
	if (t->nallow == 0) {
		snprintf(why, whysz, "tenant %s has no check-back allow-list", t->name);
		return 0;
	}
	if (u->unsafe) {
		snprintf(why, whysz, "it has %s", u->unsafe);
		return 0;
	}
	for (size_t i = 0; i < t->nallow; i++)
		if (checkback_entry_holds(&t->allow[i], u))
			return 1;
	snprintf(why, whysz, "no entry of tenant %s's check-back allow-list has its scheme, host "
	         "and port and a path it is under", t->name);
	return 0;
}

int tenant_may_call_url(const tenant_rule *t, const char *url, char *why, size_t whysz)
{
	checkback_url u;
	if (checkback_url_parse(url, &u, why, whysz) != 0)
		return 0;
	int ok = tenant_may_call(t, &u, why, whysz);
	checkback_url_clear(&u);
	return ok;
}

int tenant_envelope_fits(const tenant_rule *t, size_t bytes)
{
	return t->max_envelope_bytes == 0 || bytes <= (uint64_t)t->max_envelope_bytes;
}

/* ---- a snapshot of the enabled tenants ---- */

typedef struct {
	const char *topic;
	const tenant_rule *rule;
} topic_slot;

struct tenant_rules {
	tenant_rule *t;        /* by name; compiled in place, never moved */
	size_t n;
	topic_slot *names;     /* every control topic name, sorted */
	size_t nnames;
	const tenant_rule **patterned; /* the tenants with a pattern */
	size_t npatterned;
};

static int by_def_name(const void *a, const void *b)
{
	return strcmp((*(const tenant_def *const *)a)->name, (*(const tenant_def *const *)b)->name);
}

static int by_topic(const void *a, const void *b)
{
	return strcmp(((const topic_slot *)a)->topic, ((const topic_slot *)b)->topic);
}

/* Compile the enabled defs into r->t, in name order. */
static int build_rules(tenant_rules *r, const tenant_def *defs, size_t n, char *err,
                       size_t errsz)
{
	const tenant_def **sorted = calloc(n + 1, sizeof *sorted);
	if (!sorted || !(r->t = calloc(n + 1, sizeof *r->t))) {
		free(sorted);
		return fail(err, errsz, "out of memory");
	}
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if (defs[i].enabled)
			sorted[m++] = &defs[i];
	qsort(sorted, m, sizeof *sorted, by_def_name);
	int rc = 0;
	for (size_t i = 0; i < m && rc == 0; i++) {
		tenant_field bad;
		char why[512], b[96];
		const char *name = sorted[i]->name ? sorted[i]->name : "";
		if (i > 0 && strcmp(sorted[i - 1]->name, name) == 0)
			rc = fail(err, errsz, "tenant \"%s\" is there twice", shown(name, b, sizeof b));
		else if (tenant_rule_compile(sorted[i], &r->t[r->n++], &bad, why, sizeof why) != 0)
			rc = fail(err, errsz, "tenant \"%s\": %s: %s", shown(name, b, sizeof b),
			          tenant_field_column(bad), why);
	}
	free(sorted);
	return rc;
}

static int check_apart(const tenant_rules *r, char *err, size_t errsz)
{
	for (size_t i = 0; i < r->n; i++) {
		for (size_t j = i + 1; j < r->n; j++) {
			tenant_field f;
			char what[600];
			if (tenant_rule_overlap(&r->t[i], &r->t[j], &f, what, sizeof what))
				return fail(err, errsz, "tenant \"%s\": %s: overlaps tenant \"%s\": %s",
				            r->t[i].name, tenant_field_column(f), r->t[j].name, what);
		}
	}
	return 0;
}

static int index_topics(tenant_rules *r, char *err, size_t errsz)
{
	size_t total = 0;
	for (size_t i = 0; i < r->n; i++)
		total += r->t[i].ntopics;
	if (!(r->names = calloc(total + 1, sizeof *r->names)) ||
	    !(r->patterned = calloc(r->n + 1, sizeof *r->patterned)))
		return fail(err, errsz, "out of memory");
	for (size_t i = 0; i < r->n; i++) {
		for (size_t j = 0; j < r->t[i].ntopics; j++)
			r->names[r->nnames++] = (topic_slot){r->t[i].topics[j], &r->t[i]};
		if (r->t[i].pattern)
			r->patterned[r->npatterned++] = &r->t[i];
	}
	qsort(r->names, r->nnames, sizeof *r->names, by_topic);
	return 0;
}

tenant_rules *tenant_rules_build(const tenant_def *defs, size_t n, char *err, size_t errsz)
{
	tenant_rules *r = calloc(1, sizeof *r);
	if (!r) {
		fail(err, errsz, "out of memory");
		return NULL;
	}
	if (build_rules(r, defs, n, err, errsz) != 0 || check_apart(r, err, errsz) != 0 ||
	    index_topics(r, err, errsz) != 0) {
		tenant_rules_free(r);
		return NULL;
	}
	return r;
}

void tenant_rules_free(tenant_rules *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		tenant_rule_clear(&r->t[i]);
	free(r->t);
	free(r->names);
	free(r->patterned);
	free(r);
}

size_t tenant_rules_count(const tenant_rules *r) { return r ? r->n : 0; }

const tenant_rule *tenant_rules_at(const tenant_rules *r, size_t i)
{
	return r && i < r->n ? &r->t[i] : NULL;
}

const tenant_rule *tenant_rules_by_name(const tenant_rules *r, const char *name)
{
	size_t lo = 0, hi = r ? r->n : 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, r->t[mid].name);
		if (c == 0)
			return &r->t[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

const tenant_rule *tenant_rules_by_topic(const tenant_rules *r, const char *topic)
{
	if (!r)
		return NULL;
	topic_slot key = {topic, NULL};
	const topic_slot *hit = bsearch(&key, r->names, r->nnames, sizeof *r->names, by_topic);
	if (hit)
		return hit->rule;
	for (size_t i = 0; i < r->npatterned; i++)
		if (pattern_matches(r->patterned[i], topic))
			return r->patterned[i];
	return NULL;
}

const tenant_rule *tenant_rules_by_biz(const tenant_rules *r, const char *biz_id)
{
	for (size_t i = 0; r && i < r->n; i++)
		if (tenant_owns_biz(&r->t[i], biz_id))
			return &r->t[i];
	return NULL;
}

int tenant_rules_may_forward(const tenant_rules *r, const tenant_rule *t, const char *topic)
{
	return tenant_may_forward(t, topic) && !tenant_rules_by_topic(r, topic);
}
