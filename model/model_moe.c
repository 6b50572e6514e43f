/* model/model_moe.c — the mixture-of-experts MLP: keys, routing, the step
 * (see model_moe.h); and model_hf_class (model.h), where experts make a
 * llama Mixtral. */
#include "model/model_moe.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"

#define MAX_EXPERTS 4096

const char *const MODEL_MOE_KEYS[] = {"expert_count", "expert_used_count", "expert_feed_forward_length",
                                      "expert_shared_feed_forward_length", "expert_weights_norm", NULL};

/* An integer key `<arch>.<name>` in [lo, hi], def when absent (def < 0:
 * required). */
static int moe_int(const gguf_ctx_t *g, const char *arch, const char *name, int64_t def, int64_t lo, int64_t hi,
                   int *out, char *err, size_t err_len) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", arch, name);
  int64_t v;
  const int rc = gguf_get_i64(g, key, &v);
  if (rc == -ENOENT && def >= 0) v = def;
  else if (rc != 0) {
    snprintf(err, err_len, "key '%s' is %s", key, rc == -ENOENT ? "missing" : "not an integer");
    return -EINVAL;
  }
  if (v < lo || v > hi) {
    snprintf(err, err_len, "key '%s' is %lld, outside %lld..%lld", key, (long long)v, (long long)lo, (long long)hi);
    return -EINVAL;
  }
  *out = (int)v;
  return 0;
}

int model__moe_hparams(const gguf_ctx_t *g, const char *arch, int sparse, model_hparams_t *hp, char *err,
                       size_t err_len) {
  int rc = moe_int(g, arch, "expert_count", sparse ? -1 : 0, sparse ? 1 : 0, MAX_EXPERTS, &hp->n_expert, err, err_len);
  if (rc != 0 || hp->n_expert == 0) {
    char key[128];
    snprintf(key, sizeof key, "%s.expert_used_count", arch);
    int64_t used = 0;
    if (rc == 0 && gguf_find_kv(g, key) && (gguf_get_i64(g, key, &used) != 0 || used != 0)) {
      snprintf(err, err_len, "key '%s' is given for a model without experts (expert_count 0)", key);
      return -EINVAL;
    }
    return rc;
  }
  rc = moe_int(g, arch, "expert_used_count", -1, 1, hp->n_expert, &hp->n_expert_used, err, err_len);
  if (rc == 0)
    rc = moe_int(g, arch, "expert_feed_forward_length", hp->ff_dim, 1, 1 << 20, &hp->expert_ff_dim, err, err_len);
  if (rc == 0)
    rc = moe_int(g, arch, "expert_shared_feed_forward_length", 0, 0, 1 << 20, &hp->shexp_ff_dim, err, err_len);
  if (rc != 0) return rc;
  /* expert_weights_norm: llama.cpp's defaults are per architecture (qwen2moe
   * off, qwen3moe and Mixtral on) */
  char key[128];
  snprintf(key, sizeof key, "%s.expert_weights_norm", arch);
  hp->expert_norm = hp->arch != MODEL_ARCH_QWEN2MOE;
  if (gguf_find_kv(g, key)) {
    int b;
    if (gguf_get_bool(g, key, &b) != 0) {
      snprintf(err, err_len, "key '%s' is not a boolean", key);
      return -EINVAL;
    }
    hp->expert_norm = b != 0;
  }
  if (hp->shexp_ff_dim > 0 && hp->arch != MODEL_ARCH_QWEN2MOE && hp->arch != MODEL_ARCH_QWEN35MOE &&
      hp->arch != MODEL_ARCH_QWEN3NEXT) {
    snprintf(err, err_len, "key '%s.expert_shared_feed_forward_length': tram runs a shared expert for qwen2moe, "
             "qwen35moe and qwen3next only", arch);
    return -EINVAL;
  }
  return 0;
}

void model__moe_route(const float *logits, int n_expert, int k, int norm, model_moe_gating_t gating, int32_t *ids,
                      float *w) {
  /* the top k by logit (softmax is monotonic): repeated arg-max, lower index first on ties */
  unsigned char taken[MAX_EXPERTS];
  memset(taken, 0, (size_t)n_expert);
  for (int j = 0; j < k; j++) {
    int best = -1;
    for (int e = 0; e < n_expert; e++)
      if (!taken[e] && (best < 0 || logits[e] > logits[best])) best = e;
    ids[j] = best;
    taken[best] = 1;
  }
  /* ascending expert order: the order of the weighted sum */
  for (int j = 1; j < k; j++)
    for (int i = j; i > 0 && ids[i - 1] > ids[i]; i--) {
      const int32_t t = ids[i];
      ids[i] = ids[i - 1];
      ids[i - 1] = t;
    }
  double max = -INFINITY, denom = 0, sel = 0;
  const int over_all = gating == MODEL_MOE_SOFTMAX_TOPK;
  for (int e = 0; e < (over_all ? n_expert : k); e++) {
    const double l = logits[over_all ? e : ids[e]];
    if (l > max) max = l;
  }
  for (int e = 0; e < (over_all ? n_expert : k); e++) denom += exp((double)logits[over_all ? e : ids[e]] - max);
  for (int j = 0; j < k; j++) sel += exp((double)logits[ids[j]] - max);
  const double div = over_all && norm ? sel : denom;
  for (int j = 0; j < k; j++) w[j] = (float)(exp((double)logits[ids[j]] - max) / div);
}

