/* api/oai_response.c — OpenAI-compatible response JSON (see
 * oai_response.h). Objects are built as cJSON trees and printed compactly. */
#include "api/oai_response.h"
#include "api/oai_json.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/utf8.h"

static void json_oom(void) {
  fprintf(stderr, "tram: oai_response: out of memory\n");
  abort();
}

static cJSON *must(cJSON *x) {
  if (!x) json_oom();
  return x;
}

/* Copies s[0..n) as valid UTF-8 (each byte of an ill-formed or truncated
 * sequence, and NUL, becomes U+FFFD) into a malloc'd NUL-terminated
 * string. */
static char *utf8_clean(const char *s, size_t n) {
  char *out = xmalloc(3 * n + 1);
  const unsigned char *p = (const unsigned char *)(s ? s : "");
  size_t o = 0, i = 0;
  while (i < n) {
    const int len = p[i] ? utf8_char(p + i, n - i) : 0;
    if (len > 0) {
      memcpy(out + o, p + i, (size_t)len);
      o += (size_t)len;
      i += (size_t)len;
    } else {
      memcpy(out + o, "\xEF\xBF\xBD", 3);
      o += 3;
      i += 1;
    }
  }
  out[o] = '\0';
  return out;
}

static cJSON *text_json(const char *s, size_t n) {
  char *clean = utf8_clean(s, n);
  cJSON *x = must(cJSON_CreateString(clean));
  free(clean);
  return x;
}

static void add_text(cJSON *obj, const char *key, const char *s, size_t n) {
  cJSON_AddItemToObject(obj, key, text_json(s, n));
}

static void add_str_or_null(cJSON *obj, const char *key, const char *s) {
  if (s) add_text(obj, key, s, strlen(s));
  else must(cJSON_AddNullToObject(obj, key));
}

static void add_num(cJSON *obj, const char *key, double v) { must(cJSON_AddNumberToObject(obj, key, v)); }

static double logprob_value(float lp) { return isfinite(lp) ? (double)lp : -9999.0; }

static char *print(cJSON *root) {
  char *s = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!s) json_oom();
  return s;
}

const char *oai_finish_name(sched_finish_t f) {
  switch (f) {
  case SCHED_FINISH_NONE: return NULL;
  case SCHED_FINISH_ERROR: return sched_finish_name(SCHED_FINISH_ABORT);
  default: return sched_finish_name(f);
  }
}

void oai_make_id(char *buf, size_t size, const char *prefix, uint64_t a, uint64_t b) {
  snprintf(buf, size, "%s-%016" PRIx64 "%016" PRIx64, prefix, a, b);
}

static cJSON *head(const oai_meta_t *m, const char *object) {
  cJSON *root = must(cJSON_CreateObject());
  add_str_or_null(root, "id", m->id);
  must(cJSON_AddStringToObject(root, "object", object));
  add_num(root, "created", (double)m->created);
  add_str_or_null(root, "model", m->model);
  if (m->fingerprint) must(cJSON_AddStringToObject(root, "system_fingerprint", m->fingerprint));
  return root;
}

static void add_usage(cJSON *root, const oai_usage_t *u) {
  cJSON *usage = must(cJSON_AddObjectToObject(root, "usage"));
  add_num(usage, "prompt_tokens", u->prompt_tokens);
  add_num(usage, "completion_tokens", u->completion_tokens);
  add_num(usage, "total_tokens", (double)u->prompt_tokens + u->completion_tokens);
  cJSON *details = must(cJSON_AddObjectToObject(usage, "prompt_tokens_details"));
  add_num(details, "cached_tokens", u->cached_tokens);
}

static void add_finish(cJSON *choice, const oai_choice_t *c, bool stop_reason) {
  add_str_or_null(choice, "finish_reason",
                  c->finish_tool_calls && c->finish != SCHED_FINISH_NONE ? "tool_calls" : oai_finish_name(c->finish));
  if (!stop_reason) return;
  if (c->stop_str) add_text(choice, "stop_reason", c->stop_str, strlen(c->stop_str));
  else if (c->stop_token >= 0) add_num(choice, "stop_reason", c->stop_token);
  else must(cJSON_AddNullToObject(choice, "stop_reason"));
}

