/* http/http_server.c — the server object: limits, listeners (TCP, unix
 * socket, inherited fd), accepting under the connection cap, draining and
 * closing. Connections live in http_conn.c, responses in http_res.c. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "http/http_internal.h"

#define MAX_REJECTING 64 /* over-cap connections answered 503 at a time */

http_limits_t http_limits_default(void) {
  return (http_limits_t){
      .max_header_bytes = 16 * 1024,
      .max_headers = 100,
      .max_body_bytes = 8 * 1024 * 1024,
      .max_connections = 1024,
      .header_timeout_ms = 10 * 1000,
      .body_timeout_ms = 30 * 1000,
      .idle_timeout_ms = 60 * 1000,
      .write_stall_ms = 30 * 1000,
      .stream_high_water = 256 * 1024,
      .stream_low_water = 64 * 1024,
      .max_write_queue = 8 * 1024 * 1024,
      .max_pipeline_bytes = 64 * 1024,
      .linger_ms = 2000,
      .backlog = 511,
  };
}

int http_limits_check(const http_limits_t *l) {
  const char *bad = NULL;
  if (l->max_header_bytes < 256 || l->max_header_bytes > (1u << 30)) bad = "max_header_bytes (256 B .. 1 GiB)";
  else if (l->max_headers < 1) bad = "max_headers (>= 1)";
  else if (l->max_body_bytes > ((size_t)1 << 40)) bad = "max_body_bytes (<= 1 TiB)";
  else if (l->max_connections < 1) bad = "max_connections (>= 1)";
  else if (!l->header_timeout_ms || !l->body_timeout_ms || !l->idle_timeout_ms)
    bad = "header/body/idle timeouts (> 0 ms)";
  else if (!l->write_stall_ms) bad = "write_stall_ms (> 0)";
  else if (!l->stream_high_water || l->stream_low_water >= l->stream_high_water)
    bad = "stream_low_water < stream_high_water";
  else if (l->max_write_queue < l->stream_high_water) bad = "max_write_queue (>= stream_high_water)";
  else if (!l->max_pipeline_bytes) bad = "max_pipeline_bytes (> 0)";
  else if (l->backlog < 1) bad = "backlog (>= 1)";
  if (bad) {
    log_error("http: bad limit: %s", bad);
    return -EINVAL;
  }
  return 0;
}

