/* model/model_gemma_hparams.c — the Gemma families' hyper-parameters from
 * GGUF metadata, on top of the common keys model_hparams.c reads (see
 * model.h): Gemma 2 and 3's block, and Gemma 4 as llama.cpp's converter
 * writes it (conversion/gemma.py Gemma4Model, src/models/gemma4.cpp) —
 * which is also what hf/ gives for a Hugging Face folder:
 *
 *   attention.sliding_window_pattern  bool per layer, true = sliding; tram
 *                                  runs it periodic (full where (l + 1) %
 *                                  p == 0)
 *   attention.key_length / value_length      the full layers' head_dim
 *   attention.key_length_swa / value_length_swa  the sliding layers'
 *   attention.head_count_kv        a number, or one per layer (one value
 *                                  per layer type)
 *   feed_forward_length            a number, or one per layer (the
 *                                  KV-shared layers' double-wide MLP)
 *   rope.freq_base / rope.freq_base_swa      the full / sliding layers'
 *   rope.dimension_count(_swa)     the whole head (tram rotates whole heads)
 *   rope_freqs.weight              F32 [key_length / 2], the full layers'
 *                                  frequency divisors: "proportional" RoPE
 *                                  as 1 for the turning pairs and 1e30 for
 *                                  the others (model_gemma4.c applies it)
 *   attention.shared_kv_layers     the last n layers read the K/V of the
 *                                  last earlier layer of their type
 *   embedding_length_per_layer_input, final_logit_softcapping
 * Norm weights are stored as the model multiplies them (no 1 + w: the
 * converter's norm_shift is 0 for Gemma 4); a layer without attn_v uses its
 * K projection as V (attention_k_eq_v); the scores' scale is 1. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model_internal.h"

#define MAX_HEAD 4096
#define MAX_LAYERS 4096

const char *const model__gemma_keys[] = {"attn_logit_softcapping", "final_logit_softcapping",
                                         "attention.sliding_window_pattern", "rope.freq_base_swa", NULL};

const char *const model__gemma4_keys[] = {"attention.sliding_window_pattern", "attention.key_length_swa",
                                          "attention.value_length_swa", "attention.shared_kv_layers",
                                          "embedding_length_per_layer_input", "rope.dimension_count_swa",
                                          "rope.freq_base_swa", "final_logit_softcapping", "expert_count",
                                          "expert_used_count", "expert_feed_forward_length", NULL};

/* A float key `<arch>.<name>` >= 0 (0: the feature is off), def when absent. */
static int get_nonneg_float(const gguf_ctx_t *g, const char *arch, const char *name, float def, float *out,
                            char *err, size_t err_len) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", arch, name);
  float v;
  int rc = gguf_get_f32(g, key, &v);
  if (rc == -ENOENT) {
    *out = def;
    return 0;
  }
  if (rc != 0 || !(v >= 0) || !isfinite(v)) {
    snprintf(err, err_len, "key '%s' is %s", key, rc != 0 ? "not a float" : "not a finite number >= 0");
    return -EINVAL;
  }
  *out = v;
  return 0;
}

/* Gemma's block (version 2 or 3). As llama.cpp reads these files: the
 * scores' scale is 1 / sqrt(head_dim) (Gemma's query_pre_attn_scalar =
 * head_dim), except for the 27B models (gemma2 of 46 layers, gemma3 of
 * 62), whose query_pre_attn_scalar is dim / n_heads; the sliding layers
 * follow sliding_window_pattern (2 for gemma2, 6 for gemma3 when absent);
 * the sliding layers use rope.freq_base_swa, unscaled (gemma3: 10000 when
 * absent; gemma2: the global base); soft-capping where the keys give it
 * (Gemma 2 checkpoints). */
int model__gemma_hparams(const gguf_ctx_t *g, const char *arch, int version, model_hparams_t *hp, char *err,
                         size_t err_len) {
  hp->embed_scale = sqrtf((float)hp->dim);
  hp->gelu_mlp = 1;
  hp->post_norms = 1;
  const int big = version == 2 ? 46 : 62;
  hp->attn_scale = 1.0f / sqrtf((float)(hp->n_layers == big ? hp->dim / hp->n_heads : hp->head_dim));
  int rc = model__get_int(g, arch, "attention.sliding_window_pattern", version == 2 ? 2 : 6, 0, MAX_LAYERS,
                          &hp->swa_pattern, err, err_len);
  if (rc == 0) rc = get_nonneg_float(g, arch, "attn_logit_softcapping", 0, &hp->attn_softcap, err, err_len);
  if (rc == 0) rc = get_nonneg_float(g, arch, "final_logit_softcapping", 0, &hp->final_softcap, err, err_len);
  if (rc == 0)
    rc = get_nonneg_float(g, arch, "rope.freq_base_swa", version == 3 ? 10000.0f : 0, &hp->rope_base_swa, err, err_len);
  return rc;
}

