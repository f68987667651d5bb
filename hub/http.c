/* http.c: see http.h. libmicrohttpd calls the access handler at least
 * twice per request: first to set up (we allocate the request state),
 * then with body chunks, then once more with no data, when we answer. */
#include "http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct http_request {
	struct MHD_Connection *conn;
	const char *method, *path;
	sbuf body;
	int too_large;
	char peer[64];
};

struct http_server {
	struct MHD_Daemon *mhd;
	http_route *routes;
	size_t nroutes;
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

void http_reply_header(http_reply *reply, const char *name, const char *value)
{
	size_t used = strlen(reply->headers);
	snprintf(reply->headers + used, sizeof reply->headers - used, "%s: %s\n", name, value);
}

/* Split "host:port" / "[v6]:port" into host and port. */
static int split_listen(const char *listen, char *host, size_t hostsz, char *port,
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
	return split_listen(listen, host, sizeof host, port, sizeof port, err, errsz);
}

static const http_route *route_for(const http_server *s, const char *method, const char *path,
                                   int *path_known)
{
	*path_known = 0;
	for (size_t i = 0; i < s->nroutes; i++) {
		const http_route *rt = &s->routes[i];
		size_t pl = strlen(rt->path);
		int match = pl > 1 && rt->path[pl - 1] == '/' ? strncmp(path, rt->path, pl) == 0
		                                              : strcmp(path, rt->path) == 0;
		if (!match)
			continue;
		*path_known = 1;
		if (strcmp(method, rt->method) == 0)
			return rt;
	}
	return NULL;
}

static enum MHD_Result send_reply(struct MHD_Connection *c, http_reply *reply)
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
	for (char *line = reply->headers; *line;) {
		char *nl = strchr(line, '\n'), *colon = strstr(line, ": ");
		if (!nl || !colon || colon > nl)
			break;
		*nl = '\0';
		*colon = '\0';
		MHD_add_response_header(resp, line, colon + 2);
		line = nl + 1;
	}
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

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **state)
{
	(void)version;
	http_server *s = cls;
	http_request *r = *state;
	if (!r) { /* first call: headers only */
		if (!(r = calloc(1, sizeof *r)))
			return MHD_NO;
		r->conn = c;
		r->method = method;
		r->path = url;
		peer_of(c, r->peer, sizeof r->peer);
		*state = r;
		return MHD_YES;
	}
	if (*upload_size > 0) { /* a body chunk */
		if (r->body.len + *upload_size > HTTP_BODY_MAX)
			r->too_large = 1;
		else
			sbuf_put(&r->body, upload, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	http_reply reply;
	memset(&reply, 0, sizeof reply);
	reply.status = 200;
	int known;
	const http_route *rt = route_for(s, method, url, &known);
	if (r->too_large || r->body.oom) {
		reply.status = 413;
		sbuf_puts(&reply.body, "request body too large\n");
	} else if (rt) {
		rt->fn(rt->opaque, r, &reply);
	} else {
		reply.status = known ? 405 : 404;
		sbuf_puts(&reply.body, known ? "method not allowed\n" : "not found\n");
	}
	enum MHD_Result rc = send_reply(c, &reply);
	sbuf_free(&reply.body);
	return rc;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode code)
{
	(void)cls;
	(void)c;
	(void)code;
	http_request *r = *state;
	if (r) {
		sbuf_free(&r->body);
		free(r);
		*state = NULL;
	}
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	char line[512];
	vsnprintf(line, sizeof line, fmt, ap);
	log_one_line(line);
	log_warn("http: %s", line);
}

http_server *http_start(const char *listen, const http_route *routes, size_t n, char *err,
                        size_t errsz)
{
	char host[256], port[8];
	if (split_listen(listen, host, sizeof host, port, sizeof port, err, errsz) != 0)
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
	http_server *s = calloc(1, sizeof *s);
	if (!s || !(s->routes = calloc(n ? n : 1, sizeof *s->routes))) {
		snprintf(err, errsz, "out of memory");
		freeaddrinfo(ai);
		free(s);
		return NULL;
	}
	memcpy(s->routes, routes, n * sizeof *routes);
	s->nroutes = n;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	s->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
	                          ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT, 64u,
	                          MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_NOTIFY_COMPLETED,
	                          on_completed, NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
	                          MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!s->mhd) {
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
		MHD_stop_daemon(s->mhd);
	free(s->routes);
	free(s);
}
