/* server/srv_events.c — the engine → loop bridge and the life of a
 * generation job (srv_internal.h).
 *
 * The engine's notify hook wakes the loop (uv_async); srv__on_wake drains
 * every queued event. A token event updates its choice (and the
 * inter-token latency); for a streaming job it appends one SSE chunk to the
 * job's buffer, for a whole response it keeps the text and logprobs. The
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
#include "base/hash.h"
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

/* ---- SSE output ---------------------------------------------------------------- */

/* Appends "data: <json>\n\n" to the job's buffer and frees json. */
static void sse(srv_job_t *j, char *json) {
  buf_put(&j->out, "data: ", 6);
  buf_put(&j->out, json, strlen(json));
  buf_put(&j->out, "\n\n", 2);
  free(json);
}

/* OpenAI's system_fingerprint: the configuration that decides the outputs
 * (the model file, device, context length, KV block size), made once. */
static const char *fingerprint(srv_t *s) {
  if (!s->fingerprint[0]) {
    char conf[64];
    snprintf(conf, sizeof conf, "/%d/%d/%d", s->cfg->device, s->max_model_len, s->cfg->block_size);
    const uint64_t h = hash_fnv1a(hash_fnv1a(HASH_FNV_OFFSET, s->cfg->model, strlen(s->cfg->model)), conf, strlen(conf));
    snprintf(s->fingerprint, sizeof s->fingerprint, "fp_%016llx", (unsigned long long)h);
  }
  return s->fingerprint;
}

static oai_meta_t meta(const srv_job_t *j) {
  return (oai_meta_t){
      .id = j->id, .model = j->srv->cfg->served_model_name, .created = j->created, .fingerprint = fingerprint(j->srv)};
}

/* The usage so far (continuous_usage_stats): every prompt, the tokens
 * generated until now. */
static oai_usage_t usage_now(const srv_job_t *j) {
  oai_usage_t u = {0};
  for (int32_t i = 0; i < j->n_parts; i++) u.prompt_tokens += j->parts[i].prompt_tokens;
  for (int32_t i = 0; i < j->n_choices; i++) u.completion_tokens += j->choices[i].tokens;
  u.cached_tokens = (int32_t)j->cached_tokens;
  return u;
}

/* return_token_ids: oc carries ids[n] as its token_ids and, on the
 * choice's first chunk of a stream (or in a whole response), its prompt's. */
static void token_ids(const srv_job_t *j, srv_choice_t *c, int32_t ci, oai_choice_t *oc, const int32_t *ids,
                      int32_t n) {
  if (!j->return_token_ids) return;
  oc->has_token_ids = true;
  oc->token_ids = ids;
  oc->n_token_ids = n;
  if (c->prompt_ids_sent) return;
  const srv_part_t *p = &j->parts[ci / j->n];
  oc->prompt_token_ids = p->prompt_ids;
  oc->n_prompt_token_ids = p->prompt_tokens;
  c->prompt_ids_sent = j->stream;
}

static char *chunk(const srv_job_t *j, const oai_choice_t *c, bool first) {
  oai_meta_t m = meta(j);
  const oai_usage_t u = usage_now(j);
  if (j->continuous_usage) m.chunk_usage = &u;
  oai_choice_t with_ids = *c; /* return_token_ids: every chunk has token_ids, [] when it adds none */
  with_ids.has_token_ids |= j->return_token_ids;
  return j->chat ? oai_write_chat_chunk(&m, &with_ids, first, j->include_usage)
                 : oai_write_completion_chunk(&m, &with_ids, j->include_usage);
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
      sse(j, oai_write_error("server_error", msg, NULL, "engine_stalled"));
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
  if (j->responses) srv__resp_stream_start(j);
  for (int32_t i = 0; !j->responses && i < j->n_choices; i++) {
    oai_choice_t c = {.index = i, .stop_token = -1};
    if (j->chat) { /* the role comes first, with empty content (as OpenAI and vLLM) */
      c.text = "";
      token_ids(j, &j->choices[i], i, &c, NULL, 0);
      sse(j, chunk(j, &c, true));
    } else if (echo && echo_len[i / j->n]) {
      c.text = echo[i / j->n];
      c.text_len = echo_len[i / j->n];
      token_ids(j, &j->choices[i], i, &c, NULL, 0);
      sse(j, chunk(j, &c, false));
    }
  }
  flush(j);
}

/* ---- events ---------------------------------------------------------------------- */

