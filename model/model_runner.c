/* model/model_runner.c — the per-engine runner and the forward pass of one
 * batch (see model.h). Every buffer is sized at creation; a step allocates
 * nothing. T below is the step's token count, L its logit row count. */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/log.h"
#include "kernels/kern_sample.h"
#include "model/model_graph.h"
#include "model/model_internal.h"

struct model_runner {
  const model_t *m;     /* not owned */
  kern_backend_t *be;   /* the model's */
  kv_cache_t *cache;    /* not owned */
  attn_t *attn;         /* owned */
  model_runner_config_t cfg;

  /* device buffers, for up to max_tokens rows (max_logits for the last two) */
  int32_t *ids;   /* [T] token ids */
  int32_t *pos;   /* [T] positions */
  int32_t *rows;  /* [L] rows that need logits */
  int32_t *hrows; /* [T] rows whose final-normed hidden state is asked for (embeddings) */
  float *x;       /* [T, dim] the residual stream */
  float *h;       /* [T, dim] normed input of a sub-block */
  float *proj;    /* [T, dim] a sub-block's output projection */
  float *q;       /* [T, n_heads, head_dim] */
  float *k;       /* [T, n_kv_heads, head_dim] */
  float *v;       /* [T, n_kv_heads, head_dim] */
  float *att;     /* [T, n_heads, head_dim] attention output */
  float *gate;    /* [T, ff_dim] gate, then silu(gate) ⊙ up */
  float *up;      /* [T, ff_dim] */
  float *qg;      /* [T, n_heads, 2 head_dim] gated attention (attn_out_gate): [q, gate] per head */
  float *ag;      /* [T, q_dim] its gate */
  float *qkv;     /* [MODEL_JOIN_MAX_ROWS, q_dim + 2 kv_dim] a joined QKV's output (model_join.c); NULL: none */
  float *gu;      /* [MODEL_JOIN_MAX_ROWS, 2 ff_dim] a joined gate/up's output; NULL: none */
  model_gdn_io_t gdn; /* hybrid: the Gated DeltaNet layers' buffers (model_gdn.c) */
  model_g4_io_t g4;   /* gemma4: its layers' buffers (model_gemma4.c) */
  int32_t *seq_rows;  /* [max_seqs + 1] hybrid: the step's cu_seq_lens_q (device) */
  int32_t *seq_slots; /* [max_seqs] hybrid: its state slots (device) */
  int32_t *seq_keep;  /* [max_seqs] hybrid: where its states after each row go, or -1 (device) */
  float *xl;      /* [L, dim] the rows that need logits, final-normed */
  float *logits;  /* [L, n_vocab] */
  kern_sample_row_t *samp_rows; /* [L] be->sample only: how each row picks its token */
  kern_sample_op_t *samp_ops;   /* [max_sample_ops] be->sample only: their penalty ops */
  kern_sample_out_t *samp_outs; /* [L] be->sample only: the tokens picked */
  model_moe_scratch_t *moe;     /* the sparse layers' buffers (model_moe.h); NULL: a dense model */

  /* captured decode steps (model_graph.h): one graph per (rows, keys) bucket */
  model_graph_plan_t gp;        /* gp.n_rows == 0: graphs off */
  kern_graph_t **graphs;        /* [gp.n_rows * gp.n_keys] */
  uint8_t *graph_state;         /* [same] model_graph_state_t */
  int32_t *pad_ids, *pad_pos, *pad_rows; /* [gp.max_rows] host: a padded step's inputs */
  model_graph_stats_t gstats;
};

