/* api/anth_request.c — Anthropic's Messages request read into a chat
 * request (see anth.h for what is accepted): the system prompt and the
 * messages' blocks become chat messages (tool_use blocks an assistant's
 * tool_calls, tool_result blocks tool messages), the custom tools and
 * tool_choice become the chat form that oai_tools.c checks and turns into
 * the template's tools and the tool-call grammar, and the generation
 * fields become oai_params_t. Unlike the OpenAI parsers, an unknown field
 * is refused, as Anthropic's API refuses it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/anth.h"
#include "api/oai_fields.h"
#include "api/oai_json.h"
#include "base/buf.h"

/* The top-level fields each endpoint takes. */
static const char *const MESSAGES_FIELDS[] = {"model", "messages", "max_tokens", "system", "stop_sequences", "stream",
                                              "temperature", "top_p", "top_k", "metadata", "tools", "tool_choice",
                                              "thinking", "service_tier", "cache_control", NULL};
static const char *const COUNT_FIELDS[] = {"model", "messages", "system", "tools", "tool_choice", "thinking",
                                           "cache_control", NULL};

static bool listed(const char *const *l, const char *s) {
  for (; *l; l++)
    if (!strcmp(*l, s)) return true;
  return false;
}

/* Refuses the first key of obj not in known; what names obj in the error
 * ("" for the body). */
static int only_known(oai__ctx_t *c, const cJSON *obj, const char *const *known, const char *what) {
  const cJSON *x;
  cJSON_ArrayForEach(x, obj) {
    if (listed(known, x->string)) continue;
    char param[160];
    snprintf(param, sizeof param, "%s%s%.100s", what, *what ? "." : "", x->string);
    return oai__fail(c, "unsupported_parameter", param, "%s: not supported by this server's Messages API", param);
  }
  return 0;
}

/* A cache_control hint, if given: {"type": "ephemeral", "ttl"?}. tram's
 * prefix cache keeps any repeated prefix by itself, so the hint is honoured
 * without more. */
static int cache_control(oai__ctx_t *c, const cJSON *obj, const char *param) {
  const cJSON *cc = oai__get(obj, "cache_control");
  if (!cc) return 0;
  char what[160];
  snprintf(what, sizeof what, "%s%scache_control", param, *param ? "." : "");
  const cJSON *t = cJSON_IsObject(cc) ? oai__get(cc, "type") : NULL;
  if (!t || !cJSON_IsString(t) || strcmp(t->valuestring, "ephemeral") != 0)
    return oai__fail(c, "invalid_value", what, "%s must be {\"type\": \"ephemeral\"}", what);
  static const char *const known[] = {"type", "ttl", NULL};
  return only_known(c, cc, known, what);
}

/* ---- messages ----------------------------------------------------------------------- */

/* The chat messages being built: out[n] (room for cap). */
typedef struct conv {
  oai_message_t *out;
  int32_t n, cap;
} conv_t;

/* Appends a message; a user, assistant or system message right after one of
 * the same role joins it (Anthropic combines consecutive turns): the texts
 * with "\n", the tool calls' arrays into one. text and calls live in the
 * arena. */
static int emit(oai__ctx_t *c, conv_t *v, const char *role, const char *text, size_t len, const char *calls,
                const char *call_id) {
  oai_message_t *last = v->n ? &v->out[v->n - 1] : NULL;
  if (last && !call_id && !last->tool_call_id && !strcmp(last->role, role)) {
    if (len) {
      const bool sep = last->content_len > 0;
      char *t = arena_alloc(c->arena, last->content_len + sep + len + 1);
      OAI_NEED(c, t);
      memcpy(t, last->content, last->content_len);
      if (sep) t[last->content_len] = '\n';
      memcpy(t + last->content_len + sep, text, len);
      t[last->content_len + sep + len] = '\0';
      last->content = t;
      last->content_len += sep + len;
    }
    if (calls && last->tool_calls) { /* "[a]" + "[b]" → "[a,b]" */
      const size_t la = strlen(last->tool_calls), lb = strlen(calls);
      char *t = arena_alloc(c->arena, la + lb + 1);
      OAI_NEED(c, t);
      memcpy(t, last->tool_calls, la - 1);
      t[la - 1] = ',';
      memcpy(t + la, calls + 1, lb); /* with its NUL */
      last->tool_calls = t;
    } else if (calls) {
      last->tool_calls = calls;
    }
    return 0;
  }
  if (v->n == v->cap) return oai__fail(c, "invalid_value", "messages", "messages make too many chat turns");
  oai_message_t *m = &v->out[v->n++];
  memset(m, 0, sizeof *m);
  m->role = role;
  OAI_NEED(c, m->content = arena_strndup(c->arena, text ? text : "", len));
  m->content_len = len;
  m->tool_calls = calls;
  m->tool_call_id = call_id;
  return 0;
}

