/* model/model_load.c — model_load: the GGUF file's tensors checked against
 * the hyper-parameters and prepared on the backend (see model.h). The
 * tokenizer and the chat template in the same file are text/'s to read.
 * Which tensors each layer has, by family, is model_layers.c's (its
 * opening comment lists their names and shapes); this file finds and
 * checks each one, quantizes it under --quantize, prepares it on the
 * backend, and frees the whole model.
 * Any other tensor is an error: a weight tram would silently ignore means
 * the file is not the architecture tram runs. */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/alloc.h"
#include "hf/hf.h"
#include "kernels/kern_quant.h"
#include "model/model_internal.h"

static void shape_str(const gguf_tensor_t *t, char *buf, size_t len) {
  int k = snprintf(buf, len, "[%lld", (long long)t->ne[0]);
  for (uint32_t d = 1; d < t->n_dims && k > 0 && (size_t)k < len; d++)
    k += snprintf(buf + k, len - (size_t)k, ", %lld", (long long)t->ne[d]);
  if (k > 0 && (size_t)k < len) snprintf(buf + k, len - (size_t)k, "]");
}

/* The tensor `name` of shape [ne0] (ne1 == 0), [ne0, ne1] (ne2 == 0) or
 * [ne0, ne1, ne2] (stacked experts), recorded as used. NULL when absent (an
 * error if required) or of another shape (an error; *bad set). */
static const gguf_tensor_t *find3(loader_t *ld, const char *name, int64_t ne0, int64_t ne1, int64_t ne2, int required,
                                  int *bad) {
  const gguf_tensor_t *t = gguf_find_tensor(ld->m->gguf, name);
  if (!t) {
    if (required) {
      snprintf(ld->err, ld->err_len, "tensor '%s' is missing", name);
      *bad = 1;
    }
    return NULL;
  }
  const int64_t rows = ne1 ? ne1 : 1;
  if (t->ne[0] != ne0 || t->ne[1] != rows || t->ne[2] != (ne2 ? ne2 : 1) || t->ne[3] != 1) {
    char got[96];
    shape_str(t, got, sizeof got);
    if (ne2)
      snprintf(ld->err, ld->err_len, "tensor '%s' has shape %s, the hyper-parameters need [%lld, %lld, %lld]", name,
               got, (long long)ne0, (long long)ne1, (long long)ne2);
    else if (ne1)
      snprintf(ld->err, ld->err_len, "tensor '%s' has shape %s, the hyper-parameters need [%lld, %lld]", name, got,
               (long long)ne0, (long long)ne1);
    else
      snprintf(ld->err, ld->err_len, "tensor '%s' has shape %s, the hyper-parameters need [%lld]", name, got,
               (long long)ne0);
    *bad = 1;
    return NULL;
  }
  for (size_t i = 0; i < ld->n_used; i++)
    if (ld->used[i] == t) return t; /* a fused tensor, found again for its next slice */
  xgrow(&ld->used, &ld->cap, ld->n_used + 1, sizeof *ld->used, 64);
  ld->used[ld->n_used++] = t;
  return t;
}

static const gguf_tensor_t *find(loader_t *ld, const char *name, int64_t ne0, int64_t ne1, int required, int *bad) {
  return find3(ld, name, ne0, ne1, 0, required, bad);
}

/* The type --quantize gives the matrix `name` of `type` with rows of
 * `cols`, or `type` when it stays as stored. The output projection
 * (output.weight, or token_embd.weight when tied) goes to Q8_0 under a
 * 4-bit target, as llama.cpp keeps it at Q6_K: at 4 bits it alone costs
 * most of the accuracy (docs/models.md). */
static kern_type_t quant_target(const model_t *m, const char *name, kern_type_t type, int64_t cols) {
  kern_type_t to = m->quantize;
  if (to == KERN_F32 || (type != KERN_F32 && type != KERN_F16 && type != KERN_BF16)) return type;
  if (strstr(name, ".ffn_gate_inp")) return type; /* routers stay exact, as llama.cpp keeps them: a choice of experts */
  const int output = strcmp(name, "output.weight") == 0 || (m->hp.tied_output && strcmp(name, "token_embd.weight") == 0);
  if (output && to != KERN_Q8_0) to = KERN_Q8_0;
  return kern_type_row_bytes(to, cols) > 0 ? to : type;
}

