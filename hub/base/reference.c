/* reference.c: the tables as markdown (see reference.h). */
#include "reference.h"

#include <string.h>

#include "alert.h"
#include "config.h"
#include "metrics.h"

const reference_exit reference_exits[] = {
	{0, "done",
	 "done: `run` stopped by a signal after draining, `migrate` finished, `devbroker` "
	 "stopped, `help`/`version`/`config`/`reference`"},
	{1, "run-time failure",
	 "failure at run time: `migrate` could not connect or a migration failed; `run` found "
	 "the schema at the wrong version or could not create its Kafka clients; a second stop "
	 "signal; an admin command refused (no such message, not allowed in its state) or could "
	 "not reach a migrated database"},
	{2, "bad usage or configuration",
	 "bad usage or configuration: unknown command or argument, unknown key, bad value "
	 "(including a `kafka.*` property librdkafka rejects), unreadable configuration file; an "
	 "admin command's unknown option or status, malformed duration, bad id, `--commit` with "
	 "`--rollback`; the message names the key or argument"},
	{0, NULL, NULL},
};

const char reference_names[] = "config, metrics, alerts or exits";

void reference_write_exit_line(FILE *out)
{
	fputs("exit status:", out);
	for (const reference_exit *e = reference_exits; e->brief; e++)
		fprintf(out, "%s %d %s", e == reference_exits ? "" : ",", e->status, e->brief);
	fputc('\n', out);
}

/* s as one cell of a markdown table: a '|' would end the cell, a newline
 * the row. */
static void cell(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			fputs("\\|", out);
		else
			fputc(*s == '\n' ? ' ' : *s, out);
	}
}

/* `s` as a cell, or "empty" when s is "". */
static void code_cell(FILE *out, const char *s, const char *none)
{
	if (*s)
		fprintf(out, "`%s`", s);
	else
		fputs(none, out);
}

static void write_config(FILE *out)
{
	fputs("| key | type | default | environment | SIGHUP | meaning |\n"
	      "| --- | --- | --- | --- | --- | --- |\n", out);
	for (const config_option *o = config_options; o->key; o++) {
		char type[256];
		config_type_text(o, type, sizeof type);
		fprintf(out, "| `%s` | ", o->key);
		cell(out, type);
		fputs(" | ", out);
		code_cell(out, o->def, "empty");
		fputs(" | ", out);
		code_cell(out, o->env ? o->env : "", "");
		fputs(o->live ? " | applies | " : " | restart | ", out);
		cell(out, o->md ? o->md : o->doc);
		fputs(" |\n", out);
	}
}

static void write_metrics(FILE *out)
{
	fputs("| metric | type | meaning |\n"
	      "| --- | --- | --- |\n", out);
	for (const metrics_metric *r = metrics_table; r->name; r++) {
		fprintf(out, "| `%s%s%s%s` | %s | ", r->name, *r->labels ? "{" : "", r->labels,
		        *r->labels ? "}" : "", r->type);
		cell(out, r->md ? r->md : r->help);
		fputs(" |\n", out);
	}
}

static void write_alerts(FILE *out)
{
	fputs("| kind | about | raised when |\n"
	      "| --- | --- | --- |\n", out);
	for (size_t i = 0; i < ALERT_NKINDS; i++) {
		fprintf(out, "| `%s` | ", alert_kinds[i].kind);
		cell(out, alert_kinds[i].about);
		fputs(" | ", out);
		cell(out, alert_kinds[i].md);
		fputs(" |\n", out);
	}
}

static void write_exits(FILE *out)
{
	fputs("| status | meaning |\n"
	      "| --- | --- |\n", out);
	for (const reference_exit *e = reference_exits; e->brief; e++) {
		fprintf(out, "| %d | ", e->status);
		cell(out, e->md);
		fputs(" |\n", out);
	}
}

int reference_write(FILE *out, const char *what)
{
	static const struct {
		const char *name;
		void (*write)(FILE *out);
	} refs[] = {
		{"config", write_config},
		{"metrics", write_metrics},
		{"alerts", write_alerts},
		{"exits", write_exits},
	};
	for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
		if (strcmp(refs[i].name, what) == 0) {
			refs[i].write(out);
			return 0;
		}
	}
	return -1;
}
