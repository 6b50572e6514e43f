/* server/srv_main.c — srv_run (server/srv.h): the loop, listening, loading
 * the model off the loop thread, signals and the drain, the one-second tick,
 * and the shutdown.
 *
 * Order of events:
 *   listen (LISTEN_FDS, a unix socket, or host:port) → the loader thread
 *   builds backend, model, chat template and engine while /health says
 *   "loading" → ready: the state flips, then READY=1 is sent (so /health
 *   answers 200 before systemd hears READY) → serving → SIGTERM/SIGINT:
 *   STOPPING=1, /health 503 "draining", the engine admits nothing new;
 *   SIGTERM keeps the listener open drain_grace (new generation requests
 *   get 503 + Retry-After) → listeners closed, requests in
 *   flight run on → all done (or drain_timeout: the engine aborts the rest,
 *   and SRV_CLOSE_GRACE_MS later connections still open are cut) → the
 *   engine thread is joined, everything freed, exit 0. An engine that is
 *   wedged (requests still owed after all that, and no step for the stall
 *   threshold) cannot be joined: exit 1 at once (on_wedge_check). */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "api/json_alloc.h"
#include "server/srv.h"
#include "server/srv_internal.h"

/* ---- the model, off the loop thread ---------------------------------------------- */

static void load_work(uv_work_t *w) {
  srv_t *s = w->data;
  const cfg_t *c = s->cfg;
  boot_opts_t o = boot_opts_from_cfg(c);
  if (c->kv_events && c->kv_events[0]) {
    if (!(s->kv_events = kvev_create(c->kv_events, c->kv_events_topic, s->load_err, sizeof s->load_err))) return;
    o.sched.kv_observer = kvev_observer(s->kv_events);
  }
  if (boot_open(&s->stack, &o, s->load_err, sizeof s->load_err) != 0) return;
  s->tmpl = s->stack.tmpl;
  s->engine = s->stack.engine;
}

/* The engine's notify hook (engine thread). */
static void notify_loop(void *arg) {
  srv_t *s = arg;
  int64_t zero = 0;
  atomic_compare_exchange_strong(&s->notified_ns, &zero, clock_now_ns());
  uv_async_send(&s->wake);
}

static void token_text(const tok_t *tok, int32_t id, char *buf, size_t cap) {
  size_t len = 0;
  const char *t = id >= 0 ? tok_text(tok, id, &len) : NULL;
  snprintf(buf, cap, "%.*s", t ? (int)len : 0, t ? t : "");
}

static void load_done(uv_work_t *w, int status) {
  srv_t *s = w->data;
  s->loader_busy = false;
  if (!s->engine) {
    log_error("cannot serve %s: %s", s->cfg->model, s->load_err);
    srv__status(s, NULL, "failed: %s", s->load_err);
    s->exit_status = 1;
    s->state = SRV_DRAINING;
    s->http_drained = true; /* nothing ran: no connection needs to finish */
    srv__maybe_finish(s);
    return;
  }
  s->tok = s->stack.tok;
  s->n_vocab = tok_n_vocab(s->tok);
  s->max_model_len = sched_engine_max_model_len(s->engine);
  token_text(s->tok, tok_bos(s->tok), s->bos, sizeof s->bos);
  token_text(s->tok, tok_eos(s->tok), s->eos, sizeof s->eos);
  s->oai_lim = oai_limits_default();
  s->oai_lim.vocab_size = s->n_vocab;
  s->oai_lim.max_n = s->cfg->max_seqs < SCHED_MAX_N ? s->cfg->max_seqs : SCHED_MAX_N;
  if (s->oai_lim.max_n > 16) s->oai_lim.max_n = 16;
  s->oai_lim.max_stop = SCHED_MAX_STOP;
  s->oai_lim.max_stop_len = SCHED_MAX_STOP_LEN;
  s->oai_lim.max_stop_token_ids = SCHED_MAX_STOP_IDS;
  if (s->cfg->generation_config == CFG_GENERATION_CONFIG_AUTO) s->gen = s->stack.gen;
  s->oai_lim.gen = &s->gen;
  s->chat_max_tokens = s->cfg->default_max_tokens > 0 ? s->cfg->default_max_tokens : s->gen.max_tokens;
  char gen[256];
  log_info("generation defaults (generation_config %s): %s",
           s->cfg->generation_config == CFG_GENERATION_CONFIG_AUTO ? "auto" : "none",
           s->cfg->generation_config == CFG_GENERATION_CONFIG_AUTO ? samp_gen_describe(&s->gen, gen, sizeof gen)
                                                                  : "OpenAI's");
  s->metrics = srv_metrics_create(s->cfg->served_model_name, s->max_model_len);
  sched_engine_set_notify(s->engine, notify_loop, s);
  s->seen_at = clock_now_ns();
  if (s->state != SRV_LOADING) { /* a signal came while loading */
    srv__maybe_finish(s);
    return;
  }
  s->state = SRV_READY; /* /health answers 200 from here on, before READY=1 goes out */
  log_info("ready: serving %s as \"%s\" on %s (context %d tokens)", s->cfg->model, s->cfg->served_model_name,
           s->url, s->max_model_len);
  srv__status(s, "READY=1", "ready: 0 running, 0 waiting");
}