const char *http__date(http_server_t *srv) {
  time_t now = time(NULL);
  if (now != srv->date_sec) {
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(srv->date, sizeof srv->date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    srv->date_sec = now;
  }
  return srv->date;
}

/* ---- life cycle ----------------------------------------------------------------- */

http_server_t *http_server_create(uv_loop_t *loop, const http_limits_t *limits) {
  http_limits_t l = limits ? *limits : http_limits_default();
  if (http_limits_check(&l)) return NULL;
  http_server_t *srv = xcalloc(1, sizeof *srv);
  srv->loop = loop;
  srv->limits = l;
  uv_timer_init(loop, &srv->defer);
  srv->defer.data = srv;
  srv->handles_open = 1;
  return srv;
}

static void server_free(http_server_t *srv) {
  void (*cb)(void *) = srv->on_closed;
  void *arg = srv->closed_arg;
  http__routes_free(srv);
  for (int i = 0; i < srv->n_keys; i++) free(srv->keys[i]);
  free(srv->keys);
  free(srv->key_lens);
  http__cors_free(srv);
  free(srv->error_prefix);
  free(srv);
  if (cb) cb(arg);
}

static void on_drained_timer(uv_timer_t *t) {
  http_server_t *srv = t->data;
  void (*cb)(void *) = srv->on_drained;
  srv->on_drained = NULL;
  if (cb) cb(srv->drained_arg);
}

/* Runs after anything closes: completes a drain or a close. */
static void check_done(http_server_t *srv) {
  if (srv->closing) {
    if (srv->handles_open == 0 && !srv->conns) server_free(srv);
    return;
  }
  if (srv->draining && srv->on_drained && !srv->listeners && !srv->conns)
    uv_timer_start(&srv->defer, on_drained_timer, 0, 0);
}

void http__server_conn_gone(http_server_t *srv, http__conn_t *c) {
  if (c->prev) c->prev->next = c->next;
  else srv->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  if (c->counted) srv->stats.connections_open--;
  if (c->rejected) srv->n_rejecting--;
  if (c->probe_only) srv->stats.probe_open--;
  check_done(srv);
}

static void on_listener_close(uv_handle_t *h) {
  http__listener_t *l = h->data;
  http_server_t *srv = l->srv;
  free(l);
  srv->handles_open--;
  check_done(srv);
}

static void close_listeners(http_server_t *srv) {
  http__listener_t *l = srv->listeners;
  srv->listeners = NULL;
  while (l) {
    http__listener_t *next = l->next;
    if (l->unix_path) {
      unlink(l->unix_path);
      free(l->unix_path);
      l->unix_path = NULL;
    }
    uv_close(&l->io.handle, on_listener_close);
    l = next;
  }
}

int http_server_drain(http_server_t *srv, void (*on_drained)(void *arg), void *arg) {
  if (srv->draining || srv->closing) return -EALREADY;
  srv->draining = true;
  srv->on_drained = on_drained;
  srv->drained_arg = arg;
  close_listeners(srv);
  for (http__conn_t *c = srv->conns, *next; c; c = next) {
    next = c->next;
    c->draining = true;
    if (c->ex) {
      c->ex->keep_alive = false;
    } else if (!c->parser.begun && !c->pending_len) {
      http__conn_finish(c);
    }
  }
  check_done(srv);
  return 0;
}

static void on_defer_close(uv_handle_t *h) {
  http_server_t *srv = h->data;
  srv->handles_open--;
  check_done(srv);
}

void http_server_close(http_server_t *srv, void (*on_closed)(void *arg), void *arg) {
  if (!srv || srv->closing) return;
  srv->closing = true;
  srv->on_closed = on_closed;
  srv->closed_arg = arg;
  close_listeners(srv);
  uv_close((uv_handle_t *)&srv->defer, on_defer_close);
  for (http__conn_t *c = srv->conns; c; c = c->next) http__conn_close(c);
}

void http_server_stats(const http_server_t *srv, http_server_stats_t *out) { *out = srv->stats; }

/* ---- accepting ------------------------------------------------------------------- */

static void peer_name(http__conn_t *c, bool is_pipe) {
  if (is_pipe) {
    snprintf(c->peer, sizeof c->peer, "unix");
    return;
  }
  struct sockaddr_storage ss;
  int len = sizeof ss;
  char ip[INET6_ADDRSTRLEN] = "?";
  if (uv_tcp_getpeername(&c->io.tcp, (struct sockaddr *)&ss, &len) == 0) {
    if (ss.ss_family == AF_INET6) {
      struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
      uv_ip6_name(a, ip, sizeof ip);
      snprintf(c->peer, sizeof c->peer, "[%s]:%u", ip, ntohs(a->sin6_port));
      snprintf(c->addr, sizeof c->addr, "%s", ip);
      return;
    }
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    uv_ip4_name(a, ip, sizeof ip);
    snprintf(c->peer, sizeof c->peer, "%s:%u", ip, ntohs(a->sin_port));
    snprintf(c->addr, sizeof c->addr, "%s", ip);
    return;
  }
  snprintf(c->peer, sizeof c->peer, "?");
}

static void on_connection(uv_stream_t *ls, int status) {
  http__listener_t *l = ls->data;
  http_server_t *srv = l->srv;
  if (status < 0) {
    log_warn("http: accept: %s", uv_strerror(status));
    return;
  }
  http__conn_t *c = xcalloc(1, sizeof *c);
  c->srv = srv;
  if (l->is_pipe) uv_pipe_init(srv->loop, &c->io.pipe, 0);
  else uv_tcp_init(srv->loop, &c->io.tcp);
  uv_timer_init(srv->loop, &c->timer);
  uv_timer_init(srv->loop, &c->wtimer);
  c->io.handle.data = c->timer.data = c->wtimer.data = c;
  c->next = srv->conns;
  if (srv->conns) srv->conns->prev = c;
  srv->conns = c;
  int r = uv_accept(ls, &c->io.stream);
  if (r < 0) {
    log_warn("http: accept: %s", uv_strerror(r));
    http__conn_close(c);
    return;
  }
  srv->stats.connections_accepted++;
  peer_name(c, l->is_pipe);
  const uint32_t cap = (uint32_t)srv->limits.max_connections;
  if (srv->stats.connections_open >= cap) http__evict_idle(srv);
  const bool over_client = http__client_over_limit(c);
  if (over_client) srv->stats.connections_over_client++;
  if ((srv->stats.connections_open >= cap || over_client) && srv->stats.probe_open < HTTP_PROBE_RESERVE) {
    /* every slot has a request in flight, or this address holds its share: /health and /metrics only */
    c->probe_only = true;
    srv->stats.probe_open++;
    if (!l->is_pipe) uv_tcp_nodelay(&c->io.tcp, 1);
    http__conn_accepted(c);
    return;
  }
  if (srv->stats.connections_open >= cap || over_client) {
    srv->stats.connections_rejected++;
    if (over_client)
      log_warn("http: %s: connection refused, its address has %d open (max_connections_per_client)", c->peer,
               srv->limits.max_connections_per_client);
    else
      log_warn("http: %s: connection refused, %d connections open (the limit), each with a request in flight",
               c->peer, srv->limits.max_connections);
    if (srv->n_rejecting >= MAX_REJECTING) {
      http__conn_close(c);
      return;
    }
    c->rejected = true;
    srv->n_rejecting++;
    http__parse_init(&c->parser, &srv->limits);
    http__conn_send_error(c, 503, "too many connections; try again later");
    return;
  }
  c->counted = true;
  srv->stats.connections_open++;
  if (!l->is_pipe) uv_tcp_nodelay(&c->io.tcp, 1);
  http__conn_accepted(c);
}

/* ---- listening ------------------------------------------------------------------- */

static http__listener_t *listener_new(http_server_t *srv, bool is_pipe) {
  http__listener_t *l = xcalloc(1, sizeof *l);
  l->srv = srv;
  l->is_pipe = is_pipe;
  if (is_pipe) uv_pipe_init(srv->loop, &l->io.pipe, 0);
  else uv_tcp_init(srv->loop, &l->io.tcp);
  l->io.handle.data = l;
  srv->handles_open++;
  return l;
}

/* Starts listening on l (bound or opened); on failure closes it. */
static int listener_start(http_server_t *srv, http__listener_t *l, const char *what) {
  int r = uv_listen(&l->io.stream, srv->limits.backlog, on_connection);
  if (r < 0) {
    log_error("http: listen on %s: %s", what, uv_strerror(r));
    free(l->unix_path);
    l->unix_path = NULL;
    uv_close(&l->io.handle, on_listener_close);
    return r;
  }
  l->next = srv->listeners;
  srv->listeners = l;
  return 0;
}

static int listener_fail(http__listener_t *l, const char *what, const char *op, int r) {
  log_error("http: %s %s: %s", op, what, uv_strerror(r));
  free(l->unix_path);
  l->unix_path = NULL;
  uv_close(&l->io.handle, on_listener_close);
  return r;
}

int http_server_listen_tcp(http_server_t *srv, const char *host, int port, int *bound_port) {
  char what[300];
  snprintf(what, sizeof what, "%s:%d", host, port);
  if (port < 0 || port > 65535 || srv->draining || srv->closing) {
    log_error("http: cannot listen on %s: %s", what,
              port < 0 || port > 65535 ? "port out of range" : "server stopping");
    return -EINVAL;
  }
  char service[8];
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC,
                           .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  uv_getaddrinfo_t gai;
  int r = uv_getaddrinfo(srv->loop, &gai, NULL, host, service, &hints);
  if (r < 0) {
    log_error("http: cannot resolve %s: %s", host, uv_strerror(r));
    return r;
  }
  http__listener_t *l = listener_new(srv, false);
  r = uv_tcp_bind(&l->io.tcp, gai.addrinfo->ai_addr, 0);
  uv_freeaddrinfo(gai.addrinfo);
  if (r < 0) return listener_fail(l, what, "bind", r);
  r = listener_start(srv, l, what);
  if (r < 0) return r;
  struct sockaddr_storage ss;
  int len = sizeof ss;
  uv_tcp_getsockname(&l->io.tcp, (struct sockaddr *)&ss, &len);
  int p = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                         : ((struct sockaddr_in *)&ss)->sin_port);
  if (bound_port) *bound_port = p;
  log_info("http: listening on %s (port %d)", what, p);
  return 0;
}