/* A string field of a block, required. */
static int block_string(oai__ctx_t *c, const cJSON *b, const char *key, const char *param, const char **out) {
  const cJSON *x = oai__get(b, key);
  char p[200];
  snprintf(p, sizeof p, "%s.%s", param, key);
  if (!x) return oai__fail(c, "missing_required_parameter", p, "%s is required", p);
  if (!cJSON_IsString(x)) return oai__fail(c, "invalid_type", p, "%s must be a string, got %s", p, oai__type_name(x));
  *out = x->valuestring;
  return 0;
}

/* A text block {"type": "text", "text", "cache_control"?, "citations"?}:
 * its text into b. */
static int text_block(oai__ctx_t *c, const cJSON *blk, const char *param, buf_t *b) {
  static const char *const known[] = {"type", "text", "cache_control", "citations", NULL};
  const char *t;
  if (only_known(c, blk, known, param) || block_string(c, blk, "text", param, &t) || cache_control(c, blk, param))
    return -EINVAL;
  const cJSON *cit = oai__get(blk, "citations");
  if (cit && !(cJSON_IsArray(cit) && !cJSON_GetArraySize(cit)))
    return oai__fail(c, "unsupported_parameter", param, "%s.citations: citations are not supported", param);
  if (b->len) buf_putc(b, '\n');
  buf_puts(b, t);
  return 0;
}

/* x: a string, or an array of text blocks (what system, a message's text
 * and a tool_result's content may be), joined with "\n" into b. */
static int text_of(oai__ctx_t *c, const cJSON *x, const char *param, buf_t *b) {
  if (cJSON_IsString(x)) {
    buf_puts(b, x->valuestring);
    return 0;
  }
  if (!cJSON_IsArray(x))
    return oai__fail(c, "invalid_type", param, "%s must be a string or an array of text blocks, got %s", param,
                     oai__type_name(x));
  int j = 0;
  const cJSON *blk;
  cJSON_ArrayForEach(blk, x) {
    char p[160];
    snprintf(p, sizeof p, "%s[%d]", param, j++);
    const cJSON *type = cJSON_IsObject(blk) ? oai__get(blk, "type") : NULL;
    if (!type || !cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0)
      return oai__fail(c, "unsupported_value", p, "%s: only text blocks are supported here", p);
    if (text_block(c, blk, p, b)) return -EINVAL;
  }
  return 0;
}

/* A thinking (or redacted_thinking) block of an earlier assistant turn, as
 * clients send their history back: checked, then left out of the prompt,
 * as Anthropic leaves earlier turns' thinking out of the context. */
static int thinking_block(oai__ctx_t *c, const cJSON *blk, const char *bp, const char *text_key, const char *sig_key) {
  const char *const known[] = {"type", text_key, sig_key, NULL};
  if (only_known(c, blk, known, bp)) return -EINVAL;
  char kp[128];
  snprintf(kp, sizeof kp, "%s.%s", bp, text_key);
  const cJSON *x = oai__get(blk, text_key);
  if (!cJSON_IsString(x)) return oai__fail(c, "invalid_type", kp, "%s must be a string", kp);
  if (!sig_key) return 0;
  x = oai__get(blk, sig_key);
  snprintf(kp, sizeof kp, "%s.%s", bp, sig_key);
  if (x && !cJSON_IsString(x)) return oai__fail(c, "invalid_type", kp, "%s must be a string", kp);
  return 0;
}

