/* tests/fuzz/fuzz_gguf.c — libFuzzer target for the GGUF reader.
 *
 * Feeds arbitrary bytes to gguf_open_buffer(), then walks everything the
 * context exposes: every key and value (each string, each array element, the
 * typed getters), every tensor info and every byte of every tensor's data,
 * so that ASan reports any view that reaches outside the input. It also
 * traps when a promise of gguf.h is broken: a failure without a one-line
 * message, a lookup that does not find what was just listed, a tensor whose
 * sizes disagree with its type, or data outside the input. The model's
 * generation defaults (model_gen_defaults) are read from every file that
 * opens: only values a request may ask come out; and its hyper-parameters
 * as a model load reads them (fuzz_hparams.h: every family's keys, the
 * hybrids' ssm.* and attention.recurrent_layers included).
 *
 *   make fuzz
 *   build/fuzz/fuzz_gguf -max_total_time=180 tests/fuzz/corpus/fuzz_gguf */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/log.h"
#include "kernels/kern_types.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "tests/fuzz/fuzz_hparams.h"

static volatile uint64_t sink;

#define CHECK(cond) \
  do {              \
    if (!(cond)) __builtin_trap(); \
  } while (0)

static void touch(const void *p, uint64_t n) {
  const uint8_t *b = p;
  uint64_t s = 0;
  for (uint64_t i = 0; i < n; i++) s += b[i];
  sink += s;
}

static void walk_kv(const gguf_ctx_t *ctx, const gguf_kv_t *kv) {
  touch(kv->key.ptr, kv->key.len);
  CHECK(kv->key.len > 0);
  if (kv->type == GGUF_TYPE_STRING) {
    touch(kv->strs[0].ptr, kv->strs[0].len);
  } else if (kv->type == GGUF_TYPE_ARRAY && kv->arr_type == GGUF_TYPE_STRING) {
    for (uint64_t i = 0; i < kv->n; i++) touch(kv->strs[i].ptr, kv->strs[i].len);
  } else if (kv->type == GGUF_TYPE_ARRAY) {
    touch(kv->data, kv->n * gguf_type_size(kv->arr_type));
    for (uint64_t i = 0; i <= kv->n && i < 64; i++) { /* i == n: out of range */
      int64_t iv;
      float fv;
      int ri = gguf_arr_i64(kv, i, &iv), rf = gguf_arr_f32(kv, i, &fv);
      CHECK(i < kv->n || (ri < 0 && rf < 0));
      sink += (uint64_t)ri + (uint64_t)rf;
    }
  } else {
    CHECK(kv->type < GGUF_TYPE_COUNT);
    touch(kv->data, gguf_type_size(kv->type));
  }

  /* Lookup by key: keys are unique, so a key without NULs finds this kv. */
  char key[256];
  if (kv->key.len >= sizeof key || memchr(kv->key.ptr, 0, kv->key.len)) return;
  memcpy(key, kv->key.ptr, kv->key.len);
  key[kv->key.len] = '\0';
  CHECK(gguf_find_kv(ctx, key) == kv);
  uint32_t u32;
  uint64_t u64;
  int64_t i64;
  float f32;
  int b;
  gguf_str_t s;
  const gguf_str_t *sv;
  gguf_type_t et;
  sink += (uint64_t)gguf_get_u32(ctx, key, &u32) + (uint64_t)gguf_get_u64(ctx, key, &u64) +
          (uint64_t)gguf_get_i64(ctx, key, &i64) + (uint64_t)gguf_get_f32(ctx, key, &f32) +
          (uint64_t)gguf_get_bool(ctx, key, &b);
  if (gguf_get_str(ctx, key, &s) == 0) touch(s.ptr, s.len);
  int64_t n = gguf_get_arr_str(ctx, key, &sv);
  for (int64_t i = 0; i < n; i++) touch(sv[i].ptr, sv[i].len);
  sink += (uint64_t)gguf_get_arr_n(ctx, key, &et);
}

static void walk_tensor(const gguf_ctx_t *ctx, const gguf_tensor_t *t, const uint8_t *data, size_t size) {
  touch(t->name.ptr, t->name.len);
  CHECK(t->n_dims >= 1 && t->n_dims <= 4);
  CHECK(kern_type_is_weight(t->type));
  uint64_t rows = 1;
  for (int d = 0; d < 4; d++) {
    CHECK(t->ne[d] >= 1);
    if (d > 0) rows *= (uint64_t)t->ne[d];
  }
  CHECK(t->nbytes == rows * (uint64_t)kern_type_row_bytes(t->type, t->ne[0]));
  const uint8_t *p = t->data;
  CHECK(p >= data && t->nbytes <= (uint64_t)(data + size - p));
  CHECK(t->offset % gguf_alignment(ctx) == 0);
  touch(t->data, t->nbytes);
  char name[80];
  if (t->name.len >= sizeof name || memchr(t->name.ptr, 0, t->name.len)) return;
  memcpy(name, t->name.ptr, t->name.len);
  name[t->name.len] = '\0';
  CHECK(gguf_find_tensor(ctx, name) == t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[512];
  gguf_ctx_t *ctx = gguf_open_buffer(data, size, err, sizeof err);
  if (!ctx) {
    CHECK(err[0] != '\0' && strchr(err, '\n') == NULL);
    return 0;
  }
  uint32_t align = gguf_alignment(ctx);
  CHECK(gguf_version(ctx) == 2 || gguf_version(ctx) == 3);
  CHECK(align != 0 && (align & (align - 1)) == 0);
  CHECK(gguf_data_offset(ctx) <= size && gguf_file_size(ctx) == size);
  for (uint64_t i = 0; i < gguf_kv_count(ctx); i++) walk_kv(ctx, gguf_kv_at(ctx, i));
  CHECK(gguf_kv_at(ctx, gguf_kv_count(ctx)) == NULL);
  for (uint64_t i = 0; i < gguf_tensor_count(ctx); i++) walk_tensor(ctx, gguf_tensor_at(ctx, i), data, size);
  CHECK(gguf_tensor_at(ctx, gguf_tensor_count(ctx)) == NULL);
  log_set_level(LOG_LEVEL_ERROR); /* its warnings about bad values */
  samp_gen_defaults_t gen;
  model_gen_defaults(ctx, &gen);
  CHECK(gen.max_tokens >= 0 && samp_params_validate(&gen.samp, 1, NULL, 0) == 0);
  fuzz_check_hparams(ctx);
  gguf_close(ctx);
  return 0;
}
