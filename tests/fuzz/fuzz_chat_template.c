/* tests/fuzz/fuzz_chat_template.c — libFuzzer target for the chat-template
 * interpreter (text/chat_template.h, text/jinja/jinja*.c).
 *
 * The input is a template source; it is compiled and, when that succeeds,
 * rendered with a fixed conversation (system, user, assistant with a tool
 * call, tool) and tools, under small limits. Any outcome is fine except a
 * crash, a sanitizer report, or a broken promise of chat_template.h: a
 * failure without a message, output with a length that disagrees with its
 * bytes, or output past the limit.
 *
 *   make fuzz
 *   build/fuzz/fuzz_chat_template -max_total_time=180 tests/fuzz/corpus/fuzz_chat_template */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/oai_chat_val.h"
#include "text/chat_template.h"

#define CHECK(cond) \
  do {              \
    if (!(cond)) __builtin_trap(); \
  } while (0)

static const char MESSAGES[] =
    "[{\"role\": \"system\", \"content\": \" Be brief. \"},"
    " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Hi\"}, {\"type\": \"text\", \"text\": \"é😀\"}]},"
    " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"call12345\", \"type\": \"function\","
    "   \"function\": {\"name\": \"f\", \"arguments\": {\"a\": 1, \"b\": [true, null, 2.5]}}}]},"
    " {\"role\": \"tool\", \"content\": \"{\\\"r\\\": 1}\", \"tool_call_id\": \"call12345\"},"
    " {\"role\": \"user\", \"content\": \"Bye\"}]";
static const char EXTRA[] =
    "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}}}}],"
    " \"date_string\": \"01 Jan 2025\"}";

enum { MAX_OUTPUT = 1 << 16 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static cJSON *messages, *extra;
  if (!messages) {
    messages = cJSON_Parse(MESSAGES);
    extra = cJSON_Parse(EXTRA);
    CHECK(messages && extra);
  }
  char err[256];
  err[0] = 0;
  chat_tmpl_t *t = chat_tmpl_compile((const char *)data, size, err, sizeof err);
  if (!t) {
    CHECK(err[0] != 0);
    return 0;
  }
  arena_t a;
  arena_init(&a, 0, 0);
  const chat_val_t *messages_val = oai_chat_val(&a, messages), *extra_val = oai_chat_val(&a, extra);
  for (int agp = 0; agp < 2; agp++) {
    chat_tmpl_input_t in = {.messages = messages_val, .add_generation_prompt = agp, .bos_token = "<s>",
                            .eos_token = "</s>", .extra = extra_val, .max_output = MAX_OUTPUT,
                            .max_memory = 64u << 20, .max_steps = 200000};
    char *out = NULL;
    size_t n = 0;
    err[0] = 0;
    int rc = chat_tmpl_render(t, &in, &out, &n, err, sizeof err);
    if (rc == 0) {
      CHECK(out && strlen(out) <= n && n <= MAX_OUTPUT && out[n] == 0);
      free(out);
    } else {
      CHECK(rc < 0 && !out);
      CHECK(err[0] != 0 || rc == -EBADMSG);
    }
  }
  arena_free(&a);
  chat_tmpl_free(t);
  return 0;
}
