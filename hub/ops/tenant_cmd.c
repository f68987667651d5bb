/* tenant_cmd.c: `txhub tenant ...` (see tenant_cmd.h): the arguments, the
 * run, and the output, text for people or one JSON document. */
#include "tenant_cmd.h"

#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "envelope.h"
#include "log.h"
#include "ops.h"
#include "store.h"
#include "tenant_ops.h"

/* ---- arguments ---- */

static const struct {
	const char *word;
	tenant_sub sub;
	int npos; /* positional arguments: NAME, ROLE */
} subs[] = {
	{"add", TENANT_ADD, 1},     {"set", TENANT_SET, 1},   {"remove", TENANT_REMOVE, 1},
	{"list", TENANT_LIST, 0},   {"show", TENANT_SHOW, 1}, {"grant", TENANT_GRANT, 2},
	{"token", TENANT_TOKEN, 1},
};
#define NSUBS (sizeof subs / sizeof subs[0])

#define B(s) (1u << (s))
#define RULES (B(TENANT_ADD) | B(TENANT_SET))

enum { O_CONTROL, O_BIZ, O_FORWARD, O_ALLOW, O_CAP, O_ENABLE, O_DISABLE, O_JSON, O_COUNT };

static const admin_option options[O_COUNT] = {
	[O_CONTROL] = {"--control-topic", 1, RULES},
	[O_BIZ] = {"--biz", 1, RULES},
	[O_FORWARD] = {"--forward-topic", 1, RULES},
	[O_ALLOW] = {"--checkback-allow", 1, RULES},
	[O_CAP] = {"--max-envelope-bytes", 1, RULES},
	[O_ENABLE] = {"--enable", 0, B(TENANT_SET)},
	[O_DISABLE] = {"--disable", 0, B(TENANT_SET)},
	[O_JSON] = {"--json", 0, 0x7fu},
};

/* What each option of the rules sets (O_CONTROL..O_CAP). */
static const tenant_field option_field[O_CAP + 1] = {
	[O_CONTROL] = TENANT_F_CONTROL_TOPICS,
	[O_BIZ] = TENANT_F_BIZ_IDS,
	[O_FORWARD] = TENANT_F_FORWARD_TOPICS,
	[O_ALLOW] = TENANT_F_CHECKBACK_ALLOW,
	[O_CAP] = TENANT_F_MAX_ENVELOPE_BYTES,
};

/* The argument that sets a field, for messages. */
static const char *field_arg(tenant_field f)
{
	for (int o = 0; o <= O_CAP; o++)
		if (option_field[o] == f)
			return options[o].name;
	return "NAME";
}

static int parse_cap(const char *v, tenant_args *a, char *err, size_t errsz)
{
	if (strcmp(v, "none") == 0) {
		a->max_envelope_bytes = 0;
		return 0;
	}
	long long n = 0;
	const char *p = v;
	for (; *p >= '0' && *p <= '9' && n <= TENANT_ENVELOPE_MAX; p++)
		n = n * 10 + (*p - '0');
	if (p == v || *p || n < 1 || n > TENANT_ENVELOPE_MAX)
		return admin_usage_error(err, errsz, "--max-envelope-bytes: \"%.40s\" is not a size from 1 "
		                         "to %d bytes, nor none", v, TENANT_ENVELOPE_MAX);
	a->max_envelope_bytes = n;
	return 0;
}

/* One option (argv[*i]) and its values; *i moves past what was used. */
static int parse_option(int argc, char *const *argv, int *i, tenant_args *a, char *err,
                        size_t errsz)
{
	char what[32];
	const char *v;
	snprintf(what, sizeof what, "tenant %s", a->word);
	int o = admin_option_take(options, O_COUNT, argc, argv, i, B(a->sub), what, &v, err, errsz);
	if (o < 0)
		return -1;
	if (o == O_JSON) {
		a->json = 1;
		return 0;
	}
	if (o == O_ENABLE || o == O_DISABLE) {
		if (a->enable >= 0)
			return admin_usage_error(err, errsz, "--enable and --disable: give one of them, "
			                         "once");
		a->enable = o == O_ENABLE;
		return 0;
	}
	tenant_field f = option_field[o];
	if (o == O_CAP && (a->given & (1u << f)))
		return admin_usage_error(err, errsz, "%s given twice", options[o].name);
	a->given |= 1u << f;
	if (o == O_CAP)
		return parse_cap(v, a, err, errsz);
	/* NAME... : the words up to the next option are values too, and a list
	 * option given again adds its values to those given before */
	size_t l = (size_t)o;
	a->lists[l][a->nlists[l]++] = v;
	while (*i + 1 < argc && argv[*i + 1][0] != '-')
		a->lists[l][a->nlists[l]++] = argv[++*i];
	return 0;
}

