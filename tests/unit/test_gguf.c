/* tests/unit/test_gguf.c — the GGUF reader on good files: synthetic files
 * written by gguf_writer read back exactly (every value type, tensors of
 * every supported type in v2 and v3, alignments, lookups over many names)
 * and the real default model. Bad files are test_gguf_malformed.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tests/unit/gguf_writer.h"
#include "tests/unit/testutil.h"

/* Finishes and frees w, and opens its image, which must be valid, from an
 * exactly sized buffer *img (*size bytes; the caller frees it after
 * gguf_close). */
static gguf_ctx_t *open_written(gw_t *w, uint8_t **img, size_t *size) {
  char err[512];
  gguf_ctx_t *ctx = gw_open_written(w, img, size, err, sizeof err);
  if (!ctx) fail_msg("a valid file did not open: %s", err);
  return ctx;
}

static int str_is(gguf_str_t s, const char *want) { return gguf_str_eq(s, want); }

/* ---- every value type ------------------------------------------------ */

static void reads_every_value_type(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed());
  uint64_t u64 = tu_next(&r) | (UINT64_C(1) << 63);
  int64_t i64 = -(int64_t)(tu_next(&r) >> 2) - 1;
  float f32 = (float)tu_normal(&r);
  double f64 = tu_normal(&r) * 1e300;
  int32_t i32s[5];
  for (int i = 0; i < 5; i++) i32s[i] = (int32_t)tu_next(&r);
  float f32s[3] = {(float)tu_normal(&r), (float)tu_normal(&r), -0.0f};
  double f64s[2] = {tu_normal(&r), 1e300};
  uint8_t bools[4] = {1, 0, 0, 1};
  uint16_t u16s[2] = {65535, 7};
  const char *strs[4] = {"alpha", "", "\xc4\xa0the", "a much longer string with spaces"};

  gw_t *w = gw_new();
  gw_kv_u8(w, "t.u8", 200);
  gw_kv_i8(w, "t.i8", -100);
  gw_kv_u16(w, "t.u16", 60000);
  gw_kv_i16(w, "t.i16", -30000);
  gw_kv_u32(w, "t.u32", 4000000000u);
  gw_kv_i32(w, "t.i32", -2000000000);
  gw_kv_f32(w, "t.f32", f32);
  gw_kv_bool(w, "t.bool", 1);
  gw_kv_str(w, "t.str", "hello, world");
  gw_kv_u64(w, "t.u64", u64);
  gw_kv_i64(w, "t.i64", i64);
  gw_kv_f64(w, "t.f64", f64);
  gw_kv_arr(w, "t.arr.i32", GGUF_TYPE_INT32, 5, i32s);
  gw_kv_arr(w, "t.arr.f32", GGUF_TYPE_FLOAT32, 3, f32s);
  gw_kv_arr(w, "t.arr.f64", GGUF_TYPE_FLOAT64, 2, f64s);
  gw_kv_arr(w, "t.arr.bool", GGUF_TYPE_BOOL, 4, bools);
  gw_kv_arr(w, "t.arr.u16", GGUF_TYPE_UINT16, 2, u16s);
  gw_kv_arr(w, "t.arr.empty", GGUF_TYPE_UINT8, 0, NULL);
  gw_kv_arr_str(w, "t.arr.str", 4, strs);
  gw_kv_arr_str(w, "t.arr.str_empty", 0, NULL);
  gw_kv_strn(w, "t.nul", 5, "a\0b", 3);
  size_t size;
  uint8_t *copy;
  gguf_ctx_t *ctx = open_written(w, &copy, &size);
  assert_int_equal(gguf_version(ctx), 3);
  assert_int_equal(gguf_alignment(ctx), 32);
  assert_int_equal(gguf_kv_count(ctx), 21);
  assert_int_equal(gguf_tensor_count(ctx), 0);
  assert_int_equal(gguf_file_size(ctx), size);

  /* File order, types and counts. */
  static const struct {
    const char *key;
    gguf_type_t type, arr_type;
    uint64_t n;
  } want[] = {
      {"t.u8", GGUF_TYPE_UINT8, 0, 1},       {"t.i8", GGUF_TYPE_INT8, 0, 1},
      {"t.u16", GGUF_TYPE_UINT16, 0, 1},     {"t.i16", GGUF_TYPE_INT16, 0, 1},
      {"t.u32", GGUF_TYPE_UINT32, 0, 1},     {"t.i32", GGUF_TYPE_INT32, 0, 1},
      {"t.f32", GGUF_TYPE_FLOAT32, 0, 1},    {"t.bool", GGUF_TYPE_BOOL, 0, 1},
      {"t.str", GGUF_TYPE_STRING, 0, 1},     {"t.u64", GGUF_TYPE_UINT64, 0, 1},
      {"t.i64", GGUF_TYPE_INT64, 0, 1},      {"t.f64", GGUF_TYPE_FLOAT64, 0, 1},
      {"t.arr.i32", GGUF_TYPE_ARRAY, GGUF_TYPE_INT32, 5}, {"t.arr.f32", GGUF_TYPE_ARRAY, GGUF_TYPE_FLOAT32, 3},
      {"t.arr.f64", GGUF_TYPE_ARRAY, GGUF_TYPE_FLOAT64, 2}, {"t.arr.bool", GGUF_TYPE_ARRAY, GGUF_TYPE_BOOL, 4},
      {"t.arr.u16", GGUF_TYPE_ARRAY, GGUF_TYPE_UINT16, 2}, {"t.arr.empty", GGUF_TYPE_ARRAY, GGUF_TYPE_UINT8, 0},
      {"t.arr.str", GGUF_TYPE_ARRAY, GGUF_TYPE_STRING, 4}, {"t.arr.str_empty", GGUF_TYPE_ARRAY, GGUF_TYPE_STRING, 0},
      {"t.nul", GGUF_TYPE_STRING, 0, 1},
  };
  for (uint64_t i = 0; i < gguf_kv_count(ctx); i++) {
    const gguf_kv_t *kv = gguf_kv_at(ctx, i);
    assert_true(str_is(kv->key, want[i].key));
    assert_int_equal(kv->type, want[i].type);
    if (kv->type == GGUF_TYPE_ARRAY) assert_int_equal(kv->arr_type, want[i].arr_type);
    assert_int_equal(kv->n, want[i].n);
    assert_ptr_equal(gguf_find_kv(ctx, want[i].key), kv);
  }
  assert_null(gguf_kv_at(ctx, 21));
  assert_null(gguf_find_kv(ctx, "t.u"));
  assert_null(gguf_find_kv(ctx, "t.u8 "));

  /* Scalars, through the typed getters. */
  uint32_t u32;
  uint64_t gu64;
  int64_t gi64;
  float gf32;
  int b;
  gguf_str_t s;
  assert_int_equal(gguf_get_u32(ctx, "t.u8", &u32), 0);
  assert_int_equal(u32, 200);
  assert_int_equal(gguf_get_u32(ctx, "t.u16", &u32), 0);
  assert_int_equal(u32, 60000);
  assert_int_equal(gguf_get_u32(ctx, "t.u32", &u32), 0);
  assert_int_equal(u32, 4000000000u);
  assert_int_equal(gguf_get_i64(ctx, "t.i8", &gi64), 0);
  assert_int_equal(gi64, -100);
  assert_int_equal(gguf_get_i64(ctx, "t.i16", &gi64), 0);
  assert_int_equal(gi64, -30000);
  assert_int_equal(gguf_get_i64(ctx, "t.i32", &gi64), 0);
  assert_int_equal(gi64, -2000000000);
  assert_int_equal(gguf_get_i64(ctx, "t.i64", &gi64), 0);
  assert_true(gi64 == i64);
  assert_int_equal(gguf_get_u64(ctx, "t.u64", &gu64), 0);
  assert_true(gu64 == u64);
  assert_int_equal(gguf_get_f32(ctx, "t.f32", &gf32), 0);
  assert_true(gf32 == f32);
  assert_int_equal(gguf_get_bool(ctx, "t.bool", &b), 0);
  assert_int_equal(b, 1);
  assert_int_equal(gguf_get_str(ctx, "t.str", &s), 0);
  assert_true(str_is(s, "hello, world"));
  assert_int_equal(gguf_get_str(ctx, "t.nul", &s), 0);
  assert_int_equal(s.len, 3);
  assert_memory_equal(s.ptr, "a\0b", 3);
  double raw64;
  memcpy(&raw64, gguf_find_kv(ctx, "t.f64")->data, 8);
  assert_true(raw64 == f64);

  /* Range and type checks: *out stays untouched on error. */
  u32 = 77;
  assert_int_equal(gguf_get_u32(ctx, "t.i8", &u32), -EINVAL); /* negative */
  assert_int_equal(gguf_get_u32(ctx, "t.u64", &u32), -EINVAL); /* too big */
  assert_int_equal(gguf_get_u32(ctx, "t.f32", &u32), -EINVAL);
  assert_int_equal(gguf_get_u32(ctx, "t.bool", &u32), -EINVAL);
  assert_int_equal(gguf_get_u32(ctx, "t.arr.i32", &u32), -EINVAL);
  assert_int_equal(gguf_get_u32(ctx, "missing", &u32), -ENOENT);
  assert_int_equal(u32, 77);
  assert_int_equal(gguf_get_u64(ctx, "t.i64", &gu64), -EINVAL);
  assert_int_equal(gguf_get_i64(ctx, "t.u64", &gi64), -EINVAL); /* > INT64_MAX */
  assert_int_equal(gguf_get_i64(ctx, "t.u32", &gi64), 0);
  assert_int_equal(gi64, 4000000000);
  assert_int_equal(gguf_get_f32(ctx, "t.f64", &gf32), fabs(f64) > 3.4e38 ? -EINVAL : 0);
  assert_int_equal(gguf_get_f32(ctx, "t.i32", &gf32), -EINVAL);
  assert_int_equal(gguf_get_bool(ctx, "t.u8", &b), -EINVAL);
  assert_int_equal(gguf_get_str(ctx, "t.arr.str", &s), -EINVAL);
  assert_int_equal(gguf_get_str(ctx, "missing", &s), -ENOENT);

  /* Arrays. */
  const gguf_str_t *sv;
  assert_int_equal(gguf_get_arr_str(ctx, "t.arr.str", &sv), 4);
  for (int i = 0; i < 4; i++) assert_true(str_is(sv[i], strs[i]));
  assert_int_equal(gguf_get_arr_str(ctx, "t.arr.str_empty", &sv), 0);
  assert_int_equal(gguf_get_arr_str(ctx, "t.arr.i32", &sv), -EINVAL);
  assert_int_equal(gguf_get_arr_str(ctx, "t.str", &sv), -EINVAL);
  assert_int_equal(gguf_get_arr_str(ctx, "missing", &sv), -ENOENT);
  gguf_type_t et;
  assert_int_equal(gguf_get_arr_n(ctx, "t.arr.i32", &et), 5);
  assert_int_equal(et, GGUF_TYPE_INT32);
  assert_int_equal(gguf_get_arr_n(ctx, "t.arr.empty", NULL), 0);
  assert_int_equal(gguf_get_arr_n(ctx, "t.arr.str", &et), -EINVAL);
  assert_int_equal(gguf_get_arr_n(ctx, "t.u8", &et), -EINVAL);
  assert_int_equal(gguf_get_arr_n(ctx, "missing", &et), -ENOENT);
  const gguf_kv_t *ai = gguf_find_kv(ctx, "t.arr.i32");
  for (uint64_t i = 0; i < 5; i++) {
    assert_int_equal(gguf_arr_i64(ai, i, &gi64), 0);
    assert_int_equal(gi64, i32s[i]);
  }
  assert_int_equal(gguf_arr_i64(ai, 5, &gi64), -EINVAL);
  assert_int_equal(gguf_arr_i64(NULL, 0, &gi64), -ENOENT);
  assert_int_equal(gguf_arr_f32(ai, 0, &gf32), -EINVAL);
  const gguf_kv_t *af = gguf_find_kv(ctx, "t.arr.f32");
  for (uint64_t i = 0; i < 3; i++) {
    assert_int_equal(gguf_arr_f32(af, i, &gf32), 0);
    assert_memory_equal(&gf32, &f32s[i], 4);
  }
  const gguf_kv_t *ad = gguf_find_kv(ctx, "t.arr.f64");
  assert_int_equal(gguf_arr_f32(ad, 0, &gf32), 0);
  assert_true(gf32 == (float)f64s[0]);
  assert_int_equal(gguf_arr_f32(ad, 1, &gf32), -EINVAL); /* 1e300 does not fit */
  const gguf_kv_t *au = gguf_find_kv(ctx, "t.arr.u16");
  assert_int_equal(gguf_arr_i64(au, 0, &gi64), 0);
  assert_int_equal(gi64, 65535);
  assert_int_equal(gguf_arr_i64(gguf_find_kv(ctx, "t.arr.bool"), 0, &gi64), -EINVAL);
  assert_int_equal(gguf_arr_i64(gguf_find_kv(ctx, "t.arr.str"), 0, &gi64), -EINVAL);
  assert_int_equal(gguf_arr_i64(gguf_find_kv(ctx, "t.u8"), 0, &gi64), -EINVAL);
  assert_memory_equal(gguf_find_kv(ctx, "t.arr.bool")->data, bools, 4);

  assert_string_equal(gguf_type_name(GGUF_TYPE_FLOAT64), "float64");
  assert_string_equal(gguf_type_name(13), "?");
  gguf_close(ctx);
  free(copy);
}