struct model_moe_scratch {
  int max_tokens, kk; /* kk: terms per row, the shared expert's included */
  /* device */
  float *rlog;   /* [T, n_expert] router logits */
  float *shlog;  /* [T] the shared expert's gate logit */
  int32_t *gidx; /* [T·k] rows in expert order */
  float *xs;     /* [T·k, dim] the gathered rows */
  float *gs, *us;/* [T·k, eff] (and [T, shff] for the shared expert, after them) */
  float *ys;     /* [T·k + T, dim] each term's output */
  int32_t *slot; /* [T, kk] */
  float *cw;     /* [T, kk] */
  /* host */
  float *rlog_h, *shlog_h, *cw_h, *w_h;
  int32_t *ids_h, *gidx_h, *slot_h;
  int *count, *off;
  uint64_t experts_run;
};

model_moe_scratch_t *model__moe_scratch_create(kern_backend_t *be, const model_hparams_t *hp, int max_tokens) {
  model_moe_scratch_t *s = xcalloc(1, sizeof *s);
  const size_t T = (size_t)max_tokens, k = (size_t)hp->n_expert_used, E = (size_t)hp->n_expert, f = sizeof(float);
  const size_t kk = k + (hp->shexp_ff_dim > 0), D = (size_t)hp->dim;
  const size_t ff = (size_t)hp->expert_ff_dim * k > (size_t)hp->shexp_ff_dim ? (size_t)hp->expert_ff_dim * k
                                                                              : (size_t)hp->shexp_ff_dim;
  s->max_tokens = max_tokens;
  s->kk = (int)kk;
  int failed = 0;
#define ALLOC(ptr, bytes) (failed |= !((ptr) = be->alloc(be, (bytes))))
  ALLOC(s->rlog, T * E * f);
  ALLOC(s->shlog, T * f);
  ALLOC(s->gidx, T * k * sizeof(int32_t));
  ALLOC(s->xs, T * k * D * f);
  ALLOC(s->gs, T * ff * f);
  ALLOC(s->us, T * ff * f);
  ALLOC(s->ys, T * (k + 1) * D * f);
  ALLOC(s->slot, T * kk * sizeof(int32_t));
  ALLOC(s->cw, T * kk * f);
#undef ALLOC
  s->rlog_h = xmalloc(T * E * f);
  s->shlog_h = xmalloc(T * f);
  s->cw_h = xmalloc(T * kk * f);
  s->w_h = xmalloc(T * k * f);
  s->ids_h = xmalloc(T * k * sizeof(int32_t));
  s->gidx_h = xmalloc(T * k * sizeof(int32_t));
  s->slot_h = xmalloc(T * kk * sizeof(int32_t));
  s->count = xmalloc(E * sizeof(int));
  s->off = xmalloc(E * sizeof(int));
  if (failed) {
    log_error("model: the %s backend is out of memory for the experts' activations of %d tokens", be->name,
              max_tokens);
    model__moe_scratch_destroy(be, s);
    return NULL;
  }
  return s;
}

void model__moe_scratch_destroy(kern_backend_t *be, model_moe_scratch_t *s) {
  if (!s) return;
  void *dev[] = {s->rlog, s->shlog, s->gidx, s->xs, s->gs, s->us, s->ys, s->slot, s->cw};
  for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) be->free(be, dev[i]);
  void *host[] = {s->rlog_h, s->shlog_h, s->cw_h, s->w_h, s->ids_h, s->gidx_h, s->slot_h, s->count, s->off};
  for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
  free(s);
}

uint64_t model__moe_experts_run(const model_moe_scratch_t *s) { return s->experts_run; }

/* An expert's biases (gpt-oss), or NULLs. */
typedef struct {
  const float *gate, *up, *down;
} expert_bias_t;

/* silu(x·gᵀ) ⊙ x·uᵀ → ·dᵀ over n rows: a SwiGLU MLP (an expert, or the
 * shared one); gpt-oss: with the biases b and the clamped SwiGLU; Gemma 4
 * (hp->gelu_mlp): GeGLU. */