model_runner_t *model_runner_create(const model_t *m, kv_cache_t *cache, const model_runner_config_t *cfg) {
  const model_hparams_t *hp = &m->hp;
  const int max_logits = cfg->max_logits                 ? cfg->max_logits
                         : cfg->max_seqs < cfg->max_tokens ? cfg->max_seqs
                                                           : cfg->max_tokens;
  if (cfg->max_tokens < 1 || cfg->max_seqs < 1 || max_logits < 0 ||
      max_logits > cfg->max_tokens || cfg->max_seq_len < 0) {
    log_error("model_runner_create: bad capacities: %d tokens, %d sequences, %d logit rows, max_seq_len %d "
              "(want them >= 1, logit rows <= tokens)",
              cfg->max_tokens, cfg->max_seqs, max_logits, cfg->max_seq_len);
    return NULL;
  }
  if (hp->full_attn_interval > 0 && !cfg->state) {
    log_error("model_runner_create: a hybrid model needs a recurrent-state pool (model_runner_config_t.state)");
    return NULL;
  }
  kv_state_config_t sc;
  if (cfg->state && (model_state_config(m, &sc) != 0 || sc.n_layers != cfg->state->n_layers ||
                     sc.layer_floats != cfg->state->layer_floats || cfg->state->be != m->be)) {
    log_error("model_runner_create: the recurrent-state pool does not fit the model");
    return NULL;
  }
  int fits = cache->be == m->be && cache->n_layers == hp->n_attn_layers; /* and model_kv_config's geometry */
  for (int al = 0; al < cache->n_layers && fits; al++)
    fits = cache->layer_kv_heads[al] == (m->cache_kv_heads ? m->cache_kv_heads[al] : hp->n_kv_heads) &&
           cache->layer_head_dim[al] == (m->cache_head_dim ? m->cache_head_dim[al] : hp->head_dim);
  if (!fits) {
    log_error("model_runner_create: the cache (%s backend, %d layers, layer 0: %d KV heads of %d) does not fit the "
              "model (%s backend, %d layers of model_kv_config's geometry)",
              cache->be->name, cache->n_layers, cache->n_kv_heads, cache->head_dim, m->be->name, hp->n_attn_layers);
    return NULL;
  }
  model_runner_t *r = xcalloc(1, sizeof *r);
  r->m = m;
  r->be = m->be;
  r->cache = cache;
  r->cfg = *cfg;
  r->cfg.max_logits = max_logits;
  int *windows = NULL; /* every layer's sliding window (attn copies them) */
  if (hp->sliding_window > 0) {
    windows = xmalloc((size_t)hp->n_layers * sizeof *windows);
    for (int l = 0, a = 0; l < hp->n_layers; l++)
      if (!model_layer_recurrent(hp, l)) windows[a++] = model_layer_window(hp, l);
  }
  const float **sinks = NULL; /* every attention layer's sinks (attn copies the pointers) */
  if (hp->attn_sinks) {
    sinks = xmalloc((size_t)hp->n_layers * sizeof *sinks);
    for (int l = 0, a = 0; l < hp->n_layers; l++)
      if (!model_layer_recurrent(hp, l)) sinks[a++] = m->layers[l].sinks;
  }
  const attn_config_t ac = {
      .n_heads = hp->n_heads,
      .max_seqs = cfg->max_seqs,
      .max_tokens = cfg->max_tokens,
      .max_seq_len = cfg->max_seq_len ? cfg->max_seq_len : hp->n_ctx, /* the attention clamps it */
      .gather = cfg->gather,
      .layer_window = windows,
      .layer_sinks = sinks,
      .scale = hp->attn_scale,
      .softcap = hp->attn_softcap,
  };
  r->attn = attn_create(m->be, cache, &ac);
  free(windows);
  free(sinks);
  if (!r->attn) {
    free(r);
    return NULL;
  }
  r->cfg.max_seq_len = attn_max_seq_len(r->attn);

  kern_backend_t *be = m->be;
  const size_t T = (size_t)cfg->max_tokens, L = (size_t)(max_logits ? max_logits : 1), f = sizeof(float);
  int failed = 0;
#define ALLOC(ptr, bytes) (failed |= !((ptr) = be->alloc(be, (bytes))))
  ALLOC(r->ids, T * sizeof(int32_t));
  ALLOC(r->pos, T * sizeof(int32_t));
  ALLOC(r->rows, L * sizeof(int32_t));
  ALLOC(r->hrows, T * sizeof(int32_t));
  ALLOC(r->x, T * hp->dim * f);
  ALLOC(r->h, T * hp->dim * f);
  ALLOC(r->proj, T * hp->dim * f);
  ALLOC(r->q, T * hp->q_dim * f);
  ALLOC(r->k, T * hp->kv_dim * f);
  ALLOC(r->v, T * hp->kv_dim * f);
  ALLOC(r->att, T * hp->q_dim * f);
  size_t ff = (size_t)(hp->ff_dim_shared > hp->ff_dim ? hp->ff_dim_shared : hp->ff_dim); /* the widest MLP */
  if (ff == 0) ff = 1; /* qwen35moe: no dense MLP (its experts' buffers are model_moe.c's) */
  ALLOC(r->gate, T * ff * f);
  ALLOC(r->up, T * ff * f);
  if (hp->attn_out_gate) {
    ALLOC(r->qg, T * 2 * hp->q_dim * f);
    ALLOC(r->ag, T * hp->q_dim * f);
  }
  /* joined projections (model_join.c): outputs of steps up to MODEL_JOIN_MAX_ROWS rows */
  const size_t jr = T < MODEL_JOIN_MAX_ROWS ? T : MODEL_JOIN_MAX_ROWS;
  int64_t qkv_cols = 0, gu_cols = 0; /* the widest joined outputs */
  for (int l = 0; l < hp->n_layers; l++) {
    if (m->layers[l].wqkv.rows > qkv_cols) qkv_cols = m->layers[l].wqkv.rows;
    if (m->layers[l].w_gu.rows > gu_cols) gu_cols = m->layers[l].w_gu.rows;
  }
  if (qkv_cols > 0) ALLOC(r->qkv, jr * (size_t)qkv_cols * f);
  if (gu_cols > 0) ALLOC(r->gu, jr * (size_t)gu_cols * f);
  if (hp->full_attn_interval > 0) {
    const size_t vd = (size_t)hp->ssm_n_v_heads * hp->ssm_head_v, hv = (size_t)hp->ssm_n_v_heads;
    model_gdn_io_t *g = &r->gdn;
    ALLOC(g->mix, T * hp->ssm_conv_dim * f);
    ALLOC(g->conv, T * hp->ssm_conv_dim * f);
    ALLOC(g->z, T * vd * f);
    ALLOC(g->alpha, T * hv * f);
    ALLOC(g->beta, T * hv * f);
    ALLOC(g->o, T * vd * f);
    if (hp->ssm_ba_fused) ALLOC(g->ba, T * 2 * hv * f);
    ALLOC(r->seq_rows, ((size_t)cfg->max_seqs + 1) * sizeof(int32_t));
    ALLOC(r->seq_slots, (size_t)cfg->max_seqs * sizeof(int32_t));
    ALLOC(r->seq_keep, (size_t)cfg->max_seqs * sizeof(int32_t));
    g->x = r->x;
    g->h = r->h;
    g->proj = r->proj;
    g->args = (kern_gdn_args_t){.cu_rows = r->seq_rows, .slots = r->seq_slots, .conv_dim = hp->ssm_conv_dim,
                                .conv_kernel = hp->ssm_conv_kernel, .n_k_heads = hp->ssm_n_k_heads,
                                .n_v_heads = hp->ssm_n_v_heads, .head_k = hp->ssm_head_k,
                                .head_v = hp->ssm_head_v, .v_tiled = hp->ssm_v_tiled, .qk_eps = 1e-6f};
  }
  ALLOC(r->xl, L * hp->dim * f);
  ALLOC(r->logits, L * hp->n_vocab * f);
  if (be->sample) {
    ALLOC(r->samp_rows, L * sizeof *r->samp_rows);
    ALLOC(r->samp_outs, L * sizeof *r->samp_outs);
    if (cfg->max_sample_ops > 0) ALLOC(r->samp_ops, (size_t)cfg->max_sample_ops * sizeof *r->samp_ops);
  }
#undef ALLOC
  if (hp->arch == MODEL_ARCH_GEMMA4) {
    failed |= model__gemma4_io_alloc(be, hp, cfg->max_tokens, &r->g4) != 0;
    r->g4 = (model_g4_io_t){.x = r->x, .h = r->h, .proj = r->proj, .q = r->q, .att = r->att, .gate = r->gate,
                            .up = r->up, .ids = r->ids, .pos = r->pos, .k = {r->g4.k[0], r->g4.k[1]},
                            .v = {r->g4.v[0], r->g4.v[1]}, .pli = r->g4.pli, .plc = r->g4.plc, .pg = r->g4.pg,
                            .pl = r->g4.pl, .mx = r->g4.mx, .mr = r->g4.mr, .my = r->g4.my};
  }
  if (hp->n_expert > 0 && !failed) failed = !(r->moe = model__moe_scratch_create(be, hp, cfg->max_tokens));
  r->g4.moe = r->moe; /* gemma4's MoE block */
  /* ON pads only where graphs replay: elsewhere padding would be pure cost */
  /* a hybrid's padding rows would need states of their own, and a mixture
   * of experts routes on the host mid-forward (model_moe.h: a download, which
   * a capture may not hold): both run unpadded, uncaptured */
  if (hp->full_attn_interval == 0 && hp->n_expert == 0 &&
      (cfg->graphs == MODEL_GRAPHS_PADDED || (cfg->graphs == MODEL_GRAPHS_ON && be->graph_begin))) {
    /* rows bucket: within every per-step capacity (sequences, tokens, logit rows) */
    int max_rows = cfg->max_seqs < cfg->max_tokens ? cfg->max_seqs : cfg->max_tokens;
    if (max_rows > max_logits) max_rows = max_logits;
    if (max_rows > 0 && model_graph_plan_init(&r->gp, max_rows, r->cfg.max_seq_len, cache->block_size) == 0) {
      const size_t slots = (size_t)r->gp.n_rows * r->gp.n_keys, rows = (size_t)r->gp.max_rows;
      r->graphs = xcalloc(slots, sizeof *r->graphs);
      r->graph_state = xcalloc(slots, sizeof *r->graph_state);
      r->pad_ids = xmalloc(rows * sizeof *r->pad_ids);
      r->pad_pos = xmalloc(rows * sizeof *r->pad_pos);
      r->pad_rows = xmalloc(rows * sizeof *r->pad_rows);
    }
  }
  if (failed) {
    log_error("model_runner_create: the %s backend is out of memory for the activations of %d tokens "
              "(%d logit rows)",
              be->name, cfg->max_tokens, max_logits);
    model_runner_destroy(r);
    return NULL;
  }
  return r;
}

