/* http/http_conn.c — one client connection: reading, parsing one request at
 * a time, deadlines, dispatch, and closing.
 *
 * States: reading a request (deadlines: wait for its first byte, then the
 * header section, then the body) → in flight (ex != NULL: a handler owns the
 * response; input that arrives is buffered, unparsed, up to
 * max_pipeline_bytes, then reading pauses) → response ended: parse what was
 * buffered (on the next loop turn when the response ended asynchronously).
 * A connection that will carry no more requests "finishes": its queued
 * writes flush, the write side shuts down, and it lingers, reading and
 * discarding, so that the client reads our last response before the close.
 *
 * Close discipline: http__conn_close() uv_close()s the socket and both
 * timers; memory is freed in the last close callback, and on_abort of a
 * response still in flight runs there too. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "http/http_internal.h"

#define LINGER_MAX_BYTES (1u << 20) /* discard at most this much before closing */
/* A request deadline that finds the client's bytes waiting unread (the
 * loop was busy) is put off this long, once per arming. */
#define LATE_LOOP_GRACE_MS 1000

static void process(http__conn_t *c, const char *data, size_t len);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* ---- timers ------------------------------------------------------------------- */

static void on_timer(uv_timer_t *t);

static void timer_arm(http__conn_t *c, http__timer_t kind, uint64_t ms) {
  c->timer_kind = kind;
  c->timer_graced = false;
  uv_timer_start(&c->timer, on_timer, ms, 0);
}

static void timer_stop(http__conn_t *c) {
  c->timer_kind = HTTP__TIMER_NONE;
  uv_timer_stop(&c->timer);
}

static void read_start(http__conn_t *c);

/* Parses the input buffered while the previous request was in flight. */
static void resume(http__conn_t *c) {
  char *buf = c->pending;
  size_t len = c->pending_len;
  c->pending = NULL;
  c->pending_len = c->pending_cap = 0;
  if (len) process(c, buf, len);
  free(buf);
  if (!c->closing && !c->finishing && !c->ex) read_start(c);
}

bool http__conn_ready(http__conn_t *c, short events) {
  uv_os_fd_t fd;
  if (c->closing || uv_fileno(&c->io.handle, &fd) != 0) return false;
  struct pollfd p = {.fd = fd, .events = events};
  return poll(&p, 1, 0) == 1 && (p.revents & events);
}

static void on_timer(uv_timer_t *t) {
  http__conn_t *c = t->data;
  http__timer_t kind = c->timer_kind;
  if ((kind == HTTP__TIMER_WAIT || kind == HTTP__TIMER_HEADERS || kind == HTTP__TIMER_BODY) && !c->timer_graced &&
      http__conn_ready(c, POLLIN)) { /* the client did send: the loop was late; read it first */
    log_debug("http: %s: a deadline found input waiting (the loop was late): put off", c->peer);
    c->timer_graced = true;
    uv_timer_start(&c->timer, on_timer, LATE_LOOP_GRACE_MS, 0);
    return;
  }
  c->timer_kind = HTTP__TIMER_NONE;
  switch (kind) {
  case HTTP__TIMER_WAIT:
    log_debug("http: closing idle connection %s", c->peer);
    http__conn_finish(c);
    break;
  case HTTP__TIMER_HEADERS:
  case HTTP__TIMER_BODY:
    log_info("http: %s: request %s not complete in time (408)", c->peer,
             kind == HTTP__TIMER_HEADERS ? "headers" : "body");
    c->srv->stats.timeouts++;
    http__conn_send_error(c, 408, kind == HTTP__TIMER_HEADERS
                                      ? "request headers not received in time"
                                      : "request body not received in time");
    break;
  case HTTP__TIMER_RESUME: resume(c); break;
  case HTTP__TIMER_LINGER: http__conn_close(c); break;
  case HTTP__TIMER_NONE: break;
  }
}

/* Waits for the next request: the first one gets header_timeout from the
 * accept, later ones idle_timeout. */