/* ---- stop ------------------------------------------------------------------------ */

static void on_closed(uv_handle_t *h) {}

void srv__maybe_finish(srv_t *s) {
  if (s->state != SRV_DRAINING || !s->http_drained || s->n_jobs > 0 || s->loader_busy || s->n_work > 0) return;
  s->state = SRV_STOPPED;
  srv__dash_stop(s); /* before the engine: it unsubscribes */
  /* the engine first: its notify hook must not find the async closed */
  sched_engine_destroy(s->engine);
  s->engine = s->stack.engine = NULL;
  uv_close((uv_handle_t *)&s->wake, on_closed);
  srv__grammar_stop(s); /* no item is out: its threads wait idle */
  uv_close((uv_handle_t *)&s->tick, on_closed);
  uv_close((uv_handle_t *)&s->probe, on_closed);
  uv_close((uv_handle_t *)&s->drain_timer, on_closed);
  uv_close((uv_handle_t *)&s->readers, on_closed);
  uv_close((uv_handle_t *)&s->sig_term, on_closed);
  uv_close((uv_handle_t *)&s->sig_int, on_closed);
  uv_close((uv_handle_t *)&s->sig_hup, on_closed);
  uv_close((uv_handle_t *)&s->sig_usr1, on_closed);
  http_server_close(s->http, NULL, NULL);
  s->http = NULL;
  if (s->ev_count)
    log_info("stopped; the loop handled %llu engine events in %llu wake-ups: %.1f us from the engine's notify to "
             "the loop, then %.1f us of loop time per event (JSON, SSE, write); %.1f us from the newest event of "
             "a wake-up to the end of its writes (the rest of the engine step included)",
             (unsigned long long)s->ev_count, (unsigned long long)s->ev_wakes,
             (double)s->wake_ns / 1e3 / (double)s->ev_wakes, (double)s->ev_loop_ns / 1e3 / (double)s->ev_count,
             (double)s->ev_delay_ns / 1e3 / (double)s->ev_wakes);
  else
    log_info("stopped");
}

static void on_http_drained(void *arg) {
  srv_t *s = arg;
  s->http_drained = true;
  srv__maybe_finish(s);
}

/* After the drain's last phase: requests still owed by an engine that ran
 * no step for the stall threshold (srv__stall_ns: /health's "stalled", 30 s
 * by default) are owed by a wedged engine. Its thread cannot be joined, nor
 * what it holds freed, so the process exits at once with status 1
 * (systemd's Restart=on-failure starts a fresh one); the clients were
 * answered engine_stalled already, or their connections cut. A long step
 * (a big prefill chunk) is waited for. */
static void on_wedge_check(uv_timer_t *t) {
  srv_t *s = t->data;
  if (!srv__stalled(s, srv__stall_ns(s, false))) return;
  log_error("stopping: the engine ran no step for %.1f s with %d requests in flight: it is wedged; exiting "
            "without waiting for it (status 1)",
            (double)(clock_now_ns() - s->seen_at) / 1e9, s->n_jobs);
  _exit(1);
}

static void on_drain_timer(uv_timer_t *t) {
  srv_t *s = t->data;
  if (!s->aborted_all) {
    s->aborted_all = true;
    if (s->engine && s->n_jobs) {
      log_warn("drain timeout: ending the %d requests still in flight (finish_reason \"abort\")", s->n_jobs);
      sched_engine_abort_all(s->engine);
    }
    uv_timer_start(&s->drain_timer, on_drain_timer, SRV_CLOSE_GRACE_MS, 0);
    return;
  }
  if (!s->http_drained) {
    http_server_stats_t st;
    http_server_stats(s->http, &st);
    log_warn("closing the %u connections still open", st.connections_open);
    http_server_close(s->http, NULL, NULL); /* responses in flight get on_abort */
    s->http = NULL;
    s->http_drained = true;
  }
  srv__maybe_finish(s);
  if (s->state == SRV_DRAINING && s->n_jobs > 0) { /* still owed: by a slow engine, or a wedged one */
    on_wedge_check(&s->drain_timer);
    uv_timer_start(&s->drain_timer, on_wedge_check, 1000, 1000);
  }
}

/* The listener closes: from here on only what is in flight finishes, for
 * drain_timeout at most. */
