/* tests/fuzz/fuzz_chat_request.c — libFuzzer target for a chat request's
 * way to the template: the chat parser (api/oai_request.h, its thinking
 * fields chat_template_kwargs, reasoning_effort and thinking_token_budget
 * included), then what the server renders from it (oai_chat_messages,
 * oai_chat_extra) through a template that reads the variables a thinking
 * template reads. Promises checked: a refusal names a field and says why;
 * an accepted chat_template_kwargs is a JSON object within its limits;
 * a render fails only with a message; nothing crashes, leaks or hangs.
 *
 *   make fuzz
 *   build/fuzz/fuzz_chat_request -max_total_time=180 tests/fuzz/corpus/fuzz_chat_request */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/oai_chat_val.h"
#include "api/oai_request.h"
#include "text/chat_template.h"

static const char TEMPLATE[] =
    "{% if reasoning_effort is defined %}effort={{ reasoning_effort }};{% endif %}"
    "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
    "{% if enable_thinking is defined and enable_thinking is false %}<think></think>{% else %}<think>{% endif %}"
    "{% if tools %}{{ tools | tojson }}{% endif %}{% for k in extra_keys | default([]) %}{{ k }}{% endfor %}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static chat_tmpl_t *t;
  if (!t && !(t = chat_tmpl_compile(TEMPLATE, sizeof TEMPLATE - 1, NULL, 0))) abort();
  arena_t a;
  arena_init(&a, 0, 0);
  oai_chat_req_t r;
  oai_error_t e;
  if (oai_parse_chat((const char *)data, size, NULL, &a, &r, &e) != 0) {
    if (!e.message[0]) abort(); /* a refusal says why */
    arena_free(&a);
    return 0;
  }
  if (r.template_kwargs) {
    cJSON *k = cJSON_Parse(r.template_kwargs);
    if (!cJSON_IsObject(k) || cJSON_GetArraySize(k) > OAI_MAX_TEMPLATE_KWARGS ||
        strlen(r.template_kwargs) > OAI_MAX_TEMPLATE_KWARGS_BYTES)
      abort();
    cJSON_Delete(k);
  }
  if (r.has_thinking_budget && r.thinking_budget < 0) abort();
  const chat_tmpl_input_t in = {.messages = oai_chat_messages(&a, r.messages, r.n_messages),
                                .add_generation_prompt = 1,
                                .extra = oai_chat_extra(&a, r.tools, r.template_kwargs, r.reasoning_effort),
                                .max_output = 1 << 16,
                                .max_steps = 100000};
  char *out = NULL, err[256] = "";
  size_t len = 0;
  if (chat_tmpl_render(t, &in, &out, &len, err, sizeof err) != 0) {
    if (out || !err[0]) abort();
  } else if (!out || strlen(out) > len) {
    abort();
  }
  free(out);
  arena_free(&a);
  return 0;
}