/* Legacy completions logprobs: parallel arrays, top_logprobs as objects. */
static void add_completion_logprobs(cJSON *choice, const oai_choice_t *c) {
  if (!c->has_logprobs) {
    must(cJSON_AddNullToObject(choice, "logprobs"));
    return;
  }
  cJSON *lp = must(cJSON_AddObjectToObject(choice, "logprobs"));
  cJSON *tokens = must(cJSON_AddArrayToObject(lp, "tokens"));
  cJSON *values = must(cJSON_AddArrayToObject(lp, "token_logprobs"));
  cJSON *tops = must(cJSON_AddArrayToObject(lp, "top_logprobs"));
  cJSON *offsets = must(cJSON_AddArrayToObject(lp, "text_offset"));
  for (int32_t i = 0; i < c->n_logprobs; i++) {
    const oai_token_logprob_t *t = &c->logprobs[i];
    cJSON_AddItemToArray(tokens, text_json(t->token, t->token_len));
    cJSON_AddItemToArray(offsets, must(cJSON_CreateNumber(t->text_offset)));
    if (t->no_logprob) { /* the prompt's first token: nothing predicts it */
      cJSON_AddItemToArray(values, must(cJSON_CreateNull()));
      cJSON_AddItemToArray(tops, must(cJSON_CreateNull()));
      continue;
    }
    cJSON_AddItemToArray(values, must(cJSON_CreateNumber(logprob_value(t->logprob))));
    cJSON *top = must(cJSON_CreateObject());
    for (int32_t k = 0; k < t->n_top; k++) {
      char *key = utf8_clean(t->top[k].token, t->top[k].token_len);
      if (!cJSON_GetObjectItemCaseSensitive(top, key)) /* equal strings: keep the likelier */
        add_num(top, key, logprob_value(t->top[k].logprob));
      free(key);
    }
    cJSON_AddItemToArray(tops, top);
  }
}

/* vLLM's prompt_logprobs: [null, {"<id>": {"logprob", "rank",
 * "decoded_token"}, ...}, ...]: the prompt token, then its alternatives
 * (ranked 1, 2, ...). */
