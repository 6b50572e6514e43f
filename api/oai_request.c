/* api/oai_request.c — OpenAI request parsing and validation (see
 * oai_request.h for the accepted values). */
#include "api/oai_request.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/oai_fields.h"

oai_limits_t oai_limits_default(void) {
  return (oai_limits_t){
      .vocab_size = 0,
      .max_n = 16,
      .max_prompts = 64,
      .max_stop = 16,
      .max_stop_len = 512,
      .max_stop_token_ids = 64,
      .max_logit_bias = 1024,
      .max_messages = 4096,
  };
}

samp_params_t oai_samp_defaults(void) {
  /* samp_params_default()'s "change nothing" values, but OpenAI's default
   * temperature: an API request without one samples at 1. */
  return (samp_params_t){
      .temperature = 1.0f,
      .top_k = 0,
      .top_p = 1.0f,
      .min_p = 0.0f,
      .repetition_penalty = 1.0f,
      .presence_penalty = 0.0f,
      .frequency_penalty = 0.0f,
      .seed = 0,
      .has_seed = 0,
      .logit_bias = NULL,
      .n_logit_bias = 0,
      .logprobs = 0,
      .top_logprobs = 0,
  };
}

/* ---- fields both endpoints share ------------------------------------------------ */

static int parse_logit_bias(oai__ctx_t *c, const cJSON *root, samp_params_t *sp) {
  const cJSON *x = oai__get(root, "logit_bias");
  if (!x) return 0;
  if (!cJSON_IsObject(x))
    return oai__fail(c, "invalid_type", "logit_bias", "logit_bias must be an object of token id -> bias, got %s",
                     oai__type_name(x));
  int count = cJSON_GetArraySize(x);
  if (count > c->lim->max_logit_bias)
    return oai__fail(c, "invalid_value", "logit_bias", "logit_bias has %d entries; at most %d are accepted",
                     count, c->lim->max_logit_bias);
  samp_logit_bias_t *lb = arena_array(c->arena, (size_t)(count ? count : 1), sizeof *lb);
  OAI_NEED(c, lb);
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, x) {
    char param[64];
    snprintf(param, sizeof param, "logit_bias.%.40s", e->string);
    const char *k = e->string;
    size_t klen = strlen(k);
    long long id = -1;
    bool digits = klen > 0 && klen <= 10;
    for (size_t j = 0; digits && j < klen; j++) digits = k[j] >= '0' && k[j] <= '9';
    if (digits) id = strtoll(k, NULL, 10);
    long long hi = c->lim->vocab_size > 0 ? c->lim->vocab_size - 1 : INT32_MAX;
    if (!digits || id > hi)
      return oai__fail(c, "invalid_value", param, "logit_bias keys must be token ids in [0, %lld], got \"%.40s\"",
                       hi, k);
    if (!cJSON_IsNumber(e))
      return oai__fail(c, "invalid_type", param, "%s must be a number, got %s", param, oai__type_name(e));
    if (!(e->valuedouble >= -SAMP_MAX_LOGIT_BIAS && e->valuedouble <= SAMP_MAX_LOGIT_BIAS))
      return oai__fail(c, "invalid_value", param, "%s must be in [%d, %d], got %g", param, -SAMP_MAX_LOGIT_BIAS,
                       SAMP_MAX_LOGIT_BIAS, e->valuedouble);
    lb[i].token = (int32_t)id;
    lb[i].bias = (float)e->valuedouble;
    i++;
  }
  sp->logit_bias = lb;
  sp->n_logit_bias = count;
  return 0;
}

/* Rejects a field we do not implement when it asks for something. */
static int refuse(oai__ctx_t *c, const cJSON *root, const char *key, const char *why) {
  const cJSON *x = oai__get(root, key);
  if (!x) return 0;
  if ((cJSON_IsArray(x) || cJSON_IsObject(x)) && cJSON_GetArraySize(x) == 0) return 0;
  if (cJSON_IsString(x) && x->valuestring[0] == '\0') return 0;
  char name[160];
  if (c->prefix) snprintf(name, sizeof name, "%s.%s", c->prefix, key);
  else snprintf(name, sizeof name, "%s", key);
  return oai__fail(c, "unsupported_parameter", name, "%s is not supported: %s", name, why);
}

