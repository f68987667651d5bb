/* console_int.h: what the console's files share (console.c: the server,
 * its routes and the checks every request passes; console_pages.c: the
 * pages; console_actions.c: the POSTs; console_view.c: the HTML around
 * them). Internal to the console: nothing else includes it.
 *
 * Threads: a request is handled on its connection's thread from start to
 * end; a console_req belongs to that thread. The console struct is read
 * by every thread and written only before the server starts and after it
 * stopped; its sessions, throttle and db have locks of their own. */
#ifndef TXHUB_CONSOLE_INT_H
#define TXHUB_CONSOLE_INT_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "config.h"
#include "console_auth.h"
#include "console_db.h"
#include "console_throttle.h"
#include "form.h"
#include "http.h"
#include "ops.h"
#include "sbuf.h"

/* Most messages one action takes, and most rows a page lists. */
#define CONSOLE_SELECT_MAX 100
#define CONSOLE_PAGE_ROWS_MAX 500
/* Bytes of a rejected value shown in the list (its own page shows all). */
#define CONSOLE_VALUE_PREVIEW 300

typedef struct console console;

struct console {
	const txhub_config *cfg;
	int open_mode;              /* no token: a name alone logs in (loopback only) */
	console_sessions *sessions;
	console_throttle *throttle; /* wrong tokens per client address */
	console_db *db;
	http_server *http;
};

/* One request being answered. */
typedef struct {
	console *c;
	const http_request *req;
	http_reply *reply;
	int logged_in;
	console_session sess;                /* when logged_in */
	char sid[SECRET_HEX + 1];    /* the session cookie when logged_in, else "" */
	form form;                           /* a POST's fields */
} console_req;

/* ---- replies (console.c) ---- */

