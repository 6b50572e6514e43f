/* api/anth_write.c — the JSON of Anthropic's Messages API (see anth.h):
 * the message object, the stream's events (each framed as
 * "event: <type>\ndata: <json>\n\n", as Anthropic sends them) and the
 * error object. Text is written as valid UTF-8 whatever it holds
 * (oai__text). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/anth.h"
#include "api/oai_json.h"
#include "base/buf.h"

const char *anth_stop_reason(sched_finish_t f, const char *stop_str, bool called) {
  if (f == SCHED_FINISH_NONE) return NULL;
  if (f == SCHED_FINISH_LENGTH) return "max_tokens";
  if (stop_str) return "stop_sequence"; /* a call cut by a stop sequence is no tool use */
  if (called && f == SCHED_FINISH_STOP) return "tool_use";
  return "end_turn";
}

static void add_str_or_null(cJSON *o, const char *key, const char *s) {
  if (s) cJSON_AddItemToObject(o, key, oai__text(s, strlen(s)));
  else oai__must(cJSON_AddNullToObject(o, key));
}

/* A block as the message and content_block_start carry it; start: empty
 * (text "", input {}). */
static cJSON *block_json(const anth_block_t *b, bool start) {
  cJSON *o = oai__must(cJSON_CreateObject());
  if (b->kind == ANTH_BLOCK_TEXT || b->kind == ANTH_BLOCK_THINKING) {
    const char *key = b->kind == ANTH_BLOCK_TEXT ? "text" : "thinking";
    oai__must(cJSON_AddStringToObject(o, "type", key));
    cJSON_AddItemToObject(o, key, oai__text(start ? "" : b->text, start ? 0 : b->text_len));
    if (b->kind == ANTH_BLOCK_THINKING) oai__must(cJSON_AddStringToObject(o, "signature", "")); /* nothing to sign */
    return o;
  }
  cJSON *input = start || !b->input ? oai__must(cJSON_CreateObject()) : cJSON_Parse(b->input);
  if (!cJSON_IsObject(input)) { /* a forced call cut by max_tokens: an incomplete tool_use, input {} */
    cJSON_Delete(input);
    input = oai__must(cJSON_CreateObject());
  }
  oai__must(cJSON_AddStringToObject(o, "type", "tool_use"));
  add_str_or_null(o, "id", b->id);
  add_str_or_null(o, "name", b->name);
  cJSON_AddItemToObject(o, "input", input);
  return o;
}

static cJSON *usage_json(const anth_msg_t *m) {
  cJSON *u = oai__must(cJSON_CreateObject());
  oai__must(cJSON_AddNumberToObject(u, "input_tokens", m->input_tokens));
  oai__must(cJSON_AddNumberToObject(u, "cache_creation_input_tokens", 0));
  oai__must(cJSON_AddNumberToObject(u, "cache_read_input_tokens", m->cache_read_tokens));
  oai__must(cJSON_AddNumberToObject(u, "output_tokens", m->output_tokens));
  return u;
}

static cJSON *message_json(const anth_msg_t *m) {
  cJSON *o = oai__must(cJSON_CreateObject());
  add_str_or_null(o, "id", m->id);
  oai__must(cJSON_AddStringToObject(o, "type", "message"));
  oai__must(cJSON_AddStringToObject(o, "role", "assistant"));
  add_str_or_null(o, "model", m->model);
  cJSON *content = oai__must(cJSON_AddArrayToObject(o, "content"));
  for (int32_t i = 0; i < m->n_blocks; i++) cJSON_AddItemToArray(content, block_json(&m->blocks[i], false));
  add_str_or_null(o, "stop_reason", m->stop_reason);
  add_str_or_null(o, "stop_sequence", m->stop_sequence);
  cJSON_AddItemToObject(o, "usage", usage_json(m));
  return o;
}

char *anth_write_message(const anth_msg_t *m) { return oai__print(message_json(m)); }

char *anth_write_count(int32_t n) {
  cJSON *o = oai__must(cJSON_CreateObject());
  oai__must(cJSON_AddNumberToObject(o, "input_tokens", n));
  return oai__print(o);
}

