/* api/oai_tools.c — the tool-calling fields of a chat request: `tools`
 * (function tools, kept as JSON text for the chat template), `tool_choice`
 * ("none", "auto", "required" or a named function: the last two constrain
 * the output through structured output, oai__tool_grammar),
 * `parallel_tool_calls`, an assistant message's `tool_calls` and a tool
 * message's `tool_call_id`. Function names are checked as OpenAI checks
 * them (^[a-zA-Z0-9_-]{1,64}$, unique among the tools): a name is markup
 * in most templates' tool-call formats, so none carries anything else. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/oai_fields.h"
#include "base/strmap.h"

/* x printed compactly into the arena (NULL when memory ran out). */
static const char *json_text(oai__ctx_t *c, const cJSON *x) {
  char *s = cJSON_PrintUnformatted(x);
  if (!s) abort();
  const char *out = arena_strndup(c->arena, s, strlen(s));
  free(s);
  return out;
}

int oai__tool_name(oai__ctx_t *c, const cJSON *obj, const char *key, const char *param) {
  const cJSON *x = oai__get(obj, key);
  if (!x || !cJSON_IsString(x))
    return oai__fail(c, x ? "invalid_type" : "missing_required_parameter", param, "%s must be a string", param);
  const char *s = x->valuestring;
  size_t n = 0;
  for (; s[n]; n++) {
    const char ch = s[n];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
          ch == '-'))
      return oai__fail(c, "invalid_value", param, "%s may hold only the letters a-z and A-Z, digits, '_' and '-' "
                       "(byte %zu is not one)", param, n);
  }
  if (n == 0 || n > OAI_MAX_TOOL_NAME)
    return oai__fail(c, "invalid_value", param, "%s must be 1 to %d characters long, got %zu", param,
                     OAI_MAX_TOOL_NAME, n);
  return 0;
}

static const char *name_key(const void *ctx, int32_t id, size_t *len) {
  const char *const *names = ctx;
  *len = strlen(names[id]);
  return names[id];
}

int oai__function_tools(oai__ctx_t *c, const cJSON *tools, bool flat) {
  const int n = cJSON_GetArraySize(tools);
  const char **names = arena_array(c->arena, (size_t)(n ? n : 1), sizeof *names);
  OAI_NEED(c, names);
  int i = 0;
  const cJSON *t;
  cJSON_ArrayForEach(t, tools) {
    char param[48], fp[64], np[80];
    snprintf(param, sizeof param, "tools[%d]", i);
    const cJSON *type = cJSON_IsObject(t) ? oai__get(t, "type") : NULL;
    if (!type || !cJSON_IsString(type) || strcmp(type->valuestring, "function") != 0)
      return oai__fail(c, "unsupported_value", param, "%s: only {\"type\": \"function\", %s} tools are supported",
                       param, flat ? "\"name\", \"parameters\"" : "\"function\": {...}");
    const cJSON *f = flat ? t : oai__get(t, "function");
    snprintf(fp, sizeof fp, "%s%s", param, flat ? "" : ".function");
    if (!f || !cJSON_IsObject(f)) return oai__fail(c, "invalid_type", fp, "%s must be an object", fp);
    snprintf(np, sizeof np, "%s.name", fp);
    if (oai__tool_name(c, f, "name", np)) return -EINVAL;
    const cJSON *params = oai__get(f, "parameters");
    if (params && !cJSON_IsObject(params))
      return oai__fail(c, "invalid_type", fp, "%s.parameters must be a JSON schema object", fp);
    names[i++] = oai__get(f, "name")->valuestring;
  }
  if (i < 2) return 0;
  strmap_t m;
  if (strmap_init(&m, (uint64_t)i, name_key, names) != 0) return oai__oom(c);
  int rc = 0;
  for (int k = 0; k < i && rc == 0; k++) {
    const int32_t first = strmap_add(&m, k);
    if (first >= 0) {
      char param[48];
      snprintf(param, sizeof param, "tools[%d]%s.name", k, flat ? "" : ".function");
      rc = oai__fail(c, "invalid_value", param, "%s: tools[%d] has the same name; function names must be unique",
                     param, (int)first);
    }
  }
  strmap_free(&m);
  return rc;
}

/* tool_choice {"type": "function", "function": {"name": ...}}: a function
 * of tools. */