/* ---- tensors of every supported type, v2 and v3, several alignments ---- */

/* GGUF's block geometry, restated independently of kern_types.c. */
static const struct {
  uint32_t id;
  const char *name;
  int64_t block_elems, block_bytes;
} weight_types[] = {
    {0, "f32", 1, 4},      {1, "f16", 1, 2},       {30, "bf16", 1, 2},     {2, "q4_0", 32, 18},
    {3, "q4_1", 32, 20},   {6, "q5_0", 32, 22},    {7, "q5_1", 32, 24},    {8, "q8_0", 32, 34},
    {12, "q4_k", 256, 144}, {13, "q5_k", 256, 176}, {14, "q6_k", 256, 210},
};
#define N_WEIGHT_TYPES (sizeof weight_types / sizeof *weight_types)

static void reads_tensors(uint32_t version, uint32_t align, int write_align_key) {
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + version * 1000 + align);
  gw_t *w = gw_new();
  gw_set_version(w, version);
  gw_set_align(w, align);
  gw_kv_str(w, "general.architecture", "llama");
  if (write_align_key) gw_kv_u32(w, "general.alignment", align);

  enum { PER_TYPE = 3 };
  struct {
    char name[64];
    uint32_t type, n_dims;
    int64_t ne[4];
    uint8_t *data;
    size_t nbytes;
    uint64_t offset;
  } t[N_WEIGHT_TYPES * PER_TYPE];
  size_t n = 0;
  for (size_t k = 0; k < N_WEIGHT_TYPES; k++) {
    for (int j = 0; j < PER_TYPE; j++, n++) {
      snprintf(t[n].name, sizeof t[n].name, "blk.%d.%s.weight", j, weight_types[k].name);
      t[n].type = weight_types[k].id;
      t[n].n_dims = (uint32_t)(1 + tu_below(&r, 4));
      t[n].ne[0] = weight_types[k].block_elems * (int64_t)(1 + tu_below(&r, 3));
      for (uint32_t d = 1; d < 4; d++) t[n].ne[d] = d < t[n].n_dims ? (int64_t)(1 + tu_below(&r, 3)) : 1;
      int64_t rows = t[n].ne[1] * t[n].ne[2] * t[n].ne[3];
      t[n].nbytes = (size_t)(rows * t[n].ne[0] / weight_types[k].block_elems * weight_types[k].block_bytes);
      t[n].data = malloc(t[n].nbytes);
      for (size_t i = 0; i < t[n].nbytes; i++) t[n].data[i] = (uint8_t)(1 + tu_below(&r, 255));
      t[n].offset = gw_tensor(w, t[n].name, t[n].type, t[n].n_dims, t[n].ne, t[n].data, t[n].nbytes);
    }
  }
  size_t size;
  uint8_t *copy;
  gguf_ctx_t *ctx = open_written(w, &copy, &size);
  assert_int_equal(gguf_version(ctx), version);
  assert_int_equal(gguf_alignment(ctx), align);
  assert_int_equal(gguf_data_offset(ctx) % align, 0);
  assert_int_equal(gguf_tensor_count(ctx), n);
  for (size_t i = 0; i < n; i++) {
    const gguf_tensor_t *g = gguf_tensor_at(ctx, i);
    assert_ptr_equal(gguf_find_tensor(ctx, t[i].name), g);
    assert_true(str_is(g->name, t[i].name));
    assert_int_equal(g->type, t[i].type);
    assert_int_equal(g->n_dims, t[i].n_dims);
    for (int d = 0; d < 4; d++) assert_int_equal(g->ne[d], t[i].ne[d]);
    assert_int_equal(g->offset, t[i].offset);
    assert_int_equal(g->offset % align, 0);
    assert_int_equal(g->nbytes, t[i].nbytes);
    assert_int_equal(((const uint8_t *)g->data - copy) % align, 0);
    assert_ptr_equal(g->data, copy + gguf_data_offset(ctx) + g->offset);
    assert_memory_equal(g->data, t[i].data, t[i].nbytes);
    free(t[i].data);
  }
  assert_null(gguf_tensor_at(ctx, n));
  assert_null(gguf_find_tensor(ctx, "blk.0"));
  gguf_close(ctx);
  free(copy);
}

