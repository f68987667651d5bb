/* http.c: see http.h. libmicrohttpd calls the access handler at least
 * twice per request: first to set up (we allocate the request state, and
 * refuse a body announced too large before reading it), then with body
 * chunks, then once more with no data, when we answer. */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "html.h"
#include "http_guard.h"
#include "log.h"

struct http_request {
	struct MHD_Connection *conn;
	const char *method, *path;
	sbuf body;
	int too_large;
	int answered; /* a reply was queued before the body was read */
	size_t dropped; /* bytes of a too large body read and dropped */
	char peer[64];
};

/* Most bytes of a too large body read and dropped before the connection
 * is closed instead of answered. */
#define HTTP_DROP_MAX (1024 * 1024)

struct http_server {
	struct MHD_Daemon *mhd;
	http_route *routes;
	size_t nroutes;
	size_t body_max;
	char *headers; /* http_options.headers, or NULL */
	http_guard *guard;
};

const char *http_header(const http_request *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *http_query(const http_request *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *http_cookie(const http_request *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, name);
}

const char *http_method(const http_request *r) { return r->method; }
const char *http_path(const http_request *r) { return r->path; }
const char *http_peer(const http_request *r) { return r->peer; }

const char *http_body(const http_request *r, size_t *len)
{
	http_request *w = (http_request *)r;
	*len = w->body.len;
	return sbuf_str(&w->body);
}

/* What http_query_check() walks the arguments with. */
typedef struct {
	const char *const *allowed;
	char *err;
	size_t errsz;
	const char *seen[32];
	size_t nseen;
	int bad;
} query_walk;

static int name_allowed(const char *const *allowed, const char *name)
{
	for (; *allowed; allowed++)
		if (strcmp(*allowed, name) == 0)
			return 1;
	return 0;
}

static enum MHD_Result query_one(void *cls, enum MHD_ValueKind kind, const char *key,
                                 size_t key_size, const char *value, size_t value_size)
{
	(void)kind;
	query_walk *w = cls;
	char shown[64];
	log_escape(key, key_size, shown, sizeof shown);
	if (strlen(key) != key_size || !name_allowed(w->allowed, key)) {
		snprintf(w->err, w->errsz, "unknown parameter \"%s\"", shown);
	} else if (value && strlen(value) != value_size) {
		snprintf(w->err, w->errsz, "parameter %s: holds a NUL byte", shown);
	} else {
		for (size_t i = 0; i < w->nseen; i++)
			if (strcmp(w->seen[i], key) == 0) {
				snprintf(w->err, w->errsz, "parameter %s: given more than once", shown);
				w->bad = 1;
				return MHD_NO;
			}
		/* allowed lists are short: more names than seen[] holds is a repeat */
		if (w->nseen < sizeof w->seen / sizeof w->seen[0])
			w->seen[w->nseen++] = key;
		return MHD_YES;
	}
	w->bad = 1;
	return MHD_NO;
}

int http_query_check(const http_request *r, const char *const *allowed, char *err,
                     size_t errsz)
{
	query_walk w = {.allowed = allowed, .err = err, .errsz = errsz};
	MHD_get_connection_values_n(r->conn, MHD_GET_ARGUMENT_KIND, query_one, &w);
	return w.bad ? -1 : 0;
}

static enum MHD_Result target_one(void *cls, enum MHD_ValueKind kind, const char *key,
                                  size_t key_size, const char *value, size_t value_size)
{
	(void)kind;
	sbuf *b = cls;
	(void)key_size; /* NUL-holding arguments are refused by http_query_check() */
	(void)value_size;
	sbuf_puts(b, b->len && memchr(b->data, '?', b->len) ? "&" : "?");
	html_url_param(b, key);
	if (value) {
		sbuf_puts(b, "=");
		html_url_param(b, value);
	}
	return MHD_YES;
}

void http_request_target(const http_request *r, sbuf *out)
{
	sbuf tmp = {0};
	sbuf_puts(&tmp, r->path);
	MHD_get_connection_values_n(r->conn, MHD_GET_ARGUMENT_KIND, target_one, &tmp);
	sbuf_put(out, tmp.data, tmp.len);
	out->oom |= tmp.oom;
	sbuf_free(&tmp);
}

void http_reply_header(http_reply *reply, const char *name, const char *value)
{
	size_t used = strlen(reply->headers);
	snprintf(reply->headers + used, sizeof reply->headers - used, "%s: %s\n", name, value);
}

int http_listen_split(const char *listen, char *host, size_t hostsz, char *port,
                        size_t portsz, char *err, size_t errsz)
{
	const char *colon, *h = listen, *hend;
	if (*listen == '[') {
		hend = strchr(listen, ']');
		if (!hend || hend[1] != ':') {
			snprintf(err, errsz, "\"%s\": expected [address]:port", listen);
			return -1;
		}
		h = listen + 1;
		colon = hend + 1;
	} else {
		colon = strrchr(listen, ':');
		hend = colon;
		if (!colon || strchr(listen, ':') != colon) {
			snprintf(err, errsz, "\"%s\": expected host:port (an IPv6 address in [ ])", listen);
			return -1;
		}
	}
	size_t hl = (size_t)(hend - h);
	char *end;
	long p = strtol(colon + 1, &end, 10);
	if (hl == 0 || hl >= hostsz || colon[1] < '0' || colon[1] > '9' || *end || p < 1 ||
	    p > 65535) {
		snprintf(err, errsz, "\"%s\": expected host:port with a port 1..65535", listen);
		return -1;
	}
	memcpy(host, h, hl);
	host[hl] = '\0';
	snprintf(port, portsz, "%ld", p);
	return 0;
}

int http_listen_valid(const char *listen, char *err, size_t errsz)
{
	char host[256], port[8];
	return http_listen_split(listen, host, sizeof host, port, sizeof port, err, errsz);
}

static int route_matches(const http_route *rt, const char *path)
{
	size_t pl = strlen(rt->path);
	return pl > 1 && rt->path[pl - 1] == '/' ? strncmp(path, rt->path, pl) == 0
	                                         : strcmp(path, rt->path) == 0;
}

/* The methods path has a route for, as an Allow header value. */
static void allowed_methods(const http_server *s, const char *path, char *out, size_t outsz)
{
	out[0] = '\0';
	for (size_t i = 0; i < s->nroutes; i++) {
		size_t used = strlen(out);
		if (route_matches(&s->routes[i], path) && !strstr(out, s->routes[i].method))
			snprintf(out + used, outsz - used, "%s%s", used ? ", " : "", s->routes[i].method);
	}
}

static const http_route *route_for(const http_server *s, const char *method, const char *path,
                                   int *path_known)
{
	*path_known = 0;
	for (size_t i = 0; i < s->nroutes; i++) {
		const http_route *rt = &s->routes[i];
		if (!route_matches(rt, path))
			continue;
		*path_known = 1;
		if (strcmp(method, rt->method) == 0)
			return rt;
	}
	return NULL;
}

/* Add "Name: value\n" lines to resp; the text is changed in place. */
static void add_header_lines(struct MHD_Response *resp, char *lines)
{
	for (char *line = lines; line && *line;) {
		char *nl = strchr(line, '\n'), *colon = strstr(line, ": ");
		if (!nl || !colon || colon > nl)
			break;
		*nl = '\0';
		*colon = '\0';
		MHD_add_response_header(resp, line, colon + 2);
		line = nl + 1;
	}
}

static enum MHD_Result send_reply(const http_server *s, struct MHD_Connection *c,
                                  http_reply *reply)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(
		reply->body.len, (void *)sbuf_str(&reply->body), MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Content-Type",
	                        reply->content_type ? reply->content_type
	                                            : "text/plain; charset=utf-8");
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	if (s->headers) {
		char defaults[2048];
		snprintf(defaults, sizeof defaults, "%s", s->headers);
		add_header_lines(resp, defaults);
	}
	add_header_lines(resp, reply->headers);
	enum MHD_Result rc = MHD_queue_response(c, (unsigned)reply->status, resp);
	MHD_destroy_response(resp);
	return rc;
}

