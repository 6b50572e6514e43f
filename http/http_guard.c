/* http/http_guard.c — the connection budget: what keeps a flood of idle
 * connections (a slowloris that sends nothing, or keep-alive connections
 * left open) from locking clients and health checks out.
 *
 *   - The cap is sized from the open-file limit (raised to its hard limit).
 *   - Connections waiting for a request (never used, or keep-alive between
 *     requests, or sending one slowly) sit on an idle queue, oldest first;
 *     at the cap a new connection closes the oldest of them instead of being
 *     refused. One with a request in flight is never closed for this.
 *   - While more than three quarters of the cap are open, a new connection
 *     must send its first request within a tenth of the header timeout.
 *   - When every counted connection has a request in flight, up to
 *     HTTP_PROBE_RESERVE more are accepted for one request each, answered
 *     only on HTTP_ROUTE_PROBE routes (/health, /metrics), else 503. */
#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include "base/log.h"
#include "http/http_internal.h"

void http__idle_add(http__conn_t *c) {
  http_server_t *srv = c->srv;
  if (c->idle || !c->counted) return;
  c->idle = true;
  c->inext = NULL;
  c->iprev = srv->idle_tail;
  if (srv->idle_tail) srv->idle_tail->inext = c;
  else srv->idle_head = c;
  srv->idle_tail = c;
}

void http__idle_remove(http__conn_t *c) {
  http_server_t *srv = c->srv;
  if (!c->idle) return;
  c->idle = false;
  if (c->iprev) c->iprev->inext = c->inext;
  else srv->idle_head = c->inext;
  if (c->inext) c->inext->iprev = c->iprev;
  else srv->idle_tail = c->iprev;
  c->iprev = c->inext = NULL;
}

bool http__evict_idle(http_server_t *srv) {
  http__conn_t *c = srv->idle_head;
  if (!c) return false;
  http__idle_remove(c);
  log_debug("http: %s: closed to make room (it waited longest for a request)", c->peer);
  c->counted = false;
  srv->stats.connections_open--;
  srv->stats.evicted++;
  http__conn_close(c);
  return true;
}

uint32_t http__first_wait_ms(const http__conn_t *c) {
  const http_server_t *srv = c->srv;
  const uint32_t full = srv->limits.header_timeout_ms;
  if ((uint64_t)srv->stats.connections_open * 4 <= (uint64_t)srv->limits.max_connections * 3) return full;
  const uint32_t cut = full / 10 > 1000 ? full / 10 : 1000;
  return cut < full ? cut : full;
}

bool http__client_over_limit(const http__conn_t *c) {
  const http_server_t *srv = c->srv;
  const int limit = srv->limits.max_connections_per_client;
  if (limit <= 0 || !c->addr[0]) return false;
  int n = 0;
  for (const http__conn_t *o = srv->conns; o; o = o->next)
    if (o != c && o->counted && !strcmp(o->addr, c->addr) && ++n >= limit) return true;
  return false;
}

bool http__probe_refused(http_res_t *res, int route_flags) {
  if (!res->conn || !res->conn->probe_only || (route_flags & HTTP_ROUTE_PROBE)) return false;
  http_res_send_error(res, 503, NULL, "too many connections; try again later", NULL, "overloaded");
  return true;
}

int http_connection_cap_from_fds(int reserve) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
    log_warn("getrlimit(RLIMIT_NOFILE): %s; assuming 1024 open files", strerror(errno));
    rl.rlim_cur = rl.rlim_max = 1024;
  }
  if (rl.rlim_cur < rl.rlim_max) {
    const rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
      log_warn("cannot raise the open-file limit from %llu to %llu: %s", (unsigned long long)was,
               (unsigned long long)rl.rlim_max, strerror(errno));
      rl.rlim_cur = was;
    } else {
      log_debug("open-file limit raised from %llu to %llu", (unsigned long long)was,
                (unsigned long long)rl.rlim_cur);
    }
  }
  long long cap = rl.rlim_cur == RLIM_INFINITY ? 65536 : (long long)rl.rlim_cur - reserve;
  if (cap > 65536) cap = 65536;
  if (cap < 16) cap = 16;
  return (int)cap;
}
