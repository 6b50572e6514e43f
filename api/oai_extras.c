/* api/oai_extras.c — the request fields beyond OpenAI's core that tram
 * reads: vLLM's extensions it implements (min_tokens,
 * include_stop_str_in_output, truncate_prompt_tokens, skip_special_tokens,
 * add_special_tokens, return_token_ids, stream_options.continuous_usage_stats) and the table
 * of fields OpenAI or vLLM define that tram does not implement, each refused
 * with a 400 naming it as soon as it asks for something (a value other than
 * the one that changes nothing). Everything tram reads either takes effect or
 * is refused here; docs/api.md lists the same fields. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/oai_fields.h"

typedef enum refuse_when {
  REFUSE_GIVEN, /* any value but null, "", [] or {} */
  REFUSE_TRUE,  /* true (false changes nothing) */
  REFUSE_FALSE, /* false (true, the default, changes nothing) */
  REFUSE_NE,    /* a number other than the default `dflt` */
} refuse_when_t;

typedef struct refused {
  const char *name;
  refuse_when_t when;
  double dflt;  /* REFUSE_NE */
  int where;    /* 1: completions, 2: chat, 3: both */
  const char *why;
} refused_t;

#define BOTH 3
#define CMPL 1
#define CHAT 2

static const refused_t REFUSED[] = {
    {"use_beam_search", REFUSE_TRUE, 0, BOTH, "beam search is not implemented"},
    {"length_penalty", REFUSE_NE, 1, BOTH, "it applies to beam search, which is not implemented"},
    {"return_tokens_as_token_ids", REFUSE_TRUE, 0, BOTH, "logprob tokens are always text"},
    {"spaces_between_special_tokens", REFUSE_FALSE, 0, BOTH, "the detokenizer has no such mode"},
    {"detokenize", REFUSE_FALSE, 0, BOTH, "output is always detokenized"},
    {"allowed_token_ids", REFUSE_GIVEN, 0, BOTH, "not implemented (logit_bias can ban tokens)"},
    {"bad_words", REFUSE_GIVEN, 0, BOTH, "not implemented"},
    {"logits_processors", REFUSE_GIVEN, 0, BOTH, "not implemented"},
    {"priority", REFUSE_NE, 0, BOTH, "the scheduler serves requests first come, first served"},
    {"request_id", REFUSE_GIVEN, 0, BOTH, "response ids are the server's"},
    {"cache_salt", REFUSE_GIVEN, 0, BOTH, "the prefix cache is shared by all requests"},
    {"kv_transfer_params", REFUSE_GIVEN, 0, BOTH, "disaggregated serving is not implemented"},
    {"vllm_xargs", REFUSE_GIVEN, 0, BOTH, "not implemented"},
    {"echo", REFUSE_TRUE, 0, CHAT, "echoing the last message is not implemented"},
    {"chat_template", REFUSE_GIVEN, 0, CHAT, "the server's chat template is used"},
    {"documents", REFUSE_GIVEN, 0, CHAT, "not implemented"},
    {"mm_processor_kwargs", REFUSE_GIVEN, 0, CHAT, "the model takes text only"},
    {"function_call", REFUSE_GIVEN, 0, CHAT, "function calling is not implemented"},
    {"audio", REFUSE_GIVEN, 0, CHAT, "the model produces text only"},
    {"prediction", REFUSE_GIVEN, 0, CHAT, "predicted outputs are not implemented"},
    {"web_search_options", REFUSE_GIVEN, 0, CHAT, "web search is not implemented"},
    {"store", REFUSE_TRUE, 0, CHAT, "responses are not stored"},
    {"metadata", REFUSE_GIVEN, 0, CHAT, "responses are not stored"},
};

/* Whether x asks for something under rule f. */
static bool asks(const refused_t *f, const cJSON *x) {
  switch (f->when) {
  case REFUSE_GIVEN:
    if ((cJSON_IsArray(x) || cJSON_IsObject(x)) && cJSON_GetArraySize(x) == 0) return false;
    return !(cJSON_IsString(x) && x->valuestring[0] == '\0');
  case REFUSE_TRUE: return !cJSON_IsFalse(x);
  case REFUSE_FALSE: return !cJSON_IsTrue(x);
  case REFUSE_NE: return !(cJSON_IsNumber(x) && x->valuedouble == f->dflt);
  }
  return true;
}

