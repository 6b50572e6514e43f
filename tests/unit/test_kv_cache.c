/* tests/unit/test_kv_cache.c — the block allocator, sequence block tables,
 * and the KV arena with its `update`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cache/kv_alloc.h"
#include "cache/kv_cache.h"
#include "tests/unit/testutil.h"

/* --- allocator ------------------------------------------------------------- */

/* Blocks wholly before a sliding window are given back: the table keeps its
 * length with -1 entries, slots before the edge are gone, reservation goes
 * on, a fork shares only what is left, and freeing skips the released. */
static void seq_release_before_window(void **state) {
  (void)state;
  kv_alloc_t *a = kv_alloc_create(8, 4);
  assert_non_null(a);
  kv_seq_t s, child;
  kv_seq_init(&s);
  kv_seq_init(&child);
  assert_int_equal(kv_seq_reserve(a, &s, 14), 0); /* 4 blocks */
  kv_seq_commit(a, &s, 14);
  const int32_t b2 = s.blocks[2];
  kv_seq_release_before(a, &s, 3); /* block 0 still holds token 3 */
  assert_int_equal(s.n_released, 0);
  kv_seq_release_before(a, &s, 9); /* blocks 0 and 1 hold tokens 0..7 only */
  assert_int_equal(s.n_released, 2);
  assert_int_equal(s.blocks[0], -1);
  assert_int_equal(s.blocks[1], -1);
  assert_int_equal(s.n_blocks, 4);
  assert_int_equal(kv_alloc_free_blocks(a), 6);
  assert_int_equal(kv_seq_slot(a, &s, 7), -1);
  assert_int_equal(kv_seq_slot(a, &s, 8), b2 * 4);
  kv_seq_release_before(a, &s, 5); /* an earlier edge changes nothing */
  assert_int_equal(s.n_released, 2);
  assert_int_equal(kv_seq_blocks_needed(a, &s, 3), 1); /* 17 tokens: a fifth entry */
  assert_int_equal(kv_seq_reserve(a, &s, 3), 0);
  assert_int_equal(s.n_blocks, 5);
  assert_int_equal(kv_alloc_free_blocks(a), 5);
  kv_seq_commit(a, &s, 3);
  int32_t src = -1, dst = -1;
  assert_int_equal(kv_seq_fork(a, &child, &s, &src, &dst), 1); /* 17 tokens: the last block is partial */
  assert_int_equal(child.n_released, 2);
  assert_int_equal(child.blocks[1], -1);
  assert_int_equal(kv_block_refs(a, b2), 2);
  assert_int_equal(kv_alloc_free_blocks(a), 4);
  kv_seq_free(a, &child);
  assert_int_equal(kv_block_refs(a, b2), 1);
  kv_seq_free(a, &s);
  assert_int_equal(s.n_released, 0);
  assert_int_equal(kv_alloc_free_blocks(a), 8);
  kv_alloc_destroy(a);
}

static void alloc_rejects_bad_sizes(void **state) {
  (void)state;
  assert_null(kv_alloc_create(0, 32));
  assert_null(kv_alloc_create(4, 0));
  assert_null(kv_alloc_create(-1, 16));
  assert_null(kv_alloc_create(INT32_MAX / 4096 + 1, 4096)); /* slots would pass INT32_MAX */
  kv_alloc_t *a = kv_alloc_create(INT32_MAX / 4096, 4096);
  assert_non_null(a);
  kv_alloc_destroy(a);
  kv_alloc_destroy(NULL);
}

/* Blocks come out least recently freed first; running out is -ENOSPC, again
 * and again, and changes nothing. */
