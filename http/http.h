/* http/http.h — tram's HTTP/1.1 server: sockets, parsing, limits, routes,
 * responses (full or streamed, with back-pressure).
 *
 * One libuv loop owns every socket. The owner (the daemon, a test) creates a
 * server on its loop, registers routes, listens (TCP host:port, a unix socket
 * path, or an already-listening fd from systemd), and runs the loop. Requests
 * are parsed by llhttp with keep-alive and pipelining; a handler runs on the
 * loop thread once a request (with its whole body, Content-Length or chunked)
 * has arrived. Pipelined requests are answered in order: the next request on
 * a connection is parsed only after the previous response has ended.
 *
 * Limits answer with the right status and close the connection:
 *   malformed request line or headers 400, header section too big 431, body
 *   too big 413 (from Content-Length before reading it, or while reading a
 *   chunked body), headers or body not complete in time 408 (a slowloris
 *   client is cut off by a total deadline, not an inactivity timer), more
 *   connections than the cap 503 (only when no connection is idle: at the cap a
 *   new connection closes the one that has waited longest for a request,
 *   keep-alive or never used, and a reserve of HTTP_PROBE_RESERVE answers
 *   /health and /metrics when none is idle; a first request must arrive
 *   within a tenth of header_timeout_ms while the cap is near), HTTP/1.1
 *   without Host 400. Unknown path 404,
 *   wrong method on a known path 405 (with Allow), missing or wrong API key
 *   401. Every error body is an OpenAI error object. An idle keep-alive
 *   connection is closed silently after idle_timeout_ms.
 *
 * Ownership: the server owns its connections, their buffers and the request
 * of each; a request's memory (http_req_t and its arena) lives until its
 * response ends or its client goes away. Everything here is single-threaded:
 * call it on the loop thread only (the engine reaches the loop through a
 * uv_async owned by the integration). */
#ifndef TRAM_HTTP_H
#define TRAM_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <llhttp.h>
#include <uv.h>

#include "base/arena.h"

/* ---- limits ---------------------------------------------------------------- */

typedef struct http_limits {
  size_t max_header_bytes;    /* request line + header section; above: 431 */
  int max_headers;            /* header lines; above: 431 */
  size_t max_body_bytes;      /* request body; above: 413 */
  int max_connections;        /* open client connections; excess get 503 + close */
  int max_connections_per_client; /* of one client address (TCP); excess: probe reserve or 503; 0: no limit */
  uint32_t header_timeout_ms; /* first byte (or accept) → headers complete, else 408 */
  uint32_t body_timeout_ms;   /* headers complete → body complete, else 408 */
  uint32_t idle_timeout_ms;   /* keep-alive wait for the next request, then close */
  uint32_t write_stall_ms;    /* output queued and no write completes this long: drop */
  size_t stream_high_water;   /* queued output above which a stream is paused */
  size_t stream_low_water;    /* ... and below which it is resumed */
  size_t max_write_queue;     /* a stream write past this many queued bytes drops the client */
  size_t max_pipeline_bytes;  /* unparsed input buffered while a request is in flight */
  uint32_t linger_ms;         /* after a closing response, read and discard this long */
  int backlog;                /* listen(2) backlog */
} http_limits_t;

/* 16 KiB headers, 100 header lines, 8 MiB body, 1024 connections, timeouts
 * headers 10 s, body 30 s, idle 60 s, write stall 30 s; streams pause above
 * 256 KiB queued and resume below 64 KiB, drop above 8 MiB; 64 KiB of
 * pipelined input; linger 2 s; backlog 511. */
http_limits_t http_limits_default(void);

/* Returns 0 if the limits are usable, else -EINVAL after logging which field
 * is wrong (zero sizes or timeouts, low water >= high water, ...). */
int http_limits_check(const http_limits_t *l);

/* ---- requests -------------------------------------------------------------- */

