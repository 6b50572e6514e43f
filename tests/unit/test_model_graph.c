/* tests/unit/test_model_graph.c — the host decisions of captured decode
 * steps (model/model_graph.h: buckets, eligibility, what to do with a graph
 * slot, the padded inputs) and the padded metadata image the attention
 * uploads for them (attention/attn_meta.h), on the CPU. The model-level
 * check that padding changes no real row's bits is forward_padded_same_bits
 * in test_model_load.c; the same with real graph replays on a GPU is in
 * tests/gpu/model_check.c (part 4).
 *
 * Expected numbers are worked out from the definitions (powers of two,
 * 256-key splits, blocks of block_size), at issue 23's shapes (256
 * requests, a 131,072-token context, blocks of 16) and the default
 * model's (16 sequences, 8,192 tokens, blocks of 32). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "attention/attn_meta.h"
#include "kernels/cuda_geom.h"
#include "model/model_graph.h"
#include "tests/unit/testutil.h"

static void plan_counts_buckets(void **state) {
  (void)state;
  model_graph_plan_t p;
  assert_int_equal(model_graph_plan_init(&p, 256, 131072, 16), 0);
  assert_int_equal(p.n_rows, 9);  /* 1, 2, 4, ..., 256 */
  assert_int_equal(p.n_keys, 10); /* 256, 512, ..., 131072 */
  assert_int_equal(model_graph_plan_init(&p, 16, 8192, 32), 0);
  assert_int_equal(p.n_rows, 5);  /* 1 .. 16 */
  assert_int_equal(p.n_keys, 6);  /* 256 .. 8192 */
  assert_int_equal(model_graph_plan_init(&p, 48, 1000, 16), 0);
  assert_int_equal(p.n_rows, 7);  /* 1 .. 32, then 48 */
  assert_int_equal(p.n_keys, 3);  /* 256, 512, then 1000 */
  assert_int_equal(model_graph_plan_init(&p, 1, 100, 16), 0);
  assert_int_equal(p.n_rows, 1);
  assert_int_equal(p.n_keys, 1);  /* 100: below one split */
  assert_int_equal(model_graph_plan_init(&p, 0, 100, 16), -EINVAL);
  assert_int_equal(model_graph_plan_init(&p, 4, 0, 16), -EINVAL);
  assert_int_equal(model_graph_plan_init(&p, 4, 100, 0), -EINVAL);
  assert_int_equal(MODEL_GRAPH_MIN_KEYS, CUDA_GEOM_SPLIT_KEYS); /* a bucket is whole splits */
}

static void rows_round_up_to_powers_of_two(void **state) {
  (void)state;
  model_graph_plan_t p;
  assert_int_equal(model_graph_plan_init(&p, 256, 131072, 16), 0);
  const int n[] = {1, 2, 3, 4, 5, 9, 17, 33, 100, 129, 255, 256};
  const int want[] = {1, 2, 4, 4, 8, 16, 32, 64, 128, 256, 256, 256};
  const int index[] = {0, 1, 2, 2, 3, 4, 5, 6, 7, 8, 8, 8};
  for (size_t i = 0; i < sizeof n / sizeof n[0]; i++) {
    int ix = -1;
    assert_int_equal(model_graph_rows(&p, n[i], &ix), want[i]);
    assert_int_equal(ix, index[i]);
  }
  assert_int_equal(model_graph_rows(&p, 0, NULL), 0);
  assert_int_equal(model_graph_rows(&p, 257, NULL), 0);
  /* a cap that is no power of two is the last bucket */
  assert_int_equal(model_graph_plan_init(&p, 48, 1000, 16), 0);
  int ix = -1;
  assert_int_equal(model_graph_rows(&p, 32, &ix), 32);
  assert_int_equal(ix, 5);
  assert_int_equal(model_graph_rows(&p, 33, &ix), 48);
  assert_int_equal(ix, 6);
  assert_int_equal(model_graph_rows(&p, 48, &ix), 48);
  assert_int_equal(model_graph_rows(&p, 49, NULL), 0);
}

