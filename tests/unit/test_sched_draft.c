/* tests/unit/test_sched_draft.c — the draft-model proposer
 * (scheduler/sched_draft.c) with a hybrid draft: the Qwen3.5 fixture
 * (tests/reference/data/qwen35-tiny, three Gated DeltaNet layers of four)
 * proposing for a sequence, driven through the engine-internal calls with
 * a hand-made engine that holds only what the proposer reads.
 *
 * The reference is a runner of its own (its own paged cache and a
 * one-slot state pool) running the same tokens plainly: for each count j
 * of accepted drafts (0..k), the draft's recurrent state after a proposal
 * and after the rollback that follows verification is, bit for bit, the
 * state after the verified tokens alone (the drafts decoded in a copy); the
 * drafts are the reference's greedy continuation; and the next proposal's
 * catch-up over the accepted drafts and the bonus token leaves exactly the
 * state of running those tokens plainly, its first draft the reference's
 * argmax. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "scheduler/sched_internal.h"

#define K 4
#define N_PROMPT 21

static model_t *load_fixture(kern_backend_t *be) {
  char path[4096];
  const char *self = __FILE__; /* .../tests/unit/test_sched_draft.c: the fixture is beside tests/reference */
  const size_t root = strlen(self) - strlen("tests/unit/test_sched_draft.c");
  snprintf(path, sizeof path, "%.*stests/reference/data/qwen35-tiny", (int)root, self);
  char err[512] = "";
  model_t *m = model_load(path, be, err, sizeof err);
  if (!m) fail_msg("%s", err);
  return m;
}

static int32_t argmax(const float *row, int32_t n) {
  int32_t best = 0;
  for (int32_t v = 1; v < n; v++)
    if (row[v] > row[best]) best = v;
  return best;
}

/* The plain reference: one sequence, its own cache and state slot. */
typedef struct ref {
  kv_cache_t *cache;
  kv_state_t *pool;
  model_runner_t *runner;
  attn_meta_t meta;
  kv_seq_t seq;
  int32_t slot;
  int32_t n_vocab;
  float *logits;
} ref_t;

static void ref_create(ref_t *f, const model_t *m, kern_backend_t *be) {
  memset(f, 0, sizeof *f);
  kv_cache_config_t kc = {0};
  model_kv_config(m, &kc);
  kc.block_size = 16;
  kc.num_blocks = 8;
  assert_non_null(f->cache = kv_cache_create(be, &kc));
  kv_state_config_t sc = {.n_slots = 1};
  assert_int_equal(model_state_config(m, &sc), 0);
  assert_non_null(f->pool = kv_state_create(be, &sc));
  const model_runner_config_t rc = {.max_tokens = 64, .max_seqs = 1, .max_logits = 1, .max_seq_len = 128,
                                    .state = f->pool};
  assert_non_null(f->runner = model_runner_create(m, f->cache, &rc));
  assert_int_equal(attn_meta_init(&f->meta, 1, 64, model_runner_max_blocks_per_seq(f->runner)), 0);
  kv_seq_init(&f->seq);
  f->slot = kv_state_alloc(f->pool);
  f->n_vocab = model_hparams(m)->n_vocab;
  f->logits = calloc((size_t)f->n_vocab, sizeof *f->logits);
}

static void ref_destroy(ref_t *f) {
  kv_seq_free(f->cache->alloc, &f->seq);
  attn_meta_free(&f->meta);
  model_runner_destroy(f->runner);
  kv_state_destroy(f->pool);
  kv_cache_destroy(f->cache);
  free(f->logits);
}

/* Runs tokens[from, to) as one chunk (from 0: a fresh sequence); returns
 * the argmax of the last row's logits. */
static int32_t ref_chunk(ref_t *f, const int32_t *tokens, int32_t from, int32_t to) {
  if (from == 0) kv_seq_free(f->cache->alloc, &f->seq);
  assert_int_equal(kv_seq_reserve(f->cache->alloc, &f->seq, to - from), 0);
  int32_t positions[64], q_len = to - from, last = q_len - 1;
  for (int32_t i = 0; i < q_len; i++) positions[i] = from + i;
  const kv_seq_t *seqs[1] = {&f->seq};
  assert_int_equal(attn_meta_build(&f->meta, f->cache->alloc, seqs, &q_len, 1), 0);
  const model_batch_t b = {.n_tokens = q_len, .tokens = tokens + from, .positions = positions,
                           .attn = &f->meta.batch, .n_logits = 1, .logit_rows = &last, .state_slots = &f->slot};
  assert_int_equal(model_forward(f->runner, &b, f->logits), 0);
  kv_seq_commit(f->cache->alloc, &f->seq, q_len);
  return argmax(f->logits, f->n_vocab);
}

