/* tests/unit/test_http_stream.c — streamed responses over real sockets:
 * server-sent events with chunked framing, back-pressure (a client that
 * stops reading pauses the producer and memory stays bounded; reading again
 * resumes it), stuck and overfull clients dropped (by the server, and by a
 * producer: http_res_drop), and a disconnect in the middle of a stream
 * reaching the handler. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdatomic.h>

#include "base/log.h"
#include "tests/unit/test_http_util.h"

static th_server_t T;

/* What the producers saw, read by the test thread. */
static _Atomic int n_pauses, n_resumes, n_aborts, n_finished;
static _Atomic size_t bytes_made;
static _Atomic size_t max_queued_seen;

/* A producer of one streamed response, driven by a timer on the loop. */
typedef struct producer {
  uv_timer_t timer;
  http_res_t *res;
  int mode;     /* MODE_* */
  size_t total; /* bytes (flood) or events (sse) to make */
  size_t made;
  uint64_t every_ms;
} producer_t;

enum { MODE_SSE, MODE_FLOOD, MODE_IGNORE, MODE_DROP };
enum { CHUNK = 16 * 1024 };

static void producer_free(uv_handle_t *h) { free(h->data); }

static void producer_done(producer_t *p) {
  p->res = NULL;
  uv_timer_stop(&p->timer);
  uv_close((uv_handle_t *)&p->timer, producer_free);
}

/* The flood's byte at stream offset i: the client checks every byte. */
static char flood_byte(size_t i) { return (char)('a' + (i / 7 + i % 13) % 26); }

static void tick(uv_timer_t *t) {
  producer_t *p = t->data;
  if (p->mode == MODE_DROP) { /* n events, then the producer drops its client */
    if (p->made++ < p->total) {
      http_res_sse(p->res, "x", 1);
      return;
    }
    uv_timer_stop(&p->timer);
    http_res_drop(p->res);
    http_res_drop(p->res); /* a second call: a no-op */
    return;                /* on_abort follows */
  }
  if (p->mode == MODE_SSE) {
    char ev[64];
    int n = p->made == 0 ? snprintf(ev, sizeof ev, "first\nsecond") /* two lines */
                         : snprintf(ev, sizeof ev, "{\"i\":%zu}", p->made);
    http_res_sse(p->res, ev, (size_t)n);
    if (++p->made == p->total) {
      http_res_sse(p->res, "[DONE]", 6);
      http_res_stream_end(p->res);
      atomic_fetch_add(&n_finished, 1);
      producer_done(p);
    }
    return;
  }
  /* flood: write while writable (MODE_IGNORE: regardless), a bounded burst
   * per loop turn */
  for (int burst = 0; burst < 64 && p->made < p->total; burst++) {
    if (p->mode == MODE_FLOOD && !http_res_writable(p->res)) {
      uv_timer_stop(&p->timer); /* on_writable(true) restarts it */
      return;
    }
    char buf[CHUNK];
    size_t n = p->total - p->made < CHUNK ? p->total - p->made : CHUNK;
    for (size_t i = 0; i < n; i++) buf[i] = flood_byte(p->made + i);
    if (http_res_stream_write(p->res, buf, n) < 0) {
      uv_timer_stop(&p->timer); /* dropped: on_abort follows */
      return;
    }
    p->made += n;
    atomic_store(&bytes_made, p->made);
    size_t q = http_res_queued(p->res);
    if (q > atomic_load(&max_queued_seen)) atomic_store(&max_queued_seen, q);
  }
  if (p->made == p->total) {
    http_res_stream_end(p->res);
    atomic_fetch_add(&n_finished, 1);
    producer_done(p);
  }
}

static void on_writable(http_res_t *res, bool writable, void *user) {
  producer_t *p = user;
  if (writable) {
    atomic_fetch_add(&n_resumes, 1);
    uv_timer_start(&p->timer, tick, 0, p->every_ms);
  } else {
    atomic_fetch_add(&n_pauses, 1);
  }
}

static void on_abort(http_res_t *res, void *user) {
  atomic_fetch_add(&n_aborts, 1);
  producer_done(user);
}

static size_t query_num(const http_req_t *req, const char *key, size_t dflt) {
  const char *q = strstr(req->query, key);
  size_t v;
  if (q && sscanf(q + strlen(key), "=%zu", &v) == 1) return v;
  return dflt;
}