/* A tool_use block (assistant): one OpenAI tool call appended to calls. */
static int tool_use_block(oai__ctx_t *c, const cJSON *blk, const char *param, cJSON *calls) {
  static const char *const known[] = {"type", "id", "name", "input", "cache_control", NULL};
  char np[176];
  snprintf(np, sizeof np, "%s.name", param);
  const char *id;
  if (only_known(c, blk, known, param) || block_string(c, blk, "id", param, &id) ||
      oai__tool_name(c, blk, "name", np) || cache_control(c, blk, param))
    return -EINVAL;
  const cJSON *input = oai__get(blk, "input");
  if (!input || !cJSON_IsObject(input))
    return oai__fail(c, input ? "invalid_type" : "missing_required_parameter", param, "%s.input must be an object",
                     param);
  char *args = cJSON_PrintUnformatted(input);
  if (!args) return oai__oom(c);
  cJSON *call = oai__must(cJSON_CreateObject()), *f = oai__must(cJSON_CreateObject());
  oai__must(cJSON_AddStringToObject(call, "id", id));
  oai__must(cJSON_AddStringToObject(call, "type", "function"));
  oai__must(cJSON_AddStringToObject(f, "name", oai__get(blk, "name")->valuestring));
  oai__must(cJSON_AddStringToObject(f, "arguments", args));
  free(args);
  cJSON_AddItemToObject(call, "function", f);
  cJSON_AddItemToArray(calls, call);
  return 0;
}

/* A tool_result block (user): a tool message answering tool_use_id;
 * is_error true marks its text "Error: " (no template has a slot for it). */
static int tool_result_block(oai__ctx_t *c, conv_t *v, const cJSON *blk, const char *param) {
  static const char *const known[] = {"type", "tool_use_id", "content", "is_error", "cache_control", NULL};
  const char *id;
  bool is_error = false;
  c->prefix = param;
  int r = oai__get_bool(c, blk, "is_error", &is_error, NULL);
  c->prefix = NULL;
  if (r || only_known(c, blk, known, param) || block_string(c, blk, "tool_use_id", param, &id) ||
      cache_control(c, blk, param))
    return -EINVAL;
  buf_t b = {0}, text = {0};
  const cJSON *content = oai__get(blk, "content");
  char cp[176];
  snprintf(cp, sizeof cp, "%s.content", param);
  if (content && text_of(c, content, cp, &text)) {
    buf_free(&text);
    return -EINVAL;
  }
  if (is_error) buf_puts(&b, "Error: ");
  buf_put(&b, text.p ? text.p : "", text.len);
  buf_free(&text);
  const char *idc = arena_strndup(c->arena, id, strlen(id));
  r = idc ? emit(c, v, "tool", b.p, b.len, NULL, idc) : oai__oom(c);
  buf_free(&b);
  return r;
}

/* messages[i]: its blocks as chat messages (tool results first, as
 * Anthropic places them, then the turn's text and calls). */
