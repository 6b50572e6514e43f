/* tests/fuzz/fuzz_hf_modules.c — libFuzzer target for the reader of a
 * sentence-transformers modules.json (hf/hf_pooling.c: the Pooling
 * module's mode, the Normalize module) as hf_open reads a checkpoint
 * folder's.
 *
 * The input is modules.json, then optionally a NUL byte and the Pooling
 * module's config.json, which the reader gets for whatever path the list
 * names (none after the NUL: the file is missing; not JSON: malformed). It
 * traps when a failure comes without a message, and when an accepted
 * folder's keys are outside what the model reads: `<arch>.pooling_type`
 * one of llama.cpp's mean, cls, last (1, 2, 3), tram.pooling.normalize 0
 * or 1.
 *
 *   make fuzz
 *   build/fuzz/fuzz_hf_modules -max_total_time=180 tests/fuzz/corpus/fuzz_hf_modules */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tests/fuzz/fuzz_hf.h"

typedef struct pooling_file {
  const char *text; /* NULL: no such file */
  size_t len;
} pooling_file_t;

static cJSON *read_pooling(void *ctx, const char *name, int *missing, char *err, size_t err_len) {
  const pooling_file_t *f = ctx;
  CHECK(strlen(name) < 256);
  *missing = f->text == NULL;
  if (!f->text) return NULL;
  cJSON *j = cJSON_ParseWithLength(f->text, f->len);
  if (!j) snprintf(err, err_len, "%.200s: not valid JSON", name);
  return j;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  const char *nul = memchr(text, 0, size);
  const size_t mods_len = nul ? (size_t)(nul - text) : size;
  pooling_file_t pooling = {nul ? nul + 1 : NULL, nul ? size - mods_len - 1 : 0};
  cJSON *mods = cJSON_ParseWithLength(text, mods_len);
  if (!mods) return 0;
  char err[256] = "";
  gguf_build_t *b = gguf_build_new();
  int rc = hf__pooling(b, mods, "qwen3", read_pooling, &pooling, "/fuzz", err, sizeof err);
  cJSON_Delete(mods);
  gguf_ctx_t *g = fuzz_hf_finish(b, rc, err, sizeof err);
  if (!g) return 0;
  uint32_t v;
  if (gguf_get_u32(g, "qwen3.pooling_type", &v) == 0) CHECK(v >= 1 && v <= 3);
  CHECK(gguf_get_u32(g, "tram.pooling.normalize", &v) == 0 && v <= 1);
  gguf_close(g);
  return 0;
}