int http_server_listen_unix(http_server_t *srv, const char *path) {
  if (srv->draining || srv->closing) return -EINVAL;
  struct stat st;
  if (lstat(path, &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      log_error("http: cannot listen on %s: a file that is not a socket is there", path);
      return -EEXIST;
    }
    unlink(path); /* a stale socket from an earlier run */
  }
  const char *slash = strrchr(path, '/');
  if (slash && slash != path) { /* libuv reports a missing directory as EACCES: say what it is */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
      log_error("http: cannot listen on %s: the directory %s does not exist", path, dir);
      return -ENOENT;
    }
  }
  http__listener_t *l = listener_new(srv, true);
  int r = uv_pipe_bind(&l->io.pipe, path);
  if (r < 0) return listener_fail(l, path, "bind", r);
  l->unix_path = xstrdup(path);
  r = listener_start(srv, l, path);
  if (r == 0) log_info("http: listening on unix:%s", path);
  return r;
}

int http_server_listen_fd(http_server_t *srv, int fd) {
  if (srv->draining || srv->closing) return -EINVAL;
  int domain = 0, listening = 0;
  socklen_t len = sizeof domain;
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0) {
    int e = errno;
    log_error("http: fd %d is not a socket: %s", fd, strerror(e));
    return e == ENOTSOCK ? -ENOTSOCK : -e;
  }
  len = sizeof listening;
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0 || !listening) {
    log_error("http: fd %d is not a listening socket", fd);
    return -EINVAL;
  }
  bool is_pipe = domain == AF_UNIX;
  http__listener_t *l = listener_new(srv, is_pipe);
  char what[32];
  snprintf(what, sizeof what, "fd %d", fd);
  int r = is_pipe ? uv_pipe_open(&l->io.pipe, fd) : uv_tcp_open(&l->io.tcp, fd);
  if (r < 0) {
    close(fd); /* ours now, and the handle did not take it */
    return listener_fail(l, what, "open", r);
  }
  r = listener_start(srv, l, what);
  if (r == 0) log_info("http: listening on inherited %s (%s)", what, is_pipe ? "unix" : "tcp");
  return r;
}
