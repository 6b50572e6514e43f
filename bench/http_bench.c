/* bench/http_bench.c — the HTTP layer alone, for load generators.
 *
 *   build/bench/http_bench [PORT]      (default 8089; 0 picks a free port)
 *
 * Serves, with tram's HTTP server and no engine:
 *   GET /health            200 "ok" (what wrk hammers)
 *   GET /stream?n=N        N chat.completion.chunk SSE events, made as fast
 *                          as back-pressure allows, then [DONE]
 * Prints "listening on 127.0.0.1:PORT" and, after each stream, the server
 * time spent per event (JSON writer + SSE write; what a streamed token costs
 * outside the engine). SIGINT/SIGTERM drains (in-flight streams finish) and
 * exits. bench/http_bench.sh drives it with wrk and curl. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uv.h>

#include "base/log.h"
#include "http/http.h"
#include "api/oai_response.h"

typedef struct stream {
  uv_idle_t idle; /* makes events while writable */
  http_res_t *res;
  long n, made;
  double busy_s; /* time inside the writer and the write calls */
} stream_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void stream_free(uv_handle_t *h) { free(h->data); }

static void stream_done(stream_t *s, const char *how) {
  if (s->made)
    fprintf(stderr, "stream %s: %ld events, %.3f us of server time per event\n", how, s->made,
            s->busy_s / (double)s->made * 1e6);
  uv_idle_stop(&s->idle);
  uv_close((uv_handle_t *)&s->idle, stream_free);
}

static void produce(uv_idle_t *h) {
  stream_t *s = h->data;
  static const char *const words[] = {" the", " quick", " brown", " fox", " jumps", " over", " a", " dog"};
  oai_meta_t meta = {.id = "chatcmpl-bench", .model = "bench", .created = 1700000000};
  for (int burst = 0; burst < 256 && s->made < s->n; burst++) {
    if (!http_res_writable(s->res)) {
      uv_idle_stop(&s->idle); /* on_writable(true) restarts it */
      return;
    }
    const char *w = words[s->made % 8];
    oai_choice_t c = {.index = 0, .text = w, .text_len = strlen(w), .stop_token = -1};
    double t0 = now_s();
    char *json = oai_write_chat_chunk(&meta, &c, s->made == 0, false);
    int r = http_res_sse(s->res, json, strlen(json));
    s->busy_s += now_s() - t0;
    free(json);
    if (r < 0) {
      uv_idle_stop(&s->idle); /* dropped: on_abort follows */
      return;
    }
    s->made++;
  }
  if (s->made == s->n) {
    http_res_sse(s->res, "[DONE]", 6);
    http_res_stream_end(s->res);
    stream_done(s, "done");
  }
}

static void on_writable(http_res_t *res, bool writable, void *user) {
  stream_t *s = user;
  if (writable) uv_idle_start(&s->idle, produce);
}

static void on_abort(http_res_t *res, void *user) { stream_done(user, "aborted"); }

static void h_stream(const http_req_t *req, http_res_t *res, void *ctx) {
  stream_t *s = calloc(1, sizeof *s);
  s->res = res;
  s->n = 1000;
  const char *q = strstr(req->query, "n=");
  if (q) s->n = strtol(q + 2, NULL, 10);
  if (s->n < 1) s->n = 1;
  uv_idle_init(ctx, &s->idle);
  s->idle.data = s;
  http_res_set_callbacks(res, &(http_res_cbs_t){.on_abort = on_abort, .on_writable = on_writable, .user = s});
  http_res_stream_begin(res, 200, "text/event-stream");
  uv_idle_start(&s->idle, produce);
}

static void h_health(const http_req_t *req, http_res_t *res, void *ctx) {
  http_res_send(res, 200, "text/plain", "ok", 2);
}

static http_server_t *srv;
static uv_signal_t sigint, sigterm;

static void on_drained(void *arg) {
  http_server_close(srv, NULL, NULL);
  uv_close((uv_handle_t *)&sigint, NULL);
  uv_close((uv_handle_t *)&sigterm, NULL);
}

static void on_signal(uv_signal_t *h, int signum) {
  fprintf(stderr, "signal %d: draining\n", signum);
  if (http_server_drain(srv, on_drained, NULL) < 0) on_drained(NULL);
}

int main(int argc, char **argv) {
  int port = argc > 1 ? atoi(argv[1]) : 8089;
  log_set_level(LOG_LEVEL_WARN);
  uv_loop_t *loop = uv_default_loop();
  http_limits_t lim = http_limits_default();
  lim.max_connections = 4096;
  srv = http_server_create(loop, &lim);
  if (!srv) return 1;
  http_server_route(srv, HTTP_GET, "/health", h_health, NULL, HTTP_ROUTE_PUBLIC);
  http_server_route(srv, HTTP_GET, "/stream", h_stream, loop, 0);
  int bound;
  if (http_server_listen_tcp(srv, "127.0.0.1", port, &bound) < 0) return 1;
  printf("listening on 127.0.0.1:%d\n", bound);
  fflush(stdout);
  uv_signal_init(loop, &sigint);
  uv_signal_init(loop, &sigterm);
  uv_signal_start(&sigint, on_signal, SIGINT);
  uv_signal_start(&sigterm, on_signal, SIGTERM);
  uv_run(loop, UV_RUN_DEFAULT);
  return uv_loop_close(loop) == 0 ? 0 : 1;
}