static void keys_round_up_to_split_powers(void **state) {
  (void)state;
  model_graph_plan_t p;
  assert_int_equal(model_graph_plan_init(&p, 256, 131072, 16), 0);
  int w = -1, ix = -1;
  assert_int_equal(model_graph_keys(&p, 1, &w, &ix), 256);
  assert_int_equal(w, 16); /* 256 / 16 */
  assert_int_equal(ix, 0);
  assert_int_equal(model_graph_keys(&p, 256, &w, &ix), 256);
  assert_int_equal(model_graph_keys(&p, 257, &w, &ix), 512);
  assert_int_equal(w, 32);
  assert_int_equal(ix, 1);
  assert_int_equal(model_graph_keys(&p, 2049, &w, &ix), 4096); /* 9 live splits, 16 in the graph */
  assert_int_equal(w, 256);
  assert_int_equal(cuda_geom_decode_splits(4096), 16);
  assert_int_equal(model_graph_keys(&p, 131072, &w, &ix), 131072);
  assert_int_equal(w, 8192);
  assert_int_equal(ix, 9);
  assert_int_equal(model_graph_keys(&p, 131073, &w, NULL), 0);
  assert_int_equal(model_graph_keys(&p, 0, &w, NULL), 0);
  /* a cap that is no bucket; a width that rounds up */
  assert_int_equal(model_graph_plan_init(&p, 4, 1000, 16), 0);
  assert_int_equal(model_graph_keys(&p, 600, &w, &ix), 1000);
  assert_int_equal(w, 63); /* ceil(1000 / 16) */
  assert_int_equal(ix, 2);
  /* the default model: blocks of 32, 8,192 tokens */
  assert_int_equal(model_graph_plan_init(&p, 16, 8192, 32), 0);
  assert_int_equal(model_graph_keys(&p, 300, &w, NULL), 512);
  assert_int_equal(w, 16);
}

/* A step of n sequences adding q[b] tokens each, the longest context max_k. */
static model_graph_why_t eligible(const model_graph_plan_t *p, int n, const int *q, int max_k, model_graph_key_t *key) {
  int32_t cu[64];
  cu[0] = 0;
  for (int b = 0; b < n; b++) cu[b + 1] = cu[b] + q[b];
  const model_graph_step_t s = {.n_seqs = n, .n_tokens = cu[n], .cu_seq_lens_q = cu, .max_seqlen_k = max_k};
  return model_graph_eligible(p, &s, key);
}

static void only_decode_steps_within_buckets(void **state) {
  (void)state;
  model_graph_plan_t p;
  assert_int_equal(model_graph_plan_init(&p, 16, 8192, 32), 0);
  model_graph_key_t k;
  const int ones[20] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  assert_int_equal(eligible(&p, 3, ones, 700, &k), MODEL_GRAPH_OK);
  assert_int_equal(k.rows, 4);
  assert_int_equal(k.keys, 1024);
  assert_int_equal(k.width, 32);
  assert_int_equal(k.slot, 2 * p.n_keys + 2);
  assert_int_equal(eligible(&p, 3, (int[]){1, 2, 0}, 700, &k), MODEL_GRAPH_NOT_DECODE); /* sum 3, not all 1 */
  assert_int_equal(eligible(&p, 2, (int[]){1, 5}, 700, &k), MODEL_GRAPH_NOT_DECODE);
  assert_int_equal(eligible(&p, 17, ones, 700, &k), MODEL_GRAPH_TOO_MANY);
  assert_int_equal(eligible(&p, 2, ones, 8193, &k), MODEL_GRAPH_TOO_LONG);
  assert_int_equal(eligible(&p, 0, ones, 10, &k), MODEL_GRAPH_NOT_DECODE);
  assert_string_equal(model_graph_why_name(MODEL_GRAPH_TOO_LONG), "a context past the largest bucket");

  /* every (rows, keys) pair has its own slot, within the table */
  char seen[MODEL_GRAPH_MAX_BUCKETS * MODEL_GRAPH_MAX_BUCKETS] = {0};
  for (int n = 1; n <= 16; n++)
    for (int mk = 1; mk <= 8192; mk += 97) {
      assert_int_equal(eligible(&p, n, ones, mk, &k), MODEL_GRAPH_OK);
      assert_true(k.slot >= 0 && k.slot < p.n_rows * p.n_keys);
      assert_true(k.rows >= n && k.keys >= mk && (int64_t)k.width * 32 >= k.keys);
      int ri = -1, ki = -1;
      model_graph_rows(&p, n, &ri);
      model_graph_keys(&p, mk, NULL, &ki);
      assert_int_equal(k.slot, ri * p.n_keys + ki);
      seen[k.slot] = 1;
    }
  int distinct = 0;
  for (size_t i = 0; i < sizeof seen; i++) distinct += seen[i];
  assert_int_equal(distinct, p.n_rows * p.n_keys);
}

static void slot_state_decides_the_action(void **state) {
  (void)state;
  assert_int_equal(model_graph_action(MODEL_GRAPHS_ON, 1, MODEL_GRAPH_EMPTY), MODEL_GRAPH_WARM_UP);
  assert_int_equal(model_graph_action(MODEL_GRAPHS_ON, 1, MODEL_GRAPH_WARM), MODEL_GRAPH_CAPTURE);
  assert_int_equal(model_graph_action(MODEL_GRAPHS_ON, 0, MODEL_GRAPH_WARM), MODEL_GRAPH_EAGER);
  assert_int_equal(model_graph_action(MODEL_GRAPHS_ON, 1, MODEL_GRAPH_READY), MODEL_GRAPH_REPLAY);
  assert_int_equal(model_graph_action(MODEL_GRAPHS_ON, 1, MODEL_GRAPH_FAILED), MODEL_GRAPH_EAGER); /* no retry */
  assert_int_equal(model_graph_action(MODEL_GRAPHS_ON, 0, MODEL_GRAPH_EMPTY), MODEL_GRAPH_EAGER);
  assert_int_equal(model_graph_action(MODEL_GRAPHS_PADDED, 1, MODEL_GRAPH_EMPTY), MODEL_GRAPH_EAGER);
  assert_int_equal(model_graph_action(MODEL_GRAPHS_PADDED, 1, MODEL_GRAPH_READY), MODEL_GRAPH_EAGER);
  assert_int_equal(model_graph_action(MODEL_GRAPHS_OFF, 1, MODEL_GRAPH_READY), MODEL_GRAPH_EAGER);
}

