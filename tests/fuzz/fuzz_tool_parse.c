/* tests/fuzz/fuzz_tool_parse.c — libFuzzer target for reading tool calls
 * out of model output (api/oai_tool_parse.h): model output follows what
 * users put in prompts, so it is outside input too.
 *
 * The first byte picks the format (and the parallel limit), the rest is the
 * output text. Promises checked: it never fails; without calls the content
 * is the whole text; with calls, each has a non-empty name and arguments
 * that parse as a JSON object, and the content lies inside the text.
 * Harmony (bit 3 of the first byte): the text is raw gpt-oss output, put
 * through the reasoning splitter with calls kept (text/reasoning.h) as the
 * server does; the content is a prefix of the splitter's answer, each call
 * has a name and arguments (JSON or not: vLLM keeps them as written).
 *
 *   make fuzz
 *   build/fuzz/fuzz_tool_parse -max_total_time=180 tests/fuzz/corpus/fuzz_tool_parse */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/oai_tool_parse.h"
#include "base/buf.h"
#include "text/reasoning.h"

static void take(void *ctx, bool thinking, const char *s, size_t n) {
  if (!thinking) buf_put(ctx, s, n);
}

/* Raw harmony output text[len] as the server reads it. */
static void harmony(const char *text, size_t len, int32_t max) {
  reason_split_t r;
  reason_split_init(&r, REASON_GPT_OSS, NULL, 0);
  r.calls = true;
  buf_t answer = {0};
  reason_split_feed(&r, text, len, take, &answer);
  reason_split_stopped(&r, take, &answer);
  reason_split_end(&r, take, &answer);
  arena_t a;
  arena_init(&a, 0, 0);
  oai_tool_parse_t p;
  const char *s = answer.p ? answer.p : "";
  oai_tools_parse(OAI_TOOLS_HARMONY, s, answer.len, max, &a, &p);
  if (p.content && (p.content != s || p.content_len > answer.len)) abort();
  if (max && p.n_calls > 1) abort();
  for (int32_t i = 0; i < p.n_calls; i++)
    if (!p.calls[i].name[0] || !p.calls[i].arguments) abort();
  arena_free(&a);
  buf_free(&answer);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const oai_tools_format_t f = (oai_tools_format_t)(data[0] % 4);
  const int32_t max = data[0] & 4 ? 1 : 0;
  const char *text = (const char *)data + 1;
  const size_t len = size - 1;
  if (data[0] & 8) {
    harmony(text, len, max);
    return 0;
  }
  arena_t a;
  arena_init(&a, 0, 0);
  oai_tool_parse_t p;
  oai_tools_parse(f, text, len, max, &a, &p);
  if (p.n_calls == 0 && !(p.content == (len ? text : NULL) && p.content_len == len)) abort();
  if (max && p.n_calls > 1) abort();
  if (p.content && (p.content < text || p.content + p.content_len > text + len)) abort();
  for (int32_t i = 0; i < p.n_calls; i++) {
    if (!p.calls[i].name[0]) abort();
    cJSON *args = cJSON_Parse(p.calls[i].arguments);
    if (!cJSON_IsObject(args)) abort();
    cJSON_Delete(args);
  }
  arena_free(&a);
  return 0;
}