/* Sampling, limits, stop conditions and output options. */
static int parse_gen(oai__ctx_t *c, const cJSON *root, bool chat, oai_params_t *g) {
  memset(g, 0, sizeof *g);
  samp_params_t *sp = &g->samp;
  *sp = oai_samp_defaults();
  g->n = 1;
  g->max_tokens = chat ? -1 : 16;
  int64_t v;
  bool given;
  unsigned fields_given; /* bit i: samp_fields[i] */
  /* the fields `tram generate` reads too: sampling, seed, max_tokens, n, stop, stop_token_ids, ignore_eos */
  if (oai__read_gen_fields(c, root, chat, g, &fields_given)) return -EINVAL;
  samp_gen_apply(c->lim->gen, fields_given, sp); /* the model's defaults for the others */
  if (parse_logit_bias(c, root, sp)) return -EINVAL;
  if (chat) {
    if (oai__get_int(c, root, "max_completion_tokens", 1, INT32_MAX, &v, &given)) return -EINVAL;
    if (given) g->max_tokens = (int32_t)v; /* the newer name wins */
  }
  if (oai__get_int(c, root, "best_of", 1, INT32_MAX, &v, &given)) return -EINVAL;
  if (given && v != g->n)
    return oai__fail(c, "unsupported_parameter", "best_of", "best_of must equal n (%d) if given; got %lld",
                     g->n, (long long)v);
  if (oai__get_bool(c, root, "stream", &g->stream, NULL)) return -EINVAL;
  const cJSON *so = oai__get(root, "stream_options");
  if (so) {
    if (!g->stream)
      return oai__fail(c, "invalid_value", "stream_options",
                       "stream_options is only allowed when stream is true");
    if (!cJSON_IsObject(so))
      return oai__fail(c, "invalid_type", "stream_options", "stream_options must be an object, got %s",
                       oai__type_name(so));
    c->prefix = "stream_options";
    int r = oai__get_bool(c, so, "include_usage", &g->include_usage, NULL);
    c->prefix = NULL;
    if (r) return -EINVAL;
  }

  if (chat) {
    bool lp = false, top_given;
    if (oai__get_bool(c, root, "logprobs", &lp, NULL)) return -EINVAL;
    if (oai__get_int(c, root, "top_logprobs", 0, SAMP_MAX_TOP_LOGPROBS, &v, &top_given)) return -EINVAL;
    if (top_given && !lp)
      return oai__fail(c, "invalid_value", "top_logprobs", "top_logprobs requires logprobs to be true");
    sp->logprobs = lp;
    sp->top_logprobs = top_given ? (int32_t)v : 0;
    if (refuse(c, root, "functions", "the deprecated functions are not supported: use tools")) return -EINVAL;
  } else {
    if (oai__get_int(c, root, "logprobs", 0, SAMP_MAX_TOP_LOGPROBS, &v, &given)) return -EINVAL;
    if (given) {
      sp->logprobs = 1;
      sp->top_logprobs = (int32_t)v;
    }
    if (oai__get_bool(c, root, "echo", &g->echo, NULL)) return -EINVAL;
    if (g->max_tokens == 0 && !g->echo)
      return oai__fail(c, "invalid_value", "max_tokens", "max_tokens must be at least 1 (0 only with echo: "
                                                         "scoring the prompt)");
    if (refuse(c, root, "suffix", "insertion (suffix) is not implemented")) return -EINVAL;
  }
  return oai__parse_extras(c, root, chat, g);
}

