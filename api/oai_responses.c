/* api/oai_responses.c — the Responses API's request and JSON (see
 * oai_responses.h). */
#include "api/oai_responses.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "api/oai_fields.h"
#include "api/oai_json.h"

/* ---- the request ------------------------------------------------------------------ */

/* Fields of the Responses API tram does not implement: refused when they ask
 * for something (null, false, "", [] and {} ask nothing). */
static const char *const REFUSED[] = {
    "previous_response_id", "conversation", "reasoning", "background", "prompt",
    "max_tool_calls", "service_tier", "prompt_cache_key", "safety_identifier", "stream_options",
};

static int refuse_fields(oai__ctx_t *c, const cJSON *root) {
  for (size_t i = 0; i < sizeof REFUSED / sizeof *REFUSED; i++) {
    const cJSON *x = oai__get(root, REFUSED[i]);
    if (!x || cJSON_IsFalse(x) || ((cJSON_IsArray(x) || cJSON_IsObject(x)) && !cJSON_GetArraySize(x)) ||
        (cJSON_IsString(x) && !x->valuestring[0]))
      continue;
    return oai__fail(c, "unsupported_parameter", REFUSED[i], "%s is not supported by this server's /v1/responses",
                     REFUSED[i]);
  }
  const cJSON *store = oai__get(root, "store");
  if (store && !cJSON_IsFalse(store))
    return oai__fail(c, "unsupported_parameter", "store", "store: responses are not stored (stateless); send "
                                                         "\"store\": false or leave it out");
  const cJSON *md = oai__get(root, "metadata");
  if (md && !(cJSON_IsObject(md) && !cJSON_GetArraySize(md)))
    return oai__fail(c, "unsupported_parameter", "metadata", "metadata is not supported (nothing is stored)");
  const cJSON *tr = oai__get(root, "truncation");
  if (tr && !(cJSON_IsString(tr) && strcmp(tr->valuestring, "disabled") == 0))
    return oai__fail(c, "unsupported_parameter", "truncation", "truncation: only \"disabled\" is supported");
  const cJSON *text = oai__get(root, "text");
  if (text && !cJSON_IsObject(text))
    return oai__fail(c, "invalid_type", "text", "text must be an object, got %s", oai__type_name(text));
  const cJSON *v = oai__get(text, "verbosity");
  if (v) return oai__fail(c, "unsupported_parameter", "text.verbosity", "text.verbosity is not supported");
  return 0;
}

/* One input item's content: a string or input_text/output_text parts,
 * joined with "\n". */
static int item_content(oai__ctx_t *c, const cJSON *x, const char *param, oai_message_t *m) {
  if (cJSON_IsString(x)) {
    m->content_len = strlen(x->valuestring);
    OAI_NEED(c, m->content = arena_strndup(c->arena, x->valuestring, m->content_len));
    return 0;
  }
  if (!cJSON_IsArray(x))
    return oai__fail(c, "invalid_type", param, "%s must be a string or an array of input_text parts", param);
  buf_t b = {0};
  int j = 0;
  const cJSON *part;
  cJSON_ArrayForEach(part, x) {
    char pp[96];
    snprintf(pp, sizeof pp, "%s[%d].type", param, j);
    const cJSON *t = cJSON_IsObject(part) ? oai__get(part, "type") : NULL;
    const cJSON *tx = cJSON_IsObject(part) ? oai__get(part, "text") : NULL;
    if (!t || !cJSON_IsString(t) || (strcmp(t->valuestring, "input_text") && strcmp(t->valuestring, "output_text")) ||
        !tx || !cJSON_IsString(tx)) {
      buf_free(&b);
      return oai__fail(c, "unsupported_value", pp, "%s: only input_text and output_text parts with text are supported",
                       pp);
    }
    if (j++) buf_putc(&b, '\n');
    buf_puts(&b, tx->valuestring);
  }
  m->content = arena_strndup(c->arena, b.p ? b.p : "", b.len);
  m->content_len = b.len;
  buf_free(&b);
  OAI_NEED(c, m->content);
  return 0;
}

/* include: of what OpenAI can add, tram has "message.output_text.logprobs"
 * (each output_text part's logprobs, with top_logprobs alternatives);
 * top_logprobs (0..20) needs it. */
