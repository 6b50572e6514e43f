/* http/http_internal.h — internal: the server's, connections' and
 * responses' state, shared by http_server.c (listeners, accept, stop),
 * http_conn.c (reading, parsing, timers, close), http_res.c (writing,
 * back-pressure) and http_route.c (routes, auth). Not for use outside
 * http/http_*.c. */
#ifndef TRAM_HTTP_INTERNAL_H
#define TRAM_HTTP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <uv.h>

#include "http/http.h"
#include "http/http_parse.h"

typedef struct http__conn http__conn_t;

/* A stream handle of either kind: TCP or unix socket. */
typedef union http__io {
  uv_handle_t handle;
  uv_stream_t stream;
  uv_tcp_t tcp;
  uv_pipe_t pipe;
} http__io_t;

/* One request and its response (the handle handlers get). Freed when the
 * response ends, or after on_abort when the connection goes first. */
struct http_res {
  http__conn_t *conn; /* NULL once the connection is gone */
  http_req_t req;
  arena_t arena; /* the request's memory (req strings, handler data) */
  char *body_buf;     /* the request body, malloc'd by the parser */
  http_res_cbs_t cbs;
  bool keep_alive;  /* the connection may carry another request after this */
  bool is_head;     /* HEAD: send the head only */
  bool head_sent;   /* the status line and headers are queued */
  bool streaming;   /* stream_begin was called */
  bool chunked;     /* the stream uses chunked framing */
  bool paused;      /* unwritable (back-pressure) */
  bool in_abort;    /* on_abort is running: calls on it are no-ops */
  char *extra;      /* "Name: value\r\n" lines from http_res_header */
  size_t extra_len, extra_cap;
};

typedef enum {
  HTTP__TIMER_NONE = 0,
  HTTP__TIMER_WAIT,    /* no byte of the next request yet: close quietly */
  HTTP__TIMER_HEADERS, /* header section deadline: 408 */
  HTTP__TIMER_BODY,    /* body deadline: 408 */
  HTTP__TIMER_RESUME,  /* 0 ms: parse input buffered while a request was in flight */
  HTTP__TIMER_LINGER,  /* after a closing response: close */
} http__timer_t;

struct http__conn {
  http__io_t io;
  uv_timer_t timer;  /* read-side deadlines, resume, linger */
  uv_timer_t wtimer; /* write stall */
  uv_shutdown_t shut;
  http_server_t *srv;
  http__conn_t *prev, *next; /* the server's list */
  http__parser_t parser;
  http_res_t *ex;           /* the request being handled, or NULL */
  char *pending;            /* input that arrived while ex was in flight */
  size_t pending_len, pending_cap;
  size_t queued;            /* bytes in uv_write requests not completed yet */
  size_t discarded;         /* bytes read and dropped while lingering */
  http__timer_t timer_kind;
  bool timer_graced;        /* this arming's deadline was put off once (http__conn_ready) */
  int pending_closes;       /* handles whose close callback has not run */
  bool reading;             /* uv_read_start is in effect */
  bool closing;             /* uv_close issued; waiting for callbacks */
  bool finishing;           /* no more requests: flush, shut down, linger, close */
  bool lingering;           /* shut down; reading and discarding */
  bool draining;            /* the current or next response is the last */
  bool counted;             /* counts against max_connections */
  bool rejected;            /* accepted over the cap, answered 503 */
  bool in_dispatch;         /* a handler is running on this connection */
  bool first;               /* no request received yet */
  bool probe_only;          /* accepted over the cap into the probe reserve */
  bool idle;                /* on the server's idle queue (http_guard.c) */
  http__conn_t *iprev, *inext; /* the idle queue, oldest first */
  char peer[64];
  char addr[48];            /* the client's IP address alone ("" for a Unix socket) */
};

typedef struct http__route {
  llhttp_method_t method;
  char *path;
  http_handler_fn handler;
  void *ctx;
  int flags;
} http__route_t;

typedef struct http__listener {
  http__io_t io;
  http_server_t *srv;
  struct http__listener *next;
  char *unix_path; /* a socket file we created, removed on close */
  bool is_pipe;
} http__listener_t;

