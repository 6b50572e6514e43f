/* server/srv_dash.h — the live engine dashboard of `tram serve`:
 *
 *   GET /dashboard                 the page (HTML; its CSS and JavaScript at
 *   GET /dashboard/dashboard.css   the two paths beside it), embedded in the
 *   GET /dashboard/dashboard.js    binary from server/dashboard/ at build time
 *   GET /dashboard/events          the snapshot stream (SSE), a few a second
 *
 * Enabled by the `dashboard` setting (auto: on when listening on loopback or
 * a unix socket). The page holds no data and is public; the stream carries
 * the engine's state and needs an API key when keys are set, as every other
 * route: the page asks for the key once, keeps it in the tab's
 * sessionStorage and sends it as `Authorization: Bearer` from fetch(), which
 * reads the SSE body itself (EventSource cannot send headers). A key thus
 * never rides in a URL, a cookie or a log line.
 *
 * Cost and isolation: while a stream is open the engine is subscribed and
 * asked for a snapshot every SRV_DASH_PERIOD_MS (sched_snapshot.h); the loop
 * renders each snapshot to JSON once and writes it to every client that
 * reads. A client that leaves its output unread (bytes queued here, or more
 * than SRV_UNREAD_BYTES in the kernel's send queue: the generation streams'
 * measure) misses snapshots (counted) instead of buffering them; one that
 * stays so for slow_client_timeout is dropped, and with every slot taken a
 * new client takes the slot of the one backed up longest. The engine never
 * waits for a client.
 *
 * srv_dash.c owns the routes, clients and timer; srv_dash_json.c the
 * latency window and the JSON (pure functions, unit-tested). Loop thread
 * only. */
#ifndef TRAM_SRV_DASH_H
#define TRAM_SRV_DASH_H

#include <stddef.h>
#include <stdint.h>

#include "scheduler/sched_snapshot.h"

#define SRV_DASH_PERIOD_MS 250   /* snapshots asked for and sent at most this often */
#define SRV_DASH_MAX_CLIENTS 16  /* streams open at once; more get 503 (unless one is backed up) */
#define SRV_DASH_WINDOW_NS (60 * INT64_C(1000000000)) /* latency percentiles over the last minute */
#define SRV_DASH_LAT_CAP 4096    /* latency samples kept per kind (the newest) */

typedef struct srv srv_t;
typedef struct srv_dash srv_dash_t;

/* ---- srv_dash.c ------------------------------------------------------------- */

/* Registers the routes when cfg->dashboard enables them (and creates the
 * dashboard's state in s->dash); with it off, nothing (the paths 404). */
void srv__dash_routes(srv_t *s);
/* A request's time to first token, and one inter-token gap (ns), for the
 * latency sparklines. No-ops without a dashboard. */
void srv__dash_ttft(srv_t *s, int64_t ns);
void srv__dash_itl(srv_t *s, int64_t ns);
/* Ends every stream and stops the timer (drain, shutdown). Idempotent. */
void srv__dash_stop(srv_t *s);
/* Frees the dashboard's state once the loop has closed (after
 * srv__dash_stop). NULL state: no-op. */
void srv__dash_free(srv_t *s);

/* ---- srv_dash_json.c --------------------------------------------------------- */

/* A sliding window of latency samples: the newest SRV_DASH_LAT_CAP. */
typedef struct srv_dash_lat {
  int64_t t[SRV_DASH_LAT_CAP]; /* when each was observed (CLOCK_MONOTONIC ns) */
  int64_t v[SRV_DASH_LAT_CAP]; /* its value (ns) */
  uint64_t n;                  /* samples ever added; the newest is at (n - 1) % CAP */
} srv_dash_lat_t;

void srv__dash_lat_add(srv_dash_lat_t *l, int64_t t, int64_t v);

/* The nearest-rank p50 and p99 (ns) of the samples observed in
 * (now - window, now]; returns how many there were (0: *p50 = *p99 = 0). */
int srv__dash_lat_pct(const srv_dash_lat_t *l, int64_t now, int64_t window, int64_t *p50, int64_t *p99);

/* What the page shows beside the engine's state. */
typedef struct srv_dash_info {
  const char *model;       /* served model name */
  const char *model_file;  /* its file name (srv__model_shown) */
  const char *device;      /* "cpu", "cuda" */
  int threads;             /* compute threads */
  const char *version;
  int64_t kv_cache_bytes;  /* the cache's size in bytes */
  int64_t uptime_ns;
  uint64_t clients;        /* dashboard streams open */
  uint64_t dropped;        /* snapshots not sent to a backed-up client, all clients together */
  int64_t loop_ns;         /* loop time spent rendering and writing snapshots so far */
} srv_dash_info_t;

/* The JSON of one snapshot (docs/api.md, "Dashboard stream"), malloc'd,
 * *len bytes plus a NUL. ttft and itl may be NULL (no latency fields). */
char *srv__dash_json(const sched_snap_t *sn, const srv_dash_info_t *info, const srv_dash_lat_t *ttft,
                     const srv_dash_lat_t *itl, size_t *len);

/* The embedded page (generated at build time from server/dashboard/). */
typedef struct srv_dash_asset {
  const char *name;         /* "index.html", "dashboard.css", "dashboard.js" */
  const char *content_type;
  const unsigned char *data;
  size_t len;
} srv_dash_asset_t;

extern const srv_dash_asset_t srv_dash_assets[];
extern const int srv_dash_n_assets;

#endif
