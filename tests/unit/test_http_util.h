/* tests/unit/test_http_util.h — support for the HTTP server tests: the
 * server under test runs on its own libuv loop in a thread of the test
 * process; the test talks to it over real sockets with blocking clients
 * (receive timeouts, so a bug fails a test instead of hanging it) and parses
 * responses with llhttp in response mode. Header-only (static inline) so each
 * test_http*.c binary gets its own copy. */
#ifndef TRAM_TEST_HTTP_UTIL_H
#define TRAM_TEST_HTTP_UTIL_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <llhttp.h>
#include <uv.h>

#include "api/oai_response.h"
#include "http/http.h"

/* ---- the server thread -------------------------------------------------------- */

typedef void (*th_fn)(void *arg);

typedef struct th_server {
  uv_loop_t loop;
  uv_async_t wake; /* runs the queued call on the loop thread */
  uv_thread_t thread;
  uv_mutex_t mu;
  uv_cond_t cv;
  th_fn call;      /* the pending call, NULL when none */
  void *call_arg;
  bool call_done;
  bool stop;       /* close the server and the async, then return */
  http_server_t *srv;
  int port;
} th_server_t;

static inline double th_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void th__on_wake(uv_async_t *a) {
  th_server_t *t = a->data;
  uv_mutex_lock(&t->mu);
  th_fn fn = t->call;
  void *arg = t->call_arg;
  bool stop = t->stop;
  uv_mutex_unlock(&t->mu);
  if (fn) {
    fn(arg);
    uv_mutex_lock(&t->mu);
    t->call = NULL;
    t->call_done = true;
    uv_cond_broadcast(&t->cv);
    uv_mutex_unlock(&t->mu);
  }
  if (stop) {
    http_server_close(t->srv, NULL, NULL);
    t->srv = NULL;
    uv_close((uv_handle_t *)&t->wake, NULL);
  }
}

static inline void th__run(void *arg) {
  th_server_t *t = arg;
  uv_run(&t->loop, UV_RUN_DEFAULT);
}

/* Creates the loop and the server (not yet listening or running). */
static inline void th_init(th_server_t *t, const http_limits_t *limits) {
  memset(t, 0, sizeof *t);
  if (uv_loop_init(&t->loop)) abort();
  uv_async_init(&t->loop, &t->wake, th__on_wake);
  t->wake.data = t;
  uv_mutex_init(&t->mu);
  uv_cond_init(&t->cv);
  t->srv = http_server_create(&t->loop, limits);
  if (!t->srv) abort();
  http_server_set_error_body(t->srv, oai_error_body); /* as tram serve: OpenAI error objects */
}

/* Listens on 127.0.0.1:0 and starts the loop thread. */
static inline void th_start(th_server_t *t) {
  if (http_server_listen_tcp(t->srv, "127.0.0.1", 0, &t->port)) abort();
  if (uv_thread_create(&t->thread, th__run, t)) abort();
}

/* Runs fn(arg) on the loop thread and waits for it. */
static inline void th_call(th_server_t *t, th_fn fn, void *arg) {
  uv_mutex_lock(&t->mu);
  t->call = fn;
  t->call_arg = arg;
  t->call_done = false;
  uv_mutex_unlock(&t->mu);
  uv_async_send(&t->wake);
  uv_mutex_lock(&t->mu);
  while (!t->call_done) uv_cond_wait(&t->cv, &t->mu);
  uv_mutex_unlock(&t->mu);
}

typedef struct th__stats_call {
  th_server_t *t;
  http_server_stats_t st;
} th__stats_call_t;

static inline void th__stats(void *arg) {
  th__stats_call_t *c = arg;
  http_server_stats(c->t->srv, &c->st);
}

static inline http_server_stats_t th_stats(th_server_t *t) {
  th__stats_call_t c = {.t = t};
  th_call(t, th__stats, &c);
  return c.st;
}