static void peer_of(struct MHD_Connection *c, char *out, size_t outsz)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	snprintf(out, outsz, "?");
	if (!ci || !ci->client_addr)
		return;
	if (ci->client_addr->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)ci->client_addr)->sin_addr,
		          out, (socklen_t)outsz);
	else if (ci->client_addr->sa_family == AF_INET6)
		inet_ntop(AF_INET6,
		          &((const struct sockaddr_in6 *)(const void *)ci->client_addr)->sin6_addr, out,
		          (socklen_t)outsz);
}

/* Answer with a fixed status and text, and a header when name is not NULL
 * and value not empty. */
static enum MHD_Result send_text(const http_server *s, struct MHD_Connection *c, int status,
                                 const char *text, const char *name, const char *value)
{
	http_reply reply;
	memset(&reply, 0, sizeof reply);
	reply.status = status;
	sbuf_puts(&reply.body, text);
	if (name && value && *value)
		http_reply_header(&reply, name, value);
	enum MHD_Result rc = send_reply(s, c, &reply);
	sbuf_free(&reply.body);
	return rc;
}

/* A Content-Length above the limit: refused before a byte of the body is
 * read (libmicrohttpd then closes the connection instead of reading it). */
static int announced_too_large(const http_server *s, struct MHD_Connection *c)
{
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
	if (!cl)
		return 0;
	char *end;
	errno = 0;
	unsigned long long n = strtoull(cl, &end, 10);
	return errno != 0 || n > s->body_max;
}

