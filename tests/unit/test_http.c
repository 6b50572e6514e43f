/* tests/unit/test_http.c — the HTTP/1.1 server over real sockets: parsing,
 * keep-alive, pipelining, chunked bodies, limits (400/408/413/431/503),
 * routing (404/405), auth (401), listeners (TCP, unix, inherited fd), drain.
 * The server runs on its own loop thread; handlers are registered here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdatomic.h>

#include "api/anth.h"
#include "base/log.h"
#include "http/http_parse.h"
#include "tests/unit/test_http_util.h"

/* ---- handlers ------------------------------------------------------------------- */

static void h_health(const http_req_t *req, http_res_t *res, void *ctx) {
  http_res_send(res, 200, "text/plain", "ok", 2);
}

/* Echoes the body; says the method, query and the test header it saw. */
static void h_echo(const http_req_t *req, http_res_t *res, void *ctx) {
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

static void slow_free(uv_handle_t *h) { free(h->data); }

static void slow_fire(uv_timer_t *t) {
  slow_t *s = t->data;
  http_res_send(s->res, 200, "text/plain", "slow", 4);
  uv_close((uv_handle_t *)&s->timer, slow_free);
}

static void slow_abort(http_res_t *res, void *user) {
  slow_t *s = user;
  atomic_fetch_add(&slow_aborts, 1);
  uv_timer_stop(&s->timer);
  uv_close((uv_handle_t *)&s->timer, slow_free);
}

static void h_slow(const http_req_t *req, http_res_t *res, void *ctx) {
  uv_loop_t *loop = ctx;
  slow_t *s = calloc(1, sizeof *s);
  s->res = res;
  uv_timer_init(loop, &s->timer);
  s->timer.data = s;
  http_res_set_callbacks(res, &(http_res_cbs_t){.on_abort = slow_abort, .user = s});
  uv_timer_start(&s->timer, slow_fire, 150, 0);
}

/* Never answers: the response ends when its client goes away. */
static void hold_abort(http_res_t *res, void *user) {}

static void h_hold(const http_req_t *req, http_res_t *res, void *ctx) {
  http_res_set_callbacks(res, &(http_res_cbs_t){.on_abort = hold_abort});
}

static th_server_t T;

static void start(const http_limits_t *lim) {
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

static http_limits_t fast_limits(void) {
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
static void expect_status(const char *req, int status, bool must_close) {
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

/* ---- tests ---------------------------------------------------------------------- */

/* GET /health twice on one connection (keep-alive), with Date and length. */
static void keep_alive_reuse(void **state) {
  http_limits_t l = fast_limits();
  start(&l);
  tc_client_t *c = tc_connect(T.port);
  for (int i = 0; i < 3; i++) {
    tc_resp_t r;
    assert_int_equal(tc_roundtrip(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok");
    assert_true(r.keep_alive);
    assert_string_equal(tc_header(&r, "content-length", hbuf, sizeof hbuf), "2");
    assert_true(strlen(tc_header(&r, "date", hbuf, sizeof hbuf)) > 20);
    tc_resp_free(&r);
  }
  tc_close(c);
  /* HEAD: the head of GET (with its Content-Length), no body. */
  c = tc_connect(T.port);
  assert_true(tc_send(c, "HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  char raw[1024] = {0};
  size_t got = 0;
  while (!strstr(raw, "\r\n\r\n")) {
    ssize_t n = recv(c->fd, raw + got, sizeof raw - 1 - got, 0);
    assert_true(n > 0);
    got += (size_t)n;
  }
  assert_non_null(strstr(raw, "Content-Length: 2\r\n"));
  struct pollfd p = {.fd = c->fd, .events = POLLIN};
  if (strstr(raw, "\r\n\r\n")[4] == '\0') assert_int_equal(poll(&p, 1, 100), 0); /* nothing more */
  else fail_msg("HEAD response has a body");
  tc_close(c);
  tc_resp_t r;
  /* HTTP/1.0 without keep-alive: answered, then closed. */
  c = tc_connect(T.port);
  assert_int_equal(tc_roundtrip(c, "GET /health HTTP/1.0\r\n\r\n", &r), 0);
  assert_int_equal(r.status, 200);
  assert_false(r.keep_alive);
  assert_true(tc_expect_close(c, 5));
  tc_resp_free(&r);
  tc_close(c);
  /* HTTP/1.0 with keep-alive: stays open. */
  c = tc_connect(T.port);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(tc_roundtrip(c, "GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(r.keep_alive);
    tc_resp_free(&r);
  }
  tc_close(c);
  th_stop(&T);
}

static void routing_404_405(void **state) {
  http_limits_t l = fast_limits();
  start(&l);
  expect_status("GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n", 404, false);
  expect_status("GET /health/ HTTP/1.1\r\nHost: x\r\n\r\n", 404, false);
  tc_client_t *c = tc_connect(T.port);
  tc_resp_t r;
  assert_int_equal(tc_roundtrip(c, "DELETE /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  assert_int_equal(r.status, 405);
  assert_string_equal(tc_header(&r, "allow", hbuf, sizeof hbuf), "POST, PUT");
  assert_true(r.keep_alive); /* a routing error does not end the connection */
  tc_resp_free(&r);
  /* query string and absolute-form URL */
  assert_int_equal(tc_roundtrip(c, "POST http://x/echo?a=1&b=2 HTTP/1.1\r\nHost: x\r\n"
                                   "Content-Length: 3\r\nX-Test: hi\r\n\r\nabc", &r), 0);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "abc");
  assert_string_equal(tc_header(&r, "x-query", hbuf, sizeof hbuf), "a=1&b=2");
  assert_string_equal(tc_header(&r, "x-test", hbuf, sizeof hbuf), "hi");
  tc_resp_free(&r);
  tc_close(c);
  th_stop(&T);
}

static void malformed_requests_400(void **state) {
  http_limits_t l = fast_limits();
  start(&l);
  expect_status("GARBAGE\r\n\r\n", 400, true);
  expect_status("GET /health HTTP/9.9\r\nHost: x\r\n\r\n", 400, true);
  expect_status("GET /health HTTP/1.1\r\nBad Header: x\r\n\r\n", 400, true);
  expect_status("GET /health HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", 400, true);
  expect_status("GET /health HTTP/1.1\r\n\r\n", 400, true); /* no Host */
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
                400, true);
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 400, true);
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400, true);
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n", 400, true);
  expect_status("GET /he\x01lth HTTP/1.1\r\nHost: x\r\n\r\n", 400, true);
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 1\r\n\r\nx", 400, true);
  /* the server still serves others */
  expect_status("GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 200, false);
  th_stop(&T);
}

/* RFC 9112 strictness: what a proxy in front might read differently. */
static void strict_http(void **state) {
  http_limits_t l = fast_limits();
  start(&l);
  expect_status("GET /health HTTP/2.0\r\nHost: x\r\n\r\n", 505, true);
  expect_status("GET /health HTTP/1.1\r\nHost: x\r\n: empty\r\n\r\n", 400, true);
  expect_status("GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\r\n folded\r\n\r\n", 400, true);
  /* chunk extensions past HTTP__MAX_CHUNK_EXT bytes */
  size_t n = 64 * 1024;
  char *req = malloc(n + 200);
  int k = sprintf(req, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1;e=");
  memset(req + k, 'x', n);
  strcpy(req + k + n, "\r\nz\r\n0\r\n\r\n");
  expect_status(req, 400, true);
  /* extensions within the limit are fine */
  k = sprintf(req, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1;e=");
  memset(req + k, 'x', HTTP__MAX_CHUNK_EXT - 4);
  strcpy(req + k + HTTP__MAX_CHUNK_EXT - 4, "\r\nz\r\n0\r\n\r\n");
  expect_status(req, 200, false);
  free(req);
  /* a chunk size past the body limit: 413 at once (before the deadline's 408) */
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n", 413,
                true);
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10001\r\n", 413, true);
  /* Host: exactly one, of host[:port] characters (RFC 9112 3.2); empty is allowed */
  expect_status("GET /health HTTP/1.1\r\nHost: x\r\nHost: x\r\n\r\n", 400, true);
  expect_status("GET /health HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nhOsT: b\r\n\r\n", 400, true);
  expect_status("GET /health HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", 400, true);
  expect_status("GET /health HTTP/1.1\r\nHost: a b\r\n\r\n", 400, true);
  expect_status("GET /health HTTP/1.1\r\nHost: a/b\r\n\r\n", 400, true);
  expect_status("GET /health HTTP/1.1\r\nHost: \r\n\r\n", 200, false);
  expect_status("GET /health HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", 200, false);
  expect_status("GET /health HTTP/1.1\r\nHost: my-host.example.com:80\r\n\r\n", 200, false);
  /* transfer codings: chunked only (RFC 9112 6.1: others are 501), once */
  const char *codings[][2] = {{"gzip, chunked", "501"}, {"gzip", "501"}, {"deflate,chunked", "501"},
                              {"identity", "501"}, {"chunked, chunked", "400"}, {",", "400"},
                              {"Chunked", "200"}, {" chunked ", "200"}};
  for (size_t i = 0; i < sizeof codings / sizeof *codings; i++) {
    char r[256];
    snprintf(r, sizeof r, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: %s\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
             codings[i][0]);
    expect_status(r, atoi(codings[i][1]), atoi(codings[i][1]) != 200);
  }
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
                "3\r\nabc\r\n0\r\n\r\n", 501, true);
  th_stop(&T);
}

/* HTTP_ROUTE_JSON: the body must come as application/json (415 otherwise,
 * the connection kept). */
static void json_routes_415(void **state) {
  http_limits_t l = fast_limits();
  start(&l);
  const struct {
    const char *header; /* the Content-Type line, or "" */
    int status;
  } cases[] = {
      {"", 415},
      {"Content-Type: text/plain\r\n", 415},
      {"Content-Type: application/x-www-form-urlencoded\r\n", 415}, /* curl -d without -H */
      {"Content-Type: multipart/form-data; boundary=x\r\n", 415},
      {"Content-Type: application/jsonx\r\n", 415},
      {"Content-Type: application/json-patch+json\r\n", 415},
      {"Content-Type: application/json; charset=latin1\r\n", 415},
      {"Content-Type: \r\n", 415},
      {"Content-Type: application/json\r\n", 200},
      {"Content-Type: Application/JSON; charset=UTF-8\r\n", 200},
      {"Content-Type: application/json ; charset=\"utf-8\"\r\n", 200},
      {"Content-Type: application/json;foo=bar\r\n", 200},
  };
  tc_client_t *c = tc_connect(T.port); /* one connection: a 415 keeps it */
  assert_non_null(c);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char req[256];
    snprintf(req, sizeof req, "POST /json HTTP/1.1\r\nHost: x\r\n%sContent-Length: 2\r\n\r\n{}", cases[i].header);
    tc_resp_t r;
    assert_int_equal(tc_roundtrip(c, req, &r), 0);
    if (r.status != cases[i].status) fprintf(stderr, "%s: got %d\n", cases[i].header, r.status);
    assert_int_equal(r.status, cases[i].status);
    assert_true(r.keep_alive);
    if (r.status == 415) assert_non_null(strstr(r.body, "application/json"));
    tc_resp_free(&r);
  }
  tc_close(c);
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 1\r\n\r\nx", 200,
                false); /* routes without the flag take any body */
  th_stop(&T);
}

static void header_limits_431(void **state) {
  http_limits_t l = fast_limits();
  start(&l);
  size_t n = 6000;
  char *req = malloc(n + 200);
  int k = snprintf(req, 200, "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ");
  memset(req + k, 'a', n);
  strcpy(req + k + n, "\r\n\r\n");
  expect_status(req, 431, true);
  /* a long URL counts too */
  k = snprintf(req, 200, "GET /");
  memset(req + k, 'b', n);
  strcpy(req + k + n, " HTTP/1.1\r\nHost: x\r\n\r\n");
  expect_status(req, 431, true);
  /* too many header lines */
  k = snprintf(req, 200, "GET /health HTTP/1.1\r\nHost: x\r\n");
  for (int i = 0; i < 30; i++) k += sprintf(req + k, "X-%d: y\r\n", i);
  strcpy(req + k, "\r\n");
  expect_status(req, 431, true);
  free(req);
  th_stop(&T);
}

static void body_limits_413(void **state) {
  http_limits_t l = fast_limits();
  start(&l);
  /* Content-Length over the limit: refused before the body is sent. */
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\n\r\n", 413, true);
  /* With Expect: 100-continue the client never has to send the body. */
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 999999\r\nExpect: 100-continue\r\n\r\n",
                413, true);
  /* A chunked body that grows past the limit. */
  tc_client_t *c = tc_connect(T.port);
  assert_true(tc_send(c, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  char chunk[8192 + 16];
  int k = sprintf(chunk, "2000\r\n");
  memset(chunk + k, 'z', 8192);
  memcpy(chunk + k + 8192, "\r\n", 2);
  tc_resp_t r;
  for (int i = 0; i < 9; i++)
    if (!tc_send_n(c, chunk, (size_t)k + 8194)) break; /* the server may close first */
  assert_int_equal(tc_read_response(c, &r), 0);
  assert_int_equal(r.status, 413);
  assert_true(tc_expect_close(c, 5));
  tc_resp_free(&r);
  tc_close(c);
  /* Exactly the limit is fine. */
  c = tc_connect(T.port);
  size_t n = l.max_body_bytes;
  char *req = malloc(n + 200);
  k = sprintf(req, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n", n);
  for (size_t i = 0; i < n; i++) req[k + i] = (char)('a' + i % 26);
  assert_true(tc_send_n(c, req, (size_t)k + n));
  assert_int_equal(tc_read_response(c, &r), 0);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.body_len, n);
  assert_memory_equal(r.body, req + k, n);
  tc_resp_free(&r);
  free(req);
  tc_close(c);
  th_stop(&T);
}

static void chunked_bodies(void **state) {
  http_limits_t l = fast_limits();
  start(&l);
  tc_client_t *c = tc_connect(T.port);
  tc_resp_t r;
  /* chunks with an extension and a trailer, sent in pieces */
  const char *parts[] = {"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-", "Encoding: chunked\r\n\r\n5\r\nhel",
                         "lo\r\n1;ext=1\r\n,\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"};
  for (int i = 0; i < 3; i++) {
    assert_true(tc_send(c, parts[i]));
    usleep(20 * 1000);
  }
  assert_int_equal(tc_read_response(c, &r), 0);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "hello, world");
  tc_resp_free(&r);
  /* an empty chunked body, then a Content-Length one on the same connection */
  assert_int_equal(tc_roundtrip(c, "PUT /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", &r), 0);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.body_len, 0);
  tc_resp_free(&r);
  assert_int_equal(tc_roundtrip(c, "PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok", &r), 0);
  assert_string_equal(r.body, "ok");
  assert_string_equal(tc_header(&r, "x-method", hbuf, sizeof hbuf), "PUT");
  tc_resp_free(&r);
  /* Expect: 100-continue gets the interim response, then the real one */
  assert_true(tc_send(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"));
  char got[64] = {0};
  ssize_t n = recv(c->fd, got, 25, MSG_WAITALL);
  assert_int_equal(n, 25);
  assert_string_equal(got, "HTTP/1.1 100 Continue\r\n\r\n");
  assert_true(tc_send(c, "data"));
  assert_int_equal(tc_read_response(c, &r), 0);
  assert_string_equal(r.body, "data");
  tc_resp_free(&r);
  tc_close(c);
  th_stop(&T);
}

/* Three requests in one write, the first answered asynchronously: the three
 * responses come back in request order. */
static void pipelining(void **state) {
  http_limits_t l = fast_limits();
  start(&l);
  tc_client_t *c = tc_connect(T.port);
  assert_true(tc_send(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
                         "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nfirst"
                         "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nsecond\r\n0\r\n\r\n"));
  const char *want[] = {"slow", "first", "second"};
  for (int i = 0; i < 3; i++) {
    tc_resp_t r;
    assert_int_equal(tc_read_response(c, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, want[i]);
    tc_resp_free(&r);
  }
  /* sync handlers: 50 pipelined requests in one write */
  char *big = malloc(50 * 80);
  size_t k = 0;
  for (int i = 0; i < 50; i++)
    k += (size_t)sprintf(big + k, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n%02d", i);
  assert_true(tc_send_n(c, big, k));
  free(big);
  for (int i = 0; i < 50; i++) {
    tc_resp_t r;
    assert_int_equal(tc_read_response(c, &r), 0);
    char w[3];
    snprintf(w, sizeof w, "%02d", i);
    assert_string_equal(r.body, w);
    tc_resp_free(&r);
  }
  /* the last of a pipeline says Connection: close: answered, then closed */
  assert_true(tc_send(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n"
                         "Connection: close\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  tc_resp_t r;
  assert_int_equal(tc_read_response(c, &r), 0);
  assert_true(r.keep_alive);
  tc_resp_free(&r);
  assert_int_equal(tc_read_response(c, &r), 0);
  assert_false(r.keep_alive);
  tc_resp_free(&r);
  assert_true(tc_expect_close(c, 5));
  tc_close(c);
  th_stop(&T);
}

static void truncated_body_408(void **state) {
  http_limits_t l = fast_limits();
  start(&l);
  tc_client_t *c = tc_connect(T.port);
  double t0 = th_now();
  assert_true(tc_send(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly ten.."));
  tc_resp_t r;
  assert_int_equal(tc_read_response(c, &r), 0);
  double dt = th_now() - t0;
  assert_int_equal(r.status, 408);
  assert_true(dt >= 0.5 && dt < 5.0);
  assert_true(tc_expect_close(c, 5));
  tc_resp_free(&r);
  tc_close(c);
  /* headers that never end: 408 as well */
  c = tc_connect(T.port);
  assert_true(tc_send(c, "GET /health HTTP/1.1\r\nHost: x\r\n"));
  assert_int_equal(tc_read_response(c, &r), 0);
  assert_int_equal(r.status, 408);
  tc_resp_free(&r);
  tc_close(c);
  assert_true(th_stats(&T).timeouts >= 2);
  th_stop(&T);
}

/* A client sending its headers a byte at a time never gets more time than
 * header_timeout_ms in all, and does not hold up anyone else. */
static void slowloris(void **state) {
  http_limits_t l = fast_limits();
  l.header_timeout_ms = 1000;
  start(&l);
  tc_client_t *slow = tc_connect(T.port);
  const char *req = "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
  double t0 = th_now();
  size_t i = 0;
  bool cut = false;
  while (i < strlen(req)) {
    if (!tc_send_n(slow, req + i, 1)) {
      cut = true;
      break;
    }
    i++;
    if (i == 5) { /* meanwhile a normal client is served at once */
      tc_client_t *fast = tc_connect(T.port);
      tc_resp_t r;
      double f0 = th_now();
      assert_int_equal(tc_roundtrip(fast, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
      assert_int_equal(r.status, 200);
      assert_true(th_now() - f0 < 0.5);
      tc_resp_free(&r);
      tc_close(fast);
    }
    struct pollfd p = {.fd = slow->fd, .events = POLLIN};
    if (poll(&p, 1, 100) > 0) break; /* the server answered (408) */
    if (th_now() - t0 > 4) break;
  }
  tc_resp_t r;
  int rc = tc_read_response(slow, &r);
  double dt = th_now() - t0;
  assert_true(rc == 0 || cut);
  if (rc == 0) assert_int_equal(r.status, 408);
  assert_true(dt >= 0.9 && dt < 3.0);
  assert_true(i < strlen(req)); /* it never finished */
  tc_resp_free(&r);
  tc_close(slow);
  th_stop(&T);
}

static void idle_timeout(void **state) {
  http_limits_t l = fast_limits();
  start(&l);
  tc_client_t *c = tc_connect(T.port);
  tc_resp_t r;
  assert_int_equal(tc_roundtrip(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  tc_resp_free(&r);
  double t0 = th_now();
  assert_true(tc_expect_close(c, 5));
  double dt = th_now() - t0;
  assert_true(dt >= 0.5 && dt < 4.0);
  tc_close(c);
  /* a connection that never sends a byte is closed too, silently */
  c = tc_connect(T.port);
  assert_true(tc_expect_close(c, 5));
  tc_close(c);
  th_stop(&T);
}

typedef struct {
  th_server_t *t;
  uint32_t want;
} open_wait_t;

static bool conns_open_is(void *arg) {
  open_wait_t *w = arg;
  return th_stats(w->t).connections_open == w->want;
}

static bool requests_are(void *arg) {
  open_wait_t *w = arg;
  return th_stats(w->t).requests == w->want;
}

static bool probes_are(void *arg) {
  open_wait_t *w = arg;
  return th_stats(w->t).probe_open == w->want;
}

/* Expects `status` for req on a fresh connection, then the server's close. */
static void probe(const char *req, int status) {
  expect_status(req, status, true);
}

/* At the cap: a newcomer closes the connection idle longest (never one with
 * a request in flight); when every slot is busy, /health (a probe route)
 * still answers on the reserve, other routes get 503, and past the reserve
 * connections are refused with 503. */
static void connection_cap(void **state) {
  http_limits_t l = fast_limits();
  l.max_connections = 3;
  l.idle_timeout_ms = l.header_timeout_ms = 10000;
  start(&l);
  tc_client_t *c[3];
  for (int i = 0; i < 3; i++) c[i] = tc_connect(T.port);
  open_wait_t w = {&T, 3};
  assert_true(th_wait_until(conns_open_is, &w, 5));
  tc_client_t *extra = tc_connect(T.port); /* evicts c[0], the oldest idle one */
  tc_resp_t r;
  assert_int_equal(tc_roundtrip(extra, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  assert_int_equal(r.status, 200);
  assert_true(r.keep_alive);
  tc_resp_free(&r);
  assert_true(tc_expect_close(c[0], 5));
  tc_close(c[0]);
  /* every slot gets a request in flight */
  const uint64_t before = th_stats(&T).requests;
  c[0] = extra;
  for (int i = 0; i < 3; i++) assert_true(tc_send(c[i], "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"));
  w.want = (uint32_t)before + 3;
  assert_true(th_wait_until(requests_are, &w, 5));
  probe("GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 200);
  probe("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 503);
  w.want = 0;
  assert_true(th_wait_until(probes_are, &w, 5));
  /* the reserve held by silent connections: the next one is refused */
  tc_client_t *held[HTTP_PROBE_RESERVE];
  for (int i = 0; i < HTTP_PROBE_RESERVE; i++) held[i] = tc_connect(T.port);
  tc_client_t *refused = tc_connect(T.port);
  assert_int_equal(tc_read_response(refused, &r), 0);
  assert_int_equal(r.status, 503);
  assert_true(tc_expect_close(refused, 5));
  tc_resp_free(&r);
  tc_close(refused);
  for (int i = 0; i < HTTP_PROBE_RESERVE; i++) tc_close(held[i]);
  for (int i = 0; i < 3; i++) tc_close(c[i]);
  http_server_stats_t st = th_stats(&T);
  assert_int_equal(st.evicted, 1);
  assert_int_equal(st.connections_rejected, 1);
  th_stop(&T);
}

static void set_keys(void *arg) {
  const char *keys[] = {"sk-first", "sk-second-key"};
  assert_int_equal(http_server_set_api_keys(T.srv, keys, 2), 0);
}

/* Errors under /echo written by Anthropic's writer (tram serve's under /v1/messages). */
static void set_prefix_writer(void *arg) {
  (void)arg;
  http_server_set_error_body_for(T.srv, "/echo", anth_error_body);
}

static void auth_401(void **state) {
  http_limits_t l = fast_limits();
  start(&l);
  th_call(&T, set_keys, NULL);
  th_call(&T, set_prefix_writer, NULL);
  /* x-api-key (the Anthropic SDKs' header) is taken as Bearer is */
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nx-api-key: sk-second-key\r\nContent-Length: 0\r\n\r\n", 200, false);
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nX-Api-Key: sk-first\r\nContent-Length: 0\r\n\r\n", 200, false);
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nx-api-key: sk-firs\r\nContent-Length: 0\r\n\r\n", 401, false);
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nx-api-key: \r\nContent-Length: 0\r\n\r\n", 401, false);
  {
    tc_client_t *c = tc_connect(T.port); /* under the prefix: the other writer's shape */
    tc_resp_t r;
    assert_int_equal(tc_roundtrip(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", &r), 0);
    assert_int_equal(r.status, 401);
    assert_non_null(strstr(r.body, "\"authentication_error\""));
    assert_null(strstr(r.body, "\"invalid_api_key\""));
    tc_resp_free(&r);
    tc_close(c);
  }
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 401, false);
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-firs\r\nContent-Length: 0\r\n\r\n", 401, false);
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-first2\r\nContent-Length: 0\r\n\r\n", 401, false);
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Basic sk-first\r\nContent-Length: 0\r\n\r\n", 401, false);
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \r\nContent-Length: 0\r\n\r\n", 401, false);
  expect_status("GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n", 401, false); /* routes stay hidden */
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-first\r\nContent-Length: 0\r\n\r\n", 200, false);
  expect_status("POST /echo HTTP/1.1\r\nHost: x\r\nauthorization: bearer sk-second-key\r\nContent-Length: 0\r\n\r\n", 200, false);
  expect_status("GET /nothing HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-first\r\n\r\n", 404, false);
  expect_status("GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 200, false); /* public */
  tc_client_t *c = tc_connect(T.port);
  tc_resp_t r;
  assert_int_equal(tc_roundtrip(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  assert_int_equal(r.status, 401);
  assert_string_equal(tc_header(&r, "www-authenticate", hbuf, sizeof hbuf), "Bearer");
  assert_non_null(strstr(r.body, "\"invalid_api_key\""));
  tc_resp_free(&r);
  tc_close(c);
  th_stop(&T);
}

/* A unix socket and an inherited listening fd serve like TCP. */
static void other_listeners(void **state) {
  http_limits_t l = fast_limits();
  th_init(&T, &l);
  assert_int_equal(http_server_route(T.srv, HTTP_GET, "/health", h_health, NULL, 0), 0);
  char path[64];
  snprintf(path, sizeof path, "/tmp/tram-test-http-%d.sock", (int)getpid());
  assert_int_equal(http_server_listen_unix(T.srv, path), 0);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
  int not_listening = socket(AF_INET, SOCK_STREAM, 0);
  assert_int_equal(http_server_listen_fd(T.srv, not_listening), -EINVAL);
  close(not_listening);
  assert_int_equal(http_server_listen_fd(T.srv, 1000), -EBADF);
  assert_int_equal(listen(fd, 16), 0);
  assert_int_equal(http_server_listen_fd(T.srv, fd), 0);
  int fd_port = ntohs(a.sin_port);
  assert_int_equal(http_server_listen_tcp(T.srv, "::1", 0, NULL) == 0 ||
                       http_server_listen_tcp(T.srv, "localhost", 0, NULL) == 0, 1);
  assert_true(http_server_listen_tcp(T.srv, "no.such.host.invalid", 0, NULL) < 0);
  th_start(&T);
  tc_client_t *c = tc_connect_unix(path);
  assert_non_null(c);
  tc_resp_t r;
  assert_int_equal(tc_roundtrip(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  assert_int_equal(r.status, 200);
  tc_resp_free(&r);
  tc_close(c);
  c = tc_connect(fd_port);
  assert_int_equal(tc_roundtrip(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  assert_int_equal(r.status, 200);
  tc_resp_free(&r);
  tc_close(c);
  th_stop(&T);
  assert_int_equal(access(path, F_OK), -1); /* the socket file is removed */
}

static _Atomic int drained;
static void on_drained(void *arg) { atomic_store(&drained, 1); }
static void start_drain(void *arg) { assert_int_equal(http_server_drain(T.srv, on_drained, NULL), 0); }

static bool is_drained(void *arg) { return atomic_load(&drained) == 1; }

/* Drain: stop accepting, close idle connections, finish the request in
 * flight (with Connection: close), then report drained. */
static void drain(void **state) {
  http_limits_t l = fast_limits();
  l.idle_timeout_ms = l.header_timeout_ms = 10000;
  start(&l);
  atomic_store(&drained, 0);
  tc_client_t *idle = tc_connect(T.port);
  tc_client_t *busy = tc_connect(T.port);
  tc_resp_t r;
  assert_int_equal(tc_roundtrip(idle, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", &r), 0);
  tc_resp_free(&r);
  assert_true(tc_send(busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"));
  usleep(30 * 1000);
  th_call(&T, start_drain, NULL);
  assert_true(tc_expect_close(idle, 5));
  assert_int_equal(tc_read_response(busy, &r), 0);
  assert_int_equal(r.status, 200);
  assert_string_equal(r.body, "slow");
  assert_false(r.keep_alive);
  tc_resp_free(&r);
  assert_true(tc_expect_close(busy, 5));
  assert_true(th_wait_until(is_drained, NULL, 5));
  assert_null(tc_connect(T.port)); /* no longer listening */
  tc_close(idle);
  tc_close(busy);
  th_stop(&T);
}

/* A client that leaves while its (asynchronous) request is in flight: the
 * handler hears of it through on_abort. */
static void abort_while_queued(void **state) {
  http_limits_t l = fast_limits();
  start(&l);
  atomic_store(&slow_aborts, 0);
  tc_client_t *c = tc_connect(T.port);
  assert_true(tc_send(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"));
  usleep(20 * 1000);
  tc_close(c);
  usleep(300 * 1000);
  assert_int_equal(atomic_load(&slow_aborts), 1);
  /* closing the server with a request in flight aborts it too */
  c = tc_connect(T.port);
  assert_true(tc_send(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"));
  usleep(30 * 1000);
  th_stop(&T);
  assert_int_equal(atomic_load(&slow_aborts), 2);
  tc_close(c);
}

static void limits_checked(void **state) {
  http_limits_t l = http_limits_default();
  assert_int_equal(http_limits_check(&l), 0);
  l.stream_low_water = l.stream_high_water;
  assert_int_equal(http_limits_check(&l), -EINVAL);
  l = http_limits_default();
  l.header_timeout_ms = 0;
  assert_int_equal(http_limits_check(&l), -EINVAL);
  uv_loop_t loop;
  uv_loop_init(&loop);
  assert_null(http_server_create(&loop, &l));
  uv_loop_close(&loop);
  assert_string_equal(http_status_reason(431), "Request Header Fields Too Large");
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  log_set_level(LOG_LEVEL_WARN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(limits_checked),
      cmocka_unit_test(keep_alive_reuse),
      cmocka_unit_test(routing_404_405),
      cmocka_unit_test(malformed_requests_400),
      cmocka_unit_test(strict_http),
      cmocka_unit_test(json_routes_415),
      cmocka_unit_test(header_limits_431),
      cmocka_unit_test(body_limits_413),
      cmocka_unit_test(chunked_bodies),
      cmocka_unit_test(pipelining),
      cmocka_unit_test(truncated_body_408),
      cmocka_unit_test(slowloris),
      cmocka_unit_test(idle_timeout),
      cmocka_unit_test(connection_cap),
      cmocka_unit_test(auth_401),
      cmocka_unit_test(other_listeners),
      cmocka_unit_test(drain),
      cmocka_unit_test(abort_while_queued),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