static int parse_include(oai__ctx_t *c, const cJSON *root, samp_params_t *sp) {
  const cJSON *inc = oai__get(root, "include");
  if (inc && !cJSON_IsArray(inc))
    return oai__fail(c, "invalid_type", "include", "include must be an array of strings, got %s", oai__type_name(inc));
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, inc) {
    char param[32];
    snprintf(param, sizeof param, "include[%d]", i++);
    if (!cJSON_IsString(e) || strcmp(e->valuestring, "message.output_text.logprobs") != 0)
      return oai__fail(c, "unsupported_value", param, "%s: only \"message.output_text.logprobs\" is supported", param);
    sp->logprobs = 1;
  }
  int64_t v;
  bool given;
  if (oai__get_int(c, root, "top_logprobs", 0, SAMP_MAX_TOP_LOGPROBS, &v, &given)) return -EINVAL;
  if (given && !sp->logprobs)
    return oai__fail(c, "invalid_value", "top_logprobs",
                     "top_logprobs needs include [\"message.output_text.logprobs\"] (the logprobs it adds to)");
  if (given) sp->top_logprobs = (int32_t)v;
  return 0;
}

static int parse_input(oai__ctx_t *c, const cJSON *root, oai_responses_req_t *out) {
  const cJSON *in = oai__get(root, "input");
  if (!in) return oai__fail(c, "missing_required_parameter", "input", "input is required");
  const int n_items = cJSON_IsString(in) ? 1 : cJSON_IsArray(in) ? cJSON_GetArraySize(in) : -1;
  if (n_items < 0) return oai__fail(c, "invalid_type", "input", "input must be a string or an array of items");
  if (n_items == 0 || n_items > c->lim->max_messages)
    return oai__fail(c, "invalid_value", "input", "input must have 1 to %d items", c->lim->max_messages);
  const int n = n_items + (out->instructions ? 1 : 0);
  oai_message_t *msgs = arena_array(c->arena, (size_t)n, sizeof *msgs);
  OAI_NEED(c, msgs);
  memset(msgs, 0, (size_t)n * sizeof *msgs);
  int k = 0;
  if (out->instructions) {
    msgs[k].role = "system";
    msgs[k].content = out->instructions;
    msgs[k++].content_len = strlen(out->instructions);
  }
  if (cJSON_IsString(in)) {
    msgs[k].role = "user";
    if (item_content(c, in, "input", &msgs[k])) return -EINVAL;
  } else {
    int i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, in) {
      char param[64];
      snprintf(param, sizeof param, "input[%d]", i++);
      const cJSON *type = cJSON_IsObject(item) ? oai__get(item, "type") : NULL;
      const cJSON *role = cJSON_IsObject(item) ? oai__get(item, "role") : NULL;
      const char *ty = type && cJSON_IsString(type) ? type->valuestring : NULL;
      if (ty && (!strcmp(ty, "function_call") || !strcmp(ty, "function_call_output"))) {
        if (oai__resp_call_item(c, item, ty, param, &msgs[k++])) return -EINVAL;
        continue;
      }
      if (!cJSON_IsObject(item) || (type && !(ty && !strcmp(ty, "message"))))
        return oai__fail(c, "unsupported_value", param, "%s: only message, function_call and function_call_output "
                                                        "items are supported", param);
      const char *r = role && cJSON_IsString(role) ? role->valuestring : "";
      if (!strcmp(r, "system") || !strcmp(r, "developer")) msgs[k].role = "system";
      else if (!strcmp(r, "user") || !strcmp(r, "assistant")) msgs[k].role = !strcmp(r, "user") ? "user" : "assistant";
      else
        return oai__fail(c, "invalid_value", param, "%s.role must be \"user\", \"assistant\", \"system\" or "
                                                    "\"developer\"", param);
      char cp[80];
      snprintf(cp, sizeof cp, "%s.content", param);
      const cJSON *content = oai__get(item, "content");
      if (!content) return oai__fail(c, "missing_required_parameter", cp, "%s is required", cp);
      if (item_content(c, content, cp, &msgs[k])) return -EINVAL;
      k++;
    }
  }
  out->chat.messages = msgs;
  out->chat.n_messages = n;
  return 0;
}