static int check_refused(oai__ctx_t *c, const cJSON *root, bool chat) {
  for (size_t i = 0; i < sizeof REFUSED / sizeof REFUSED[0]; i++) {
    const refused_t *f = &REFUSED[i];
    if (!(f->where & (chat ? CHAT : CMPL))) continue;
    const cJSON *x = oai__get(root, f->name);
    if (x && asks(f, x))
      return oai__fail(c, "unsupported_parameter", f->name, "%s is not supported: %s", f->name, f->why);
  }
  /* modalities: only ["text"] */
  const cJSON *m = chat ? oai__get(root, "modalities") : NULL;
  if (m && !(cJSON_IsArray(m) && cJSON_GetArraySize(m) == 1 && cJSON_IsString(m->child) &&
             strcmp(m->child->valuestring, "text") == 0))
    return oai__fail(c, "unsupported_parameter", "modalities", "modalities: only [\"text\"] is supported");
  const cJSON *st = oai__get(root, "service_tier");
  if (st && !(cJSON_IsString(st) && (strcmp(st->valuestring, "auto") == 0 || strcmp(st->valuestring, "default") == 0)))
    return oai__fail(c, "unsupported_parameter", "service_tier",
                     "service_tier: only \"auto\" and \"default\" are supported (there is one tier)");
  return 0;
}

int oai__parse_extras(oai__ctx_t *c, const cJSON *root, bool chat, oai_params_t *g) {
  if (check_refused(c, root, chat) || oai__parse_structured(c, root, g)) return -EINVAL;
  int64_t v;
  bool given;
  g->prompt_logprobs = -1;
  if (oai__get_int(c, root, "prompt_logprobs", 0, SAMP_MAX_TOP_LOGPROBS, &v, &given)) return -EINVAL;
  if (given) g->prompt_logprobs = (int32_t)v;
  if (g->stream && (g->prompt_logprobs >= 0 || (g->echo && g->samp.logprobs)))
    return oai__fail(c, "unsupported_parameter", g->prompt_logprobs >= 0 ? "prompt_logprobs" : "echo",
                     "prompt logprobs (%s) are not supported with stream",
                     g->prompt_logprobs >= 0 ? "prompt_logprobs" : "echo with logprobs");
  if (oai__get_int(c, root, "min_tokens", 0, INT32_MAX, &v, &given)) return -EINVAL;
  if (given) g->min_tokens = (int32_t)v;
  if (g->max_tokens > 0 && g->min_tokens > g->max_tokens)
    return oai__fail(c, "invalid_value", "min_tokens", "min_tokens (%d) must not exceed max_tokens (%d)",
                     g->min_tokens, g->max_tokens);
  if (oai__get_int(c, root, "truncate_prompt_tokens", 1, INT32_MAX, &v, &given)) return -EINVAL;
  if (given) g->truncate_prompt_tokens = (int32_t)v;
  bool skip = true;
  g->add_special_tokens = !chat;
  if (oai__get_bool(c, root, "include_stop_str_in_output", &g->include_stop_str, NULL) ||
      oai__get_bool(c, root, "skip_special_tokens", &skip, NULL) ||
      oai__get_bool(c, root, "add_special_tokens", &g->add_special_tokens, NULL) ||
      oai__get_bool(c, root, "return_token_ids", &g->return_token_ids, NULL))
    return -EINVAL;
  g->special = !skip;
  bool spec;
  g->speculative = -1;
  if (oai__get_bool(c, root, "speculative", &spec, &given)) return -EINVAL;
  if (given) g->speculative = spec;
  const cJSON *so = oai__get(root, "stream_options");
  if (so) { /* parse_gen checked that it is an object and stream is on */
    c->prefix = "stream_options";
    int r = oai__get_bool(c, so, "continuous_usage_stats", &g->continuous_usage, NULL);
    c->prefix = NULL;
    if (r) return -EINVAL;
    if (g->continuous_usage && !g->include_usage)
      return oai__fail(c, "invalid_value", "stream_options.continuous_usage_stats",
                       "stream_options.continuous_usage_stats needs stream_options.include_usage true");
  }
  return 0;
}