/* The logprobs entry of ev's token; top[] must hold SAMP_MAX_TOP_LOGPROBS. */
static void logprob_entry(const srv_job_t *j, const srv_choice_t *c, const sched_event_t *ev,
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

/* The stream chunk(s) of one event. */
static void stream_event(srv_job_t *j, srv_choice_t *c, int32_t ci, const sched_event_t *ev) {
  if (ev->kind == SCHED_EV_ERROR) {
    sse(j, oai_write_error("server_error", ev->error ? ev->error : "generation failed", NULL, NULL));
    return;
  }
  const bool fin = ev->kind == SCHED_EV_FINISHED;
  const bool lp = j->logprobs && ev->token >= 0, ids = j->return_token_ids && ev->token >= 0;
  if (!ev->text_len && !lp && !fin && !ids) return;
  oai_choice_t oc = {.index = ci, .text = ev->text_len ? ev->text : (j->chat ? NULL : ""),
                     .text_len = ev->text_len, .finish = fin ? c->finish : SCHED_FINISH_NONE,
                     .stop_str = fin ? c->stop_str : NULL, .stop_token = fin ? c->stop_token : -1};
  oai_token_logprob_t entry;
  oai_top_logprob_t top[SAMP_MAX_TOP_LOGPROBS];
  if (lp) {
    logprob_entry(j, c, ev, &entry, top);
    oc.has_logprobs = true;
    oc.logprobs = &entry;
    oc.n_logprobs = 1;
  }
  token_ids(j, c, ci, &oc, &ev->token, ev->token >= 0);
  sse(j, chunk(j, &oc, false));
}

/* Sends the output's bytes [c->sent, end) as a content delta. */
static void send_content(srv_job_t *j, srv_choice_t *c, int32_t ci, size_t end) {
  if (end <= c->sent) return;
  oai_choice_t oc = {.index = ci, .stop_token = -1, .text = c->text.p + c->sent, .text_len = end - c->sent};
  sse(j, chunk(j, &oc, false));
  c->sent = end;
}

/* A stream with tools: content goes out as it comes, up to where a call
 * may begin (oai_tools_stream_safe); the rest is kept until the choice
 * ends, then sent as OpenAI streams it: the rest of the content, each
 * call's id, type and name (arguments ""), each call's arguments, the
 * finish. */
static void stream_tools_event(srv_job_t *j, srv_choice_t *c, int32_t ci, const sched_event_t *ev) {
  if (ev->kind == SCHED_EV_ERROR) {
    stream_event(j, c, ci, ev);
    return;
  }
  buf_put(&c->text, ev->text, ev->text_len);
  if (ev->kind != SCHED_EV_FINISHED) {
    send_content(j, c, ci, oai_tools_stream_safe(j->tools_format, c->text.p, c->text.len));
    return;
  }
  arena_t a;
  arena_init(&a, 0, 0);
  oai_choice_t parsed = {0};
  srv__tools_parse(j, ci, c, &a, &parsed);
  if (parsed.text) send_content(j, c, ci, (size_t)(parsed.text - c->text.p) + parsed.text_len);
  oai_choice_t oc = {.index = ci, .stop_token = -1};
  for (int32_t k = 0; k < parsed.n_tool_calls; k++)
    for (int d = 1; d <= 2; d++) {
      oai_choice_t t = {.index = ci, .stop_token = -1, .tool_calls = &parsed.tool_calls[k], .n_tool_calls = 1,
                        .tool_index = k, .tool_delta = d};
      sse(j, chunk(j, &t, false));
    }
  oc.finish = c->finish;
  oc.finish_tool_calls = parsed.finish_tool_calls;
  oc.stop_str = c->stop_str;
  oc.stop_token = c->stop_token;
  token_ids(j, c, ci, &oc, c->ids, c->n_ids); /* the whole output's, with the finish */
  sse(j, chunk(j, &oc, false));
  arena_free(&a);
}

/* Keeps what one event adds to a whole response. */
static void collect_event(srv_job_t *j, srv_choice_t *c, const sched_event_t *ev) {
  buf_put(&c->text, ev->text, ev->text_len);
  if (!j->logprobs || ev->token < 0) return;
  oai_top_logprob_t top[SAMP_MAX_TOP_LOGPROBS];
  xgrow(&c->lp, &c->cap_lp, (size_t)c->n_lp + 1, sizeof *c->lp, 16);
  oai_token_logprob_t *e = &c->lp[c->n_lp];
  logprob_entry(j, c, ev, e, top);
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
  if (j->res) {
    if (j->stream && j->responses && ev->kind != SCHED_EV_ERROR) {
      if (ev->text_len) srv__resp_stream_text(j, ev->text, ev->text_len);
    } else if (j->stream && j->tools_format) stream_tools_event(j, c, ci, ev);
    else if (j->stream) stream_event(j, c, ci, ev);
    else collect_event(j, c, ev);
  }
  if (ev == &with_stop) free(with_stop.text);
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

/* Adds the prompt logprobs to the choices cs[] of a whole response: with
 * echo + logprobs, the prompt's entries lead each choice's logprobs; with
 * prompt_logprobs, vLLM's list. Returns the arrays to free after writing
 * ([2 * n_choices]), or NULL when there are none. */
static oai_token_logprob_t **prompt_views(const srv_job_t *j, oai_choice_t *cs) {
  if (!j->echo_logprobs && j->prompt_logprobs < 0) return NULL;
  oai_token_logprob_t **views = xcalloc((size_t)j->n_choices * 2, sizeof *views);
  for (int32_t i = 0; i < j->n_choices; i++) {
    const srv_part_t *p = &j->parts[i / j->n];
    if (!p->plp) continue;
    if (j->prompt_logprobs >= 0) {
      views[2 * i] = srv__plp_view(p, j->prompt_logprobs);
      cs[i].prompt_lp = views[2 * i];
      cs[i].n_prompt_lp = p->prompt_tokens;
    }
    if (j->echo_logprobs) { /* the prompt's entries, then the output's */
      oai_token_logprob_t *v = srv__plp_view(p, j->echo_top);
      const int32_t n = p->prompt_tokens + cs[i].n_logprobs;
      v = xreallocarray(v, (size_t)n, sizeof *v);
      memcpy(v + p->prompt_tokens, cs[i].logprobs, (size_t)cs[i].n_logprobs * sizeof *v);
      views[2 * i + 1] = v;
      cs[i].logprobs = v;
      cs[i].n_logprobs = n;
    }
  }
  return views;
}

/* The whole (non-streamed) response. */
static void send_whole(srv_job_t *j) {
  const oai_meta_t m = meta(j);
  const oai_usage_t u = {(int32_t)j->prompt_tokens, (int32_t)j->completion_tokens, (int32_t)j->cached_tokens};
  if (j->errored) {
    const char *msg = "generation failed";
    for (int32_t i = 0; i < j->n_choices; i++)
      if (j->choices[i].error) msg = j->choices[i].error;
    j->status = 500;
    http_res_send_error(j->res, 500, NULL, msg, NULL, NULL);
    return;
  }
  if (j->responses) {
    j->status = 200;
    srv__send_json(j->res, 200, srv__resp_whole(j));
    return;
  }
  oai_choice_t *cs = xcalloc((size_t)j->n_choices, sizeof *cs);
  for (int32_t i = 0; i < j->n_choices; i++) {
    srv_choice_t *c = &j->choices[i];
    /* a stop string cut the text: the logprobs end where it ends (tokens
     * that start at or past the cut were not returned) */
    while (c->stop_str && c->n_lp > 0 && (size_t)c->lp[c->n_lp - 1].text_offset >= c->text.len) {
      free((void *)c->lp[c->n_lp - 1].top);
      c->n_lp--;
    }
    cs[i] = (oai_choice_t){.index = i, .text = c->text.p ? c->text.p : "", .text_len = c->text.len,
                           .finish = c->finish, .stop_str = c->stop_str, .stop_token = c->stop_token,
                           .has_logprobs = j->logprobs, .logprobs = c->lp, .n_logprobs = c->n_lp};
    token_ids(j, c, i, &cs[i], c->ids, c->n_ids);
  }
  arena_t tools_arena;
  arena_init(&tools_arena, 0, 0);
  for (int32_t i = 0; j->tools_format && i < j->n_choices; i++) {
    oai_choice_t parsed = cs[i];
    srv__tools_parse(j, i, &j->choices[i], &tools_arena, &parsed);
    cs[i] = parsed;
  }
  oai_token_logprob_t **views = prompt_views(j, cs);
  char *json = j->chat ? oai_write_chat_completion(&m, cs, j->n_choices, &u)
                       : oai_write_completion(&m, cs, j->n_choices, &u);
  for (int32_t i = 0; views && i < 2 * j->n_choices; i++) free(views[i]);
  free(views);
  free(cs);
  arena_free(&tools_arena);
  j->status = 200;
  srv__send_json(j->res, 200, json);
}

/* Every engine request of j is done: end the response, log it. */
static void complete(srv_job_t *j) {
  if (j->res) {
    if (j->stream && j->responses) {
      srv__resp_stream_end(j);
      flush(j);
      http_res_stream_end(j->res);
    } else if (j->stream) {
      if (j->include_usage) {
        const oai_meta_t m = meta(j);
        const oai_usage_t u = {(int32_t)j->prompt_tokens, (int32_t)j->completion_tokens,
                               (int32_t)j->cached_tokens};
        sse(j, oai_write_usage_chunk(&m, j->chat, &u));
      }
      buf_put(&j->out, "data: [DONE]\n\n", 14);
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
