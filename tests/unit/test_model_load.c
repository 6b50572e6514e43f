/* tests/unit/test_model_load.c — model_load on tiny synthetic GGUF files
 * (tests/unit/model_tiny.h): what a good file gives — the hyper-parameters,
 * the RoPE frequencies and scalings it reads, the tokenizer and template,
 * the generation defaults (general.sampling.*). The runner:
 * test_model_runner.c; malformed models: test_model_malformed.c; mixtures of
 * experts: test_model_moe.c. The forward's numbers are checked against the
 * float64 reference in tests/reference/test_forward.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/model_tiny.h"

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
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