/* The headers of a request that tell its body's length. */
typedef struct {
	int content_length, transfer_encoding, spaced_name;
} framing;

static enum MHD_Result framing_one(void *cls, enum MHD_ValueKind kind, const char *key,
                                   size_t key_size, const char *value, size_t value_size)
{
	(void)kind;
	(void)value;
	(void)value_size;
	framing *f = cls;
	f->content_length += strcasecmp(key, "Content-Length") == 0;
	f->transfer_encoding += strcasecmp(key, "Transfer-Encoding") == 0;
	f->spaced_name += strcspn(key, " \t") < key_size;
	return MHD_YES;
}

/* Why the length of the request's body could be read two ways, or NULL.
 * A proxy in front that read it the other way would pass a second request
 * inside the body (RFC 9112 6.3). libmicrohttpd 0.9.75 takes the first
 * Content-Length, lets Transfer-Encoding win over it, and keeps a name
 * with a space before its colon as a header of another name; its strict
 * mode does not refuse these, so the headers it parsed are counted. */
static const char *ambiguous_length(struct MHD_Connection *c)
{
	framing f = {0};
	MHD_get_connection_values_n(c, MHD_HEADER_KIND, framing_one, &f);
	if (f.spaced_name)
		return "a space or tab before a header's colon";
	if (f.content_length > 1)
		return "more than one Content-Length header";
	if (f.content_length && f.transfer_encoding)
		return "both Content-Length and Transfer-Encoding";
	return NULL;
}

/* The first call, headers only: the request's state into *state. */
static enum MHD_Result begin_request(http_server *s, struct MHD_Connection *c, const char *url,
                                     const char *method, void **state)
{
	http_request *r = calloc(1, sizeof *r);
	if (!r)
		return MHD_NO;
	r->conn = c;
	r->method = method;
	r->path = url;
	peer_of(c, r->peer, sizeof r->peer);
	*state = r;
	const char *ambiguous = ambiguous_length(c);
	if (ambiguous) {
		char text[128];
		snprintf(text, sizeof text, "bad request: %s\n", ambiguous);
		r->answered = 1;
		return send_text(s, c, 400, text, "Connection", "close");
	}
	if (announced_too_large(s, c)) {
		r->answered = 1;
		return send_text(s, c, 413, "request body too large\n", NULL, NULL);
	}
	return MHD_YES;
}

/* A chunk of the body. */
static enum MHD_Result take_chunk(const http_server *s, http_request *r, const char *upload,
                                  size_t *upload_size)
{
	if (r->answered) { /* the early 413: the rest of the body is dropped */
		*upload_size = 0;
		return MHD_YES;
	}
	if (r->too_large || r->body.len + *upload_size > s->body_max) {
		/* a body without a Content-Length that outgrew the limit: the
		 * rest is read and dropped, for a 413 at its end, up to a bound;
		 * past it the connection is closed (libmicrohttpd takes no
		 * answer in the middle of a body, and a client could stream for
		 * ever) */
		r->too_large = 1;
		r->dropped += *upload_size;
		*upload_size = 0;
		return r->dropped > HTTP_DROP_MAX ? MHD_NO : MHD_YES;
	}
	sbuf_put(&r->body, upload, *upload_size);
	*upload_size = 0;
	return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **state)
{
	(void)version;
	http_server *s = cls;
	http_request *r = *state;
	if (!r)
		return begin_request(s, c, url, method, state);
	if (*upload_size > 0 || r->answered)
		return take_chunk(s, r, upload, upload_size);
	http_guard_request_in(s->guard, c);
	int known;
	const http_route *rt = route_for(s, method, url, &known);
	if (r->too_large || r->body.oom)
		return send_text(s, c, 413, "request body too large\n", NULL, NULL);
	if (!rt && !known)
		return send_text(s, c, 404, "not found\n", NULL, NULL);
	if (!rt) {
		char allow[128];
		allowed_methods(s, url, allow, sizeof allow);
		return send_text(s, c, 405, "method not allowed\n", "Allow", allow);
	}
	http_reply reply;
	memset(&reply, 0, sizeof reply);
	reply.status = 200;
	rt->fn(rt->opaque, r, &reply);
	enum MHD_Result rc = send_reply(s, c, &reply);
	sbuf_free(&reply.body);
	return rc;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode code)
{
	(void)code;
	http_server *s = cls;
	http_guard_request_done(s->guard, c);
	http_request *r = *state;
	if (r) {
		sbuf_free(&r->body);
		free(r);
		*state = NULL;
	}
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	http_server *s = cls;
	if (http_guard_library_message(s->guard, fmt))
		return;
	char line[512];
	vsnprintf(line, sizeof line, fmt, ap);
	log_one_line(line);
	log_warn("http: %s", line);
}

