/* scheduler/sched_engine.c — the engine: creation (cache, runner, sampler
 * scratch, step buffers), the engine thread's loop, submission, drain and
 * abort, statistics, destruction (see sched.h). The step itself is in
 * sched_step.c. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/fault.h"
#include "base/hash.h"
#include "base/log.h"
#include "kernels/kern_sample.h"
#include "model/model_graph.h"
#include "scheduler/sched_internal.h"

sched_config_t sched_config_default(void) {
  return (sched_config_t){
      .max_batch_tokens = 256,
      .max_seqs = 16,
      .kv_cache_bytes = (int64_t)512 << 20,
      .block_size = KV_DEFAULT_BLOCK_SIZE,
      .prefix_caching = 1,
      .state_snapshot_bytes = (int64_t)512 << 20,
      .cuda_graphs = 1,
  };
}

/* Fills the zeros of c with defaults and checks it. */
static int resolve_config(sched_config_t *c) {
  const sched_config_t d = sched_config_default();
  if (c->max_seqs == 0) c->max_seqs = d.max_seqs;
  if (c->max_batch_tokens == 0) c->max_batch_tokens = d.max_batch_tokens > c->max_seqs ? d.max_batch_tokens : c->max_seqs;
  if (c->block_size == 0) c->block_size = d.block_size;
  if (c->kv_cache_blocks == 0 && c->kv_cache_bytes == 0) {
    c->kv_cache_bytes = d.kv_cache_bytes;
    c->kv_cache_bytes_default = 1; /* a hybrid's states come on top of it */
  }
  if (c->state_snapshot_bytes == 0) c->state_snapshot_bytes = d.state_snapshot_bytes;
  sched_spec_config_t *sp = &c->spec;
  if (sp->k == 0) sp->k = 4;
  if (sp->ngram_min == 0) sp->ngram_min = 1;
  if (sp->ngram_max == 0) sp->ngram_max = sp->ngram_min > 4 ? sp->ngram_min : 4;
  if (sp->max_batch == 0) sp->max_batch = 4;
  if (sp->k < 1 || sp->k > SCHED_SPEC_MAX_K || sp->ngram_min < 1 || sp->ngram_max < sp->ngram_min ||
      sp->max_batch < 1) {
    log_error("sched_engine_create: bad speculative decoding settings: k %d (1..%d), n-gram sizes %d..%d, max batch "
              "%d",
              sp->k, SCHED_SPEC_MAX_K, sp->ngram_min, sp->ngram_max, sp->max_batch);
    return -EINVAL;
  }
  if (c->max_seqs < 1 || c->max_batch_tokens < c->max_seqs || c->block_size < 1 || c->kv_cache_blocks < 0 ||
      c->kv_cache_bytes < 0 || c->max_model_len < 0 || c->max_waiting < 0) {
    log_error("sched_engine_create: bad configuration: max_seqs %d, max_batch_tokens %d (>= max_seqs), block_size "
              "%d, kv_cache_blocks %d, kv_cache_bytes %lld, max_model_len %d, max_waiting %d",
              c->max_seqs, c->max_batch_tokens, c->block_size, c->kv_cache_blocks, (long long)c->kv_cache_bytes,
              c->max_model_len, c->max_waiting);
    return -EINVAL;
  }
  return 0;
}

static void *engine_main(void *arg);

/* The window after which a sequence's blocks may be released: the largest
 * of the layers' sliding windows when every layer has one and the backend's
 * attention never reads before them (be->attn_window_granule), else 0. */
static int release_window(const model_t *m, const kern_backend_t *be) {
  const model_hparams_t *hp = model_hparams(m);
  int w = 0;
  for (int l = 0; l < hp->n_layers; l++) {
    const int lw = model_layer_window(hp, l);
    if (lw <= 0) return 0; /* a global layer sees every key */
    if (lw > w) w = lw;
  }
  return be->attn_window_granule > 0 ? w : 0;
}