void model_runner_destroy(model_runner_t *r) {
  if (!r) return;
  kern_backend_t *be = r->be;
  void *bufs[] = {r->ids,      r->hrows,    r->pos,      r->rows,      r->x,        r->h,
                  r->proj,     r->q,        r->k,        r->v,         r->att,      r->gate,
                  r->up,       r->xl,       r->logits,   r->samp_rows, r->samp_outs, r->samp_ops,
                  r->qg,       r->ag,       r->qkv,      r->gu,        r->gdn.mix,  r->gdn.conv,
                  r->gdn.z,    r->gdn.alpha, r->gdn.beta, r->gdn.o,    r->gdn.ba,   r->seq_rows,
                  r->seq_slots, r->seq_keep};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) be->free(be, bufs[i]);
  model__gemma4_io_free(be, &r->g4);
  for (int i = 0; r->graphs && be->graph_destroy && i < r->gp.n_rows * r->gp.n_keys; i++)
    be->graph_destroy(be, r->graphs[i]);
  free(r->graphs);
  free(r->graph_state);
  free(r->pad_ids);
  free(r->pad_pos);
  free(r->pad_rows);
  model__moe_scratch_destroy(be, r->moe);
  attn_destroy(r->attn);
  free(r);
}

void model_runner_graph_stats(const model_runner_t *r, model_graph_stats_t *out) { *out = r->gstats; }

