/* tests/unit/test_kv_state.c — the recurrent-state pool (cache/kv_state.h)
 * on the CPU backend, and the planner's use of it (scheduler/sched_plan.h):
 * a running sequence holds one slot, a full pool stops admission, removal
 * and preemption give the slot back, a fork copies the parent's state;
 * snapshots at prefix-cache blocks (cache/kv_snap.c): copies in and out,
 * least-recently-used reuse, dropped with their block's eviction, and the
 * planner's use of them (a prompt chunk cut at the prompt's last full
 * block, a hit kept only to a block with a snapshot and restored there, a
 * decode keeping only its latest one); speculative verification's kept
 * states (the slot takes the last accepted row's, snapshots at blocks that
 * end among the verified rows); the split of a memory budget between the
 * pool and the KV cache (kv_state_budget_rest). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cache/kv_alloc.h"
#include "cache/kv_state.h"
#include "kernels/kern.h"
#include "model/model.h"
#include "scheduler/sched_plan.h"

static float *slot_ptr(const kv_state_t *p, int32_t slot) { return p->arena + (size_t)slot * p->slot_floats; }

static void fill(kv_state_t *p, int32_t slot, float v) {
  for (size_t i = 0; i < p->slot_floats; i++) slot_ptr(p, slot)[i] = v + (float)i;
}

static int is_zero(const kv_state_t *p, int32_t slot) {
  for (size_t i = 0; i < p->slot_floats; i++)
    if (slot_ptr(p, slot)[i] != 0.0f) return 0;
  return 1;
}

static void pool_alloc_reset_copy(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 1);
  const kv_state_config_t cfg = {.n_layers = 3, .layer_floats = 40, .n_slots = 3};
  assert_int_equal(kv_state_slot_bytes(&cfg), 3 * 40 * sizeof(float));
  kv_state_t *p = kv_state_create(be, &cfg);
  assert_non_null(p);
  assert_ptr_equal(kv_state_layer(p, 2), p->arena + 80);
  int32_t s[3];
  for (int i = 0; i < 3; i++) {
    s[i] = kv_state_alloc(p);
    assert_true(s[i] >= 0 && s[i] < 3);
    assert_true(is_zero(p, s[i]));
  }
  assert_int_equal(kv_state_alloc(p), -ENOSPC);
  assert_int_equal(kv_state_used(p), 3);
  fill(p, s[1], 5.0f);
  kv_state_set_tokens(p, s[1], 17);
  kv_state_copy(p, s[2], s[1]);
  assert_memory_equal(slot_ptr(p, s[2]), slot_ptr(p, s[1]), p->slot_floats * sizeof(float));
  assert_int_equal(p->n_tokens[s[2]], 17);
  kv_state_reset(p, s[1]);
  assert_true(is_zero(p, s[1]));
  assert_int_equal(p->n_tokens[s[1]], 0);
  fill(p, s[0], 1.0f);
  kv_state_free(p, s[0]);
  assert_false(kv_state_in_use(p, s[0]));
  assert_false(kv_state_in_use(p, -1));
  const int32_t again = kv_state_alloc(p); /* a reused slot starts from zeros */
  assert_int_equal(again, s[0]);
  assert_true(is_zero(p, again));
  kv_state_destroy(p);
  kv_state_destroy(NULL);
  const kv_state_config_t bad = {.n_layers = 0, .layer_floats = 4, .n_slots = 1};
  assert_null(kv_state_create(be, &bad));
  kern_backend_destroy(be);
}