/* A hybrid's recurrent states (a slot per sequence, speculation's kept
 * states) come out of kv_cache_bytes before the KV cache is sized from
 * it, when the operator gave that budget (a total, as vLLM counts Mamba
 * states in its KV budget); the default 512M is the KV cache's alone and
 * the states come on top (as with kv_cache_blocks), so the defaults serve
 * any size of hybrid. The snapshots have state_snapshot_bytes. -ENOSPC,
 * with a line naming the settings, when no KV block is left. */
static int hybrid_budget(sched_engine_t *e, const sched_config_t *c, kv_cache_config_t *kc) {
  kv_state_config_t sc = {.n_slots = c->max_seqs, .n_keep = e->spec_rows};
  if (kc->num_blocks > 0 || c->kv_cache_bytes_default || model_state_config(e->m, &sc) != 0) return 0;
  const size_t block = kv_cache_block_bytes(kc, e->be->kv_type);
  const size_t rest = kv_state_budget_rest(&sc, kc->budget_bytes, block);
  if (rest == 0) {
    log_error("engine: kv_cache_bytes (%zu) leaves not one KV block (%zu bytes) beside the recurrent states of "
              "this hybrid model, which come out of it first (%zu bytes each: one for each of max_seqs %d "
              "sequences, %d kept for speculation's draft rows, 1 scratch; %zu bytes in all): raise "
              "kv_cache_bytes, or lower max_seqs%s",
              kc->budget_bytes, block, kv_state_slot_bytes(&sc), sc.n_slots, sc.n_keep, kv_state_pool_bytes(&sc),
              sc.n_keep > 0 ? ", num_speculative_tokens or speculative_max_batch" : "");
    return -ENOSPC;
  }
  kc->budget_bytes = rest;
  return 0;
}

/* A hybrid model (recurrent layers): its state pool, one slot per
 * running place (max_seqs), and snapshots of states at prefix-cache
 * blocks as many as state_snapshot_bytes holds (at most one per block),
 * dropped with their blocks (the allocator's evict hook). Without room for
 * one snapshot prefix caching is turned off (a hit would skip the
 * recurrent layers' state). Speculative decoding: a kept state per draft
 * row of a step (e->spec_rows), where a verification leaves the state after
 * each row (kv_state.h). 0, or -EINVAL after logging why. Other models: 0,
 * nothing done. */
static int hybrid_setup(sched_engine_t *e, sched_config_t *c) {
  kv_state_config_t sc = {.n_slots = c->max_seqs, .n_keep = e->spec_rows};
  if (model_state_config(e->m, &sc) != 0) return 0;
  const char *arch = model_arch_name(model_hparams(e->m)->arch);
  const double slot_mb = (double)kv_state_slot_bytes(&sc) / 1e6;
  if (c->prefix_caching) {
    const int64_t n = c->state_snapshot_bytes > 0 ? c->state_snapshot_bytes / (int64_t)kv_state_slot_bytes(&sc) : 0;
    sc.n_snaps = (int)(n < e->cache->num_blocks ? n : e->cache->num_blocks);
    sc.n_blocks = e->cache->num_blocks;
  }
  if (c->prefix_caching && sc.n_snaps == 0) {
    log_warn("engine: prefix caching is off for this hybrid %s model: state_snapshot_bytes (%lld) holds no "
             "snapshot of its recurrent state (%.1f MB), and a cache hit would skip that state",
             arch, (long long)(c->state_snapshot_bytes > 0 ? c->state_snapshot_bytes : 0), slot_mb);
    c->prefix_caching = 0;
    e->cfg.prefix_caching = 0;
  }
  e->state = kv_state_create(e->be, &sc);
  if (!e->state) return -EINVAL;
  if (sc.n_snaps > 0) kv_alloc_set_evict_hook(e->cache->alloc, kv_snap_evicted, e->state);
  e->state_slots = xcalloc((size_t)c->max_seqs, sizeof *e->state_slots);
  if (sc.n_keep > 0) e->state_keep = xcalloc((size_t)c->max_seqs, sizeof *e->state_keep);
  log_info("engine: recurrent-state pool of %d slots (max_seqs), %d kept states (speculation's draft rows) and 1 "
           "scratch for %d Gated DeltaNet layers, %.3f MB each, %.1f MB in all%s; %d prefix-cache snapshots "
           "(%.1f MB of state_snapshot_bytes); KV cache %d blocks (%.1f MB)",
           sc.n_slots, sc.n_keep, sc.n_layers, slot_mb, (double)kv_state_pool_bytes(&sc) / 1e6,
           c->kv_cache_blocks == 0 && !c->kv_cache_bytes_default ? ", taken from kv_cache_bytes" : ", beside the KV cache", sc.n_snaps, slot_mb * sc.n_snaps,
           e->cache->num_blocks, (double)e->cache->arena_bytes / 1e6);
  return 0;
}

