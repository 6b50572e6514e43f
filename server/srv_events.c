/* server/srv_events.c — the engine → loop bridge and the life of a
 * generation job (srv_internal.h).
 *
 * The engine's notify hook wakes the loop (uv_async); srv__on_wake drains
 * every queued event. A token event updates its choice (and the
 * inter-token latency); for a streaming job it appends one SSE chunk to the
 * job's buffer, for a whole response it keeps the text and logprobs; what
 * the bytes say is the job's writer's (srv_writer_t, one per API format:
 * srv_write_openai.c, srv_responses.c). The
 * final event of an engine request gives its usage and times (metrics).
 * After the drain each touched job writes its buffer with one write, and a
 * job whose engine requests are all done ends its response (usage chunk and
 * [DONE], or the whole JSON) and writes the access-log line.
 *
 * Back-pressure reaches the engine: once a stream's client has left more
 * than SRV_UNREAD_BYTES unread (kernel send queue included), its engine
 * requests are paused (sched_req_pause: no step, no new output) until it
 * reads below that again, and cancelled when it has not for
 * slow_client_timeout, counted from when its output first stopped
 * draining (srv__check_readers). Memory per stream stays bounded; the HTTP
 * layer's own limits (max_write_queue, write stall) remain behind it.
 *
 * Ownership: a job lives until its response has ended (or its client left)
 * and every engine request has posted its final event; each engine request
 * is destroyed right after its final event is released. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/fault.h"
#include "base/log.h"
#include "server/srv_internal.h"

/* ---- jobs -------------------------------------------------------------------- */

srv_job_t *srv__job_create(srv_t *s, http_res_t *res, bool chat, const oai_params_t *g, int32_t n_parts) {
  srv_job_t *j = xcalloc(1, sizeof *j);
  j->srv = s;
  j->res = res;
  j->chat = chat;
  j->stream = g->stream;
  j->include_usage = g->include_usage;
  j->include_stop_str = g->include_stop_str;
  j->continuous_usage = g->continuous_usage;
  j->echo_logprobs = g->echo && g->samp.logprobs;
  j->echo_top = g->samp.top_logprobs;
  j->prompt_logprobs = g->prompt_logprobs;
  j->return_token_ids = g->return_token_ids;
  j->logprobs = g->samp.logprobs || g->samp.top_logprobs > 0;
  j->n = g->n;
  j->max_tokens = g->max_tokens > 0 ? g->max_tokens : 0;
  j->writer = &srv_writer_openai; /* srv__resp_init makes it the Responses writer */
  oai_make_id(j->id, sizeof j->id, chat ? "chatcmpl" : "cmpl", s->boot_id, http_res_req(res)->id);
  j->created = (int64_t)time(NULL);
  j->arrival_ns = clock_now_ns();
  j->n_parts = n_parts;
  j->parts = xcalloc((size_t)n_parts, sizeof *j->parts);
  j->n_choices = n_parts * g->n;
  j->choices = xcalloc((size_t)j->n_choices, sizeof *j->choices);
  for (int32_t i = 0; i < n_parts; i++) {
    j->parts[i].job = j;
    j->parts[i].index = i;
  }
  for (int32_t i = 0; i < j->n_choices; i++) j->choices[i].stop_token = -1;
  j->next = s->jobs;
  if (s->jobs) s->jobs->prev = j;
  s->jobs = j;
  s->n_jobs++;
  return j;
}

void srv__job_cancel(srv_job_t *j, const char *why) {
  bool any = false;
  for (int32_t i = 0; i < j->n_parts; i++)
    if (j->parts[i].live) {
      sched_req_cancel(j->parts[i].req);
      any = true;
    }
  if (any) log_info("%s: cancelling: %s", j->id, why);
}

static void choice_free(srv_choice_t *c) {
  buf_free(&c->text);
  for (int32_t i = 0; i < c->n_lp; i++) free((void *)c->lp[i].top);
  free(c->lp);
  free(c->stop_str);
  free(c->error);
  free(c->ids);
  buf_free(&c->reasoning);
  free(c->embedding);
}

