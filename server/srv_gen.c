/* server/srv_gen.c — POST /v1/completions and /v1/chat/completions: parse
 * and validate (server/oai_request.h), tokenize each prompt (the chat
 * template for chat), check it against the context length, then make one
 * engine request per prompt (n sequences each) and submit them all. If any
 * submit is refused (429 queue full, 400, 503 draining) the ones already
 * submitted are cancelled and the client gets the error; otherwise the
 * response starts (srv_events.c takes over). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "server/srv_internal.h"

/* One prompt, tokenized; echo is the text an echoing completion starts with. */
typedef struct prompt_in {
  int32_t *ids; /* malloc'd [n] */
  int32_t n;
  const char *echo;
  size_t echo_len;
  char *echo_owned; /* malloc'd when decoded from token ids */
} prompt_in_t;

static void fail(uint64_t rid, http_res_t *res, const char *endpoint, int status, const char *msg,
                 const char *param, const char *code) {
  http_res_send_error(res, status, NULL, msg, param, code);
  srv__access(rid, endpoint, status);
}

/* Tokenizes prompt i of the request into *p. Returns 0, or answers 400 and
 * returns -EINVAL. */
static int encode_prompt(srv_t *s, uint64_t rid, http_res_t *res, const char *endpoint,
                         const oai_completion_req_t *c, const oai_chat_req_t *ch, int32_t i, prompt_in_t *p) {
  char err[512], param[64];
  const bool chat = ch != NULL;
  if (chat) snprintf(param, sizeof param, "messages");
  else if (c->n_prompts > 1) snprintf(param, sizeof param, "prompt[%d]", i);
  else snprintf(param, sizeof param, "prompt");
  int rc = 0;
  if (chat) {
    rc = srv__encode_chat(s, ch->messages, ch->n_messages, ch->add_generation_prompt, false, &p->ids, &p->n, err,
                          sizeof err);
  } else if (c->prompts[i].text) {
    p->echo = c->prompts[i].text;
    p->echo_len = c->prompts[i].text_len;
    rc = srv__encode(s, p->echo, p->echo_len, TOK_ENC_ADD_SPECIAL | TOK_ENC_PARSE_SPECIAL, &p->ids, &p->n, err,
                     sizeof err);
  } else {
    p->n = c->prompts[i].n_tokens;
    p->ids = malloc(((size_t)p->n + 1) * sizeof *p->ids);
    if (!p->ids) xoom("server", 0);
    memcpy(p->ids, c->prompts[i].tokens, (size_t)p->n * sizeof *p->ids);
    if (c->gen.echo) {
      const int flags = TOK_DEC_SPECIAL | TOK_DEC_STRIP_PREFIX;
      int64_t len = tok_decode(s->tok, p->ids, (size_t)p->n, flags, NULL, 0);
      p->echo_owned = malloc(len > 0 ? (size_t)len + 1 : 1);
      if (!p->echo_owned) xoom("server", 0);
      p->echo_owned[0] = 0;
      if (len > 0) tok_decode(s->tok, p->ids, (size_t)p->n, flags, p->echo_owned, (size_t)len + 1);
      p->echo = p->echo_owned;
      p->echo_len = len > 0 ? (size_t)len : 0;
    }
  }
  if (rc == 0 && p->n == 0) {
    snprintf(err, sizeof err, "the prompt has no tokens");
    rc = -EINVAL;
  }
  if (rc != 0) {
    fail(rid, res, endpoint, rc == -ENOSYS ? 500 : 400, err, param, rc == -ENOSYS ? NULL : "invalid_value");
    return rc;
  }
  const oai_gen_t *g = chat ? &ch->gen : &c->gen;
  const int32_t max = s->max_model_len, out = g->max_tokens > 0 ? g->max_tokens : 0;
  const char *what = chat ? "messages" : "prompt";
  if (p->n >= max || (int64_t)p->n + out > max) {
    if (out)
      snprintf(err, sizeof err,
               "This model's maximum context length is %d tokens. However, you requested %lld tokens (%d in the "
               "%s, %d in the completion). Please reduce the length of the %s or of the completion.",
               max, (long long)p->n + out, p->n, what, out, what);
    else
      snprintf(err, sizeof err,
               "This model's maximum context length is %d tokens. However, your %s resulted in %d tokens, which "
               "leaves no room for the completion. Please reduce the length of the %s.",
               max, what, p->n, what);
    fail(rid, res, endpoint, 400, err, param, "context_length_exceeded");
    return -EINVAL;
  }
  return 0;
}

/* Maps a refused submit to the client's answer. */
static void submit_failed(uint64_t rid, http_res_t *res, const char *endpoint, int rc, const char *err) {
  switch (rc) {
  case -EAGAIN:
    http_res_header(res, "Retry-After", "1");
    fail(rid, res, endpoint, 429, "the server is busy: its waiting queue is full (max_waiting); retry later", NULL,
         "queue_full");
    break;
  case -EINVAL:
    fail(rid, res, endpoint, 400, err, NULL, "invalid_value");
    break;
  case -ESHUTDOWN:
    http_res_header(res, "Retry-After", "1");
    fail(rid, res, endpoint, 503, "the server is shutting down", NULL, "draining");
    break;
  default: {
    char msg[256];
    snprintf(msg, sizeof msg, "the engine refused the request: %s", strerror(-rc));
    fail(rid, res, endpoint, 500, msg, NULL, NULL);
  }
  }
}

