/* server/srv_routes.c — the routes of `tram serve`, the handlers that need
 * no engine step (/health, /v1/models, /metrics, /tokenize, /detokenize),
 * and the prompt encoding the generation handlers share with /tokenize (so
 * that usage numbers and /tokenize agree). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/fault.h"
#include "base/log.h"
#include "api/oai_chat_val.h"
#include "server/srv_internal.h"

void srv__send_json(http_res_t *res, int status, char *json) {
  http_res_send(res, status, "application/json", json, strlen(json));
  free(json);
}

void srv__send_oai_error(http_res_t *res, const oai_error_t *e) {
  http_res_send_error(res, e->status ? e->status : 400, e->type, e->message, e->param[0] ? e->param : NULL,
                      e->code);
}

void srv__access(uint64_t req_id, const char *endpoint, int status) {
  char id[32];
  snprintf(id, sizeof id, "http-%llu", (unsigned long long)req_id);
  const log_access_t a = {.id = id, .endpoint = endpoint, .status = status, .prompt_tokens = 0,
                          .output_tokens = 0, .queue_ms = -1, .ttft_ms = -1, .total_ms = -1};
  log_access(&a);
}

bool srv__serving(srv_t *s, http_res_t *res) {
  if (s->state == SRV_READY) return true;
  const bool loading = s->state == SRV_LOADING;
  http_res_header(res, "Retry-After", loading ? "5" : "1");
  http_res_send_error(res, 503, NULL,
                      loading ? "the model is loading; retry shortly" : "the server is shutting down",
                      NULL, loading ? "loading" : "draining");
  return false;
}

bool srv__model_ok(srv_t *s, http_res_t *res, const char *model) {
  if (!model || strcmp(model, s->cfg->served_model_name) == 0) return true;
  for (int i = 0; i < s->cfg->served_model_aliases.n; i++)
    if (strcmp(model, s->cfg->served_model_aliases.items[i]) == 0) return true;
  char msg[512];
  snprintf(msg, sizeof msg, "The model `%.200s` does not exist; this server serves `%.200s`.", model,
           s->cfg->served_model_name);
  http_res_send_error(res, 404, "not_found_error", msg, "model", "model_not_found");
  return false;
}

/* ---- encoding ------------------------------------------------------------------ */

int srv__encode(srv_t *s, const char *text, size_t len, int flags, int32_t **ids, int32_t *n, char *err,
                size_t err_len) {
  size_t cap = len + 8;
  int32_t *buf = NULL;
  int64_t got;
  for (;;) {
    buf = xreallocarray(buf, cap, sizeof *buf);
    got = tok_encode(s->tok, text, len, flags, buf, cap);
    if (got < 0 || (size_t)got <= cap) break;
    cap = (size_t)got;
  }
  if (got < 0) {
    free(buf);
    snprintf(err, err_len, "the text cannot be tokenized: %s", strerror((int)-got));
    return -EINVAL;
  }
  if (got > INT32_MAX) {
    free(buf);
    snprintf(err, err_len, "the text has too many tokens (%lld)", (long long)got);
    return -EINVAL;
  }
  *ids = buf;
  *n = (int32_t)got;
  return 0;
}

int srv__text_flags(const srv_t *s) { return s->cfg->special_tokens_in_input ? TOK_ENC_PARSE_SPECIAL : 0; }

static size_t mark_text(const void *tok, const char *s, size_t n, char *out) {
  return tok_mark_specials(tok, s, n, out);
}

/* Cuts text[*len] after the last occurrence of the final message's
 * content (continue_final_message). Returns 0 or -EINVAL with err. */
static int cut_after_final(const chat_val_t *last, const char *text, size_t *len, char *err, size_t err_len) {
  const chat_val_t *c = oai_chat_val_get(last, "content");
  const char *at = NULL;
  for (const char *p = text; c && c->n && p + c->n <= text + *len; p++)
    if (memcmp(p, c->s, c->n) == 0) at = p;
  if (!at) {
    snprintf(err, err_len, "continue_final_message: the final message's content is empty or not in the rendered "
                           "prompt");
    return -EINVAL;
  }
  *len = (size_t)(at - text) + c->n;
  return 0;
}

