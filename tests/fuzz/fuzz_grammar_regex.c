/* tests/fuzz/fuzz_grammar_regex.c — libFuzzer target for the regex compiler
 * (grammar/gram_regex.c): the input is the source; a grammar that compiles
 * is driven by tests/fuzz/fuzz_grammar.h.
 *
 *   make fuzz
 *   build/fuzz/fuzz_grammar_regex -max_total_time=180 tests/fuzz/corpus/fuzz_grammar_regex */
#include "tests/fuzz/fuzz_grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0 || size > FUZZ_MAX_INPUT) return 0;
  gram_err_t err;
  gram_t *g = gram_compile_regex((const char *)data, size, NULL, &err);
  fuzz_drive(g, &err, data, size);
  return 0;
}