static int message(oai__ctx_t *c, conv_t *v, const cJSON *m, int i) {
  char param[48];
  snprintf(param, sizeof param, "messages[%d]", i);
  if (!cJSON_IsObject(m))
    return oai__fail(c, "invalid_type", param, "%s must be an object, got %s", param, oai__type_name(m));
  static const char *const known[] = {"role", "content", NULL};
  if (only_known(c, m, known, param)) return -EINVAL;
  const char *role;
  if (block_string(c, m, "role", param, &role)) return -EINVAL;
  const bool user = !strcmp(role, "user"), assistant = !strcmp(role, "assistant"), system = !strcmp(role, "system");
  if (!user && !assistant && !system) {
    snprintf(param + strlen(param), sizeof param - strlen(param), ".role");
    return oai__fail(c, "invalid_value", param, "%s must be \"user\", \"assistant\" or \"system\", got \"%.40s\"",
                     param, role);
  }
  const cJSON *content = oai__get(m, "content");
  char cp[64];
  snprintf(cp, sizeof cp, "%s.content", param);
  if (!content) return oai__fail(c, "missing_required_parameter", cp, "%s is required", cp);
  buf_t text = {0};
  cJSON *calls = oai__must(cJSON_CreateArray());
  int r = 0;
  if (cJSON_IsString(content) || system) {
    r = text_of(c, content, cp, &text);
  } else if (!cJSON_IsArray(content)) {
    r = oai__fail(c, "invalid_type", cp, "%s must be a string or an array of content blocks, got %s", cp,
                  oai__type_name(content));
  } else {
    int j = 0;
    const cJSON *blk;
    cJSON_ArrayForEach(blk, content) {
      char bp[96];
      snprintf(bp, sizeof bp, "%s[%d]", cp, j++);
      const cJSON *type = cJSON_IsObject(blk) ? oai__get(blk, "type") : NULL;
      const char *t = type && cJSON_IsString(type) ? type->valuestring : "";
      if (!strcmp(t, "text")) r = text_block(c, blk, bp, &text);
      else if (!strcmp(t, "tool_use") && assistant) r = tool_use_block(c, blk, bp, calls);
      else if (!strcmp(t, "tool_result") && user) r = tool_result_block(c, v, blk, bp);
      else if (!strcmp(t, "thinking") && assistant) r = thinking_block(c, blk, bp, "thinking", "signature");
      else if (!strcmp(t, "redacted_thinking") && assistant) r = thinking_block(c, blk, bp, "data", NULL);
      else {
        snprintf(bp + strlen(bp), sizeof bp - strlen(bp), ".type");
        r = oai__fail(c, "unsupported_value", bp,
                      "%s: %s%.40s%s blocks are not supported (text; tool_use, thinking in assistant turns; "
                      "tool_result in user turns)", bp, *t ? "\"" : "", *t ? t : oai__type_name(type), *t ? "\"" : "");
      }
      if (r) break;
    }
  }
  const char *calls_text = NULL;
  if (!r && cJSON_GetArraySize(calls)) {
    char *s = cJSON_PrintUnformatted(calls);
    if (!s) abort();
    calls_text = arena_strndup(c->arena, s, strlen(s));
    free(s);
    if (!calls_text) r = oai__oom(c);
  }
  cJSON_Delete(calls);
  /* a user turn of only tool results adds no user message */
  if (!r && (text.len || calls_text || !user || !v->n || strcmp(v->out[v->n - 1].role, "tool")))
    r = emit(c, v, system ? "system" : user ? "user" : "assistant", text.p, text.len, calls_text, NULL); /* static:
                                                                                 * role dies with the tree */
  buf_free(&text);
  return r;
}

/* system, then the messages; a last assistant message is a prefill. */
static int parse_conversation(oai__ctx_t *c, const cJSON *root, anth_req_t *out) {
  const cJSON *x = oai__get(root, "messages");
  if (!x) return oai__fail(c, "missing_required_parameter", "messages", "messages is required");
  if (!cJSON_IsArray(x))
    return oai__fail(c, "invalid_type", "messages", "messages must be an array, got %s", oai__type_name(x));
  const int count = cJSON_GetArraySize(x);
  if (count == 0 || count > c->lim->max_messages)
    return oai__fail(c, "invalid_value", "messages", "messages must have 1 to %d entries, got %d",
                     c->lim->max_messages, count);
  int32_t cap = 1; /* the system prompt */
  const cJSON *m;
  cJSON_ArrayForEach(m, x) {
    const cJSON *content = cJSON_IsObject(m) ? oai__get(m, "content") : NULL;
    cap += 1 + (cJSON_IsArray(content) ? cJSON_GetArraySize(content) : 0);
  }
  conv_t v = {.cap = cap};
  OAI_NEED(c, v.out = arena_array(c->arena, (size_t)cap, sizeof *v.out));
  const cJSON *sys = oai__get(root, "system");
  if (sys) {
    buf_t b = {0};
    int r = text_of(c, sys, "system", &b);
    if (!r) r = emit(c, &v, "system", b.p, b.len, NULL, NULL);
    buf_free(&b);
    if (r) return r;
  }
  int i = 0;
  cJSON_ArrayForEach(m, x) if (message(c, &v, m, i++)) return -EINVAL;
  oai_message_t *last = &v.out[v.n - 1];
  if (!strcmp(last->role, "assistant")) { /* prefill: the answer continues it */
    if (last->tool_calls)
      return oai__fail(c, "invalid_value", "messages", "the last message, an assistant prefill, may hold only text "
                                                       "(it holds tool_use blocks)");
    out->chat.continue_final_message = true;
    out->chat.add_generation_prompt = false;
  }
  out->chat.messages = v.out;
  out->chat.n_messages = v.n;
  return 0;
}