static void reads_tensors_v3(void **state) {
  (void)state;
  reads_tensors(3, 32, 0);
  reads_tensors(3, 32, 1);
}

static void reads_tensors_v2(void **state) {
  (void)state;
  reads_tensors(2, 32, 0);
}

static void reads_custom_alignment(void **state) {
  (void)state;
  reads_tensors(3, 1, 1);
  reads_tensors(3, 8, 1);
  reads_tensors(2, 64, 1);
  reads_tensors(3, 4096, 1);
}

/* ---- lookups over many names ------------------------------------------ */

static void finds_many_names(void **state) {
  (void)state;
  enum { N_KV = 3000, N_T = 400 };
  gw_t *w = gw_new();
  char name[64];
  for (int i = 0; i < N_KV; i++) {
    snprintf(name, sizeof name, "k.%d", i);
    gw_kv_i32(w, name, i * 7);
  }
  float v = 1.0f;
  for (int i = 0; i < N_T; i++) {
    snprintf(name, sizeof name, "blk.%d.w", i);
    int64_t ne = 1;
    gw_tensor(w, name, 0, 1, &ne, &v, 4);
  }
  size_t size;
  uint8_t *img;
  gguf_ctx_t *ctx = open_written(w, &img, &size);
  for (int i = 0; i < N_KV; i++) {
    snprintf(name, sizeof name, "k.%d", i);
    int64_t x;
    assert_int_equal(gguf_get_i64(ctx, name, &x), 0);
    assert_int_equal(x, i * 7);
    assert_ptr_equal(gguf_find_kv(ctx, name), gguf_kv_at(ctx, (uint64_t)i));
  }
  for (int i = 0; i < N_T; i++) {
    snprintf(name, sizeof name, "blk.%d.w", i);
    assert_ptr_equal(gguf_find_tensor(ctx, name), gguf_tensor_at(ctx, (uint64_t)i));
  }
  assert_null(gguf_find_kv(ctx, "k.3000"));
  assert_null(gguf_find_kv(ctx, "k."));
  assert_null(gguf_find_tensor(ctx, "blk.400.w"));
  assert_null(gguf_find_kv(ctx, NULL));
  gguf_close(ctx);
  free(img);
}