static void swiglu_mlp(kern_backend_t *be, const model_hparams_t *hp, float *y, const float *x, float *g, float *u,
                       const kern_weight_t *wg, const kern_weight_t *wu, const kern_weight_t *wd,
                       const expert_bias_t *b, int n) {
  const int F = (int)wg->rows, D = (int)wd->rows;
  be->matmul(be, g, x, wg, n);
  be->matmul(be, u, x, wu, n);
  if (b && b->gate) be->add_bias(be, g, b->gate, n, F);
  if (b && b->up) be->add_bias(be, u, b->up, n, F);
  if (hp->swiglu_limit > 0)
    be->swiglu_oai(be, g, g, u, (int64_t)n * F, hp->swiglu_alpha, hp->swiglu_limit);
  else if (hp->gelu_mlp)
    be->geglu(be, g, g, u, (int64_t)n * F);
  else
    be->swiglu(be, g, g, u, (int64_t)n * F);
  be->matmul(be, y, g, wd, n);
  if (b && b->down) be->add_bias(be, y, b->down, n, D);
}

void model__moe_forward(kern_backend_t *be, const model_hparams_t *hp, const model_moe_layer_t *w,
                        model_moe_scratch_t *s, float *y, const float *h, const float *hr, int T) {
  const int E = hp->n_expert, k = hp->n_expert_used, kk = s->kk, D = hp->dim, F = hp->expert_ff_dim;
  be->matmul(be, s->rlog, hr ? hr : h, &w->router, T); /* [T, E] */
  if (w->router_b) be->add_bias(be, s->rlog, w->router_b, T, E);
  be->download(be, s->rlog_h, s->rlog, (size_t)T * E * sizeof(float));
  for (int t = 0; t < T; t++)
    model__moe_route(s->rlog_h + (size_t)t * E, E, k, hp->expert_norm, (model_moe_gating_t)hp->moe_gating,
                     s->ids_h + (size_t)t * k, s->w_h + (size_t)t * k);
  /* group the (row, expert) pairs by expert, rows ascending within one */
  memset(s->count, 0, (size_t)E * sizeof *s->count);
  for (int i = 0; i < T * k; i++) s->count[s->ids_h[i]]++;
  for (int e = 0, at = 0; e < E; e++) s->off[e] = at, at += s->count[e];
  for (int t = 0; t < T; t++)
    for (int j = 0; j < k; j++) {
      const int e = s->ids_h[t * k + j], p = s->off[e]++;
      s->gidx_h[p] = t;
      s->slot_h[t * kk + j] = p;
      s->cw_h[t * kk + j] = s->w_h[t * k + j] * (w->expert_scale ? w->expert_scale[e] : 1.0f);
    }
  for (int e = 0; e < E; e++) s->off[e] -= s->count[e];
  const int n = T * k;
  be->upload(be, s->gidx, s->gidx_h, (size_t)n * sizeof(int32_t));
  be->gather_rows(be, s->xs, h, s->gidx, n, D); /* xs [n, D] */
  /* An expert's backend copy (kern.h: lazy) is made by a step that chooses
   * it, at most k a layer a step: a cold server's first prompt, whose rows
   * choose most experts, would otherwise pay for the whole model's copy in
   * one step (tens of seconds for a large one); the rest run from the view
   * meanwhile, with the same bits. */
  int readied = 0;
  for (int e = 0; e < E; e++) {
    if (s->count[e] == 0) continue; /* never touched */
    if (be->weight_use && w->gate[e].lazy && readied < k) {
      be->weight_use(be, &w->gate[e]);
      be->weight_use(be, &w->up[e]);
      be->weight_use(be, &w->down[e]);
      readied++;
    }
    const size_t o = (size_t)s->off[e];
    const expert_bias_t b = {w->gate_b ? w->gate_b + (size_t)e * F : NULL, w->up_b ? w->up_b + (size_t)e * F : NULL,
                             w->down_b ? w->down_b + (size_t)e * D : NULL};
    swiglu_mlp(be, hp, s->ys + o * D, s->xs + o * D, s->gs + o * F, s->us + o * F, &w->gate[e], &w->up[e],
               &w->down[e], &b, s->count[e]);
    s->experts_run++;
  }
  if (kk > k) { /* the shared expert: the last term of each row, sigmoid-gated */
    swiglu_mlp(be, hp, s->ys + (size_t)n * D, h, s->gs, s->us, &w->sh_gate, &w->sh_up, &w->sh_down, NULL, T);
    be->matmul(be, s->shlog, h, &w->sh_router, T); /* [T, 1] */
    be->download(be, s->shlog_h, s->shlog, (size_t)T * sizeof(float));
    for (int t = 0; t < T; t++) {
      s->slot_h[t * kk + k] = n + t;
      s->cw_h[t * kk + k] = (float)(1.0 / (1.0 + exp(-(double)s->shlog_h[t])));
    }
  }
  be->upload(be, s->slot, s->slot_h, (size_t)T * kk * sizeof(int32_t));
  be->upload(be, s->cw, s->cw_h, (size_t)T * kk * sizeof(float));
  be->moe_combine(be, y, s->ys, s->slot, s->cw, T, kk, D);
}

const char *model_hf_class(const model_hparams_t *hp) {
  return hp->arch == MODEL_ARCH_LLAMA && hp->n_expert > 0 ? "MixtralForCausalLM" : model_arch_hf_class(hp->arch);
}