static void planner_holds_slots(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 1);
  const kv_state_config_t cfg = {.n_layers = 1, .layer_floats = 8, .n_slots = 2};
  kv_state_t *p = kv_state_create(be, &cfg);
  kv_alloc_t *a = kv_alloc_create(64, 4);
  sched_plan_t c;
  assert_int_equal(sched_plan_init(&c, a, 64, 4, 0), 0); /* room for 4 places: the 2 slots bind */
  c.state = p;
  const int32_t prompt[6] = {1, 2, 3, 4, 5, 6};
  sched_seq_t s[3];
  for (int i = 0; i < 3; i++) {
    sched_seq_init(&s[i], prompt, 6, 1);
    assert_int_equal(s[i].state_slot, -1);
    sched_plan_add(&c, &s[i]);
  }
  assert_int_equal(sched_plan_step(&c), 2); /* the third waits for a slot */
  assert_true(s[0].state_slot >= 0 && s[1].state_slot >= 0 && s[0].state_slot != s[1].state_slot);
  assert_int_equal(s[2].where, SCHED_SEQ_WAITING);
  assert_int_equal(s[2].state_slot, -1);
  sched_plan_commit(&c);
  sched_plan_remove(&c, &s[0]); /* the end of s[0]: its slot goes back */
  assert_int_equal(s[0].state_slot, -1);
  assert_int_equal(kv_state_used(p), 1);
  sched_seq_push(&s[1], 7);
  assert_true(sched_plan_step(&c) >= 1);
  assert_int_equal(s[2].where, SCHED_SEQ_RUNNING);
  assert_true(s[2].state_slot >= 0);
  sched_plan_commit(&c);
  /* a fork takes a slot and the parent's state */
  sched_plan_remove(&c, &s[2]);
  fill(p, s[1].state_slot, 3.0f);
  kv_state_set_tokens(p, s[1].state_slot, 7);
  sched_seq_t child;
  sched_seq_init(&child, s[1].tokens, (int32_t)s[1].len, 1);
  int32_t src = -1, dst = -1;
  assert_true(sched_plan_fork(&c, &s[1], &child, &src, &dst) >= 0);
  assert_true(child.state_slot >= 0 && child.state_slot != s[1].state_slot);
  assert_memory_equal(slot_ptr(p, child.state_slot), slot_ptr(p, s[1].state_slot), p->slot_floats * sizeof(float));
  assert_int_equal(p->n_tokens[child.state_slot], 7);
  sched_plan_remove(&c, &child);
  sched_plan_remove(&c, &s[1]);
  assert_int_equal(kv_state_used(p), 0);
  for (int i = 0; i < 3; i++) sched_seq_free(&s[i]);
  sched_seq_free(&child);
  sched_plan_free(&c);
  kv_alloc_destroy(a);
  kv_state_destroy(p);
  kern_backend_destroy(be);
}

/* Snapshot i's floats (the arena after the running slots). */
static float *snap_ptr(const kv_state_t *p, int32_t block) {
  return p->arena + ((size_t)p->n_slots + (size_t)p->block_snap[block]) * p->slot_floats;
}