/* rows × cols of `type` at src quantized to `to` into a new buffer the
 * model owns. */
static const void *quantized(model_t *m, kern_type_t to, kern_type_t type, const void *src, int64_t rows,
                             int64_t cols) {
  void *q = xmalloc((size_t)(rows * kern_type_row_bytes(to, cols)));
  const int rc = kern_quantize_rows(to, q, type, src, rows, cols);
  assert(rc == 0); /* quant_target() checked the types and the blocks */
  (void)rc;
  xgrow(&m->quant_bufs, &m->quant_bufs_cap, m->n_quant_bufs + 1, sizeof *m->quant_bufs, 64);
  m->quant_bufs[m->n_quant_bufs++] = q;
  m->n_quantized++;
  return q;
}

/* Rows [row0, row0 + rows) of the weight matrix `name` of total_rows ×
 * cols, prepared on the backend (a view of one part of a fused matrix:
 * phi3's attn_qkv and ffn_up). 0 or -EINVAL. */
static int prepare(loader_t *ld, const char *name, kern_type_t type, const void *data, int64_t rows, int64_t cols,
                   kern_weight_t *w);

static int load_rows(loader_t *ld, const char *name, int64_t total_rows, int64_t cols, int64_t row0, int64_t rows,
                     kern_weight_t *w) {
  int bad = 0;
  const gguf_tensor_t *t = find(ld, name, cols, total_rows, 1, &bad);
  if (!t) return -EINVAL;
  const kern_type_t type = (kern_type_t)t->type;
  const int64_t row_bytes = kern_type_row_bytes(type, cols);
  const int rc = prepare(ld, name, type, row_bytes > 0 ? (const char *)t->data + row0 * row_bytes : NULL, rows, cols, w);
  if (rc == 0) ld->m->step_bytes += rows * kern_type_row_bytes(w->type, cols);
  return rc;
}

/* rows × cols of `type` at data (the GGUF layout; NULL: a type without a
 * row size) prepared on the backend as w, quantized first under
 * --quantize. 0 or -EINVAL. */
static int prepare(loader_t *ld, const char *name, kern_type_t type, const void *data, int64_t rows, int64_t cols,
                   kern_weight_t *w) {
  kern_backend_t *be = ld->m->be;
  const kern_type_t to = quant_target(ld->m, name, type, cols);
  if (data && to != type) {
    data = quantized(ld->m, to, type, data, rows, cols);
    type = to;
  }
  int rc = data ? be->weight_init(be, w, type, rows, cols, data) : -EINVAL;
  if (rc != 0) {
    memset(w, 0, sizeof *w);
    const char *tname = kern_type_name(type);
    snprintf(ld->err, ld->err_len, "tensor '%s': the %s backend cannot use a %s weight of %lld x %lld (%s)", name,
             be->name, tname ? tname : "?", (long long)rows, (long long)cols, strerror(-rc));
    return -EINVAL;
  }
  return 0;
}

/* A weight matrix of rows × cols, prepared on the backend. 0 or -EINVAL. */
static int load_matrix(loader_t *ld, const char *name, int64_t rows, int64_t cols, kern_weight_t *w) {
  return load_rows(ld, name, rows, cols, 0, rows, w);
}

/* An F32 tensor of [ne0] (ne1 == 0) or [ne0, ne1] copied into a new
 * device buffer (*dst). A missing optional one leaves *dst NULL. 0 or
 * -EINVAL (or -ENOMEM). */
