/* tests/unit/test_http_conn.c — the HTTP/1.1 server over real sockets (the
 * server of test_http_server.h): a connection's life. Slow and idle clients
 * are closed on time, the connection cap evicts the idle and keeps a reserve
 * for probes (503 past it), unix sockets and inherited fds serve like TCP,
 * drain finishes what is in flight, and a client that leaves aborts its
 * request. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>

#include "base/log.h"
#include "tests/unit/test_http_server.h"

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

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  log_set_level(LOG_LEVEL_WARN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(slowloris),
      cmocka_unit_test(idle_timeout),
      cmocka_unit_test(connection_cap),
      cmocka_unit_test(other_listeners),
      cmocka_unit_test(drain),
      cmocka_unit_test(abort_while_queued),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