static void start_producer(const http_req_t *req, http_res_t *res, int mode) {
  producer_t *p = calloc(1, sizeof *p);
  p->res = res;
  p->mode = mode;
  const bool events = mode == MODE_SSE || mode == MODE_DROP;
  p->total = query_num(req, events ? "n" : "bytes", 10);
  p->every_ms = query_num(req, "ms", events ? 10 : 1);
  uv_timer_init(&T.loop, &p->timer);
  p->timer.data = p;
  http_res_set_callbacks(res, &(http_res_cbs_t){.on_abort = on_abort, .on_writable = on_writable, .user = p});
  int r = http_res_stream_begin(res, 200, events ? "text/event-stream" : "application/octet-stream");
  assert_int_equal(r, 0);
  assert_int_equal(http_res_stream_begin(res, 200, "x"), -EINVAL);
  uv_timer_start(&p->timer, tick, p->every_ms, p->every_ms);
}

static void h_sse(const http_req_t *req, http_res_t *res, void *ctx) { start_producer(req, res, MODE_SSE); }
static void h_flood(const http_req_t *req, http_res_t *res, void *ctx) { start_producer(req, res, MODE_FLOOD); }
static void h_ignore(const http_req_t *req, http_res_t *res, void *ctx) { start_producer(req, res, MODE_IGNORE); }
static void h_drop(const http_req_t *req, http_res_t *res, void *ctx) { start_producer(req, res, MODE_DROP); }
static void h_health(const http_req_t *req, http_res_t *res, void *ctx) {
  assert_int_equal(http_res_stream_write(res, "x", 1), -EINVAL); /* not a stream */
  http_res_send(res, 200, "text/plain", "ok", 2);
}

static void reset_counters(void) {
  atomic_store(&n_pauses, 0);
  atomic_store(&n_resumes, 0);
  atomic_store(&n_aborts, 0);
  atomic_store(&n_finished, 0);
  atomic_store(&bytes_made, 0);
  atomic_store(&max_queued_seen, 0);
}

static void start(const http_limits_t *l) {
  reset_counters();
  th_init(&T, l);
  http_server_route(T.srv, HTTP_GET, "/sse", h_sse, NULL, 0);
  http_server_route(T.srv, HTTP_GET, "/flood", h_flood, NULL, 0);
  http_server_route(T.srv, HTTP_GET, "/ignore", h_ignore, NULL, 0);
  http_server_route(T.srv, HTTP_GET, "/drop", h_drop, NULL, 0);
  http_server_route(T.srv, HTTP_GET, "/health", h_health, NULL, 0);
  th_start(&T);
}

/* A client whose receive buffer is small, so that the server's queue fills. */
static tc_client_t *connect_small(int port) {
  tc_client_t *c = calloc(1, sizeof *c);
  c->fd = socket(AF_INET, SOCK_STREAM, 0);
  int small = 4096;
  setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(c->fd, (struct sockaddr *)&a, sizeof a), 0);
  tc_set_timeout(c, 10);
  tc__init_parser(c);
  return c;
}

static bool all_done(void *arg) { return atomic_load(&n_aborts) + atomic_load(&n_finished) == 16; }

static bool flag_at_least(void *arg) { return atomic_load((_Atomic int *)arg) >= 1; }

static char hb[256];