static const float *ref_state(const ref_t *f) { return kv_state_layer(f->pool, 0) + (size_t)f->slot * f->pool->slot_floats; }

/* The draft's state of q equals the reference's (n tokens), bit for bit. */
static void expect_state(const sched_engine_t *e, const sched_eseq_t *q, const ref_t *f, int64_t n) {
  int64_t got_n = -1;
  const float *got = sched__draft_state(e, q, &got_n);
  assert_non_null(got);
  assert_int_equal(got_n, n);
  assert_int_equal(f->pool->n_tokens[f->slot], n);
  assert_memory_equal(got, ref_state(f), f->pool->slot_floats * sizeof(float));
}

static void hybrid_draft_rolls_back_to_the_verified_tokens(void **state) {
  (void)state;
  log_set_level(LOG_LEVEL_WARN);
  kern_backend_t *be = kern_backend_create("cpu", 1);
  model_t *m = load_fixture(be);
  /* an engine holding what the proposer reads: its config, backend, cache geometry and an empty plan */
  sched_engine_t *e = calloc(1, sizeof *e);
  e->cfg = sched_config_default();
  e->cfg.max_seqs = 2;
  e->cfg.max_batch_tokens = 64;
  e->cfg.spec.method = SCHED_SPEC_DRAFT;
  e->cfg.spec.k = K;
  e->cfg.spec.max_batch = 2;
  e->cfg.spec.draft_model = m;
  e->be = be;
  e->n_vocab = model_hparams(m)->n_vocab;
  e->max_len = 128;
  kv_cache_config_t kc = {0};
  model_kv_config(m, &kc);
  kc.block_size = 16;
  kc.num_blocks = 16;
  assert_non_null(e->cache = kv_cache_create(be, &kc));
  assert_non_null(e->draft = sched__draft_create(e));
  ref_t f;
  ref_create(&f, m, be);

  int32_t prompt[N_PROMPT];
  for (int32_t i = 0; i < N_PROMPT; i++) prompt[i] = (int32_t)((i * 37 + 11) % 96);
  for (int32_t j = 0; j <= K; j++) { /* drafts accepted */
    sched_eseq_t *q = calloc(1, sizeof *q);
    sched_seq_init(&q->s, prompt, N_PROMPT, 1);
    kv_seq_init(&q->dkv);
    sched_eseq_t *qs[1] = {q};
    int32_t ks[1] = {K}, drafts[1][SCHED_SPEC_MAX_K];
    sched__draft_propose(e, qs, ks, 1, drafts);
    assert_int_equal(ks[0], K);
    /* the reference: the prompt, then greedy decodes in the same slot */
    int32_t plain[N_PROMPT + K];
    memcpy(plain, prompt, sizeof prompt);
    plain[N_PROMPT] = ref_chunk(&f, plain, 0, N_PROMPT);
    assert_int_equal(drafts[0][0], plain[N_PROMPT]);
    /* the state after the proposal: the verified tokens only, the drafts never in it */
    expect_state(e, q, &f, N_PROMPT);
    for (int32_t i = 1; i < K; i++) {
      plain[N_PROMPT + i] = ref_chunk(&f, plain, N_PROMPT + i - 1, N_PROMPT + i);
      assert_int_equal(drafts[0][i], plain[N_PROMPT + i]);
    }
    /* verification: j drafts kept, then the target's own token in place of draft j + 1 */
    for (int32_t i = 0; i < j; i++) sched_seq_push(&q->s, drafts[0][i]);
    sched_seq_push(&q->s, (j < K ? drafts[0][j] + 1 : 7) % 96);
    sched__draft_rollback(e, q, N_PROMPT + j);
    assert_true(q->dkv.n_tokens <= N_PROMPT + j);
    ref_chunk(&f, prompt, 0, N_PROMPT);
    expect_state(e, q, &f, N_PROMPT); /* the rollback left the state at the verified tokens */
    /* the next proposal catches up on the accepted drafts and the new token */
    ks[0] = 2;
    sched__draft_propose(e, qs, ks, 1, drafts);
    assert_int_equal(ks[0], 2);
    const int32_t next = ref_chunk(&f, q->s.tokens, N_PROMPT, (int32_t)q->s.len);
    assert_int_equal(drafts[0][0], next);
    expect_state(e, q, &f, q->s.len);
    sched__draft_forget(e, q);
    int64_t n;
    assert_null(sched__draft_state(e, q, &n)); /* its slot went with its blocks */
    sched_seq_free(&q->s);
    free(q);
  }
  ref_destroy(&f);
  sched__draft_destroy(e->draft);
  kv_cache_destroy(e->cache);
  free(e);
  model_destroy(m);
  kern_backend_destroy(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hybrid_draft_rolls_back_to_the_verified_tokens),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