int model_runner_max_blocks_per_seq(const model_runner_t *r) { return attn_max_blocks_per_seq(r->attn); }
const attn_t *model_runner_attn(const model_runner_t *r) { return r->attn; }
uint64_t model_runner_experts_run(const model_runner_t *r) { return r->moe ? model__moe_experts_run(r->moe) : 0; }

/* A hybrid's batch: every sequence has a slot of its own in the pool, its
 * rows are consecutive positions, and they continue the state the slot
 * holds (or start at 0: a reset). A prefix-cache hit or a rollback that
 * the recurrent state did not follow is refused here, not computed wrong. */
static int check_states(const model_runner_t *r, const model_batch_t *b) {
  const kv_state_t *st = r->cfg.state;
  const attn_batch_t *ab = b->attn;
  if (!b->state_slots) {
    log_error("model_forward: a hybrid model's batch needs state_slots");
    return -EINVAL;
  }
  for (int s = 0; s < ab->n_seqs; s++) {
    const int32_t slot = b->state_slots[s], r0 = ab->cu_seq_lens_q[s], r1 = ab->cu_seq_lens_q[s + 1];
    if (!kv_state_in_use(st, slot)) {
      log_error("model_forward: sequence %d: state slot %d is not in use", s, slot);
      return -EINVAL;
    }
    for (int t = 0; t < s; t++) {
      if (b->state_slots[t] == slot) {
        log_error("model_forward: sequences %d and %d share state slot %d", t, s, slot);
        return -EINVAL;
      }
    }
    for (int i = r0 + 1; i < r1; i++) {
      if (b->positions[i] != b->positions[r0] + (i - r0)) {
        log_error("model_forward: sequence %d: positions not consecutive at row %d", s, i);
        return -EINVAL;
      }
    }
    const int32_t keep = b->state_keep ? b->state_keep[s] : -1, first = st->n_slots + st->n_snaps;
    if (keep >= 0 && (keep < first || keep - first > st->n_keep - (r1 - r0 - 1))) {
      log_error("model_forward: sequence %d: its %d rows' kept states from %d are not in the pool's %d", s, r1 - r0,
                keep - first, st->n_keep);
      return -EINVAL;
    }
    if (r1 > r0 && b->positions[r0] != 0 && b->positions[r0] != st->n_tokens[slot]) {
      log_error("model_forward: sequence %d starts at position %d but its recurrent state holds %lld tokens", s,
                b->positions[r0], (long long)st->n_tokens[slot]);
      return -EINVAL;
    }
  }
  return 0;
}

/* A hybrid's step: resets the states of sequences starting at position 0,
 * uploads the rows and slots, records the tokens each state will hold. */