bool srv__job_maybe_free(srv_job_t *j) {
  if (j->res || j->n_live > 0) return false;
  srv_t *s = j->srv;
  for (int32_t i = 0; i < j->n_parts; i++) {
    sched_req_destroy(j->parts[i].req);
    srv__plp_free(&j->parts[i]);
    free(j->parts[i].prompt_ids);
  }
  for (int32_t i = 0; i < j->n_choices; i++) choice_free(&j->choices[i]);
  if (j->prev) j->prev->next = j->next;
  else s->jobs = j->next;
  if (j->next) j->next->prev = j->prev;
  s->n_jobs--;
  buf_free(&j->out);
  free(j->parts);
  free(j->choices);
  free(j->resp_instructions);
  free(j);
  if (s->n_jobs == 0 && s->state == SRV_DRAINING) uv_async_send(&s->wake); /* maybe the last thing awaited */
  return true;
}

/* ---- output ---------------------------------------------------------------- */

void srv__sse(srv_job_t *j, char *json) {
  buf_put(&j->out, "data: ", 6);
  buf_put(&j->out, json, strlen(json));
  buf_put(&j->out, "\n\n", 2);
  free(json);
}

/* Writes what the job's buffer holds, as one chunk of the stream. */
static void flush(srv_job_t *j) {
  if (j->res && j->out.len) http_res_stream_write(j->res, j->out.p, j->out.len);
  j->out.len = 0;
}

static void complete(srv_job_t *j);

static void on_abort(http_res_t *res, void *user) {
  srv_job_t *j = user;
  j->res = NULL;
  j->client_gone = true;
  j->status = 499; /* nginx's "client closed request", also for a stream whose 200 head went out */
  srv__job_cancel(j, "the client went away");
  if (j->n_live == 0) complete(j);
  srv__job_maybe_free(j);
}

static void set_paused(srv_job_t *j, bool paused) {
  if (j->paused == paused) return;
  j->paused = paused;
  for (int32_t i = 0; i < j->n_parts; i++)
    if (j->parts[i].live) sched_req_pause(j->parts[i].req, paused);
  log_debug("%s: %s", j->id, paused ? "the client is not reading: paused" : "the client reads again: resumed");
}

static void on_readers(uv_timer_t *t);

/* Pauses or resumes j by what its client has left unread; true while it is
 * paused. */
static bool check_reader(srv_job_t *j, int64_t now) {
  if (!j->stream || !j->res || !j->n_live || j->client_gone || j->timed_out) {
    set_paused(j, false);
    return false;
  }
  if (http_res_unsent(j->res) <= SRV_UNREAD_BYTES) {
    j->unread_since = 0;
    set_paused(j, false);
    return false;
  }
  if (!j->unread_since) j->unread_since = now;
  set_paused(j, true);
  srv_t *s = j->srv;
  if (!uv_is_active((uv_handle_t *)&s->readers)) uv_timer_start(&s->readers, on_readers, SRV_READERS_MS, SRV_READERS_MS);
  return true;
}

static void on_readers(uv_timer_t *t) {
  srv_t *s = t->data;
  const int64_t now = clock_now_ns();
  bool any = false;
  for (srv_job_t *j = s->jobs; j; j = j->next)
    if (j->paused) any |= check_reader(j, now);
  if (!any) uv_timer_stop(t);
}

void srv__check_readers(srv_t *s, int64_t now) {
  const int64_t limit = s->cfg->slow_client_timeout_ms * INT64_C(1000000);
  for (srv_job_t *j = s->jobs; j; j = j->next) {
    if (!check_reader(j, now)) continue;
    if (now - j->unread_since > limit) {
      log_info("%s: the client stopped reading (%zu bytes unread for %.1f s): cancelled", j->id,
               http_res_unsent(j->res), (double)(now - j->unread_since) / 1e9);
      j->timed_out = true;
      srv__job_cancel(j, "the client stopped reading");
    }
  }
}