static void snapshots_lru_and_eviction(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 1);
  const kv_state_config_t cfg = {.n_layers = 2, .layer_floats = 10, .n_slots = 2, .n_snaps = 2, .n_blocks = 8};
  kv_state_t *p = kv_state_create(be, &cfg);
  assert_non_null(p);
  kv_alloc_t *a = kv_alloc_create(8, 4);
  kv_alloc_set_evict_hook(a, kv_snap_evicted, p);
  const int32_t s0 = kv_state_alloc(p), s1 = kv_state_alloc(p);
  int32_t b[3];
  for (int i = 0; i < 3; i++) {
    b[i] = kv_block_alloc(a);
    const int32_t toks[4] = {i, i, i, i};
    assert_int_equal(kv_prefix_insert(a, b[i], KV_HASH_ROOT, toks), 1);
  }
  fill(p, s0, 10.0f);
  assert_int_equal(kv_snap_save(p, b[0], s0), 0);
  fill(p, s0, 20.0f); /* the snapshot is a copy: later changes to the slot do not reach it */
  assert_int_equal(kv_snap_save(p, b[1], s0), 0);
  assert_true(kv_snap_has(p, b[0]) && kv_snap_has(p, b[1]) && !kv_snap_has(p, b[2]));
  assert_int_equal(snap_ptr(p, b[0])[3], 13.0f);
  kv_snap_load(p, s1, b[0], 4); /* b[0] becomes the most recently used */
  assert_int_equal(p->n_tokens[s1], 4);
  for (size_t i = 0; i < p->slot_floats; i++) assert_true(slot_ptr(p, s1)[i] == 10.0f + (float)i);
  assert_int_equal(p->snaps_restored, 1);
  fill(p, s0, 30.0f);
  assert_int_equal(kv_snap_save(p, b[2], s0), 0); /* the pool is full: b[1], the least recently used, goes */
  assert_true(kv_snap_has(p, b[0]) && !kv_snap_has(p, b[1]) && kv_snap_has(p, b[2]));
  assert_int_equal(p->snaps_dropped, 1);
  assert_int_equal(p->n_snaps_used, 2);
  /* a block's eviction from the prefix cache takes its snapshot along */
  kv_block_unref(a, b[0]);
  kv_block_unref(a, b[2]);
  kv_block_unref(a, b[1]);
  int n = 0;
  while (kv_block_alloc(a) >= 0) n++;
  assert_int_equal(n, 8);
  assert_int_equal(p->n_snaps_used, 0);
  assert_false(kv_snap_has(p, b[0]) || kv_snap_has(p, b[2]));
  assert_int_equal(p->snaps_dropped, 1); /* evictions with blocks are not counted as dropped for room */
  kv_snap_drop(p, b[0]);                 /* none: a no-op */
  kv_alloc_destroy(a);
  kv_state_destroy(p);
  const kv_state_config_t none = {.n_layers = 1, .layer_floats = 4, .n_slots = 1};
  p = kv_state_create(be, &none);
  assert_int_equal(kv_snap_save(p, 0, kv_state_alloc(p)), -ENOSPC);
  assert_false(kv_snap_has(p, 0));
  kv_state_destroy(p);
  kern_backend_destroy(be);
}

/* Runs one planned step as the forward would leave the states: each
 * item's slot holds a pattern naming its sequence's tokens so far
 * (value = tokens consumed), then commits. */
static int step(sched_plan_t *c, kv_state_t *p) {
  const int n = sched_plan_step(c);
  for (int i = 0; i < c->n_items; i++) {
    const sched_item_t *it = &c->items[i];
    const int64_t consumed = it->seq->kv.n_tokens + it->q_len;
    fill(p, it->seq->state_slot, (float)consumed * 1000.0f);
    kv_state_set_tokens(p, it->seq->state_slot, consumed);
  }
  sched_plan_commit(c);
  return n;
}

/* A planner with prefix caching over cfg.n_blocks blocks of 4 tokens and a
 * pool of cfg's states whose snapshots go with their blocks. */
static void plan_with_state(kern_backend_t *be, const kv_state_config_t *cfg, kv_state_t **p, kv_alloc_t **a,
                            sched_plan_t *c) {
  *p = kv_state_create(be, cfg);
  *a = kv_alloc_create(cfg->n_blocks, 4);
  kv_alloc_set_evict_hook(*a, kv_snap_evicted, *p);
  assert_int_equal(sched_plan_init(c, *a, 64, cfg->n_slots, 1), 0);
  c->state = *p;
}