static void close_listener(srv_t *s) {
  srv__dash_stop(s); /* its streams never end by themselves */
  http_server_drain(s->http, on_http_drained, s);
  uv_timer_start(&s->drain_timer, on_drain_timer, (uint64_t)s->cfg->drain_timeout_ms, 0);
}

static void on_grace_over(uv_timer_t *t) {
  srv_t *s = t->data;
  log_info("drain grace over: closing the listener (%d requests in flight, %.1f s at most)", s->n_jobs,
           (double)s->cfg->drain_timeout_ms / 1e3);
  close_listener(s);
}

/* grace: keep the listener open that long first (SIGTERM), so that load
 * balancers see /health answer 503 "draining" and stop sending. */
static void begin_drain(srv_t *s, const char *why, bool grace) {
  const bool loading = s->state == SRV_LOADING;
  s->state = SRV_DRAINING;
  srv__status(s, "STOPPING=1", "draining: %d requests in flight", s->n_jobs);
  if (s->engine) sched_engine_drain(s->engine);
  if (loading) {
    log_info("%s while loading: stopping once the loader is done", why);
  } else if (grace && s->cfg->drain_grace_ms > 0) {
    log_info("%s: draining (%d requests in flight); /health answers 503 and the listener stays open %.1f s", why,
             s->n_jobs, (double)s->cfg->drain_grace_ms / 1e3);
    uv_timer_start(&s->drain_timer, on_grace_over, (uint64_t)s->cfg->drain_grace_ms, 0);
    return;
  } else {
    log_info("%s: draining (%d requests in flight, %.1f s at most)", why, s->n_jobs,
             (double)s->cfg->drain_timeout_ms / 1e3);
  }
  close_listener(s);
}

static void on_signal(uv_signal_t *h, int signum) {
  srv_t *s = h->data;
  if (signum == SIGUSR1) {
    srv__dump_state(s);
    return;
  }
  if (signum == SIGHUP) {
    int rc = log_reopen();
    if (rc == 0) log_info("SIGHUP: log file reopened");
    else log_warn("SIGHUP: cannot reopen the log file (%s): still writing to the old one", strerror(-rc));
    return;
  }
  if (++s->signals > 1) {
    log_warn("%s again: exiting now", strsignal(signum));
    _exit(1);
  }
  begin_drain(s, strsignal(signum), signum == SIGTERM);
}

/* ---- the tick: every second, or a quarter of the watchdog period if shorter ---------- */

static void on_tick(uv_timer_t *t) {
  srv_t *s = t->data;
  srv__watchdog(s);
  if (!s->engine) return;
  sched_stats_t st;
  sched_get_stats(s->engine, &st);
  if (s->state == SRV_READY)
    srv__status(s, NULL, "ready: %d running, %d waiting", st.running, st.waiting);
  else if (s->state == SRV_DRAINING)
    srv__status(s, NULL, "draining: %d requests in flight", s->n_jobs);
  const int64_t limit = s->cfg->request_timeout_ms * 1000000, now = clock_now_ns();
  if (srv__stalled(s, srv__stall_ns(s, false))) srv__fail_stalled(s, (double)(now - s->seen_at) / 1e9);
  srv__check_readers(s, now);
  if (limit <= 0) return;
  for (srv_job_t *j = s->jobs; j; j = j->next)
    if (!j->timed_out && !j->client_gone && j->n_live && now - j->arrival_ns > limit) {
      j->timed_out = true;
      srv__job_cancel(j, "request_timeout reached");
    }
}

/* ---- listening --------------------------------------------------------------------- */

static int listen_all(srv_t *s) {
  const cfg_t *c = s->cfg;
  int n = sd_listen_fds(1);
  if (n < 0) {
    log_error("LISTEN_FDS: %s", strerror(-n));
    return n;
  }
  if (n > 0) {
    for (int fd = SD_LISTEN_FDS_START; fd < SD_LISTEN_FDS_START + n; fd++) {
      int rc = http_server_listen_fd(s->http, fd);
      if (rc < 0) {
        log_error("cannot serve the socket systemd passed as fd %d: %s", fd, strerror(-rc));
        return rc;
      }
    }
    snprintf(s->url, sizeof s->url, "%d socket%s from systemd", n, n > 1 ? "s" : "");
    log_info("listening on %s (LISTEN_FDS; host, port and unix_socket are ignored)", s->url);
    return 0;
  }
  int rc;
  if (c->unix_socket) {
    rc = http_server_listen_unix(s->http, c->unix_socket);
    snprintf(s->url, sizeof s->url, "unix:%s", c->unix_socket);
  } else {
    int port = 0;
    rc = http_server_listen_tcp(s->http, c->host, c->port, &port);
    const bool v6 = strchr(c->host, ':') != NULL;
    snprintf(s->url, sizeof s->url, "http://%s%s%s:%d", v6 ? "[" : "", c->host, v6 ? "]" : "", port);
  }
  return rc; /* the HTTP layer logged the address */
}

