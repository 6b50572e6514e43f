/* http/http_res.c — writing responses: the head, whole bodies, chunked
 * streams and server-sent events, and per-connection back-pressure.
 *
 * Writes first go straight to the socket (uv_try_write); what the kernel does
 * not take is copied into one allocation with its uv_write_t and queued.
 * conn->queued counts those bytes: it drives pausing/resuming streams and the
 * write-stall timer. */
#include <errno.h>
#include <inttypes.h>
#include <linux/sockios.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "base/alloc.h"
#include "base/log.h"
#include "http/http_internal.h"

typedef struct wreq {
  uv_write_t req;
  size_t len;
  char data[];
} wreq_t;

const char *http_status_reason(int status) {
  switch (status) {
  case 100: return "Continue";
  case 200: return "OK";
  case 201: return "Created";
  case 204: return "No Content";
  case 304: return "Not Modified";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 408: return "Request Timeout";
  case 409: return "Conflict";
  case 413: return "Content Too Large";
  case 414: return "URI Too Long";
  case 415: return "Unsupported Media Type";
  case 422: return "Unprocessable Content";
  case 429: return "Too Many Requests";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
  case 501: return "Not Implemented";
  case 503: return "Service Unavailable";
  case 504: return "Gateway Timeout";
  case 505: return "HTTP Version Not Supported";
  default: return "Unknown";
  }
}

/* ---- the write queue --------------------------------------------------------- */

static void stall_restart(http__conn_t *c);

static void on_write(uv_write_t *req, int status) {
  wreq_t *w = (wreq_t *)req;
  http__conn_t *c = req->data;
  c->queued -= w->len;
  free(w);
  if (status < 0) {
    if (status != UV_ECANCELED) {
      log_debug("http: write to %s failed: %s", c->peer, uv_strerror(status));
      http__conn_close(c);
    }
    return;
  }
  if (c->closing) return;
  stall_restart(c);
  http_res_t *ex = c->ex;
  if (ex && ex->paused && c->queued <= c->srv->limits.stream_low_water) {
    ex->paused = false;
    if (ex->cbs.on_writable) ex->cbs.on_writable(ex, true, ex->cbs.user);
  }
}

static void on_stall(uv_timer_t *t) {
  http__conn_t *c = t->data;
  if (http__conn_ready(c, POLLOUT)) { /* the client reads: the loop was late to write; the writes go on */
    uv_timer_start(&c->wtimer, on_stall, c->srv->limits.write_stall_ms, 0);
    return;
  }
  log_warn("http: dropping client %s: %zu bytes queued and no write completed for %u ms",
           c->peer, c->queued, c->srv->limits.write_stall_ms);
  c->srv->stats.dropped++;
  http__conn_close(c);
}

/* (Re)starts the stall deadline while output is queued; stops it otherwise. */
static void stall_restart(http__conn_t *c) {
  if (c->closing) return;
  if (c->queued > 0) uv_timer_start(&c->wtimer, on_stall, c->srv->limits.write_stall_ms, 0);
  else uv_timer_stop(&c->wtimer);
}

int http__conn_write(http__conn_t *c, const uv_buf_t *bufs, unsigned n) {
  if (c->closing || c->lingering) return -EPIPE;
  size_t total = 0;
  for (unsigned i = 0; i < n; i++) total += bufs[i].len;
  if (total == 0) return 0;
  size_t done = 0;
  if (c->queued == 0) {
    int r = uv_try_write(&c->io.stream, bufs, n);
    if (r >= 0) {
      done = (size_t)r;
    } else if (r != UV_EAGAIN) {
      log_debug("http: write to %s failed: %s", c->peer, uv_strerror(r));
      http__conn_close(c);
      return -EPIPE;
    }
  }
  if (done == total) return 0;
  size_t rest = total - done;
  wreq_t *w = xmalloc(sizeof *w + rest);
  w->len = rest;
  size_t off = 0, skip = done;
  for (unsigned i = 0; i < n; i++) {
    size_t len = bufs[i].len;
    if (skip >= len) {
      skip -= len;
      continue;
    }
    memcpy(w->data + off, bufs[i].base + skip, len - skip);
    off += len - skip;
    skip = 0;
  }
  w->req.data = c;
  uv_buf_t b = uv_buf_init(w->data, (unsigned)rest);
  int r = uv_write(&w->req, &c->io.stream, &b, 1, on_write);
  if (r < 0) {
    free(w);
    log_debug("http: write to %s failed: %s", c->peer, uv_strerror(r));
    http__conn_close(c);
    return -EPIPE;
  }
  bool was_idle = c->queued == 0;
  c->queued += rest;
  if (c->queued > c->srv->stats.max_queued) c->srv->stats.max_queued = c->queued;
  if (was_idle) stall_restart(c);
  return 0;
}

