/* tests/unit/model_tiny.h — the tiny synthetic GGUF models the
 * test_model_*.c binaries load (written with tests/unit/gguf_writer.h): a
 * tiny_t says what to write and what to break; load() writes, loads and
 * removes the file; expect_error() wants one clear error line naming the
 * key or tensor (and the path). setup/teardown make the CPU backend g_be.
 * Header-only (static inline) so each binary gets its own copy. */
#ifndef TRAM_TEST_MODEL_TINY_H
#define TRAM_TEST_MODEL_TINY_H

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "kernels/quant_blocks.h"
#include "model/model.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"
#include "tests/unit/gguf_writer.h"
#include "tests/unit/testutil.h"

/* The tiny model: 2 layers, dim 32, MLP 64, 4 heads (2 KV) of 8, vocab 20. */
enum { LAYERS = 2, DIM = 32, FF = 64, HEADS = 4, HEAD_DIM = 8, VOCAB = 20, CTX = 128 };

/* What to write, and what to break. */
typedef struct tiny {
  const char *arch;       /* NULL: "llama" */
  int kv_key;             /* > 0: the head_count_kv key says this instead */
  int qkv_bias;           /* write attn_{q,k,v}.bias */
  int untied;             /* write output.weight */
  const char *omit;       /* a tensor not written */
  const char *reshape;    /* a tensor written 8 rows (or, for a vector, 8 elements) too long */
  const char *as_q8;      /* a tensor written as Q8_0 */
  const char *as_iq2;     /* a tensor written with type id 16 (IQ2_XXS: not supported) */
  const char *extra;      /* an extra F32 [DIM] tensor */
  const char *omit_key;   /* a key (after the arch prefix) not written */
  const char *str_key;    /* a key written as a string instead */
  int vocab_size_key;     /* > 0: <arch>.vocab_size */
  const char *rope_type;  /* rope.scaling.type */
  float rope_factor;      /* rope.scaling.factor when > 0 */
  int rope_orig_ctx;      /* rope.scaling.original_context_length when > 0 */
  int rope_freqs;         /* write a rope_freqs.weight tensor */
  int no_tokenizer;
  const char *extra_key;  /* an extra u32 key <arch>.<extra_key> = extra_val */
  uint32_t extra_val;
  int experts;            /* > 0: this many experts, 2 per token (arch qwen3moe): stacked expert tensors */
} tiny_t;

static uint64_t g_seed;

static inline void key_u32(gw_t *w, const tiny_t *t, const char *arch, const char *name, uint32_t v) {
  char key[96];
  snprintf(key, sizeof key, "%s.%s", arch, name);
  if (t->omit_key && strcmp(t->omit_key, name) == 0) return;
  if (t->str_key && strcmp(t->str_key, name) == 0)
    gw_kv_str(w, key, "12");
  else
    gw_kv_u32(w, key, v);
}

static inline void key_f32(gw_t *w, const tiny_t *t, const char *arch, const char *name, float v) {
  char key[96];
  snprintf(key, sizeof key, "%s.%s", arch, name);
  if (t->omit_key && strcmp(t->omit_key, name) == 0) return;
  gw_kv_f32(w, key, v);
}

/* A tensor of ne0 × ne1 (ne1 = 0: a vector) with random F32 values, or as
 * the spec breaks it. */
