/* server/srv_dash.c — the dashboard's routes, its stream clients and the
 * timer that asks the engine for snapshots and fans each one out (see
 * server/srv_dash.h for the contract: who may read what, and why a slow
 * client never slows anything else). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "base/log.h"
#include "base/alloc.h"
#include "base/clock.h"
#include "server/srv.h"
#include "server/srv_dash.h"
#include "server/srv_internal.h"

typedef struct dash_client dash_client_t;

struct dash_client {
  srv_dash_t *d;
  http_res_t *res;
  dash_client_t *prev, *next;
  uint64_t sent, dropped; /* snapshots written, and skipped while its socket was backed up */
  int64_t backed_since;   /* when it first left its output unread (backed_up), CLOCK_MONOTONIC ns; 0: it reads */
};

struct srv_dash {
  srv_t *s;
  uv_timer_t timer;      /* every SRV_DASH_PERIOD_MS while a client is connected */
  bool timer_init, timer_on, stopped;
  dash_client_t *clients;
  int n_clients;
  sched_snap_t *snap;    /* the latest snapshot taken (allocated with the first client) */
  char *json;            /* its JSON (malloc'd), sent to each client */
  size_t json_len;
  uint64_t dropped;      /* snapshots skipped, all clients together */
  int64_t loop_ns;       /* loop time spent rendering and writing snapshots, summed */
  int64_t kv_bytes;      /* the cache's size, once the model is loaded */
  srv_dash_lat_t ttft, itl;
};

/* Whether `auto` turns the dashboard on: listening only where the local
 * machine can connect (a unix socket, a loopback address), not under socket
 * activation (whose sockets tram cannot judge). */
static bool local_only(const cfg_t *c) {
  if (sd_listen_fds(0) > 0) return false;
  if (c->unix_socket) return true;
  const char *h = c->host;
  return strncmp(h, "127.", 4) == 0 || strcmp(h, "::1") == 0 || strcmp(h, "localhost") == 0;
}

/* ---- the page ------------------------------------------------------------------- */

