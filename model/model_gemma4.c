/* model/model_gemma4.c — Gemma 4's text model (see model.h): its tensors
 * (as llama.cpp names them; its keys: model_gemma_hparams.c) and the
 * forward of its layers, as transformers' modeling_gemma4.py defines them
 * (5.23):
 *
 *   x = embed(ids) · sqrt(dim)
 *   per-layer inputs (ple_dim P > 0), [T, n_layers, P]:
 *     pli = (rmsnorm_P(x · per_layer_model_projᵀ · dim^-½) · per_layer_proj_norm
 *            + per_layer_token_embd[ids] · sqrt(P)) · 2^-½
 *   per layer l (head_dim, KV heads and MLP width of its own: model.h):
 *     h = rmsnorm(x) · attn_norm
 *     q = rope(rmsnorm_head(h · Wqᵀ) · q_norm)
 *     a layer that owns K/V: k = rope(rmsnorm_head(h · Wkᵀ) · k_norm),
 *       v = rmsnorm_head(h · Wvᵀ) (no weight), on a layer without attn_v
 *       (k_eq_v's full layers) v = rmsnorm_head(h · Wkᵀ); written to its
 *       cache layer;
 *     a KV-shared layer: the K/V of the last owning layer of its type,
 *       attended through that layer's cache (written again with the same
 *       values: the attention writes what it is given, bit for bit);
 *     x += rmsnorm(attn(q, k, v) · Woᵀ) · post_attention_norm   (scores · 1)
 *     x += rmsnorm(m) · post_ffw_norm, m = geglu(h · Wgateᵀ, h · Wupᵀ) · Wdownᵀ,
 *          h = rmsnorm(x) · ffn_norm; with the MoE block (a layer with
 *          ffn_gate_inp: the 26B-A4B's), m = rmsnorm(m) · post_ffw_norm_1
 *          + rmsnorm(moe(rmsnorm(x) · pre_ffw_norm_2)) · post_ffw_norm_2,
 *          the router reading rmsnorm(x) · ffn_gate_inp.scale · dim^-½
 *          (model_moe.h)
 *     x += rmsnorm(geglu(x · inp_gateᵀ, pli[:, l]) · projᵀ) · post_norm
 *     x *= layer_output_scale
 *   RoPE by layer type, rotate_half over the whole head: the sliding
 *   layers' at rope_base; the full layers' at rope_base_full, frequency i
 *   base^(-2i / head_dim_full) / rope_freqs[i] ("proportional": divisors
 *   of 1e30 for the pairs that do not turn, as llama.cpp's converter
 *   writes them).
 * Norm weights multiply as stored (Gemma 4's RMSNorm has no 1 + w). The
 * logits (final norm, tied output, soft-cap) are the runner's. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "model/model_internal.h"

static int is_full(const model_hparams_t *hp, int l) { return hp->swa_pattern > 0 && (l + 1) % hp->swa_pattern == 0; }

static int first_shared(const model_hparams_t *hp) { return hp->n_layers - hp->n_kv_shared; }

int model_layer_head_dim(const model_hparams_t *hp, int l) {
  return hp->head_dim_full > 0 && is_full(hp, l) ? hp->head_dim_full : hp->head_dim;
}

int model_layer_kv_heads(const model_hparams_t *hp, int l) {
  return hp->head_dim_full > 0 && is_full(hp, l) ? hp->n_kv_heads_full : hp->n_kv_heads;
}

int model_layer_ff_dim(const model_hparams_t *hp, int l) {
  return hp->n_kv_shared > 0 && l >= first_shared(hp) ? hp->ff_dim_shared : hp->ff_dim;
}

int model_layer_cache_layer(const model_hparams_t *hp, int l) {
  if (hp->n_kv_shared > 0 && l >= first_shared(hp)) { /* the last owner of its type */
    for (int j = first_shared(hp) - 1; j >= 0; j--)
      if (is_full(hp, j) == is_full(hp, l)) return j;
    return -1;
  }
  int al = 0; /* its index among the attention layers */
  for (int j = 0; j < l; j++) al += !model_layer_recurrent(hp, j);
  return al;
}