/* ---- tools ---------------------------------------------------------------------------- */

/* tools and tool_choice, checked as Anthropic names them, then handed to
 * oai_tools.c in the chat form (its template tools, its grammar). */
static int parse_tools(oai__ctx_t *c, const cJSON *root, anth_req_t *out) {
  const cJSON *tools = oai__get(root, "tools"), *tc = oai__get(root, "tool_choice");
  if (tools && !cJSON_IsArray(tools))
    return oai__fail(c, "invalid_type", "tools", "tools must be an array, got %s", oai__type_name(tools));
  cJSON *chat = oai__must(cJSON_CreateObject());
  cJSON *arr = oai__must(cJSON_AddArrayToObject(chat, "tools"));
  int i = 0, r = 0;
  const cJSON *t;
  cJSON_ArrayForEach(t, tools) {
    char param[48], np[64];
    snprintf(param, sizeof param, "tools[%d]", i++);
    snprintf(np, sizeof np, "%s.name", param);
    static const char *const known[] = {"type", "name", "description", "input_schema", "cache_control", "strict",
                                        "input_examples", NULL};
    const cJSON *type = cJSON_IsObject(t) ? oai__get(t, "type") : NULL;
    if (!cJSON_IsObject(t) || (type && !(cJSON_IsString(type) && !strcmp(type->valuestring, "custom")))) {
      r = oai__fail(c, "unsupported_value", param, "%s: only custom tools ({\"name\", \"input_schema\"}) are "
                                                   "supported, not server tools", param);
      break;
    }
    const cJSON *schema = oai__get(t, "input_schema"), *desc = oai__get(t, "description");
    const cJSON *strict = oai__get(t, "strict");
    if ((r = only_known(c, t, known, param)) || (r = oai__tool_name(c, t, "name", np)) ||
        (r = cache_control(c, t, param)))
      break;
    if (!schema || !cJSON_IsObject(schema)) {
      r = oai__fail(c, schema ? "invalid_type" : "missing_required_parameter", param,
                    "%s.input_schema must be a JSON schema object", param);
      break;
    }
    if ((desc && !cJSON_IsString(desc)) || (strict && !cJSON_IsBool(strict))) {
      r = oai__fail(c, "invalid_type", param, "%s.%s must be a %s", param, desc && !cJSON_IsString(desc) ?
                    "description" : "strict", desc && !cJSON_IsString(desc) ? "string" : "boolean");
      break;
    }
    /* input_examples: shown to nobody (no template has a slot): refused when given */
    const cJSON *ex = oai__get(t, "input_examples");
    if (ex && !(cJSON_IsArray(ex) && !cJSON_GetArraySize(ex))) {
      r = oai__fail(c, "unsupported_parameter", param, "%s.input_examples is not supported", param);
      break;
    }
    cJSON *o = oai__must(cJSON_CreateObject()), *f = oai__must(cJSON_CreateObject());
    oai__must(cJSON_AddStringToObject(o, "type", "function"));
    cJSON_AddItemToObject(f, "name", oai__must(cJSON_Duplicate(oai__get(t, "name"), 1)));
    if (desc) cJSON_AddItemToObject(f, "description", oai__must(cJSON_Duplicate(desc, 1)));
    cJSON_AddItemToObject(f, "parameters", oai__must(cJSON_Duplicate(schema, 1)));
    cJSON_AddItemToObject(o, "function", f);
    cJSON_AddItemToArray(arr, o);
  }
  bool parallel = true;
  if (!r && tc) {
    static const char *const known[] = {"type", "name", "disable_parallel_tool_use", NULL};
    const cJSON *type = cJSON_IsObject(tc) ? oai__get(tc, "type") : NULL;
    const char *ty = type && cJSON_IsString(type) ? type->valuestring : "";
    bool disable = false;
    c->prefix = "tool_choice";
    r = cJSON_IsObject(tc) ? oai__get_bool(c, tc, "disable_parallel_tool_use", &disable, NULL) : 0;
    c->prefix = NULL;
    parallel = !disable;
    if (!r && (!cJSON_IsObject(tc) || (strcmp(ty, "auto") && strcmp(ty, "any") && strcmp(ty, "tool") &&
                                      strcmp(ty, "none"))))
      r = oai__fail(c, "invalid_value", "tool_choice", "tool_choice must be {\"type\": \"auto\" | \"any\" | "
                                                       "\"tool\" | \"none\"}");
    if (!r) r = only_known(c, tc, known, "tool_choice");
    if (!r && !strcmp(ty, "none") && oai__get(tc, "disable_parallel_tool_use"))
      r = oai__fail(c, "invalid_value", "tool_choice.disable_parallel_tool_use",
                    "tool_choice.disable_parallel_tool_use is not for type \"none\"");
    if (!r && (!strcmp(ty, "any") || !strcmp(ty, "tool")) && !cJSON_GetArraySize(arr))
      r = oai__fail(c, "invalid_value", "tool_choice", "tool_choice \"%s\" needs tools", ty);
    if (!r && !strcmp(ty, "tool")) {
      r = oai__tool_name(c, tc, "name", "tool_choice.name");
      bool found = false;
      cJSON_ArrayForEach(t, tools) found |= !r && !strcmp(oai__get(t, "name")->valuestring, oai__get(tc, "name")->valuestring);
      if (!r && !found)
        r = oai__fail(c, "invalid_value", "tool_choice.name", "tool_choice.name \"%s\" is not one of tools",
                      oai__get(tc, "name")->valuestring);
      if (!r) {
        cJSON *o = oai__must(cJSON_AddObjectToObject(chat, "tool_choice"));
        oai__must(cJSON_AddStringToObject(o, "type", "function"));
        cJSON_AddItemToObject(oai__must(cJSON_AddObjectToObject(o, "function")), "name",
                              oai__must(cJSON_Duplicate(oai__get(tc, "name"), 1)));
      }
    } else if (!r) {
      oai__must(cJSON_AddStringToObject(chat, "tool_choice", !strcmp(ty, "any") ? "required" : ty));
    }
  }
  if (!r) {
    oai__must(cJSON_AddBoolToObject(chat, "parallel_tool_calls", parallel));
    r = oai__parse_tools(c, chat, &out->chat);
  }
  if (!r) r = oai__tool_grammar(c, arr, &out->chat);
  cJSON_Delete(chat);
  return r;
}

