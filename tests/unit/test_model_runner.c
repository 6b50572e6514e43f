/* tests/unit/test_model_runner.c — the model runner on a tiny synthetic
 * model (tests/unit/model_tiny.h): the same logits bit for bit whatever the
 * batch holds (other sequences, padding rows), and its capacity and batch
 * checks refusing bad input with an error instead of running it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "model/model_graph.h"
#include "kernels/cpu/simd.h"
#include "kernels/kern_join.h"
#include "model/model_internal.h"
#include "tests/unit/model_tiny.h"

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
  int32_t q_lens[3], ids[96], pos[96], rows[96];
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

/* The steps of the graph-mode tests: sequence s adds steps[i][s] tokens. */
static const int graph_steps[][3] = {{4, 3, 2}, {1, 1, 1}, {1, 0, 1}, {1, 1, 1}, {0, 1, 0}, {1, 1, 1}, {1, 1, 0}};
enum { GRAPH_STEPS = sizeof graph_steps / sizeof graph_steps[0] };

/* Runs graph_steps on three runners of m (graphs off, PADDED, ON) and
 * checks every real row has the same bits on all three; *padded and *on
 * are left to the caller (its accounting, then rig_free). */
static void run_graph_modes(model_t *m, rig_t *padded, rig_t *on) {
  static const int32_t a[9] = {3, 1, 4, 1, 5, 9, 2, 6, 5}, b[8] = {6, 5, 3, 5, 8, 9, 7, 9}, c[6] = {9, 7, 9, 3, 2, 3};
  const int32_t *toks[3] = {a, b, c};
  rig_t plain;
  rig_init(&plain, m, 16, 8);
  rig_init_graphs(padded, m, 16, 8, MODEL_GRAPHS_PADDED);
  rig_init_graphs(on, m, 16, 8, MODEL_GRAPHS_ON);
  float want[16 * VOCAB], got[16 * VOCAB], got_on[16 * VOCAB];
  for (int s = 0; s < GRAPH_STEPS; s++) {
    int rows = 0;
    for (int q = 0; q < 3; q++) rows += graph_steps[s][q];
    tu_poison_f32(got, 16 * VOCAB);
    tu_poison_f32(got_on, 16 * VOCAB);
    assert_int_equal(rig_step(&plain, graph_steps[s], toks, want), 0);
    assert_int_equal(rig_step(padded, graph_steps[s], toks, got), 0);
    assert_int_equal(rig_step(on, graph_steps[s], toks, got_on), 0);
    assert_memory_equal(got, want, (size_t)rows * VOCAB * sizeof(float));
    assert_memory_equal(got_on, want, (size_t)rows * VOCAB * sizeof(float));
  }
  rig_free(&plain);
}

/* Decode steps padded to their bucket (model_graph.h, mode PADDED: what a
 * captured graph runs, issued kernel by kernel) give every real row the
 * same bits as unpadded steps: 3 and 1 sequences pad to 4 rows, 2 does
 * not pad; the block table is widened to the keys bucket. The padding rows
 * write nothing into the cache (the later steps would see it). On the CPU
 * backend ON pads nothing (it has no graphs). */
static void forward_padded_same_bits(void **state) {
  (void)state;
  const tiny_t specs[2] = {{0}, {.arch = "qwen2", .qkv_bias = 1, .untied = 1}};
  for (int k = 0; k < 2; k++) {
    char err[512];
    model_t *m = load(&specs[k], err, sizeof err);
    if (!m) fail_msg("%s", err);
    rig_t padded, on;
    run_graph_modes(m, &padded, &on);
    model_graph_stats_t gs;
    model_runner_graph_stats(padded.run, &gs);
    assert_int_equal(gs.eager, GRAPH_STEPS - 1); /* every step but the prefill */
    assert_int_equal(gs.captured + gs.replayed + gs.failed, 0);
    model_runner_graph_stats(on.run, &gs);
    assert_int_equal(gs.eager + gs.captured + gs.replayed + gs.failed, 0);
    attn_stats_t as;
    attn_get_stats(model_runner_attn(padded.run), &as);
    assert_int_equal(as.decode_steps, GRAPH_STEPS - 1);
    assert_int_equal(as.decode_tokens, 3 + 2 + 3 + 1 + 3 + 2); /* real rows only */
    rig_free(&padded);
    rig_free(&on);
    model_destroy(m);
  }
}

/* A backend's graph hooks that must never run (moe_never_captured). */
static int no_graph_begin(kern_backend_t *be) {
  (void)be;
  fail_msg("graph_begin: a mixture-of-experts step was captured");
  return -1;
}
static kern_graph_t *no_graph_end(kern_backend_t *be) {
  (void)be;
  fail_msg("graph_end called");
  return NULL;
}
static void no_graph_launch(kern_backend_t *be, kern_graph_t *g) {
  (void)be, (void)g;
  fail_msg("graph_launch called");
}
static void no_graph_destroy(kern_backend_t *be, kern_graph_t *g) {
  (void)be;
  if (g) fail_msg("graph_destroy of a graph");
}

