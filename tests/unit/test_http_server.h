/* tests/unit/test_http_server.h — the server the test_http*.c binaries run
 * (over test_http_util.h's loop thread and socket clients): its routes
 * (/health, a probe route; /hold, which never answers; /echo; /json, a JSON
 * route; /slow, which answers after 150 ms), limits short enough for the
 * timeouts to be tested, and expect_status. Header-only (static inline), as
 * test_http_util.h, so each binary gets its own copy. */
#ifndef TRAM_TEST_HTTP_SERVER_H
#define TRAM_TEST_HTTP_SERVER_H

#include <stdatomic.h>

#include "tests/unit/test_http_util.h"

/* ---- handlers ------------------------------------------------------------------- */

static inline void h_health(const http_req_t *req, http_res_t *res, void *ctx) {
  http_res_send(res, 200, "text/plain", "ok", 2);
}

/* Echoes the body; says the method, query and the test header it saw. */
static inline void h_echo(const http_req_t *req, http_res_t *res, void *ctx) {
  char q[256];
  snprintf(q, sizeof q, "%s", req->query);
  http_res_header(res, "X-Query", q);
  http_res_header(res, "X-Method", req->method_name);
  const char *t = http_req_header(req, "x-test");
  if (t) http_res_header(res, "X-Test", t);
  http_res_send(res, 200, "application/octet-stream", req->body, req->body_len);
}

/* Answers after 150 ms from a timer: an asynchronous response. */
typedef struct slow {
  uv_timer_t timer;
  http_res_t *res;
} slow_t;

static _Atomic int slow_aborts;

static inline void slow_free(uv_handle_t *h) { free(h->data); }

static inline void slow_fire(uv_timer_t *t) {
  slow_t *s = t->data;
  http_res_send(s->res, 200, "text/plain", "slow", 4);
  uv_close((uv_handle_t *)&s->timer, slow_free);
}

static inline void slow_abort(http_res_t *res, void *user) {
  slow_t *s = user;
  atomic_fetch_add(&slow_aborts, 1);
  uv_timer_stop(&s->timer);
  uv_close((uv_handle_t *)&s->timer, slow_free);
}

static inline void h_slow(const http_req_t *req, http_res_t *res, void *ctx) {
  uv_loop_t *loop = ctx;
  slow_t *s = calloc(1, sizeof *s);
  s->res = res;
  uv_timer_init(loop, &s->timer);
  s->timer.data = s;
  http_res_set_callbacks(res, &(http_res_cbs_t){.on_abort = slow_abort, .user = s});
  uv_timer_start(&s->timer, slow_fire, 150, 0);
}

/* Never answers: the response ends when its client goes away. */
static inline void hold_abort(http_res_t *res, void *user) {}

static inline void h_hold(const http_req_t *req, http_res_t *res, void *ctx) {
  http_res_set_callbacks(res, &(http_res_cbs_t){.on_abort = hold_abort});
}

static th_server_t T;

static inline void start(const http_limits_t *lim) {
  th_init(&T, lim);
  assert_int_equal(
      http_server_route(T.srv, HTTP_GET, "/health", h_health, NULL, HTTP_ROUTE_PUBLIC | HTTP_ROUTE_PROBE), 0);
  assert_int_equal(http_server_route(T.srv, HTTP_GET, "/hold", h_hold, NULL, 0), 0);
  assert_int_equal(http_server_route(T.srv, HTTP_POST, "/echo", h_echo, NULL, 0), 0);
  assert_int_equal(http_server_route(T.srv, HTTP_PUT, "/echo", h_echo, NULL, 0), 0);
  assert_int_equal(http_server_route(T.srv, HTTP_POST, "/json", h_echo, NULL, HTTP_ROUTE_JSON), 0);
  assert_int_equal(http_server_route(T.srv, HTTP_GET, "/slow", h_slow, &T.loop, 0), 0);
  assert_int_equal(http_server_route(T.srv, HTTP_GET, "/health", h_health, NULL, 0), -EEXIST);
  assert_int_equal(http_server_route(T.srv, HTTP_GET, "nope", h_health, NULL, 0), -EINVAL);
  th_start(&T);
}

static inline http_limits_t fast_limits(void) {
  http_limits_t l = http_limits_default();
  l.header_timeout_ms = 600;
  l.body_timeout_ms = 600;
  l.idle_timeout_ms = 600;
  l.linger_ms = 200;
  l.max_body_bytes = 64 * 1024;
  l.max_header_bytes = 4096;
  l.max_headers = 20;
  return l;
}

static char hbuf[512];

/* Sends req on a fresh connection; expects `status`, then the server's close
 * when must_close. */
static inline void expect_status(const char *req, int status, bool must_close) {
  tc_client_t *c = tc_connect(T.port);
  assert_non_null(c);
  tc_resp_t r;
  assert_int_equal(tc_roundtrip(c, req, &r), 0);
  if (r.status != status) fprintf(stderr, "request %.60s...: got %d want %d\n", req, r.status, status);
  assert_int_equal(r.status, status);
  if (status >= 400) { /* an OpenAI error object */
    assert_non_null(r.body);
    assert_non_null(strstr(r.body, "\"error\""));
    assert_string_equal(tc_header(&r, "content-type", hbuf, sizeof hbuf), "application/json");
  }
  if (must_close) {
    assert_false(r.keep_alive);
    assert_true(tc_expect_close(c, 5));
  }
  tc_resp_free(&r);
  tc_close(c);
}
#endif
