/* tests/fuzz/fuzz_anth_request.c — libFuzzer target for Anthropic's
 * Messages request parser (api/anth.h): on any bytes, parsed as
 * /v1/messages and as /v1/messages/count_tokens, under an arena cap taken
 * from the input's first byte (so the out-of-memory paths run too), it must
 * not crash, leak or read out of bounds; a request it accepts must be
 * whole: at least one message, each with a known role and NUL-terminated
 * content of its length, tool calls, tools and the tool-call grammar that
 * parse as JSON, a forced tool's name among the tools; a refusal names a
 * status and a message. The message writer then writes the accepted
 * request's text back as a block. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/anth.h"

static void check_json(const char *text, int want_array) {
  if (!text) return;
  cJSON *x = cJSON_Parse(text);
  if (!x || (want_array && !cJSON_IsArray(x))) abort();
  cJSON_Delete(x);
}

static void check(const anth_req_t *r) {
  const oai_chat_req_t *ch = &r->chat;
  if (ch->n_messages < 1) abort();
  for (int32_t i = 0; i < ch->n_messages; i++) {
    const oai_message_t *m = &ch->messages[i];
    if (strcmp(m->role, "system") && strcmp(m->role, "user") && strcmp(m->role, "assistant") &&
        strcmp(m->role, "tool"))
      abort();
    if (!m->content || strlen(m->content) > m->content_len) abort();
    if (!strcmp(m->role, "tool") != (m->tool_call_id != NULL)) abort();
    check_json(m->tool_calls, 1);
  }
  check_json(ch->tools, 1);
  if (ch->params.grammar.kind == OAI_GRAMMAR_JSON_SCHEMA) check_json(ch->params.grammar.src, 0);
  if (ch->tool_choice == OAI_TOOL_CHOICE_NAMED && (!ch->tool_name || !ch->tools || !strstr(ch->tools, ch->tool_name)))
    abort();
  if (ch->continue_final_message && strcmp(ch->messages[ch->n_messages - 1].role, "assistant")) abort();
  const oai_message_t *last = &ch->messages[ch->n_messages - 1];
  const anth_block_t b = {.kind = ANTH_BLOCK_TEXT, .text = last->content, .text_len = last->content_len};
  const anth_msg_t msg = {.id = "msg_x", .model = ch->model, .blocks = &b, .n_blocks = 1, .stop_reason = "end_turn"};
  free(anth_write_message(&msg));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const size_t cap = data[0] < 16 ? (size_t)(data[0] + 1) * 64 : 0; /* a tight cap on some inputs */
  for (int count = 0; count < 2; count++) {
    arena_t a;
    arena_init(&a, 0, cap);
    anth_req_t r;
    oai_error_t e;
    const int rc = count ? anth_parse_count_tokens((const char *)data + 1, size - 1, NULL, &a, &r, &e)
                         : anth_parse_messages((const char *)data + 1, size - 1, NULL, &a, &r, &e);
    if (rc == 0) check(&r);
    else if (!e.status || !e.message[0] || (rc != -EINVAL && rc != -ENOMEM)) abort();
    else free(anth_error_body(e.status, e.type, e.message, e.param[0] ? e.param : NULL, e.code));
    arena_free(&a);
  }
  return 0;
}