static int parse_model(oai__ctx_t *c, const cJSON *root, const char **model) {
  *model = NULL;
  return oai__get_string(c, root, "model", model, NULL, NULL);
}

/* ---- /v1/completions ------------------------------------------------------------- */

int oai_parse_completion(const char *body, size_t len, const oai_limits_t *lim,
                         arena_t *arena, oai_completion_req_t *out, oai_error_t *err) {
  oai__ctx_t c;
  oai_limits_t dflt;
  oai__ctx_init(&c, lim, &dflt, arena, err);
  memset(out, 0, sizeof *out);
  cJSON *root;
  if (oai__parse_object(&c, body, len, &root)) return oai__end(&c, -EINVAL);
  int r = -EINVAL;
  if (!parse_model(&c, root, &out->model) && !oai__prompts(&c, root, "prompt", c.lim->max_prompts, &out->prompts, &out->n_prompts) &&
      !parse_gen(&c, root, false, &out->params))
    r = 0;
  cJSON_Delete(root);
  return oai__end(&c, r);
}

/* ---- /v1/chat/completions ---------------------------------------------------------- */

/* content: a string, an array of {"type": "text", "text": ...} parts (joined
 * with "\n"), or null/absent (assistant only). */
static int parse_content(oai__ctx_t *c, const cJSON *m, int i, bool may_be_empty, oai_message_t *out) {
  char param[64];
  snprintf(param, sizeof param, "messages[%d].content", i);
  const cJSON *x = oai__get(m, "content");
  if (!x) {
    if (!may_be_empty) return oai__fail(c, "missing_required_parameter", param, "%s is required", param);
    out->content = "";
    return 0;
  }
  if (cJSON_IsString(x)) {
    out->content_len = strlen(x->valuestring);
    OAI_NEED(c, out->content = arena_strndup(c->arena, x->valuestring, out->content_len));
    return 0;
  }
  if (!cJSON_IsArray(x))
    return oai__fail(c, "invalid_type", param, "%s must be a string or an array of text parts, got %s", param,
                     oai__type_name(x));
  size_t total = 0;
  int j = 0;
  const cJSON *part;
  cJSON_ArrayForEach(part, x) { /* check every part, measure the text */
    char pp[96];
    snprintf(pp, sizeof pp, "%s[%d]", param, j);
    if (!cJSON_IsObject(part))
      return oai__fail(c, "invalid_type", pp, "%s must be an object, got %s", pp, oai__type_name(part));
    const cJSON *type = oai__get(part, "type");
    const cJSON *text = oai__get(part, "text");
    if (!type || !cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0) {
      snprintf(pp + strlen(pp), sizeof pp - strlen(pp), ".type");
      return oai__fail(c, type && cJSON_IsString(type) ? "unsupported_value" : "invalid_type", pp,
                       "%s: only text content parts are supported, got %s%.40s%s", pp,
                       type && cJSON_IsString(type) ? "\"" : "",
                       type && cJSON_IsString(type) ? type->valuestring : oai__type_name(type),
                       type && cJSON_IsString(type) ? "\"" : "");
    }
    if (!text || !cJSON_IsString(text)) {
      snprintf(pp + strlen(pp), sizeof pp - strlen(pp), ".text");
      return oai__fail(c, "invalid_type", pp, "%s must be a string, got %s", pp, oai__type_name(text));
    }
    total += strlen(text->valuestring) + (j ? 1 : 0);
    j++;
  }
  char *buf = arena_alloc(c->arena, total + 1);
  OAI_NEED(c, buf);
  size_t o = 0;
  j = 0;
  cJSON_ArrayForEach(part, x) {
    const char *t = oai__get(part, "text")->valuestring;
    size_t n = strlen(t);
    if (j++) buf[o++] = '\n';
    memcpy(buf + o, t, n);
    o += n;
  }
  buf[o] = '\0';
  out->content = buf;
  out->content_len = o;
  return 0;
}

