/* server/srv_write_openai.c — the OpenAI writer (srv_writer_t, see
 * srv_internal.h): a completions or chat job's stream (the first chunks, a
 * chunk per event, tool calls as OpenAI streams them, the usage chunk and
 * [DONE]) and its whole response. The job's bookkeeping (events, choices,
 * back-pressure, the end) is srv_events.c's; srv_responses.c is the
 * Responses API's writer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "server/srv_internal.h"

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

/* The stream chunk(s) of one event. */
static void plain_event(srv_job_t *j, srv_choice_t *c, int32_t ci, const sched_event_t *ev) {
  if (ev->kind == SCHED_EV_ERROR) {
    srv__write_openai_error(j, ev->error ? ev->error : "generation failed", NULL);
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
    srv__logprob_entry(j, c, ev, &entry, top);
    oc.has_logprobs = true;
    oc.logprobs = &entry;
    oc.n_logprobs = 1;
  }
  token_ids(j, c, ci, &oc, &ev->token, ev->token >= 0);
  srv__sse(j, chunk(j, &oc, false));
}

/* Sends the output's bytes [c->sent, end) as a content delta. */
static void send_content(srv_job_t *j, srv_choice_t *c, int32_t ci, size_t end) {
  if (end <= c->sent) return;
  oai_choice_t oc = {.index = ci, .stop_token = -1, .text = c->text.p + c->sent, .text_len = end - c->sent};
  srv__sse(j, chunk(j, &oc, false));
  c->sent = end;
}

/* A stream with tools: content goes out as it comes, up to where a call
 * may begin (oai_tools_stream_safe); the rest is kept until the choice
 * ends, then sent as OpenAI streams it: the rest of the content, each
 * call's id, type and name (arguments ""), each call's arguments, the
 * finish. */
static void stream_tools_event(srv_job_t *j, srv_choice_t *c, int32_t ci, const sched_event_t *ev) {
  if (ev->kind == SCHED_EV_ERROR) {
    plain_event(j, c, ci, ev);
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
      srv__sse(j, chunk(j, &t, false));
    }
  oc.finish = c->finish;
  oc.finish_tool_calls = parsed.finish_tool_calls;
  oc.stop_str = c->stop_str;
  oc.stop_token = c->stop_token;
  token_ids(j, c, ci, &oc, c->ids, c->n_ids); /* the whole output's, with the finish */
  srv__sse(j, chunk(j, &oc, false));
  arena_free(&a);
}

/* The first chunks: chat's role (with empty content, as OpenAI and vLLM),
 * or a completion's echoed prompt. */
static void stream_start(srv_job_t *j, const char *const *echo, const size_t *echo_len) {
  for (int32_t i = 0; i < j->n_choices; i++) {
    oai_choice_t c = {.index = i, .stop_token = -1};
    if (j->chat) {
      c.text = "";
      token_ids(j, &j->choices[i], i, &c, NULL, 0);
      srv__sse(j, chunk(j, &c, true));
    } else if (echo && echo_len[i / j->n]) {
      c.text = echo[i / j->n];
      c.text_len = echo_len[i / j->n];
      token_ids(j, &j->choices[i], i, &c, NULL, 0);
      srv__sse(j, chunk(j, &c, false));
    }
  }
}

static void stream_event(srv_job_t *j, srv_choice_t *c, int32_t ci, const sched_event_t *ev) {
  const char *think;
  size_t n_think;
  if (srv__reason_pending(c, &think, &n_think)) { /* the thinking first, as delta.reasoning_content */
    oai_choice_t oc = {.index = ci, .stop_token = -1, .reasoning = think, .reasoning_len = n_think};
    srv__sse(j, chunk(j, &oc, false));
  }
  if (j->tools_format) stream_tools_event(j, c, ci, ev);
  else plain_event(j, c, ci, ev);
}

/* The usage chunk (stream_options.include_usage), then [DONE]. */
static void stream_end(srv_job_t *j) {
  if (j->include_usage) {
    const oai_meta_t m = meta(j);
    const oai_usage_t u = {(int32_t)j->prompt_tokens, (int32_t)j->completion_tokens, (int32_t)j->cached_tokens};
    srv__sse(j, oai_write_usage_chunk(&m, j->chat, &u));
  }
  buf_put(&j->out, "data: [DONE]\n\n", 14);
}

void srv__write_openai_error(srv_job_t *j, const char *message, const char *code) {
  srv__sse(j, oai_write_error("server_error", message, NULL, code));
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

/* The whole response: every choice (tool calls read out), the prompt
 * logprobs, the usage. */
static char *whole(srv_job_t *j) {
  const oai_meta_t m = meta(j);
  const oai_usage_t u = {(int32_t)j->prompt_tokens, (int32_t)j->completion_tokens, (int32_t)j->cached_tokens};
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
                           .has_logprobs = j->logprobs, .logprobs = c->lp, .n_logprobs = c->n_lp,
                           .has_reasoning = j->reasoning, .reasoning = c->reasoning.len ? c->reasoning.p : NULL,
                           .reasoning_len = c->reasoning.len};
    if (j->reasoning && !c->text.len) cs[i].text = NULL; /* content null: the output was all reasoning */
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
  return json;
}


const srv_writer_t srv_writer_openai = {
    .stream_start = stream_start,
    .stream_event = stream_event,
    .stream_error = srv__write_openai_error,
    .stream_end = stream_end,
    .whole = whole,
};