static void begin_states(model_runner_t *r, const model_batch_t *b) {
  kv_state_t *st = r->cfg.state;
  const attn_batch_t *ab = b->attn;
  for (int s = 0; s < ab->n_seqs; s++) {
    const int32_t slot = b->state_slots[s], r0 = ab->cu_seq_lens_q[s], r1 = ab->cu_seq_lens_q[s + 1];
    if (r1 == r0) continue;
    if (b->positions[r0] == 0) kv_state_reset(st, slot);
    kv_state_set_tokens(st, slot, (int64_t)b->positions[r0] + (r1 - r0));
  }
  r->be->upload(r->be, r->seq_rows, ab->cu_seq_lens_q, ((size_t)ab->n_seqs + 1) * sizeof(int32_t));
  r->be->upload(r->be, r->seq_slots, b->state_slots, (size_t)ab->n_seqs * sizeof(int32_t));
  r->gdn.args.n_seqs = ab->n_seqs;
  int keep = 0; /* a verification step keeps states after its rows */
  for (int s = 0; b->state_keep && s < ab->n_seqs; s++) keep |= b->state_keep[s] >= 0;
  if (keep) r->be->upload(r->be, r->seq_keep, b->state_keep, (size_t)ab->n_seqs * sizeof(int32_t));
  r->gdn.args.keep = keep ? r->seq_keep : NULL;
}

/* Checks what the attention does not: capacities, ids, positions, rows. */
static int check_batch(const model_runner_t *r, const model_batch_t *b) {
  const model_hparams_t *hp = &r->m->hp;
  if (b->n_tokens < 1 || b->n_tokens > r->cfg.max_tokens || b->n_logits < 0 || b->n_logits > r->cfg.max_logits) {
    log_error("model_forward: %d tokens and %d logit rows, capacities %d and %d", b->n_tokens, b->n_logits,
              r->cfg.max_tokens, r->cfg.max_logits);
    return -E2BIG;
  }
  if (b->sample && (!r->be->sample || !b->sampled)) {
    log_error("model_forward: device sampling asked of the %s backend, which has none", r->be->name);
    return -EINVAL;
  }
  if (b->sample && (b->n_sample_ops < 0 || b->n_sample_ops > r->cfg.max_sample_ops)) {
    log_error("model_forward: %d sampling ops, room for %d", b->n_sample_ops, r->cfg.max_sample_ops);
    return -E2BIG;
  }
  if (!b->attn || b->attn->n_tokens != b->n_tokens) {
    log_error("model_forward: %d tokens but the attention batch has %d", b->n_tokens, b->attn ? b->attn->n_tokens : -1);
    return -EINVAL;
  }
  for (int i = 0; i < b->n_tokens; i++) {
    if (b->tokens[i] < 0 || b->tokens[i] >= hp->n_vocab || b->positions[i] < 0) {
      log_error("model_forward: row %d: token %d (vocabulary %d), position %d", i, b->tokens[i], hp->n_vocab,
                b->positions[i]);
      return -EINVAL;
    }
  }
  if (b->n_hidden < 0 || b->n_hidden > b->n_tokens || (b->n_hidden > 0 && (!b->hidden_rows || !b->hidden))) {
    log_error("model_forward: %d hidden rows of %d tokens", b->n_hidden, b->n_tokens);
    return -EINVAL;
  }
  for (int i = 0; i < b->n_hidden; i++)
    if (b->hidden_rows[i] < 0 || b->hidden_rows[i] >= b->n_tokens) {
      log_error("model_forward: hidden row %d is %d, outside 0..%d", i, b->hidden_rows[i], b->n_tokens - 1);
      return -EINVAL;
    }
  for (int i = 0; i < b->n_logits; i++) {
    if (b->logit_rows[i] < 0 || b->logit_rows[i] >= b->n_tokens) {
      log_error("model_forward: logit row %d is %d, outside 0..%d", i, b->logit_rows[i], b->n_tokens - 1);
      return -EINVAL;
    }
  }
  return hp->full_attn_interval > 0 ? check_states(r, b) : 0;
}

/* Issues the forward's operations for T rows whose ids, positions (r->ids,
 * r->pos) and L logit rows (r->rows) are on the device, the attention step
 * begun: up to the logits of those rows in r->logits. Operations only (no
 * upload, download or sync): a graph may capture them. */
/* y = rmsnorm(x; norm) · wᵀ for T rows: one operation where the backend
 * fuses them (r->h is then not written), else the norm into r->h and the
 * matmul. */
static void normed_matmul(model_runner_t *r, float *y, const float *norm, const kern_weight_t *w, int T) {
  kern_backend_t *be = r->be;
  const model_hparams_t *hp = &r->m->hp;
  if (be->rmsnorm_matmul) {
    be->rmsnorm_matmul(be, y, r->x, norm, hp->rms_eps, w, T);
  } else {
    be->rmsnorm(be, r->h, r->x, norm, T, hp->dim, hp->rms_eps);
    be->matmul(be, y, r->h, w, T);
  }
}