int srv__encode_chat(srv_t *s, const oai_message_t *msgs, int32_t n_msgs, const char *tools,
                     bool add_generation_prompt, bool continue_final, bool add_special, int32_t **ids, int32_t *n, char *err, size_t err_len) {
  if (!s->tmpl) {
    snprintf(err, err_len, "chat is not available: this model's chat template does not compile (see the server log)");
    return -ENOSYS;
  }
  arena_t arena;
  arena_init(&arena, 0, 0);
  chat_tmpl_input_t in = {
      .messages = oai_chat_messages(&arena, msgs, n_msgs),
      .add_generation_prompt = add_generation_prompt,
      .bos_token = s->bos,
      .eos_token = s->eos,
      .extra = oai_chat_tools(&arena, tools),
  };
  const bool mark = !s->cfg->special_tokens_in_input;
  if (mark) { /* every text the client gave, keys too: its control tokens' texts stay plain text */
    const oai_text_map_t m = {.cap = tok_mark_cap, .fn = mark_text, .ctx = s->tok};
    in.messages = oai_chat_val_map(&arena, in.messages, &m);
    if (in.extra) in.extra = oai_chat_val_map(&arena, in.extra, &m);
  }
  char *text = NULL;
  size_t len = 0;
  int rc = chat_tmpl_render(s->tmpl, &in, &text, &len, err, err_len);
  if (rc == 0 && continue_final) rc = cut_after_final(&in.messages->items[n_msgs - 1], text, &len, err, err_len);
  arena_free(&arena);
  if (rc != 0) {
    free(text);
    return rc == -ENOMEM ? -ENOMEM : -EINVAL; /* a 503 */
  }
  const int flags = TOK_ENC_PARSE_SPECIAL | (mark ? TOK_ENC_MARKED : 0) | (add_special ? TOK_ENC_ADD_SPECIAL : 0);
  rc = srv__encode(s, text, len, flags, ids, n, err, err_len);
  free(text);
  return rc;
}

/* ---- handlers -------------------------------------------------------------------- */

static void h_health(const http_req_t *req, http_res_t *res, void *ctx) {
  srv_t *s = ctx;
  const uint64_t rid = req->id; /* req is freed once answered */
  const char *status = "ok";
  int code = 200;
  if (s->state == SRV_LOADING) status = "loading", code = 503;
  else if (s->state != SRV_READY) status = "draining", code = 503;
  else if (srv__stalled(s, srv__stall_ns(s, true))) status = "stalled", code = 503;
  srv__send_json(res, code, oai_write_health(status));
  if (code != 200 || log_get_level() >= LOG_LEVEL_DEBUG) srv__access(rid, "/health", code);
}

/* The served model under name i: 0 the served name, then the aliases. */
static oai_model_t model_entry(const srv_t *s, int i) {
  return (oai_model_t){
      .id = i == 0 ? s->cfg->served_model_name : s->cfg->served_model_aliases.items[i - 1],
      .root = srv__model_shown(s),
      .owned_by = "tram",
      .created = s->boot_time,
      .max_model_len = s->max_model_len,
  };
}

/* GET /v1/models: the served name, then each alias (as vLLM lists them). */
static void h_models(const http_req_t *req, http_res_t *res, void *ctx) {
  srv_t *s = ctx;
  const uint64_t rid = req->id; /* req is freed once answered */
  if (!srv__serving(s, res)) return;
  oai_model_t m[1 + CFG_MAX_ALIASES];
  int n = 1 + s->cfg->served_model_aliases.n;
  if (n > 1 + CFG_MAX_ALIASES) n = 1 + CFG_MAX_ALIASES;
  for (int i = 0; i < n; i++) m[i] = model_entry(s, i);
  srv__send_json(res, 200, oai_write_models(m, n));
  srv__access(rid, "/v1/models", 200);
}

/* Writes "/v1/models/<name>" into path[cap] with each '/' of name as
 * `slash` ("/", "%2F" or "%2f": clients percent-encode it). */
static void model_path(char *path, size_t cap, const char *name, const char *slash) {
  size_t n = (size_t)snprintf(path, cap, "/v1/models/");
  for (const char *p = name; *p && n + 4 < cap; p++)
    n += (size_t)snprintf(path + n, cap - n, "%s", *p == '/' ? slash : (char[]){*p, 0});
}

/* GET /v1/models/{name}: routes for each name, '/' in it as is and
 * percent-encoded (an unknown name is a 404 like any unknown path). */
static void h_model(const http_req_t *req, http_res_t *res, void *ctx) {
  srv_t *s = ctx;
  const uint64_t rid = req->id;
  if (!srv__serving(s, res)) return;
  char name[1100];
  size_t n = 0;
  for (const char *p = req->path + strlen("/v1/models/"); *p && n + 1 < sizeof name; p++) {
    if (p[0] == '%' && p[1] == '2' && (p[2] == 'F' || p[2] == 'f')) {
      name[n++] = '/';
      p += 2;
    } else {
      name[n++] = *p;
    }
  }
  name[n] = '\0';
  int i = 0;
  for (int k = 0; k < s->cfg->served_model_aliases.n; k++)
    if (strcmp(name, s->cfg->served_model_aliases.items[k]) == 0) i = k + 1;
  const oai_model_t m = model_entry(s, i);
  srv__send_json(res, 200, oai_write_model(&m));
  srv__access(rid, "/v1/models/{model}", 200);
}