static int load_f32(loader_t *ld, const char *name, int64_t ne0, int64_t ne1, float **dst, int required) {
  int bad = 0;
  const gguf_tensor_t *t = find(ld, name, ne0, ne1, required, &bad);
  if (!t) return bad ? -EINVAL : 0;
  if (t->type != KERN_F32) {
    const char *type = kern_type_name(t->type);
    snprintf(ld->err, ld->err_len, "tensor '%s' has type %s; norm weights and biases must be F32", name,
             type ? type : "?");
    return -EINVAL;
  }
  kern_backend_t *be = ld->m->be;
  const size_t n = (size_t)ne0 * (size_t)(ne1 ? ne1 : 1);
  *dst = be->alloc(be, n * sizeof(float));
  if (!*dst) {
    snprintf(ld->err, ld->err_len, "tensor '%s': the %s backend is out of memory", name, be->name);
    return -ENOMEM;
  }
  be->upload(be, *dst, t->data, n * sizeof(float));
  return 0;
}

/* An F32 vector of n elements (load_f32). */
static int load_vector(loader_t *ld, const char *name, int64_t n, float **dst, int required) {
  return load_f32(ld, name, n, 0, dst, required);
}

const gguf_tensor_t *model__find3(loader_t *ld, const char *name, int64_t ne0, int64_t ne1, int64_t ne2,
                                  int required, int *bad) {
  return find3(ld, name, ne0, ne1, ne2, required, bad);
}

int model__prepare(loader_t *ld, const char *name, kern_type_t type, const void *data, int64_t rows, int64_t cols,
                   kern_weight_t *w) {
  return prepare(ld, name, type, data, rows, cols, w);
}

int model__load_rows(loader_t *ld, const char *name, int64_t total_rows, int64_t cols, int64_t row0, int64_t rows,
                     kern_weight_t *w) {
  return load_rows(ld, name, total_rows, cols, row0, rows, w);
}

int model__load_f32(loader_t *ld, const char *name, int64_t ne0, int64_t ne1, float **dst, int required) {
  return load_f32(ld, name, ne0, ne1, dst, required);
}

int model__load_matrix(loader_t *ld, const char *name, int64_t rows, int64_t cols, kern_weight_t *w) {
  return load_matrix(ld, name, rows, cols, w);
}

int model__load_vector(loader_t *ld, const char *name, int64_t n, float **dst, int required) {
  return load_vector(ld, name, n, dst, required);
}

int model__load_host(loader_t *ld, const char *name, int64_t n, float *out, int required) {
  int bad = 0;
  const gguf_tensor_t *t = find(ld, name, n, 0, required, &bad);
  if (t && t->type != KERN_F32) {
    snprintf(ld->err, ld->err_len, "tensor '%s' is not F32", name);
    return -EINVAL;
  }
  if (t) memcpy(out, t->data, (size_t)n * sizeof *out);
  return bad ? -EINVAL : 0;
}

int model__load_scalar(loader_t *ld, const char *name, float *out) { return model__load_host(ld, name, 1, out, 1); }

/* Every tensor of the file must have been used. */
static int check_all_used(loader_t *ld) {
  const gguf_ctx_t *g = ld->m->gguf;
  const uint64_t n = gguf_tensor_count(g);
  if ((uint64_t)ld->n_used == n) return 0;
  for (uint64_t i = 0; i < n; i++) {
    const gguf_tensor_t *t = gguf_tensor_at(g, i);
    size_t j = 0;
    while (j < ld->n_used && ld->used[j] != t) j++;
    if (j == ld->n_used) {
      snprintf(ld->err, ld->err_len, "tensor '%.*s' is not part of the %s architecture as tram runs it",
               (int)t->name.len, t->name.ptr, model_arch_name(ld->m->hp.arch));
      return -EINVAL;
    }
  }
  return 0;
}