static void sse_events(void **state) {
  start(NULL);
  tc_client_t *c = tc_connect(T.port);
  tc_resp_t r;
  assert_int_equal(tc_roundtrip(c, "GET /sse?n=5&ms=5 HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  assert_int_equal(r.status, 200);
  assert_string_equal(tc_header(&r, "content-type", hb, sizeof hb), "text/event-stream");
  assert_string_equal(tc_header(&r, "transfer-encoding", hb, sizeof hb), "chunked");
  assert_string_equal(tc_header(&r, "cache-control", hb, sizeof hb), "no-cache");
  assert_string_equal(r.body, "data: first\ndata: second\n\n"
                              "data: {\"i\":1}\n\ndata: {\"i\":2}\n\ndata: {\"i\":3}\n\ndata: {\"i\":4}\n\n"
                              "data: [DONE]\n\n");
  assert_true(r.keep_alive);
  tc_resp_free(&r);
  /* the connection carries the next request */
  assert_int_equal(tc_roundtrip(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  assert_int_equal(r.status, 200);
  tc_resp_free(&r);
  tc_close(c);
  /* HTTP/1.0: no chunked framing; the close ends the body */
  c = tc_connect(T.port);
  assert_int_equal(tc_roundtrip(c, "GET /sse?n=2&ms=5 HTTP/1.0\r\n\r\n", &r), 0);
  assert_int_equal(r.status, 200);
  assert_string_equal(tc_header(&r, "transfer-encoding", hb, sizeof hb), "");
  assert_string_equal(r.body, "data: first\ndata: second\n\ndata: {\"i\":1}\n\ndata: [DONE]\n\n");
  tc_resp_free(&r);
  tc_close(c);
  th_stop(&T);
}

/* The client stops reading: the producer is paused and the server's queue
 * stays near the high-water mark; when the client reads again the producer
 * resumes and every byte arrives in order. */
static void back_pressure(void **state) {
  http_limits_t l = http_limits_default();
  l.stream_high_water = 128 * 1024;
  l.stream_low_water = 32 * 1024;
  start(&l);
  const size_t total = 16u << 20; /* well past what the kernel buffers (~3 MiB here) */
  tc_client_t *c = connect_small(T.port);
  char req[128];
  snprintf(req, sizeof req, "GET /flood?bytes=%zu&ms=1 HTTP/1.1\r\nHost: x\r\n\r\n", total);
  assert_true(tc_send(c, req));
  assert_true(th_wait_until(flag_at_least, &n_pauses, 10));
  usleep(200 * 1000);
  size_t made = atomic_load(&bytes_made);
  usleep(200 * 1000);
  if (atomic_load(&n_resumes) == 0) /* (the kernel may take more and resume it) */
    assert_int_equal(atomic_load(&bytes_made), made); /* paused: nothing more made */
  assert_true(made < total);
  size_t peak = th_stats(&T).max_queued;
  /* at most one chunk past the mark, whatever the kernel buffers took */
  assert_true(peak <= l.stream_high_water + CHUNK + 64);
  assert_true(atomic_load(&max_queued_seen) <= peak);
  /* read everything: the producer resumes and the bytes are all there */
  tc_resp_t r;
  assert_int_equal(tc_read_response(c, &r), 0);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.body_len, total);
  for (size_t i = 0; i < total; i++)
    if (r.body[i] != flood_byte(i)) fail_msg("byte %zu differs", i);
  tc_resp_free(&r);
  assert_true(atomic_load(&n_resumes) >= 1);
  assert_int_equal(atomic_load(&n_finished), 1);
  assert_int_equal(atomic_load(&n_aborts), 0);
  assert_true(th_stats(&T).max_queued <= l.stream_high_water + CHUNK + 64);
  tc_close(c);
  th_stop(&T);
}

/* A client that never reads again is dropped after write_stall_ms. */
static void stuck_client_dropped(void **state) {
  http_limits_t l = http_limits_default();
  l.stream_high_water = 128 * 1024;
  l.stream_low_water = 32 * 1024;
  l.write_stall_ms = 400;
  start(&l);
  tc_client_t *c = connect_small(T.port);
  assert_true(tc_send(c, "GET /flood?bytes=268435456 HTTP/1.1\r\nHost: x\r\n\r\n"));
  assert_true(th_wait_until(flag_at_least, &n_pauses, 10));
  double t0 = th_now();
  assert_true(th_wait_until(flag_at_least, &n_aborts, 10));
  assert_true(th_now() - t0 < 5);
  assert_int_equal(th_stats(&T).dropped, 1);
  assert_int_equal(th_stats(&T).connections_open, 0);
  tc_close(c);
  th_stop(&T);
}

/* A producer that ignores back-pressure is cut off at max_write_queue. */
static void overfull_queue_dropped(void **state) {
  http_limits_t l = http_limits_default();
  l.stream_high_water = 64 * 1024;
  l.stream_low_water = 16 * 1024;
  l.max_write_queue = 1 << 20;
  start(&l);
  tc_client_t *c = connect_small(T.port);
  assert_true(tc_send(c, "GET /ignore?bytes=268435456 HTTP/1.1\r\nHost: x\r\n\r\n"));
  assert_true(th_wait_until(flag_at_least, &n_aborts, 10));
  assert_int_equal(th_stats(&T).dropped, 1);
  assert_true(th_stats(&T).max_queued <= l.max_write_queue);
  assert_true(atomic_load(&n_pauses) >= 1);
  tc_close(c);
  th_stop(&T);
}

/* A producer drops its client (http_res_drop): the connection closes
 * without the stream's end, on_abort runs once, and it counts as dropped. */
static void producer_drops_client(void **state) {
  start(NULL);
  tc_client_t *c = tc_connect(T.port);
  assert_true(tc_send(c, "GET /drop?n=3&ms=5 HTTP/1.1\r\nHost: x\r\n\r\n"));
  char all[4096];
  size_t n = 0;
  ssize_t k;
  while (n < sizeof all - 1 && (k = recv(c->fd, all + n, sizeof all - 1 - n, 0)) > 0) n += (size_t)k;
  all[n] = '\0';
  assert_true(k == 0 || (k < 0 && errno == ECONNRESET)); /* closed by the server */
  assert_non_null(strstr(all, "data: x\n\n"));
  assert_null(strstr(all, "\r\n0\r\n\r\n")); /* no final chunk: the response never ended */
  assert_true(th_wait_until(flag_at_least, &n_aborts, 5));
  assert_int_equal(atomic_load(&n_aborts), 1);
  assert_int_equal(th_stats(&T).dropped, 1);
  assert_int_equal(th_stats(&T).connections_open, 0);
  tc_close(c);
  th_stop(&T);
}

/* The client leaves in the middle of a stream: on_abort reaches the handler
 * (the integration cancels the engine request there). */
static void disconnect_mid_stream(void **state) {
  start(NULL);
  tc_client_t *c = tc_connect(T.port);
  assert_true(tc_send(c, "GET /sse?n=100000&ms=2 HTTP/1.1\r\nHost: x\r\n\r\n"));
  char buf[512];
  assert_true(recv(c->fd, buf, sizeof buf, 0) > 0); /* the stream has begun */
  tc_close(c);
  assert_true(th_wait_until(flag_at_least, &n_aborts, 5));
  assert_int_equal(atomic_load(&n_finished), 0);
  assert_int_equal(th_stats(&T).connections_open, 0);
  /* and with a reset instead of a close */
  c = tc_connect(T.port);
  assert_true(tc_send(c, "GET /sse?n=100000&ms=2 HTTP/1.1\r\nHost: x\r\n\r\n"));
  assert_true(recv(c->fd, buf, sizeof buf, 0) > 0);
  struct linger lg = {.l_onoff = 1, .l_linger = 0};
  setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  atomic_store(&n_aborts, 0);
  tc_close(c);
  assert_true(th_wait_until(flag_at_least, &n_aborts, 5));
  /* many streams at once, half of them abandoned */
  enum { N = 16 };
  tc_client_t *cs[N];
  for (int i = 0; i < N; i++) {
    cs[i] = tc_connect(T.port);
    assert_true(tc_send(cs[i], "GET /sse?n=20&ms=5 HTTP/1.1\r\nHost: x\r\n\r\n"));
  }
  atomic_store(&n_aborts, 0);
  atomic_store(&n_finished, 0);
  for (int i = 0; i < N; i += 2) tc_close(cs[i]);
  for (int i = 1; i < N; i += 2) {
    tc_resp_t r;
    assert_int_equal(tc_read_response(cs[i], &r), 0);
    assert_non_null(strstr(r.body, "data: [DONE]\n\n"));
    tc_resp_free(&r);
    tc_close(cs[i]);
  }
  assert_true(th_wait_until(all_done, NULL, 5));
  assert_true(atomic_load(&n_finished) >= N / 2);
  th_stop(&T);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  log_set_level(LOG_LEVEL_ERROR);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sse_events),
      cmocka_unit_test(back_pressure),
      cmocka_unit_test(stuck_client_dropped),
      cmocka_unit_test(overfull_queue_dropped),
      cmocka_unit_test(producer_drops_client),
      cmocka_unit_test(disconnect_mid_stream),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