sched_engine_t *sched_engine_create(const model_t *m, const tok_t *tok, kern_backend_t *be,
                                    const sched_config_t *cfg) {
  sched_config_t c = *cfg;
  if (resolve_config(&c) != 0) return NULL;
  const model_hparams_t *hp = model_hparams(m);
  if (tok_n_vocab(tok) != hp->n_vocab) {
    log_error("sched_engine_create: the tokenizer has %d tokens, the model %d", tok_n_vocab(tok), hp->n_vocab);
    return NULL;
  }
  sched_engine_t *e = xcalloc(1, sizeof *e);
  e->m = m;
  e->be = be;
  e->tok = tok;
  e->n_vocab = hp->n_vocab;
  e->cfg = c;
  e->snap = sched__snap_create();

  kv_cache_config_t kc = {0};
  model_kv_config(m, &kc);
  kc.block_size = c.block_size;
  kc.num_blocks = c.kv_cache_blocks;
  kc.budget_bytes = (size_t)c.kv_cache_bytes;
  /* speculation: logits rows for the drafts of a step (within max_batch_tokens rows) */
  if (c.spec.method != SCHED_SPEC_OFF) {
    const int64_t rows = (int64_t)c.spec.k * (c.spec.max_batch < c.max_seqs ? c.spec.max_batch : c.max_seqs);
    e->spec_rows = (int32_t)(rows < c.max_batch_tokens - c.max_seqs ? rows : c.max_batch_tokens - c.max_seqs);
    if (e->spec_rows < 0) e->spec_rows = 0;
  }
  if (hybrid_budget(e, &c, &kc) != 0) goto fail;
  e->cache = kv_cache_create(be, &kc);
  if (!e->cache) goto fail;
  kv_alloc_set_observer(e->cache->alloc, &c.kv_observer);
  if (hybrid_setup(e, &c) != 0) goto fail;
  e->max_len_model = c.max_model_len ? c.max_model_len : hp->n_ctx;
  if (c.max_model_len > hp->n_ctx)
    log_warn("max_model_len %d is past the model's context length %d", c.max_model_len, hp->n_ctx);
  e->max_len = attn_seq_len_cap(e->cache, e->max_len_model);
  if (e->max_len < e->max_len_model)
    log_warn("the KV cache holds %d tokens (%d blocks of %d): sequences are limited to that, below max_model_len "
             "%d",
             e->max_len, e->cache->num_blocks, e->cache->block_size, e->max_len_model);
  /* penalty ops a step may send with device sampling: 2,048 a row on
   * average (a row whose ops do not fit samples on the host) */
  /* a final soft-cap (gemma2) is applied on the host: such models sample there */
  const int device_sampling = be->sample && hp->final_softcap == 0;
  e->sample_ops_cap = device_sampling ? c.max_seqs * 2048 : 0;
  const model_runner_config_t rc = {
      .max_tokens = c.max_batch_tokens,
      .max_seqs = c.max_seqs,
      .max_logits = c.max_batch_tokens, /* prompt_logprobs: every row of a step may need logits */
      .max_seq_len = e->max_len,
      .max_sample_ops = e->sample_ops_cap,
      .graphs = c.cuda_graphs ? MODEL_GRAPHS_ON : MODEL_GRAPHS_OFF,
      .state = e->state,
  };
  e->runner = model_runner_create(m, e->cache, &rc);
  if (!e->runner) goto fail;
  assert(attn_max_seq_len(model_runner_attn(e->runner)) == e->max_len); /* one clamp: the attention's */
  if (attn_meta_init(&e->meta, c.max_seqs, c.max_batch_tokens, model_runner_max_blocks_per_seq(e->runner)) != 0)
    goto fail;
  if (c.spec.method != SCHED_SPEC_OFF) {
    e->spec_seqs = xcalloc((size_t)c.max_seqs, sizeof *e->spec_seqs);
    e->spec_k = xcalloc((size_t)c.max_seqs, sizeof *e->spec_k);
    e->spec_out = xcalloc((size_t)c.max_seqs, sizeof *e->spec_out);
  }
  if (c.spec.method == SCHED_SPEC_DRAFT && !(e->draft = sched__draft_create(e))) goto fail;
  e->pace.target_ns = (int64_t)c.step_target_ms * 1000000;
  e->weight_bytes = (double)model_step_weight_bytes(m);
  e->read_gbps = be->read_gbps ? be->read_gbps(be) : 0;
  if (sched_plan_init(&e->plan, e->cache->alloc, c.max_batch_tokens, c.max_seqs, c.prefix_caching) != 0) goto fail;
  e->plan.state = e->state;
  e->plan.window = release_window(m, be);
  e->plan.window_granule = be->attn_window_granule;
  e->ws = samp_ws_create(e->n_vocab);
  e->seqs = xcalloc((size_t)c.max_seqs, sizeof *e->seqs);
  e->q_lens = xcalloc((size_t)c.max_seqs, sizeof *e->q_lens);
  e->tokens = xcalloc((size_t)c.max_batch_tokens, sizeof *e->tokens);
  e->positions = xcalloc((size_t)c.max_batch_tokens, sizeof *e->positions);
  e->logit_rows = xcalloc((size_t)c.max_batch_tokens, sizeof *e->logit_rows);
  e->logit_seqs = xcalloc((size_t)c.max_batch_tokens, sizeof *e->logit_seqs);
  e->logit_pos = xcalloc((size_t)c.max_batch_tokens, sizeof *e->logit_pos);
  e->logits = xcalloc((size_t)c.max_batch_tokens * (size_t)e->n_vocab, sizeof *e->logits);
  e->dim = hp->dim;
  e->hidden_rows = xcalloc((size_t)c.max_batch_tokens, sizeof *e->hidden_rows);
  e->hidden_seqs = xcalloc((size_t)c.max_batch_tokens, sizeof *e->hidden_seqs);
  e->hidden_pos = xcalloc((size_t)c.max_batch_tokens, sizeof *e->hidden_pos);
  e->hidden = xcalloc((size_t)c.max_batch_tokens * (size_t)hp->dim, sizeof *e->hidden); /* pages touched as used */
  e->masked = xcalloc((size_t)e->n_vocab, sizeof *e->masked);
  e->gmask = xcalloc(((size_t)e->n_vocab + 31) / 32, sizeof *e->gmask);
  if (device_sampling) { /* rows whose request qualifies pick their token on the device */
    e->sample_rows = xcalloc((size_t)c.max_batch_tokens, sizeof(kern_sample_row_t));
    e->sample_ops = xcalloc((size_t)e->sample_ops_cap, sizeof(kern_sample_op_t));
    e->sampled = xcalloc((size_t)c.max_batch_tokens, sizeof(kern_sample_out_t));
  }
  e->piece_cap = tok_stream_max_out(e->tok);
  e->piece = xcalloc(e->piece_cap, 1);

  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  pthread_mutex_init(&e->ev_mu, NULL);
  pthread_cond_init(&e->ev_cv, NULL);
  pthread_mutex_init(&e->st_mu, NULL);
  e->sync_init = 1;
  e->stats.kv_blocks_total = e->cache->num_blocks;
  e->stats.kv_blocks_free = e->cache->num_blocks;
  e->stats.block_size = e->cache->block_size;
  e->stats.prefix_caching = c.prefix_caching;
  if (e->state) {
    e->stats.state_slots_total = e->state->n_slots;
    e->stats.state_bytes = /* the running slots, speculation's kept states and the scratch */
        (int64_t)(e->state->slot_floats * sizeof(float)) * (e->state->n_slots + e->state->n_keep + 1);
    e->stats.state_snaps_total = e->state->n_snaps;
    e->stats.state_snap_bytes = (int64_t)(e->state->slot_floats * sizeof(float)) * e->state->n_snaps;
  }
  sched__draft_blocks(e, &e->stats.draft_kv_blocks_total, &e->stats.draft_kv_blocks_used);
  e->stats.max_model_len = e->max_len;
  if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
    log_error("sched_engine_create: cannot start the engine thread");
    goto fail;
  }
  e->thread_started = 1;
  log_info("engine: %d KV blocks of %d tokens, max_seqs %d, max_batch_tokens %d, max_model_len %d, prefix caching "
           "%s, speculative decoding %s, blocks before the sliding window %s",
           e->cache->num_blocks, e->cache->block_size, c.max_seqs, c.max_batch_tokens, e->max_len,
           c.prefix_caching ? "on" : "off",
           e->spec_rows == 0 ? "off" : c.spec.method == SCHED_SPEC_DRAFT ? "draft model" : "ngram",
           e->plan.window > 0 ? "released" : "kept (not every layer has a window, or the backend reads them)");
  return e;