static int load_tensors(loader_t *ld) {
  model_t *m = ld->m;
  const model_hparams_t *hp = &m->hp;
  int bad = 0;
  /* untied, token_embd is read by the embedding lookup alone (from the
   * file's view): lazy, so no backend copy for matmuls is made (kern.h) */
  m->tok_embd.lazy = !hp->tied_output;
  int rc = load_matrix(ld, "token_embd.weight", hp->n_vocab, hp->dim, &m->tok_embd);
  if (rc == 0) rc = load_vector(ld, "output_norm.weight", hp->dim, &m->output_norm, 1);
  if (rc == 0 && !hp->tied_output) rc = load_matrix(ld, "output.weight", hp->n_vocab, hp->dim, &m->output);
  if (rc == 0 && hp->rope_longrope) {
    rc = find(ld, "rope_factors_long.weight", hp->rot_dim / 2, 0, 1, &bad) ? 0 : -EINVAL;
    if (rc == 0) rc = find(ld, "rope_factors_short.weight", hp->rot_dim / 2, 0, 1, &bad) ? 0 : -EINVAL;
  } else if (rc == 0 && hp->rope_scaling == MODEL_ROPE_SCALING_FREQ_TENSOR) {
    rc = find(ld, "rope_freqs.weight", hp->rot_dim / 2, 0, 1, &bad) ? 0 : -EINVAL;
  }
  if (rc != 0) return rc;
  /* token_embd counts once as the output of a tied model; a decode step
   * reads one embedding row of it */
  if (!hp->tied_output) m->step_bytes -= hp->n_vocab * kern_type_row_bytes(m->tok_embd.type, hp->dim);
  m->step_bytes += kern_type_row_bytes(m->tok_embd.type, hp->dim);
  if (hp->arch == MODEL_ARCH_GEMMA4) rc = model__gemma4_load_globals(ld);
  if (rc != 0) return rc;
  m->layers = xcalloc((size_t)hp->n_layers, sizeof *m->layers);
  for (int l = 0; l < hp->n_layers && rc == 0; l++) rc = model__load_layer(ld, l);
  return rc == 0 ? check_all_used(ld) : rc;
}

/* The RoPE frequencies on the device. */
static int load_extras(model_t *m, char *err, size_t err_len) {
  kern_backend_t *be = m->be;
  const size_t bytes = (size_t)(m->hp.rot_dim / 2) * sizeof(float);
  m->inv_freq_dev = be->alloc(be, bytes);
  if (!m->inv_freq_dev) {
    snprintf(err, err_len, "the %s backend is out of memory", be->name);
    return -ENOMEM;
  }
  be->upload(be, m->inv_freq_dev, m->inv_freq, bytes);
  if (m->hp.arch == MODEL_ARCH_GEMMA4) return model__gemma4_extras(m, err, err_len);
  if (m->hp.rope_base_swa > 0) { /* the sliding layers' base, unscaled */
    const int half = m->hp.rot_dim / 2;
    float *swa = xmalloc(bytes);
    for (int p = 0; p < half; p++) swa[p] = (float)(1.0 / pow((double)m->hp.rope_base_swa, 2.0 * p / m->hp.rot_dim));
    m->inv_freq_swa_dev = be->alloc(be, bytes);
    if (m->inv_freq_swa_dev) be->upload(be, m->inv_freq_swa_dev, swa, bytes);
    free(swa);
    if (!m->inv_freq_swa_dev) {
      snprintf(err, err_len, "the %s backend is out of memory", be->name);
      return -ENOMEM;
    }
  }
  return 0;
}

model_t *model_load(const char *path, kern_backend_t *be, char *err, size_t err_len) {
  return model_load_opts(path, be, NULL, err, err_len);
}