static void handle(const http_req_t *req, http_res_t *res, srv_t *s, bool chat) {
  const char *endpoint = chat ? "/v1/chat/completions" : "/v1/completions";
  const uint64_t rid = req->id; /* req is freed once answered */
  const int64_t arrival = clock_now_ns();
  if (!srv__serving(s, res)) {
    srv__access(rid, endpoint, 503);
    return;
  }
  oai_completion_req_t c;
  oai_chat_req_t ch;
  oai_error_t e;
  int rc = chat ? oai_parse_chat(req->body, req->body_len, &s->oai_lim, req->arena, &ch, &e)
                : oai_parse_completion(req->body, req->body_len, &s->oai_lim, req->arena, &c, &e);
  if (rc != 0) {
    srv__send_oai_error(res, &e);
    srv__access(rid, endpoint, e.status ? e.status : 400);
    return;
  }
  const oai_gen_t *g = chat ? &ch.gen : &c.gen;
  if (!srv__model_ok(s, res, chat ? ch.model : c.model)) {
    srv__access(rid, endpoint, 404);
    return;
  }
  if (!chat && g->echo && g->samp.logprobs) {
    fail(rid, res, endpoint, 400, "echo with logprobs is not supported (prompt logprobs are not computed)", "echo",
         "unsupported_parameter");
    return;
  }
  const int32_t n_parts = chat ? 1 : c.n_prompts;
  prompt_in_t *in = calloc((size_t)n_parts, sizeof *in);
  if (!in) xoom("server", 0);
  int32_t ok = 0;
  while (ok < n_parts && encode_prompt(s, rid, res, endpoint, chat ? NULL : &c, chat ? &ch : NULL, ok, &in[ok]) == 0)
    ok++;
  srv_job_t *j = NULL;
  char err[512] = "";
  if (ok < n_parts) goto out; /* answered */

  sched_req_params_t p = sched_req_params_default();
  p.samp = g->samp;
  p.max_tokens = g->max_tokens > 0 ? g->max_tokens : 0;
  p.n = g->n;
  p.ignore_eos = g->ignore_eos;
  p.stop = g->stop;
  p.n_stop = g->n_stop;
  p.stop_ids = g->stop_token_ids;
  p.n_stop_ids = g->n_stop_token_ids;
  j = srv__job_create(s, res, chat, g, n_parts);
  j->endpoint = endpoint;
  j->arrival_ns = arrival; /* parsing and tokenizing count as the request's time */
  for (int32_t i = 0; i < n_parts; i++) {
    srv_part_t *part = &j->parts[i];
    part->prompt_tokens = in[i].n;
    part->req = sched_req_create(in[i].ids, in[i].n, &p, part, err, sizeof err);
    if (!part->req) {
      rc = -EINVAL;
      break;
    }
  }
  for (int32_t i = 0; rc == 0 && i < n_parts; i++) {
    rc = sched_submit(s->engine, j->parts[i].req, err, sizeof err);
    if (rc == 0) {
      j->parts[i].live = true;
      j->n_live++;
    }
  }
  if (rc != 0) {
    for (int32_t i = 0; i < n_parts; i++)
      if (!j->parts[i].live) {
        sched_req_destroy(j->parts[i].req);
        j->parts[i].req = NULL;
      }
    srv__job_cancel(j, "another prompt of the request was refused");
    submit_failed(rid, res, endpoint, rc, err);
    j->res = NULL;
    j->status = rc == -EAGAIN ? 429 : rc == -EINVAL ? 400 : rc == -ESHUTDOWN ? 503 : 500;
    srv__job_maybe_free(j);
    goto out;
  }
  const char **echo = NULL;
  size_t *echo_len = NULL;
  if (!chat && g->echo) {
    echo = calloc((size_t)n_parts, sizeof *echo);
    echo_len = calloc((size_t)n_parts, sizeof *echo_len);
    if (!echo || !echo_len) xoom("server", 0);
    for (int32_t i = 0; i < n_parts; i++) {
      echo[i] = in[i].echo;
      echo_len[i] = in[i].echo_len;
    }
  }
  srv__job_start(j, echo, echo_len);
  free(echo);
  free(echo_len);
out:
  for (int32_t i = 0; i < n_parts; i++) {
    free(in[i].ids);
    free(in[i].echo_owned);
  }
  free(in);
}

void srv__h_completions(const http_req_t *req, http_res_t *res, void *ctx) { handle(req, res, ctx, false); }

void srv__h_chat(const http_req_t *req, http_res_t *res, void *ctx) { handle(req, res, ctx, true); }