static void alloc_order_and_running_out(void **state) {
  (void)state;
  kv_alloc_t *a = kv_alloc_create(4, 16);
  assert_non_null(a);
  assert_int_equal(kv_alloc_num_blocks(a), 4);
  assert_int_equal(kv_alloc_block_size(a), 16);
  assert_int_equal(kv_alloc_free_blocks(a), 4);
  for (int32_t b = 0; b < 4; b++) {
    assert_int_equal(kv_block_alloc(a), b);
    assert_int_equal(kv_block_refs(a, b), 1);
  }
  assert_int_equal(kv_alloc_free_blocks(a), 0);
  assert_int_equal(kv_alloc_used_blocks(a), 4);
  for (int i = 0; i < 3; i++) assert_int_equal(kv_block_alloc(a), -ENOSPC);
  assert_int_equal(kv_alloc_used_blocks(a), 4);
  kv_block_unref(a, 2);
  kv_block_unref(a, 0);
  kv_block_unref(a, 3);
  assert_int_equal(kv_alloc_free_blocks(a), 3);
  assert_int_equal(kv_block_alloc(a), 2);
  assert_int_equal(kv_block_alloc(a), 0);
  assert_int_equal(kv_block_alloc(a), 3);
  assert_int_equal(kv_block_alloc(a), -ENOSPC);
  kv_alloc_destroy(a);
}

/* References: a block is freed only when the last one goes; referencing a
 * free block takes it off the free list from wherever it is (what a
 * prefix-cache hit will do), keeping the others' order. */
static void refcounts(void **state) {
  (void)state;
  kv_alloc_t *a = kv_alloc_create(5, 8);
  assert_non_null(a);
  for (int i = 0; i < 5; i++) assert_int_equal(kv_block_alloc(a), i);
  kv_block_ref(a, 1);
  kv_block_ref(a, 1);
  assert_int_equal(kv_block_refs(a, 1), 3);
  kv_block_unref(a, 1);
  kv_block_unref(a, 1);
  assert_int_equal(kv_block_refs(a, 1), 1);
  assert_int_equal(kv_alloc_free_blocks(a), 0);
  kv_block_unref(a, 1);
  assert_int_equal(kv_block_refs(a, 1), 0);
  assert_int_equal(kv_alloc_free_blocks(a), 1);
  kv_block_unref(a, 3);
  kv_block_unref(a, 4);
  /* free list: 1, 3, 4; take 3 from the middle */
  kv_block_ref(a, 3);
  assert_int_equal(kv_block_refs(a, 3), 1);
  assert_int_equal(kv_alloc_free_blocks(a), 2);
  assert_int_equal(kv_block_alloc(a), 1);
  assert_int_equal(kv_block_alloc(a), 4);
  assert_int_equal(kv_block_alloc(a), -ENOSPC);
  /* the head and the tail too */
  kv_block_unref(a, 0);
  kv_block_unref(a, 2);
  kv_block_unref(a, 4);
  kv_block_ref(a, 0);
  kv_block_ref(a, 4);
  assert_int_equal(kv_alloc_free_blocks(a), 1);
  assert_int_equal(kv_block_alloc(a), 2);
  assert_int_equal(kv_block_alloc(a), -ENOSPC);
  kv_alloc_destroy(a);
}

/* --- sequences ------------------------------------------------------------- */

/* Reservation is all or nothing; slots follow the block table; commit and
 * free do what they say. */
static void seq_reserve_slots_free(void **state) {
  (void)state;
  kv_alloc_t *a = kv_alloc_create(8, 4);
  assert_non_null(a);
  kv_seq_t s, t;
  kv_seq_init(&s);
  kv_seq_init(&t);
  assert_int_equal(kv_seq_blocks_needed(a, &s, 0), 0);
  assert_int_equal(kv_seq_blocks_needed(a, &s, 1), 1);
  assert_int_equal(kv_seq_blocks_needed(a, &s, 4), 1);
  assert_int_equal(kv_seq_blocks_needed(a, &s, 5), 2);
  assert_int_equal(kv_seq_reserve(a, &s, 18), 0); /* 5 blocks */
  assert_int_equal(s.n_blocks, 5);
  assert_int_equal(s.n_tokens, 0);
  assert_int_equal(kv_alloc_free_blocks(a), 3);
  for (int64_t pos = 0; pos < 20; pos++)
    assert_int_equal(kv_seq_slot(a, &s, pos), s.blocks[pos / 4] * 4 + pos % 4);
  assert_int_equal(kv_seq_slot(a, &s, 20), -1);
  assert_int_equal(kv_seq_slot(a, &s, -1), -1);

  /* t needs 4 blocks, 3 are free: nothing changes */
  assert_int_equal(kv_seq_blocks_needed(a, &t, 13), 4);
  assert_int_equal(kv_seq_reserve(a, &t, 13), -ENOSPC);
  assert_int_equal(t.n_blocks, 0);
  assert_null(t.blocks);
  assert_int_equal(kv_alloc_free_blocks(a), 3);
  assert_int_equal(kv_seq_reserve(a, &t, -1), -EINVAL);
  assert_int_equal(kv_seq_reserve(a, &t, 12), 0);
  assert_int_equal(kv_alloc_free_blocks(a), 0);

  /* commit: room is counted from the committed tokens */
  kv_seq_commit(a, &s, 18);
  assert_int_equal(s.n_tokens, 18);
  assert_int_equal(kv_seq_blocks_needed(a, &s, 2), 0);
  assert_int_equal(kv_seq_blocks_needed(a, &s, 3), 1);
  assert_int_equal(kv_seq_reserve(a, &s, 2), 0);
  assert_int_equal(kv_seq_reserve(a, &s, 3), -ENOSPC);
  assert_int_equal(s.n_blocks, 5);

  /* a block shared with t survives s's free */
  int32_t shared = s.blocks[0];
  kv_block_ref(a, shared);
  kv_seq_free(a, &s);
  assert_int_equal(s.n_blocks, 0);
  assert_int_equal(s.n_tokens, 0);
  assert_null(s.blocks);
  assert_int_equal(kv_alloc_free_blocks(a), 4);
  assert_int_equal(kv_block_refs(a, shared), 1);
  kv_block_unref(a, shared);
  kv_seq_free(a, &t);
  assert_int_equal(kv_alloc_free_blocks(a), 8);
  kv_alloc_destroy(a);
}

