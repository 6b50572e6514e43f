/* tests/fuzz/fuzz_tok_nfc.c — libFuzzer target for the NFC normalization
 * of request text (text/tok_norm.c, tokenizer.json's NFC normalizer).
 *
 * The input, made valid UTF-8 as tok_encode makes it (ill-formed sequences
 * become U+FFFD), is normalized. Promises checked: it succeeds; ASCII text
 * is left alone (no copy); the result is valid UTF-8; normalizing the
 * result changes nothing (NFC is idempotent).
 *
 *   make fuzz
 *   build/fuzz/fuzz_tok_nfc -max_total_time=180 tests/fuzz/corpus/fuzz_tok_nfc */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"

#define CHECK(cond) \
  do {              \
    if (!(cond)) __builtin_trap(); \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *text = malloc(3 * size + 1);
  CHECK(text != NULL);
  const size_t n = tok__utf8_sanitize(data, size, 0, text, NULL);
  int ascii = 1;
  for (size_t i = 0; i < n; i++) ascii &= text[i] < 0x80;
  uint8_t *nfc = NULL;
  size_t m = 0;
  CHECK(tok__nfc(text, n, &nfc, &m) == 0);
  if (ascii) CHECK(nfc == NULL);
  if (nfc) {
    CHECK(utf8_valid(nfc, m));
    uint8_t *again = NULL;
    size_t k = 0;
    CHECK(tok__nfc(nfc, m, &again, &k) == 0);
    CHECK(again == NULL || (k == m && memcmp(again, nfc, m) == 0));
    free(again);
  }
  free(nfc);
  free(text);
  return 0;
}
