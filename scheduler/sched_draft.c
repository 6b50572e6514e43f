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
 * there too; an ended sequence's in sched__draft_forget.
 *
 * A hybrid draft (Qwen3.5's Gated DeltaNet layers) also has a recurrent
 * state per sequence, which cannot be truncated like the paged cache: it
 * gets a pool of its own (cache/kv_state.h, no snapshots, no kept states)
 * with a slot per sequence that holds draft blocks (held[] says whose) and
 * a scratch slot per sequence of one proposal. The design: the slot never
 * consumes a draft. Step 2 advances it to exactly len tokens (the verified
 * ones); step 3 copies it into the sequence's scratch slot and decodes the
 * drafts there; then the draft cache is cut back to len tokens, so between
 * steps a sequence's slot holds the state of exactly its dkv.n_tokens
 * tokens (dkv.n_tokens <= len: one more than a transformer draft keeps,
 * the state cannot go back). Rollback after verification has nothing to
 * undo: the next catch-up computes the accepted drafts again (at most k + 1
 * rows, in the one forward a catch-up takes anyway) — one copy of a state
 * per proposal instead of a kept state per draft. A sequence whose tokens
 * did not grow since (its drafts dropped, it was not planned) has no row
 * for draft 1 and proposes nothing that step. Whenever a sequence's draft
 * blocks are freed (an idle one when the draft cache or pool is full, a
 * preempted or ended one, a failed forward) its slot goes too: the next
 * catch-up starts from position 0, which resets a fresh slot (the draft has
 * no prefix cache: its blocks are never published). */
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
  int last_clean;          /* it caught up on no more than a steady step does */
  /* a hybrid draft (NULL / unused otherwise) */
  kv_state_t *state;       /* owned: 2 * max_seqs slots */
  sched_eseq_t **held;     /* [state->n_slots] the sequence holding each slot (NULL: free or scratch) */
  int32_t *scratch;        /* [max_seqs] the scratch slot of each proposal index (held for good) */
  int32_t *slots;          /* [max_seqs] one forward's state slot per sequence */
};

static sched_eseq_t *eseq(sched_seq_t *s) { return (sched_eseq_t *)s; }

/* A hybrid draft's recurrent-state pool: a slot for each sequence of a
 * proposal and a scratch slot for each, taken now for good. 0; -EINVAL
 * when the pool cannot be made. */
static int state_setup(const sched_engine_t *e, sched_draft_t *d) {
  kv_state_config_t sc = {.n_slots = 2 * d->max_seqs};
  if (model_state_config(d->m, &sc) != 0) return 0; /* a transformer */
  d->state = kv_state_create(e->be, &sc);
  if (!d->state) return -EINVAL;
  d->held = xcalloc((size_t)sc.n_slots, sizeof *d->held);
  d->scratch = xcalloc((size_t)d->max_seqs, sizeof *d->scratch);
  d->slots = xcalloc((size_t)d->max_seqs, sizeof *d->slots);
  for (int32_t i = 0; i < d->max_seqs; i++) d->scratch[i] = kv_state_alloc(d->state); /* the pool has 2x */
  const double slot_mb = (double)kv_state_slot_bytes(&sc) / 1e6;
  log_info("draft model: recurrent-state pool of %d slots (a state and a scratch copy per speculating sequence) "
           "for %d Gated DeltaNet layers, %.1f MB each, %.1f MB in all",
           sc.n_slots, sc.n_layers, slot_mb, slot_mb * sc.n_slots);
  return 0;
}