/* The full layers' RoPE frequencies: base^(-2i / head_dim_full) divided by
 * rope_freqs.weight[i] (required when a layer is full, as llama.cpp
 * requires it), into m->inv_freq_full. */
static int full_rope(loader_t *ld) {
  model_t *m = ld->m;
  const model_hparams_t *hp = &m->hp;
  const int half = hp->head_dim_full / 2;
  float *div = xmalloc((size_t)half * sizeof *div);
  for (int i = 0; i < half; i++) div[i] = 1.0f;
  int rc = model__load_host(ld, "rope_freqs.weight", half, div, hp->swa_pattern > 0);
  m->inv_freq_full = xmalloc((size_t)half * sizeof *m->inv_freq_full);
  for (int i = 0; rc == 0 && i < half; i++) {
    if (!(div[i] > 0) || !isfinite(div[i])) {
      snprintf(ld->err, ld->err_len, "tensor 'rope_freqs.weight': element %d is %g, not a positive finite divisor",
               i, div[i]);
      rc = -EINVAL;
    }
    m->inv_freq_full[i] = (float)(1.0 / pow((double)hp->rope_base_full, 2.0 * i / hp->head_dim_full) / div[i]);
  }
  free(div);
  return rc;
}

int model__gemma4_load_globals(loader_t *ld) {
  model_t *m = ld->m;
  const model_hparams_t *hp = &m->hp;
  const int64_t P = hp->ple_dim, LP = (int64_t)hp->n_layers * P;
  int rc = full_rope(ld);
  if (rc != 0 || P == 0) return rc;
  m->pl_embd.lazy = 1; /* read by the embedding lookup alone (from the view): no copy for matmuls (kern.h) */
  rc = model__load_matrix(ld, "per_layer_token_embd.weight", hp->n_vocab, LP, &m->pl_embd);
  if (rc == 0) rc = model__load_matrix(ld, "per_layer_model_proj.weight", LP, hp->dim, &m->pl_proj);
  if (rc == 0) rc = model__load_vector(ld, "per_layer_proj_norm.weight", P, &m->pl_proj_norm, 1);
  /* a token reads one row of the per-layer table */
  if (rc == 0) m->step_bytes -= (hp->n_vocab - 1) * kern_type_row_bytes(m->pl_embd.type, LP);
  return rc;
}

/* Layer l (an owner of its K/V) has no `name` (its attn_v): allowed on a
 * full layer alone. */
static int k_eq_v_allowed(loader_t *ld, int l, const char *name) {
  if (is_full(&ld->m->hp, l)) return 0;
  snprintf(ld->err, ld->err_len, "tensor '%s' is missing: layer %d is a sliding-window layer, and only the "
           "full-attention layers may use K as V (attention_k_eq_v)", name, l);
  return -EINVAL;
}