/* libmicrohttpd on addr, with opts' limits (s->guard started). */
static struct MHD_Daemon *start_daemon(http_server *s, const struct addrinfo *ai,
                                       const http_options *opts)
{
	/* epoll for one thread serving every connection, poll for a thread
	 * per connection: never select(), which cannot watch a socket numbered
	 * past FD_SETSIZE (1024) */
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
	flags |= opts->thread_per_connection ? MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL
	                                     : MHD_USE_EPOLL;
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	unsigned limit = opts->max_connections ? opts->max_connections : 64u;
	/* the logger first: libmicrohttpd reports options after it with it.
	 * Strict (1): an HTTP/1.1 request without Host, or with a space in its
	 * target, is answered 400 (0.9.75 has no stricter level) */
	return MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
	                        mhd_log, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
	                        MHD_OPTION_CONNECTION_LIMIT, limit,
	                        MHD_OPTION_PER_IP_CONNECTION_LIMIT, opts->max_per_address,
	                        MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_STRICT_FOR_CLIENT, 1,
	                        MHD_OPTION_NOTIFY_CONNECTION, http_guard_notify, s->guard,
	                        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_END);
}

/* The server's state from opts: its routes, headers and guard. */
static http_server *server_new(const http_route *routes, size_t n, const http_options *opts,
                               char *err, size_t errsz)
{
	http_server *s = calloc(1, sizeof *s);
	if (!s || !(s->routes = calloc(n ? n : 1, sizeof *s->routes)) ||
	    (opts->headers && !(s->headers = strdup(opts->headers)))) {
		snprintf(err, errsz, "out of memory");
		http_stop(s);
		return NULL;
	}
	memcpy(s->routes, routes, n * sizeof *routes);
	s->nroutes = n;
	s->body_max = opts->body_max ? opts->body_max : HTTP_BODY_MAX;
	http_guard_limits lim = {opts->keys ? opts->keys : "http",
	                         opts->max_connections ? opts->max_connections : 64u,
	                         opts->max_per_address, opts->request_timeout_ms};
	if (!(s->guard = http_guard_start(&lim, err, errsz))) {
		http_stop(s);
		return NULL;
	}
	return s;
}

http_server *http_start(const char *listen, const http_route *routes, size_t n,
                        const http_options *opts, char *err, size_t errsz)
{
	static const http_options none;
	if (!opts)
		opts = &none;
	char host[256], port[8];
	if (http_listen_split(listen, host, sizeof host, port, sizeof port, err, errsz) != 0)
		return NULL;
	struct addrinfo hints, *ai = NULL;
	memset(&hints, 0, sizeof hints);
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	int gai = getaddrinfo(host, port, &hints, &ai);
	if (gai != 0) {
		snprintf(err, errsz, "%s: %s", listen, gai_strerror(gai));
		return NULL;
	}
	http_server *s = server_new(routes, n, opts, err, errsz);
	if (s)
		s->mhd = start_daemon(s, ai, opts);
	freeaddrinfo(ai);
	if (s && !s->mhd) {
		snprintf(err, errsz, "cannot listen on %s (in use, or not an address of this host)",
		         listen);
		http_stop(s);
		return NULL;
	}
	return s;
}

void http_stop(http_server *s)
{
	if (!s)
		return;
	if (s->mhd)
		MHD_stop_daemon(s->mhd); /* closes every connection: the guard's list empties */
	http_guard_stop(s->guard);
	free(s->routes);
	free(s->headers);
	free(s);
}