/* ---- the rest ------------------------------------------------------------------------ */

static int parse_stop_sequences(oai__ctx_t *c, const cJSON *root, oai_params_t *g) {
  const cJSON *x = oai__get(root, "stop_sequences");
  if (!x) return 0;
  if (!cJSON_IsArray(x))
    return oai__fail(c, "invalid_type", "stop_sequences", "stop_sequences must be an array of strings, got %s",
                     oai__type_name(x));
  const int n = cJSON_GetArraySize(x);
  if (n > c->lim->max_stop)
    return oai__fail(c, "invalid_value", "stop_sequences", "stop_sequences has %d strings; at most %d are accepted",
                     n, c->lim->max_stop);
  const char **stop = arena_array(c->arena, (size_t)(n ? n : 1), sizeof *stop);
  OAI_NEED(c, stop);
  int i = 0;
  const cJSON *s;
  cJSON_ArrayForEach(s, x) {
    char param[32];
    snprintf(param, sizeof param, "stop_sequences[%d]", i);
    const size_t len = cJSON_IsString(s) ? strlen(s->valuestring) : 0;
    if (!cJSON_IsString(s) || len == 0 || len > (size_t)c->lim->max_stop_len)
      return oai__fail(c, "invalid_value", param, "%s must be a non-empty string of at most %d bytes", param,
                       c->lim->max_stop_len);
    OAI_NEED(c, stop[i++] = arena_strndup(c->arena, s->valuestring, len));
  }
  g->stop = stop;
  g->n_stop = n;
  return 0;
}