/* [ne0], [ne0, ne1] or (ne2 > 0: stacked experts) [ne0, ne1, ne2] */
static inline void tensor3(gw_t *w, const tiny_t *t, tu_rng_t *rng, const char *name, int64_t ne0, int64_t ne1, int64_t ne2) {
  if (t->omit && strcmp(t->omit, name) == 0) return;
  int64_t ne[3] = {ne0, ne1 ? ne1 : 1, ne2 ? ne2 : 1};
  if (t->reshape && strcmp(t->reshape, name) == 0) ne[ne1 ? 1 : 0] += 8;
  const uint32_t n_dims = ne2 ? 3 : ne1 ? 2 : 1;
  const size_t n = (size_t)(ne[0] * ne[1] * ne[2]);
  if (t->as_q8 && strcmp(t->as_q8, name) == 0) {
    size_t nb = n / 32 * sizeof(block_q8_0);
    uint8_t *q = calloc(1, nb);
    gw_tensor(w, name, KERN_Q8_0, n_dims, ne, q, nb);
    free(q);
    return;
  }
  if (t->as_iq2 && strcmp(t->as_iq2, name) == 0) {
    uint8_t zeros[256] = {0};
    gw_tensor(w, name, 16, n_dims, ne, zeros, sizeof zeros);
    return;
  }
  float *x = malloc(n * sizeof *x);
  tu_fill_normal(rng, x, n, 0.2f);
  gw_tensor(w, name, KERN_F32, n_dims, ne, x, n * sizeof *x);
  free(x);
}

static inline void tensor(gw_t *w, const tiny_t *t, tu_rng_t *rng, const char *name, int64_t ne0, int64_t ne1) {
  tensor3(w, t, rng, name, ne0, ne1, 0);
}