int model__gemma4_load_layer(loader_t *ld, int l) {
  const model_hparams_t *hp = &ld->m->hp;
  model_layer_t *L = &ld->m->layers[l];
  const int64_t hd = model_layer_head_dim(hp, l), q = (int64_t)hp->n_heads * hd;
  const int64_t kv = model_layer_kv_heads(hp, l) * hd, ff = model_layer_ff_dim(hp, l), dim = hp->dim;
  const int owner = l < first_shared(hp);
  char name[64];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, l), name)
  int rc = model__load_vector(ld, NAME("attn_norm.weight"), dim, &L->attn_norm, 1);
  if (rc == 0) rc = model__load_matrix(ld, NAME("attn_q.weight"), q, dim, &L->wq);
  if (rc == 0) rc = model__load_vector(ld, NAME("attn_q_norm.weight"), hd, &L->q_norm, 1);
  if (rc == 0 && owner) rc = model__load_matrix(ld, NAME("attn_k.weight"), kv, dim, &L->wk);
  if (rc == 0 && owner) rc = model__load_vector(ld, NAME("attn_k_norm.weight"), hd, &L->k_norm, 1);
  /* without attn_v, V is the K projection: attention_k_eq_v, which transformers applies to the full layers
   * alone (use_alternative_attention = attention_k_eq_v and not is_sliding; llama.cpp's loader takes any
   * layer without it), so a sliding layer without it is a malformed file */
  if (rc == 0 && owner) {
    if (gguf_find_tensor(ld->m->gguf, NAME("attn_v.weight")))
      rc = model__load_matrix(ld, name, kv, dim, &L->wv);
    else
      rc = k_eq_v_allowed(ld, l, name);
  }
  if (rc == 0) rc = model__load_matrix(ld, NAME("attn_output.weight"), dim, q, &L->wo);
  if (rc == 0) rc = model__load_vector(ld, NAME("post_attention_norm.weight"), dim, &L->post_attn_norm, 1);
  if (rc == 0) rc = model__load_vector(ld, NAME("ffn_norm.weight"), dim, &L->ffn_norm, 1);
  if (rc == 0) rc = model__load_matrix(ld, NAME("ffn_gate.weight"), ff, dim, &L->w_gate);
  if (rc == 0) rc = model__load_matrix(ld, NAME("ffn_up.weight"), ff, dim, &L->w_up);
  if (rc == 0) rc = model__load_matrix(ld, NAME("ffn_down.weight"), dim, ff, &L->w_down);
  if (rc == 0) rc = model__load_vector(ld, NAME("post_ffw_norm.weight"), dim, &L->post_ffn_norm, 1);
  /* the MoE block, where the layer has a router (as llama.cpp decides it) */
  if (rc == 0 && gguf_find_tensor(ld->m->gguf, NAME("ffn_gate_inp.weight"))) {
    if (hp->n_expert == 0) {
      snprintf(ld->err, ld->err_len, "tensor '%s': a router, but no experts (key 'gemma4.expert_count')", name);
      return -EINVAL;
    }
    rc = model__load_moe(ld, l);
    if (rc == 0) rc = model__load_vector(ld, NAME("pre_ffw_norm_2.weight"), dim, &L->moe_pre_norm, 1);
    if (rc == 0) rc = model__load_vector(ld, NAME("post_ffw_norm_1.weight"), dim, &L->mlp_post_norm, 1);
    if (rc == 0) rc = model__load_vector(ld, NAME("post_ffw_norm_2.weight"), dim, &L->moe_post_norm, 1);
  }
  if (rc == 0 && hp->ple_dim > 0) {
    rc = model__load_matrix(ld, NAME("inp_gate.weight"), hp->ple_dim, dim, &L->w_pl_gate);
    if (rc == 0) rc = model__load_matrix(ld, NAME("proj.weight"), dim, hp->ple_dim, &L->w_pl_proj);
    if (rc == 0) rc = model__load_vector(ld, NAME("post_norm.weight"), dim, &L->pl_norm, 1);
  }
  L->layer_scale = 1.0f; /* optional, as llama.cpp reads it */
  if (rc == 0) rc = model__load_host(ld, NAME("layer_output_scale.weight"), 1, &L->layer_scale, 0);
#undef NAME
  return rc;
}

int model__gemma4_extras(model_t *m, char *err, size_t err_len) {
  kern_backend_t *be = m->be;
  const model_hparams_t *hp = &m->hp;
  const int half = hp->head_dim_full / 2, hd = hp->head_dim > hp->head_dim_full ? hp->head_dim : hp->head_dim_full;
  float *host = xcalloc((size_t)hd, sizeof *host);
  m->inv_freq_full_dev = be->alloc(be, (size_t)half * sizeof(float));
  if (m->inv_freq_full_dev) be->upload(be, m->inv_freq_full_dev, m->inv_freq_full, (size_t)half * sizeof(float));
  for (int i = 0; i < hd; i++) host[i] = 1.0f;
  m->ones = be->alloc(be, (size_t)hd * sizeof(float));
  if (m->ones) be->upload(be, m->ones, host, (size_t)hd * sizeof(float));
  free(host);
  if (!m->inv_freq_full_dev || !m->ones) {
    snprintf(err, err_len, "the %s backend is out of memory", be->name);
    return -ENOMEM;
  }
  m->cache_kv_heads = xmalloc((size_t)hp->n_attn_layers * sizeof *m->cache_kv_heads);
  m->cache_head_dim = xmalloc((size_t)hp->n_attn_layers * sizeof *m->cache_head_dim);
  for (int l = 0; l < hp->n_attn_layers; l++) { /* the owners: layers 0 .. n_attn_layers - 1 */
    m->cache_kv_heads[l] = model_layer_kv_heads(hp, l);
    m->cache_head_dim[l] = model_layer_head_dim(hp, l);
  }
  return 0;
}