typedef struct http_header {
  const char *name; /* as sent, NUL-terminated */
  size_t name_len;
  const char *value; /* trimmed by llhttp, NUL-terminated */
  size_t value_len;
} http_header_t;

/* A parsed request, read-only for handlers. Every pointer stays valid until
 * the response ends (http_res_send / http_res_stream_end) or on_abort runs. */
typedef struct http_req {
  uint64_t id;            /* unique within the server, from 1 */
  llhttp_method_t method; /* HTTP_GET, HTTP_POST, ... (HEAD is routed as GET) */
  const char *method_name;
  const char *path; /* URL path, no query, NUL-terminated, not decoded */
  size_t path_len;
  const char *query; /* after '?', "" when none, not decoded */
  size_t query_len;
  const http_header_t *headers; /* [n_headers] in arrival order */
  int n_headers;
  const char *body; /* [body_len] bytes + a NUL, "" when empty */
  size_t body_len;
  int http_major, http_minor;
  const char *peer;    /* "1.2.3.4:5678", "[::1]:5678" or "unix" */
  arena_t *arena; /* the request's arena; handlers may allocate from it */
} http_req_t;

/* The value of the first header named `name` (ASCII case-insensitive), or
 * NULL. */
const char *http_req_header(const http_req_t *req, const char *name);

/* ---- responses -------------------------------------------------------------
 *
 * A handler gets a response handle and must, now or later (on the loop
 * thread), either end it (http_res_send, or stream_begin ... stream_end) or
 * have set on_abort before returning. The handle is valid until the first of:
 * the response ends (on return from send/stream_end, whatever they return),
 * or on_abort returns. on_abort runs when the client goes away or the server
 * closes before the response ended; it never runs from inside a call the owner
 * made into this API (it is always a fresh event of the loop).
 *
 * Back-pressure: the server counts the bytes queued in writes on the
 * connection. When a stream write leaves more than stream_high_water queued,
 * the response becomes unwritable and on_writable(res, false) runs (once);
 * when the queue drains below stream_low_water, on_writable(res, true) runs.
 * The producer should stop producing while unwritable (the integration pauses
 * that request's output). Writes while unwritable still succeed until
 * max_write_queue; past it, or when no queued write completes for
 * write_stall_ms, the client is dropped with a log line and on_abort follows. */

typedef struct http_res http_res_t;

typedef struct http_res_cbs {
  void (*on_abort)(http_res_t *res, void *user);
  void (*on_writable)(http_res_t *res, bool writable, void *user); /* optional */
  void *user;
} http_res_cbs_t;

/* Installs the callbacks (copied). May be called again to replace them. */
void http_res_set_callbacks(http_res_t *res, const http_res_cbs_t *cbs);

/* The request this response answers. */
const http_req_t *http_res_req(const http_res_t *res);

/* Adds a response header (both strings copied) before the head is sent.
 * Returns 0, -EINVAL for a name or value with CR/LF/NUL or a head already
 * sent. Content-Length, Transfer-Encoding, Connection and Date are the
 * server's. */
int http_res_header(http_res_t *res, const char *name, const char *value);

/* Sends a whole response (head + body) and ends it. Returns 0, or -EPIPE if
 * the connection is closing (the response is ended either way). */
int http_res_send(http_res_t *res, int status, const char *content_type, const void *body,
                  size_t len);

/* Sends an error with `status` and ends the response: the body the
 * server's error writer makes (http_server_set_error_body; tram serve: an
 * OpenAI error object {"error":{message,type,param,code}}). param and code
 * may be NULL; type NULL lets the writer pick one from the status. */
int http_res_send_error(http_res_t *res, int status, const char *type, const char *message,
                        const char *param, const char *code);

/* Starts a streamed response: sends the head now, with chunked transfer
 * encoding for HTTP/1.1 (HTTP/1.0: no framing, the connection closes at the
 * end). content_type "text/event-stream" also sets Cache-Control: no-cache.
 * Returns 0, -EINVAL if the head was already sent, or -EPIPE. */
