/* scheduler/sched_draft.c — the draft-model proposer of speculative
 * decoding (--speculative draft): a second, smaller model with the same
 * vocabulary, run by the engine thread with its own runner and its own
 * paged KV cache, proposes each speculating sequence's next tokens by
 * greedy decoding. Verification, the choice of k and the counters are
 * sched_spec.c's, shared with the n-gram proposer: a greedy draft is a
 * point mass, like a prompt lookup, so the target's outputs do not change.
 *
 * Each sequence has its own block table in the draft's cache
 * (sched_eseq_t.dkv), holding the K/V of its first dkv.n_tokens tokens.
 * Between steps dkv.n_tokens <= len - 1: the last token, like the target's,
 * is still to compute. A proposal of k tokens for a sequence of len tokens:
 *   1. reserve its blocks up to len + k - 1 tokens (when the draft cache is
 *      full, the draft blocks of running sequences that do not speculate
 *      this step are freed first; when it is still full, it proposes
 *      nothing);
 *   2. catch up: compute tokens[dkv.n_tokens, len) in chunks of at most
 *      max_batch_tokens rows over all speculating sequences; the row of
 *      token len - 1 gives draft 1 (argmax);
 *   3. k - 1 decode steps, batched over the sequences that want more:
 *      draft j at position len - 1 + j gives draft j + 1.
 * The draft cache then holds tokens[0, len) and drafts 1..k-1. After
 * verification (sched__draft_rollback) it forgets what follows the verified
 * tokens; drafts the planner drops are forgotten after the plan
 * (sched__draft_sync), and a preempted sequence's draft blocks are freed
 * there too; an ended sequence's in sched__draft_forget. */
#include <errno.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "scheduler/sched_internal.h"

struct sched_draft {
  const model_t *m;
  kv_cache_t *cache;       /* owned */
  model_runner_t *runner;  /* owned */
  attn_meta_t meta;
  int32_t max_tokens;      /* rows per forward */
  int32_t max_seqs;        /* sequences per forward: the most that speculate at once */
  int32_t max_len;         /* the longest sequence its cache holds */
  int32_t n_vocab;
  /* one forward's batch */
  const kv_seq_t **seqs;   /* [max_seqs] */
  int32_t *q_lens;         /* [max_seqs] */
  int32_t *which;          /* [max_seqs] the proposal index of each sequence */
  int32_t *tokens, *positions; /* [max_tokens] */
  int32_t *logit_rows;     /* [max_seqs] */
  int32_t *logit_of;       /* [max_seqs] the proposal index of each logits row */
  float *logits;           /* [max_seqs, n_vocab] */
  int64_t last_ns;         /* the last proposal's time */
  int last_clean;          /* it caught up on at most 2 tokens per sequence */
};

static sched_eseq_t *eseq(sched_seq_t *s) { return (sched_eseq_t *)s; }

sched_draft_t *sched__draft_create(sched_engine_t *e) {
  const sched_config_t *c = &e->cfg;
  const model_t *m = c->spec.draft_model;
  if (!m) {
    log_error("sched_engine_create: speculative decoding with a draft model needs the draft model");
    return NULL;
  }
  const model_hparams_t *hp = model_hparams(m);
  kv_state_config_t sc;
  if (model_state_config(m, &sc) == 0) {
    log_error("sched_engine_create: the draft model is a hybrid %s model: its recurrent state would need rolling "
              "back too, which the draft proposer does not do; use a transformer draft model with the same "
              "vocabulary, or --speculative ngram",
              model_arch_name(hp->arch));
    return NULL;
  }
  if (hp->n_vocab != e->n_vocab) {
    log_error("sched_engine_create: the draft model has %d tokens, the model %d", hp->n_vocab, e->n_vocab);
    return NULL;
  }
  sched_draft_t *d = xcalloc(1, sizeof *d);
  d->m = m;
  d->n_vocab = hp->n_vocab;
  d->max_seqs = c->spec.max_batch < c->max_seqs ? c->spec.max_batch : c->max_seqs;
  d->max_tokens = c->max_batch_tokens;
  kv_cache_config_t kc = {0};
  model_kv_config(m, &kc);
  kc.block_size = e->cache->block_size;
  if (c->spec.draft_kv_cache_bytes > 0) {
    kc.budget_bytes = (size_t)c->spec.draft_kv_cache_bytes;
  } else { /* max_seqs sequences of max_len tokens, at most the main cache's blocks */
    const int64_t per_seq = (e->max_len + kc.block_size - 1) / kc.block_size;
    const int64_t want = per_seq * d->max_seqs;
    kc.num_blocks = want < e->cache->num_blocks ? want : e->cache->num_blocks;
  }
  d->cache = kv_cache_create(e->be, &kc);
  if (!d->cache) goto fail;
  const model_runner_config_t rc = {
      .max_tokens = d->max_tokens,
      .max_seqs = d->max_seqs,
      .max_logits = d->max_seqs,
      .max_seq_len = e->max_len,
  };
  d->runner = model_runner_create(m, d->cache, &rc);
  if (!d->runner) goto fail;
  d->max_len = attn_max_seq_len(model_runner_attn(d->runner));
  if (attn_meta_init(&d->meta, d->max_seqs, d->max_tokens, model_runner_max_blocks_per_seq(d->runner)) != 0)
    goto fail;
  d->seqs = xcalloc((size_t)d->max_seqs, sizeof *d->seqs);
  d->q_lens = xcalloc((size_t)d->max_seqs, sizeof *d->q_lens);
  d->which = xcalloc((size_t)d->max_seqs, sizeof *d->which);
  d->tokens = xcalloc((size_t)d->max_tokens, sizeof *d->tokens);
  d->positions = xcalloc((size_t)d->max_tokens, sizeof *d->positions);
  d->logit_rows = xcalloc((size_t)d->max_seqs, sizeof *d->logit_rows);
  d->logit_of = xcalloc((size_t)d->max_seqs, sizeof *d->logit_of);
  d->logits = xcalloc((size_t)d->max_seqs * (size_t)d->n_vocab, sizeof *d->logits);
  log_info("draft model: %s, %d layers; its KV cache: %d blocks of %d tokens; sequences up to %d tokens speculate",
           model_arch_name(hp->arch), hp->n_layers, d->cache->num_blocks, d->cache->block_size, d->max_len);
  return d;
fail:
  log_error("sched_engine_create: cannot set up the draft model (see above)");
  sched__draft_destroy(d);
  return NULL;
}