static void planner_snapshots_and_restores(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 1);
  const kv_state_config_t cfg = {.n_layers = 1, .layer_floats = 6, .n_slots = 4, .n_snaps = 8, .n_blocks = 32};
  kv_state_t *p;
  kv_alloc_t *a;
  sched_plan_t c;
  plan_with_state(be, &cfg, &p, &a, &c);
  /* a 10-token prompt: its chunk is cut at 8, the end of the last full block before its last token */
  const int32_t pa[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  sched_seq_t sa;
  sched_seq_init(&sa, pa, 10, 1);
  sched_plan_add(&c, &sa);
  assert_int_equal(step(&c, p), 1);
  assert_int_equal(c.items[0].q_len, 8);
  assert_int_equal(c.items[0].logits, 0);
  assert_true(kv_snap_has(p, sa.kv.blocks[1]) && !kv_snap_has(p, sa.kv.blocks[0]));
  assert_int_equal(step(&c, p), 1); /* the prompt's last 2 tokens */
  assert_int_equal(c.items[0].q_len, 2);
  /* decodes: a snapshot at 12 (past the prompt), then at 16, which replaces it */
  for (int32_t t = 11; t <= 17; t++) {
    sched_seq_push(&sa, t);
    assert_int_equal(step(&c, p), 1);
    if (sa.kv.n_tokens == 12) assert_true(kv_snap_has(p, sa.kv.blocks[2]));
  }
  assert_int_equal(sa.kv.n_tokens, 17);
  assert_false(kv_snap_has(p, sa.kv.blocks[2]));
  assert_true(kv_snap_has(p, sa.kv.blocks[3]) && kv_snap_has(p, sa.kv.blocks[1]));
  assert_int_equal(p->n_snaps_used, 2);
  /* a second prompt sharing the first 9 tokens and then the conversation's 10..12: its match of 3 blocks is kept
   * to the 2 up to the last snapshot (block 1; block 2's was replaced), restored there */
  const int32_t pb[14] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 50, 51};
  sched_seq_t sb;
  sched_seq_init(&sb, pb, 14, 1);
  sched_plan_add(&c, &sb);
  sched_seq_push(&sa, 18);
  assert_int_equal(sched_plan_step(&c), 2);
  assert_int_equal(sb.cached_tokens, 8);
  assert_int_equal(sb.kv.n_hashed, 2);
  assert_int_equal(p->n_tokens[sb.state_slot], 8);
  for (size_t i = 0; i < p->slot_floats; i++) assert_true(slot_ptr(p, sb.state_slot)[i] == 8000.0f + (float)i);
  assert_int_equal(c.items[1].seq, &sb);
  assert_int_equal(c.items[1].q_len, 4); /* cut at its own prompt point, 12 */
  sched_plan_commit(&c);
  /* a third sharing only its first block (no snapshot there): no hit at all, the matched block given back */
  const int32_t pc[7] = {1, 2, 3, 4, 60, 61, 62};
  sched_seq_t sc;
  sched_seq_init(&sc, pc, 7, 1);
  sched_plan_add(&c, &sc);
  const int32_t b0 = sa.kv.blocks[0], refs = kv_block_refs(a, b0);
  assert_true(sched_plan_step(&c) >= 1);
  assert_int_equal(sc.cached_tokens, 0);
  assert_int_equal(kv_block_refs(a, b0), refs);
  sched_plan_commit(&c);
  sched_plan_remove(&c, &sa);
  sched_plan_remove(&c, &sb);
  sched_plan_remove(&c, &sc);
  assert_int_equal(kv_state_used(p), 0);
  assert_true(p->n_snaps_used > 0);
  /* every block reused: every snapshot goes with its block */
  while (kv_block_alloc(a) >= 0) {
  }
  assert_int_equal(p->n_snaps_used, 0);
  sched_seq_free(&sa);
  sched_seq_free(&sb);
  sched_seq_free(&sc);
  sched_plan_free(&c);
  kv_alloc_destroy(a);
  kv_state_destroy(p);
  kern_backend_destroy(be);
}

/* One verification step of s's decoded token and `spec` drafts as the
 * engine runs it: the forward leaves kept state i holding the state of
 * start + 1 + i tokens and the slot that of all the rows (patterns naming
 * the tokens consumed), then `accepted` drafts join, the K/V is rolled
 * back past the rest and sched_plan_verified sets the state. */