static int parse_named(oai__ctx_t *c, const cJSON *tc, const cJSON *tools, oai_chat_req_t *out) {
  const cJSON *type = oai__get(tc, "type"), *f = oai__get(tc, "function");
  if (!type || !cJSON_IsString(type) || strcmp(type->valuestring, "function") || !f || !cJSON_IsObject(f))
    return oai__fail(c, "invalid_value", "tool_choice",
                     "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                     "\"function\": {\"name\": ...}}");
  if (oai__tool_name(c, f, "name", "tool_choice.function.name")) return -EINVAL;
  const char *name = oai__get(f, "name")->valuestring;
  const cJSON *t;
  cJSON_ArrayForEach(t, tools) {
    if (strcmp(oai__get(oai__get(t, "function"), "name")->valuestring, name) == 0) {
      out->tool_choice = OAI_TOOL_CHOICE_NAMED;
      OAI_NEED(c, out->tool_name = arena_strndup(c->arena, name, strlen(name)));
      return 0;
    }
  }
  return oai__fail(c, "invalid_value", "tool_choice.function.name",
                   "tool_choice.function.name \"%s\" is not a function of tools", name);
}

/* A tool's parameters schema, or any object when it has none. */
static cJSON *params_schema(const cJSON *tool) {
  const cJSON *p = oai__get(oai__get(tool, "function"), "parameters");
  cJSON *out = p ? cJSON_Duplicate(p, 1) : cJSON_CreateObject();
  if (!out) abort();
  if (!p) cJSON_AddStringToObject(out, "type", "object");
  return out;
}

/* Rewrites the local $refs of a tool's parameters schema x ("#", "#/$defs/A")
 * as refs into the required-form wrapper, where the schema sits at base
 * ("#/items/anyOf/3/properties/parameters"), so that its $defs resolve
 * there. Values that are data, not schemas (const, enum, default,
 * examples), are left alone. */
static void rebase_refs(cJSON *x, const char *base) {
  cJSON *e;
  cJSON_ArrayForEach(e, x) {
    const char *k = e->string;
    if (k && (!strcmp(k, "const") || !strcmp(k, "enum") || !strcmp(k, "default") || !strcmp(k, "examples"))) continue;
    if (k && !strcmp(k, "$ref") && cJSON_IsString(e) && e->valuestring[0] == '#') {
      const size_t n = strlen(base) + strlen(e->valuestring);
      char *ref = malloc(n + 1);
      if (!ref) abort();
      snprintf(ref, n + 1, "%s%s", base, e->valuestring + 1);
      if (!cJSON_SetValuestring(e, ref)) abort();
      free(ref);
    } else if (cJSON_IsObject(e) || cJSON_IsArray(e)) {
      rebase_refs(e, base);
    }
  }
}

int oai__tool_grammar(oai__ctx_t *c, const cJSON *tools, oai_chat_req_t *out) {
  if (out->tool_choice != OAI_TOOL_CHOICE_REQUIRED && out->tool_choice != OAI_TOOL_CHOICE_NAMED) return 0;
  oai_grammar_t *g = &out->params.grammar;
  if (g->kind != OAI_GRAMMAR_NONE)
    return oai__fail(c, "invalid_value", "tool_choice", "tool_choice \"%s\" constrains the output, and so does %s: "
                     "give one of them", out->tool_choice == OAI_TOOL_CHOICE_NAMED ? "function" : "required", g->field);
  const cJSON *t;
  cJSON *schema = NULL;
  if (out->tool_choice == OAI_TOOL_CHOICE_NAMED) {
    cJSON_ArrayForEach(t, tools)
      if (!schema && !strcmp(oai__get(oai__get(t, "function"), "name")->valuestring, out->tool_name))
        schema = params_schema(t);
  } else { /* vLLM's: an array of calls, each one of the tools with its parameters */
    schema = cJSON_CreateObject();
    cJSON *items = cJSON_CreateObject(), *any = cJSON_CreateArray();
    if (!schema || !items || !any) abort();
    cJSON_AddStringToObject(schema, "type", "array");
    cJSON_AddNumberToObject(schema, "minItems", 1);
    if (!out->parallel_tool_calls) cJSON_AddNumberToObject(schema, "maxItems", 1);
    int k = 0;
    cJSON_ArrayForEach(t, tools) {
      char base[64];
      snprintf(base, sizeof base, "#/items/anyOf/%d/properties/parameters", k++);
      cJSON *call = cJSON_CreateObject(), *props = cJSON_CreateObject(), *name = cJSON_CreateObject();
      cJSON *req = cJSON_CreateArray();
      if (!call || !props || !name || !req) abort();
      cJSON_AddStringToObject(call, "type", "object");
      cJSON_AddStringToObject(name, "const", oai__get(oai__get(t, "function"), "name")->valuestring);
      cJSON_AddItemToObject(props, "name", name);
      cJSON *params = params_schema(t);
      rebase_refs(params, base); /* its $defs stay with it, one level down */
      cJSON_AddItemToObject(props, "parameters", params);
      cJSON_AddItemToObject(call, "properties", props);
      cJSON_AddItemToArray(req, cJSON_CreateString("name"));
      cJSON_AddItemToArray(req, cJSON_CreateString("parameters"));
      cJSON_AddItemToObject(call, "required", req);
      cJSON_AddItemToArray(any, call);
    }
    cJSON_AddItemToObject(items, "anyOf", any);
    cJSON_AddItemToObject(schema, "items", items);
  }
  char *text = cJSON_PrintUnformatted(schema);
  cJSON_Delete(schema);
  if (!text) abort();
  g->kind = OAI_GRAMMAR_JSON_SCHEMA;
  g->field = "tool_choice";
  g->src_len = strlen(text);
  g->src = arena_strndup(c->arena, text, g->src_len);
  free(text);
  OAI_NEED(c, g->src);
  return 0;
}