static cJSON *prompt_lp_json(const oai_token_logprob_t *lp, int32_t n) {
  cJSON *arr = must(cJSON_CreateArray());
  for (int32_t i = 0; i < n; i++) {
    const oai_token_logprob_t *t = &lp[i];
    if (t->no_logprob) {
      cJSON_AddItemToArray(arr, must(cJSON_CreateNull()));
      continue;
    }
    cJSON *o = must(cJSON_CreateObject());
    for (int32_t k = -1; k < t->n_top; k++) {
      char key[16];
      snprintf(key, sizeof key, "%d", k < 0 ? t->id : t->top[k].id);
      if (cJSON_GetObjectItemCaseSensitive(o, key)) continue; /* the prompt token among the top */
      cJSON *e = must(cJSON_AddObjectToObject(o, key));
      add_num(e, "logprob", logprob_value(k < 0 ? t->logprob : t->top[k].logprob));
      add_num(e, "rank", k < 0 ? t->rank : k + 1);
      if (k < 0) add_text(e, "decoded_token", t->token, t->token_len);
      else add_text(e, "decoded_token", t->top[k].token, t->top[k].token_len);
    }
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

static cJSON *bytes_json(const char *s, size_t n) {
  cJSON *a = must(cJSON_CreateArray());
  for (size_t i = 0; i < n; i++)
    cJSON_AddItemToArray(a, must(cJSON_CreateNumber((unsigned char)s[i])));
  return a;
}

cJSON *oai__logprob_list(const oai_token_logprob_t *lp, int32_t n) {
  cJSON *content = must(cJSON_CreateArray());
  for (int32_t i = 0; i < n; i++) {
    const oai_token_logprob_t *t = &lp[i];
    cJSON *e = must(cJSON_CreateObject());
    add_text(e, "token", t->token, t->token_len);
    add_num(e, "logprob", logprob_value(t->logprob));
    cJSON_AddItemToObject(e, "bytes", bytes_json(t->token, t->token_len));
    cJSON *tops = must(cJSON_AddArrayToObject(e, "top_logprobs"));
    for (int32_t k = 0; k < t->n_top; k++) {
      cJSON *a = must(cJSON_CreateObject());
      add_text(a, "token", t->top[k].token, t->top[k].token_len);
      add_num(a, "logprob", logprob_value(t->top[k].logprob));
      cJSON_AddItemToObject(a, "bytes", bytes_json(t->top[k].token, t->top[k].token_len));
      cJSON_AddItemToArray(tops, a);
    }
    cJSON_AddItemToArray(content, e);
  }
  return content;
}

/* Chat logprobs: {"content": [{token, logprob, bytes, top_logprobs}]}. */
static void add_chat_logprobs(cJSON *choice, const oai_choice_t *c) {
  if (!c->has_logprobs) {
    must(cJSON_AddNullToObject(choice, "logprobs"));
    return;
  }
  cJSON *lp = must(cJSON_AddObjectToObject(choice, "logprobs"));
  cJSON_AddItemToObject(lp, "content", oai__logprob_list(c->logprobs, c->n_logprobs));
  must(cJSON_AddNullToObject(lp, "refusal"));
}

typedef enum { CHOICE_TEXT, CHOICE_MESSAGE, CHOICE_DELTA } choice_kind_t;

/* message.tool_calls [{"id", "type": "function", "function": {"name",
 * "arguments"}}], or in a chunk (delta) with "index" and, as OpenAI streams
 * them, first the id, type and name with "arguments": "", then the
 * arguments alone. */
static cJSON *tool_calls_json(const oai_choice_t *c, bool delta) {
  cJSON *arr = must(cJSON_CreateArray());
  for (int32_t i = 0; i < c->n_tool_calls; i++) {
    const oai_tool_call_t *t = &c->tool_calls[i];
    cJSON *o = must(cJSON_CreateObject());
    if (delta) add_num(o, "index", c->tool_index + i);
    const bool head = !delta || c->tool_delta != 2, args = !delta || c->tool_delta == 2;
    if (head) {
      add_str_or_null(o, "id", t->id);
      must(cJSON_AddStringToObject(o, "type", "function"));
    }
    cJSON *f = must(cJSON_AddObjectToObject(o, "function"));
    if (head) add_text(f, "name", t->name, strlen(t->name));
    add_text(f, "arguments", args ? t->arguments : "", args ? strlen(t->arguments) : 0);
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

static cJSON *ids_json(const int32_t *ids, int32_t n) {
  cJSON *a = must(cJSON_CreateArray());
  for (int32_t i = 0; i < n; i++) cJSON_AddItemToArray(a, must(cJSON_CreateNumber(ids[i])));
  return a;
}

/* One element of "choices": text (completions), message (chat) or delta
 * (chat chunk; with the role when first). A finished chunk and every final
 * choice carry vLLM's stop_reason. */
static cJSON *choice_json(const oai_choice_t *c, choice_kind_t kind, bool first, bool final) {
  cJSON *ch = must(cJSON_CreateObject());
  add_num(ch, "index", c->index);
  if (kind == CHOICE_TEXT) {
    add_text(ch, "text", c->text, c->text ? c->text_len : 0);
    add_completion_logprobs(ch, c);
    if (c->prompt_lp) cJSON_AddItemToObject(ch, "prompt_logprobs", prompt_lp_json(c->prompt_lp, c->n_prompt_lp));
  } else {
    cJSON *msg = must(cJSON_AddObjectToObject(ch, kind == CHOICE_MESSAGE ? "message" : "delta"));
    if (kind == CHOICE_MESSAGE || first) must(cJSON_AddStringToObject(msg, "role", "assistant"));
    if (kind == CHOICE_MESSAGE && !c->text && c->n_tool_calls) must(cJSON_AddNullToObject(msg, "content"));
    else if (kind == CHOICE_MESSAGE || c->text) add_text(msg, "content", c->text, c->text ? c->text_len : 0);
    if (c->n_tool_calls) cJSON_AddItemToObject(msg, "tool_calls", tool_calls_json(c, kind == CHOICE_DELTA));
    add_chat_logprobs(ch, c);
  }
  add_finish(ch, c, final || c->finish != SCHED_FINISH_NONE);
  if (c->has_token_ids) cJSON_AddItemToObject(ch, "token_ids", ids_json(c->token_ids, c->n_token_ids));
  if (c->prompt_token_ids && kind == CHOICE_TEXT)
    cJSON_AddItemToObject(ch, "prompt_token_ids", ids_json(c->prompt_token_ids, c->n_prompt_token_ids));
  return ch;
}

/* An object with the shared head, choices[n], and usage (NULL: none, or a
 * null "usage" when usage_null). */
static char *write_choices(const oai_meta_t *m, const char *object, const oai_choice_t *choices,
                           int32_t n, choice_kind_t kind, bool first, const oai_usage_t *usage,
                           bool usage_null) {
  cJSON *root = head(m, object);
  cJSON *arr = must(cJSON_AddArrayToObject(root, "choices"));
  for (int32_t i = 0; i < n; i++)
    cJSON_AddItemToArray(arr, choice_json(&choices[i], kind, first, usage != NULL));
  if (kind == CHOICE_MESSAGE && n > 0 && choices[0].prompt_lp) /* chat: the one prompt's, at the top */
    cJSON_AddItemToObject(root, "prompt_logprobs", prompt_lp_json(choices[0].prompt_lp, choices[0].n_prompt_lp));
  if (kind != CHOICE_TEXT && n > 0 && choices[0].prompt_token_ids) /* chat: at the top */
    cJSON_AddItemToObject(root, "prompt_token_ids",
                          ids_json(choices[0].prompt_token_ids, choices[0].n_prompt_token_ids));
  if (usage) add_usage(root, usage);
  else if (usage_null && m->chunk_usage) add_usage(root, m->chunk_usage);
  else if (usage_null) must(cJSON_AddNullToObject(root, "usage"));
  return print(root);
}

char *oai_write_completion(const oai_meta_t *m, const oai_choice_t *choices, int32_t n,
                           const oai_usage_t *usage) {
  return write_choices(m, "text_completion", choices, n, CHOICE_TEXT, false, usage, false);
}

char *oai_write_chat_completion(const oai_meta_t *m, const oai_choice_t *choices, int32_t n,
                                const oai_usage_t *usage) {
  return write_choices(m, "chat.completion", choices, n, CHOICE_MESSAGE, false, usage, false);
}

char *oai_write_completion_chunk(const oai_meta_t *m, const oai_choice_t *c, bool usage_null) {
  return write_choices(m, "text_completion", c, 1, CHOICE_TEXT, false, NULL, usage_null);
}

char *oai_write_chat_chunk(const oai_meta_t *m, const oai_choice_t *c, bool first,
                           bool usage_null) {
  return write_choices(m, "chat.completion.chunk", c, 1, CHOICE_DELTA, first, NULL, usage_null);
}

char *oai_write_usage_chunk(const oai_meta_t *m, bool chat, const oai_usage_t *usage) {
  cJSON *root = head(m, chat ? "chat.completion.chunk" : "text_completion");
  must(cJSON_AddArrayToObject(root, "choices"));
  add_usage(root, usage);
  return print(root);
}

char *oai_write_error(const char *type, const char *message, const char *param, const char *code) {
  cJSON *root = must(cJSON_CreateObject());
  cJSON *err = must(cJSON_AddObjectToObject(root, "error"));
  add_str_or_null(err, "message", message ? message : "");
  add_str_or_null(err, "type", type ? type : "invalid_request_error");
  add_str_or_null(err, "param", param);
  add_str_or_null(err, "code", code);
  return print(root);
}

char *oai_error_body(int status, const char *type, const char *message, const char *param, const char *code) {
  return oai_write_error(type ? type : oai_error_type_for_status(status), message, param, code);
}

const char *oai_error_type_for_status(int status) {
  switch (status) {
  case 401: return "authentication_error";
  case 404: return "not_found_error";
  case 429: return "rate_limit_error";
  case 503: return "service_unavailable";
  default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

static cJSON *model_json(const oai_model_t *md) {
  cJSON *o = must(cJSON_CreateObject());
  add_str_or_null(o, "id", md->id);
  must(cJSON_AddStringToObject(o, "object", "model"));
  add_num(o, "created", (double)md->created);
  add_str_or_null(o, "owned_by", md->owned_by ? md->owned_by : "tram");
  add_str_or_null(o, "root", md->root ? md->root : md->id);
  must(cJSON_AddNullToObject(o, "parent"));
  add_num(o, "max_model_len", md->max_model_len);
  must(cJSON_AddArrayToObject(o, "permission"));
  return o;
}

char *oai_write_models(const oai_model_t *models, int n) {
  cJSON *root = must(cJSON_CreateObject());
  must(cJSON_AddStringToObject(root, "object", "list"));
  cJSON *data = must(cJSON_AddArrayToObject(root, "data"));
  for (int i = 0; i < n; i++) cJSON_AddItemToArray(data, model_json(&models[i]));
  return print(root);
}

char *oai_write_model(const oai_model_t *m) { return print(model_json(m)); }

char *oai_write_tokenize(const int32_t *tokens, int32_t n, int32_t max_model_len,
                         const char *const *token_strs) {
  cJSON *root = must(cJSON_CreateObject());
  add_num(root, "count", n);
  add_num(root, "max_model_len", max_model_len);
  cJSON *arr = must(cJSON_AddArrayToObject(root, "tokens"));
  for (int32_t i = 0; i < n; i++) cJSON_AddItemToArray(arr, must(cJSON_CreateNumber(tokens[i])));
  if (token_strs) {
    cJSON *strs = must(cJSON_AddArrayToObject(root, "token_strs"));
    for (int32_t i = 0; i < n; i++)
      cJSON_AddItemToArray(strs, text_json(token_strs[i], token_strs[i] ? strlen(token_strs[i]) : 0));
  } else {
    must(cJSON_AddNullToObject(root, "token_strs"));
  }
  return print(root);
}

char *oai_write_detokenize(const char *text, size_t len) {
  cJSON *root = must(cJSON_CreateObject());
  add_text(root, "prompt", text, len);
  return print(root);
}

char *oai_write_health(const char *status) {
  cJSON *root = must(cJSON_CreateObject());
  add_str_or_null(root, "status", status);
  return print(root);
}

/* ---- shared with the other writers (oai_json.h) ------------------------------------ */

cJSON *oai__must(cJSON *x) { return must(x); }
cJSON *oai__text(const char *s, size_t n) { return text_json(s, n); }
char *oai__print(cJSON *root) { return print(root); }
