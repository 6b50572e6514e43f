/* server/srv_work.c — keeping the loop thread to I/O: the per-request CPU
 * work of the generation handlers (JSON parsing, chat template rendering,
 * tokenizing) runs on libuv's worker pool, and a probe timer measures how
 * late the loop runs its timers (its longest stall, exported on /metrics).
 *
 * srv__offload copies the request body into a work item that owns its own
 * arena, so the worker never touches the request (which is freed when its
 * client goes away); the loop's completion answers only if the client is
 * still there, and frees the item either way. The server does not shut
 * down while an item is out (srv__maybe_finish waits for s->n_work == 0):
 * the worker reads the tokenizer and the template.
 *
 * An item whose run needs a grammar compiled sets a stage: after run, the
 * item goes to the grammar compile threads (srv_grammar.c) and comes back
 * to the loop for done from there, so a compile never holds a worker. */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "server/srv_internal.h"

static void on_abort(http_res_t *res, void *user) {
  (void)res;
  srv_work_t *w = user;
  w->res = NULL; /* the handle is gone; the completion frees the item */
  atomic_store(&w->gone, true);
}

static void work_cb(uv_work_t *u) {
  srv_work_t *w = u->data;
  static _Thread_local bool niced;
  if (!niced) { /* per thread on Linux: the loop (and the engine) win a contended core */
    niced = true;
    if (setpriority(PRIO_PROCESS, (id_t)gettid(), SRV_WORK_NICE) != 0)
      log_debug("setpriority for a worker: %s", strerror(errno));
  }
  w->run(w);
}

void srv__work_finish(srv_work_t *w) {
  srv_t *s = w->s;
  if (w->res) http_res_set_callbacks(w->res, &(http_res_cbs_t){0}); /* done replaces or ends the response */
  w->done(w);
  arena_free(&w->arena);
  free(w->body);
  free(w);
  s->n_work--;
  srv__maybe_finish(s);
}

static void after_cb(uv_work_t *u, int status) {
  srv_work_t *w = u->data;
  (void)status; /* never cancelled: uv_cancel is not used */
  if (w->stage) srv__grammar_queue(w); /* a compile first, on its own threads */
  else srv__work_finish(w);
}

void srv__offload(srv_t *s, const http_req_t *req, http_res_t *res, int64_t arrival_ns, srv_work_fn run,
                  srv_work_fn done) {
  srv_work_t *w = xcalloc(1, sizeof *w);
  w->s = s;
  w->res = res;
  w->rid = req->id;
  w->arrival_ns = arrival_ns;
  w->body = xmalloc(req->body_len + 1);
  memcpy(w->body, req->body, req->body_len);
  w->body[req->body_len] = 0;
  w->body_len = req->body_len;
  arena_init(&w->arena, 0, 0);
  w->run = run;
  w->done = done;
  w->uv.data = w;
  http_res_set_callbacks(res, &(http_res_cbs_t){.on_abort = on_abort, .user = w});
  s->n_work++;
  if (uv_queue_work(&s->loop, &w->uv, work_cb, after_cb) != 0) { /* cannot happen with valid arguments */
    work_cb(&w->uv);
    after_cb(&w->uv, 0);
  }
}

/* ---- the stall probe ------------------------------------------------------------ */

static void on_probe(uv_timer_t *t) {
  srv_t *s = t->data;
  const int64_t now = clock_now_ns();
  const int64_t late = now - s->probe_due_ns;
  if (late > s->stall_max_ns) s->stall_max_ns = late;
  if (late > 0) s->stall_sum_ns += late;
  s->probe_due_ns = now + SRV_PROBE_MS * INT64_C(1000000);
}

void srv__probe_start(srv_t *s) {
  uv_timer_init(&s->loop, &s->probe);
  s->probe.data = s;
  s->probe_due_ns = clock_now_ns() + SRV_PROBE_MS * INT64_C(1000000);
  uv_timer_start(&s->probe, on_probe, SRV_PROBE_MS, SRV_PROBE_MS);
}