fail:
  sched_engine_destroy(e);
  return NULL;
}

static void *engine_main(void *arg) {
  sched_engine_t *e = arg;
  pthread_setname_np(pthread_self(), "tram-engine"); /* it runs the pool's chunk 0 too */
  for (;;) {
    if (sched__step(e)) {
      fault_stall_once("engine_stall"); /* test builds: a wedged engine */
      continue;
    }
    pthread_mutex_lock(&e->mu);
    const int idle = e->plan.running.n == 0 && e->plan.waiting.n == 0 && !e->inbox_head;
    if (e->stopping && idle) {
      pthread_mutex_unlock(&e->mu);
      break;
    }
    if (!idle && e->plan.n_paused < e->plan.running.n + e->plan.waiting.n)
      log_error("engine: %d sequences wait but none can be planned", e->plan.waiting.n);
    while (!e->inbox_head && !e->wake && !e->stopping) pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
  }
  return NULL;
}

void sched_engine_set_notify(sched_engine_t *e, void (*fn)(void *arg), void *arg) {
  pthread_mutex_lock(&e->mu);
  e->notify = fn;
  e->notify_arg = arg;
  pthread_mutex_unlock(&e->mu);
}

/* Sequence i's sampling parameters: seed i of a seeded request is derived
 * from the request's seed (sequence 0 uses it as is). */