/* "event: <type>\ndata: <e printed>\n\n" (e deleted). */
static char *frame(const char *type, cJSON *e) {
  char *json = oai__print(e);
  buf_t b = {0};
  buf_printf(&b, "event: %s\ndata: %s\n\n", type, json);
  free(json);
  return b.p;
}

static cJSON *event(const char *type) {
  cJSON *e = oai__must(cJSON_CreateObject());
  oai__must(cJSON_AddStringToObject(e, "type", type));
  return e;
}

char *anth_event_message_start(const anth_msg_t *m) {
  cJSON *e = event("message_start");
  cJSON_AddItemToObject(e, "message", message_json(m));
  return frame("message_start", e);
}

char *anth_event_block_start(int32_t i, const anth_block_t *b) {
  cJSON *e = event("content_block_start");
  oai__must(cJSON_AddNumberToObject(e, "index", i));
  cJSON_AddItemToObject(e, "content_block", block_json(b, true));
  return frame("content_block_start", e);
}

char *anth_event_block_delta(int32_t i, anth_block_kind_t kind, const char *text, size_t len) {
  cJSON *e = event("content_block_delta");
  oai__must(cJSON_AddNumberToObject(e, "index", i));
  cJSON *d = oai__must(cJSON_AddObjectToObject(e, "delta"));
  static const char *const type[] = {"text_delta", "input_json_delta", "thinking_delta"};
  static const char *const key[] = {"text", "partial_json", "thinking"};
  oai__must(cJSON_AddStringToObject(d, "type", type[kind]));
  cJSON_AddItemToObject(d, key[kind], oai__text(text, len));
  return frame("content_block_delta", e);
}

char *anth_event_block_stop(int32_t i) {
  cJSON *e = event("content_block_stop");
  oai__must(cJSON_AddNumberToObject(e, "index", i));
  return frame("content_block_stop", e);
}

char *anth_event_message_delta(const anth_msg_t *m) {
  cJSON *e = event("message_delta");
  cJSON *d = oai__must(cJSON_AddObjectToObject(e, "delta"));
  add_str_or_null(d, "stop_reason", m->stop_reason);
  add_str_or_null(d, "stop_sequence", m->stop_sequence);
  cJSON *u = oai__must(cJSON_AddObjectToObject(e, "usage"));
  oai__must(cJSON_AddNumberToObject(u, "output_tokens", m->output_tokens));
  return frame("message_delta", e);
}

char *anth_event_simple(const char *type) { return frame(type, event(type)); }

/* Anthropic's error type for an HTTP status. */
static const char *error_type(int status) {
  switch (status) {
  case 401: return "authentication_error";
  case 402: return "billing_error";
  case 403: return "permission_error";
  case 404: return "not_found_error";
  case 413: return "request_too_large";
  case 429: return "rate_limit_error";
  case 503:
  case 529: return "overloaded_error";
  case 504: return "timeout_error";
  default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

static cJSON *error_json(int status, const char *message, const char *param) {
  cJSON *o = event("error");
  cJSON *e = oai__must(cJSON_AddObjectToObject(o, "error"));
  oai__must(cJSON_AddStringToObject(e, "type", error_type(status)));
  const char *msg = message ? message : "";
  const size_t pl = param ? strlen(param) : 0;
  if (pl && strncmp(msg, param, pl) != 0) { /* "param: message", as Anthropic names fields */
    buf_t b = {0};
    buf_printf(&b, "%s: %s", param, msg);
    cJSON_AddItemToObject(e, "message", oai__text(b.p, b.len));
    buf_free(&b);
  } else {
    cJSON_AddItemToObject(e, "message", oai__text(msg, strlen(msg)));
  }
  return o;
}

char *anth_event_error(int status, const char *message) { return frame("error", error_json(status, message, NULL)); }

char *anth_error_body(int status, const char *type, const char *message, const char *param, const char *code) {
  (void)type, (void)code;
  return oai__print(error_json(status, message, param));
}