sched_draft_t *sched__draft_create(sched_engine_t *e) {
  const sched_config_t *c = &e->cfg;
  const model_t *m = c->spec.draft_model;
  if (!m) {
    log_error("sched_engine_create: speculative decoding with a draft model needs the draft model");
    return NULL;
  }
  const model_hparams_t *hp = model_hparams(m);
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
  if (state_setup(e, d) != 0) goto fail;
  const model_runner_config_t rc = {
      .max_tokens = d->max_tokens,
      .max_seqs = d->max_seqs,
      .max_logits = d->max_seqs,
      .max_seq_len = e->max_len,
      .state = d->state,
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
  kv_state_destroy(d->state);
  free(d->held);
  free(d->scratch);
  free(d->slots);
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

/* q's slot in a hybrid draft's pool; -1: none (or a transformer draft). */
static int32_t slot_of(const sched_draft_t *d, const sched_eseq_t *q) {
  for (int32_t i = 0; d->state && i < d->state->n_slots; i++)
    if (d->held[i] == q) return i;
  return -1;
}

/* Frees q's draft blocks and its recurrent-state slot: its draft starts
 * over from position 0. */
static void drop(sched_draft_t *d, sched_eseq_t *q) {
  kv_seq_free(d->cache->alloc, &q->dkv);
  const int32_t slot = slot_of(d, q);
  if (slot < 0) return;
  kv_state_free(d->state, slot);
  d->held[slot] = NULL;
}

/* Frees the draft blocks (and states) of the running sequences not among
 * qs[n]. Returns how many sequences lost theirs. */
static int evict_idle(sched_engine_t *e, sched_eseq_t *const *qs, int32_t n) {
  int freed = 0;
  for (sched_seq_t *s = e->plan.running.head; s; s = s->next) {
    sched_eseq_t *q = eseq(s);
    if (q->dkv.n_blocks == 0 && slot_of(e->draft, q) < 0) continue;
    int32_t i = 0;
    while (i < n && qs[i] != q) i++;
    if (i < n) continue;
    drop(e->draft, q);
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
      .state_slots = d->state ? d->slots : NULL, /* a hybrid draft: filled with seqs */
  };
  rc = model_forward(d->runner, &b, d->logits);
  if (rc != 0) return rc;
  for (int32_t b2 = 0; b2 < ns; b2++) kv_seq_commit(d->cache->alloc, &qs[d->which[b2]]->dkv, d->q_lens[b2]);
  for (int32_t l = 0; l < nl; l++)
    drafts[d->logit_of[l]][col] = argmax(d->logits + (size_t)l * (size_t)d->n_vocab, d->n_vocab);
  return 0;
}

/* Reserves q's draft blocks for its len - 1 tokens and k - 1 drafts (and
 * a hybrid draft's state slot); lowers k to what the draft's sequence
 * length allows. 0, or -ENOSPC. */
static int reserve(sched_engine_t *e, sched_eseq_t *const *qs, int32_t n, sched_eseq_t *q, int32_t *k) {
  sched_draft_t *d = e->draft;
  const int64_t len = q->s.len;
  if (q->dkv.n_tokens >= len) return -ENOSPC; /* a hybrid's state at len: no row gives draft 1 */
  if (len - 1 + *k > d->max_len) *k = (int32_t)(d->max_len - len + 1 > 0 ? d->max_len - len + 1 : 0);
  if (*k == 0) return -ENOSPC;
  if (d->state && slot_of(d, q) < 0) { /* its draft starts at position 0 */
    int32_t slot = kv_state_alloc(d->state);
    if (slot < 0 && evict_idle(e, qs, n) > 0) slot = kv_state_alloc(d->state);
    if (slot < 0) return -ENOSPC;
    d->held[slot] = q;
    if (q->dkv.n_blocks) kv_seq_free(d->cache->alloc, &q->dkv); /* never: blocks go with the slot */
  }
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
      if (d->state) d->slots[ns] = slot_of(d, qs[i]);
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
    /* a steady step catches up on the bonus token and the last draft; a
     * hybrid's on every accepted draft too */
    if (qs[i]->s.len - qs[i]->dkv.n_tokens > (d->state ? 1 + e->cfg.spec.k : 2)) clean = 0;
    if (ks[i] > k_max) k_max = ks[i];
  }
  int rc = catch_up(e, qs, ks, n, drafts);
  for (int32_t i = 0; rc == 0 && d->state && i < n; i++) /* the drafts run in a copy of the state at len */
    if (ks[i] > 1) kv_state_copy(d->state, d->scratch[i], slot_of(d, qs[i]));
  for (int32_t j = 1; rc == 0 && j < k_max; j++) { /* step 3: draft j in, draft j + 1 out */
    int32_t ns = 0;
    for (int32_t i = 0; i < n; i++) {
      if (ks[i] <= j) continue;
      d->tokens[ns] = drafts[i][j - 1];
      d->positions[ns] = (int32_t)(qs[i]->s.len - 1 + j);
      d->seqs[ns] = &qs[i]->dkv;
      d->q_lens[ns] = 1;
      if (d->state) d->slots[ns] = d->scratch[i];
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
      drop(d, qs[i]);
    }
  }
  for (int32_t i = 0; d->state && i < n; i++) /* the slot holds len tokens: so does the draft cache */
    if (qs[i]->dkv.n_tokens > qs[i]->s.len) kv_seq_truncate(d->cache->alloc, &qs[i]->dkv, qs[i]->s.len);
  d->last_ns = clock_now_ns() - t0;
  d->last_clean = clean;
}

void sched__draft_sync(sched_engine_t *e) {
  sched_draft_t *d = e->draft;
  if (!d) return;
  for (sched_seq_t *s = e->plan.running.head; s; s = s->next) {
    sched_eseq_t *q = eseq(s);
    if (q->dkv.n_tokens <= s->len - 1) continue;
    if (!d->state) kv_seq_truncate(d->cache->alloc, &q->dkv, s->len - 1);
    else if (q->dkv.n_tokens > s->len) drop(d, q); /* never: a hybrid's state goes no further than len */
  }
  for (sched_seq_t *s = e->plan.waiting.head; s; s = s->next)
    if (eseq(s)->dkv.blocks || slot_of(d, eseq(s)) >= 0) drop(d, eseq(s));
}

void sched__draft_rollback(sched_engine_t *e, sched_eseq_t *q, int64_t keep) {
  sched_draft_t *d = e->draft;
  if (!d || q->dkv.n_tokens <= keep) return; /* a hybrid's: always (its cache holds no drafts) */
  if (d->state) drop(d, q); /* never: its state cannot go back */
  else kv_seq_truncate(d->cache->alloc, &q->dkv, keep);
}

void sched__draft_forget(sched_engine_t *e, sched_eseq_t *q) {
  if (e->draft) drop(e->draft, q);
}

void sched__draft_blocks(const sched_engine_t *e, int32_t *total, int32_t *used) {
  *total = e->draft ? e->draft->cache->num_blocks : 0;
  *used = e->draft ? kv_alloc_used_blocks(e->draft->cache->alloc) : 0;
}

int64_t sched__draft_last_ns(const sched_engine_t *e, int *clean) {
  *clean = e->draft ? e->draft->last_clean : 1;
  return e->draft ? e->draft->last_ns : 0;
}

const float *sched__draft_state(const sched_engine_t *e, const sched_eseq_t *q, int64_t *n_tokens) {
  const int32_t slot = e->draft ? slot_of(e->draft, q) : -1;
  if (slot < 0) return NULL;
  *n_tokens = e->draft->state->n_tokens[slot];
  return kv_state_layer(e->draft->state, 0) + (size_t)slot * e->draft->state->slot_floats;
}