static void wait_next(http__conn_t *c) {
  const http_limits_t *l = &c->srv->limits;
  timer_arm(c, HTTP__TIMER_WAIT, c->first ? http__first_wait_ms(c) : l->idle_timeout_ms);
  http__idle_add(c);
}

/* ---- reading ------------------------------------------------------------------ */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  http__conn_t *c = h->data;
  buf->base = c->srv->read_buf;
  buf->len = sizeof c->srv->read_buf;
}

static void read_start(http__conn_t *c) {
  if (c->reading || c->closing) return;
  if (uv_read_start(&c->io.stream, on_alloc, on_read) == 0) c->reading = true;
}

static void read_stop(http__conn_t *c) {
  if (!c->reading) return;
  uv_read_stop(&c->io.stream);
  c->reading = false;
}

/* Keeps input that arrived while a request is in flight. */
static void stash(http__conn_t *c, const char *data, size_t len) {
  if (!len) return;
  xgrow(&c->pending, &c->pending_cap, c->pending_len + len, 1, 16);
  memcpy(c->pending + c->pending_len, data, len);
  c->pending_len += len;
  if (c->pending_len >= c->srv->limits.max_pipeline_bytes) read_stop(c);
}

static void dispatch(http__conn_t *c);

/* Feeds input to the parser and dispatches each complete request, one at a
 * time; stops at a request in flight (the rest is stashed). */
static void process(http__conn_t *c, const char *data, size_t len) {
  http__parser_t *p = &c->parser;
  const http_limits_t *l = &c->srv->limits;
  while (len > 0 && !c->closing && !c->finishing) {
    if (c->ex) {
      stash(c, data, len);
      return;
    }
    bool was_begun = p->begun, was_headers = p->headers_done;
    size_t used = 0;
    http__parse_result_t r = http__parse_feed(p, data, len, &used);
    if (r == HTTP__PARSE_ERROR) {
      log_info("http: %s: bad request (%d): %s", c->peer, p->error_status, p->error_reason);
      c->srv->stats.requests++;
      http__conn_send_error(c, p->error_status, p->error_reason);
      return;
    }
    if (!was_begun && p->begun) timer_arm(c, HTTP__TIMER_HEADERS, c->first ? http__first_wait_ms(c) : l->header_timeout_ms);
    if (!was_headers && p->headers_done && r == HTTP__PARSE_MORE) {
      timer_arm(c, HTTP__TIMER_BODY, l->body_timeout_ms);
      if (p->expect_continue) {
        uv_buf_t b = uv_buf_init("HTTP/1.1 100 Continue\r\n\r\n", 25);
        http__conn_write(c, &b, 1);
      }
    }
    if (r == HTTP__PARSE_MORE) return;
    data += used;
    len -= used;
    dispatch(c);
  }
}

static void handle_eof(http__conn_t *c) {
  if (c->ex) {
    log_info("http: client %s went away with request %llu in flight", c->peer,
             (unsigned long long)c->ex->req.id);
    http__conn_close(c);
  } else if (c->parser.begun && !c->finishing) {
    log_debug("http: %s closed in the middle of a request", c->peer);
    http__conn_close(c);
  } else if (c->lingering) {
    http__conn_close(c);
  } else {
    read_stop(c);
    http__conn_finish(c); /* flush what is queued, then close */
  }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  http__conn_t *c = s->data;
  if (nread == 0 || c->closing) return;
  if (nread < 0) {
    if (nread == UV_EOF) {
      handle_eof(c);
    } else {
      log_debug("http: read from %s: %s", c->peer, uv_strerror((int)nread));
      http__conn_close(c);
    }
    return;
  }
  if (c->lingering || c->finishing) {
    c->discarded += (size_t)nread;
    if (c->discarded > LINGER_MAX_BYTES) http__conn_close(c);
    return;
  }
  if (c->ex || c->pending_len) stash(c, buf->base, (size_t)nread);
  else process(c, buf->base, (size_t)nread);
}

/* ---- dispatch ------------------------------------------------------------------ */