static void verify(sched_plan_t *c, kv_state_t *p, sched_seq_t *s, int32_t spec, int32_t accepted) {
  const int64_t start = s->kv.n_tokens;
  for (int32_t j = 0; j < spec; j++) sched_seq_push(s, 100 + j);
  s->spec = spec;
  assert_int_equal(sched_plan_step(c), 1);
  assert_int_equal(c->items[0].q_len, 1 + spec);
  s->state_kept = 0; /* build_batch's */
  for (int32_t i = 0; i < spec; i++) fill(p, kv_state_kept(p, i), (float)(start + 1 + i) * 1000.0f);
  fill(p, s->state_slot, (float)(start + 1 + spec) * 1000.0f);
  kv_state_set_tokens(p, s->state_slot, start + 1 + spec);
  sched_plan_commit(c);
  sched_seq_drop_drafts(s);
  for (int32_t j = 0; j < accepted; j++) sched_seq_push(s, 100 + j);
  if (accepted < spec) sched_plan_rollback(c, s, start + 1 + accepted);
  sched_plan_verified(c, s, start, spec, accepted);
  sched_seq_push(s, 7); /* the token sampled after the last accepted one */
}

static void expect_pattern(const kv_state_t *p, int32_t i, float v) {
  for (size_t k = 0; k < p->slot_floats; k++) assert_true(slot_ptr(p, i)[k] == v + (float)k);
}

/* Speculative verification (sched_plan_verified): the slot takes the kept
 * state after the last accepted row (the state of exactly the tokens kept),
 * all accepted it keeps its own; a block that ends among the verified
 * tokens keeps the state at exactly its end as its snapshot (from the slot
 * or from the kept state of the row that ends it), one per sequence. */
static void planner_verification_takes_kept_states(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 1);
  const kv_state_config_t cfg = {.n_layers = 2, .layer_floats = 5, .n_slots = 2, .n_snaps = 4, .n_blocks = 16,
                                 .n_keep = 3};
  kv_state_t *p;
  kv_alloc_t *a;
  sched_plan_t c;
  plan_with_state(be, &cfg, &p, &a, &c);
  const int32_t pr[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  sched_seq_t s;
  sched_seq_init(&s, pr, 10, 1);
  sched_plan_add(&c, &s);
  assert_int_equal(step(&c, p), 1); /* 8 prompt tokens */
  assert_int_equal(step(&c, p), 1); /* 2 */
  for (int32_t t = 11; t <= 15; t++) { /* 4 decodes: 14 tokens computed, the 15th pending */
    sched_seq_push(&s, t);
    if (t < 15) assert_int_equal(step(&c, p), 1);
  }
  assert_int_equal(s.kv.n_tokens, 14);
  /* 1 of 3 accepted: 16 tokens, the slot takes kept state 1; block 3 ends at 16: its snapshot is that state */
  verify(&c, p, &s, 3, 1);
  assert_int_equal(s.kv.n_tokens, 16);
  assert_int_equal(p->n_tokens[s.state_slot], 16);
  expect_pattern(p, s.state_slot, 16000.0f);
  const int32_t b3 = s.kv.blocks[3];
  assert_true(kv_snap_has(p, b3));
  expect_pattern(p, p->n_slots + p->block_snap[b3], 16000.0f);
  /* 2 of 3: 19 tokens, no block ends among them */
  verify(&c, p, &s, 3, 2);
  assert_int_equal(p->n_tokens[s.state_slot], 19);
  expect_pattern(p, s.state_slot, 19000.0f);
  assert_int_equal(p->n_snaps_used, 2); /* the prompt's (block 1) and block 3's */
  /* all 3: the slot keeps its own state (23 tokens); block 4 ends at 20, after the verified row 0: its snapshot
   * is kept state 0, and it replaces block 3's */
  verify(&c, p, &s, 3, 3);
  assert_int_equal(p->n_tokens[s.state_slot], 23);
  expect_pattern(p, s.state_slot, 23000.0f);
  const int32_t b4 = s.kv.blocks[4];
  assert_true(kv_snap_has(p, b4) && !kv_snap_has(p, b3) && kv_snap_has(p, s.kv.blocks[1]));
  expect_pattern(p, p->n_slots + p->block_snap[b4], 20000.0f);
  sched_plan_remove(&c, &s);
  sched_seq_free(&s);
  sched_plan_free(&c);
  kv_alloc_destroy(a);
  kv_state_destroy(p);
  kern_backend_destroy(be);
}

