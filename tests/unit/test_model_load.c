/* tests/unit/test_model_load.c — model_load on tiny synthetic GGUF files
 * (tests/unit/gguf_writer.h): the hyper-parameters and RoPE frequencies it
 * reads, the runner's capacity and batch checks, batch invariance, and one
 * clear error naming the key or tensor for each kind of malformed model.
 * The forward's numbers are checked against the float64 reference in
 * tests/reference/test_forward.py. */
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

#include "base/log.h"
#include "kernels/cuda_geom.h"
#include "kernels/quant_blocks.h"
#include "model/model.h"
#include "model/model_graph.h"
#include "model/model_moe.h"
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

static void key_u32(gw_t *w, const tiny_t *t, const char *arch, const char *name, uint32_t v) {
  char key[96];
  snprintf(key, sizeof key, "%s.%s", arch, name);
  if (t->omit_key && strcmp(t->omit_key, name) == 0) return;
  if (t->str_key && strcmp(t->str_key, name) == 0)
    gw_kv_str(w, key, "12");
  else
    gw_kv_u32(w, key, v);
}

static void key_f32(gw_t *w, const tiny_t *t, const char *arch, const char *name, float v) {
  char key[96];
  snprintf(key, sizeof key, "%s.%s", arch, name);
  if (t->omit_key && strcmp(t->omit_key, name) == 0) return;
  gw_kv_f32(w, key, v);
}

/* A tensor of ne0 × ne1 (ne1 = 0: a vector) with random F32 values, or as
 * the spec breaks it. */