void srv__fail_stalled(srv_t *s, double stalled_s) {
  for (srv_job_t *j = s->jobs; j; j = j->next) {
    if (!j->res || !j->n_live) continue;
    char msg[200];
    snprintf(msg, sizeof msg, "the engine made no progress for %.0f s; the request was abandoned: try again", stalled_s);
    log_warn("%s: %s", j->id, msg);
    http_res_t *res = j->res;
    j->res = NULL; /* ended below; the job waits for its final events only */
    j->errored = true;
    if (j->stream) {
      j->writer->stream_error(j, msg, "engine_stalled");
      http_res_stream_write(res, j->out.p, j->out.len);
      j->out.len = 0;
      http_res_stream_end(res);
    } else {
      j->status = 503;
      http_res_send_error(res, 503, "server_error", msg, NULL, "engine_stalled");
    }
    srv__job_cancel(j, "the engine stalled");
  }
}

static void on_writable(http_res_t *res, bool writable, void *user) {
  srv_job_t *j = user;
  log_debug("%s: the client %s", j->id, writable ? "reads again" : "reads slowly: output queued");
}

void srv__job_start(srv_job_t *j, const char *const *echo, const size_t *echo_len) {
  http_res_set_callbacks(j->res, &(http_res_cbs_t){.on_abort = on_abort, .on_writable = on_writable, .user = j});
  for (int32_t i = 0; echo && i < j->n_choices; i++) j->choices[i].offset = (int32_t)echo_len[i / j->n];
  if (!j->stream) {
    for (int32_t i = 0; echo && i < j->n_choices; i++)
      buf_put(&j->choices[i].text, echo[i / j->n], echo_len[i / j->n]);
    return;
  }
  j->status = 200;
  http_res_stream_begin(j->res, 200, "text/event-stream");
  j->writer->stream_start(j, echo, echo_len);
  flush(j);
}

/* ---- events ---------------------------------------------------------------------- */

/* The logprobs entry of ev's token; top[] must hold SAMP_MAX_TOP_LOGPROBS. */
void srv__logprob_entry(const srv_job_t *j, const srv_choice_t *c, const sched_event_t *ev,
                          oai_token_logprob_t *lp, oai_top_logprob_t *top) {
  const tok_t *tok = j->srv->tok;
  size_t len = 0;
  const char *piece = tok_piece(tok, ev->token, &len);
  *lp = (oai_token_logprob_t){.token = piece ? piece : "", .token_len = piece ? len : 0, .logprob = ev->logprob,
                              .text_offset = c->offset, .top = top, .n_top = ev->n_top};
  for (int32_t k = 0; k < ev->n_top && k < SAMP_MAX_TOP_LOGPROBS; k++) {
    const char *p = tok_piece(tok, ev->top[k].token, &len);
    top[k] = (oai_top_logprob_t){.token = p ? p : "", .token_len = p ? len : 0, .logprob = ev->top[k].logprob};
  }
}

static void count_finish(srv_t *s, sched_finish_t f) {
  if (f == SCHED_FINISH_STOP) s->finished_stop++;
  else if (f == SCHED_FINISH_LENGTH) s->finished_length++;
  else s->finished_abort++;
}

/* Keeps what one event adds to a whole response. */
static void collect_event(srv_job_t *j, srv_choice_t *c, const sched_event_t *ev) {
  buf_put(&c->text, ev->text, ev->text_len);
  srv__keep_logprob(j, c, ev);
}

void srv__keep_logprob(srv_job_t *j, srv_choice_t *c, const sched_event_t *ev) {
  if (!j->logprobs || ev->token < 0) return;
  oai_top_logprob_t top[SAMP_MAX_TOP_LOGPROBS];
  xgrow(&c->lp, &c->cap_lp, (size_t)c->n_lp + 1, sizeof *c->lp, 16);
  oai_token_logprob_t *e = &c->lp[c->n_lp];
  srv__logprob_entry(j, c, ev, e, top);
  oai_top_logprob_t *own = NULL;
  if (e->n_top > 0) {
    own = xmalloc((size_t)e->n_top * sizeof *own);
    memcpy(own, top, (size_t)e->n_top * sizeof *own);
  }
  e->top = own;
  c->n_lp++;
}