static samp_params_t seq_params(const sched_req_t *r, int32_t i) {
  samp_params_t p = r->p.samp;
  if (p.has_seed && i > 0) p.seed = hash_mix64(p.seed + (uint64_t)i * HASH_GAMMA);
  return p;
}

/* The length checks of a submit; 0 or -EINVAL with the reason in err. */
static int check_lengths(const sched_engine_t *e, const sched_req_t *r, char *err, size_t err_len) {
  const int64_t need = (int64_t)r->n_prompt + (r->p.pooling ? 0 : r->p.max_tokens > 0 ? r->p.max_tokens : 1);
  if (need <= e->max_len) return 0;
  char why[160];
  if (e->max_len < e->max_len_model)
    snprintf(why, sizeof why, "the KV cache holds only %d tokens (%d blocks of %d), below max_model_len %d",
             e->max_len, e->cache->num_blocks, e->cache->block_size, e->max_len_model);
  else
    snprintf(why, sizeof why, "max_model_len is %d", e->max_len);
  if (r->p.max_tokens > 0)
    snprintf(err, err_len, "the prompt (%d tokens) plus max_tokens (%d) needs %lld tokens, but %s", r->n_prompt,
             r->p.max_tokens, (long long)need, why);
  else if (r->p.pooling)
    snprintf(err, err_len, "the input (%d tokens) is longer than the context: %s", r->n_prompt, why);
  else
    snprintf(err, err_len, "the prompt (%d tokens) leaves no room for output: %s", r->n_prompt, why);
  return -EINVAL;
}