model_t *model_load_opts(const char *path, kern_backend_t *be, const model_load_opts_t *o, char *err,
                         size_t err_len) {
  const kern_type_t quantize = o ? o->quantize : KERN_F32;
  if (quantize != KERN_F32 && !kern_quant_is_target(quantize)) {
    const char *name = kern_type_name(quantize);
    snprintf(err, err_len, "%s: cannot quantize weights to %s (Q8_0, Q4_0 or Q4_1)", path, name ? name : "?");
    return NULL;
  }
#ifndef TRAM_NO_HF /* the GPU test build links no JSON library (Makefile) */
  /* a Hugging Face checkpoint is read as the GGUF file it converts to (hf/hf.h) */
  gguf_ctx_t *g = hf_is_checkpoint(path) ? hf_open(path, err, err_len) : gguf_open(path, err, err_len);
#else
  gguf_ctx_t *g = gguf_open(path, err, err_len);
#endif
  if (!g) return NULL;
  model_t *m = xcalloc(1, sizeof *m);
  m->be = be;
  m->gguf = g;
  m->quantize = quantize;
  char msg[512] = "";
  loader_t ld = {.m = m, .err = msg, .err_len = sizeof msg};
  const int64_t packed0 = be->packed_bytes; /* the backend may hold another model (a draft) */
  int rc = model__hparams_read(g, &m->hp, &m->inv_freq, msg, sizeof msg);
  if (rc == 0 && m->hp.n_expert > 0 && !be->moe_combine) {
    snprintf(msg, sizeof msg, "the %s backend does not run mixture-of-experts models yet (%d experts): use --device cpu",
             be->name, m->hp.n_expert);
    rc = -EINVAL;
  }
  if (rc == 0 && m->hp.swiglu_limit > 0 && !be->swiglu_oai) {
    snprintf(msg, sizeof msg, "the %s backend has no clamped SwiGLU (%s's experts): use --device cpu", be->name,
             model_arch_name(m->hp.arch));
    rc = -EINVAL;
  }
  if (rc == 0 && m->hp.attn_sinks && !be->attn_sinks) {
    snprintf(msg, sizeof msg, "the %s backend's attention has no learned sinks (%s's attn_sinks): use --device cpu",
             be->name, model_arch_name(m->hp.arch));
    rc = -EINVAL;
  }
  if (rc == 0) /* the backend's attention must take this layout: refuse now, not mid-serving */
    rc = be->attn_supported(be, m->hp.n_heads, m->hp.n_kv_heads, m->hp.head_dim, msg, sizeof msg);
  if (rc == 0 && m->hp.head_dim_full > 0) /* gemma4: the full layers' too */
    rc = be->attn_supported(be, m->hp.n_heads, m->hp.n_kv_heads_full, m->hp.head_dim_full, msg, sizeof msg);
  if (rc == 0 && m->hp.arch == MODEL_ARCH_GEMMA4 && !be->copy_cols) {
    snprintf(msg, sizeof msg, "the %s backend cannot run gemma4 (no copy_cols): use --device cpu", be->name);
    rc = -EINVAL;
  }
  if (rc == 0 && m->hp.full_attn_interval > 0 &&
      (!be->gdn_conv || !be->gdn_rule || !be->sigmoid_mul || !be->copy_cols)) {
    snprintf(msg, sizeof msg, "the %s backend has no Gated DeltaNet kernels: hybrid %s models run on "
             "--device cpu only", be->name, model_arch_name(m->hp.arch));
    rc = -EINVAL;
  }
  if (rc == 0) rc = load_tensors(&ld);
  free(ld.used);
  if (rc == 0) rc = load_extras(m, msg, sizeof msg);
  if (rc != 0) {
    snprintf(err, err_len, "%s: %s", path, msg);
    model_destroy(m);
    return NULL;
  }
  model__join_layers(m); /* where the backend joins (model_join.c) */
  const model_hparams_t *hp = &m->hp;
  log_info("model: %s: %s, %d layers, dim %d, MLP %d, %d heads (%d KV) of %d, vocabulary %d, context %d, "
           "sliding window %d, %.1f MB read per token",
           path, model_arch_name(hp->arch), hp->n_layers, hp->dim, hp->ff_dim, hp->n_heads,
           hp->n_kv_heads, hp->head_dim, hp->n_vocab, hp->n_ctx, hp->sliding_window,
           (double)m->step_bytes / 1e6);
  if (hp->n_expert > 0)
    log_info("model: %d experts of MLP %d, %d per token (weights %s), shared expert %d", hp->n_expert,
             hp->expert_ff_dim, hp->n_expert_used,
             hp->moe_gating == MODEL_MOE_TOPK_SOFTMAX ? "a softmax over the top k" :
             hp->expert_norm ? "renormalised" : "as routed", hp->shexp_ff_dim);
  if (be->packed_bytes > packed0)
    log_info("model: %.1f MB of weights repacked for the %s backend's kernels",
             (double)(be->packed_bytes - packed0) / 1e6, be->name);
  if (quantize != KERN_F32)
    log_info("model: %d weight matrices quantized to %s at load (F32/F16/BF16 ones with rows of whole blocks)",
             m->n_quantized, kern_type_name(quantize));
  return m;
}