/* A storm of random reserves, commits, shares and frees over many
 * sequences: at every step the used count equals the blocks some sequence
 * or extra reference holds, no block is handed to two sequences, and at the
 * end every block is free again. */
static void alloc_storm(void **state) {
  (void)state;
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed());
  enum { N_SEQS = 24, N_BLOCKS = 97, BS = 16, ROUNDS = 20000 };
  kv_alloc_t *a = kv_alloc_create(N_BLOCKS, BS);
  assert_non_null(a);
  kv_seq_t seqs[N_SEQS];
  int32_t extra[N_BLOCKS]; /* references the test holds itself */
  memset(extra, 0, sizeof extra);
  for (int i = 0; i < N_SEQS; i++) kv_seq_init(&seqs[i]);
  int enospc = 0;
  for (int round = 0; round < ROUNDS; round++) {
    kv_seq_t *s = &seqs[tu_below(&rng, N_SEQS)];
    switch (tu_below(&rng, 8)) {
      case 0: case 1: case 2: case 3: { /* reserve, then commit some of it */
        int64_t n = (int64_t)tu_below(&rng, 3 * BS);
        int32_t need = kv_seq_blocks_needed(a, s, n), free_before = kv_alloc_free_blocks(a), had = s->n_blocks;
        int rc = kv_seq_reserve(a, s, n);
        if (need > free_before) {
          assert_int_equal(rc, -ENOSPC);
          assert_int_equal(s->n_blocks, had);
          assert_int_equal(kv_alloc_free_blocks(a), free_before);
          enospc++;
        } else {
          assert_int_equal(rc, 0);
          assert_int_equal(s->n_blocks, had + need);
          assert_int_equal(kv_alloc_free_blocks(a), free_before - need);
          kv_seq_commit(a, s, (int64_t)tu_below(&rng, (uint64_t)n + 1));
        }
        break;
      }
      case 4: case 5: /* free a sequence */
        kv_seq_free(a, s);
        break;
      case 6: { /* take an extra reference on one of its blocks (sharing) */
        if (s->n_blocks == 0) break;
        int32_t b = s->blocks[tu_below(&rng, (uint64_t)s->n_blocks)];
        kv_block_ref(a, b);
        extra[b]++;
        break;
      }
      default: { /* drop an extra reference */
        int32_t b = (int32_t)tu_below(&rng, N_BLOCKS);
        if (extra[b] > 0) {
          kv_block_unref(a, b);
          extra[b]--;
        }
        break;
      }
    }
    if (round % 97 == 0 || round == ROUNDS - 1) {
      int32_t refs[N_BLOCKS];
      memcpy(refs, extra, sizeof refs);
      int32_t owner[N_BLOCKS];
      for (int b = 0; b < N_BLOCKS; b++) owner[b] = -1;
      for (int i = 0; i < N_SEQS; i++)
        for (int j = 0; j < seqs[i].n_blocks; j++) {
          int32_t b = seqs[i].blocks[j];
          assert_true(b >= 0 && b < N_BLOCKS);
          assert_int_equal(owner[b], -1); /* never in two sequences */
          owner[b] = i;
          refs[b]++;
        }
      int used = 0;
      for (int b = 0; b < N_BLOCKS; b++) {
        assert_int_equal(kv_block_refs(a, b), refs[b]);
        used += refs[b] > 0;
      }
      assert_int_equal(kv_alloc_used_blocks(a), used);
      assert_int_equal(kv_alloc_free_blocks(a), N_BLOCKS - used);
    }
  }
  assert_true(enospc > 0); /* the storm did run out */
  for (int i = 0; i < N_SEQS; i++) kv_seq_free(a, &seqs[i]);
  for (int b = 0; b < N_BLOCKS; b++)
    while (extra[b]-- > 0) kv_block_unref(a, b);
  assert_int_equal(kv_alloc_free_blocks(a), N_BLOCKS);
  assert_int_equal(kv_alloc_used_blocks(a), 0);
  kv_alloc_destroy(a);
}