void sched__draft_destroy(sched_draft_t *d) {
  if (!d) return;
  attn_meta_free(&d->meta);
  model_runner_destroy(d->runner);
  kv_cache_destroy(d->cache);
  free(d->seqs);
  free(d->q_lens);
  free(d->which);
  free(d->tokens);
  free(d->positions);
  free(d->logit_rows);
  free(d->logit_of);
  free(d->logits);
  free(d);
}

/* Frees the draft blocks of the running sequences not among qs[n]. Returns
 * how many sequences lost theirs. */
static int evict_idle(sched_engine_t *e, sched_eseq_t *const *qs, int32_t n) {
  int freed = 0;
  for (sched_seq_t *s = e->plan.running.head; s; s = s->next) {
    sched_eseq_t *q = eseq(s);
    if (q->dkv.n_blocks == 0) continue;
    int32_t i = 0;
    while (i < n && qs[i] != q) i++;
    if (i < n) continue;
    kv_seq_free(e->draft->cache->alloc, &q->dkv);
    freed++;
  }
  if (freed > 0) log_debug("engine: the draft cache is full: freed the draft blocks of %d idle sequences", freed);
  return freed;
}

static int32_t argmax(const float *row, int32_t n) {
  int32_t best = 0;
  for (int32_t v = 1; v < n; v++)
    if (row[v] > row[best]) best = v;
  return best;
}

/* Runs the batch in d's buffers (ns sequences, rows tokens, nl logits
 * rows), commits every sequence's rows and writes each logits row's argmax
 * to drafts[logit_of[l]][col]. */
static int forward(sched_engine_t *e, sched_eseq_t *const *qs, int32_t ns, int32_t rows, int32_t nl, int32_t col,
                   int32_t (*drafts)[SCHED_SPEC_MAX_K]) {
  sched_draft_t *d = e->draft;
  int rc = attn_meta_build(&d->meta, d->cache->alloc, d->seqs, d->q_lens, ns);
  if (rc != 0) return rc;
  const model_batch_t b = {
      .n_tokens = rows,
      .tokens = d->tokens,
      .positions = d->positions,
      .attn = &d->meta.batch,
      .n_logits = nl,
      .logit_rows = d->logit_rows,
  };
  rc = model_forward(d->runner, &b, d->logits);
  if (rc != 0) return rc;
  for (int32_t b2 = 0; b2 < ns; b2++) kv_seq_commit(d->cache->alloc, &qs[d->which[b2]]->dkv, d->q_lens[b2]);
  for (int32_t l = 0; l < nl; l++)
    drafts[d->logit_of[l]][col] = argmax(d->logits + (size_t)l * (size_t)d->n_vocab, d->n_vocab);
  return 0;
}

/* Reserves q's draft blocks for its len - 1 tokens and k - 1 drafts; lowers
 * k to what the draft's sequence length allows. 0, or -ENOSPC. */
static int reserve(sched_engine_t *e, sched_eseq_t *const *qs, int32_t n, sched_eseq_t *q, int32_t *k) {
  const sched_draft_t *d = e->draft;
  const int64_t len = q->s.len;
  if (len - 1 + *k > d->max_len) *k = (int32_t)(d->max_len - len + 1 > 0 ? d->max_len - len + 1 : 0);
  if (*k == 0) return -ENOSPC;
  const int64_t need = len - 1 + *k - q->dkv.n_tokens;
  if (kv_seq_reserve(d->cache->alloc, &q->dkv, need) == 0) return 0;
  if (evict_idle(e, qs, n) > 0 && kv_seq_reserve(d->cache->alloc, &q->dkv, need) == 0) return 0;
  return -ENOSPC;
}