/* Closes the server, joins the loop thread, closes the loop. */
static inline void th_stop(th_server_t *t) {
  uv_mutex_lock(&t->mu);
  t->stop = true;
  uv_mutex_unlock(&t->mu);
  uv_async_send(&t->wake);
  uv_thread_join(&t->thread);
  int r = uv_loop_close(&t->loop);
  if (r) {
    fprintf(stderr, "loop still has handles: %s\n", uv_strerror(r));
    abort();
  }
  uv_mutex_destroy(&t->mu);
  uv_cond_destroy(&t->cv);
}

/* Polls cond(arg) every ms for up to `seconds`; returns its last value. */
static inline bool th_wait_until(bool (*cond)(void *), void *arg, double seconds) {
  double end = th_now() + seconds;
  while (!cond(arg)) {
    if (th_now() > end) return false;
    usleep(2000);
  }
  return true;
}

/* ---- clients ------------------------------------------------------------------ */

typedef struct tc_resp {
  int status;
  char headers[4096]; /* "name: value\n" lines, names lower-cased */
  size_t headers_len;
  char *body; /* malloc'd, NUL-terminated */
  size_t body_len, body_cap;
  bool keep_alive;
  bool complete;
} tc_resp_t;

typedef struct tc_client {
  int fd;
  char buf[1 << 16]; /* bytes received, not parsed yet */
  size_t len;
  llhttp_t parser;
  llhttp_settings_t settings;
  tc_resp_t *cur;
} tc_client_t;

static inline int tc__append_hdr(llhttp_t *p, const char *at, size_t n, bool lower) {
  tc_client_t *c = p->data;
  tc_resp_t *r = c->cur;
  for (size_t i = 0; i < n && r->headers_len + 2 < sizeof r->headers; i++) {
    char ch = at[i];
    if (lower && ch >= 'A' && ch <= 'Z') ch = (char)(ch - 'A' + 'a');
    r->headers[r->headers_len++] = ch;
  }
  return 0;
}
static inline int tc__on_field(llhttp_t *p, const char *at, size_t n) {
  return tc__append_hdr(p, at, n, true);
}
static inline int tc__on_field_done(llhttp_t *p) { return tc__append_hdr(p, ": ", 2, false); }
static inline int tc__on_value(llhttp_t *p, const char *at, size_t n) {
  return tc__append_hdr(p, at, n, false);
}
static inline int tc__on_value_done(llhttp_t *p) { return tc__append_hdr(p, "\n", 1, false); }
static inline int tc__on_body(llhttp_t *p, const char *at, size_t n) {
  tc_client_t *c = p->data;
  tc_resp_t *r = c->cur;
  if (r->body_len + n + 1 > r->body_cap) {
    r->body_cap = 2 * (r->body_len + n + 1);
    r->body = realloc(r->body, r->body_cap);
  }
  memcpy(r->body + r->body_len, at, n);
  r->body_len += n;
  r->body[r->body_len] = '\0';
  return 0;
}
static inline int tc__on_headers_done(llhttp_t *p) {
  tc_client_t *c = p->data;
  c->cur->status = p->status_code;
  return 0;
}
static inline int tc__on_done(llhttp_t *p) {
  tc_client_t *c = p->data;
  c->cur->complete = true;
  c->cur->keep_alive = llhttp_should_keep_alive(p);
  return HPE_PAUSED;
}

static inline void tc_set_timeout(tc_client_t *c, double seconds) {
  struct timeval tv = {.tv_sec = (time_t)seconds,
                       .tv_usec = (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6)};
  setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

static inline void tc__init_parser(tc_client_t *c) {
  llhttp_settings_init(&c->settings);
  c->settings.on_header_field = tc__on_field;
  c->settings.on_header_field_complete = tc__on_field_done;
  c->settings.on_header_value = tc__on_value;
  c->settings.on_header_value_complete = tc__on_value_done;
  c->settings.on_headers_complete = tc__on_headers_done;
  c->settings.on_body = tc__on_body;
  c->settings.on_message_complete = tc__on_done;
  llhttp_init(&c->parser, HTTP_RESPONSE, &c->settings);
  c->parser.data = c;
}

/* Connects to 127.0.0.1:port; receive timeout 10 s. Returns NULL on failure. */
static inline tc_client_t *tc_connect(int port) {
  tc_client_t *c = calloc(1, sizeof *c);
  c->fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof a) < 0) {
    if (c->fd >= 0) close(c->fd);
    free(c);
    return NULL;
  }
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  tc_set_timeout(c, 10);
  tc__init_parser(c);
  return c;
}