/* ---- heads -------------------------------------------------------------------- */

/* Formats the status line and headers; returns a malloc'd buffer. length < 0:
 * no Content-Length (a stream); chunked adds Transfer-Encoding. */
static char *format_head(http_server_t *srv, int status, bool keep_alive, int http_minor,
                         const char *content_type, int64_t length, bool chunked,
                         const char *extra, size_t extra_len, size_t *out_len) {
  size_t cap = 512 + extra_len + (content_type ? strlen(content_type) : 0);
  char *h = xmalloc(cap);
  int n = snprintf(h, cap, "HTTP/1.%d %d %s\r\nDate: %s\r\nServer: tram\r\n", http_minor ? 1 : 0,
                   status, http_status_reason(status), http__date(srv));
  if (content_type)
    n += snprintf(h + n, cap - (size_t)n, "Content-Type: %s\r\n", content_type);
  if (length >= 0) n += snprintf(h + n, cap - (size_t)n, "Content-Length: %" PRId64 "\r\n", length);
  if (chunked) n += snprintf(h + n, cap - (size_t)n, "Transfer-Encoding: chunked\r\n");
  if (!keep_alive) n += snprintf(h + n, cap - (size_t)n, "Connection: close\r\n");
  else if (http_minor == 0) n += snprintf(h + n, cap - (size_t)n, "Connection: keep-alive\r\n");
  if (extra_len) memcpy(h + n, extra, extra_len);
  n += (int)extra_len;
  memcpy(h + n, "\r\n", 2);
  *out_len = (size_t)n + 2;
  return h;
}

static bool status_has_body(int status) { return status >= 200 && status != 204 && status != 304; }

int http__write_response(http__conn_t *c, int status, bool keep_alive, int http_minor,
                         bool head_only, const char *content_type, const char *extra,
                         size_t extra_len, const void *body, size_t len) {
  bool has_body = status_has_body(status);
  size_t hlen;
  char *head = format_head(c->srv, status, keep_alive, http_minor, has_body ? content_type : NULL,
                           has_body ? (int64_t)len : -1, false, extra, extra_len, &hlen);
  uv_buf_t bufs[2] = {uv_buf_init(head, (unsigned)hlen), uv_buf_init((char *)body, (unsigned)len)};
  int r = http__conn_write(c, bufs, has_body && !head_only && len ? 2 : 1);
  free(head);
  return r;
}

/* ---- the response handle ------------------------------------------------------ */

http_res_t *http__res_new(http__conn_t *c) {
  http_res_t *res = xcalloc(1, sizeof *res);
  res->conn = c;
  arena_init(&res->arena, 0, 0);
  return res;
}

void http__res_free(http_res_t *res) {
  if (!res) return;
  arena_free(&res->arena);
  free(res->body_buf);
  free(res->extra);
  free(res);
}

/* Ends the response: frees it and lets the connection go on. */
static void res_end(http_res_t *res) {
  http__conn_t *c = res->conn;
  bool keep = res->keep_alive;
  if (c) c->ex = NULL;
  http__res_free(res);
  if (c) http__conn_response_ended(c, keep);
}