/* set --checkback-allow none: the empty list. none is no URL, so it comes
 * alone (add takes it for a URL, and refuses it). */
static int allow_none(tenant_args *a, char *err, size_t errsz)
{
	size_t n = a->nlists[O_ALLOW], nones = 0;
	for (size_t i = 0; a->sub == TENANT_SET && i < n; i++)
		nones += strcmp(a->lists[O_ALLOW][i], "none") == 0;
	if (nones == 0)
		return 0;
	if (n > 1)
		return admin_usage_error(err, errsz, "--checkback-allow: none empties the list, so it "
		                         "comes alone (%zu values given)", n);
	a->nlists[O_ALLOW] = 0;
	return 0;
}

/* Each list given, checked alone, and NAME, ROLE. */
static int check_values(const tenant_args *a, char *err, size_t errsz)
{
	char why[512];
	if (a->name && tenant_name_check(a->name, why, sizeof why) != 0)
		return admin_usage_error(err, errsz, "NAME: %s", why);
	if (a->role && envelope_check_id("role", a->role, TENANT_ROLE_MAX, why, sizeof why) != 0)
		return admin_usage_error(err, errsz, "ROLE: %s", why);
	for (int l = 0; l < 4; l++) {
		tenant_field f = option_field[l];
		if ((a->given & (1u << f)) && (a->nlists[l] > 0 || f != TENANT_F_CHECKBACK_ALLOW) &&
		    tenant_field_check(f, a->lists[l], a->nlists[l], why, sizeof why) != 0)
			return admin_usage_error(err, errsz, "%s: %s", options[l].name, why);
	}
	return 0;
}

/* What each sub-command needs beyond its options. */
static int check_sub(const tenant_args *a, int npos, char *const *pos, char *err, size_t errsz)
{
	size_t s;
	for (s = 0; s < NSUBS && subs[s].sub != a->sub; s++)
		;
	if (npos < subs[s].npos)
		return admin_usage_error(err, errsz, "txhub tenant %s needs %s", a->word,
		                         subs[s].npos == 2 ? "NAME and ROLE" : "NAME");
	if (npos > subs[s].npos)
		return admin_usage_error(err, errsz, "unexpected argument \"%.60s\"", pos[subs[s].npos]);
	if (a->sub == TENANT_ADD) {
		for (int l = 0; l < 3; l++)
			if (!(a->given & (1u << option_field[l])))
				return admin_usage_error(err, errsz, "txhub tenant add needs %s", options[l].name);
	}
	if (a->sub == TENANT_SET && !a->given && a->enable < 0)
		return admin_usage_error(err, errsz, "txhub tenant set needs something to change (an "
		                         "option of add, --enable or --disable)");
	return 0;
}

static int parse_words(int argc, char *const *argv, tenant_args *a, char **pos, int *npos,
                       char *err, size_t errsz)
{
	int ended = 0;
	for (int i = 1; i < argc; i++) {
		if (!ended && strcmp(argv[i], "--") == 0)
			ended = 1;
		else if (!ended && (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0))
			a->help = 1;
		else if (!ended && argv[i][0] == '-' && argv[i][1]) {
			if (parse_option(argc, argv, &i, a, err, errsz) != 0)
				return -1;
		} else {
			pos[(*npos)++] = argv[i];
		}
	}
	return 0;
}