void model__gemma4_free(model_t *m) {
  kern_backend_t *be = m->be;
  if (m->pl_embd.rows > 0) be->weight_release(be, &m->pl_embd);
  if (m->pl_proj.rows > 0) be->weight_release(be, &m->pl_proj);
  be->free(be, m->pl_proj_norm);
  be->free(be, m->inv_freq_full_dev);
  free(m->inv_freq_full);
  be->free(be, m->ones);
  free(m->cache_kv_heads);
  free(m->cache_head_dim);
}

int model__gemma4_io_alloc(kern_backend_t *be, const model_hparams_t *hp, int T, model_g4_io_t *io) {
  const size_t t = (size_t)T, f = sizeof(float), lp = (size_t)hp->n_layers * hp->ple_dim;
  const size_t kv[2] = {(size_t)hp->n_kv_heads * hp->head_dim, (size_t)hp->n_kv_heads_full * hp->head_dim_full};
  int failed = 0;
#define ALLOC(ptr, bytes) (failed |= !((ptr) = be->alloc(be, (bytes))))
  for (int i = 0; i < 2; i++) {
    ALLOC(io->k[i], t * kv[i] * f);
    ALLOC(io->v[i], t * kv[i] * f);
  }
  if (hp->n_expert > 0) {
    ALLOC(io->mx, t * (size_t)hp->dim * f);
    ALLOC(io->mr, t * (size_t)hp->dim * f);
    ALLOC(io->my, t * (size_t)hp->dim * f);
  }
  if (lp > 0) {
    ALLOC(io->pli, t * lp * f);
    ALLOC(io->plc, t * lp * f);
    ALLOC(io->pg, t * hp->ple_dim * f);
    ALLOC(io->pl, t * hp->ple_dim * f);
  }
#undef ALLOC
  return failed ? -ENOMEM : 0;
}

void model__gemma4_io_free(kern_backend_t *be, model_g4_io_t *io) {
  void *bufs[] = {io->k[0], io->k[1], io->v[0], io->v[1], io->pli, io->plc, io->pg, io->pl, io->mx, io->mr, io->my};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) be->free(be, bufs[i]);
}

/* The per-layer inputs of T rows into io->pli (x: the scaled embedding). */
static void per_layer_inputs(const model_t *m, kern_backend_t *be, model_g4_io_t *io, int T) {
  const model_hparams_t *hp = &m->hp;
  const int P = hp->ple_dim;
  const int64_t n = (int64_t)T * hp->n_layers * P;
  be->embed(be, io->pli, &m->pl_embd, io->ids, T); /* [T, n_layers P] */
  be->scale(be, io->pli, io->pli, sqrtf((float)P), n);
  be->matmul(be, io->plc, io->x, &m->pl_proj, T);
  be->scale(be, io->plc, io->plc, (float)(1.0 / sqrt((double)hp->dim)), n);
  be->rmsnorm(be, io->plc, io->plc, m->pl_proj_norm, T * hp->n_layers, P, hp->rms_eps);
  be->add(be, io->pli, io->pli, io->plc, n);
  be->scale(be, io->pli, io->pli, (float)(1.0 / sqrt(2.0)), n);
}

