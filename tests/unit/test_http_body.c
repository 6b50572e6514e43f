/* tests/unit/test_http_body.c — the HTTP/1.1 server over real sockets (the
 * server of test_http_server.h): how a message's end is found (chunked
 * bodies, pipelined requests) and the limits on its size and time: headers
 * (431), body (413), a body that stops coming (408). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>

#include "base/log.h"
#include "tests/unit/test_http_server.h"

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

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  log_set_level(LOG_LEVEL_WARN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(header_limits_431),
      cmocka_unit_test(body_limits_413),
      cmocka_unit_test(chunked_bodies),
      cmocka_unit_test(pipelining),
      cmocka_unit_test(truncated_body_408),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
