/* tests/fuzz/fuzz_grammar_schema.c — libFuzzer target for the JSON Schema
 * compiler (grammar/gram_schema.c): the input is parsed with cJSON (first
 * byte: options) and compiled; a grammar that compiles is driven by
 * tests/fuzz/fuzz_grammar.h.
 *
 *   make fuzz
 *   build/fuzz/fuzz_grammar_schema -max_total_time=180 tests/fuzz/corpus/fuzz_grammar_schema */
#include <cjson/cJSON.h>

#include "tests/fuzz/fuzz_grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2 || size > FUZZ_MAX_INPUT) return 0;
  gram_json_opts_t o = {.flexible_ws = data[0] & 1, .ws_max = data[0] >> 4, .additional_default = (data[0] >> 1) & 1};
  char *text = malloc(size);
  if (!text) return 0;
  memcpy(text, data + 1, size - 1);
  text[size - 1] = 0;
  cJSON *j = cJSON_Parse(text);
  free(text);
  if (!j) return 0;
  gram_err_t err;
  gram_t *g = gram_compile_json_schema(j, &o, NULL, &err);
  cJSON_Delete(j);
  fuzz_drive(g, &err, data, size);
  return 0;
}