int http_res_stream_begin(http_res_t *res, int status, const char *content_type);

/* Queues len bytes as one chunk of the stream (len 0 writes nothing).
 * Returns 0; -EPIPE if the connection is closing or was just dropped for
 * exceeding max_write_queue (on_abort follows); -EINVAL before stream_begin. */
int http_res_stream_write(http_res_t *res, const void *data, size_t len);

/* Queues one server-sent event: "data: <line>\n" for each line of data (a
 * line ends at \n), then "\n". `data: [DONE]` is http_res_sse(res, "[DONE]",
 * 6). Returns as http_res_stream_write. */
int http_res_sse(http_res_t *res, const char *data, size_t len);

/* Ends a stream (the final empty chunk) and the response. Returns 0 or
 * -EPIPE (the response is ended either way). */
int http_res_stream_end(http_res_t *res);

/* False while the stream is paused by back-pressure (see above). */
bool http_res_writable(const http_res_t *res);

/* Bytes queued in writes on this response's connection, not yet taken by the
 * kernel. */
size_t http_res_queued(const http_res_t *res);

/* Bytes written but not yet taken by the client: those queued here plus
 * those in the kernel's send queue (SIOCOUTQ: unsent or unacknowledged). A
 * client that reads keeps this small; one that stopped reading makes it
 * grow once its receive window closes. */
size_t http_res_unsent(const http_res_t *res);

/* Drops the client now, as the write-stall limit does: the connection is
 * closed without ending the response (counted in the server's `dropped`),
 * and on_abort follows as for a client that left. For a producer that finds
 * its client not reading (http_res_unsent) for too long. No-op when the
 * connection is already going. */
void http_res_drop(http_res_t *res);

/* ---- server ---------------------------------------------------------------- */

typedef struct http_server http_server_t;

/* A route handler; runs on the loop thread. See "responses" above. */
typedef void (*http_handler_fn)(const http_req_t *req, http_res_t *res, void *ctx);

enum {
  HTTP_ROUTE_PUBLIC = 1, /* no API key needed (e.g. /health) */
  HTTP_ROUTE_PROBE = 2,  /* answerable over the connection cap (/health, /metrics) */
  HTTP_ROUTE_JSON = 4,   /* the body is JSON: a Content-Type other than application/json
                          * (charset, if given, utf-8), or none, is 415 */
};

/* Connections over the cap that may still ask for HTTP_ROUTE_PROBE routes
 * (one request each, then closed), so that a prober gets through when every
 * counted connection has a request in flight. */
#define HTTP_PROBE_RESERVE 16

/* Raises the soft RLIMIT_NOFILE to its hard limit and returns a connection
 * cap that leaves `reserve` descriptors for the rest of the process (at
 * least 16, at most 65536); logs what it did. */
int http_connection_cap_from_fds(int reserve);

typedef struct http_server_stats {
  uint64_t connections_accepted; /* including those rejected for the cap */
  uint64_t connections_rejected; /* over max_connections or max_connections_per_client (503) */
  uint64_t connections_over_client; /* arrived over max_connections_per_client (into the probe
                                     * reserve, or refused) */
  uint32_t connections_open;     /* counted against max_connections */
  uint64_t requests;             /* dispatched to a handler or answered by the server */
  uint64_t timeouts;             /* 408s */
  uint64_t dropped;              /* clients dropped for a stuck or overfull write queue */
  uint64_t evicted;              /* idle connections closed at the cap to make room */
  uint32_t probe_open;           /* reserve connections open (HTTP_PROBE_RESERVE at most) */
  size_t max_queued;             /* the most bytes ever queued on one connection */
} http_server_stats_t;

/* Creates a server on `loop` with a copy of `limits` (NULL: the defaults).
 * Returns NULL after logging why (bad limits). No socket is opened yet. */
http_server_t *http_server_create(uv_loop_t *loop, const http_limits_t *limits);