static void dispatch(http__conn_t *c) {
  http_server_t *srv = c->srv;
  timer_stop(c);
  http__idle_remove(c);
  c->first = false;
  http_res_t *ex = http__res_new(c);
  bool keep_alive;
  const int taken = http__parse_take(&c->parser, &ex->arena, &ex->req, &ex->body_buf, &keep_alive);
  ex->req.id = ++srv->next_req_id;
  ex->req.peer = c->peer;
  ex->keep_alive = keep_alive && !c->draining && !srv->draining && !srv->closing && !c->probe_only;
  srv->stats.requests++;
  c->ex = ex;
  c->in_dispatch = true;
  if (taken == 0) {
    http__route_dispatch(srv, ex);
  } else { /* memory ran out copying the head: the request is not read, the connection closes */
    ex->is_head = ex->req.method == HTTP_HEAD;
    log_warn("http: %s: out of memory reading a request's head: 503", c->peer);
    http_res_send_error(ex, 503, "server_error", "the server ran out of memory reading the request; try again",
                        NULL, "out_of_memory");
  }
  c->in_dispatch = false;
  if (c->ex == ex && !ex->cbs.on_abort) {
    log_error("http: the handler of %s %s returned without ending its response or setting "
              "on_abort (programmer error)",
              ex->req.method_name, ex->req.path);
    abort();
  }
}

void http__conn_response_ended(http__conn_t *c, bool keep_alive) {
  if (c->closing) return;
  if (!keep_alive || c->draining || c->srv->draining) {
    http__conn_finish(c);
    return;
  }
  if (c->in_dispatch) {
    wait_next(c); /* process() goes on with the input it holds */
    return;
  }
  if (c->pending_len) timer_arm(c, HTTP__TIMER_RESUME, 0);
  else {
    wait_next(c);
    read_start(c);
  }
}

/* ---- closing -------------------------------------------------------------------- */

static void on_close(uv_handle_t *h) {
  http__conn_t *c = h->data;
  if (--c->pending_closes > 0) return;
  http_res_t *ex = c->ex;
  if (ex) {
    c->ex = NULL;
    ex->conn = NULL;
    if (ex->cbs.on_abort) {
      ex->in_abort = true;
      ex->cbs.on_abort(ex, ex->cbs.user);
    }
    http__res_free(ex);
  }
  http__parse_free(&c->parser);
  free(c->pending);
  http__server_conn_gone(c->srv, c);
  free(c);
}

void http__conn_close(http__conn_t *c) {
  if (c->closing) return;
  http__idle_remove(c);
  c->closing = true;
  c->reading = false;
  c->pending_closes = 3;
  uv_close(&c->io.handle, on_close);
  uv_close((uv_handle_t *)&c->timer, on_close);
  uv_close((uv_handle_t *)&c->wtimer, on_close);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
  http__conn_t *c = req->data;
  if (status < 0 || c->closing) {
    if (!c->closing) http__conn_close(c);
    return;
  }
  c->lingering = true;
  timer_arm(c, HTTP__TIMER_LINGER, c->srv->limits.linger_ms);
  read_start(c);
}

void http__conn_finish(http__conn_t *c) {
  if (c->closing || c->finishing) return;
  http__idle_remove(c);
  c->finishing = true;
  timer_stop(c);
  c->shut.data = c;
  if (uv_shutdown(&c->shut, &c->io.stream, on_shutdown) < 0) http__conn_close(c);
}

void http__conn_send_error(http__conn_t *c, int status, const char *message) {
  const char *ctype;
  char *body = http__error_body(c->srv, status, NULL, message, NULL, NULL, &ctype);
  http__write_response(c, status, false, 1, false, ctype, NULL, 0, body, strlen(body));
  free(body);
  http__conn_finish(c);
}

void http__conn_accepted(http__conn_t *c) {
  c->first = true;
  c->timer.data = c->wtimer.data = c->io.handle.data = c;
  http__parse_init(&c->parser, &c->srv->limits);
  wait_next(c);
  read_start(c);
}
