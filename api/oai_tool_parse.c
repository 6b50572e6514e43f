/* api/oai_tool_parse.c — tool calls out of model output (see
 * oai_tool_parse.h). */
#include "api/oai_tool_parse.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define HERMES_OPEN "<tool_call>"
#define HERMES_CLOSE "</tool_call>"
#define MISTRAL_MARK "[TOOL_CALLS]"
#define PYTHON_TAG "<|python_tag|>"
#define H_CHANNEL "<|channel|>"
#define H_CONSTRAIN "<|constrain|>"
#define H_MESSAGE "<|message|>"
#define H_CALL "<|call|>"
#define H_FUNCTIONS "functions."

oai_tools_format_t oai_tools_format_of(const char *src) {
  if (!src) return OAI_TOOLS_NONE;
  if (strstr(src, H_CHANNEL)) return OAI_TOOLS_HARMONY;
  if (strstr(src, HERMES_OPEN)) return OAI_TOOLS_HERMES;
  if (strstr(src, MISTRAL_MARK)) return OAI_TOOLS_MISTRAL;
  if (strstr(src, PYTHON_TAG) || strstr(src, "ipython")) return OAI_TOOLS_LLAMA3;
  return OAI_TOOLS_NONE;
}

static int space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* text[*len] without leading and trailing white space. */
static const char *trim(const char *s, size_t *len) {
  while (*len && space(*s)) s++, (*len)--;
  while (*len && space(s[*len - 1])) (*len)--;
  return s;
}

static const char *find(const char *s, size_t len, const char *needle) {
  const size_t n = strlen(needle);
  for (size_t i = 0; i + n <= len; i++)
    if (memcmp(s + i, needle, n) == 0) return s + i;
  return NULL;
}

/* One call from a JSON object {"name": str, args_key: object or string};
 * args_key2 is an alternative key. Returns 1 when it is one. */
static int call_of(const cJSON *o, const char *args_key, const char *args_key2, arena_t *a, oai_tool_call_t *out) {
  const cJSON *name = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, "name") : NULL;
  if (!name || !cJSON_IsString(name) || !name->valuestring[0]) return 0;
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, args_key);
  if (!args && args_key2) args = cJSON_GetObjectItemCaseSensitive(o, args_key2);
  cJSON *parsed = args && cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : NULL;
  if (args && cJSON_IsString(args) && !cJSON_IsObject(parsed)) {
    cJSON_Delete(parsed);
    return 0;
  }
  if (args && !cJSON_IsString(args) && !cJSON_IsObject(args)) return 0;
  char *text = args ? cJSON_PrintUnformatted(parsed ? parsed : args) : NULL;
  cJSON_Delete(parsed);
  out->name = arena_strndup(a, name->valuestring, strlen(name->valuestring));
  out->arguments = arena_strndup(a, text ? text : "{}", text ? strlen(text) : 2);
  free(text);
  return 1;
}

static void push(oai_tool_parse_t *out, int32_t *cap, arena_t *a, const oai_tool_call_t *c) {
  if (out->n_calls == *cap) {
    const int32_t ncap = *cap ? *cap * 2 : 4;
    oai_tool_call_t *n = arena_array(a, (size_t)ncap, sizeof *n);
    if (out->n_calls) memcpy(n, out->calls, (size_t)out->n_calls * sizeof *n);
    out->calls = n;
    *cap = ncap;
  }
  out->calls[out->n_calls++] = *c;
}

/* JSON text s[len] (not NUL-terminated) parsed, or NULL. */
static cJSON *parse_n(const char *s, size_t len) { return cJSON_ParseWithLength(s, len); }

/* The text before the calls, as generated (as vLLM's parsers return it);
 * none when it is only white space. */
static void set_content(oai_tool_parse_t *out, const char *s, size_t len) {
  size_t n = len;
  trim(s, &n);
  out->content = n ? s : NULL;
  out->content_len = n ? len : 0;
}

static int hermes(const char *text, size_t len, int32_t max, arena_t *a, oai_tool_parse_t *out, int32_t *cap) {
  const char *open = find(text, len, HERMES_OPEN);
  if (!open) return 0;
  const char *p = open, *end = text + len;
  while (p && (max <= 0 || out->n_calls < max)) {
    const char *body = p + strlen(HERMES_OPEN);
    const char *close = find(body, (size_t)(end - body), HERMES_CLOSE);
    size_t n = (size_t)((close ? close : end) - body);
    const char *b = trim(body, &n);
    cJSON *o = parse_n(b, n);
    oai_tool_call_t c;
    const int ok = call_of(o, "arguments", "parameters", a, &c);
    cJSON_Delete(o);
    if (!ok) return out->n_calls > 0;
    push(out, cap, a, &c);
    if (!close) break;
    const char *next = close + strlen(HERMES_CLOSE);
    p = find(next, (size_t)(end - next), HERMES_OPEN);
  }
  set_content(out, text, (size_t)(open - text));
  return 1;
}

