/* tests/fuzz/fuzz_grammar.h — shared by the grammar compilers' libFuzzer
 * targets: once a grammar compiles, drive a matcher over a small vocabulary
 * (token choices taken from the input bytes) and check the engine's promises:
 * every token in a mask is accepted (or its step hits a resource bound of the
 * step itself, max_closure / max_frames, which names itself: never a
 * refusal), tokens outside it are refused, an error always has a message. */
#ifndef TRAM_FUZZ_GRAMMAR_H
#define TRAM_FUZZ_GRAMMAR_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram.h"

#define CHECK(cond)                  \
  do {                               \
    if (!(cond)) __builtin_trap();   \
  } while (0)

enum { FUZZ_MAX_INPUT = 4096 };

static const char *const FUZZ_VOCAB[] = {"a", "b", "ab", "0", "12", "-", "\"", "\":", "{", "}", "[", "]", ",",
                                         " ", "\n", "x", "é", "\xc3", "\xa9", "true", "null", "\\", ".", ""};
#define FUZZ_NV ((int32_t)(sizeof FUZZ_VOCAB / sizeof *FUZZ_VOCAB))

/* Compiled or not: checks the error, then walks up to 16 tokens. */
static void fuzz_drive(gram_t *g, const gram_err_t *err, const uint8_t *data, size_t size) {
  if (!g) {
    CHECK(err->msg[0] != 0);
    return;
  }
  static gram_vocab_t *v;
  if (!v) {
    size_t lens[FUZZ_NV];
    for (int32_t i = 0; i < FUZZ_NV; i++) lens[i] = strlen(FUZZ_VOCAB[i]);
    int32_t eog = FUZZ_NV - 1;
    gram_err_t e;
    v = gram_vocab_create(FUZZ_NV, FUZZ_VOCAB, lens, &eog, 1, &e);
    CHECK(v);
  }
  gram_cache_t *c = gram_cache_create(g, v);
  gram_matcher_t *m = c ? gram_matcher_create(c, NULL) : NULL;
  if (m) {
    uint32_t mask[(FUZZ_NV + 31) / 32];
    for (size_t step = 0; step < 16; step++) {
      int32_t n = gram_matcher_fill_mask(m, mask);
      if (n <= 0) break;
      for (int32_t t = 0; t < FUZZ_NV; t++) {
        int in = mask[t >> 5] >> (t & 31) & 1;
        int rc = gram_matcher_accept_token(m, t);
        CHECK(in ? rc == 0 || (rc == GRAM_ELIMIT && gram_matcher_error(m)[0]) : rc != 0);
        if (rc == 0) CHECK(gram_matcher_rollback(m, 1) == 1);
      }
      int32_t pick = (int32_t)(data[step % size] % (uint32_t)n), t = 0;
      for (;; t++)
        if ((mask[t >> 5] >> (t & 31) & 1) && pick-- == 0) break;
      int rc = gram_matcher_accept_token(m, t);
      CHECK(rc == 0 || (rc == GRAM_ELIMIT && gram_matcher_error(m)[0]));
      if (rc) break;
    }
    int b;
    for (int k = 0; k < 64 && (b = gram_matcher_shortest_byte(m)) >= 0; k++) {
      char ch = (char)b;
      const int rc = gram_matcher_accept_bytes(m, &ch, 1);
      CHECK(rc == 0 || (rc == GRAM_ELIMIT && gram_matcher_error(m)[0])); /* a resource limit, named */
      if (rc) break;
    }
  }
  gram_matcher_destroy(m);
  gram_cache_destroy(c);
  gram_destroy(g);
}

#endif