int tenant_cmd_parse(int argc, char *const *argv, tenant_args *a, char *err, size_t errsz)
{
	memset(a, 0, sizeof *a);
	a->enable = -1;
	if (argc < 1 || strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0) {
		a->help = argc >= 1;
		return a->help ? 0 : admin_usage_error(err, errsz, "txhub tenant needs add, set, remove, "
		                                       "list, show, grant or token");
	}
	size_t s;
	for (s = 0; s < NSUBS && strcmp(subs[s].word, argv[0]) != 0; s++)
		;
	if (s == NSUBS)
		return admin_usage_error(err, errsz, "unknown tenant command \"%.40s\" (add, set, remove, "
		                         "list, show, grant, token)", argv[0]);
	a->sub = subs[s].sub;
	a->word = subs[s].word;
	char **pos = calloc((size_t)argc + 1, sizeof *pos);
	for (int l = 0; l < 4; l++)
		a->lists[l] = calloc((size_t)argc + 1, sizeof *a->lists[l]);
	if (!pos || !a->lists[0] || !a->lists[1] || !a->lists[2] || !a->lists[3]) {
		free(pos);
		return admin_usage_error(err, errsz, "out of memory");
	}
	int npos = 0, rc = parse_words(argc, argv, a, pos, &npos, err, errsz);
	if (rc == 0 && !a->help && (rc = check_sub(a, npos, pos, err, errsz)) == 0 &&
	    (rc = allow_none(a, err, errsz)) == 0) {
		a->name = npos > 0 ? pos[0] : NULL;
		a->role = npos > 1 ? pos[1] : NULL;
		rc = check_values(a, err, errsz);
	}
	free(pos);
	return rc;
}

void tenant_cmd_free(tenant_args *a)
{
	for (int l = 0; l < 4; l++)
		free(a->lists[l]);
	memset(a, 0, sizeof *a);
}

void tenant_cmd_write_help(FILE *out)
{
	fprintf(out,
	        "  tenant add NAME --control-topic T... --biz ID... --forward-topic T...\n"
	        "             [--checkback-allow URL...] [--max-envelope-bytes N] [--json]\n"
	        "             a team sharing the hub: its control topics (names, or one\n"
	        "             pattern beginning with ^), the biz ids it owns (abc* for a\n"
	        "             prefix), the topics it may forward to, its check-back URLs;\n"
	        "             a list option takes the words after it, and may be given\n"
	        "             again (--biz a b --biz c: a, b and c)\n"
	        "  tenant set NAME [the options of add] [--enable|--disable] [--json]\n"
	        "             each list given replaces the stored one (--checkback-allow none,\n"
	        "             --max-envelope-bytes none empty them)\n"
	        "  tenant remove NAME | tenant list | tenant show NAME  [--json]\n"
	        "             its messages stay, with its name; show prints its rules, counts\n"
	        "             and change history\n"
	        "  tenant grant NAME ROLE [--json]\n"
	        "             PostgreSQL role ROLE sees and acts on that tenant's rows only\n"
	        "             (row-level security), with txhub list/show/status/resolve/redrive;\n"
	        "             refused for the tables' owner and its members, and for roles that\n"
	        "             are or may SET ROLE to a SUPERUSER, BYPASSRLS or CREATEROLE role\n"
	        "  tenant token NAME [--json]\n"
	        "             a new console token for that tenant, printed once, kept hashed\n");
}

/* ---- output ---- */

static void put(const char *s)
{
	char *e = s ? admin_escape(s) : NULL;
	fputs(e ? e : s ? "?" : "-", stdout);
	free(e);
}

/* A JSON array of strings as "a, b", or "-" when empty; a value of
 * another kind as its JSON text. */
static void put_value(const cJSON *v)
{
	if (cJSON_IsArray(v)) {
		const cJSON *e;
		int first = 1;
		cJSON_ArrayForEach(e, v) {
			fputs(first ? "" : ", ", stdout);
			put(cJSON_IsString(e) ? cJSON_GetStringValue(e) : "?");
			first = 0;
		}
		if (first)
			fputs("-", stdout);
	} else if (cJSON_IsString(v)) {
		put(cJSON_GetStringValue(v));
	} else {
		char *t = v && !cJSON_IsNull(v) ? cJSON_PrintUnformatted(v) : NULL;
		fputs(t ? t : "none", stdout);
		free(t);
	}
}

