/* api/oai_responses_tools.c — function tools in the Responses API: the
 * request's `tools` ({"type": "function", "name", "description",
 * "parameters", "strict"}) and `tool_choice` ("auto", "none", "required",
 * {"type": "function", "name"}) read as a chat request's (the chat form is
 * built and parsed by oai_tools.c, so one set of checks holds); input items
 * `function_call` and `function_call_output` as the assistant and tool
 * messages the chat template renders; and the `function_call` output items
 * and their stream events. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/oai_fields.h"
#include "api/oai_json.h"
#include "api/oai_responses.h"

/* {"type": "function", "name", ...} → {"type": "function", "function": {...}} */
static cJSON *chat_tool(const cJSON *t) {
  cJSON *f = oai__must(cJSON_CreateObject());
  const cJSON *x;
  cJSON_ArrayForEach(x, t)
    if (strcmp(x->string, "type") != 0 && strcmp(x->string, "strict") != 0)
      cJSON_AddItemToObject(f, x->string, oai__must(cJSON_Duplicate(x, 1)));
  cJSON *o = oai__must(cJSON_CreateObject());
  cJSON_AddItemToObject(o, "type", oai__must(cJSON_Duplicate(oai__get(t, "type"), 1)));
  cJSON_AddItemToObject(o, "function", f);
  return o;
}

int oai__resp_tools(oai__ctx_t *c, const cJSON *root, oai_responses_req_t *out) {
  const cJSON *tools = oai__get(root, "tools"), *tc = oai__get(root, "tool_choice");
  if (tools && !cJSON_IsArray(tools))
    return oai__fail(c, "invalid_type", "tools", "tools must be an array, got %s", oai__type_name(tools));
  if (tools && oai__function_tools(c, tools, true)) return -EINVAL; /* the fields named as sent */
  if (tc && cJSON_IsObject(tc) && oai__get(tc, "name") && oai__tool_name(c, tc, "name", "tool_choice.name"))
    return -EINVAL;
  cJSON *chat = oai__must(cJSON_CreateObject());
  if (tools) {
    cJSON *arr = oai__must(cJSON_AddArrayToObject(chat, "tools"));
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) cJSON_AddItemToArray(arr, chat_tool(t));
  }
  if (tc && cJSON_IsObject(tc)) { /* {"type": "function", "name"} → the chat form */
    cJSON *o = oai__must(cJSON_AddObjectToObject(chat, "tool_choice"));
    const cJSON *type = oai__get(tc, "type"), *name = oai__get(tc, "name");
    if (type) cJSON_AddItemToObject(o, "type", oai__must(cJSON_Duplicate(type, 1)));
    cJSON *f = oai__must(cJSON_AddObjectToObject(o, "function"));
    if (name) cJSON_AddItemToObject(f, "name", oai__must(cJSON_Duplicate(name, 1)));
  } else if (tc) {
    cJSON_AddItemToObject(chat, "tool_choice", oai__must(cJSON_Duplicate(tc, 1)));
  }
  int rc = oai__parse_tools(c, chat, &out->chat);
  if (!rc) rc = oai__tool_grammar(c, oai__get(chat, "tools"), &out->chat);
  cJSON_Delete(chat);
  return rc;
}

/* A string field of an item, required; param names the item. */
static int item_string(oai__ctx_t *c, const cJSON *item, const char *key, const char *param, const char **out) {
  const cJSON *x = oai__get(item, key);
  if (!x || !cJSON_IsString(x))
    return oai__fail(c, x ? "invalid_type" : "missing_required_parameter", param, "%s.%s must be a string", param,
                     key);
  OAI_NEED(c, *out = arena_strndup(c->arena, x->valuestring, strlen(x->valuestring)));
  return 0;
}

int oai__resp_call_item(oai__ctx_t *c, const cJSON *item, const char *type, const char *param, oai_message_t *m) {
  const char *id, *name, *args, *output;
  if (!strcmp(type, "function_call")) {
    char np[80];
    snprintf(np, sizeof np, "%s.name", param);
    if (item_string(c, item, "call_id", param, &id) || oai__tool_name(c, item, "name", np) ||
        item_string(c, item, "name", param, &name) || item_string(c, item, "arguments", param, &args))
      return -EINVAL;
    cJSON *calls = oai__must(cJSON_CreateArray()), *call = oai__must(cJSON_CreateObject());
    cJSON_AddStringToObject(call, "id", id);
    cJSON_AddStringToObject(call, "type", "function");
    cJSON *f = oai__must(cJSON_AddObjectToObject(call, "function"));
    cJSON_AddStringToObject(f, "name", name);
    cJSON_AddStringToObject(f, "arguments", args);
    cJSON_AddItemToArray(calls, call);
    char *text = cJSON_PrintUnformatted(calls);
    cJSON_Delete(calls);
    if (!text) abort();
    m->role = "assistant";
    m->content = "";
    m->tool_calls = arena_strndup(c->arena, text, strlen(text));
    free(text);
    OAI_NEED(c, m->tool_calls);
    return 0;
  }
  if (item_string(c, item, "call_id", param, &id) || item_string(c, item, "output", param, &output)) return -EINVAL;
  m->role = "tool";
  m->tool_call_id = id;
  m->content = output;
  m->content_len = strlen(output);
  return 0;
}

/* ---- output ---------------------------------------------------------------------- */

cJSON *oai__resp_call_json(const oai_tool_call_t *t, bool done) {
  cJSON *o = oai__must(cJSON_CreateObject());
  char id[96];
  snprintf(id, sizeof id, "fc_%s", t->id ? t->id : "");
  oai__must(cJSON_AddStringToObject(o, "type", "function_call"));
  oai__must(cJSON_AddStringToObject(o, "id", id));
  cJSON_AddItemToObject(o, "call_id", oai__text(t->id ? t->id : "", t->id ? strlen(t->id) : 0));
  cJSON_AddItemToObject(o, "name", oai__text(t->name, strlen(t->name)));
  cJSON_AddItemToObject(o, "arguments", oai__text(done ? t->arguments : "", done ? strlen(t->arguments) : 0));
  oai__must(cJSON_AddStringToObject(o, "status", done ? "completed" : "in_progress"));
  return o;
}

char *oai_write_response_call_event(const char *type, int64_t seq, const oai_resp_info_t *r, int32_t k) {
  const oai_tool_call_t *t = &r->calls[k];
  cJSON *e = oai__must(cJSON_CreateObject());
  oai__must(cJSON_AddStringToObject(e, "type", type));
  oai__must(cJSON_AddNumberToObject(e, "sequence_number", (double)seq));
  oai__must(cJSON_AddNumberToObject(e, "output_index", (r->reasoning ? 1 : 0) + (r->text ? 1 : 0) + k));
  const char *kind = type + strlen("response.");
  if (!strncmp(kind, "output_item.", 12)) {
    cJSON_AddItemToObject(e, "item", oai__resp_call_json(t, !strcmp(kind, "output_item.done")));
    return oai__print(e);
  }
  char id[96];
  snprintf(id, sizeof id, "fc_%s", t->id ? t->id : "");
  oai__must(cJSON_AddStringToObject(e, "item_id", id));
  const char *key = !strcmp(kind, "function_call_arguments.delta") ? "delta" : "arguments";
  cJSON_AddItemToObject(e, key, oai__text(t->arguments, strlen(t->arguments)));
  return oai__print(e);
}