static int parse_messages(oai__ctx_t *c, const cJSON *root, oai_message_t **msgs, int32_t *n_msgs) {
  const cJSON *x = oai__get(root, "messages");
  if (!x) return oai__fail(c, "missing_required_parameter", "messages", "messages is required");
  if (!cJSON_IsArray(x))
    return oai__fail(c, "invalid_type", "messages", "messages must be an array, got %s", oai__type_name(x));
  int count = cJSON_GetArraySize(x);
  if (count == 0) return oai__fail(c, "invalid_value", "messages", "messages must not be empty");
  if (count > c->lim->max_messages)
    return oai__fail(c, "invalid_value", "messages", "messages has %d entries; at most %d are accepted", count,
                     c->lim->max_messages);
  oai_message_t *out = arena_array(c->arena, (size_t)count, sizeof *out);
  OAI_NEED(c, out);
  int i = 0;
  const cJSON *m;
  cJSON_ArrayForEach(m, x) {
    char param[64];
    snprintf(param, sizeof param, "messages[%d]", i);
    if (!cJSON_IsObject(m))
      return oai__fail(c, "invalid_type", param, "%s must be an object, got %s", param, oai__type_name(m));
    snprintf(param, sizeof param, "messages[%d].role", i);
    const cJSON *role = oai__get(m, "role");
    if (!role) return oai__fail(c, "missing_required_parameter", param, "%s is required", param);
    if (!cJSON_IsString(role))
      return oai__fail(c, "invalid_type", param, "%s must be a string, got %s", param, oai__type_name(role));
    const char *r = role->valuestring;
    if (strcmp(r, "system") == 0 || strcmp(r, "developer") == 0) out[i].role = "system";
    else if (strcmp(r, "user") == 0) out[i].role = "user";
    else if (strcmp(r, "assistant") == 0) out[i].role = "assistant";
    else if (strcmp(r, "tool") == 0) out[i].role = "tool";
    else if (strcmp(r, "function") == 0)
      return oai__fail(c, "unsupported_value", param, "%s \"function\" is deprecated and not supported: use \"tool\"",
                       param);
    else
      return oai__fail(c, "invalid_value", param,
                       "%s must be \"system\", \"developer\", \"user\", \"assistant\" or \"tool\", got \"%.40s\"",
                       param, r);
    bool assistant = strcmp(out[i].role, "assistant") == 0;
    snprintf(param, sizeof param, "messages[%d]", i);
    c->prefix = param;
    bool bad = oai__parse_message_tools(c, m, i, &out[i]) ||
               parse_content(c, m, i, assistant, &out[i]) ||
               oai__get_string(c, m, "name", &out[i].name, NULL, NULL);
    c->prefix = NULL;
    if (bad) return -EINVAL;
    i++;
  }
  *msgs = out;
  *n_msgs = count;
  return 0;
}

/* vLLM's continue_final_message: a boolean, not with add_generation_prompt. */
static int parse_continue(oai__ctx_t *c, const cJSON *root, bool add_generation_prompt, bool *out) {
  if (oai__get_bool(c, root, "continue_final_message", out, NULL)) return -EINVAL;
  if (*out && add_generation_prompt)
    return oai__fail(c, "invalid_value", "continue_final_message",
                     "continue_final_message needs add_generation_prompt false (both were true)");
  return 0;
}

int oai_parse_chat(const char *body, size_t len, const oai_limits_t *lim, arena_t *arena,
                   oai_chat_req_t *out, oai_error_t *err) {
  oai__ctx_t c;
  oai_limits_t dflt;
  oai__ctx_init(&c, lim, &dflt, arena, err);
  memset(out, 0, sizeof *out);
  out->add_generation_prompt = true;
  cJSON *root;
  if (oai__parse_object(&c, body, len, &root)) return oai__end(&c, -EINVAL);
  int r = -EINVAL;
  if (!parse_model(&c, root, &out->model) && !parse_messages(&c, root, &out->messages, &out->n_messages) &&
      !oai__get_bool(&c, root, "add_generation_prompt", &out->add_generation_prompt, NULL) &&
      !parse_continue(&c, root, out->add_generation_prompt, &out->continue_final_message) &&
      !oai__parse_tools(&c, root, out) && !parse_gen(&c, root, true, &out->params) &&
      !oai__tool_grammar(&c, oai__get(root, "tools"), out) && !oai__parse_reasoning(&c, root, out))
    r = 0;
  cJSON_Delete(root);
  return oai__end(&c, r);
}