static http_limits_t limits(const cfg_t *c) {
  http_limits_t l = http_limits_default();
  l.max_header_bytes = (size_t)c->max_header_size;
  l.max_body_bytes = (size_t)c->max_body_size;
  l.max_connections = c->max_connections;
  l.max_connections_per_client = c->max_connections_per_client;
  if (l.max_connections <= 0) {
    l.max_connections = http_connection_cap_from_fds(SRV_FD_RESERVE);
    log_info("max_connections: %d (from the open-file limit)", l.max_connections);
  }
  l.header_timeout_ms = (uint32_t)c->slow_client_timeout_ms;
  l.body_timeout_ms = (uint32_t)c->slow_client_timeout_ms;
  l.write_stall_ms = (uint32_t)c->slow_client_timeout_ms;
  l.idle_timeout_ms = (uint32_t)c->idle_timeout_ms;
  return l;
}

static void start_signal(srv_t *s, uv_signal_t *h, int signum) {
  uv_signal_init(&s->loop, h);
  h->data = s;
  uv_signal_start(h, on_signal, signum);
}

int srv_run(const cfg_t *cfg) {
  signal(SIGPIPE, SIG_IGN); /* a client gone mid-write is an EPIPE, not a death */
  signal(SIGUSR2, SIG_IGN); /* no use yet; a stray one must not kill (SIGUSR1 dumps the state) */
  json_alloc_init();        /* a request's JSON parse may run out of memory: a 503, not an abort */
  srv_t *s = xcalloc(1, sizeof *s);
  s->cfg = cfg;
  if (getrandom(&s->boot_id, sizeof s->boot_id, 0) != sizeof s->boot_id) s->boot_id = (uint64_t)time(NULL);
  s->boot_time = (int64_t)time(NULL);
  int rc = uv_loop_init(&s->loop);
  if (rc < 0) {
    log_error("uv_loop_init: %s", uv_strerror(rc));
    free(s);
    return 1;
  }
  const http_limits_t lim = limits(cfg);
  s->http = http_server_create(&s->loop, &lim);
  if (s->http) http_server_set_error_body(s->http, oai_error_body); /* the transport writes the API's errors */
  if (s->http) http_server_set_error_body_for(s->http, "/v1/messages", anth_error_body); /* Anthropic's, there */
  rc = s->http ? http_server_set_api_keys(s->http, (const char *const *)cfg->api_keys.items, cfg->api_keys.n) : -1;
  if (rc == 0)
    rc = http_server_set_allowed_origins(s->http, (const char *const *)cfg->allowed_origins.items,
                                         cfg->allowed_origins.n);
  if (rc == 0) {
    srv__routes(s);
    rc = listen_all(s);
  }
  if (rc < 0) {
    http_server_close(s->http, NULL, NULL);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
    srv__dash_free(s);
    free(s);
    return 1;
  }
  uv_async_init(&s->loop, &s->wake, srv__on_wake);
  s->wake.data = s;
  start_signal(s, &s->sig_term, SIGTERM);
  start_signal(s, &s->sig_int, SIGINT);
  start_signal(s, &s->sig_hup, SIGHUP);
  start_signal(s, &s->sig_usr1, SIGUSR1);
  uv_timer_init(&s->loop, &s->tick);
  s->tick.data = s;
  uv_timer_init(&s->loop, &s->drain_timer);
  s->drain_timer.data = s;
  uv_timer_init(&s->loop, &s->readers);
  s->readers.data = s;
  uint64_t tick_ms = 1000;
  if (sd_watchdog_enabled(0, &s->wd_usec) > 0) {
    log_info("systemd watchdog: pinging every %.1f s while the engine makes progress", (double)s->wd_usec / 2e6);
    if (s->wd_usec / 4000 < tick_ms) tick_ms = s->wd_usec / 4000 > 10 ? s->wd_usec / 4000 : 10;
  } else {
    s->wd_usec = 0;
  }
  uv_timer_start(&s->tick, on_tick, tick_ms, tick_ms);
  srv__probe_start(s);
  srv__grammar_start(s);

  s->state = SRV_LOADING;
  srv__status(s, NULL, "loading %s", cfg->model);
  s->load_work.data = s;
  s->loader_busy = true;
  uv_queue_work(&s->loop, &s->load_work, load_work, load_done);
  srv__watchdog(s);
  uv_run(&s->loop, UV_RUN_DEFAULT);

  rc = uv_loop_close(&s->loop);
  if (rc < 0) log_warn("uv_loop_close: %s", uv_strerror(rc));
  srv__dash_free(s);
  srv_metrics_destroy(s->metrics);
  boot_close(&s->stack);
  kvev_destroy(s->kv_events); /* the engine that published on it is gone */
  const int status = s->exit_status;
  free(s);
  return status;
}
