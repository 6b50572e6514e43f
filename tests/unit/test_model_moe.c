/* tests/unit/test_model_moe.c — mixtures of experts at load (a tiny
 * synthetic qwen3moe, tests/unit/model_tiny.h: keys, stacked experts,
 * refusals) and the router (model__moe_route) against its formulas worked by
 * hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "model/model_moe.h"
#include "tests/unit/model_tiny.h"

/* A mixture of experts (model/model_moe.h): its keys read, the stacked
 * experts taken as per-expert views, a missing or mis-shaped expert tensor
 * named; a backend without moe_combine refuses the model. */
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(mixture_of_experts),
      cmocka_unit_test(moe_routing),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