int sched_submit(sched_engine_t *e, sched_req_t *r, char *err, size_t err_len) {
  if (r->engine || r->seqs) {
    snprintf(err, err_len, "the request was submitted already");
    return -EINVAL;
  }
  int rc = samp_params_validate(&r->p.samp, e->n_vocab, err, err_len);
  if (rc != 0) return -EINVAL;
  for (int32_t i = 0; i < r->n_prompt; i++)
    if (r->prompt[i] < 0 || r->prompt[i] >= e->n_vocab) {
      snprintf(err, err_len, "prompt token %d is %d: not in the vocabulary of %d", i, r->prompt[i], e->n_vocab);
      return -EINVAL;
    }
  for (int32_t i = 0; i < r->p.n_stop_ids; i++)
    if (r->stop_ids[i] < 0 || r->stop_ids[i] >= e->n_vocab) {
      snprintf(err, err_len, "stop token id %d is not in the vocabulary of %d", r->stop_ids[i], e->n_vocab);
      return -EINVAL;
    }
  for (int32_t i = 0; i < r->p.n_think_close; i++)
    if (r->think_close[i] < 0 || r->think_close[i] >= e->n_vocab) {
      snprintf(err, err_len, "reasoning close id %d is not in the vocabulary of %d", r->think_close[i], e->n_vocab);
      return -EINVAL;
    }
  for (int32_t i = 0; i < r->p.n_think_lead; i++)
    if (r->think_lead[i] < 0 || r->think_lead[i] >= e->n_vocab) {
      snprintf(err, err_len, "reasoning lead id %d is not in the vocabulary of %d", r->think_lead[i], e->n_vocab);
      return -EINVAL;
    }
  if (r->p.think_open >= e->n_vocab) r->p.think_open = -1;
  if (r->p.prompt_top_logprobs < 0 || r->p.prompt_top_logprobs > SAMP_MAX_TOP_LOGPROBS) {
    snprintf(err, err_len, "prompt_top_logprobs = %d: must be 0..%d", r->p.prompt_top_logprobs, SAMP_MAX_TOP_LOGPROBS);
    return -EINVAL;
  }
  if ((rc = check_lengths(e, r, err, err_len)) != 0) return rc;
  if (r->p.n > e->cfg.max_seqs) {
    snprintf(err, err_len, "n = %d completions cannot run at once: max_seqs is %d", r->p.n, e->cfg.max_seqs);
    return -EINVAL;
  }

  r->seqs = xcalloc((size_t)r->p.n, sizeof *r->seqs);
  for (int32_t i = 0; i < r->p.n; i++) {
    sched_eseq_t *q = &r->seqs[i];
    q->req = r;
    q->index = i;
    const samp_params_t sp = seq_params(r, i);
    q->samp = samp_state_create(&sp, e->n_vocab, r->prompt, (size_t)r->n_prompt);
    if (!q->samp) {
      sched__req_free_seqs(r);
      snprintf(err, err_len, "the sampling parameters are invalid");
      return -EINVAL;
    }
    if (r->grammar && (rc = sched__gram_start(e, q, err, err_len)) != 0) {
      sched__req_free_seqs(r);
      return rc;
    }
    tok_stream_init(&q->detok, e->tok, r->p.special ? TOK_DEC_SPECIAL : 0);
    sched__think_init(q);
    sched_stop_state_init(&q->stop, &r->stops);
  }
  sched_seq_init(&r->seqs[0].s, r->prompt, r->n_prompt, r->p.n);
  r->seqs[0].s.no_prefix = r->p.prompt_logprobs || r->p.pooling; /* every prompt row computed */
  if (r->p.pooling) r->seqs[0].pool = xcalloc((size_t)e->dim, sizeof(double));
  r->seqs[0].s.pause = &r->paused; /* its forks share it */
  r->seqs[0].prompt_lp_next = 1;
  r->seqs[0].started = 1;
  r->n_live = r->p.n;
  memset(&r->times, 0, sizeof r->times);
  r->times.arrival = clock_now_ns();

  pthread_mutex_lock(&e->mu);
  if (e->draining || e->stopping) rc = -ESHUTDOWN;
  else if (e->cfg.max_waiting > 0 && e->n_waiting_reqs >= e->cfg.max_waiting) rc = -EAGAIN;
  if (rc != 0) {
    pthread_mutex_unlock(&e->mu);
    snprintf(err, err_len, rc == -EAGAIN ? "too many requests are waiting (max_waiting %d)" : "the engine is shutting down",
             e->cfg.max_waiting);
    sched__req_free_seqs(r);
    return rc;
  }
  r->engine = e;
  r->id = ++e->next_id;
  e->n_waiting_reqs++;
  r->inbox_next = NULL;
  if (e->inbox_tail)
    e->inbox_tail->inbox_next = r;
  else
    e->inbox_head = r;
  e->inbox_tail = r;
  e->n_inbox++;
  e->n_submitted++;
  pthread_cond_signal(&e->cv);
  pthread_mutex_unlock(&e->mu);
  return 0;
}