/* thinking: {"type": "enabled", "budget_tokens"} (at least 1024, below
 * max_tokens, as Anthropic's) is the thinking budget of a thinking model's
 * chat (the server refuses it where the model does not think);
 * {"type": "adaptive"}: the model thinks as it likes. Both set the
 * template's enable_thinking (templates where thinking is opt-in read it)
 * and give the reasoning back as thinking blocks (server/srv_messages.c).
 * {"type": "disabled"}, or no thinking (Anthropic's default): the template
 * is asked not to think (enable_thinking false) and no thinking block is
 * written. */
static int parse_thinking(oai__ctx_t *c, const cJSON *root, anth_req_t *out, bool count) {
  const cJSON *th = oai__get(root, "thinking");
  if (!th) return 0;
  const cJSON *type = cJSON_IsObject(th) ? oai__get(th, "type") : NULL;
  const char *ty = type && cJSON_IsString(type) ? type->valuestring : "";
  if (!strcmp(ty, "disabled") || !strcmp(ty, "adaptive")) {
    static const char *const known[] = {"type", NULL};
    out->thinking = ty[0] == 'a';
    return only_known(c, th, known, "thinking");
  }
  if (strcmp(ty, "enabled"))
    return oai__fail(c, "invalid_value", "thinking", "thinking.type must be \"enabled\", \"adaptive\" or \"disabled\"");
  static const char *const known[] = {"type", "budget_tokens", NULL};
  if (only_known(c, th, known, "thinking")) return -EINVAL;
  const cJSON *b = oai__get(th, "budget_tokens");
  if (!b) return oai__fail(c, "missing_required_parameter", "thinking.budget_tokens",
                           "thinking.budget_tokens is required with thinking enabled");
  const double v = cJSON_IsNumber(b) ? b->valuedouble : -1;
  if (!(v >= 1024 && v <= (1 << 24)) || v != (double)(int32_t)v) /* the range first: the cast is defined */
    return oai__fail(c, "invalid_value", "thinking.budget_tokens",
                     "thinking.budget_tokens must be an integer from 1024 to %d", 1 << 24);
  if (!count && v >= out->chat.params.max_tokens)
    return oai__fail(c, "invalid_value", "thinking.budget_tokens", "thinking.budget_tokens must be less than max_tokens");
  out->thinking = true;
  out->chat.has_thinking_budget = !count; /* count_tokens: the prompt is the same */
  out->chat.thinking_budget = (int32_t)v;
  out->chat.budget_param = "thinking.budget_tokens";
  return 0;
}

/* metadata {user_id}; service_tier "auto" | "standard_only" (one tier here). */
static int parse_metadata(oai__ctx_t *c, const cJSON *root, anth_req_t *out) {
  const cJSON *md = oai__get(root, "metadata");
  if (md && !cJSON_IsObject(md))
    return oai__fail(c, "invalid_type", "metadata", "metadata must be an object, got %s", oai__type_name(md));
  static const char *const known[] = {"user_id", NULL};
  if (md && only_known(c, md, known, "metadata")) return -EINVAL;
  c->prefix = "metadata";
  int r = md ? oai__get_string(c, md, "user_id", &out->user_id, NULL, NULL) : 0;
  c->prefix = NULL;
  if (r) return r;
  const cJSON *st = oai__get(root, "service_tier");
  if (st && !(cJSON_IsString(st) && (!strcmp(st->valuestring, "auto") || !strcmp(st->valuestring, "standard_only"))))
    return oai__fail(c, "invalid_value", "service_tier", "service_tier must be \"auto\" or \"standard_only\"");
  return 0;
}

/* The bit of samp_fields[] named key, for samp_gen_apply's `given`. */
static unsigned field_bit(const char *key) {
  for (int i = 0; i < samp_n_fields; i++)
    if (!strcmp(samp_fields[i].name, key)) return 1u << i;
  return 0;
}