int oai_parse_responses(const char *body, size_t len, const oai_limits_t *lim, arena_t *arena,
                        oai_responses_req_t *out, oai_error_t *err) {
  oai__ctx_t c = {.arena = arena, .err = err};
  const oai_limits_t dflt = oai_limits_default();
  c.lim = lim ? lim : &dflt;
  memset(err, 0, sizeof *err);
  memset(out, 0, sizeof *out);
  oai_params_t *g = &out->chat.params;
  g->samp = oai_samp_defaults();
  samp_gen_apply(c.lim->gen, 0, &g->samp); /* the model's defaults; the request's fields below win */
  g->n = 1;
  g->max_tokens = -1;
  g->prompt_logprobs = -1;
  g->add_special_tokens = false;
  out->max_output_tokens = -1;
  out->chat.add_generation_prompt = true;
  out->chat.parallel_tool_calls = true;
  oai__begin(&c);
  cJSON *root;
  if (oai__parse_object(&c, body, len, &root)) return oai__end(&c, -EINVAL);
  int64_t v;
  bool given;
  int r = refuse_fields(&c, root);
  if (!r) r = oai__get_string(&c, root, "model", &out->chat.model, NULL, NULL);
  if (!r) r = oai__get_string(&c, root, "instructions", &out->instructions, NULL, NULL);
  if (!r) r = oai__get_float(&c, root, "temperature", 0, 2, false, false, &g->samp.temperature, NULL);
  if (!r) r = oai__get_float(&c, root, "top_p", 0, 1, true, false, &g->samp.top_p, NULL);
  if (!r) r = oai__get_int(&c, root, "max_output_tokens", 1, INT32_MAX, &v, &given);
  if (!r && given) out->max_output_tokens = g->max_tokens = (int32_t)v;
  if (!r) r = oai__get_bool(&c, root, "stream", &g->stream, NULL);
  if (!r) r = oai__get_bool(&c, root, "parallel_tool_calls", &out->chat.parallel_tool_calls, NULL);
  if (!r) {
    const char *user;
    r = oai__get_string(&c, root, "user", &user, NULL, NULL);
  }
  if (!r) r = parse_include(&c, root, &g->samp);
  if (!r) r = parse_input(&c, root, out);
  if (!r) r = oai__resp_tools(&c, root, out);
  const cJSON *fmt = oai__get(oai__get(root, "text"), "format");
  if (!r && fmt) r = oai__parse_text_format(&c, fmt, g);
  cJSON_Delete(root);
  return oai__end(&c, r ? -EINVAL : 0);
}

/* ---- the JSON ------------------------------------------------------------------------ */

static void add_str(cJSON *o, const char *key, const char *s) {
  if (s) cJSON_AddItemToObject(o, key, oai__text(s, strlen(s)));
  else oai__must(cJSON_AddNullToObject(o, key));
}

/* The logprobs of r's text (include message.output_text.logprobs), or []. */
static cJSON *logprobs_json(const oai_resp_info_t *r, bool done) {
  return done && r->lp ? oai__logprob_list(r->lp, r->n_lp) : oai__must(cJSON_CreateArray());
}

static cJSON *part_json(const oai_resp_info_t *r, bool done) {
  cJSON *p = oai__must(cJSON_CreateObject());
  oai__must(cJSON_AddStringToObject(p, "type", "output_text"));
  const bool text = done && r->text;
  cJSON_AddItemToObject(p, "text", oai__text(text ? r->text : "", text ? r->text_len : 0));
  oai__must(cJSON_AddArrayToObject(p, "annotations"));
  cJSON_AddItemToObject(p, "logprobs", logprobs_json(r, done));
  return p;
}

/* The output message; done: with its text and final status. */
static cJSON *item_json(const oai_resp_info_t *r, bool done) {
  cJSON *m = oai__must(cJSON_CreateObject());
  add_str(m, "id", r->item_id);
  oai__must(cJSON_AddStringToObject(m, "type", "message"));
  oai__must(cJSON_AddStringToObject(m, "status", !done ? "in_progress" : r->incomplete_reason ? "incomplete" : "completed"));
  oai__must(cJSON_AddStringToObject(m, "role", "assistant"));
  cJSON *content = oai__must(cJSON_AddArrayToObject(m, "content"));
  if (done) cJSON_AddItemToArray(content, part_json(r, true));
  return m;
}