/* Step 2: every sequence's unseen tokens through the token of its last
 * position, in chunks; the last rows give draft 1. */
static int catch_up(sched_engine_t *e, sched_eseq_t *const *qs, const int32_t *ks, int32_t n,
                    int32_t (*drafts)[SCHED_SPEC_MAX_K]) {
  sched_draft_t *d = e->draft;
  for (;;) {
    int32_t ns = 0, rows = 0, nl = 0;
    for (int32_t i = 0; i < n && ns < d->max_seqs && rows < d->max_tokens; i++) {
      const sched_seq_t *s = &qs[i]->s;
      const int64_t from = qs[i]->dkv.n_tokens, pending = s->len - from;
      if (ks[i] == 0 || pending == 0) continue;
      const int32_t c = (int32_t)(pending < d->max_tokens - rows ? pending : d->max_tokens - rows);
      for (int32_t j = 0; j < c; j++, rows++) {
        d->tokens[rows] = s->tokens[from + j];
        d->positions[rows] = (int32_t)(from + j);
      }
      if (c == pending) {
        d->logit_rows[nl] = rows - 1;
        d->logit_of[nl++] = i;
      }
      d->seqs[ns] = &qs[i]->dkv;
      d->q_lens[ns] = c;
      d->which[ns++] = i;
    }
    if (ns == 0) return 0;
    const int rc = forward(e, qs, ns, rows, nl, 0, drafts);
    if (rc != 0) return rc;
  }
}

void sched__draft_propose(sched_engine_t *e, sched_eseq_t **qs, int32_t *ks, int32_t n,
                          int32_t (*drafts)[SCHED_SPEC_MAX_K]) {
  sched_draft_t *d = e->draft;
  const int64_t t0 = clock_now_ns();
  int clean = 1;
  int32_t k_max = 0;
  for (int32_t i = 0; i < n; i++) {
    if (reserve(e, qs, n, qs[i], &ks[i]) != 0) {
      ks[i] = 0;
      continue;
    }
    if (qs[i]->s.len - qs[i]->dkv.n_tokens > 2) clean = 0;
    if (ks[i] > k_max) k_max = ks[i];
  }
  int rc = catch_up(e, qs, ks, n, drafts);
  for (int32_t j = 1; rc == 0 && j < k_max; j++) { /* step 3: draft j in, draft j + 1 out */
    int32_t ns = 0;
    for (int32_t i = 0; i < n; i++) {
      if (ks[i] <= j) continue;
      d->tokens[ns] = drafts[i][j - 1];
      d->positions[ns] = (int32_t)(qs[i]->s.len - 1 + j);
      d->seqs[ns] = &qs[i]->dkv;
      d->q_lens[ns] = 1;
      d->which[ns] = i;
      d->logit_rows[ns] = ns;
      d->logit_of[ns] = i;
      ns++;
    }
    rc = forward(e, qs, ns, ns, ns, j, drafts);
  }
  if (rc != 0) { /* a bug, never the request's: no drafts, and the draft cache starts over */
    log_error("engine: the draft model's forward failed (%d): no drafts this step", rc);
    for (int32_t i = 0; i < n; i++) {
      ks[i] = 0;
      kv_seq_free(d->cache->alloc, &qs[i]->dkv);
    }
  }
  d->last_ns = clock_now_ns() - t0;
  d->last_clean = clean;
}

void sched__draft_sync(sched_engine_t *e) {
  if (!e->draft) return;
  kv_alloc_t *a = e->draft->cache->alloc;
  for (sched_seq_t *s = e->plan.running.head; s; s = s->next)
    if (eseq(s)->dkv.n_tokens > s->len - 1) kv_seq_truncate(a, &eseq(s)->dkv, s->len - 1);
  for (sched_seq_t *s = e->plan.waiting.head; s; s = s->next)
    if (eseq(s)->dkv.blocks) kv_seq_free(a, &eseq(s)->dkv);
}

void sched__draft_rollback(sched_engine_t *e, sched_eseq_t *q, int64_t keep) {
  if (e->draft && q->dkv.n_tokens > keep) kv_seq_truncate(e->draft->cache->alloc, &q->dkv, keep);
}

void sched__draft_forget(sched_engine_t *e, sched_eseq_t *q) {
  if (e->draft) kv_seq_free(e->draft->cache->alloc, &q->dkv);
}

void sched__draft_blocks(const sched_engine_t *e, int32_t *total, int32_t *used) {
  *total = e->draft ? e->draft->cache->num_blocks : 0;
  *used = e->draft ? kv_alloc_used_blocks(e->draft->cache->alloc) : 0;
}

int64_t sched__draft_last_ns(const sched_engine_t *e, int *clean) {
  *clean = e->draft ? e->draft->last_clean : 1;
  return e->draft ? e->draft->last_ns : 0;
}