/* Layer l's attention: x += rmsnorm(attn · Woᵀ) · post_attention_norm. */
static int attention(const model_t *m, kern_backend_t *be, attn_t *attn, model_g4_io_t *io, int l, int T) {
  const model_hparams_t *hp = &m->hp;
  const model_layer_t *w = &m->layers[l];
  const int full = is_full(hp, l), hd = model_layer_head_dim(hp, l), nkv = model_layer_kv_heads(hp, l);
  const float *inv_freq = full ? m->inv_freq_full_dev : m->inv_freq_dev;
  float *k = io->k[full], *v = io->v[full];
  be->rmsnorm(be, io->h, io->x, w->attn_norm, T, hp->dim, hp->rms_eps);
  be->matmul(be, io->q, io->h, &w->wq, T); /* [T, n_heads, hd] */
  be->rmsnorm(be, io->q, io->q, w->q_norm, T * hp->n_heads, hd, hp->rms_eps);
  be->rope(be, io->q, io->pos, T, hp->n_heads, hd, hd, inv_freq, 1);
  if (l < first_shared(hp)) { /* an owner: this step's K/V, kept for the shared layers of its type */
    be->matmul(be, k, io->h, &w->wk, T); /* [T, nkv, hd] */
    if (w->wv.rows > 0)
      be->matmul(be, v, io->h, &w->wv, T);
    else /* k_eq_v: the raw K projection */
      be->copy(be, v, k, (size_t)T * nkv * hd * sizeof(float));
    be->rmsnorm(be, k, k, w->k_norm, T * nkv, hd, hp->rms_eps);
    be->rope(be, k, io->pos, T, nkv, hd, hd, inv_freq, 1);
    be->rmsnorm(be, v, v, m->ones, T * nkv, hd, hp->rms_eps);
  }
  const int rc = attn_layer_forward(attn, model_layer_cache_layer(hp, l), io->q, k, v, io->att);
  if (rc != 0) return rc;
  be->matmul(be, io->proj, io->att, &w->wo, T);
  be->rmsnorm(be, io->proj, io->proj, w->post_attn_norm, T, hp->dim, hp->rms_eps);
  be->add(be, io->x, io->x, io->proj, (int64_t)T * hp->dim);
  return 0;
}

int model__gemma4_layers(const model_t *m, attn_t *attn, model_g4_io_t *io, int T) {
  const model_hparams_t *hp = &m->hp;
  kern_backend_t *be = m->be;
  const int dim = hp->dim, P = hp->ple_dim;
  const int64_t n = (int64_t)T * dim;
  if (P > 0) per_layer_inputs(m, be, io, T);
  for (int l = 0; l < hp->n_layers; l++) {
    const model_layer_t *w = &m->layers[l];
    const int rc = attention(m, be, attn, io, l, T);
    if (rc != 0) return rc;
    const int64_t ff = (int64_t)T * model_layer_ff_dim(hp, l);
    be->rmsnorm(be, io->h, io->x, w->ffn_norm, T, dim, hp->rms_eps);
    be->matmul(be, io->gate, io->h, &w->w_gate, T);
    be->matmul(be, io->up, io->h, &w->w_up, T);
    be->geglu(be, io->gate, io->gate, io->up, ff);
    be->matmul(be, io->proj, io->gate, &w->w_down, T);
    if (w->moe) { /* the MoE block beside the MLP, both reading the residual stream x */
      be->rmsnorm(be, io->proj, io->proj, w->mlp_post_norm, T, dim, hp->rms_eps);
      be->rmsnorm(be, io->mx, io->x, w->moe_pre_norm, T, dim, hp->rms_eps);
      be->rmsnorm(be, io->mr, io->x, w->moe->router_norm, T, dim, hp->rms_eps);
      model__moe_forward(be, hp, w->moe, io->moe, io->my, io->mx, io->mr, T);
      be->rmsnorm(be, io->my, io->my, w->moe_post_norm, T, dim, hp->rms_eps);
      be->add(be, io->proj, io->proj, io->my, n);
    }
    be->rmsnorm(be, io->proj, io->proj, w->post_ffn_norm, T, dim, hp->rms_eps);
    be->add(be, io->x, io->x, io->proj, n);
    if (P > 0) { /* the per-layer input, gated by the stream */
      be->matmul(be, io->pg, io->x, &w->w_pl_gate, T); /* [T, P] */
      be->copy_cols(be, io->pl, P, io->pli + (int64_t)l * P, (int64_t)hp->n_layers * P, T, P);
      be->geglu(be, io->pg, io->pg, io->pl, (int64_t)T * P);
      be->matmul(be, io->proj, io->pg, &w->w_pl_proj, T);
      be->rmsnorm(be, io->proj, io->proj, w->pl_norm, T, dim, hp->rms_eps);
      be->add(be, io->x, io->x, io->proj, n);
    }
    if (w->layer_scale != 1.0f) be->scale(be, io->x, io->x, w->layer_scale, n);
  }
  return 0;
}
