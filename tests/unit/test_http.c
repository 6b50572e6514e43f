/* tests/unit/test_http.c — the HTTP/1.1 server over real sockets (the server
 * of test_http_server.h): requests as RFC 9112 reads them (keep-alive, HEAD,
 * HTTP/1.0, malformed requests 400, strictness, 505), routing (404/405,
 * query and absolute-form), JSON routes (415), auth (401) and the limits'
 * own checks. Framing and size limits: test_http_body.c; connections' life
 * (timeouts, the cap, listeners, drain): test_http_conn.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>

#include "api/anth.h"
#include "base/log.h"
#include "http/http_parse.h"
#include "tests/unit/test_http_server.h"

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
      cmocka_unit_test(auth_401),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