/* max_tokens (required), stop_sequences, stream, temperature, top_p, top_k. */
static int parse_gen(oai__ctx_t *c, const cJSON *root, oai_params_t *g) {
  int64_t v;
  bool given;
  if (oai__get_int(c, root, "max_tokens", 1, INT32_MAX, &v, &given)) return -EINVAL;
  if (!given) return oai__fail(c, "missing_required_parameter", "max_tokens", "max_tokens is required");
  g->max_tokens = (int32_t)v;
  unsigned fields = 0; /* which sampling fields the request gives: the model's defaults for the others */
  float f;
  if (oai__get_float(c, root, "temperature", 0, 1, false, false, &f, &given)) return -EINVAL;
  if (given) g->samp.temperature = f, fields |= field_bit("temperature");
  if (oai__get_float(c, root, "top_p", 0, 1, true, false, &f, &given)) return -EINVAL;
  if (given) g->samp.top_p = f, fields |= field_bit("top_p");
  if (oai__get_int(c, root, "top_k", 0, INT32_MAX, &v, &given)) return -EINVAL;
  if (given) g->samp.top_k = (int32_t)v, fields |= field_bit("top_k");
  samp_gen_apply(c->lim->gen, fields, &g->samp);
  if (oai__get_bool(c, root, "stream", &g->stream, NULL)) return -EINVAL;
  return parse_stop_sequences(c, root, g);
}

static int parse(const char *body, size_t len, const oai_limits_t *lim, arena_t *arena, anth_req_t *out,
                 oai_error_t *err, bool count) {
  oai__ctx_t c;
  oai_limits_t dflt;
  oai__ctx_init(&c, lim, &dflt, arena, err);
  memset(out, 0, sizeof *out);
  oai_params_t *g = &out->chat.params;
  g->samp = oai_samp_defaults();
  g->n = 1;
  g->max_tokens = -1;
  g->prompt_logprobs = -1;
  g->speculative = -1;
  out->chat.add_generation_prompt = true;
  out->chat.parallel_tool_calls = true;
  cJSON *root;
  if (oai__parse_object(&c, body, len, &root)) return oai__end(&c, -EINVAL);
  int r = only_known(&c, root, count ? COUNT_FIELDS : MESSAGES_FIELDS, "");
  if (!r) r = oai__get_string(&c, root, "model", &out->chat.model, NULL, NULL);
  if (!r) r = cache_control(&c, root, "");
  if (!r && !count) r = parse_gen(&c, root, g);
  if (!r && !count) r = parse_metadata(&c, root, out);
  if (!r) r = parse_thinking(&c, root, out, count);
  if (!r) out->chat.template_kwargs = out->thinking ? "{\"enable_thinking\":true}" : "{\"enable_thinking\":false}";
  if (!r) r = parse_conversation(&c, root, out);
  if (!r) r = parse_tools(&c, root, out);
  cJSON_Delete(root);
  return oai__end(&c, !r ? 0 : err->status == 503 ? -ENOMEM : -EINVAL); /* an OAI_NEED deep down: out of memory */
}

int anth_parse_messages(const char *body, size_t len, const oai_limits_t *lim, arena_t *arena, anth_req_t *out,
                        oai_error_t *err) {
  return parse(body, len, lim, arena, out, err, false);
}

int anth_parse_count_tokens(const char *body, size_t len, const oai_limits_t *lim, arena_t *arena,
                            anth_req_t *out, oai_error_t *err) {
  return parse(body, len, lim, arena, out, err, true);
}

int anth_check_version(const char *version, oai_error_t *err) {
  memset(err, 0, sizeof *err);
  bool date = version && strlen(version) == 10;
  for (int i = 0; date && i < 10; i++) date = i == 4 || i == 7 ? version[i] == '-' : version[i] >= '0' && version[i] <= '9';
  if (!version || (date && strcmp(version, "2023-06-01") >= 0)) return 0;
  err->status = 400;
  err->type = "invalid_request_error";
  err->code = "invalid_value";
  snprintf(err->param, sizeof err->param, "anthropic-version");
  snprintf(err->message, sizeof err->message,
           "anthropic-version: \"%.40s\" is not a version this server speaks (2023-06-01 or a later date: "
           "the 2023-06-01 format, which later versions keep)", version);
  return -EINVAL;
}