struct http_server {
  uv_loop_t *loop;
  http_limits_t limits;
  http__route_t *routes;
  int n_routes;
  size_t cap_routes;
  char **keys; /* API keys; none: auth off */
  size_t *key_lens;
  int n_keys;
  http_error_body_fn error_body; /* how errors are written (the API's format); NULL: text/plain */
  char *error_prefix;            /* requests under this path prefix write errors with error_body_for */
  http_error_body_fn error_body_for;
  char **origins; /* CORS allowed origins (http_cors.c); none: no CORS headers */
  int n_origins;
  http__listener_t *listeners;
  int handles_open;           /* listeners + the defer timer, not yet closed */
  uv_timer_t defer;           /* runs deferred server-level callbacks */
  http__conn_t *conns;        /* every connection, the rejected included */
  int n_rejecting;            /* rejected connections still open */
  http__conn_t *idle_head, *idle_tail; /* connections waiting for a request, oldest first */
  bool draining, closing;
  void (*on_drained)(void *);
  void *drained_arg;
  void (*on_closed)(void *);
  void *closed_arg;
  uint64_t next_req_id;
  http_server_stats_t stats;
  time_t date_sec; /* the second date[] was formatted for */
  char date[40];   /* "Sun, 06 Nov 1994 08:49:37 GMT" */
  char read_buf[64 * 1024];
};

/* http_conn.c */
void http__conn_accepted(http__conn_t *c);          /* starts reading and the first deadline */
void http__conn_close(http__conn_t *c);             /* closes now; on_abort follows if in flight */
void http__conn_finish(http__conn_t *c);            /* flush, shut down, linger, close */
void http__conn_response_ended(http__conn_t *c, bool keep_alive); /* ex has been freed */
void http__conn_send_error(http__conn_t *c, int status, const char *message); /* + finish */
/* An error's body as srv's writer makes it (malloc'd), and its content type. */
char *http__error_body(const http_server_t *srv, int status, const char *type, const char *message,
                       const char *param, const char *code, const char **content_type);

/* http_guard.c: the connection budget */
void http__idle_add(http__conn_t *c);    /* c waits for (or reads) a request */
/* Whether c's socket has input waiting (events POLLIN) or room for output
 * (POLLOUT) that the loop has not handled yet. A loop that was busy for
 * longer than a deadline runs its timers before it polls its sockets: a
 * deadline that finds the client's bytes waiting is the loop's delay, not the
 * client's, and is put off. */
bool http__conn_ready(http__conn_t *c, short events);
void http__idle_remove(http__conn_t *c); /* no longer (no-op if not queued) */
/* Closes the connection that has waited longest for a request (never one
 * with a request in flight) and stops counting it at once. Returns whether
 * there was one. */
bool http__evict_idle(http_server_t *srv);
/* The deadline for c's first request: header_timeout_ms, cut to a tenth
 * (at least 1 s) while more than three quarters of the cap are open. */
uint32_t http__first_wait_ms(const http__conn_t *c);
/* Whether c's address already holds max_connections_per_client counted
 * connections (never for a Unix socket, or with no limit). */
bool http__client_over_limit(const http__conn_t *c);
/* A probe_only connection asking for a route without HTTP_ROUTE_PROBE:
 * answers 503 and returns true. */
bool http__probe_refused(http_res_t *res, int route_flags);

/* http_res.c */
http_res_t *http__res_new(http__conn_t *c);
void http__res_free(http_res_t *res);
/* Queues bufs[n] on the connection (copying what the kernel does not take
 * now). Returns 0 or -EPIPE (closing; the connection is being closed). */
int http__conn_write(http__conn_t *c, const uv_buf_t *bufs, unsigned n);
/* Builds and queues a whole response on c (no http_res_t needed). */
int http__write_response(http__conn_t *c, int status, bool keep_alive, int http_minor,
                         bool head_only, const char *content_type, const char *extra,
                         size_t extra_len, const void *body, size_t len);

/* http_route.c */
void http__route_dispatch(http_server_t *srv, http_res_t *res);
/* Whether a Content-Type value (NULL: none) is application/json (RFC
 * 8259's one media type; any case), its parameters anything but a charset
 * other than utf-8 (JSON text is UTF-8): what HTTP_ROUTE_JSON asks. */
bool http__json_media_type(const char *v);
void http__routes_free(http_server_t *srv);

/* http_cors.c: adds the CORS headers to res for an allowed Origin; answers a
 * preflight (allow: the path's methods, "GET, POST") and returns true, else
 * false (the request goes on to authentication and its handler). */
bool http__cors(http_server_t *srv, http_res_t *res, const char *allow);
void http__cors_free(http_server_t *srv);

/* http_server.c */
void http__server_conn_gone(http_server_t *srv, http__conn_t *c); /* unlink + checks */
const char *http__date(http_server_t *srv);

#endif