/* --- the arena ----------------------------------------------------------- */

static void cache_sizing(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 1);
  assert_non_null(be);
  kv_cache_config_t cfg = {.n_layers = 3, .n_kv_heads = 2, .head_dim = 8, .budget_bytes = 0};
  const size_t block_bytes = 3 * 2 * 32 * 2 * 8 * sizeof(float); /* default block size 32 */
  assert_int_equal(kv_cache_block_bytes(&cfg, KERN_F32), block_bytes);
  assert_null(kv_cache_create(be, &cfg)); /* a budget of 0 holds no block */
  cfg.budget_bytes = block_bytes - 1;
  assert_null(kv_cache_create(be, &cfg));
  cfg.budget_bytes = 10 * block_bytes + block_bytes / 2;
  kv_cache_t *c = kv_cache_create(be, &cfg);
  assert_non_null(c);
  assert_int_equal(c->num_blocks, 10);
  assert_int_equal(c->block_size, 32);
  assert_int_equal(kv_alloc_num_blocks(c->alloc), 10);
  assert_int_equal(kv_alloc_free_blocks(c->alloc), 10);
  /* the six tensors tile the arena without overlap */
  const size_t tensor_bytes = (size_t)10 * 32 * 16 * sizeof(float);
  for (int l = 0; l < 3; l++) {
    assert_ptr_equal((char *)kv_cache_k(c, l), (char *)c->arena + (size_t)2 * l * tensor_bytes);
    assert_ptr_equal((char *)kv_cache_v(c, l), (char *)kv_cache_k(c, l) + tensor_bytes);
  }
  assert_int_equal(c->arena_bytes, 6 * tensor_bytes);
  kv_cache_destroy(c);

  cfg.num_blocks = 7; /* given directly, the budget is ignored */
  cfg.block_size = 16;
  c = kv_cache_create(be, &cfg);
  assert_non_null(c);
  assert_int_equal(c->num_blocks, 7);
  assert_int_equal(c->block_size, 16);
  kv_cache_destroy(c);

  kv_cache_config_t bad[] = {
      {.n_layers = 0, .n_kv_heads = 2, .head_dim = 8, .num_blocks = 4},
      {.n_layers = 1, .n_kv_heads = -2, .head_dim = 8, .num_blocks = 4},
      {.n_layers = 1, .n_kv_heads = 2, .head_dim = 8, .num_blocks = -4},
      {.n_layers = 1, .n_kv_heads = 2, .head_dim = 8, .block_size = -1, .num_blocks = 4},
      {.n_layers = 1, .n_kv_heads = 2, .head_dim = 8, .block_size = 32, .num_blocks = INT32_MAX / 32 + 1},
      {.n_layers = 2, .n_kv_heads = 2, .head_dim = 8, .num_blocks = 4, .layer_head_dim = (const int[]){8, 0}},
      {.n_layers = 2, .n_kv_heads = 2, .head_dim = 8, .num_blocks = 4, .layer_kv_heads = (const int[]){2, 5000}},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) assert_null(kv_cache_create(be, &bad[i]));
  kv_cache_destroy(NULL);
  kern_backend_destroy(be);
}