/* ---- /tokenize and /detokenize (vLLM) ------------------------------------------------ */

int oai_parse_tokenize(const char *body, size_t len, const oai_limits_t *lim,
                       arena_t *arena, oai_tokenize_req_t *out, oai_error_t *err) {
  oai__ctx_t c;
  oai_limits_t dflt;
  oai__ctx_init(&c, lim, &dflt, arena, err);
  memset(out, 0, sizeof *out);
  out->add_generation_prompt = true;
  cJSON *root;
  if (oai__parse_object(&c, body, len, &root)) return oai__end(&c, -EINVAL);
  int r = parse_model(&c, root, &out->model);
  bool has_prompt = oai__get(root, "prompt") != NULL, has_messages = oai__get(root, "messages") != NULL;
  if (!r && has_prompt == has_messages)
    r = oai__fail(&c, has_prompt ? "invalid_value" : "missing_required_parameter", "prompt",
                  "give either prompt (a string) or messages, not %s", has_prompt ? "both" : "neither");
  out->add_special_tokens = has_prompt;
  if (!r && has_prompt) r = oai__get_string(&c, root, "prompt", &out->prompt, &out->prompt_len, NULL);
  if (!r && has_messages) r = parse_messages(&c, root, &out->messages, &out->n_messages);
  if (!r) r = oai__get_bool(&c, root, "add_special_tokens", &out->add_special_tokens, NULL);
  if (!r) r = oai__get_bool(&c, root, "add_generation_prompt", &out->add_generation_prompt, NULL);
  if (!r) r = parse_continue(&c, root, out->add_generation_prompt, &out->continue_final_message);
  if (!r && has_prompt && out->continue_final_message)
    r = oai__fail(&c, "invalid_value", "continue_final_message", "continue_final_message needs messages");
  if (!r) r = oai__get_bool(&c, root, "return_token_strs", &out->return_token_strs, NULL);
  if (!r && has_messages) {
    oai_chat_req_t chat = {0};
    r = oai__parse_tools(&c, root, &chat);
    out->tools = chat.tools;
    if (!r) r = oai__parse_template_vars(&c, root, &out->template_kwargs, &out->reasoning_effort);
  }
  cJSON_Delete(root);
  return oai__end(&c, r ? -EINVAL : 0);
}

int oai_parse_detokenize(const char *body, size_t len, const oai_limits_t *lim,
                         arena_t *arena, oai_detokenize_req_t *out, oai_error_t *err) {
  oai__ctx_t c;
  oai_limits_t dflt;
  oai__ctx_init(&c, lim, &dflt, arena, err);
  memset(out, 0, sizeof *out);
  cJSON *root;
  if (oai__parse_object(&c, body, len, &root)) return oai__end(&c, -EINVAL);
  int r = parse_model(&c, root, &out->model);
  const cJSON *t = oai__get(root, "tokens");
  if (!r && !t) r = oai__fail(&c, "missing_required_parameter", "tokens", "tokens is required");
  if (!r && cJSON_IsArray(t) && cJSON_GetArraySize(t) == 0) {
    out->tokens = arena_alloc(arena, 0);
  } else if (!r) {
    int32_t *ids;
    r = oai__token_array(&c, t, "tokens", &ids, &out->n_tokens);
    out->tokens = ids;
  }
  cJSON_Delete(root);
  return oai__end(&c, r ? -EINVAL : 0);
}
