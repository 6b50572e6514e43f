/* tests/unit/test_model_malformed.c — malformed models, one clear error
 * each naming the key or tensor (tests/unit/model_tiny.h writes them):
 * missing tensors, wrong shapes, unsupported types and architectures, head
 * layouts the backend cannot run, bad keys, tensors the architecture does
 * not use. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/cuda_geom.h"
#include "tests/unit/model_tiny.h"

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
  expect_error(&(tiny_t){.arch = "mamba"}, "tram runs llama, qwen2, qwen3, gemma2, gemma3, gemma4, phi3, smollm3, qwen35, qwen35moe, qwen3next, qwen2moe, qwen3moe and gpt-oss");
  /* gemma4 (llama.cpp's keys): the per-layer types are required */
  expect_error(&(tiny_t){.arch = "gemma4"}, "key 'gemma4.attention.sliding_window_pattern' is missing (want one bool per layer");
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
  expect_error(&(tiny_t){0}, "head_dim 8: the CUDA attention kernels support head_dim 64, 128 and 256");
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

static void unused_tensor(void **state) {
  (void)state;
  expect_error(&(tiny_t){.extra = "blk.0.attn_output.bias"},
               "tensor 'blk.0.attn_output.bias' is not part of the llama architecture as tram runs it");
  expect_error(&(tiny_t){.extra = "blk.2.attn_norm.weight"}, "tensor 'blk.2.attn_norm.weight' is not part of");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(missing_tensors),
      cmocka_unit_test(wrong_shapes),
      cmocka_unit_test(unsupported_types_and_archs),
      cmocka_unit_test(bad_keys),
      cmocka_unit_test(unsupported_head_layout),
      cmocka_unit_test(unused_tensor),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
