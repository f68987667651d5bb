/* reference.h: what the tables know, as markdown for docs/: `txhub
 * reference config|metrics|alerts|exits` prints it, tools/regen_docs.py
 * puts it between the markers of the pages (docs/contributing.md:
 * Generated reference tables) and tests/docs/check_docs.py fails when a
 * page differs. */
#ifndef TXHUB_REFERENCE_H
#define TXHUB_REFERENCE_H

#include <stdio.h>

/* The exit statuses of every command (docs/troubleshooting.md: Exit
 * statuses): the status, a few words for `txhub help` and the meaning
 * (markdown). */
typedef struct {
	int status;
	const char *brief;
	const char *md;
} reference_exit;
extern const reference_exit reference_exits[]; /* ends with brief NULL */

/* "exit status: 0 done, 1 ..., 2 ...\n", the line of `txhub help`. */
void reference_write_exit_line(FILE *out);

/* The reference named what ("config", "metrics", "alerts", "exits") as a
 * markdown table. Returns 0, or -1 when what names none. */
int reference_write(FILE *out, const char *what);

/* The names reference_write takes, "config, metrics, alerts or exits". */
extern const char reference_names[];

#endif