/* The final event of one engine request: usage, times, metrics. */
static void part_final(srv_t *s, srv_job_t *j, srv_part_t *p, const sched_event_t *ev) {
  const sched_times_t *t = &ev->times;
  j->prompt_tokens += ev->usage.prompt_tokens;
  j->completion_tokens += ev->usage.completion_tokens;
  j->cached_tokens += ev->usage.cached_tokens;
  if (t->first_scheduled && (!j->first_scheduled_ns || t->first_scheduled < j->first_scheduled_ns))
    j->first_scheduled_ns = t->first_scheduled;
  if (t->first_token && (!j->first_token_ns || t->first_token < j->first_token_ns))
    j->first_token_ns = t->first_token;
  const srv_metrics_req_t mr = {
      .times = *t,
      .last_token = p->last_token_ns,
      .prompt_tokens = ev->usage.prompt_tokens,
      .completion_tokens = ev->usage.completion_tokens,
      .max_seq_tokens = p->max_seq_tokens,
      .n = j->n,
      .max_tokens = j->max_tokens > 0 ? j->max_tokens : j->srv->max_model_len - (int32_t)ev->usage.prompt_tokens,
  };
  srv_metrics_request(s->metrics, &mr);
  if (t->first_token) srv__dash_ttft(s, t->first_token - t->arrival);
  p->live = false;
  j->n_live--;
}

static void on_event(srv_t *s, const sched_event_t *ev, srv_job_t **dirty) {
  srv_part_t *p = ev->user;
  srv_job_t *j = p->job;
  if (ev->kind == SCHED_EV_PROMPT) { /* a prompt token's logprob: kept for the whole response */
    srv__plp_event(s, p, ev);
    return;
  }
  const int32_t ci = p->index * j->n + ev->index;
  srv_choice_t *c = &j->choices[ci];
  if (ev->token >= 0) {
    c->tokens++;
    if (c->last_token_ns) srv_metrics_token(s->metrics, (double)(ev->time - c->last_token_ns) / 1e9);
    if (c->last_token_ns) srv__dash_itl(s, ev->time - c->last_token_ns);
    c->last_token_ns = ev->time;
    if (ev->time > p->last_token_ns) p->last_token_ns = ev->time;
  }
  if (j->return_token_ids && ev->token >= 0) {
    xgrow(&c->ids, &c->cap_ids, (size_t)c->n_ids + 1, sizeof *c->ids, 16);
    c->ids[c->n_ids++] = ev->token;
  }
  if (ev->kind != SCHED_EV_TOKEN) {
    c->done = true;
    c->finish = ev->finish;
    if (ev->stop_str) c->stop_str = xstrdup(ev->stop_str);
    c->stop_token = ev->stop_id;
    if (ev->kind == SCHED_EV_ERROR) {
      j->errored = true;
      if (!c->error) c->error = xstrdup(ev->error ? ev->error : "generation failed");
    }
    count_finish(s, c->finish);
    if (ev->embedding) /* /v1/embeddings: the input's vector */
      c->embedding = memcpy(xmalloc((size_t)ev->n_embedding * sizeof *ev->embedding), ev->embedding,
                            (size_t)ev->n_embedding * sizeof *ev->embedding);
    if (c->tokens > p->max_seq_tokens) p->max_seq_tokens = c->tokens;
  }
  sched_event_t with_stop; /* include_stop_str_in_output: the event's text and the stop string */
  if (j->include_stop_str && ev->stop_str) {
    with_stop = *ev;
    const size_t n = strlen(ev->stop_str);
    with_stop.text = xmalloc(ev->text_len + n);
    if (ev->text_len) memcpy(with_stop.text, ev->text, ev->text_len);
    memcpy(with_stop.text + ev->text_len, ev->stop_str, n);
    with_stop.text_len = ev->text_len + n;
    ev = &with_stop;
  }
  const sched_event_t *stopped = ev;
  sched_event_t split; /* a thinking model's: the reasoning kept on c, the content as the text */
  ev = srv__reason_event(j, c, ev, &split);
  if (j->res) {
    if (j->stream) j->writer->stream_event(j, c, ci, ev);
    else collect_event(j, c, ev);
  }
  srv__reason_event_done(ev, &split);
  if (stopped == &with_stop) free(with_stop.text);
  if (ev->token >= 0) {
    size_t len = 0;
    tok_piece(s->tok, ev->token, &len);
    c->offset += (int32_t)len;
  }
  if (ev->final) part_final(s, j, p, ev);
  if (!j->dirty) {
    j->dirty = true;
    j->next_dirty = *dirty;
    *dirty = j;
  }
}