/* kv_cache_update writes one layer's new K/V at the slots (other layers
 * untouched) and gathers sequences' K/V packed along cu_seq_lens_k. */
static void cache_update_writes_and_gathers(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 2);
  assert_non_null(be);
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed() + 1);
  kv_cache_config_t cfg = {.n_layers = 2, .n_kv_heads = 2, .head_dim = 8, .block_size = 4, .num_blocks = 12};
  kv_cache_t *c = kv_cache_create(be, &cfg);
  assert_non_null(c);
  const int kv_dim = c->kv_dim;
  const size_t slots_total = (size_t)12 * 4;
  for (int l = 0; l < 2; l++) {
    tu_poison_f32(kv_cache_k(c, l), slots_total * kv_dim);
    tu_poison_f32(kv_cache_v(c, l), slots_total * kv_dim);
  }
  /* two sequences of 7 and 9 tokens, written in one update of layer 1 */
  kv_seq_t s[2];
  const int len[2] = {7, 9};
  int32_t *slots = be->alloc(be, 16 * sizeof(int32_t));
  float *k = be->alloc(be, 16 * (size_t)kv_dim * sizeof(float)), *v = be->alloc(be, 16 * (size_t)kv_dim * sizeof(float));
  tu_fill_normal(&rng, k, 16 * (size_t)kv_dim, 1.0f);
  tu_fill_normal(&rng, v, 16 * (size_t)kv_dim, 1.0f);
  int t = 0;
  kv_seq_init(&s[0]);
  kv_seq_init(&s[1]);
  assert_int_equal(kv_block_alloc(c->alloc), 0); /* a hole, so blocks are not contiguous */
  for (int i = 0; i < 2; i++) {
    assert_int_equal(kv_seq_reserve(c->alloc, &s[i], len[i]), 0);
    for (int p = 0; p < len[i]; p++) slots[t++] = kv_seq_slot(c->alloc, &s[i], p);
  }
  int32_t *cu_k = be->alloc(be, 3 * sizeof(int32_t)), *table = be->alloc(be, 2 * 4 * sizeof(int32_t));
  cu_k[0] = 0, cu_k[1] = 7, cu_k[2] = 16;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++) table[i * 4 + j] = j < s[i].n_blocks ? s[i].blocks[j] : -1;
  float *ko = be->alloc(be, 16 * (size_t)kv_dim * sizeof(float)), *vo = be->alloc(be, 16 * (size_t)kv_dim * sizeof(float));
  tu_poison_f32(ko, 16 * (size_t)kv_dim);
  tu_poison_f32(vo, 16 * (size_t)kv_dim);
  const kern_attn_args_t ga = {.n_seqs = 2, .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim,
                               .cu_seq_lens_k = cu_k, .max_seqlen_k = 9, .k_cache = kv_cache_k(c, 1),
                               .v_cache = kv_cache_v(c, 1), .block_size = c->block_size, .block_table = table,
                               .max_blocks_per_seq = 4};
  kv_update_t u = {.k = k, .v = v, .slots = slots, .n_tokens = 16, .k_out = ko, .v_out = vo, .gather = &ga};
  kv_cache_update(c, 1, &u);
  assert_memory_equal(ko, k, 16 * (size_t)kv_dim * sizeof(float));
  assert_memory_equal(vo, v, 16 * (size_t)kv_dim * sizeof(float));
  const float *k1 = kv_cache_k(c, 1), *v1 = kv_cache_v(c, 1);
  for (int i = 0; i < 16; i++) {
    assert_memory_equal(k1 + (size_t)slots[i] * kv_dim, k + (size_t)i * kv_dim, (size_t)kv_dim * sizeof(float));
    assert_memory_equal(v1 + (size_t)slots[i] * kv_dim, v + (size_t)i * kv_dim, (size_t)kv_dim * sizeof(float));
  }
  const float *k0 = kv_cache_k(c, 0), *v0 = kv_cache_v(c, 0);
  for (size_t i = 0; i < slots_total * kv_dim; i++) assert_true(isnan(k0[i]) && isnan(v0[i]));
  kv_seq_free(c->alloc, &s[0]);
  kv_seq_free(c->alloc, &s[1]);
  be->free(be, slots);
  be->free(be, k);
  be->free(be, v);
  be->free(be, ko);
  be->free(be, vo);
  be->free(be, cu_k);
  be->free(be, table);
  kv_cache_destroy(c);
  kern_backend_destroy(be);
}