/* A plain-text answer: status and one line of text (a newline is added). */
void console_text(console_req *q, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* An error a person reads: an HTML page with the menu for a logged-in
 * page request, else plain text. */
void console_error(console_req *q, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A redirect (302 or 303) to a path of the console. */
void console_redirect(console_req *q, int status, const char *location);
/* Answer for an ops_rc that is not OPS_OK: 400, 404, 409 or 503. */
void console_ops_error(console_req *q, ops_rc rc, const char *err);

/* What ops.h says of a missing message, word for word, into err: another
 * tenant's message is answered with it too (no existence leak). */
void console_no_message(const char *biz_id, const char *message_key, char *err, size_t errsz);

/* A borrowed PostgreSQL connection, or NULL after answering 503. */
struct pg_conn *console_conn(console_req *q);
void console_conn_done(console_req *q, struct pg_conn *conn);

/* A tenant-name argument of the global session (a filter), or NULL when
 * absent; -1 after answering 400 (malformed, or any value in a scoped
 * session: it sees its own tenant only). */
int console_tenant_param(console_req *q, const char *name, const char **out);

/* The actor for the history: "console:<name>". */
void console_actor(const console_req *q, char *out, size_t outsz);

/* ---- parameters (console.c) ---- */

/* Query argument name, or NULL when absent or empty. */
const char *console_param(console_req *q, const char *name);
/* An integer argument in lo..hi (def when absent); -1 after answering 400. */
int console_int_param(console_req *q, const char *name, long long lo, long long hi,
                      long long def, long long *out);
/* An id argument (envelope rules) or NULL when absent; -1 after 400. */
int console_id_param(console_req *q, const char *name, const char *field, size_t max,
                     const char **out);
/* A local path to go back to (a page of the console with its query), or
 * NULL when v is not one. */
const char *console_local_path(const char *v);

/* ---- HTML (console_view.c) ---- */

/* The tenant the session sees (a tenant's console token), or NULL for the
 * global session (console.token, or console.open). Every read and action
 * passes it to its query as a parameter: a tenant sees and acts on rows
 * with its name only. Borrowed from q. */
const char *console_scope(const console_req *q);

/* The page's head, the menu (nav names the current item: "overview",
 * "stuck", "rejected", "conflicts", "tenants", "search", or NULL), and the session's
 * flash. Sets the content type. */
void view_begin(console_req *q, const char *title, const char *nav);
void view_end(console_req *q);
/* The body buffer, for the pages' own HTML. */
sbuf *view_out(console_req *q);
/* Escaped text (NULL writes nothing). */
void view_text(console_req *q, const char *s);
/* A JSON string member as text ("-" for null or absent). */
void view_jtext(console_req *q, const cJSON *o, const char *name);
/* How a cell of a table of rows (class "rows") shows a value that may be
 * longer than its column: the style sheet shares out the page's width
 * among the columns (widths from the head's classes) and cuts the rest. */
typedef enum {
	VIEW_LINE,  /* one line, cut with an ellipsis; whole in the cell's title */
	VIEW_PROSE, /* a reason or an error: up to three lines, then cut; whole in the title */
	VIEW_WHOLE, /* all of it, wrapped anywhere (on the page about one message) */
} view_fit;
/* <td class="line|prose|whole[ cls]" title="title">, for a cell whose
 * content the caller writes (title NULL: none; VIEW_WHOLE has none). */
void view_td(console_req *q, view_fit kind, const char *cls, const char *title);
/* A whole cell of text (NULL shows "-"), or of a JSON member as
 * view_jtext() writes it. */
void view_cell(console_req *q, view_fit kind, const char *cls, const char *text);
void view_jcell(console_req *q, view_fit kind, const cJSON *o, const char *name);
/* The cell "src_topic / src_partition / src_offset" of a row: a long
 * topic is cut, the partition and offset stay in sight. */
void view_src_cell(console_req *q, view_fit kind, const cJSON *o);
/* A link to the message page of (biz_id, message_key), showing the key. */
void view_message_link(console_req *q, const char *biz_id, const char *message_key);
/* An age in seconds as "4m 12s" ("-" when negative). */
void view_age(console_req *q, double seconds);
/* The hidden CSRF field of the session's forms. */
void view_csrf(console_req *q);
/* How view_bytes() shows a value. */
enum { VIEW_BYTES_TEXT, VIEW_BYTES_HEX, VIEW_BYTES_PREVIEW };
/* A payload or record value, at most max_bytes of it: text in <pre>, or
 * (VIEW_BYTES_HEX, or bytes that are not text) a hex dump, or for
 * VIEW_BYTES_PREVIEW (a narrow column) bytes that are not text as hex
 * pairs that wrap; value as ops_payload_text() gave it. */
void view_bytes(console_req *q, const char *value, const char *encoding, int how,
                size_t max_bytes);
/* The selection value of one message in an action form: "<n>:<biz_id><message_key>",
 * n the bytes of biz_id. */
void view_selection(console_req *q, const char *biz_id, const char *message_key);
/* Parse such a value into biz_id and message_key. Returns 0, or -1 with
 * the reason in err. */
int view_selection_parse(const char *v, char *biz, size_t bizsz, char *key, size_t keysz,
                         char *err, size_t errsz);

/* Table cells of one message row of ops_list(): why it is listed (or
 * NULL), biz_id, the key linked to its page, status, send status,
 * attempts, age and last error; with a checkbox for an action form. */
void view_row_cells(console_req *q, const cJSON *row, const char *why, int checkbox);
/* The header row that goes with it. Both have a tenant column in the
 * global session only (a scoped one sees its own tenant's rows only). */
void view_row_head(console_req *q, int why, int checkbox);
/* A global session's tenant filter in a filters form (parameter
 * "tenant", value the current one or NULL); nothing in a scoped session. */
void view_tenant_filter(console_req *q, const char *tenant);
/* A table (id) of ops_rejected_list()'s rows, each linked to its page. */
void view_rejected_rows(console_req *q, const cJSON *rows, const char *id);

/* ---- the pages and actions ---- */

/* The login page, with error (or NULL) above the form, answered with
 * status; next: a local path to go to after the login, or NULL. */
void page_login_form(console_req *q, int status, const char *error, const char *next);

void page_root(console_req *q);
void page_login(console_req *q);
void page_overview(console_req *q);
void page_api_overview(console_req *q);
void page_stuck(console_req *q);
void page_message(console_req *q);
void page_rejected(console_req *q);
void page_conflicts(console_req *q);
void page_search(console_req *q);
void page_tenants(console_req *q);
void action_login(console_req *q);
void action_logout(console_req *q);
void action_messages(console_req *q);

/* The overview's document: ops_status_json() with the lag, plus
 * "parked_rows" (the newest check_failed rows and failed sends) and
 * "read_at". NULL after answering an error. */
cJSON *console_overview_doc(console_req *q);

/* The newest check_failed rows and failed sends (of tenant; NULL: any),
 * ten of each, appended to rows. */
ops_rc console_parked_rows(struct pg_conn *conn, const char *tenant, cJSON *rows, char *err,
                           size_t errsz);

#endif