/* The attention token mixer of layer l (al: its layer in the paged cache)
 * for T rows: x += attn(rmsnorm(x)) · Woᵀ. */
static int attention_mixer(model_runner_t *r, int l, int al, int T) {
  const model_t *m = r->m;
  const model_hparams_t *hp = &m->hp;
  kern_backend_t *be = r->be;
  const int dim = hp->dim;
  const model_layer_t *w = &m->layers[l];
  /* gemma: the sliding layers turn at their own base */
  const float *inv_freq = m->inv_freq_swa_dev && model_layer_window(hp, l) ? m->inv_freq_swa_dev : m->inv_freq_dev;
  const int joined = !hp->attn_out_gate && w->wqkv.rows > 0 && model__join_rows(T);
  if (!joined) be->rmsnorm(be, r->h, r->x, w->attn_norm, T, dim, hp->rms_eps);
  if (hp->attn_out_gate) { /* qwen35: [q, gate] per head */
    be->matmul(be, r->qg, r->h, &w->wq, T); /* qg [T, n_heads, 2 head_dim] */
    be->copy_cols(be, r->q, hp->head_dim, r->qg, 2 * hp->head_dim, (int64_t)T * hp->n_heads, hp->head_dim);
    be->copy_cols(be, r->ag, hp->head_dim, r->qg + hp->head_dim, 2 * hp->head_dim, (int64_t)T * hp->n_heads,
                  hp->head_dim);
    be->matmul(be, r->k, r->h, &w->wk, T); /* k [T, kv_dim] */
    be->matmul(be, r->v, r->h, &w->wv, T); /* v [T, kv_dim] */
  } else if (joined) { /* the norm and one GEMM, split (model_join.c) */
    const int64_t ld = w->wqkv.rows, qd = hp->q_dim, kvd = hp->kv_dim;
    normed_matmul(r, r->qkv, w->attn_norm, &w->wqkv, T); /* qkv [T, q_dim + 2 kv_dim] */
    be->copy_cols(be, r->q, qd, r->qkv, ld, T, qd);
    be->copy_cols(be, r->k, kvd, r->qkv + qd, ld, T, kvd);
    be->copy_cols(be, r->v, kvd, r->qkv + qd + kvd, ld, T, kvd);
  } else {
    be->matmul(be, r->q, r->h, &w->wq, T); /* q [T, q_dim] */
    be->matmul(be, r->k, r->h, &w->wk, T); /* k [T, kv_dim] */
    be->matmul(be, r->v, r->h, &w->wv, T); /* v [T, kv_dim] */
  }
  if (w->bq) {
    be->add_bias(be, r->q, w->bq, T, hp->q_dim);
    be->add_bias(be, r->k, w->bk, T, hp->kv_dim);
    be->add_bias(be, r->v, w->bv, T, hp->kv_dim);
  }
  if (w->q_norm) { /* per-head RMSNorm: rows of head_dim */
    be->rmsnorm(be, r->q, r->q, w->q_norm, T * hp->n_heads, hp->head_dim, hp->rms_eps);
    be->rmsnorm(be, r->k, r->k, w->k_norm, T * hp->n_kv_heads, hp->head_dim, hp->rms_eps);
  }
  if (model_layer_rope(hp, l)) { /* smollm3: its NoPE layers attend without positions */
    be->rope(be, r->q, r->pos, T, hp->n_heads, hp->head_dim, hp->rot_dim, inv_freq, hp->rope_neox);
    be->rope(be, r->k, r->pos, T, hp->n_kv_heads, hp->head_dim, hp->rot_dim, inv_freq, hp->rope_neox);
  }
  const int rc = attn_layer_forward(r->attn, al, r->q, r->k, r->v, r->att); /* att [T, q_dim] */
  if (rc != 0) return rc;
  if (hp->attn_out_gate) be->sigmoid_mul(be, r->att, r->att, r->ag, (int64_t)T * hp->q_dim);
  be->matmul(be, r->proj, r->att, &w->wo, T); /* proj [T, dim] */
  if (w->bo) be->add_bias(be, r->proj, w->bo, T, dim);
  if (w->post_attn_norm) be->rmsnorm(be, r->proj, r->proj, w->post_attn_norm, T, dim, hp->rms_eps);
  be->add(be, r->x, r->x, r->proj, (int64_t)T * dim);
  return 0;
}