static void rule_line(const char *label, const cJSON *v)
{
	printf("  %-18s ", label);
	put_value(v);
	putchar('\n');
}

static void print_rules(const cJSON *t)
{
	printf("tenant ");
	put(cJSON_GetStringValue(cJSON_GetObjectItem(t, "name")));
	printf(" (%s)\n", cJSON_IsTrue(cJSON_GetObjectItem(t, "enabled")) ? "enabled" : "disabled");
	rule_line("control topics", cJSON_GetObjectItem(t, "control_topics"));
	rule_line("biz ids", cJSON_GetObjectItem(t, "biz_ids"));
	rule_line("forward topics", cJSON_GetObjectItem(t, "forward_topics"));
	rule_line("check-back allow", cJSON_GetObjectItem(t, "checkback_allow"));
	rule_line("envelope cap", cJSON_GetObjectItem(t, "max_envelope_bytes"));
	rule_line("roles", cJSON_GetObjectItem(t, "roles"));
	rule_line("created", cJSON_GetObjectItem(t, "created_at"));
	rule_line("updated", cJSON_GetObjectItem(t, "updated_at"));
}

static void print_counts(const cJSON *doc)
{
	const cJSON *m = cJSON_GetObjectItem(doc, "messages"), *s = cJSON_GetObjectItem(doc, "send");
	const cJSON *e;
	printf("messages:");
	cJSON_ArrayForEach(e, m) printf(" %s %lld", e->string, (long long)cJSON_GetNumberValue(e));
	printf("\nsends:");
	cJSON_ArrayForEach(e, s) printf(" %s %lld", e->string, (long long)cJSON_GetNumberValue(e));
	printf("\n");
}

static void print_history(const cJSON *doc)
{
	const cJSON *tokens = cJSON_GetObjectItem(doc, "tokens"), *e, *c;
	printf("console tokens: %d\n", cJSON_GetArraySize(tokens));
	cJSON_ArrayForEach(e, tokens) {
		printf("  id %lld, issued %s by ", (long long)cJSON_GetNumberValue(
		       cJSON_GetObjectItem(e, "id")), cJSON_GetStringValue(cJSON_GetObjectItem(e,
		       "created_at")));
		put(cJSON_GetStringValue(cJSON_GetObjectItem(e, "created_by")));
		putchar('\n');
	}
	printf("history, oldest first:\n");
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(doc, "history")) {
		printf("  %s  %-7s by ", cJSON_GetStringValue(cJSON_GetObjectItem(e, "at")),
		       cJSON_GetStringValue(cJSON_GetObjectItem(e, "action")));
		put(cJSON_GetStringValue(cJSON_GetObjectItem(e, "actor")));
		const char *detail = cJSON_GetStringValue(cJSON_GetObjectItem(e, "detail"));
		if (detail) {
			printf(": ");
			put(detail);
		}
		putchar('\n');
		cJSON_ArrayForEach(c, cJSON_GetObjectItem(e, "changes")) {
			printf("      %s: ", cJSON_GetStringValue(cJSON_GetObjectItem(c, "field")));
			put_value(cJSON_GetObjectItem(c, "before"));
			printf(" -> ");
			put_value(cJSON_GetObjectItem(c, "after"));
			putchar('\n');
		}
	}
}