/* sliding_window_pattern (a bool per layer, true = sliding) as tram's
 * period: 0 when no layer is full, else p with layer l full exactly where
 * (l + 1) % p == 0. */
static int read_pattern(const gguf_ctx_t *g, const char *a, model_hparams_t *hp, char *err, size_t err_len) {
  char key[128];
  snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", a);
  const gguf_kv_t *kv = gguf_find_kv(g, key);
  gguf_type_t t;
  if (!kv || gguf_get_arr_n(g, key, &t) != hp->n_layers || t != GGUF_TYPE_BOOL) {
    snprintf(err, err_len, "key '%s' is %s (want one bool per layer, true for a sliding one)", key,
             kv ? "not a bool array of block_count" : "missing");
    return -EINVAL;
  }
  int period = 0;
  for (int l = 0; l < hp->n_layers; l++) {
    int swa;
    if (gguf_arr_bool(kv, (uint64_t)l, &swa) != 0) {
      snprintf(err, err_len, "key '%s': element %d is not a bool", key, l);
      return -EINVAL;
    }
    if (!swa && period == 0) period = l + 1;
    if (period > 0 && !swa != ((l + 1) % period == 0)) {
      snprintf(err, err_len, "key '%s': layer %d breaks the periodic pattern of a full layer every %d (tram runs "
               "periodic layer types)", key, l, period);
      return -EINVAL;
    }
  }
  hp->swa_pattern = period;
  return 0;
}

static int is_full(const model_hparams_t *hp, int l) { return hp->swa_pattern > 0 && (l + 1) % hp->swa_pattern == 0; }

/* `<a>.<name>`, a number (def when absent, if def >= 0) or one per layer,
 * as one value per group: group 0 of layers where in_group1(l) is false,
 * group 1 the others (a group with no layer takes the other's value). Each
 * in [lo, hi]. */
static int per_layer_pair(const gguf_ctx_t *g, const char *a, const char *name, const model_hparams_t *hp,
                          int (*in_group1)(const model_hparams_t *, int), const char *groups, int64_t def, int64_t lo,
                          int64_t hi, int out[2], char *err, size_t err_len) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", a, name);
  const gguf_kv_t *kv = gguf_find_kv(g, key);
  if (!kv || kv->type != GGUF_TYPE_ARRAY) {
    int rc = model__get_int(g, a, name, def, lo, hi, &out[0], err, err_len);
    out[1] = out[0];
    return rc;
  }
  if (gguf_get_arr_n(g, key, NULL) != hp->n_layers) {
    snprintf(err, err_len, "key '%s' is an array, not of one integer per layer (%d)", key, hp->n_layers);
    return -EINVAL;
  }
  int seen[2] = {0, 0};
  for (int l = 0; l < hp->n_layers; l++) {
    int64_t v;
    const int grp = in_group1(hp, l);
    if (gguf_arr_i64(kv, (uint64_t)l, &v) != 0 || v < lo || v > hi) {
      snprintf(err, err_len, "key '%s': element %d is not an integer in %lld..%lld", key, l, (long long)lo,
               (long long)hi);
      return -EINVAL;
    }
    if (seen[grp] && out[grp] != v) {
      snprintf(err, err_len, "key '%s': layer %d has %lld, another of its kind %d (tram runs one value per %s)", key,
               l, (long long)v, out[grp], groups);
      return -EINVAL;
    }
    out[grp] = (int)v;
    seen[grp] = 1;
  }
  if (!seen[1]) out[1] = out[0];
  if (!seen[0]) out[0] = out[1];
  return 0;
}

static int is_shared(const model_hparams_t *hp, int l) { return l >= hp->n_layers - hp->n_kv_shared; }