static void security_headers(http_res_t *res) {
  http_res_header(res, "Content-Security-Policy",
                  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
                  "frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
  http_res_header(res, "X-Content-Type-Options", "nosniff");
  http_res_header(res, "Referrer-Policy", "no-referrer");
  http_res_header(res, "Cache-Control", "no-cache");
}

static void h_asset(const http_req_t *req, http_res_t *res, void *ctx) {
  const srv_dash_asset_t *a = ctx;
  const uint64_t rid = req->id; /* req is freed once answered */
  security_headers(res);
  http_res_send(res, 200, a->content_type, a->data, a->len);
  if (log_get_level() >= LOG_LEVEL_DEBUG) srv__access(rid, "/dashboard", 200);
}

/* ---- the stream ------------------------------------------------------------------ */

static void timer_stop(srv_dash_t *d) {
  if (!d->timer_on) return;
  uv_timer_stop(&d->timer);
  d->timer_on = false;
  if (d->s->engine) sched_snap_subscribe(d->s->engine, -1);
}

static void client_remove(dash_client_t *c) {
  srv_dash_t *d = c->d;
  if (c->prev) c->prev->next = c->next;
  else d->clients = c->next;
  if (c->next) c->next->prev = c->prev;
  d->n_clients--;
  log_debug("dashboard: a stream ended (%llu snapshots sent, %llu skipped while it was backed up)",
            (unsigned long long)c->sent, (unsigned long long)c->dropped);
  free(c);
  if (d->n_clients == 0) timer_stop(d);
}

static void on_client_abort(http_res_t *res, void *user) { client_remove(user); }
static void on_dropped_abort(http_res_t *res, void *user) {} /* removed when dropped */

/* Whether c's client leaves its output unread: bytes queued here (the
 * kernel took no more), or more than SRV_UNREAD_BYTES in the kernel's send
 * queue (its receive window closed) — the generation streams' measure
 * (srv_events.c). */
static bool backed_up(const dash_client_t *c) {
  return http_res_queued(c->res) > 0 || http_res_unsent(c->res) > SRV_UNREAD_BYTES;
}

/* Closes c's connection and frees its slot now. */
static void drop(dash_client_t *c, const char *why, int64_t now) {
  log_info("dashboard: %s (%zu bytes unread for %.1f s, %llu snapshots skipped): dropped", why,
           http_res_unsent(c->res), (double)(now - c->backed_since) / 1e9, (unsigned long long)c->dropped);
  http_res_set_callbacks(c->res, &(http_res_cbs_t){.on_abort = on_dropped_abort});
  http_res_drop(c->res);
  client_remove(c);
}

/* Updates c->backed_since; drops c once it has been backed up for
 * slow_client_timeout. */
static void check_reader(dash_client_t *c, int64_t now) {
  if (!backed_up(c)) {
    c->backed_since = 0;
    return;
  }
  if (!c->backed_since) c->backed_since = now;
  if (now - c->backed_since > c->d->s->cfg->slow_client_timeout_ms * INT64_C(1000000))
    drop(c, "a stream's client stopped reading", now);
}

/* Writes the current JSON to c unless it is backed up: then this snapshot
 * is skipped for it (the next one supersedes it). */
static void send_to(dash_client_t *c) {
  if (c->backed_since) {
    c->dropped++;
    c->d->dropped++;
    return;
  }
  if (http_res_sse(c->res, c->d->json, c->d->json_len) == 0) c->sent++;
  /* -EPIPE: the connection is going; on_abort removes the client */
}

/* At the cap: drops the client backed up longest to make room, as the
 * connection cap closes the connection idle longest. False when every
 * client reads. */
static bool make_room(srv_dash_t *d) {
  dash_client_t *old = NULL;
  for (dash_client_t *c = d->clients; c; c = c->next)
    if (c->backed_since && (!old || c->backed_since < old->backed_since)) old = c;
  if (!old) return false;
  drop(old, "the dashboard streams are all open and this one's client reads nothing", clock_now_ns());
  return true;
}

static void render(srv_dash_t *d) {
  srv_t *s = d->s;
  if (!d->kv_bytes && s->engine) d->kv_bytes = sched_engine_kv_cache_bytes(s->engine);
  const srv_dash_info_t info = {
      .model = s->cfg->served_model_name,
      .model_file = srv__model_shown(s),
      .device = s->cfg->device == CFG_DEVICE_CUDA ? "cuda" : "cpu",
      .threads = s->cfg->threads > 0 ? s->cfg->threads : (int)sysconf(_SC_NPROCESSORS_ONLN),
      .version = TRAM_VERSION,
      .kv_cache_bytes = d->kv_bytes,
      .uptime_ns = ((int64_t)time(NULL) - s->boot_time) * 1000000000,
      .clients = (uint64_t)d->n_clients,
      .dropped = d->dropped,
      .loop_ns = d->loop_ns,
  };
  free(d->json);
  d->json = srv__dash_json(d->snap, &info, &d->ttft, &d->itl, &d->json_len);
}

static void on_timer(uv_timer_t *t) {
  srv_dash_t *d = t->data;
  srv_t *s = d->s;
  if (!s->engine || !d->n_clients) return;
  const int64_t now = clock_now_ns();
  for (dash_client_t *c = d->clients, *next; c; c = next) {
    next = c->next;
    check_reader(c, now); /* may drop c */
  }
  if (d->n_clients && sched_snap_get(s->engine, d->snap, d->snap->seq)) {
    const int64_t t0 = clock_now_ns();
    render(d);
    for (dash_client_t *c = d->clients, *next; c; c = next) {
      next = c->next; /* a failed write never frees c here: on_abort comes later */
      send_to(c);
    }
    d->loop_ns += clock_now_ns() - t0; /* shown from the next snapshot on */
  }
  if (d->n_clients) sched_snap_request(s->engine);
}

static void h_events(const http_req_t *req, http_res_t *res, void *ctx) {
  srv_t *s = ctx;
  srv_dash_t *d = s->dash;
  const uint64_t rid = req->id; /* req is freed once answered */
  if (!srv__serving(s, res)) return;
  if (d->stopped || (d->n_clients >= SRV_DASH_MAX_CLIENTS && !make_room(d))) {
    http_res_header(res, "Retry-After", "5");
    http_res_send_error(res, 503, NULL, "too many dashboards are open", NULL, "dashboard_busy");
    srv__access(rid, "/dashboard/events", 503);
    return;
  }
  if (req->method == HTTP_HEAD) { /* the head only: no stream to keep */
    security_headers(res);
    http_res_stream_begin(res, 200, "text/event-stream");
    http_res_stream_end(res);
    return;
  }
  dash_client_t *c = xcalloc(1, sizeof *c);
  if (!d->snap) d->snap = xcalloc(1, sizeof *d->snap);
  c->d = d;
  c->res = res;
  c->next = d->clients;
  if (d->clients) d->clients->prev = c;
  d->clients = c;
  d->n_clients++;
  http_res_set_callbacks(res, &(http_res_cbs_t){.on_abort = on_client_abort, .user = c});
  security_headers(res);
  http_res_stream_begin(res, 200, "text/event-stream");
  srv__access(rid, "/dashboard/events", 200);
  if (d->json) send_to(c); /* the latest at once; the next within a period */
  if (!d->timer_init) {
    uv_timer_init(&s->loop, &d->timer);
    d->timer.data = d;
    d->timer_init = true;
  }
  if (!d->timer_on) {
    sched_snap_subscribe(s->engine, 1);
    sched_snap_request(s->engine);
    uv_timer_start(&d->timer, on_timer, SRV_DASH_PERIOD_MS, SRV_DASH_PERIOD_MS);
    d->timer_on = true;
  }
}

/* ---- set-up and shutdown ------------------------------------------------------------ */

void srv__dash_routes(srv_t *s) {
  const cfg_t *c = s->cfg;
  const bool on = c->dashboard == CFG_DASHBOARD_ON || (c->dashboard == CFG_DASHBOARD_AUTO && local_only(c));
  if (!on) return;
  srv_dash_t *d = xcalloc(1, sizeof *d);
  d->s = s;
  s->dash = d;
  for (int i = 0; i < srv_dash_n_assets; i++) {
    const srv_dash_asset_t *a = &srv_dash_assets[i];
    char path[128];
    if (strcmp(a->name, "index.html") == 0) snprintf(path, sizeof path, "/dashboard");
    else snprintf(path, sizeof path, "/dashboard/%s", a->name);
    http_server_route(s->http, HTTP_GET, path, h_asset, (void *)a, HTTP_ROUTE_PUBLIC);
  }
  http_server_route(s->http, HTTP_GET, "/dashboard/events", h_events, s, 0);
  log_info("dashboard: /dashboard (its stream %s)", c->api_keys.n ? "needs an API key" : "is open: no API keys are set");
}

void srv__dash_ttft(srv_t *s, int64_t ns) {
  if (s->dash) srv__dash_lat_add(&s->dash->ttft, clock_now_ns(), ns);
}

void srv__dash_itl(srv_t *s, int64_t ns) {
  if (s->dash) srv__dash_lat_add(&s->dash->itl, clock_now_ns(), ns);
}

void srv__dash_stop(srv_t *s) {
  srv_dash_t *d = s->dash;
  if (!d || d->stopped) return;
  d->stopped = true;
  while (d->clients) {
    dash_client_t *c = d->clients;
    http_res_stream_end(c->res); /* ends the response: no on_abort follows */
    client_remove(c);
  }
  timer_stop(d);
  if (d->timer_init) uv_close((uv_handle_t *)&d->timer, NULL);
}

void srv__dash_free(srv_t *s) {
  srv_dash_t *d = s->dash;
  if (!d) return;
  free(d->snap);
  free(d->json);
  free(d);
  s->dash = NULL;
}