static int llama3(const char *text, size_t len, int32_t max, arena_t *a, oai_tool_parse_t *out, int32_t *cap) {
  size_t n = len;
  const char *s = trim(text, &n);
  if (n >= strlen(PYTHON_TAG) && memcmp(s, PYTHON_TAG, strlen(PYTHON_TAG)) == 0) {
    s += strlen(PYTHON_TAG);
    n -= strlen(PYTHON_TAG);
    s = trim(s, &n);
  }
  if (!n || s[0] != '{') return 0;
  /* one object, or several separated by ";" */
  const char *end = s + n;
  while (s < end && (max <= 0 || out->n_calls < max)) {
    const char *stop = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(s, (size_t)(end - s), &stop, 0);
    oai_tool_call_t c;
    const int ok = call_of(o, "parameters", "arguments", a, &c);
    cJSON_Delete(o);
    if (!ok) {
      out->n_calls = 0;
      return 0;
    }
    push(out, cap, a, &c);
    s = stop;
    size_t rest = (size_t)(end - s);
    s = trim(s, &rest);
    if (rest && s[0] == ';') s++;
    rest = (size_t)(end - s);
    s = trim(s, &rest);
  }
  out->content = NULL;
  out->content_len = 0;
  return 1;
}

/* A JSON list of calls (or one call object) in body[n]. */
static int call_list(const char *body, size_t n, int32_t max, arena_t *a, oai_tool_parse_t *out, int32_t *cap) {
  body = trim(body, &n);
  cJSON *arr = parse_n(body, n);
  if (cJSON_IsObject(arr)) { /* one call without the list */
    cJSON *list = cJSON_CreateArray();
    cJSON_AddItemToArray(list, arr);
    arr = list;
  }
  int ok = cJSON_IsArray(arr) && cJSON_GetArraySize(arr) > 0;
  for (cJSON *o = ok ? arr->child : NULL; o && (max <= 0 || out->n_calls < max); o = o->next) {
    oai_tool_call_t c;
    if (!call_of(o, "arguments", "parameters", a, &c)) {
      ok = 0;
      break;
    }
    push(out, cap, a, &c);
  }
  cJSON_Delete(arr);
  if (!ok) out->n_calls = 0;
  return ok;
}

static int mistral(const char *text, size_t len, int32_t max, arena_t *a, oai_tool_parse_t *out, int32_t *cap) {
  const char *mark = find(text, len, MISTRAL_MARK);
  if (!mark) return 0;
  const char *body = mark + strlen(MISTRAL_MARK);
  if (!call_list(body, (size_t)(text + len - body), max, a, out, cap)) return 0;
  set_content(out, text, (size_t)(mark - text));
  return 1;
}

/* The arguments object alone: one call, named by the caller. */
static int json_args(const char *text, size_t len, arena_t *a, oai_tool_parse_t *out, int32_t *cap) {
  cJSON *o = parse_n(text, len);
  char *s = cJSON_IsObject(o) ? cJSON_PrintUnformatted(o) : NULL;
  cJSON_Delete(o);
  if (!s) return 0;
  const oai_tool_call_t c = {.name = "", .arguments = arena_strndup(a, s, strlen(s))};
  free(s);
  push(out, cap, a, &c);
  return 1;
}

/* The word of header h[n] that follows key ("to=", the constrain tag), up
 * to white space or the next tag; n 0 when none. */
static const char *head_word(const char *h, size_t n, const char *key, size_t *len) {
  const char *k = find(h, n, key);
  *len = 0;
  if (!k) return NULL;
  const char *w = k + strlen(key), *end = h + n;
  while (w + *len < end && !space(w[*len]) && w[*len] != '<') (*len)++;
  return w;
}

/* One harmony message's call: its header h[hn] and body b[bn]. Returns 1
 * when it is a call of a function. */