/* Connects to a unix socket path. */
static inline tc_client_t *tc_connect_unix(const char *path) {
  tc_client_t *c = calloc(1, sizeof *c);
  c->fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof a) < 0) {
    if (c->fd >= 0) close(c->fd);
    free(c);
    return NULL;
  }
  tc_set_timeout(c, 10);
  tc__init_parser(c);
  return c;
}

static inline void tc_close(tc_client_t *c) {
  if (!c) return;
  close(c->fd);
  free(c);
}

/* Sends n bytes (all of them); returns false on error. */
static inline bool tc_send_n(tc_client_t *c, const char *s, size_t n) {
  while (n) {
    ssize_t w = send(c->fd, s, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    s += w;
    n -= (size_t)w;
  }
  return true;
}

static inline bool tc_send(tc_client_t *c, const char *s) { return tc_send_n(c, s, strlen(s)); }

/* Reads one response. Returns 0 when complete, -1 on EOF/reset/timeout (out
 * holds what arrived). Free out->body with tc_resp_free. */
static inline int tc_read_response(tc_client_t *c, tc_resp_t *out) {
  memset(out, 0, sizeof *out);
  c->cur = out;
  for (;;) {
    if (c->len) {
      llhttp_errno_t e = llhttp_execute(&c->parser, c->buf, c->len);
      size_t used = c->len;
      if (e == HPE_PAUSED) {
        used = (size_t)(llhttp_get_error_pos(&c->parser) - c->buf);
        llhttp_resume(&c->parser);
      } else if (e != HPE_OK) {
        fprintf(stderr, "tc: bad response: %s\n", llhttp_errno_name(e));
        return -1;
      }
      memmove(c->buf, c->buf + used, c->len - used);
      c->len -= used;
      if (out->complete) return 0;
    }
    ssize_t r = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
    if (r <= 0) {
      if (r == 0 && llhttp_message_needs_eof(&c->parser)) {
        llhttp_finish(&c->parser); /* the close ends the body */
        return out->complete ? 0 : -1;
      }
      return -1;
    }
    c->len += (size_t)r;
  }
}

static inline void tc_resp_free(tc_resp_t *r) {
  free(r->body);
  r->body = NULL;
}

/* The value of a header in a response ("" when absent). */
static inline const char *tc_header(const tc_resp_t *r, const char *name, char *buf, size_t size) {
  size_t nl = strlen(name);
  const char *p = r->headers;
  while (*p) {
    const char *eol = strchr(p, '\n');
    if (!eol) break;
    if ((size_t)(eol - p) > nl + 2 && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
      size_t vl = (size_t)(eol - p) - nl - 2;
      if (vl >= size) vl = size - 1;
      memcpy(buf, p + nl + 2, vl);
      buf[vl] = '\0';
      return buf;
    }
    p = eol + 1;
  }
  buf[0] = '\0';
  return buf;
}

/* True when the server closes the connection (EOF or reset) within
 * `seconds`; whatever arrives before is discarded. */
static inline bool tc_expect_close(tc_client_t *c, double seconds) {
  tc_set_timeout(c, seconds);
  char tmp[4096];
  for (;;) {
    ssize_t r = recv(c->fd, tmp, sizeof tmp, 0);
    if (r == 0) return true;
    if (r < 0) return errno == ECONNRESET;
  }
}

/* One request, one response: sends `req`, reads the reply. */
static inline int tc_roundtrip(tc_client_t *c, const char *req, tc_resp_t *out) {
  if (!tc_send(c, req)) return -1;
  return tc_read_response(c, out);
}

#endif