static void release(kern_backend_t *be, kern_weight_t *w) {
  if (w->rows > 0) be->weight_release(be, w);
}

static void release_moe(kern_backend_t *be, model_moe_layer_t *M, int n_expert) {
  if (!M) return;
  for (int e = 0; e < n_expert; e++) {
    release(be, &M->gate[e]);
    release(be, &M->up[e]);
    release(be, &M->down[e]);
  }
  kern_weight_t *one[] = {&M->router, &M->sh_gate, &M->sh_up, &M->sh_down, &M->sh_router};
  for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) release(be, one[i]);
  be->free(be, M->router_b);
  be->free(be, M->gate_b);
  be->free(be, M->up_b);
  be->free(be, M->down_b);
  be->free(be, M->router_norm);
  free(M->expert_scale);
  free(M->gate);
  free(M->up);
  free(M->down);
  free(M);
}

void model_destroy(model_t *m) {
  if (!m) return;
  kern_backend_t *be = m->be;
  if (m->layers) {
    for (int l = 0; l < m->hp.n_layers; l++) {
      model_layer_t *L = &m->layers[l];
      be->free(be, L->attn_norm);
      be->free(be, L->ffn_norm);
      be->free(be, L->bq);
      be->free(be, L->bk);
      be->free(be, L->bv);
      be->free(be, L->bo);
      be->free(be, L->sinks);
      be->free(be, L->q_norm);
      be->free(be, L->k_norm);
      be->free(be, L->post_attn_norm);
      be->free(be, L->post_ffn_norm);
      release(be, &L->wq);
      release(be, &L->wk);
      release(be, &L->wv);
      release(be, &L->wo);
      release(be, &L->w_gate);
      release(be, &L->w_up);
      release(be, &L->w_down);
      release(be, &L->wqkv);
      release(be, &L->w_gu);
      release(be, &L->w_qkv);
      release(be, &L->w_z);
      release(be, &L->w_beta);
      release(be, &L->w_alpha);
      release(be, &L->w_ba);
      release(be, &L->w_ssm_out);
      be->free(be, L->conv_w);
      be->free(be, L->a_neg);
      be->free(be, L->dt_bias);
      be->free(be, L->ssm_norm);
      release_moe(be, L->moe, m->hp.n_expert);
      release(be, &L->w_pl_gate);
      release(be, &L->w_pl_proj);
      be->free(be, L->pl_norm);
      be->free(be, L->moe_pre_norm);
      be->free(be, L->mlp_post_norm);
      be->free(be, L->moe_post_norm);
    }
    free(m->layers);
  }
  release(be, &m->tok_embd);
  release(be, &m->output);
  for (size_t i = 0; i < m->n_quant_bufs; i++) free(m->quant_bufs[i]);
  free(m->quant_bufs);
  be->free(be, m->output_norm);
  model__gemma4_free(m);
  be->free(be, m->inv_freq_dev);
  be->free(be, m->inv_freq_swa_dev);
  free(m->inv_freq);
  gguf_close(m->gguf);
  free(m);
}

const model_hparams_t *model_hparams(const model_t *m) { return &m->hp; }
const gguf_ctx_t *model_gguf(const model_t *m) { return m->gguf; }
const float *model_rope_inv_freq(const model_t *m) { return m->inv_freq; }
int64_t model_step_weight_bytes(const model_t *m) { return m->step_bytes; }

void model_kv_config(const model_t *m, kv_cache_config_t *cfg) {
  cfg->n_layers = m->hp.n_attn_layers;
  cfg->n_kv_heads = m->hp.n_kv_heads;
  cfg->head_dim = m->hp.head_dim;
  cfg->layer_kv_heads = m->cache_kv_heads; /* gemma4's, or NULL */
  cfg->layer_head_dim = m->cache_head_dim;
}