void sched_engine_drain(sched_engine_t *e) {
  pthread_mutex_lock(&e->mu);
  e->draining = 1;
  pthread_mutex_unlock(&e->mu);
}

void sched_engine_abort_all(sched_engine_t *e) {
  pthread_mutex_lock(&e->mu);
  e->aborting = 1;
  e->wake = 1;
  pthread_cond_signal(&e->cv);
  pthread_mutex_unlock(&e->mu);
}

void sched_engine_destroy(sched_engine_t *e) {
  if (!e) return;
  if (e->thread_started) {
    pthread_mutex_lock(&e->mu);
    e->stopping = 1;
    e->aborting = 1;
    e->wake = 1;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
  }
  sched__events_clear(e);
  if (e->sync_init) {
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->ev_mu);
    pthread_cond_destroy(&e->ev_cv);
    pthread_mutex_destroy(&e->st_mu);
  }
  sched_plan_free(&e->plan);
  attn_meta_free(&e->meta);
  sched__draft_destroy(e->draft);
  model_runner_destroy(e->runner);
  kv_state_destroy(e->state);
  free(e->state_slots);
  free(e->state_keep);
  kv_cache_destroy(e->cache);
  free(e->spec_seqs);
  free(e->spec_k);
  free(e->spec_out);
  samp_ws_destroy(e->ws);
  free(e->seqs);
  free(e->q_lens);
  free(e->tokens);
  free(e->positions);
  free(e->logit_rows);
  free(e->logit_seqs);
  free(e->masked);
  free(e->gmask);
  free(e->logit_pos);
  free(e->logits);
  free(e->hidden_rows);
  free(e->hidden_seqs);
  free(e->hidden_pos);
  free(e->hidden);
  free(e->sample_rows);
  free(e->sample_ops);
  free(e->sampled);
  free(e->piece);
  sched__snap_destroy(e->snap);
  free(e);
}

void sched_get_stats(sched_engine_t *e, sched_stats_t *out) {
  /* mu then st_mu, as the engine's end of step: the inbox and the snapshot agree */
  pthread_mutex_lock(&e->mu);
  pthread_mutex_lock(&e->st_mu);
  *out = e->stats;
  out->waiting += e->n_inbox;
  out->requests_submitted = e->n_submitted;
  pthread_mutex_unlock(&e->st_mu);
  pthread_mutex_unlock(&e->mu);
}

const tok_t *sched_engine_tokenizer(const sched_engine_t *e) { return e->tok; }
int32_t sched_engine_max_model_len(const sched_engine_t *e) { return e->max_len; }
const char *sched_engine_model_arch(const sched_engine_t *e) { return model_arch_name(model_hparams(e->m)->arch); }
const char *sched_engine_model_hf_class(const sched_engine_t *e) {
  return model_hf_class(model_hparams(e->m));
}
int64_t sched_engine_kv_cache_bytes(const sched_engine_t *e) {
  return (int64_t)e->cache->arena_bytes;
}