/* [ne0], [ne0, ne1] or (ne2 > 0: stacked experts) [ne0, ne1, ne2] */
static void tensor3(gw_t *w, const tiny_t *t, tu_rng_t *rng, const char *name, int64_t ne0, int64_t ne1, int64_t ne2) {
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

static void tensor(gw_t *w, const tiny_t *t, tu_rng_t *rng, const char *name, int64_t ne0, int64_t ne1) {
  tensor3(w, t, rng, name, ne0, ne1, 0);
}

/* Writes the tiny model to a new temporary file; returns its path (static). */
static const char *write_tiny(const tiny_t *t) {
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

static int setup(void **state) {
  (void)state;
  g_seed = tu_seed();
  log_set_level(LOG_LEVEL_WARN); /* no load lines */
  g_be = kern_backend_create("cpu", 2);
  return g_be ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  kern_backend_destroy(g_be);
  return 0;
}

/* Loads the spec's model; returns it (the file is removed). */
static model_t *load(const tiny_t *t, char *err, size_t err_len) {
  const char *path = write_tiny(t);
  model_t *m = model_load(path, g_be, err, err_len);
  unlink(path);
  return m;
}

/* The spec must fail to load with an error containing `want` (and the path). */
static void expect_error(const tiny_t *t, const char *want) {
  char err[512];
  model_t *m = load(t, err, sizeof err);
  if (m || !strstr(err, want) || !strstr(err, "/tmp/tram_test_model_") || strchr(err, '\n'))
    fail_msg("want an error containing \"%s\", got %s: \"%s\"", want, m ? "a model" : "", m ? "" : err);
}

/* ---- what a good file gives ------------------------------------------------ */

static void loads_tiny_llama(void **state) {
  (void)state;
  char err[512];
  model_t *m = load(&(tiny_t){0}, err, sizeof err);
  if (!m) fail_msg("%s", err);
  const model_hparams_t *hp = model_hparams(m);
  assert_int_equal(hp->arch, MODEL_ARCH_LLAMA);
  assert_int_equal(hp->n_layers, LAYERS);
  assert_int_equal(hp->dim, DIM);
  assert_int_equal(hp->ff_dim, FF);
  assert_int_equal(hp->n_heads, HEADS);
  assert_int_equal(hp->n_kv_heads, 2);
  assert_int_equal(hp->head_dim, HEAD_DIM);
  assert_int_equal(hp->q_dim, HEADS * HEAD_DIM);
  assert_int_equal(hp->kv_dim, 2 * HEAD_DIM);
  assert_int_equal(hp->n_vocab, VOCAB);
  assert_int_equal(hp->n_ctx, CTX);
  assert_int_equal(hp->rot_dim, HEAD_DIM);
  assert_int_equal(hp->rope_neox, 0);
  assert_int_equal(hp->rope_scaling, MODEL_ROPE_SCALING_NONE);
  assert_true(hp->tied_output);
  assert_false(hp->qkv_bias);
  assert_float_equal(hp->rms_eps, 1e-5f, 0);
  /* the tokenizer and the template of the same file are text/'s to read */
  char tok_err[256];
  tok_t *tok = tok_create_from_gguf(model_gguf(m), tok_err, sizeof tok_err);
  assert_non_null(tok);
  assert_int_equal(tok_eos(tok), 1);
  chat_tmpl_t *tmpl = chat_tmpl_from_gguf(model_gguf(m), tok);
  assert_non_null(tmpl);
  assert_string_equal(chat_tmpl_source(tmpl), "{{ messages }}"); /* the file's own: as it is */
  chat_tmpl_free(tmpl);
  tok_destroy(tok);
  /* matrices once (the tied output is the embedding) and one embedding row */
  const int64_t per_layer = 4 * (2 * DIM * HEADS * HEAD_DIM + 2 * DIM * 2 * HEAD_DIM + 3 * DIM * FF); /* F32 */
  assert_int_equal(model_step_weight_bytes(m), LAYERS * per_layer + 4 * (int64_t)DIM * VOCAB + 4 * DIM);
  const float *inv = model_rope_inv_freq(m);
  for (int p = 0; p < HEAD_DIM / 2; p++) assert_float_equal(inv[p], (float)pow(10000.0, -2.0 * p / HEAD_DIM), 0);
  kv_cache_config_t kc = {.block_size = 4, .num_blocks = 16};
  model_kv_config(m, &kc);
  assert_int_equal(kc.n_layers, LAYERS);
  assert_int_equal(kc.n_kv_heads, 2);
  assert_int_equal(kc.head_dim, HEAD_DIM);
  model_destroy(m);
  model_destroy(NULL);

  m = load(&(tiny_t){.arch = "qwen2", .qkv_bias = 1, .untied = 1}, err, sizeof err);
  if (!m) fail_msg("%s", err);
  hp = model_hparams(m);
  assert_int_equal(hp->arch, MODEL_ARCH_QWEN2);
  assert_int_equal(hp->rope_neox, 1);
  assert_true(hp->qkv_bias);
  assert_false(hp->tied_output);
  /* untied: the output matrix instead of the whole embedding, plus one row */
  assert_int_equal(model_step_weight_bytes(m), LAYERS * per_layer + 4 * (int64_t)DIM * VOCAB + 4 * DIM);
  model_destroy(m);

  m = load(&(tiny_t){.arch = "qwen3"}, err, sizeof err);
  if (!m) fail_msg("%s", err);
  hp = model_hparams(m);
  assert_int_equal(hp->arch, MODEL_ARCH_QWEN3);
  assert_string_equal(model_arch_name(hp->arch), "qwen3");
  assert_string_equal(model_arch_hf_class(hp->arch), "Qwen3ForCausalLM");
  assert_int_equal(hp->rope_neox, 1);
  assert_true(hp->qk_norm);
  assert_false(hp->qkv_bias);
  model_destroy(m);

  /* phi3: the fused matrices as row views; 4 + 2 + 2 heads of 8 in attn_qkv */
  m = load(&(tiny_t){.arch = "phi3"}, err, sizeof err);
  if (!m) fail_msg("%s", err);
  hp = model_hparams(m);
  assert_int_equal(hp->arch, MODEL_ARCH_PHI3);
  assert_true(hp->fused && hp->rope_neox && !hp->rope_longrope);
  assert_int_equal(model_step_weight_bytes(m), LAYERS * per_layer + 4 * (int64_t)DIM * VOCAB + 4 * DIM);
  model_destroy(m);

  /* gemma2: GeGLU, post-norms, sqrt(dim) embedding, soft-capping, every other layer sliding */
  m = load(&(tiny_t){.arch = "gemma2", .extra_key = "attention.sliding_window", .extra_val = 16}, err, sizeof err);
  if (!m) fail_msg("%s", err);
  hp = model_hparams(m);
  assert_int_equal(hp->arch, MODEL_ARCH_GEMMA2);
  assert_true(hp->gelu_mlp && hp->post_norms && !hp->qk_norm && hp->rope_neox);
  assert_float_equal(hp->embed_scale, sqrtf((float)DIM), 0);
  assert_float_equal(hp->attn_scale, 1.0f / sqrtf((float)HEAD_DIM), 0);
  assert_int_equal(model_layer_window(hp, 0), 16);
  assert_int_equal(model_layer_window(hp, 1), 0);
  assert_float_equal(hp->rope_base_swa, 0, 0);
  model_destroy(m);
  /* gemma3: pattern 6 (both tiny layers sliding), the local RoPE base */
  m = load(&(tiny_t){.arch = "gemma3", .extra_key = "attention.sliding_window", .extra_val = 16}, err, sizeof err);
  if (!m) fail_msg("%s", err);
  hp = model_hparams(m);
  assert_int_equal(hp->arch, MODEL_ARCH_GEMMA3);
  assert_true(hp->qk_norm && hp->gelu_mlp && hp->post_norms);
  assert_int_equal(model_layer_window(hp, 0), 16);
  assert_int_equal(model_layer_window(hp, 1), 16);
  assert_float_equal(hp->rope_base_swa, 10000.0f, 0);
  model_destroy(m);
  /* smollm3: llama's block and pairing, NoPE on layers 3, 7, ... (llama.cpp's fixed step, no key) */
  m = load(&(tiny_t){.arch = "smollm3"}, err, sizeof err);
  if (!m) fail_msg("%s", err);
  hp = model_hparams(m);
  assert_int_equal(hp->arch, MODEL_ARCH_SMOLLM3);
  assert_string_equal(model_arch_hf_class(hp->arch), "SmolLM3ForCausalLM");
  assert_false(hp->rope_neox || hp->qk_norm || hp->gelu_mlp);
  assert_int_equal(hp->no_rope_step, 4);
  for (int l = 0; l < 9; l++) assert_int_equal(model_layer_rope(hp, l), l != 3 && l != 7);
  model_destroy(m);
}

/* llama.cpp's reading of the RoPE scaling keys (model_hparams.c). */
static void rope_scaling(void **state) {
  (void)state;
  char err[512];
  double base[HEAD_DIM / 2];
  for (int p = 0; p < HEAD_DIM / 2; p++) base[p] = pow(10000.0, -2.0 * p / HEAD_DIM);

  model_t *m = load(&(tiny_t){.rope_type = "linear", .rope_factor = 4}, err, sizeof err);
  if (!m) fail_msg("%s", err);
  assert_int_equal(model_hparams(m)->rope_scaling, MODEL_ROPE_SCALING_LINEAR);
  for (int p = 0; p < HEAD_DIM / 2; p++) assert_float_equal(model_rope_inv_freq(m)[p], (float)(base[p] / 4), 0);
  model_destroy(m);

  m = load(&(tiny_t){.rope_factor = 2}, err, sizeof err); /* a factor without a type: linear */
  if (!m) fail_msg("%s", err);
  assert_int_equal(model_hparams(m)->rope_scaling, MODEL_ROPE_SCALING_LINEAR);
  assert_float_equal(model_rope_inv_freq(m)[1], (float)(base[1] / 2), 0);
  model_destroy(m);

  /* Llama 3.1: wavelengths 2π/inv are 6.3, 62.8, 628, 6283; with an original
   * context of 256, low 1 and high 4: kept below 64, divided by 8 above 256,
   * smoothly between */
  m = load(&(tiny_t){.rope_type = "llama3", .rope_factor = 8, .rope_orig_ctx = 256}, err, sizeof err);
  if (!m) fail_msg("%s", err);
  assert_int_equal(model_hparams(m)->rope_scaling, MODEL_ROPE_SCALING_LLAMA3);
  for (int p = 0; p < HEAD_DIM / 2; p++) {
    const double wl = 2 * M_PI / base[p], smooth = (256 / wl - 1) / 3;
    const double want = wl > 256 ? base[p] / 8 : wl < 64 ? base[p] : (1 - smooth) * base[p] / 8 + smooth * base[p];
    assert_float_equal(model_rope_inv_freq(m)[p], (float)want, 0);
  }
  assert_true(model_rope_inv_freq(m)[3] < (float)base[3] / 7);
  model_destroy(m);

  m = load(&(tiny_t){.rope_freqs = 1}, err, sizeof err);
  if (!m) fail_msg("%s", err);
  assert_int_equal(model_hparams(m)->rope_scaling, MODEL_ROPE_SCALING_FREQ_TENSOR);
  for (int p = 0; p < HEAD_DIM / 2; p++)
    assert_float_equal(model_rope_inv_freq(m)[p], (float)(base[p] / (1.0 + p)), 0);
  model_destroy(m);

  expect_error(&(tiny_t){.rope_type = "yarn", .rope_factor = 4},
               "key 'llama.rope.scaling.type' is \"yarn\": tram supports none, linear and llama3");
  expect_error(&(tiny_t){.rope_type = "linear"}, "key 'llama.rope.scaling.factor' is missing");
  expect_error(&(tiny_t){.rope_type = "llama3", .rope_freqs = 1},
               "tensor 'rope_freqs.weight' and rope.scaling.type given together");
}

/* ---- the runner ------------------------------------------------------------ */

typedef struct rig {
  model_t *m;
  kv_cache_t *cache;
  model_runner_t *run;
  attn_meta_t meta;
  kv_seq_t seqs[3];
} rig_t;

/* graphs: model_runner_config_t.graphs (model/model_graph.h) */
static void rig_init_graphs(rig_t *r, model_t *m, int max_tokens, int max_seqs, int graphs) {
  memset(r, 0, sizeof *r);
  r->m = m;
  kv_cache_config_t kc = {.block_size = 4, .num_blocks = 32};
  model_kv_config(m, &kc);
  r->cache = kv_cache_create(g_be, &kc);
  assert_non_null(r->cache);
  const model_runner_config_t rc = {
      .max_tokens = max_tokens, .max_seqs = max_seqs, .max_logits = max_tokens, .graphs = graphs};
  r->run = model_runner_create(m, r->cache, &rc);
  assert_non_null(r->run);
  assert_int_equal(model_runner_max_blocks_per_seq(r->run), CTX / 4 < 32 ? CTX / 4 : 32);
  assert_int_equal(attn_meta_init(&r->meta, max_seqs, max_tokens, model_runner_max_blocks_per_seq(r->run)), 0);
  for (int s = 0; s < 3; s++) kv_seq_init(&r->seqs[s]);
}

static void rig_init(rig_t *r, model_t *m, int max_tokens, int max_seqs) {
  rig_init_graphs(r, m, max_tokens, max_seqs, MODEL_GRAPHS_OFF);
}

static void rig_free(rig_t *r) {
  for (int s = 0; s < 3; s++) kv_seq_free(r->cache->alloc, &r->seqs[s]);
  attn_meta_free(&r->meta);
  model_runner_destroy(r->run);
  kv_cache_destroy(r->cache);
}

/* One step: sequence s adds q[s] tokens of toks[s] (0: not in the step);
 * logits for every row, in row order. Returns model_forward's result. */
static int rig_step(rig_t *r, const int *q, const int32_t *const *toks, float *logits) {
  const kv_seq_t *seqs[3];
  int32_t q_lens[3], ids[64], pos[64], rows[64];
  int n = 0, t = 0;
  for (int s = 0; s < 3; s++) {
    if (!q[s]) continue;
    assert_int_equal(kv_seq_reserve(r->cache->alloc, &r->seqs[s], q[s]), 0);
    for (int i = 0; i < q[s]; i++, t++) {
      pos[t] = (int32_t)r->seqs[s].n_tokens + i;
      ids[t] = toks[s][pos[t]];
      rows[t] = t;
    }
    seqs[n] = &r->seqs[s];
    q_lens[n++] = q[s];
  }
  assert_int_equal(attn_meta_build(&r->meta, r->cache->alloc, seqs, q_lens, n), 0);
  const model_batch_t b = {
      .n_tokens = t, .tokens = ids, .positions = pos, .attn = &r->meta.batch, .n_logits = t, .logit_rows = rows};
  int rc = model_forward(r->run, &b, logits);
  if (rc == 0)
    for (int s = 0; s < 3; s++)
      if (q[s]) kv_seq_commit(r->cache->alloc, &r->seqs[s], q[s]);
  return rc;
}

/* A sequence's logits are the same bits alone or mixed, whole or chunked,
 * on the varlen or the decode path; for llama and qwen2 (biases, neox). */
static void forward_batch_invariant(void **state) {
  (void)state;
  static const int32_t a[7] = {3, 1, 4, 1, 5, 9, 2}, b[5] = {6, 5, 3, 5, 8}, c[3] = {9, 7, 9};
  const int32_t *toks[3] = {a, b, c};
  const tiny_t specs[2] = {{0}, {.arch = "qwen2", .qkv_bias = 1, .untied = 1}};
  for (int k = 0; k < 2; k++) {
    char err[512];
    model_t *m = load(&specs[k], err, sizeof err);
    if (!m) fail_msg("%s", err);
    float alone[7 * VOCAB], mixed[16 * VOCAB];
    rig_t r;
    rig_init(&r, m, 16, 3);
    tu_poison_f32(alone, 7 * VOCAB);
    assert_int_equal(rig_step(&r, (int[]){7, 0, 0}, toks, alone), 0);
    for (int i = 0; i < 7 * VOCAB; i++) assert_true(isfinite(alone[i]));
    rig_free(&r);

    /* a: 3 then 2 then 1 + 1 (decode with b and c); b: 4 then 1 (decode); c: 3 at once */
    rig_init(&r, m, 16, 3);
    tu_poison_f32(mixed, 16 * VOCAB);
    assert_int_equal(rig_step(&r, (int[]){3, 4, 0}, toks, mixed), 0);
    assert_memory_equal(mixed, alone, 3 * VOCAB * sizeof(float));
    assert_int_equal(rig_step(&r, (int[]){2, 0, 3}, toks, mixed), 0);
    assert_memory_equal(mixed, alone + 3 * VOCAB, 2 * VOCAB * sizeof(float));
    assert_int_equal(rig_step(&r, (int[]){1, 1, 0}, toks, mixed), 0);
    assert_int_equal(attn_step_path(model_runner_attn(r.run)), ATTN_PATH_DECODE);
    assert_memory_equal(mixed, alone + 5 * VOCAB, VOCAB * sizeof(float));
    assert_int_equal(rig_step(&r, (int[]){1, 0, 0}, toks, mixed), 0);
    assert_memory_equal(mixed, alone + 6 * VOCAB, VOCAB * sizeof(float));
    rig_free(&r);
    model_destroy(m);
  }
}

/* Decode steps padded to their bucket (model_graph.h, mode PADDED: what a
 * captured graph runs, issued kernel by kernel) give every real row the
 * same bits as unpadded steps: 3 and 1 sequences pad to 4 rows, 2 does
 * not pad; the block table is widened to the keys bucket. The padding rows
 * write nothing into the cache (the later steps would see it). On the CPU
 * backend ON pads nothing (it has no graphs). */
static void forward_padded_same_bits(void **state) {
  (void)state;
  static const int32_t a[9] = {3, 1, 4, 1, 5, 9, 2, 6, 5}, b[8] = {6, 5, 3, 5, 8, 9, 7, 9}, c[6] = {9, 7, 9, 3, 2, 3};
  const int32_t *toks[3] = {a, b, c};
  const tiny_t specs[2] = {{0}, {.arch = "qwen2", .qkv_bias = 1, .untied = 1}};
  const int steps[][3] = {{4, 3, 2}, {1, 1, 1}, {1, 0, 1}, {1, 1, 1}, {0, 1, 0}, {1, 1, 1}, {1, 1, 0}};
  const int n_steps = (int)(sizeof steps / sizeof steps[0]);
  for (int k = 0; k < 2; k++) {
    char err[512];
    model_t *m = load(&specs[k], err, sizeof err);
    if (!m) fail_msg("%s", err);
    rig_t plain, padded, on;
    rig_init(&plain, m, 16, 8);
    rig_init_graphs(&padded, m, 16, 8, MODEL_GRAPHS_PADDED);
    rig_init_graphs(&on, m, 16, 8, MODEL_GRAPHS_ON);
    float want[16 * VOCAB], got[16 * VOCAB], got_on[16 * VOCAB];
    for (int s = 0; s < n_steps; s++) {
      int rows = 0;
      for (int q = 0; q < 3; q++) rows += steps[s][q];
      tu_poison_f32(got, 16 * VOCAB);
      assert_int_equal(rig_step(&plain, steps[s], toks, want), 0);
      assert_int_equal(rig_step(&padded, steps[s], toks, got), 0);
      assert_int_equal(rig_step(&on, steps[s], toks, got_on), 0);
      assert_memory_equal(got, want, (size_t)rows * VOCAB * sizeof(float));
      assert_memory_equal(got_on, want, (size_t)rows * VOCAB * sizeof(float));
    }
    model_graph_stats_t gs;
    model_runner_graph_stats(padded.run, &gs);
    assert_int_equal(gs.eager, n_steps - 1); /* every step but the prefill */
    assert_int_equal(gs.captured + gs.replayed + gs.failed, 0);
    model_runner_graph_stats(on.run, &gs);
    assert_int_equal(gs.eager + gs.captured + gs.replayed + gs.failed, 0);
    attn_stats_t as;
    attn_get_stats(model_runner_attn(padded.run), &as);
    assert_int_equal(as.decode_steps, n_steps - 1);
    assert_int_equal(as.decode_tokens, 3 + 2 + 3 + 1 + 3 + 2); /* real rows only */
    rig_free(&plain);
    rig_free(&padded);
    rig_free(&on);
    model_destroy(m);
  }
}

/* Bad batches and capacities are refused with -EINVAL / -E2BIG, bad
 * configurations with NULL. */
static void runner_rejects_bad_input(void **state) {
  (void)state;
  char err[512];
  model_t *m = load(&(tiny_t){0}, err, sizeof err);
  if (!m) fail_msg("%s", err);
  kv_cache_config_t kc = {.block_size = 4, .num_blocks = 8};
  model_kv_config(m, &kc);
  kv_cache_t *cache = kv_cache_create(g_be, &kc);
  assert_non_null(cache);
  assert_null(model_runner_create(m, cache, &(model_runner_config_t){.max_tokens = 0, .max_seqs = 1}));
  assert_null(model_runner_create(m, cache, &(model_runner_config_t){.max_tokens = 4, .max_seqs = 1, .max_logits = 5}));
  kv_cache_config_t other = kc;
  other.n_kv_heads = 1;
  kv_cache_t *wrong = kv_cache_create(g_be, &other);
  assert_null(model_runner_create(m, wrong, &(model_runner_config_t){.max_tokens = 4, .max_seqs = 1}));
  kv_cache_destroy(wrong);
  kv_cache_destroy(cache);

  rig_t r;
  rig_init(&r, m, 4, 2);
  static const int32_t good[4] = {1, 2, 3, 4};
  const kv_seq_t *seqs[1] = {&r.seqs[0]};
  assert_int_equal(kv_seq_reserve(r.cache->alloc, &r.seqs[0], 4), 0);
  assert_int_equal(attn_meta_build(&r.meta, r.cache->alloc, seqs, (int32_t[]){4}, 1), 0);
  int32_t ids[4], pos[4] = {0, 1, 2, 3}, rows[4] = {3, 0, 1, 2};
  float logits[4 * VOCAB];
  model_batch_t b = {.n_tokens = 4, .tokens = ids, .positions = pos, .attn = &r.meta.batch, .n_logits = 4,
                     .logit_rows = rows};
  memcpy(ids, good, sizeof ids);
  ids[2] = VOCAB;
  assert_int_equal(model_forward(r.run, &b, logits), -EINVAL);
  ids[2] = -1;
  assert_int_equal(model_forward(r.run, &b, logits), -EINVAL);
  memcpy(ids, good, sizeof ids);
  pos[1] = -1;
  assert_int_equal(model_forward(r.run, &b, logits), -EINVAL);
  pos[1] = 1;
  rows[0] = 4;
  assert_int_equal(model_forward(r.run, &b, logits), -EINVAL);
  rows[0] = 3;
  b.n_logits = 5;
  assert_int_equal(model_forward(r.run, &b, logits), -E2BIG);
  b.n_logits = 4;
  b.n_tokens = 3; /* disagrees with the attention batch */
  assert_int_equal(model_forward(r.run, &b, logits), -EINVAL);
  b.n_tokens = 4;
  /* the logit rows in any order: row i of the output is row rows[i] */
  tu_poison_f32(logits, 4 * VOCAB);
  assert_int_equal(model_forward(r.run, &b, logits), 0);
  float again[4 * VOCAB];
  for (int i = 0; i < 4; i++) rows[i] = i;
  assert_int_equal(model_forward(r.run, &b, again), 0); /* rewrites the same K/V: same results */
  assert_memory_equal(logits, again + 3 * VOCAB, VOCAB * sizeof(float));
  assert_memory_equal(logits + VOCAB, again, 3 * VOCAB * sizeof(float));
  b.n_logits = 0;
  assert_int_equal(model_forward(r.run, &b, NULL), 0);
  rig_free(&r);
  model_destroy(m);
}

/* ---- malformed models: one clear error each -------------------------------- */

static void missing_tensors(void **state) {
  (void)state;
  expect_error(&(tiny_t){.omit = "blk.1.ffn_up.weight"}, "tensor 'blk.1.ffn_up.weight' is missing");
  expect_error(&(tiny_t){.omit = "token_embd.weight"}, "tensor 'token_embd.weight' is missing");
  expect_error(&(tiny_t){.omit = "output_norm.weight"}, "tensor 'output_norm.weight' is missing");
  expect_error(&(tiny_t){.omit = "blk.0.attn_norm.weight"}, "tensor 'blk.0.attn_norm.weight' is missing");
  expect_error(&(tiny_t){.arch = "qwen2"}, "tensor 'blk.0.attn_q.bias' is missing");
  expect_error(&(tiny_t){.arch = "qwen2", .qkv_bias = 1, .omit = "blk.1.attn_v.bias"},
               "tensor 'blk.1.attn_v.bias' is missing");
}

static void wrong_shapes(void **state) {
  (void)state;
  expect_error(&(tiny_t){.reshape = "blk.0.attn_k.weight"},
               "tensor 'blk.0.attn_k.weight' has shape [32, 24], the hyper-parameters need [32, 16]");
  expect_error(&(tiny_t){.reshape = "blk.1.ffn_down.weight"},
               "tensor 'blk.1.ffn_down.weight' has shape [64, 40], the hyper-parameters need [64, 32]");
  expect_error(&(tiny_t){.reshape = "output_norm.weight"},
               "tensor 'output_norm.weight' has shape [40], the hyper-parameters need [32]");
  expect_error(&(tiny_t){.reshape = "token_embd.weight"},
               "tensor 'token_embd.weight' has shape [32, 28], the hyper-parameters need [32, 20]");
  /* a head count the tensors do not follow */
  expect_error(&(tiny_t){.kv_key = 4}, "tensor 'blk.0.attn_k.weight' has shape [32, 16], the hyper-parameters need [32, 32]");
}

static void unsupported_types_and_archs(void **state) {
  (void)state;
  expect_error(&(tiny_t){.arch = "gpt2"}, "unsupported architecture \"gpt2\" (general.architecture)");
  expect_error(&(tiny_t){.arch = "mamba"}, "tram runs llama, qwen2, qwen3, gemma2, gemma3, phi3, smollm3, qwen35, qwen2moe, qwen3moe and gpt-oss");
  expect_error(&(tiny_t){.arch = "gemma4"}, "tram runs Gemma 4 from a Hugging Face folder only, not from llama.cpp's GGUF form");
  /* qwen3: per-head Q/K norms are required, of head_dim */
  expect_error(&(tiny_t){.arch = "qwen3", .omit = "blk.1.attn_k_norm.weight"},
               "tensor 'blk.1.attn_k_norm.weight' is missing");
  expect_error(&(tiny_t){.arch = "qwen3", .reshape = "blk.0.attn_q_norm.weight"},
               "tensor 'blk.0.attn_q_norm.weight' has shape [16], the hyper-parameters need [8]");
  expect_error(&(tiny_t){.arch = "gemma2", .omit = "blk.1.post_ffw_norm.weight"},
               "tensor 'blk.1.post_ffw_norm.weight' is missing");
  expect_error(&(tiny_t){.arch = "gemma2", .extra_key = "attn_logit_softcapping", .extra_val = 0xffffffffu},
               "key 'gemma2.attn_logit_softcapping' is not a float");
  /* phi3: the fused matrices, of the fused shapes */
  expect_error(&(tiny_t){.arch = "phi3", .reshape = "blk.0.attn_qkv.weight"},
               "tensor 'blk.0.attn_qkv.weight' has shape [32, 72], the hyper-parameters need [32, 64]");
  expect_error(&(tiny_t){.arch = "phi3", .omit = "blk.1.ffn_up.weight"}, "tensor 'blk.1.ffn_up.weight' is missing");
  expect_error(&(tiny_t){.arch = "phi3", .extra = "rope_factors_long.weight"},
               "tensor 'rope_factors_long.weight' must be F32 [4]");
  expect_error(&(tiny_t){.extra = "blk.0.attn_q_norm.weight"},
               "tensor 'blk.0.attn_q_norm.weight' is not part of the llama architecture as tram runs it");
  expect_error(&(tiny_t){.as_q8 = "blk.0.ffn_norm.weight"},
               "tensor 'blk.0.ffn_norm.weight' has type Q8_0; norm weights and biases must be F32");
  /* a type tram has no kernel for: the GGUF reader names the tensor */
  expect_error(&(tiny_t){.as_iq2 = "blk.1.attn_q.weight"}, "blk.1.attn_q.weight");
  /* a quantized matrix is fine */
  char err[512];
  model_t *m = load(&(tiny_t){.as_q8 = "blk.0.ffn_up.weight"}, err, sizeof err);
  if (!m) fail_msg("%s", err);
  model_destroy(m);
}

/* The CUDA backend's head layouts (kernels/cuda_geom.h), on the CPU one. */
static int cuda_rule(kern_backend_t *be, int n_heads, int n_kv_heads, int head_dim, char *err, size_t err_len) {
  (void)be;
  return cuda_geom_attn_supported(n_heads, n_kv_heads, head_dim, err, err_len);
}

/* A backend whose attention cannot take the model's head layout refuses it
 * at load, with the reason (not mid-serving): the tiny model's head_dim 8
 * under the CUDA kernels' rule. */
static void unsupported_head_layout(void **state) {
  (void)state;
  int (*own)(kern_backend_t *, int, int, int, char *, size_t) = g_be->attn_supported;
  g_be->attn_supported = cuda_rule;
  expect_error(&(tiny_t){0}, "head_dim 8: the CUDA attention kernels support head_dim 64 and 128");
  g_be->attn_supported = own;
}

static void bad_keys(void **state) {
  (void)state;
  expect_error(&(tiny_t){.omit_key = "block_count"}, "key 'llama.block_count' is missing");
  expect_error(&(tiny_t){.omit_key = "embedding_length"}, "key 'llama.embedding_length' is missing");
  expect_error(&(tiny_t){.omit_key = "attention.layer_norm_rms_epsilon"},
               "key 'llama.attention.layer_norm_rms_epsilon' is missing");
  expect_error(&(tiny_t){.str_key = "attention.head_count"}, "key 'llama.attention.head_count' is not an integer");
  expect_error(&(tiny_t){.kv_key = 3}, "key 'llama.attention.head_count_kv' (3) does not divide head_count (4)");
  expect_error(&(tiny_t){.vocab_size_key = 21},
               "key 'llama.vocab_size' is 21 but tokenizer.ggml.tokens holds 20 tokens");
  /* a file without a tokenizer: the model loads (its vocabulary size comes
   * from the embedding), the tokenizer (text/) is refused */
  /* a key of a feature tram does not run is named, not ignored */
  expect_error(&(tiny_t){.extra_key = "attn_logit_softcapping", .extra_val = 50},
               "key 'llama.attn_logit_softcapping' is not something tram handles for the llama architecture");
  /* a llama file with experts is Mixtral's: the rest of its keys are needed */
  expect_error(&(tiny_t){.extra_key = "expert_count", .extra_val = 8}, "key 'llama.expert_used_count' is missing");
  expect_error(&(tiny_t){.arch = "qwen3", .extra_key = "expert_count", .extra_val = 8},
               "key 'qwen3.expert_count' is not something tram handles for the qwen3 architecture");
  char err0[512];
  model_t *m0 = load(&(tiny_t){.extra_key = "expert_count", .extra_val = 0}, err0, sizeof err0);
  if (!m0) fail_msg("%s", err0);
  model_destroy(m0);
  /* a sliding window (Mistral-style) is read */
  m0 = load(&(tiny_t){.extra_key = "attention.sliding_window", .extra_val = 4}, err0, sizeof err0);
  if (!m0) fail_msg("%s", err0);
  assert_int_equal(model_hparams(m0)->sliding_window, 4);
  model_destroy(m0);
  char err[512];
  model_t *m = load(&(tiny_t){.no_tokenizer = 1}, err, sizeof err);
  if (!m) fail_msg("%s", err);
  assert_null(tok_create_from_gguf(model_gguf(m), err, sizeof err));
  if (!strstr(err, "tokenizer: tokenizer.ggml.model is missing")) fail_msg("got \"%s\"", err);
  model_destroy(m);
  /* head_count_kv defaults to head_count, the RoPE base to 10000 */
  m = load(&(tiny_t){.omit_key = "rope.freq_base"}, err, sizeof err);
  if (!m) fail_msg("%s", err);
  assert_float_equal(model_hparams(m)->rope_base, 10000.0f, 0);
  model_destroy(m);
}

/* A mixture of experts (model/model_moe.h): its keys read, the stacked
 * experts taken as per-expert views, a missing or mis-shaped expert tensor
 * named; a backend without moe_combine (the CUDA one) refuses the model. */
static void mixture_of_experts(void **state) {
  (void)state;
  char err[512];
  model_t *m = load(&(tiny_t){.arch = "qwen3moe", .experts = 4}, err, sizeof err);
  if (!m) fail_msg("%s", err);
  const model_hparams_t *hp = model_hparams(m);
  assert_int_equal(hp->n_expert, 4);
  assert_int_equal(hp->n_expert_used, 2);
  assert_int_equal(hp->expert_ff_dim, FF / 2);
  assert_int_equal(hp->expert_norm, 1); /* llama.cpp's qwen3moe default */
  assert_int_equal(hp->shexp_ff_dim, 0);
  model_destroy(m);
  expect_error(&(tiny_t){.arch = "qwen3moe", .experts = 4, .omit = "blk.1.ffn_up_exps.weight"},
               "tensor 'blk.1.ffn_up_exps.weight' is missing");
  expect_error(&(tiny_t){.arch = "qwen3moe", .experts = 4, .reshape = "blk.0.ffn_down_exps.weight"},
               "tensor 'blk.0.ffn_down_exps.weight' has shape [32, 40, 4], the hyper-parameters need [32, 32, 4]");
  expect_error(&(tiny_t){.arch = "qwen3moe"}, "key 'qwen3moe.expert_count' is missing");
  void (*own)(kern_backend_t *, float *, const float *, const int32_t *, const float *, int, int, int) =
      g_be->moe_combine;
  g_be->moe_combine = NULL;
  expect_error(&(tiny_t){.arch = "qwen3moe", .experts = 4},
               "the cpu backend does not run mixture-of-experts models yet (4 experts)");
  g_be->moe_combine = own;
}

/* The router (model__moe_route), against the formulas of model_moe.h
 * worked by hand: softmax over all experts, the top k by probability with
 * the lower index first on ties, ids ascending, weights renormalised or
 * not; gpt-oss's top-k-then-softmax. */
static void moe_routing(void **state) {
  (void)state;
  const float logits[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 0.0f};
  int32_t ids[3];
  float w[3];
  double z = 0;
  for (int e = 0; e < 6; e++) z += exp(logits[e]);
  /* top 3: experts 1 and 3 (tied at 2.0), then 4 */
  model__moe_route(logits, 6, 3, 0, MODEL_MOE_SOFTMAX_TOPK, ids, w);
  assert_int_equal(ids[0], 1);
  assert_int_equal(ids[1], 3);
  assert_int_equal(ids[2], 4);
  assert_float_equal(w[0], exp(2.0) / z, 1e-7);
  assert_float_equal(w[2], exp(1.0) / z, 1e-7);
  model__moe_route(logits, 6, 3, 1, MODEL_MOE_SOFTMAX_TOPK, ids, w);
  const double sel = 2 * exp(2.0) + exp(1.0);
  assert_float_equal(w[1], exp(2.0) / sel, 1e-7);
  assert_float_equal(w[2], exp(1.0) / sel, 1e-7);
  assert_float_equal(w[0] + w[1] + w[2], 1.0, 1e-6);
  model__moe_route(logits, 6, 3, 0, MODEL_MOE_TOPK_SOFTMAX, ids, w); /* over the three chosen only */
  assert_float_equal(w[2], exp(1.0) / sel, 1e-7);
  /* k = 1 on a tie picks the lower index */
  model__moe_route(logits, 6, 1, 1, MODEL_MOE_SOFTMAX_TOPK, ids, w);
  assert_int_equal(ids[0], 1);
  assert_float_equal(w[0], 1.0, 0);
}

static void unused_tensor(void **state) {
  (void)state;
  expect_error(&(tiny_t){.extra = "blk.0.attn_output.bias"},
               "tensor 'blk.0.attn_output.bias' is not part of the llama architecture as tram runs it");
  expect_error(&(tiny_t){.extra = "blk.2.attn_norm.weight"}, "tensor 'blk.2.attn_norm.weight' is not part of");
}

/* model_gen_defaults: the general.sampling.* keys of any numeric type, a
 * value out of range or of another type skipped, no key: nothing. */
static void generation_defaults(void **state) {
  (void)state;
  gw_t *w = gw_new();
  gw_kv_f64(w, "general.sampling.temp", 0.7);      /* f64 */
  gw_kv_i32(w, "general.sampling.top_k", 20);      /* i32 */
  gw_kv_u8(w, "general.sampling.min_p", 0);        /* an integer for a float field */
  gw_kv_f32(w, "general.sampling.top_p", 5.0f);    /* out of range: skipped */
  gw_kv_str(w, "general.sampling.penalty_repeat", "1.1"); /* a string: skipped */
  gw_kv_u32(w, "general.sampling.mirostat", 2);    /* no such setting: logged */
  gw_kv_u32(w, "tram.sampling.max_new_tokens", 64);
  size_t size;
  uint8_t *img = gw_finish(w, &size);
  char err[256];
  gguf_ctx_t *g = gguf_open_buffer(img, size, err, sizeof err);
  assert_non_null(g);
  samp_gen_defaults_t d;
  model_gen_defaults(g, &d);
  char text[256];
  assert_string_equal(samp_gen_describe(&d, text, sizeof text), "temperature=0.7 min_p=0 top_k=20 max_tokens=64");
  samp_params_t p = samp_params_default();
  p.temperature = 1.5f;
  samp_gen_apply(&d, 1u << 0, &p); /* temperature given: kept */
  assert_true(p.temperature == 1.5f && p.top_k == 20 && p.min_p == 0.0f && p.top_p == 1.0f);
  gguf_close(g);
  free(img);
  gw_free(w);

  w = gw_new();
  gw_kv_str(w, "general.architecture", "llama");
  img = gw_finish(w, &size);
  g = gguf_open_buffer(img, size, err, sizeof err);
  assert_non_null(g);
  model_gen_defaults(g, &d);
  assert_true(d.fields == 0 && d.max_tokens == 0);
  assert_string_equal(samp_gen_describe(&d, text, sizeof text), "none");
  gguf_close(g);
  free(img);
  gw_free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(generation_defaults),
      cmocka_unit_test(loads_tiny_llama),
      cmocka_unit_test(rope_scaling),
      cmocka_unit_test(forward_batch_invariant),
      cmocka_unit_test(forward_padded_same_bits),
      cmocka_unit_test(runner_rejects_bad_input),
      cmocka_unit_test(missing_tensors),
      cmocka_unit_test(wrong_shapes),
      cmocka_unit_test(unsupported_types_and_archs),
      cmocka_unit_test(bad_keys),
      cmocka_unit_test(unsupported_head_layout),
      cmocka_unit_test(unused_tensor),
      cmocka_unit_test(mixture_of_experts),
      cmocka_unit_test(moe_routing),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