static cJSON *response_json(const oai_resp_info_t *r) {
  cJSON *o = oai__must(cJSON_CreateObject());
  add_str(o, "id", r->id);
  oai__must(cJSON_AddStringToObject(o, "object", "response"));
  oai__must(cJSON_AddNumberToObject(o, "created_at", (double)r->created_at));
  add_str(o, "status", r->status);
  oai__must(cJSON_AddNullToObject(o, "error"));
  if (r->incomplete_reason) {
    cJSON *d = oai__must(cJSON_AddObjectToObject(o, "incomplete_details"));
    oai__must(cJSON_AddStringToObject(d, "reason", r->incomplete_reason));
  } else {
    oai__must(cJSON_AddNullToObject(o, "incomplete_details"));
  }
  add_str(o, "instructions", r->instructions);
  if (r->max_output_tokens >= 0) oai__must(cJSON_AddNumberToObject(o, "max_output_tokens", r->max_output_tokens));
  else oai__must(cJSON_AddNullToObject(o, "max_output_tokens"));
  add_str(o, "model", r->model);
  cJSON *out = oai__must(cJSON_AddArrayToObject(o, "output"));
  if (r->text) cJSON_AddItemToArray(out, item_json(r, true));
  for (int32_t k = 0; k < r->n_calls; k++) cJSON_AddItemToArray(out, oai__resp_call_json(&r->calls[k], true));
  oai__must(cJSON_AddBoolToObject(o, "parallel_tool_calls", 1));
  oai__must(cJSON_AddNumberToObject(o, "temperature", r->temperature));
  oai__must(cJSON_AddNumberToObject(o, "top_p", r->top_p));
  oai__must(cJSON_AddStringToObject(o, "tool_choice", "auto"));
  oai__must(cJSON_AddArrayToObject(o, "tools"));
  cJSON *fmt = oai__must(cJSON_AddObjectToObject(oai__must(cJSON_AddObjectToObject(o, "text")), "format"));
  oai__must(cJSON_AddStringToObject(fmt, "type", r->format ? r->format : "text"));
  oai__must(cJSON_AddStringToObject(o, "truncation", "disabled"));
  oai__must(cJSON_AddBoolToObject(o, "store", 0));
  oai__must(cJSON_AddObjectToObject(o, "metadata"));
  if (r->has_usage) {
    cJSON *u = oai__must(cJSON_AddObjectToObject(o, "usage"));
    oai__must(cJSON_AddNumberToObject(u, "input_tokens", r->input_tokens));
    cJSON *d = oai__must(cJSON_AddObjectToObject(u, "input_tokens_details"));
    oai__must(cJSON_AddNumberToObject(d, "cached_tokens", r->cached_tokens));
    oai__must(cJSON_AddNumberToObject(u, "output_tokens", r->output_tokens));
    d = oai__must(cJSON_AddObjectToObject(u, "output_tokens_details"));
    oai__must(cJSON_AddNumberToObject(d, "reasoning_tokens", 0));
    oai__must(cJSON_AddNumberToObject(u, "total_tokens", (double)r->input_tokens + r->output_tokens));
  } else {
    oai__must(cJSON_AddNullToObject(o, "usage"));
  }
  return o;
}

char *oai_write_response(const oai_resp_info_t *r) { return oai__print(response_json(r)); }

char *oai_write_response_event(const char *type, int64_t seq, const oai_resp_info_t *r, const char *text,
                               size_t len) {
  cJSON *e = oai__must(cJSON_CreateObject());
  oai__must(cJSON_AddStringToObject(e, "type", type));
  oai__must(cJSON_AddNumberToObject(e, "sequence_number", (double)seq));
  const char *kind = type + strlen("response.");
  if (!strcmp(kind, "created") || !strcmp(kind, "in_progress") || !strcmp(kind, "completed") ||
      !strcmp(kind, "incomplete")) {
    cJSON_AddItemToObject(e, "response", response_json(r));
    return oai__print(e);
  }
  oai__must(cJSON_AddNumberToObject(e, "output_index", 0));
  if (!strncmp(kind, "output_item.", 12)) {
    cJSON_AddItemToObject(e, "item", item_json(r, !strcmp(kind, "output_item.done")));
    return oai__print(e);
  }
  add_str(e, "item_id", r->item_id);
  oai__must(cJSON_AddNumberToObject(e, "content_index", 0));
  if (!strncmp(kind, "content_part.", 13)) {
    cJSON_AddItemToObject(e, "part", part_json(r, !strcmp(kind, "content_part.done")));
  } else if (!strcmp(kind, "output_text.delta")) {
    cJSON_AddItemToObject(e, "delta", oai__text(text, len));
    cJSON_AddItemToObject(e, "logprobs", r->delta_lp ? oai__logprob_list(r->delta_lp, r->n_delta_lp)
                                                     : oai__must(cJSON_CreateArray()));
  } else {
    cJSON_AddItemToObject(e, "text", oai__text(r->text ? r->text : "", r->text ? r->text_len : 0));
    cJSON_AddItemToObject(e, "logprobs", logprobs_json(r, true));
  }
  return oai__print(e);
}