/* ---- the real default model ------------------------------------------- */

static void opens_the_default_model(void **state) {
  (void)state;
  const char *path = getenv("TRAM_MODEL");
  if (!path || !*path) path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (access(path, R_OK) != 0) fail_msg("%s is missing: run `make model` (or set TRAM_MODEL)", path);
  char err[512];
  gguf_ctx_t *ctx = gguf_open(path, err, sizeof err);
  if (!ctx) fail_msg("%s", err);
  assert_int_equal(gguf_version(ctx), 3);
  assert_int_equal(gguf_alignment(ctx), 32);
  assert_int_equal(gguf_tensor_count(ctx), 272);
  assert_int_equal(gguf_kv_count(ctx), 33);
  gguf_str_t s;
  assert_int_equal(gguf_get_str(ctx, "general.architecture", &s), 0);
  assert_true(str_is(s, "llama"));
  assert_int_equal(gguf_get_str(ctx, "tokenizer.ggml.model", &s), 0);
  assert_true(str_is(s, "gpt2"));
  static const struct {
    const char *key;
    uint32_t value;
  } u32s[] = {
      {"llama.block_count", 30}, {"llama.context_length", 8192}, {"llama.embedding_length", 576},
      {"llama.feed_forward_length", 1536}, {"llama.attention.head_count", 9}, {"llama.attention.head_count_kv", 3},
      {"llama.vocab_size", 49152}, {"llama.rope.dimension_count", 64}, {"tokenizer.ggml.bos_token_id", 1},
      {"tokenizer.ggml.eos_token_id", 2},
  };
  for (size_t i = 0; i < sizeof u32s / sizeof *u32s; i++) {
    uint32_t v = 0;
    assert_int_equal(gguf_get_u32(ctx, u32s[i].key, &v), 0);
    assert_int_equal(v, u32s[i].value);
  }
  float f;
  assert_int_equal(gguf_get_f32(ctx, "llama.rope.freq_base", &f), 0);
  assert_true(f == 100000.0f);
  assert_int_equal(gguf_get_f32(ctx, "llama.attention.layer_norm_rms_epsilon", &f), 0);
  assert_true(f == 1e-5f);
  int b = -1;
  assert_int_equal(gguf_get_bool(ctx, "tokenizer.ggml.add_bos_token", &b), 0);
  assert_int_equal(b, 0);
  const gguf_str_t *tokens;
  assert_int_equal(gguf_get_arr_str(ctx, "tokenizer.ggml.tokens", &tokens), 49152);
  assert_true(str_is(tokens[0], "<|endoftext|>"));
  assert_true(str_is(tokens[1], "<|im_start|>"));
  assert_true(str_is(tokens[2], "<|im_end|>"));
  assert_int_equal(gguf_get_arr_str(ctx, "tokenizer.ggml.merges", &tokens), 48900);
  gguf_type_t et;
  assert_int_equal(gguf_get_arr_n(ctx, "tokenizer.ggml.token_type", &et), 49152);
  assert_int_equal(et, GGUF_TYPE_INT32);
  int64_t tt;
  assert_int_equal(gguf_arr_i64(gguf_find_kv(ctx, "tokenizer.ggml.token_type"), 0, &tt), 0);
  assert_int_equal(tt, 3); /* control */

  const gguf_tensor_t *emb = gguf_find_tensor(ctx, "token_embd.weight");
  assert_non_null(emb);
  assert_int_equal(emb->type, 8); /* Q8_0 */
  assert_int_equal(emb->n_dims, 2);
  assert_int_equal(emb->ne[0], 576);
  assert_int_equal(emb->ne[1], 49152);
  assert_int_equal(emb->nbytes, 30081024);
  assert_null(gguf_find_tensor(ctx, "output.weight")); /* tied */
  const gguf_tensor_t *q = gguf_find_tensor(ctx, "blk.29.attn_q.weight");
  assert_non_null(q);
  assert_int_equal(q->type, 3); /* Q4_1 */
  assert_int_equal(q->ne[0], 576);
  assert_int_equal(q->ne[1], 576);
  /* Per type: tensor count and bytes, as docs/model.md records them. */
  uint64_t count[31] = {0}, bytes[31] = {0};
  for (uint64_t i = 0; i < gguf_tensor_count(ctx); i++) {
    const gguf_tensor_t *t = gguf_tensor_at(ctx, i);
    assert_true(t->type < 31);
    count[t->type]++;
    bytes[t->type] += t->nbytes;
    assert_true(gguf_data_offset(ctx) + t->offset + t->nbytes <= gguf_file_size(ctx));
  }
  assert_int_equal(count[0], 61);
  assert_int_equal(bytes[0], 140544);
  assert_int_equal(count[3], 210);
  assert_int_equal(bytes[3], 66355200);
  assert_int_equal(count[8], 1);
  assert_int_equal(bytes[8], 30081024);
  assert_int_equal(gguf_file_size(ctx), 98362432);
  gguf_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(reads_every_value_type),
      cmocka_unit_test(reads_tensors_v3),
      cmocka_unit_test(reads_tensors_v2),
      cmocka_unit_test(reads_custom_alignment),
      cmocka_unit_test(finds_many_names),
      cmocka_unit_test(opens_the_default_model),
  };
  return cmocka_run_group_tests_name("gguf", tests, NULL, NULL);
}