/* A backend without the Gated DeltaNet operations (the CUDA backend's
 * table, today) refuses a hybrid model at load, naming why, and still
 * loads the same model where they exist. */
static void backend_without_gdn_refuses_hybrid(void **state) {
  (void)state;
  char path[4096];
  const char *self = __FILE__; /* .../tests/unit/test_kv_state.c: the fixture is beside tests/reference */
  const size_t root = strlen(self) - strlen("tests/unit/test_kv_state.c");
  snprintf(path, sizeof path, "%.*stests/reference/data/qwen35-tiny", (int)root, self);
  kern_backend_t *be = kern_backend_create("cpu", 1);
  char err[512] = "";
  model_t *m = model_load(path, be, err, sizeof err);
  if (!m) fail_msg("%s", err);
  kv_state_config_t sc = {.n_slots = 1};
  assert_int_equal(model_state_config(m, &sc), 0);
  assert_int_equal(sc.n_layers, 3);                 /* three Gated DeltaNet layers of four */
  assert_int_equal(sc.layer_floats, 3 * 128 + 4 * 16 * 16); /* conv window + 4 heads of 16 x 16 */
  kv_cache_config_t kc = {0};
  model_kv_config(m, &kc);
  assert_int_equal(kc.n_layers, 1); /* the paged cache holds the attention layer only */
  model_destroy(m);
  be->gdn_rule = NULL;
  assert_null(model_load(path, be, err, sizeof err));
  assert_non_null(strstr(err, "the cpu backend has no Gated DeltaNet kernels: hybrid qwen35 models run on"));
  kern_backend_destroy(be);
}

static void budget_split(void **state) {
  (void)state;
  /* 3 layers of 100 floats: 1,200 bytes a state; 4 slots, 8 kept, 1 scratch */
  kv_state_config_t sc = {.n_layers = 3, .layer_floats = 100, .n_slots = 4, .n_keep = 8};
  assert_int_equal(kv_state_slot_bytes(&sc), 1200);
  assert_int_equal(kv_state_pool_bytes(&sc), 1200 * 13);
  assert_int_equal(kv_state_budget_rest(&sc, 100000, 1000), 100000 - 15600);
  assert_int_equal(kv_state_budget_rest(&sc, 15600 + 1000, 1000), 1000); /* exactly one block left */
  assert_int_equal(kv_state_budget_rest(&sc, 15600 + 999, 1000), 0);    /* not one block */
  assert_int_equal(kv_state_budget_rest(&sc, 15600, 1), 0);
  assert_int_equal(kv_state_budget_rest(&sc, 1000, 1), 0); /* the states alone do not fit */
  /* snapshots have their own budget: they do not count here */
  sc.n_snaps = 50;
  sc.n_blocks = 64;
  assert_int_equal(kv_state_budget_rest(&sc, 100000, 1000), 100000 - 15600);
  /* no speculation: 5 states */
  sc.n_keep = 0;
  assert_int_equal(kv_state_budget_rest(&sc, 100000, 1000), 100000 - 6000);
  /* the pool kv_state_create makes is as large as counted */
  kern_backend_t *be = kern_backend_create("cpu", 1);
  sc.n_keep = 8;
  kv_state_t *p = kv_state_create(be, &sc);
  assert_non_null(p);
  assert_int_equal(p->slot_floats * sizeof(float) * (size_t)(p->n_slots + p->n_keep + 1), kv_state_pool_bytes(&sc));
  kv_state_destroy(p);
  kern_backend_destroy(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pool_alloc_reset_copy),
      cmocka_unit_test(planner_holds_slots),
      cmocka_unit_test(snapshots_lru_and_eviction),
      cmocka_unit_test(planner_snapshots_and_restores),
      cmocka_unit_test(planner_verification_takes_kept_states),
      cmocka_unit_test(backend_without_gdn_refuses_hybrid),
      cmocka_unit_test(budget_split),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