void http_res_set_callbacks(http_res_t *res, const http_res_cbs_t *cbs) { res->cbs = *cbs; }

const http_req_t *http_res_req(const http_res_t *res) { return &res->req; }

static bool header_text_ok(const char *s) {
  for (; *s; s++)
    if (*s == '\r' || *s == '\n') return false;
  return true;
}

int http_res_header(http_res_t *res, const char *name, const char *value) {
  if (res->head_sent || !*name || !header_text_ok(name) || !header_text_ok(value) ||
      strchr(name, ':'))
    return -EINVAL;
  size_t add = strlen(name) + strlen(value) + 4;
  xgrow(&res->extra, &res->extra_cap, res->extra_len + add + 1, 1, 16);
  res->extra_len += (size_t)snprintf(res->extra + res->extra_len, res->extra_cap - res->extra_len,
                                     "%s: %s\r\n", name, value);
  return 0;
}

int http_res_send(http_res_t *res, int status, const char *content_type, const void *body,
                  size_t len) {
  if (res->in_abort) return -EPIPE;
  http__conn_t *c = res->conn;
  int r = -EPIPE;
  if (res->head_sent) {
    r = -EINVAL;
  } else if (c) {
    res->head_sent = true;
    r = http__write_response(c, status, res->keep_alive, res->req.http_minor, res->is_head,
                             content_type, res->extra, res->extra_len, body, len);
  }
  res_end(res);
  return r;
}

void http_server_set_error_body(http_server_t *srv, http_error_body_fn fn) { srv->error_body = fn; }

void http_server_set_error_body_for(http_server_t *srv, const char *prefix, http_error_body_fn fn) {
  free(srv->error_prefix);
  srv->error_prefix = prefix ? xstrdup(prefix) : NULL;
  srv->error_body_for = fn;
}

char *http__error_body(const http_server_t *srv, int status, const char *type, const char *message,
                       const char *param, const char *code, const char **content_type) {
  *content_type = srv->error_body ? "application/json" : "text/plain";
  return srv->error_body ? srv->error_body(status, type, message, param, code) : xstrdup(message);
}

int http_res_send_error(http_res_t *res, int status, const char *type, const char *message,
                        const char *param, const char *code) {
  if (!res->conn) return http_res_send(res, status, "text/plain", message, strlen(message)); /* gone: ends it */
  const char *ctype;
  const http_server_t *srv = res->conn->srv;
  char *body;
  if (srv->error_prefix && strncmp(res->req.path, srv->error_prefix, strlen(srv->error_prefix)) == 0) {
    ctype = "application/json";
    body = srv->error_body_for(status, type, message, param, code);
  } else {
    body = http__error_body(srv, status, type, message, param, code, &ctype);
  }
  int r = http_res_send(res, status, ctype, body, strlen(body));
  free(body);
  return r;
}

int http_res_stream_begin(http_res_t *res, int status, const char *content_type) {
  if (res->in_abort) return -EPIPE;
  if (res->head_sent) return -EINVAL;
  http__conn_t *c = res->conn;
  if (!c) return -EPIPE;
  if (content_type && strcmp(content_type, "text/event-stream") == 0)
    http_res_header(res, "Cache-Control", "no-cache");
  res->head_sent = res->streaming = true;
  res->chunked = res->req.http_minor >= 1;
  if (!res->chunked) res->keep_alive = false; /* HTTP/1.0: the close ends the body */
  size_t hlen;
  char *head = format_head(c->srv, status, res->keep_alive, res->req.http_minor, content_type, -1,
                           res->chunked, res->extra, res->extra_len, &hlen);
  uv_buf_t b = uv_buf_init(head, (unsigned)hlen);
  int r = http__conn_write(c, &b, 1);
  free(head);
  return r;
}

/* Queues one piece of the stream (chunk-framed when chunked) and applies
 * back-pressure. */