static void h_metrics(const http_req_t *req, http_res_t *res, void *ctx) {
  srv_t *s = ctx;
  const uint64_t rid = req->id; /* req is freed once answered */
  if (!s->metrics) {
    http_res_send_error(res, 503, NULL, "the model is loading; metrics follow", NULL, "loading");
    return;
  }
  srv_metrics_t *m = s->metrics;
  sched_stats_t st;
  sched_get_stats(s->engine, &st);
  srv_metrics_snapshot(m, &st);
  srv_metrics_finished(m, s->finished_stop, s->finished_length, s->finished_abort);
  http_server_stats_t hs;
  http_server_stats(s->http, &hs);
  srv_metrics_http(m, &hs);
  prom_set(m->loop_stall_max, (double)s->stall_max_ns / 1e9);
  prom_set(m->loop_stall_total, (double)s->stall_sum_ns / 1e9);
  size_t len;
  char *text = srv_metrics_render(m, &len);
  http_res_send(res, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
  free(text);
  if (log_get_level() >= LOG_LEVEL_DEBUG) srv__access(rid, "/metrics", 200);
}

/* What /tokenize's and /detokenize's work items leave for their done (in
 * the item's arena): the whole answer, made on the worker. */
typedef struct tok_out {
  int status;        /* 200, or the error's */
  oai_error_t e;     /* the error (status != 200) */
  const char *model; /* the request's model field (NULL: none) */
  char *json;        /* 200: the response body (malloc'd) */
} tok_out_t;

static tok_out_t *tok_out(srv_work_t *w) {
  tok_out_t *o = w->out = arena_alloc(&w->arena, sizeof *o);
  memset(o, 0, sizeof *o);
  if (fault_value("tokenize_delay", 0) > 0) /* test builds: slow work, to show it is not the loop's */
    uv_sleep((unsigned)fault_value("tokenize_delay", 0));
  return o;
}

/* An error answer for done: status with message and field. */
static void tok_fail(tok_out_t *o, int status, const char *msg, const char *param, const char *code) {
  o->status = status;
  o->e = (oai_error_t){.status = status, .code = code};
  snprintf(o->e.message, sizeof o->e.message, "%s", msg);
  if (param) snprintf(o->e.param, sizeof o->e.param, "%s", param);
}

/* Worker: parse, tokenize, and write the answer (the token strings and the
 * JSON of a large prompt cost as much as the tokenizing: never the loop's). */
static void tokenize_run(srv_work_t *w) {
  srv_t *s = w->s;
  tok_out_t *o = tok_out(w);
  oai_tokenize_req_t t;
  if (oai_parse_tokenize(w->body, w->body_len, &s->oai_lim, &w->arena, &t, &o->e) != 0) {
    o->status = o->e.status ? o->e.status : 400;
    return;
  }
  o->model = t.model;
  int32_t *ids = NULL, n = 0;
  char err[512];
  const int rc = t.prompt ? srv__encode(s, t.prompt, t.prompt_len,
                                        srv__text_flags(s) | (t.add_special_tokens ? TOK_ENC_ADD_SPECIAL : 0), &ids,
                                        &n, err, sizeof err)
                          : srv__encode_chat(s, t.messages, t.n_messages, t.tools, t.add_generation_prompt,
                                             t.continue_final_message, t.add_special_tokens, &ids, &n, err, sizeof err);
  if (rc != 0) {
    const int status = rc == -ENOSYS ? 500 : rc == -ENOMEM ? 503 : 400;
    tok_fail(o, status, err, status == 400 ? (t.prompt ? "prompt" : "messages") : NULL,
             status == 503 ? "out_of_memory" : status == 400 ? "invalid_value" : NULL);
    return;
  }
  const char **strs = NULL; /* return_token_strs: the vocabulary's strings, as vLLM's token_strs */
  if (t.return_token_strs) {
    strs = arena_array(&w->arena, (size_t)(n ? n : 1), sizeof *strs);
    for (int32_t i = 0; i < n; i++) {
      size_t len = 0;
      const char *x = tok_text(s->tok, ids[i], &len);
      strs[i] = arena_strndup(&w->arena, x ? x : "", x ? len : 0);
    }
  }
  o->status = 200;
  o->json = oai_write_tokenize(ids, n, s->max_model_len, strs);
  free(ids);
}

/* Worker: parse, decode, and write the answer. */
static void detokenize_run(srv_work_t *w) {
  srv_t *s = w->s;
  tok_out_t *o = tok_out(w);
  oai_detokenize_req_t d;
  if (oai_parse_detokenize(w->body, w->body_len, &s->oai_lim, &w->arena, &d, &o->e) != 0) {
    o->status = o->e.status ? o->e.status : 400;
    return;
  }
  o->model = d.model;
  const int flags = TOK_DEC_SPECIAL | TOK_DEC_STRIP_PREFIX;
  int64_t len = tok_decode(s->tok, d.tokens, (size_t)d.n_tokens, flags, NULL, 0);
  if (len < 0) { /* the parser checked the ids against the vocabulary */
    tok_fail(o, 400, "a token id is out of range", "tokens", "invalid_value");
    return;
  }
  char *text = malloc((size_t)len + 1);
  if (!text) xoom("server", 0);
  tok_decode(s->tok, d.tokens, (size_t)d.n_tokens, flags, text, (size_t)len + 1);
  o->status = 200;
  o->json = oai_write_detokenize(text, (size_t)len);
  free(text);
}

/* Loop: answers (or, with the client gone, only frees) /tokenize and
 * /detokenize alike: a parse error, 503 unless serving, 404 for another
 * model, the encoding's error, or the body made on the worker. */
static void tok_done(srv_work_t *w, const char *endpoint) {
  srv_t *s = w->s;
  tok_out_t *o = w->out;
  http_res_t *res = w->res;
  const uint64_t rid = w->rid;
  if (!res) {
  } else if (!srv__serving(s, res)) {
  } else if (o->model && !srv__model_ok(s, res, o->model)) {
    srv__access(rid, endpoint, 404);
  } else if (o->status != 200) {
    srv__send_oai_error(res, &o->e);
    srv__access(rid, endpoint, o->status);
  } else {
    srv__send_json(res, 200, o->json);
    o->json = NULL;
    srv__access(rid, endpoint, 200);
  }
  free(o->json);
}

static void tokenize_done(srv_work_t *w) { tok_done(w, "/tokenize"); }
static void detokenize_done(srv_work_t *w) { tok_done(w, "/detokenize"); }

static void h_tokenize(const http_req_t *req, http_res_t *res, void *ctx) {
  srv_t *s = ctx;
  if (!srv__serving(s, res)) return;
  srv__offload(s, req, res, clock_now_ns(), tokenize_run, tokenize_done);
}

static void h_detokenize(const http_req_t *req, http_res_t *res, void *ctx) {
  srv_t *s = ctx;
  if (!srv__serving(s, res)) return;
  srv__offload(s, req, res, clock_now_ns(), detokenize_run, detokenize_done);
}

void srv__routes(srv_t *s) {
  http_server_t *h = s->http;
  http_server_route(h, HTTP_GET, "/health", h_health, s, HTTP_ROUTE_PUBLIC | HTTP_ROUTE_PROBE);
  http_server_route(h, HTTP_GET, "/v1/models", h_models, s, 0);
  for (int i = 0; i <= s->cfg->served_model_aliases.n && i <= CFG_MAX_ALIASES; i++) {
    const char *slashes[] = {"/", "%2F", "%2f"};
    for (int k = 0; k < 3; k++) {
      char path[1100];
      model_path(path, sizeof path, model_entry(s, i).id, slashes[k]);
      http_server_route(h, HTTP_GET, path, h_model, s, 0); /* -EEXIST (no '/') is fine */
    }
  }
  if (s->cfg->metrics) http_server_route(h, HTTP_GET, "/metrics", h_metrics, s, HTTP_ROUTE_PROBE);
  http_server_route(h, HTTP_POST, "/tokenize", h_tokenize, s, HTTP_ROUTE_JSON);
  http_server_route(h, HTTP_POST, "/detokenize", h_detokenize, s, HTTP_ROUTE_JSON);
  http_server_route(h, HTTP_POST, "/v1/completions", srv__h_completions, s, HTTP_ROUTE_JSON);
  http_server_route(h, HTTP_POST, "/v1/chat/completions", srv__h_chat, s, HTTP_ROUTE_JSON);
  http_server_route(h, HTTP_POST, "/v1/responses", srv__h_responses, s, HTTP_ROUTE_JSON);
  http_server_route(h, HTTP_POST, "/v1/messages", srv__h_messages, s, HTTP_ROUTE_JSON); /* Anthropic's */
  http_server_route(h, HTTP_POST, "/v1/messages/count_tokens", srv__h_count_tokens, s, HTTP_ROUTE_JSON);
  http_server_route(h, HTTP_POST, "/v1/embeddings", srv__h_embeddings, s, HTTP_ROUTE_JSON);
  srv__info_routes(s);
  srv__dash_routes(s);
}