/* Writes the tiny model to a new temporary file; returns its path (static). */
static inline const char *write_tiny(const tiny_t *t) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/tram_test_model_XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  const char *arch = t->arch ? t->arch : "llama";
  const int kv = 2;
  gw_t *w = gw_new();
  gw_kv_str(w, "general.architecture", arch);
  key_u32(w, t, arch, "block_count", LAYERS);
  key_u32(w, t, arch, "context_length", CTX);
  key_u32(w, t, arch, "embedding_length", DIM);
  key_u32(w, t, arch, "feed_forward_length", FF);
  key_u32(w, t, arch, "attention.head_count", HEADS);
  key_u32(w, t, arch, "attention.head_count_kv", (uint32_t)(t->kv_key ? t->kv_key : kv));
  key_f32(w, t, arch, "attention.layer_norm_rms_epsilon", 1e-5f);
  key_f32(w, t, arch, "rope.freq_base", 10000.0f);
  if (t->vocab_size_key) key_u32(w, t, arch, "vocab_size", (uint32_t)t->vocab_size_key);
  char key[96];
  if (t->rope_type) {
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    gw_kv_str(w, key, t->rope_type);
  }
  if (t->rope_factor > 0) key_f32(w, t, arch, "rope.scaling.factor", t->rope_factor);
  if (t->rope_orig_ctx > 0) key_u32(w, t, arch, "rope.scaling.original_context_length", (uint32_t)t->rope_orig_ctx);
  if (t->extra_key) key_u32(w, t, arch, t->extra_key, t->extra_val);
  if (t->experts) {
    key_u32(w, t, arch, "expert_count", (uint32_t)t->experts);
    key_u32(w, t, arch, "expert_used_count", 2);
    key_u32(w, t, arch, "expert_feed_forward_length", FF / 2);
  }
  if (!t->no_tokenizer) {
    const char *toks[VOCAB];
    char buf[VOCAB][4];
    for (int i = 0; i < VOCAB; i++) {
      snprintf(buf[i], sizeof buf[i], "%c", 'a' + i);
      toks[i] = buf[i];
    }
    gw_kv_str(w, "tokenizer.ggml.model", "gpt2");
    gw_kv_str(w, "tokenizer.ggml.pre", "gpt2");
    gw_kv_arr_str(w, "tokenizer.ggml.tokens", VOCAB, toks);
    gw_kv_arr_str(w, "tokenizer.ggml.merges", 0, NULL);
    gw_kv_u32(w, "tokenizer.ggml.eos_token_id", 1);
  }
  gw_kv_str(w, "tokenizer.chat_template", "{{ messages }}");

  tu_rng_t rng;
  tu_rng_init(&rng, g_seed);
  tensor(w, t, &rng, "token_embd.weight", DIM, VOCAB);
  tensor(w, t, &rng, "output_norm.weight", DIM, 0);
  if (t->untied) tensor(w, t, &rng, "output.weight", DIM, VOCAB);
  if (t->rope_freqs) {
    float f[HEAD_DIM / 2];
    for (int p = 0; p < HEAD_DIM / 2; p++) f[p] = 1.0f + (float)p;
    gw_tensor(w, "rope_freqs.weight", KERN_F32, 1, (int64_t[]){HEAD_DIM / 2}, f, sizeof f);
  }
  for (int l = 0; l < LAYERS; l++) {
    char name[64];
#define T(suffix, ne0, ne1) (snprintf(name, sizeof name, "blk.%d." suffix, l), tensor(w, t, &rng, name, ne0, ne1))
    const int fused = strcmp(arch, "phi3") == 0;
    T("attn_norm.weight", DIM, 0);
    if (fused) {
      T("attn_qkv.weight", DIM, (HEADS + 2 * kv) * HEAD_DIM);
    } else {
      T("attn_q.weight", DIM, HEADS * HEAD_DIM);
      T("attn_k.weight", DIM, kv * HEAD_DIM);
      T("attn_v.weight", DIM, kv * HEAD_DIM);
    }
    if (t->qkv_bias) {
      T("attn_q.bias", HEADS * HEAD_DIM, 0);
      T("attn_k.bias", kv * HEAD_DIM, 0);
      T("attn_v.bias", kv * HEAD_DIM, 0);
    }
    if (strncmp(arch, "qwen3", 5) == 0 || strcmp(arch, "gemma3") == 0) {
      T("attn_q_norm.weight", HEAD_DIM, 0);
      T("attn_k_norm.weight", HEAD_DIM, 0);
    }
    if (strncmp(arch, "gemma", 5) == 0) {
      T("post_attention_norm.weight", DIM, 0);
      T("post_ffw_norm.weight", DIM, 0);
    }
    T("attn_output.weight", HEADS * HEAD_DIM, DIM);
    T("ffn_norm.weight", DIM, 0);
    if (t->experts) { /* [cols, rows, experts] */
      T("ffn_gate_inp.weight", DIM, t->experts);
      snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.weight", l);
      tensor3(w, t, &rng, name, DIM, FF / 2, t->experts);
      snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight", l);
      tensor3(w, t, &rng, name, DIM, FF / 2, t->experts);
      snprintf(name, sizeof name, "blk.%d.ffn_down_exps.weight", l);
      tensor3(w, t, &rng, name, FF / 2, DIM, t->experts);
      continue;
    }
    if (fused) {
      T("ffn_up.weight", DIM, 2 * FF);
    } else {
      T("ffn_gate.weight", DIM, FF);
      T("ffn_up.weight", DIM, FF);
    }
    T("ffn_down.weight", FF, DIM);
#undef T
  }
  if (t->extra) tensor(w, t, &rng, t->extra, DIM, 0);
  assert_int_equal(gw_write_file(w, path), 0);
  gw_free(w);
  return path;
}

static kern_backend_t *g_be;

static inline int setup(void **state) {
  (void)state;
  g_seed = tu_seed();
  log_set_level(LOG_LEVEL_WARN); /* no load lines */
  g_be = kern_backend_create("cpu", 2);
  return g_be ? 0 : -1;
}

static inline int teardown(void **state) {
  (void)state;
  kern_backend_destroy(g_be);
  return 0;
}

/* Loads the spec's model; returns it (the file is removed). */
static inline model_t *load(const tiny_t *t, char *err, size_t err_len) {
  const char *path = write_tiny(t);
  model_t *m = model_load(path, g_be, err, err_len);
  unlink(path);
  return m;
}

/* The spec must fail to load with an error containing `want` (and the path). */
static inline void expect_error(const tiny_t *t, const char *want) {
  char err[512];
  model_t *m = load(t, err, sizeof err);
  if (m || !strstr(err, want) || !strstr(err, "/tmp/tram_test_model_") || strchr(err, '\n'))
    fail_msg("want an error containing \"%s\", got %s: \"%s\"", want, m ? "a model" : "", m ? "" : err);
}

#endif