static int harmony_call(const char *h, size_t hn, const char *b, size_t bn, arena_t *a, oai_tool_call_t *out) {
  size_t to_n, type_n;
  const char *to = head_word(h, hn, " to=", &to_n), *type = head_word(h, hn, H_CONSTRAIN, &type_n);
  const size_t fn = strlen(H_FUNCTIONS);
  if (!to || to_n <= fn || memcmp(to, H_FUNCTIONS, fn) != 0) return 0; /* a built-in tool's: not a function's */
  for (size_t i = fn; i < to_n; i++)
    if ((unsigned char)to[i] < 0x20 || to[i] == 0x7f) return 0; /* a control byte (a NUL would cut it): no name */
  out->name = arena_strndup(a, to + fn, to_n - fn);
  char *text = NULL;
  if (!type || find(type, type_n, "json")) { /* JSON (the usual type, and the default): compacted when it parses */
    const char *stop = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(b, bn, &stop, 0);
    size_t rest = o ? (size_t)(b + bn - stop) : 0;
    trim(stop ? stop : b, &rest);
    text = o && !rest ? cJSON_PrintUnformatted(o) : NULL; /* nothing after the value, as json.loads */
    cJSON_Delete(o);
  }
  out->arguments = text ? arena_strndup(a, text, strlen(text)) : arena_strndup(a, b, bn);
  free(text);
  return 1;
}

static int harmony(const char *text, size_t len, int32_t max, arena_t *a, oai_tool_parse_t *out, int32_t *cap) {
  const char *first = find(text, len, H_CHANNEL), *end = text + len;
  if (!first) return 0;
  for (const char *p = first; p && (max <= 0 || out->n_calls < max);) {
    const char *h = p + strlen(H_CHANNEL);
    const char *msg = find(h, (size_t)(end - h), H_MESSAGE);
    const char *b = msg ? msg + strlen(H_MESSAGE) : NULL;
    const char *call = b ? find(b, (size_t)(end - b), H_CALL) : NULL;
    if (!call) break; /* a message cut short: no call (vLLM reads finished messages only) */
    oai_tool_call_t c;
    if (harmony_call(h, (size_t)(msg - h), b, (size_t)(call - b), a, &c)) push(out, cap, a, &c);
    const char *next = call + strlen(H_CALL);
    p = find(next, (size_t)(end - next), H_CHANNEL);
  }
  set_content(out, text, (size_t)(first - text));
  return 1;
}

/* How many bytes of s[len] end in a proper prefix of marker m. */
static size_t marker_tail(const char *s, size_t len, const char *m) {
  const size_t n = strlen(m);
  for (size_t k = n - 1 < len ? n - 1 : len; k > 0; k--)
    if (memcmp(s + len - k, m, k) == 0) return k;
  return 0;
}

size_t oai_tools_stream_safe(oai_tools_format_t f, const char *text, size_t len) {
  size_t limit = len, n;
  switch (f) {
  case OAI_TOOLS_NONE: return len;
  case OAI_TOOLS_HERMES:
  case OAI_TOOLS_HARMONY:
  case OAI_TOOLS_MISTRAL: {
    const char *m = f == OAI_TOOLS_HERMES ? HERMES_OPEN : f == OAI_TOOLS_HARMONY ? H_CHANNEL : MISTRAL_MARK;
    const char *at = find(text, len, m);
    limit = at ? (size_t)(at - text) : len - marker_tail(text, len, m);
    break;
  }
  case OAI_TOOLS_LLAMA3: {
    n = len;
    const char *s = trim(text, &n);
    const size_t tag = strlen(PYTHON_TAG);
    if (!n || s[0] == '{' || memcmp(s, PYTHON_TAG, n < tag ? n : tag) == 0) return 0; /* maybe a call: all of it */
    return len;
  }
  default: return 0; /* JSON_LIST, JSON_ARGS: the output is the calls */
  }
  n = limit;
  trim(text, &n);
  return n ? limit : 0; /* white space alone may be all the content there is: none */
}

void oai_tools_parse(oai_tools_format_t f, const char *text, size_t len, int32_t max_calls, arena_t *a,
                     oai_tool_parse_t *out) {
  memset(out, 0, sizeof *out);
  int32_t cap = 0;
  int found = 0;
  if (f == OAI_TOOLS_HERMES) found = hermes(text, len, max_calls, a, out, &cap);
  else if (f == OAI_TOOLS_LLAMA3) found = llama3(text, len, max_calls, a, out, &cap);
  else if (f == OAI_TOOLS_MISTRAL) found = mistral(text, len, max_calls, a, out, &cap);
  else if (f == OAI_TOOLS_JSON_LIST) found = call_list(text, len, max_calls, a, out, &cap);
  else if (f == OAI_TOOLS_JSON_ARGS) found = json_args(text, len, a, out, &cap);
  else if (f == OAI_TOOLS_HARMONY && harmony(text, len, max_calls, a, out, &cap)) return; /* content: the text
                                                                                          * before the messages */
  if (!found || out->n_calls == 0) {
    out->n_calls = 0;
    out->content = len ? text : NULL; /* plain text: as generated */
    out->content_len = len;
  }
}