/* Layers of their own geometry (Gemma 4: wider heads, fewer of them, on
 * the full-attention layers): each layer's K and V take their own bytes,
 * tile the arena in order without overlap, and an update or a block copy
 * of one layer moves that layer's rows only, at its own width. */
static void cache_per_layer_geometry(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 1);
  assert_non_null(be);
  const int heads[3] = {2, 1, 2}, dims[3] = {4, 8, 6};
  kv_cache_config_t cfg = {.n_layers = 3, .n_kv_heads = 2, .head_dim = 4, .layer_kv_heads = heads,
                           .layer_head_dim = dims, .block_size = 4, .num_blocks = 5};
  assert_int_equal(kv_cache_block_bytes(&cfg, KERN_F32), (size_t)2 * 4 * (8 + 8 + 12) * sizeof(float));
  kv_cache_t *c = kv_cache_create(be, &cfg);
  assert_non_null(c);
  assert_int_equal(c->arena_bytes, 5 * kv_cache_block_bytes(&cfg, KERN_F32));
  size_t off = 0;
  for (int l = 0; l < 3; l++) {
    const size_t tensor = (size_t)5 * 4 * heads[l] * dims[l] * sizeof(float);
    assert_int_equal(c->layer_kv_heads[l], heads[l]);
    assert_int_equal(c->layer_head_dim[l], dims[l]);
    assert_ptr_equal(kv_cache_k(c, l), (char *)c->arena + off);
    assert_ptr_equal(kv_cache_v(c, l), (char *)c->arena + off + tensor);
    off += 2 * tensor;
    tu_poison_f32(kv_cache_k(c, l), 2 * tensor / sizeof(float));
  }
  assert_int_equal(off, c->arena_bytes);
  /* two tokens into layer 1 (1 head of 8) at slots 5 and 6 (block 1) */
  float k[16], v[16];
  for (int i = 0; i < 16; i++) k[i] = (float)i, v[i] = (float)(100 + i);
  const int32_t slots[2] = {5, 6};
  kv_update_t u = {.k = k, .v = v, .slots = slots, .n_tokens = 2};
  kv_cache_update(c, 1, &u);
  const float *k1 = kv_cache_k(c, 1), *v1 = kv_cache_v(c, 1);
  assert_memory_equal(k1 + 5 * 8, k, 16 * sizeof(float));
  assert_memory_equal(v1 + 5 * 8, v, 16 * sizeof(float));
  for (int i = 0; i < 5 * 4 * 8; i++)
    if (i < 5 * 8 || i >= 7 * 8) assert_true(isnan(k1[i]) && isnan(v1[i]));
  for (int l = 0; l < 3; l += 2) /* the other layers untouched */
    for (int i = 0; i < 5 * 4 * heads[l] * dims[l]; i++)
      assert_true(isnan(((float *)kv_cache_k(c, l))[i]) && isnan(((float *)kv_cache_v(c, l))[i]));
  /* block 1 copied to block 3: layer 1's 4 rows of 8 */
  kv_cache_copy_block(c, 3, 1);
  assert_memory_equal(k1 + 3 * 4 * 8, k1 + 1 * 4 * 8, 4 * 8 * sizeof(float));
  assert_memory_equal(v1 + 3 * 4 * 8 + 8, v, 16 * sizeof(float));
  kv_cache_destroy(c);
  kern_backend_destroy(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(alloc_rejects_bad_sizes),
      cmocka_unit_test(alloc_order_and_running_out),
      cmocka_unit_test(refcounts),
      cmocka_unit_test(seq_reserve_slots_free),
      cmocka_unit_test(seq_release_before_window),
      cmocka_unit_test(alloc_storm),
      cmocka_unit_test(cache_sizing),
      cmocka_unit_test(cache_update_writes_and_gathers),
      cmocka_unit_test(cache_per_layer_geometry),
  };
  return cmocka_run_group_tests_name("kv cache", tests, NULL, NULL);
}