static int issue_forward(model_runner_t *r, int T, int L) {
  const model_t *m = r->m;
  const model_hparams_t *hp = &m->hp;
  kern_backend_t *be = r->be;
  const int dim = hp->dim;
  be->embed(be, r->x, &m->tok_embd, r->ids, T); /* x [T, dim] */
  if (hp->embed_scale > 0) be->scale(be, r->x, r->x, hp->embed_scale, (int64_t)T * dim);
  if (hp->arch == MODEL_ARCH_GEMMA4) { /* its layers are model_gemma4.c's */
    const int rc = model__gemma4_layers(m, r->attn, &r->g4, T);
    if (rc != 0) return rc;
  }
  for (int l = 0, al = 0, gl = 0; l < hp->n_layers && hp->arch != MODEL_ARCH_GEMMA4; l++) {
    const model_layer_t *w = &m->layers[l];
    if (model_layer_recurrent(hp, l)) { /* hybrid: a Gated DeltaNet token mixer (model_gdn.c) */
      model__gdn_layer(m, l, gl++, r->cfg.state, &r->gdn, T);
    } else {
      const int rc = attention_mixer(r, l, al++, T);
      if (rc != 0) return rc;
    }
    /* MLP: x += (silu(h · Wgateᵀ) ⊙ h · Wupᵀ) · Wdownᵀ, h = rmsnorm(x); or the experts' */
    const int joined = !w->moe && w->w_gu.rows > 0 && model__join_rows(T);
    if (!joined) be->rmsnorm(be, r->h, r->x, w->ffn_norm, T, dim, hp->rms_eps);
    if (w->moe) {
      model__moe_forward(be, hp, w->moe, r->moe, r->proj, r->h, NULL, T); /* proj [T, dim] */
    } else if (joined) { /* the norm and one GEMM (model_join.c) */
      normed_matmul(r, r->gu, w->ffn_norm, &w->w_gu, T); /* gu [T, 2 ff_dim] = [gate, up] per row */
      be->glu_joined(be, r->gate, r->gu, T, w->w_gu.rows / 2, hp->gelu_mlp);
      be->matmul(be, r->proj, r->gate, &w->w_down, T); /* proj [T, dim] */
    } else {
      be->matmul(be, r->gate, r->h, &w->w_gate, T); /* gate [T, ff_dim] */
      be->matmul(be, r->up, r->h, &w->w_up, T);     /* up [T, ff_dim] */
      if (hp->gelu_mlp)
        be->geglu(be, r->gate, r->gate, r->up, (int64_t)T * hp->ff_dim);
      else
        be->swiglu(be, r->gate, r->gate, r->up, (int64_t)T * hp->ff_dim);
      be->matmul(be, r->proj, r->gate, &w->w_down, T); /* proj [T, dim] */
    }
    if (w->post_ffn_norm) be->rmsnorm(be, r->proj, r->proj, w->post_ffn_norm, T, dim, hp->rms_eps);
    be->add(be, r->x, r->x, r->proj, (int64_t)T * dim);
  }
  if (L == 0) return 0;
  /* logits only for the rows that need them (the norm is per row) */
  be->gather_rows(be, r->xl, r->x, r->rows, L, dim);              /* xl [L, dim] */
  be->rmsnorm(be, r->xl, r->xl, m->output_norm, L, dim, hp->rms_eps);
  be->matmul(be, r->logits, r->xl, model__output(m), L);          /* logits [L, n_vocab] */
  return 0;
}

/* The forward of a decode step padded to its bucket (model_graph.h):
 * replayed from a graph, captured first if need be, or issued. Returns 1
 * when the step is not eligible (nothing done), else 0 or an error. */