/* The whole (non-streamed) response. */
static void send_whole(srv_job_t *j) {
  if (j->errored) {
    const char *msg = "generation failed";
    for (int32_t i = 0; i < j->n_choices; i++)
      if (j->choices[i].error) msg = j->choices[i].error;
    j->status = 500;
    http_res_send_error(j->res, 500, NULL, msg, NULL, NULL);
    return;
  }
  char *body = j->writer->whole(j);
  if (!body) { /* nothing whole to give (an embedding cut by a timeout, a drain, or not finite) */
    j->status = j->timed_out ? 504 : 503;
    http_res_send_error(j->res, j->status, NULL,
                        j->timed_out ? "the request timed out before its result was complete"
                                     : "the request ended before its result was complete", NULL, NULL);
    return;
  }
  j->status = 200;
  srv__send_json(j->res, 200, body);
}

/* Every engine request of j is done: end the response, log it. */
static void complete(srv_job_t *j) {
  if (j->res) {
    if (j->stream) {
      j->writer->stream_end(j);
      flush(j);
      http_res_stream_end(j->res);
    } else {
      send_whole(j);
    }
    j->res = NULL;
  }
  const int64_t now = clock_now_ns();
  const char *reason = j->client_gone ? "cancelled" : j->timed_out ? "timeout" : oai_finish_name(j->choices[0].finish);
  const log_access_t a = {
      .id = j->id,
      .endpoint = j->endpoint,
      .status = j->status,
      .prompt_tokens = j->prompt_tokens,
      .output_tokens = j->completion_tokens,
      .queue_ms = j->first_scheduled_ns ? (double)(j->first_scheduled_ns - j->arrival_ns) / 1e6 : -1,
      .ttft_ms = j->first_token_ns ? (double)(j->first_token_ns - j->arrival_ns) / 1e6 : -1,
      .total_ms = (double)(now - j->arrival_ns) / 1e6,
      .finish_reason = reason,
  };
  log_access(&a);
}

void srv__on_wake(uv_async_t *h) {
  srv_t *s = h->data;
  fault_stall_once("loop_stall"); /* test builds: a starved loop, the engine's events piling up */
  if (s->engine) {
    const int64_t t0 = clock_now_ns(), notified = atomic_exchange(&s->notified_ns, 0);
    int64_t newest = 0, n_ev = 0; /* the latest event time */
    sched_event_t evs[128];
    srv_job_t *dirty = NULL;
    int k;
    while ((k = sched_poll_events(s->engine, evs, 128)) > 0) {
      for (int i = 0; i < k; i++) {
        if (evs[i].time > newest) newest = evs[i].time;
        n_ev++;
        on_event(s, &evs[i], &dirty);
        sched_req_t *done = evs[i].final ? evs[i].req : NULL;
        sched_event_release(&evs[i]);
        if (done) { /* its final event is released: the request is ours to free */
          srv_part_t *p = sched_req_user(done);
          sched_req_destroy(done);
          p->req = NULL;
        }
      }
    }
    while (dirty) {
      srv_job_t *j = dirty;
      dirty = j->next_dirty;
      j->dirty = false;
      j->next_dirty = NULL;
      if (j->stream) {
        flush(j);
        if (j->n_live) check_reader(j, t0); /* back-pressure: pause it if its client is not reading */
      }
      if (j->n_live == 0) {
        complete(j);
        srv__job_maybe_free(j);
      }
    }
    const int64_t t1 = clock_now_ns();
    s->ev_count += (uint64_t)n_ev;
    s->ev_loop_ns += (uint64_t)(t1 - t0);
    if (n_ev) {
      s->ev_wakes++;
      s->ev_delay_ns += (uint64_t)(t1 - newest);
      if (notified && notified <= t0) s->wake_ns += (uint64_t)(t0 - notified);
    }
  }
  srv__maybe_finish(s);
}