static void inputs_padded_with_token_zero(void **state) {
  (void)state;
  const int32_t tok[3] = {7, 8, 9}, pos[3] = {40, 3, 11}, lr[2] = {2, 0};
  int32_t ids[8], p8[8], rows[8];
  memset(ids, 0x5a, (size_t)8 * sizeof *ids);
  memset(p8, 0x5a, (size_t)8 * sizeof *p8);
  memset(rows, 0x5a, (size_t)8 * sizeof *rows);
  model_graph_pad_inputs(3, 8, tok, pos, 2, lr, ids, p8, rows);
  const int32_t want_ids[8] = {7, 8, 9, 0, 0, 0, 0, 0}, want_pos[8] = {40, 3, 11, 0, 0, 0, 0, 0};
  const int32_t want_rows[8] = {2, 0, 2, 3, 4, 5, 6, 7};
  assert_memory_equal(ids, want_ids, sizeof want_ids);
  assert_memory_equal(p8, want_pos, sizeof want_pos);
  assert_memory_equal(rows, want_rows, sizeof want_rows);
}

/* The padded image: live rows as they are, the table widened with -1, then
 * padding rows that see no key and write nothing. */
static void padded_image(void **state) {
  (void)state;
  /* 2 decode sequences of 5 and 9 cached tokens in blocks of 4 (compact
   * table: stride 3), padded to 4 rows at width 6 */
  const int32_t cu_q[3] = {0, 1, 2}, cu_k[3] = {0, 6, 16}, cached[2] = {5, 9}, slots[2] = {4 * 7 + 1, 4 * 2 + 1};
  const int32_t table[2 * 3] = {3, 7, -1, 0, 5, 2};
  const attn_batch_t bt = {.n_seqs = 2, .n_tokens = 2, .cu_seq_lens_q = cu_q, .cu_seq_lens_k = cu_k,
                           .max_seqlen_q = 1, .max_seqlen_k = 10, .block_table = table, .max_blocks_per_seq = 3,
                           .cache_seqlens = cached, .slots = slots};
  attn_meta_image_t img;
  attn_meta_image_layout(4, 4, 6, &img);
  int32_t *dst = malloc((size_t)img.n * sizeof *dst);
  memset(dst, 0x5a, (size_t)img.n * sizeof *dst);
  attn_meta_image_pack_padded(&bt, slots, 4, &img, dst);
  const int32_t want_cu_q[5] = {0, 1, 2, 3, 4}, want_cu_k[5] = {0, 6, 16, 16, 16};
  const int32_t want_cached[4] = {5, 9, -1, -1}, want_slots[4] = {29, 9, -1, -1};
  const int32_t want_table[4 * 6] = {3, 7, -1, -1, -1, -1, 0, 5, 2, -1, -1, -1,
                                     -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
  assert_memory_equal(dst + img.cu_q, want_cu_q, sizeof want_cu_q);
  assert_memory_equal(dst + img.cu_k, want_cu_k, sizeof want_cu_k);
  assert_memory_equal(dst + img.cache_seqlens, want_cached, sizeof want_cached);
  assert_memory_equal(dst + img.slots, want_slots, sizeof want_slots);
  assert_memory_equal(dst + img.block_table, want_table, sizeof want_table);
  for (int64_t i = img.slots + 4; i < img.block_table; i++) assert_int_equal(dst[i], 0);
  assert_int_equal(img.n, img.block_table + 4 * 6);

  /* no padding rows, a width below the stride: the first entries */
  attn_meta_image_layout(2, 2, 2, &img);
  memset(dst, 0x5a, (size_t)img.n * sizeof *dst);
  attn_meta_image_pack_padded(&bt, slots, 2, &img, dst);
  const int32_t want_narrow[4] = {3, 7, 0, 5};
  assert_memory_equal(dst + img.block_table, want_narrow, sizeof want_narrow);
  assert_memory_equal(dst + img.cache_seqlens, cached, sizeof cached);
  free(dst);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(plan_counts_buckets),
      cmocka_unit_test(rows_round_up_to_powers_of_two),
      cmocka_unit_test(keys_round_up_to_split_powers),
      cmocka_unit_test(only_decode_steps_within_buckets),
      cmocka_unit_test(slot_state_decides_the_action),
      cmocka_unit_test(inputs_padded_with_token_zero),
      cmocka_unit_test(padded_image),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