static int forward_padded(model_runner_t *r, const model_batch_t *b) {
  if (!r->gp.n_rows) return 1;
  const attn_batch_t *ab = b->attn;
  const model_graph_step_t st = {.n_seqs = ab->n_seqs, .n_tokens = ab->n_tokens,
                                 .cu_seq_lens_q = ab->cu_seq_lens_q, .max_seqlen_k = ab->max_seqlen_k};
  model_graph_key_t key;
  if (model_graph_eligible(&r->gp, &st, &key) != MODEL_GRAPH_OK) return 1;
  int rc = attn_step_begin_padded(r->attn, ab, key.rows, key.width);
  if (rc != 0) return rc;
  kern_backend_t *be = r->be;
  const int rows = key.rows;
  model_graph_pad_inputs(b->n_tokens, rows, b->tokens, b->positions, b->n_logits, b->logit_rows, r->pad_ids,
                         r->pad_pos, r->pad_rows);
  be->upload(be, r->ids, r->pad_ids, (size_t)rows * sizeof(int32_t));
  be->upload(be, r->pos, r->pad_pos, (size_t)rows * sizeof(int32_t));
  be->upload(be, r->rows, r->pad_rows, (size_t)rows * sizeof(int32_t));
  const model_graph_action_t act = model_graph_action((model_graphs_mode_t)r->cfg.graphs, be->graph_begin != NULL,
                                                      (model_graph_state_t)r->graph_state[key.slot]);
  if (act == MODEL_GRAPH_CAPTURE) {
    be->graph_begin(be);
    rc = issue_forward(r, rows, rows);
    kern_graph_t *g = be->graph_end(be);
    if (rc != 0 || !g) { /* nothing ran: the step runs uncaptured, the bucket from now on too */
      be->graph_destroy(be, g);
      r->graph_state[key.slot] = MODEL_GRAPH_FAILED;
      r->gstats.failed++;
      if (rc != 0) return rc;
      log_warn("model_forward: decode steps of %d rows and %d keys run without a graph", rows, key.keys);
      r->gstats.eager++;
      return issue_forward(r, rows, rows);
    }
    r->graphs[key.slot] = g;
    r->graph_state[key.slot] = MODEL_GRAPH_READY;
    r->gstats.captured++;
  }
  if (act == MODEL_GRAPH_EAGER || act == MODEL_GRAPH_WARM_UP) {
    if (act == MODEL_GRAPH_WARM_UP) r->graph_state[key.slot] = MODEL_GRAPH_WARM;
    r->gstats.eager++;
    return issue_forward(r, rows, rows);
  }
  be->graph_launch(be, r->graphs[key.slot]);
  r->gstats.replayed++;
  return 0;
}

int model_forward(model_runner_t *r, const model_batch_t *b, float *logits) {
  int rc = check_batch(r, b);
  if (rc != 0) return rc;
  const model_t *m = r->m;
  const model_hparams_t *hp = &m->hp;
  kern_backend_t *be = r->be;
  const int T = b->n_tokens, L = b->n_logits;
  rc = forward_padded(r, b);
  if (rc == 1) { /* not a padded step: the kernels of these T rows */
    rc = attn_step_begin(r->attn, b->attn);
    if (rc != 0) return rc;
    if (hp->full_attn_interval > 0) begin_states(r, b);
    be->upload(be, r->ids, b->tokens, (size_t)T * sizeof(int32_t));
    be->upload(be, r->pos, b->positions, (size_t)T * sizeof(int32_t));
    if (L > 0) be->upload(be, r->rows, b->logit_rows, (size_t)L * sizeof(int32_t));
    rc = issue_forward(r, T, L);
  }
  if (rc != 0) return rc;
  if (b->n_hidden > 0) { /* embeddings: after the layers, so a padded or replayed step gives them too */
    const int H = b->n_hidden, dim = hp->dim;
    be->upload(be, r->hrows, b->hidden_rows, (size_t)H * sizeof(int32_t));
    be->gather_rows(be, r->h, r->x, r->hrows, H, dim); /* h [H, dim]: free scratch once the layers ran */
    be->rmsnorm(be, r->h, r->h, m->output_norm, H, dim, hp->rms_eps);
    be->download(be, b->hidden, r->h, (size_t)H * dim * sizeof(float));
  }
  if (L == 0) {
    be->sync(be);
    return 0;
  }
  /* the first L rows of r->logits are the step's logit rows (padded: after them, padding) */
  assert(!b->sample || hp->final_softcap == 0); /* the engine samples such models on the host */
  if (!b->sample) {
    be->download(be, logits, r->logits, (size_t)L * hp->n_vocab * sizeof(float));
    if (hp->final_softcap > 0) { /* gemma2: on the host, element-wise */
      const float cap = hp->final_softcap;
      for (size_t i = 0; i < (size_t)L * hp->n_vocab; i++) logits[i] = cap * tanhf(logits[i] / cap);
    }
    return 0;
  }
  const size_t row_bytes = (size_t)hp->n_vocab * sizeof(float);
  be->upload(be, r->samp_rows, b->sample, (size_t)L * sizeof *b->sample);
  be->upload(be, r->samp_ops, b->sample_ops, (size_t)b->n_sample_ops * sizeof *b->sample_ops);
  be->sample(be, r->samp_outs, r->logits, r->samp_rows, r->samp_ops, L, hp->n_vocab);
  for (int i = 0; i < L;) { /* the rows left to the host, in runs */
    int j = i;
    while (j < L && !b->sample[j].on_device) j++;
    if (j > i) be->download(be, (char *)logits + (size_t)i * row_bytes, (char *)r->logits + (size_t)i * row_bytes,
                            (size_t)(j - i) * row_bytes);
    i = j > i ? j : i + 1;
  }
  be->download(be, b->sampled, r->samp_outs, (size_t)L * sizeof *r->samp_outs);
  return 0;
}