int model__gemma4_hparams(const gguf_ctx_t *g, const char *a, model_hparams_t *hp, char *err, size_t err_len) {
  /* the common reader took key_length, rope.dimension_count and rope.freq_base: the full layers' */
  hp->head_dim_full = hp->head_dim;
  hp->rope_base_full = hp->rope_base;
  int kv[2], ff[2], v_swa, rot_swa;
  int rc = read_pattern(g, a, hp, err, err_len);
  if (rc == 0) rc = model__get_int(g, a, "attention.key_length_swa", hp->head_dim_full, 2, MAX_HEAD, &hp->head_dim,
                                   err, err_len);
  if (rc == 0)
    rc = model__get_int(g, a, "attention.value_length_swa", hp->head_dim, 1, MAX_HEAD, &v_swa, err, err_len);
  if (rc == 0)
    rc = model__get_int(g, a, "rope.dimension_count_swa", hp->head_dim, 2, MAX_HEAD, &rot_swa, err, err_len);
  if (rc == 0) rc = model__get_pos_float(g, a, "rope.freq_base_swa", hp->rope_base_full, &hp->rope_base, err, err_len);
  if (rc == 0)
    rc = per_layer_pair(g, a, "attention.head_count_kv", hp, is_full, "layer type", hp->n_heads, 1, hp->n_heads, kv, err, err_len);
  if (rc == 0)
    rc = model__get_int(g, a, "attention.shared_kv_layers", 0, 0, hp->n_layers - 1, &hp->n_kv_shared, err, err_len);
  if (rc == 0)
    rc = per_layer_pair(g, a, "feed_forward_length", hp, is_shared, "group of KV-owning and KV-shared layers", -1,
                        1, 1 << 22, ff, err, err_len);
  if (rc == 0) rc = model__get_int(g, a, "embedding_length_per_layer_input", 0, 0, MAX_HEAD, &hp->ple_dim, err, err_len);
  char key[96];
  snprintf(key, sizeof key, "%s.final_logit_softcapping", a);
  if (rc == 0 && gguf_find_kv(g, key))
    rc = model__get_pos_float(g, a, "final_logit_softcapping", 0, &hp->final_softcap, err, err_len);
  if (rc != 0) return rc;
  hp->n_kv_heads = kv[0];
  hp->n_kv_heads_full = kv[1];
  hp->ff_dim = ff[0];
  hp->ff_dim_shared = ff[1];
  if (v_swa != hp->head_dim || rot_swa != hp->head_dim || hp->rot_dim != hp->head_dim_full) {
    snprintf(err, err_len, "keys '%s.attention.value_length_swa' %d, rope.dimension_count %d and _swa %d: tram "
             "runs values as wide as keys and rotates whole heads (%d, %d; partial rotation through "
             "rope_freqs.weight)", a, v_swa, hp->rot_dim, rot_swa, hp->head_dim_full, hp->head_dim);
    return -EINVAL;
  }
  if (hp->n_heads % hp->n_kv_heads != 0 || hp->n_heads % hp->n_kv_heads_full != 0 || hp->head_dim_full % 2 != 0 ||
      hp->head_dim % 2 != 0) {
    snprintf(err, err_len, "key '%s.attention.head_count_kv': %d heads, %d KV heads of %d on the sliding layers, %d "
             "of %d on the full ones (want KV heads dividing heads, even head sizes)",
             a, hp->n_heads, hp->n_kv_heads, hp->head_dim, hp->n_kv_heads_full, hp->head_dim_full);
    return -EINVAL;
  }
  for (int l = hp->n_layers - hp->n_kv_shared; l < hp->n_layers; l++)
    if (model_layer_cache_layer(hp, l) < 0) {
      snprintf(err, err_len, "key '%s.attention.shared_kv_layers' is %d: layer %d has no earlier layer of its type "
               "to read K/V from", a, hp->n_kv_shared, l);
      return -EINVAL;
    }
  hp->rot_dim = hp->head_dim;
  hp->embed_scale = sqrtf((float)hp->dim);
  hp->gelu_mlp = 1;
  hp->post_norms = 1;
  hp->attn_scale = 1.0f; /* Gemma4TextAttention.scaling */
  hp->n_attn_layers = hp->n_layers - hp->n_kv_shared;
  const int hd = hp->head_dim > hp->head_dim_full ? hp->head_dim : hp->head_dim_full;
  const int kvs = hp->n_kv_heads * hp->head_dim, kvf = hp->n_kv_heads_full * hp->head_dim_full;
  hp->q_dim = hp->n_heads * hd; /* the runner's buffers: the widest layer's */
  hp->kv_dim = kvs > kvf ? kvs : kvf;
  return 0;
}
