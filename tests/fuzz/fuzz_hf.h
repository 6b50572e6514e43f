/* tests/fuzz/fuzz_hf.h — what the hf/ fuzz targets share: CHECK (a trap
 * unless cond holds) and the end of a translation into a GGUF builder. */
#ifndef TRAM_FUZZ_HF_H
#define TRAM_FUZZ_HF_H

#include "hf/hf_internal.h"

#define CHECK(cond) \
  do {              \
    if (!(cond)) __builtin_trap(); \
  } while (0)

/* Ends a translation that returned rc into b: a failure (of the translation
 * or of finishing the builder) must come with a message in err. Returns the
 * finished context (the caller's, gguf_close), or NULL; b is consumed. */
static inline gguf_ctx_t *fuzz_hf_finish(gguf_build_t *b, int rc, char *err, size_t err_len) {
  if (rc != 0) {
    CHECK(err[0] != 0);
    gguf_build_abort(b);
    return NULL;
  }
  gguf_ctx_t *g = gguf_build_finish(b, err, err_len);
  if (!g) CHECK(err[0] != 0);
  return g;
}

#endif