/* Registers handler for method + exact path (copied). HEAD requests go to the
 * GET handler and get the head only. flags: HTTP_ROUTE_*. Returns 0, -EEXIST
 * for a duplicate, -EINVAL for a path not starting with '/'. */
int http_server_route(http_server_t *srv, llhttp_method_t method, const char *path,
                      http_handler_fn handler, void *ctx, int flags);

/* Requires `Authorization: Bearer <key>` or `x-api-key: <key>` (the
 * Anthropic SDKs' header, which llama.cpp also takes) with one of keys[n]
 * (copied; compared in constant time) on every route not marked
 * HTTP_ROUTE_PUBLIC, and on unknown paths. n == 0 turns auth off. Returns 0
 * or -EINVAL for an empty key. */
int http_server_set_api_keys(http_server_t *srv, const char *const *keys, int n);

/* How the transport writes an error's body (it knows no API format; the
 * API room gives this: api/oai_response.h's oai_error_body): a malloc'd
 * NUL-terminated application/json document for status, message and the
 * optional type, param and code. Until one is set, an error's body is its
 * message as text/plain. */
typedef char *(*http_error_body_fn)(int status, const char *type, const char *message, const char *param,
                                    const char *code);
void http_server_set_error_body(http_server_t *srv, http_error_body_fn fn);
/* The errors of requests whose path starts with prefix (copied; one such
 * prefix per server, a second call replaces it) are written by fn instead:
 * another API's format under its paths (tram serve: Anthropic's under
 * /v1/messages), the transport's own errors (401, 404, 405, 415) included. */
void http_server_set_error_body_for(http_server_t *srv, const char *prefix, http_error_body_fn fn);

/* CORS: a request whose Origin is one of origins[n] (copied; "*": any) gets
 * Access-Control-Allow-Origin (and Vary: Origin) on its answer, whatever the
 * status; a preflight (OPTIONS with Origin and
 * Access-Control-Request-Method) to a known path is answered 200 with the
 * allowed methods and headers, before and without authentication, or 403
 * for an origin not allowed. n == 0 (the default): no CORS, OPTIONS is an
 * ordinary method (405). Returns 0 or -EINVAL for an empty origin. */
int http_server_set_allowed_origins(http_server_t *srv, const char *const *origins, int n);

/* Listens on host:port (an IPv4 or IPv6 literal or a name; "::" is dual-stack
 * on Linux); port 0 picks a free port, written to *bound_port (may be NULL).
 * Returns 0 or a negative errno after logging why. */
int http_server_listen_tcp(http_server_t *srv, const char *host, int port, int *bound_port);

/* Listens on a unix socket path; a stale socket file there is removed first
 * (any other file is an error). Returns 0 or a negative errno. */
int http_server_listen_unix(http_server_t *srv, const char *path);

/* Serves an already-listening socket (TCP or unix), e.g. from systemd socket
 * activation; the server owns fd from now on (closes it). Returns 0 or
 * -ENOTSOCK / -EINVAL (not listening) / another negative errno. */
int http_server_listen_fd(http_server_t *srv, int fd);

/* Graceful stop: closes the listeners now, closes idle keep-alive
 * connections, lets every request that has started arriving finish (its
 * response carries Connection: close), and calls on_drained(arg) from the
 * loop once no connection is left. The server stays allocated; free it with
 * http_server_close(). Calling it twice is a no-op returning -EALREADY. */
int http_server_drain(http_server_t *srv, void (*on_drained)(void *arg), void *arg);

/* Hard stop: closes listeners and every connection now (responses in flight
 * get on_abort), then frees the server and calls on_closed(arg) (may be NULL)
 * from the loop once every handle's close callback has run. srv is invalid
 * after this call. NULL is a no-op. */
void http_server_close(http_server_t *srv, void (*on_closed)(void *arg), void *arg);

/* Counters since creation. */
void http_server_stats(const http_server_t *srv, http_server_stats_t *out);

/* The standard reason phrase of a status ("Not Found"), "Unknown" if none. */
const char *http_status_reason(int status);

#endif
