/* api/oai_chat_val.c — chat template inputs from JSON and from parsed
 * messages (see oai_chat_val.h). */
#include "api/oai_chat_val.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

static chat_val_t str_val(const char *s, size_t n) { return (chat_val_t){.kind = CHAT_VAL_STR, .s = s, .n = n}; }

/* j as a value; strings borrowed from j, or copied into a when copy. */
static void from_json(arena_t *a, const cJSON *j, chat_val_t *out, bool copy) {
  memset(out, 0, sizeof *out);
  if (cJSON_IsBool(j)) {
    out->kind = CHAT_VAL_BOOL;
    out->i = cJSON_IsTrue(j);
  } else if (cJSON_IsNumber(j)) {
    const double d = j->valuedouble;
    if (d == floor(d) && fabs(d) < 9007199254740992.0) {
      out->kind = CHAT_VAL_INT;
      out->i = (int64_t)d;
    } else {
      out->kind = CHAT_VAL_FLOAT;
      out->f = d;
    }
  } else if (cJSON_IsString(j)) {
    const size_t n = strlen(j->valuestring);
    *out = str_val(copy ? arena_strndup(a, j->valuestring, n) : j->valuestring, n);
  } else if (cJSON_IsArray(j) || cJSON_IsObject(j)) {
    const size_t n = (size_t)cJSON_GetArraySize(j);
    chat_val_t *items = arena_array(a, n, sizeof *items);
    chat_val_t *keys = cJSON_IsObject(j) ? arena_array(a, n, sizeof *keys) : NULL;
    size_t i = 0;
    for (const cJSON *e = j->child; e && i < n; e = e->next, i++) {
      from_json(a, e, &items[i], copy);
      const size_t kn = e->string ? strlen(e->string) : 0;
      if (keys) keys[i] = str_val(e->string ? (copy ? arena_strndup(a, e->string, kn) : e->string) : "", kn);
    }
    *out = (chat_val_t){.kind = keys ? CHAT_VAL_DICT : CHAT_VAL_LIST, .n = i, .items = items, .keys = keys};
  } /* null (and anything else): None */
}

const chat_val_t *oai_chat_val(arena_t *a, const cJSON *j) {
  chat_val_t *v = arena_alloc(a, sizeof *v);
  from_json(a, j, v, false);
  return v;
}

/* JSON text (checked by the request parser) as a value owning its strings
 * (copied into a). A tool call's function.arguments that holds a JSON
 * object becomes that object, as templates expect (vLLM does the same). */
static const chat_val_t *json_text_val(arena_t *a, const char *text) {
  cJSON *j = cJSON_Parse(text);
  for (cJSON *call = j && cJSON_IsArray(j) ? j->child : NULL; call; call = call->next) {
    cJSON *f = cJSON_GetObjectItemCaseSensitive(call, "function");
    cJSON *args = f ? cJSON_GetObjectItemCaseSensitive(f, "arguments") : NULL;
    cJSON *obj = args && cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : NULL;
    if (obj && cJSON_IsObject(obj)) cJSON_ReplaceItemInObjectCaseSensitive(f, "arguments", obj);
    else cJSON_Delete(obj);
  }
  chat_val_t *v = arena_alloc(a, sizeof *v);
  from_json(a, j, v, true);
  cJSON_Delete(j);
  return v;
}

const chat_val_t *oai_chat_tools(arena_t *a, const char *tools_json) {
  return oai_chat_extra(a, tools_json, NULL, NULL);
}