int oai__parse_tools(oai__ctx_t *c, const cJSON *root, oai_chat_req_t *out) {
  out->parallel_tool_calls = true;
  if (oai__get_bool(c, root, "parallel_tool_calls", &out->parallel_tool_calls, NULL)) return -EINVAL;
  const cJSON *tools = oai__get(root, "tools");
  if (tools && !cJSON_IsArray(tools))
    return oai__fail(c, "invalid_type", "tools", "tools must be an array, got %s", oai__type_name(tools));
  if (tools && oai__function_tools(c, tools, false)) return -EINVAL;
  if (tools && cJSON_GetArraySize(tools) > 0) OAI_NEED(c, out->tools = json_text(c, tools));
  const cJSON *tc = oai__get(root, "tool_choice");
  if (!tc) return 0;
  if (cJSON_IsString(tc) && strcmp(tc->valuestring, "none") == 0) {
    out->tool_choice = OAI_TOOL_CHOICE_NONE;
    return 0;
  }
  if (cJSON_IsString(tc) && strcmp(tc->valuestring, "auto") == 0) return 0;
  if (cJSON_IsString(tc) && strcmp(tc->valuestring, "required") == 0) {
    if (!out->tools) return oai__fail(c, "invalid_value", "tool_choice", "tool_choice \"required\" needs tools");
    out->tool_choice = OAI_TOOL_CHOICE_REQUIRED;
    return 0;
  }
  if (cJSON_IsObject(tc)) return parse_named(c, tc, tools, out);
  return oai__fail(c, "invalid_value", "tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or "
                                                       "{\"type\": \"function\", ...}");
}

int oai__parse_message_tools(oai__ctx_t *c, const cJSON *m, int i, oai_message_t *out) {
  char param[64];
  const bool tool = strcmp(out->role, "tool") == 0, assistant = strcmp(out->role, "assistant") == 0;
  const cJSON *id = oai__get(m, "tool_call_id");
  snprintf(param, sizeof param, "messages[%d].tool_call_id", i);
  if (id && (!tool || !cJSON_IsString(id)))
    return oai__fail(c, tool ? "invalid_type" : "invalid_value", param,
                     tool ? "%s must be a string" : "%s is only for role \"tool\"", param);
  if (id) OAI_NEED(c, out->tool_call_id = arena_strndup(c->arena, id->valuestring, strlen(id->valuestring)));
  const cJSON *calls = oai__get(m, "tool_calls");
  snprintf(param, sizeof param, "messages[%d].tool_calls", i);
  if (!calls || (cJSON_IsArray(calls) && cJSON_GetArraySize(calls) == 0)) return 0;
  if (!assistant) return oai__fail(c, "invalid_value", param, "%s is only for role \"assistant\"", param);
  if (!cJSON_IsArray(calls)) return oai__fail(c, "invalid_type", param, "%s must be an array", param);
  int k = 0;
  const cJSON *call;
  cJSON_ArrayForEach(call, calls) {
    char cp[96];
    snprintf(cp, sizeof cp, "%s[%d]", param, k++);
    const cJSON *f = cJSON_IsObject(call) ? oai__get(call, "function") : NULL;
    if (!f || !cJSON_IsObject(f))
      return oai__fail(c, "invalid_type", cp, "%s must be {\"id\", \"type\": \"function\", \"function\": {\"name\", "
                                              "\"arguments\"}}", cp);
    snprintf(cp + strlen(cp), sizeof cp - strlen(cp), ".function");
    char np[112];
    snprintf(np, sizeof np, "%s.name", cp);
    if (oai__tool_name(c, f, "name", np)) return -EINVAL;
    const cJSON *args = oai__get(f, "arguments");
    if (args && !cJSON_IsString(args))
      return oai__fail(c, "invalid_type", cp, "%s.arguments must be a string (JSON text)", cp);
  }
  OAI_NEED(c, out->tool_calls = json_text(c, calls));
  return 0;
}