static void print_text(const tenant_args *a, const cJSON *doc)
{
	const cJSON *e;
	switch (a->sub) {
	case TENANT_ADD:
		print_rules(doc);
		printf("added\n");
		break;
	case TENANT_SET:
		print_rules(cJSON_GetObjectItem(doc, "tenant"));
		printf(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "changed")) ? "changed: " :
		       "unchanged: the values given are those stored\n");
		if (cJSON_GetArraySize(cJSON_GetObjectItem(doc, "changed"))) {
			put_value(cJSON_GetObjectItem(doc, "changed"));
			putchar('\n');
		}
		break;
	case TENANT_REMOVE:
		printf("tenant %s removed: its messages keep its name; its grants and console tokens "
		       "are gone\n", a->name);
		break;
	case TENANT_LIST:
		cJSON_ArrayForEach(e, doc) print_rules(e);
		printf("%d tenant(s)\n", cJSON_GetArraySize(doc));
		break;
	case TENANT_SHOW:
		print_rules(cJSON_GetObjectItem(doc, "tenant"));
		print_counts(doc);
		print_history(doc);
		break;
	case TENANT_GRANT:
		printf(cJSON_IsTrue(cJSON_GetObjectItem(doc, "already"))
		       ? "role %s could already see and act on tenant %s's rows (privileges granted "
		         "again)\n" : "role %s may now see and act on tenant %s's rows, and no others\n",
		       a->role, a->name);
		break;
	case TENANT_TOKEN:
		printf("%s\n", cJSON_GetStringValue(cJSON_GetObjectItem(doc, "token")));
		fprintf(stderr, "txhub tenant token: console token %lld for tenant %s: shown this once, "
		        "only its SHA-256 is kept\n",
		        (long long)cJSON_GetNumberValue(cJSON_GetObjectItem(doc, "id")), a->name);
		break;
	}
}

/* ---- running ---- */

static tenant_def args_def(const tenant_args *a)
{
	return (tenant_def){a->name, a->lists[0], a->nlists[0], a->lists[1], a->nlists[1],
	                    a->lists[2], a->nlists[2], a->lists[3], a->nlists[3],
	                    a->max_envelope_bytes, 1};
}

static ops_rc dispatch(struct pg_conn *conn, const tenant_args *a, const char *actor,
                       tenant_field *bad, cJSON **doc, char *err, size_t errsz)
{
	tenant_def d = args_def(a);
	tenant_change c = {d, a->given, a->enable};
	char token[TENANT_TOKEN_LEN + 1];
	ops_rc rc = OPS_BAD_ARG;
	switch (a->sub) {
	case TENANT_ADD: return tenant_add(conn, &d, actor, bad, doc, err, errsz);
	case TENANT_SET: return tenant_set(conn, &c, actor, bad, doc, err, errsz);
	case TENANT_REMOVE: return tenant_remove(conn, a->name, actor, doc, err, errsz);
	case TENANT_LIST: return tenant_list(conn, doc, err, errsz);
	case TENANT_SHOW: return tenant_show(conn, a->name, doc, err, errsz);
	case TENANT_GRANT: return tenant_grant(conn, a->name, a->role, actor, doc, err, errsz);
	case TENANT_TOKEN:
		rc = tenant_token_issue(conn, a->name, actor, token, doc, err, errsz);
		memset(token, 0, sizeof token);
		return rc;
	}
	return rc;
}

int tenant_cmd_run(const txhub_config *cfg, const tenant_args *a)
{
	char err[2048], actor[OPS_ACTOR_MAX + 1], what[32];
	snprintf(what, sizeof what, "tenant %s", a->word);
	store *st = admin_open(cfg, what, actor, sizeof actor);
	if (!st)
		return 1;
	cJSON *doc = NULL;
	tenant_field bad = TENANT_F_NAME;
	ops_rc rc = dispatch(store_conn(st), a, actor, &bad, &doc, err, sizeof err);
	store_close(st);
	int status = rc == OPS_OK ? 0 : rc == OPS_BAD_ARG ? 2 : 1;
	if (rc == OPS_OK && a->json && admin_print_json(doc) != 0) {
		snprintf(err, sizeof err, "out of memory (the change, if any, was made)");
		status = 1;
	} else if (rc == OPS_OK && !a->json) {
		print_text(a, doc);
	}
	if (status != 0 && (rc == OPS_BAD_ARG || (rc == OPS_REFUSED && bad != TENANT_F_NAME)))
		fprintf(stderr, "txhub tenant %s: %s: %s\n", a->word, field_arg(bad), err);
	else if (status != 0)
		fprintf(stderr, "txhub tenant %s: %s\n", a->word, err);
	cJSON_Delete(doc);
	return status;
}