/* A mixture of experts routes its rows on the host in the middle of the
 * forward (model_moe.h: a download, which a CUDA capture may not hold), so
 * its runner neither pads nor captures a decode step, even on a backend
 * with graphs (here the CPU backend given hooks that fail the test): ON
 * and PADDED give the unpadded bits and count no graph step. */
static void moe_never_captured(void **state) {
  (void)state;
  const kern_backend_t own = *g_be;
  g_be->graph_begin = no_graph_begin, g_be->graph_end = no_graph_end;
  g_be->graph_launch = no_graph_launch, g_be->graph_destroy = no_graph_destroy;
  char err[512];
  model_t *m = load(&(tiny_t){.arch = "qwen3moe", .experts = 4}, err, sizeof err);
  if (!m) fail_msg("%s", err);
  rig_t padded, on;
  run_graph_modes(m, &padded, &on);
  model_graph_stats_t gs;
  model_runner_graph_stats(padded.run, &gs);
  assert_int_equal(gs.eager + gs.captured + gs.replayed + gs.failed, 0);
  model_runner_graph_stats(on.run, &gs);
  assert_int_equal(gs.eager + gs.captured + gs.replayed + gs.failed, 0);
  rig_free(&padded);
  rig_free(&on);
  model_destroy(m);
  g_be->graph_begin = own.graph_begin, g_be->graph_end = own.graph_end;
  g_be->graph_launch = own.graph_launch, g_be->graph_destroy = own.graph_destroy;
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

/* Experts are lazy weights (kern.h): the loader leaves every one for later,
 * and a step calls weight_use only on experts its rows chose, at most
 * n_expert_used a layer a step — a prompt of 4 tokens, which chooses more,
 * readies exactly k a layer; the next token at most k more; the others
 * stay untouched (on the fast CPU backend: never repacked, their file
 * pages never read). */
static void experts_made_ready_when_chosen(void **state) {
  (void)state;
  char err[512];
  model_t *m = load(&(tiny_t){.arch = "qwen3moe", .experts = 8}, err, sizeof err);
  if (!m) fail_msg("%s", err);
  const int E = m->hp.n_expert, k = m->hp.n_expert_used;
  assert_int_equal(E, 8);
  for (int l = 0; l < LAYERS; l++)
    for (int e = 0; e < E; e++) assert_int_equal(m->layers[l].moe->gate[e].lazy, 1);
  rig_t r;
  rig_init(&r, m, 4, 1);
  const int32_t toks[] = {3, 7, 11, 2};
  const int32_t *tp[3] = {toks, NULL, NULL};
  float logits[4 * VOCAB];
  for (int step = 1; step <= 2; step++) {
    assert_int_equal(rig_step(&r, (int[]){step == 1 ? 3 : 1, 0, 0}, tp, logits), 0);
    for (int l = 0; l < LAYERS; l++) {
      const model_moe_layer_t *M = m->layers[l].moe;
      int ready = 0;
      for (int e = 0; e < E; e++) {
        assert_int_equal(M->gate[e].lazy, M->up[e].lazy);
        assert_int_equal(M->gate[e].lazy, M->down[e].lazy);
        ready += !M->gate[e].lazy;
      }
      if (step == 1) assert_int_equal(ready, k); /* 3 tokens choose more than k (2 of 8) */
      else assert_in_range(ready, k, 2 * k);
    }
  }
  rig_free(&r);
  model_destroy(m);
}

/* ---- lookup-only weights (kern.h: lazy) ------------------------------------ */

/* Bytes of a Q8_0 matrix of rows × cols in 8-row panels (kernels/cpu/repack.h:
 * the GGUF bytes of whole panels, a ragged last one padded with zero rows):
 * 34 bytes a 32-element block. */
static inline int64_t q8_panels(int64_t rows, int64_t cols) { return (rows + 7) / 8 * 8 * (cols / 32 * 34); }

/* An untied token_embd is read by the embedding lookup alone, from the
 * file's view: the fast CPU backend makes no repacked copy of it, where a
 * tied one (the output projection too) is repacked for the matmuls. The
 * backend's packed_bytes counts exactly the other matrices' panels, drops
 * back to 0 when the model is freed, and the logits are the bits of a
 * backend that repacks nothing (keep_views). */
static void untied_embedding_not_repacked(void **state) {
  (void)state;
  kern_backend_t *saved = g_be;
  kern_backend_t *packs =
      kern_backend_create_opts("cpu", &(kern_backend_opts_t){.n_threads = 2, .precision = KERN_PRECISION_FAST});
  kern_backend_t *views = kern_backend_create_opts(
      "cpu", &(kern_backend_opts_t){.n_threads = 2, .precision = KERN_PRECISION_FAST, .keep_views = 1});
  assert_non_null(packs);
  assert_non_null(views);
  /* wq, wk, wv, wo, gate, up, down of one layer */
  const int64_t layer = q8_panels(HEADS * HEAD_DIM, DIM) + 2 * q8_panels(2 * HEAD_DIM, DIM) +
                        q8_panels(DIM, HEADS * HEAD_DIM) + 2 * q8_panels(FF, DIM) + q8_panels(DIM, FF);
  const int32_t toks[] = {3, 7, 11, 2};
  const int32_t *tp[3] = {toks, NULL, NULL};
  char err[512];
  for (int untied = 0; untied <= 1; untied++) {
    float logits[2][4 * VOCAB];
    for (int v = 0; v < 2; v++) {
      g_be = v ? views : packs;
      const char *path = write_tiny(&(tiny_t){.untied = untied});
      model_t *m = model_load_opts(path, g_be, &(model_load_opts_t){.quantize = KERN_Q8_0}, err, sizeof err);
      unlink(path);
      if (!m) fail_msg("%s", err);
      assert_int_equal(m->hp.tied_output, !untied);
      assert_int_equal(m->tok_embd.type, KERN_Q8_0);
#ifdef KERN_CPU_AVX2
      /* the output projection (output.weight, or the tied token_embd) and every layer's matrices */
      assert_int_equal(g_be->packed_bytes, v ? 0 : LAYERS * layer + q8_panels(VOCAB, DIM));
      assert_true(v || untied ? m->tok_embd.packed == NULL : m->tok_embd.packed != NULL);
      if (untied) assert_true(v ? m->output.packed == NULL : m->output.packed != NULL);
#else
      (void)layer;
      assert_int_equal(g_be->packed_bytes, 0); /* a portable build repacks nothing */
#endif
      rig_t r;
      rig_init(&r, m, 4, 1);
      assert_int_equal(rig_step(&r, (int[]){4, 0, 0}, tp, logits[v]), 0);
      rig_free(&r);
      model_destroy(m);
      assert_int_equal(g_be->packed_bytes, 0);
    }
    assert_memory_equal(logits[0], logits[1], sizeof logits[0]);
  }
  g_be = saved;
  kern_backend_destroy(packs);
  kern_backend_destroy(views);
}

/* ---- joined projections (model/model_join.c) ------------------------------ */

/* The CPU backend given kern.h's weight_join as a simulation: the joined
 * weight holds its parts, and its matmul runs each part's matmul and lays
 * the outputs side by side, as one GEMM over the stacked matrix would. The
 * CPU's matmul is batch invariant, so the runner's joined path (one matmul,
 * the split by copy_cols, glu_joined) must give the unjoined bits. */
static kern_backend_t g_own; /* the CPU backend's own table */
static int g_joins, g_joined_matmuls;
static char g_sim_tag;       /* w->packed of a simulated joined weight */

typedef struct sim_join {
  kern_join_plan_t plan;
  const kern_weight_t *parts[KERN_JOIN_MAX_PARTS];
} sim_join_t;

static int sim_weight_join(kern_backend_t *be, kern_weight_t *out, kern_weight_t *const *parts, int n) {
  (void)be;
  char why[160];
  sim_join_t *j = calloc(1, sizeof *j);
  assert_int_equal(kern_join_plan(&j->plan, (const kern_weight_t *const *)parts, n, why, sizeof why), 0);
  for (int i = 0; i < n; i++) j->parts[i] = parts[i];
  *out = (kern_weight_t){.type = j->plan.type, .rows = j->plan.rows, .cols = j->plan.cols, .impl = j,
                         .packed = &g_sim_tag};
  g_joins++;
  return 0;
}

static void sim_matmul(kern_backend_t *be, float *y, const float *x, const kern_weight_t *w, int n) {
  if (w->packed != &g_sim_tag) {
    g_own.matmul(be, y, x, w, n);
    return;
  }
  const sim_join_t *j = w->impl;
  g_joined_matmuls++;
  for (int i = 0; i < j->plan.n; i++) {
    const int64_t rows = j->parts[i]->rows;
    float *part = malloc((size_t)n * (size_t)rows * sizeof *part);
    g_own.matmul(be, part, x, j->parts[i], n);
    for (int t = 0; t < n; t++)
      memcpy(y + t * w->rows + j->plan.row0[i], part + t * rows, (size_t)rows * sizeof *part);
    free(part);
  }
}

/* kern.h rmsnorm_matmul as the two operations it fuses. */
static int g_normed_matmuls;
static void sim_rmsnorm_matmul(kern_backend_t *be, float *y, const float *x, const float *weight, float eps,
                               const kern_weight_t *w, int n) {
  float *h = malloc((size_t)n * (size_t)w->cols * sizeof *h);
  g_own.rmsnorm(be, h, x, weight, n, (int)w->cols, eps);
  sim_matmul(be, y, h, w, n);
  free(h);
  g_normed_matmuls++;
}

static void sim_weight_release(kern_backend_t *be, kern_weight_t *w) {
  if (w->packed != &g_sim_tag) {
    g_own.weight_release(be, w);
    return;
  }
  free(w->impl);
  w->impl = w->packed = NULL;
}

/* Each family's logits, joined and not, bit for bit: a prompt of 70 rows
 * (past MODEL_JOIN_MAX_ROWS: the parts), prefills of a few rows mixed with
 * decodes and pure decode steps (joined). llama, qwen2 (Q/K/V biases),
 * phi3 (a GGUF that stores the joins, split at load, joined again), gemma3
 * (GeGLU, QK norms) and qwen3moe (its QKV joined, its experts not); each
 * with the norm before a joined GEMM issued alone and fused
 * (rmsnorm_matmul, simulated as its two operations). */
static void joined_projections_same_bits(void **state) {
  (void)state;
  /* a: 73 tokens, b: 9, c: 7 over the steps */
  static const int32_t b[9] = {6, 5, 3, 5, 8, 9, 7, 9, 3}, c[7] = {9, 7, 9, 3, 2, 3, 8};
  static int32_t a[80];
  for (int i = 0; i < 80; i++) a[i] = (i * 7 + 3) % VOCAB;
  const int32_t *toks[3] = {a, b, c};
  static const int steps[][3] = {{70, 3, 0}, {1, 1, 4}, {1, 1, 1}, {0, 4, 1}, {1, 0, 1}};
  const tiny_t specs[] = {{0}, {.arch = "qwen2", .qkv_bias = 1, .untied = 1}, {.arch = "phi3"}, {.arch = "gemma3"},
                          {.arch = "qwen3moe", .experts = 4}};
  const int joins[] = {2 * LAYERS, 2 * LAYERS, 2 * LAYERS, 2 * LAYERS, LAYERS};
  for (size_t k = 0; k < 2 * sizeof specs / sizeof specs[0]; k++) {
    const int fuse_norm = (int)(k & 1);
    char err[512];
    model_t *plain = load(&specs[k / 2], err, sizeof err);
    if (!plain) fail_msg("%s", err);
    g_own = *g_be;
    g_be->weight_join = sim_weight_join, g_be->matmul = sim_matmul, g_be->weight_release = sim_weight_release;
    if (fuse_norm) g_be->rmsnorm_matmul = sim_rmsnorm_matmul;
    g_joins = g_joined_matmuls = g_normed_matmuls = 0;
    model_t *joined = load(&specs[k / 2], err, sizeof err);
    if (!joined) fail_msg("%s", err);
    assert_int_equal(g_joins, joins[k / 2]);
    rig_t rp, rj;
    rig_init(&rp, plain, 80, 3);
    rig_init(&rj, joined, 80, 3);
    static float want[80 * VOCAB], got[80 * VOCAB];
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
      const int rows = steps[s][0] + steps[s][1] + steps[s][2];
      const int before = g_joined_matmuls, normed_before = g_normed_matmuls;
      tu_poison_f32(got, 80 * VOCAB);
      assert_int_equal(rig_step(&rp, steps[s], toks, want), 0);
      assert_int_equal(rig_step(&rj, steps[s], toks, got), 0);
      assert_memory_equal(got, want, (size_t)rows * VOCAB * sizeof(float));
      /* joined GEMMs only within MODEL_JOIN_MAX_ROWS rows: QKV and (dense) gate/up per layer */
      assert_int_equal(g_joined_matmuls - before, model__join_rows(rows) ? joins[k / 2] : 0);
      assert_int_equal(g_normed_matmuls - normed_before, fuse_norm && model__join_rows(rows) ? joins[k / 2] : 0);
    }
    rig_free(&rp);
    rig_free(&rj);
    model_destroy(joined);
    *g_be = g_own;
    model_destroy(plain);
  }
  assert_int_equal(model__join_rows(MODEL_JOIN_MAX_ROWS), 1);
  assert_int_equal(model__join_rows(MODEL_JOIN_MAX_ROWS + 1), 0);
  assert_int_equal(model__join_rows(0), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(forward_batch_invariant),
      cmocka_unit_test(forward_padded_same_bits),
      cmocka_unit_test(moe_never_captured),
      cmocka_unit_test(runner_rejects_bad_input),
      cmocka_unit_test(experts_made_ready_when_chosen),
      cmocka_unit_test(untied_embedding_not_repacked),
      cmocka_unit_test(joined_projections_same_bits),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
