/* api/oai_reasoning.c — the chat request fields of thinking models:
 * chat_template_kwargs (vLLM's: extra variables for the chat template, e.g.
 * {"enable_thinking": false}), reasoning_effort (OpenAI's; a variable of
 * the templates that read it, gpt-oss's) and thinking_token_budget (vLLM's:
 * thinking tokens before the server closes the reasoning). Whether the
 * template reads reasoning_effort, and whether the model thinks at all, is
 * the server's to check (it knows the template). */
#include <errno.h>
#include <string.h>

#include "api/oai_fields.h"

/* The variables a request sets through its own fields: not overridable. */
static const char *const RESERVED[] = {"messages", "add_generation_prompt", "bos_token", "eos_token",
                                       "tools",    "documents",             "reasoning_effort"};

/* Depth of v's nesting (a scalar: 0), stopping once past max. */
static int depth(const cJSON *v, int max) {
  if (!cJSON_IsArray(v) && !cJSON_IsObject(v)) return 0;
  int d = 0;
  for (const cJSON *e = v->child; e && d <= max; e = e->next) {
    const int x = depth(e, max);
    if (x > d) d = x;
  }
  return d + 1;
}

static int parse_kwargs(oai__ctx_t *c, const cJSON *root, const char **out) {
  const cJSON *k = oai__get(root, "chat_template_kwargs");
  if (!k) return 0;
  if (!cJSON_IsObject(k))
    return oai__fail(c, "invalid_type", "chat_template_kwargs", "chat_template_kwargs must be an object, not %s",
                     oai__type_name(k));
  if (cJSON_GetArraySize(k) > OAI_MAX_TEMPLATE_KWARGS)
    return oai__fail(c, "invalid_value", "chat_template_kwargs", "chat_template_kwargs: at most %d variables",
                     OAI_MAX_TEMPLATE_KWARGS);
  if (depth(k, OAI_MAX_TEMPLATE_KWARGS_DEPTH) > OAI_MAX_TEMPLATE_KWARGS_DEPTH)
    return oai__fail(c, "invalid_value", "chat_template_kwargs", "chat_template_kwargs: nested deeper than %d levels",
                     OAI_MAX_TEMPLATE_KWARGS_DEPTH);
  for (const cJSON *e = k->child; e; e = e->next)
    for (size_t i = 0; i < sizeof RESERVED / sizeof RESERVED[0]; i++)
      if (strcmp(e->string, RESERVED[i]) == 0)
        return oai__fail(c, "invalid_value", "chat_template_kwargs",
                         "chat_template_kwargs: %s is set by the request's own fields", RESERVED[i]);
  const char *text = oai__json_text(c, k);
  OAI_NEED(c, text);
  if (strlen(text) > OAI_MAX_TEMPLATE_KWARGS_BYTES)
    return oai__fail(c, "invalid_value", "chat_template_kwargs", "chat_template_kwargs: at most %d bytes of JSON",
                     OAI_MAX_TEMPLATE_KWARGS_BYTES);
  *out = text;
  return 0;
}

/* obj[key] (named param) as one of OpenAI's efforts, into *out (static). */
static int parse_effort(oai__ctx_t *c, const cJSON *obj, const char *key, const char *param, const char **out) {
  static const char *const EFFORTS[] = {"none", "minimal", "low", "medium", "high", "xhigh"};
  const char *effort = NULL;
  if (oai__get_string(c, obj, key, &effort, NULL, NULL)) return -EINVAL;
  if (!effort) return 0;
  size_t i = 0;
  while (i < sizeof EFFORTS / sizeof EFFORTS[0] && strcmp(effort, EFFORTS[i]) != 0) i++;
  if (i == sizeof EFFORTS / sizeof EFFORTS[0])
    return oai__fail(c, "invalid_value", param, "%s must be one of none, minimal, low, medium, high, xhigh", param);
  *out = EFFORTS[i];
  return 0;
}

int oai__parse_template_vars(oai__ctx_t *c, const cJSON *root, const char **kwargs, const char **effort) {
  if (parse_kwargs(c, root, kwargs)) return -EINVAL;
  return parse_effort(c, root, "reasoning_effort", "reasoning_effort", effort);
}

int oai__resp_reasoning(oai__ctx_t *c, const cJSON *root, oai_chat_req_t *out) {
  const cJSON *r = oai__get(root, "reasoning");
  if (!r) return 0;
  if (!cJSON_IsObject(r))
    return oai__fail(c, "invalid_type", "reasoning", "reasoning must be an object, not %s", oai__type_name(r));
  static const char *const SUMMARIES[] = {"summary", "generate_summary"};
  for (size_t i = 0; i < 2; i++)
    if (oai__get(r, SUMMARIES[i]))
      return oai__fail(c, "unsupported_parameter", i ? "reasoning.generate_summary" : "reasoning.summary",
                       "reasoning summaries are not produced: the reasoning comes whole, as the reasoning item's "
                       "content");
  c->prefix = "reasoning";
  const int rc = parse_effort(c, r, "effort", "reasoning.effort", &out->reasoning_effort);
  c->prefix = NULL;
  return rc;
}

int oai__parse_reasoning(oai__ctx_t *c, const cJSON *root, oai_chat_req_t *out) {
  if (oai__parse_template_vars(c, root, &out->template_kwargs, &out->reasoning_effort)) return -EINVAL;
  int64_t v;
  bool given;
  if (oai__get_int(c, root, "thinking_token_budget", 0, 1 << 24, &v, &given)) return -EINVAL;
  out->has_thinking_budget = given;
  out->thinking_budget = given ? (int32_t)v : 0;
  return 0;
}