static int stream_queue(http_res_t *res, const uv_buf_t *parts, unsigned n_parts, size_t len) {
  if (res->in_abort) return -EPIPE;
  if (!res->streaming) return -EINVAL;
  http__conn_t *c = res->conn;
  if (!c || c->closing) return -EPIPE;
  if (len == 0 || res->is_head) return 0;
  const http_limits_t *lim = &c->srv->limits;
  if (c->queued + len > lim->max_write_queue) {
    log_warn("http: dropping client %s: stream output would exceed %zu queued bytes (the "
             "producer ignored back-pressure)",
             c->peer, lim->max_write_queue);
    c->srv->stats.dropped++;
    http__conn_close(c);
    return -EPIPE;
  }
  uv_buf_t bufs[8];
  unsigned n = 0;
  char size_line[24];
  if (res->chunked) {
    int k = snprintf(size_line, sizeof size_line, "%zx\r\n", len);
    bufs[n++] = uv_buf_init(size_line, (unsigned)k);
  }
  for (unsigned i = 0; i < n_parts; i++) bufs[n++] = parts[i];
  if (res->chunked) bufs[n++] = uv_buf_init("\r\n", 2);
  int r = http__conn_write(c, bufs, n);
  if (r < 0) return r;
  if (!res->paused && c->queued > lim->stream_high_water) {
    res->paused = true;
    if (res->cbs.on_writable) res->cbs.on_writable(res, false, res->cbs.user);
  }
  return 0;
}

int http_res_stream_write(http_res_t *res, const void *data, size_t len) {
  uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
  return stream_queue(res, &b, 1, len);
}

int http_res_sse(http_res_t *res, const char *data, size_t len) {
  /* "data: " before each line, "\n" after it, one more "\n" at the end. */
  if (!data) data = "";
  size_t lines = 1;
  for (size_t i = 0; i < len; i++)
    if (data[i] == '\n' && i + 1 < len) lines++;
  size_t trailing_nl = len && data[len - 1] == '\n';
  size_t total = lines * 7 + len - trailing_nl + 1;
  char stack[2048];
  char *buf = total <= sizeof stack ? stack : xmalloc(total);
  size_t o = 0, start = 0, end = len - trailing_nl;
  for (;;) {
    const char *nl = memchr(data + start, '\n', end - start);
    size_t stop = nl ? (size_t)(nl - data) : end;
    memcpy(buf + o, "data: ", 6);
    memcpy(buf + o + 6, data + start, stop - start);
    o += 6 + stop - start;
    buf[o++] = '\n';
    if (!nl) break;
    start = stop + 1;
  }
  buf[o++] = '\n';
  uv_buf_t b = uv_buf_init(buf, (unsigned)o);
  int r = stream_queue(res, &b, 1, o);
  if (buf != stack) free(buf);
  return r;
}

int http_res_stream_end(http_res_t *res) {
  if (res->in_abort) return -EPIPE;
  if (!res->streaming) return -EINVAL;
  int r = -EPIPE;
  http__conn_t *c = res->conn;
  if (c && !c->closing) {
    r = 0;
    if (res->chunked && !res->is_head) {
      uv_buf_t b = uv_buf_init("0\r\n\r\n", 5);
      r = http__conn_write(c, &b, 1);
    }
  }
  res_end(res);
  return r;
}

bool http_res_writable(const http_res_t *res) { return !res->paused; }

size_t http_res_queued(const http_res_t *res) { return res->conn ? res->conn->queued : 0; }

void http_res_drop(http_res_t *res) {
  http__conn_t *c = res->conn;
  if (!c || c->closing) return;
  c->srv->stats.dropped++;
  http__conn_close(c);
}

size_t http_res_unsent(const http_res_t *res) {
  if (!res->conn || res->conn->closing) return 0;
  size_t n = res->conn->queued;
  uv_os_fd_t fd;
  int outq = 0;
  if (uv_fileno(&res->conn->io.handle, &fd) == 0 && ioctl(fd, SIOCOUTQ, &outq) == 0 && outq > 0) n += (size_t)outq;
  return n;
}