const chat_val_t *oai_chat_extra(arena_t *a, const char *tools_json, const char *kwargs_json, const char *effort) {
  const chat_val_t *kw = kwargs_json ? json_text_val(a, kwargs_json) : NULL;
  const size_t n_kw = kw && kw->kind == CHAT_VAL_DICT ? kw->n : 0;
  const size_t n = (tools_json ? 1 : 0) + n_kw + (effort ? 1 : 0);
  if (!n) return NULL;
  chat_val_t *keys = arena_array(a, n, sizeof *keys), *items = arena_array(a, n, sizeof *items);
  size_t k = 0;
  if (tools_json) {
    keys[k] = str_val("tools", 5);
    items[k++] = *json_text_val(a, tools_json);
  }
  for (size_t i = 0; i < n_kw; i++, k++) {
    keys[k] = kw->keys[i];
    items[k] = kw->items[i];
  }
  if (effort) {
    keys[k] = str_val("reasoning_effort", 16);
    items[k++] = str_val(effort, strlen(effort));
  }
  chat_val_t *d = arena_alloc(a, sizeof *d);
  *d = (chat_val_t){.kind = CHAT_VAL_DICT, .n = k, .items = items, .keys = keys};
  return d;
}

const chat_val_t *oai_chat_messages(arena_t *a, const oai_message_t *msgs, int32_t n) {
  chat_val_t *list = arena_array(a, (size_t)(n > 0 ? n : 0), sizeof *list);
  for (int32_t i = 0; i < n; i++) {
    chat_val_t *keys = arena_array(a, 5, sizeof *keys), *items = arena_array(a, 5, sizeof *items);
    size_t k = 0;
    keys[k] = str_val("role", 4);
    items[k++] = str_val(msgs[i].role, strlen(msgs[i].role));
    keys[k] = str_val("content", 7);
    items[k++] = msgs[i].content ? str_val(msgs[i].content, msgs[i].content_len) : str_val("", 0);
    if (msgs[i].name) {
      keys[k] = str_val("name", 4);
      items[k++] = str_val(msgs[i].name, strlen(msgs[i].name));
    }
    if (msgs[i].tool_calls) {
      keys[k] = str_val("tool_calls", 10);
      items[k++] = *json_text_val(a, msgs[i].tool_calls);
    }
    if (msgs[i].tool_call_id) {
      keys[k] = str_val("tool_call_id", 12);
      items[k++] = str_val(msgs[i].tool_call_id, strlen(msgs[i].tool_call_id));
    }
    list[i] = (chat_val_t){.kind = CHAT_VAL_DICT, .n = k, .items = items, .keys = keys};
  }
  chat_val_t *v = arena_alloc(a, sizeof *v);
  *v = (chat_val_t){.kind = CHAT_VAL_LIST, .n = (size_t)(n > 0 ? n : 0), .items = list};
  return v;
}

/* v rewritten by m into *out. */
static void map_into(arena_t *a, const chat_val_t *v, const oai_text_map_t *m, chat_val_t *out) {
  *out = *v;
  if (v->kind == CHAT_VAL_STR) {
    char *t = arena_alloc(a, m->cap(v->n) + 1);
    out->n = m->fn(m->ctx, v->s, v->n, t);
    t[out->n] = '\0';
    out->s = t;
  } else if (v->kind == CHAT_VAL_LIST || v->kind == CHAT_VAL_DICT) {
    chat_val_t *items = arena_array(a, v->n, sizeof *items);
    chat_val_t *keys = v->keys ? arena_array(a, v->n, sizeof *keys) : NULL;
    for (size_t i = 0; i < v->n; i++) {
      map_into(a, &v->items[i], m, &items[i]);
      if (keys) map_into(a, &v->keys[i], m, &keys[i]);
    }
    out->items = items;
    out->keys = keys;
  }
}

const chat_val_t *oai_chat_val_map(arena_t *a, const chat_val_t *v, const oai_text_map_t *m) {
  chat_val_t *out = arena_alloc(a, sizeof *out);
  map_into(a, v, m, out);
  return out;
}

const chat_val_t *oai_chat_val_get(const chat_val_t *dict, const char *key) {
  if (!dict || dict->kind != CHAT_VAL_DICT) return NULL;
  const size_t n = strlen(key);
  for (size_t i = 0; i < dict->n; i++)
    if (dict->keys[i].n == n && memcmp(dict->keys[i].s, key, n) == 0) return &dict->items[i];
  return NULL;
}
