/* hf/hf_gemma4.c — Gemma 4's config.json fields (model_type gemma4_text, or
 * a gemma4 folder's text_config) read into the gemma4.* keys llama.cpp's
 * converter writes (conversion/gemma.py Gemma4Model; model_gemma_hparams.c
 * reads them for both), as configuration_gemma4.py defines the fields
 * (transformers 5.23):
 *   layer_types             sliding/full, periodic (hf__layer_pattern) →
 *                           attention.sliding_window_pattern (a bool per
 *                           layer, true = sliding)
 *   head_dim, per_layer_config  per layer head_dim / num_key_value_heads:
 *                           tram runs one geometry per layer type (the full
 *                           layers' global_head_dim and, with
 *                           attention_k_eq_v, num_global_key_value_heads,
 *                           which the config's __post_init__ writes there)
 *                           → attention.key_length (the full layers'),
 *                           key_length_swa, head_count_kv per layer
 *   rope_parameters         {sliding_attention: default, full_attention:
 *                           default or proportional (partial_rotary_factor;
 *                           factor 1)} → rope.freq_base (full),
 *                           rope.freq_base_swa, rope.dimension_count(_swa)
 *                           the whole heads, and the tensor
 *                           rope_freqs.weight [full head_dim / 2]: 1 for
 *                           the pairs that turn, 1e30 for the others (the
 *                           converter's generate_extra_tensors)
 *   hidden_size_per_layer_input → embedding_length_per_layer_input
 *                           (vocab_size_per_layer_input must be vocab_size)
 *   num_kv_shared_layers    → attention.shared_kv_layers (each shared
 *                           layer's type must have a layer of its own KV
 *                           before them, as transformers checks)
 *   use_double_wide_mlp     → feed_forward_length per layer (the shared
 *                           layers': twice intermediate_size)
 *   attention_k_eq_v        no key: the full layers have no v_proj, so no
 *                           attn_v, which tells the model
 *   final_logit_softcapping → final_logit_softcapping
 *   enable_moe_block        num_experts → expert_count, top_k_experts →
 *                           expert_used_count, moe_intermediate_size →
 *                           expert_feed_forward_length (the router and
 *                           experts of every layer: hf_open.c)
 * Refused by name: use_bidirectional_attention, attention_bias, other RoPE
 * types or a proportional factor. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "hf/hf_internal.h"
#include "kernels/kern_types.h"

static const cJSON *field(const cJSON *o, const char *name) { return cJSON_GetObjectItemCaseSensitive(o, name); }

/* The full layers' head_dim and KV heads: per_layer_config's entry of every
 * full layer (all alike), none on a sliding layer; without
 * per_layer_config, __post_init__'s defaults. */
static int layer_geometry(const cJSON *cfg, const char *types_of, int n_layers, int head_dim, int n_kv, int k_eq_v,
                          long long *hd_full, long long *kv_full, char *err, size_t err_len) {
  const cJSON *plc = field(cfg, "per_layer_config");
  if (!plc || cJSON_IsNull(plc)) {
    const cJSON *g = field(cfg, "num_global_key_value_heads");
    if (hf__int(field(cfg, "global_head_dim"), "config.json: global_head_dim", 512, 2, 4096, hd_full, err, err_len) ||
        hf__int(k_eq_v && g && !cJSON_IsNull(g) ? g : NULL, "config.json: num_global_key_value_heads", n_kv, 1, 4096,
                kv_full, err, err_len))
      return -EINVAL;
    return 0;
  }
  if (!cJSON_IsObject(plc)) {
    snprintf(err, err_len, "config.json: per_layer_config is not an object");
    return -EINVAL;
  }
  *hd_full = *kv_full = 0;
  for (const cJSON *e = plc->child; e; e = e->next) {
    char *end;
    const long l = strtol(e->string, &end, 10);
    if (*end || end == e->string || l < 0 || l >= n_layers || !cJSON_IsObject(e)) {
      snprintf(err, err_len, "config.json: per_layer_config.%.20s is not a layer index's object", e->string);
      return -EINVAL;
    }
    for (const cJSON *k = e->child; k; k = k->next)
      if (strcmp(k->string, "head_dim") != 0 && strcmp(k->string, "num_key_value_heads") != 0) {
        snprintf(err, err_len, "config.json: per_layer_config.%ld.%.40s is not something tram runs per layer", l,
                 k->string);
        return -EINVAL;
      }
    long long hd, kv;
    char what[96];
    snprintf(what, sizeof what, "config.json: per_layer_config.%ld.head_dim", l);
    if (hf__int(field(e, "head_dim"), what, head_dim, 2, 4096, &hd, err, err_len)) return -EINVAL;
    snprintf(what, sizeof what, "config.json: per_layer_config.%ld.num_key_value_heads", l);
    if (hf__int(field(e, "num_key_value_heads"), what, n_kv, 1, 4096, &kv, err, err_len)) return -EINVAL;
    const int full = types_of[l] == 'f';
    if ((!full && (hd != head_dim || kv != n_kv)) || (full && *hd_full && (hd != *hd_full || kv != *kv_full))) {
      snprintf(err, err_len, "config.json: per_layer_config.%ld: tram runs one head geometry per layer type", l);
      return -EINVAL;
    }
    if (full) *hd_full = hd, *kv_full = kv;
  }
  for (int l = 0; l < n_layers; l++) {
    char key[16];
    snprintf(key, sizeof key, "%d", l);
    if (types_of[l] == 'f' && (!field(plc, key) || !*hd_full)) {
      snprintf(err, err_len, "config.json: per_layer_config has no entry for full layer %d (tram runs one head "
               "geometry per layer type)", l);
      return -EINVAL;
    }
  }
  return 0;
}

/* rope_parameters[type]: its theta, and the rotated dims of a head of
 * head_dim (default: all; proportional: 2 · int(partial · head_dim / 2)). */
static int rope_of(const cJSON *cfg, const char *type, int head_dim, int allow_proportional, double *theta,
                   int *rot_dim, char *err, size_t err_len) {
  const cJSON *rp = field(field(cfg, "rope_parameters"), type);
  char what[96];
  if (!cJSON_IsObject(rp)) {
    snprintf(err, err_len, "config.json: rope_parameters.%s is missing", type);
    return -EINVAL;
  }
  const cJSON *rt = field(rp, "rope_type");
  const char *kind = cJSON_IsString(rt) ? rt->valuestring : "default";
  const int prop = strcmp(kind, "proportional") == 0;
  if (strcmp(kind, "default") != 0 && !(prop && allow_proportional)) {
    snprintf(err, err_len, "config.json: rope_parameters.%s.rope_type \"%.32s\" is not one tram runs (%s)", type, kind,
             allow_proportional ? "default, proportional" : "default");
    return -EINVAL;
  }
  snprintf(what, sizeof what, "config.json: rope_parameters.%s.rope_theta", type);
  if (hf__pos_float(field(rp, "rope_theta"), what, 10000.0, theta, err, err_len)) return -EINVAL;
  *rot_dim = head_dim;
  if (!prop) return 0;
  double factor, partial;
  snprintf(what, sizeof what, "config.json: rope_parameters.%s.factor", type);
  if (hf__pos_float(field(rp, "factor"), what, 1.0, &factor, err, err_len)) return -EINVAL;
  if (factor != 1.0) {
    snprintf(err, err_len, "config.json: rope_parameters.%s.factor %g: tram runs proportional RoPE unscaled", type,
             factor);
    return -EINVAL;
  }
  snprintf(what, sizeof what, "config.json: rope_parameters.%s.partial_rotary_factor", type);
  if (hf__pos_float(field(rp, "partial_rotary_factor"), what, 1.0, &partial, err, err_len)) return -EINVAL;
  if (partial > 1.0) {
    snprintf(err, err_len, "%s is %g (want at most 1)", what, partial);
    return -EINVAL;
  }
  *rot_dim = 2 * (int)(partial * head_dim / 2); /* int(rope_proportion * head_dim // 2) angles */
  return 0;
}

int hf__gemma4_config(gguf_build_t *b, const cJSON *cfg, const char *a, int n_layers, int head_dim, int n_kv_heads,
                      char *err, size_t err_len) {
  static const char *const refused[] = {"use_bidirectional_attention", "attention_bias"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    const cJSON *v = field(cfg, refused[i]);
    if (v && !cJSON_IsNull(v) && !cJSON_IsFalse(v)) {
      snprintf(err, err_len, "config.json: %s is not something tram runs for Gemma 4 yet", refused[i]);
      return -EINVAL;
    }
  }
  long long n_expert = 0, n_used = 0, expert_ff = 0;
  const cJSON *moe = field(cfg, "enable_moe_block");
  if (moe && !cJSON_IsNull(moe) && !cJSON_IsBool(moe)) {
    snprintf(err, err_len, "config.json: enable_moe_block is not a boolean");
    return -EINVAL;
  }
  if (cJSON_IsTrue(moe)) { /* every layer's MLP with the experts beside it */
    const cJSON *eff = field(cfg, "moe_intermediate_size");
    if (!eff || cJSON_IsNull(eff)) eff = field(cfg, "expert_intermediate_size");
    if (hf__int(field(cfg, "num_experts"), "config.json: num_experts", -1, 1, 4096, &n_expert, err, err_len) ||
        hf__int(field(cfg, "top_k_experts"), "config.json: top_k_experts", -1, 1, n_expert, &n_used, err, err_len) ||
        hf__int(eff, "config.json: moe_intermediate_size", -1, 1, 1 << 20, &expert_ff, err, err_len))
      return -EINVAL;
  }
  long long pattern = 0, hd_full = 0, kv_full = 0, ple = 0, ple_vocab = 0, vocab = 0, shared = 0, ff = 0;
  const cJSON *types = field(cfg, "layer_types");
  if (cJSON_IsArray(types)) {
    if (hf__layer_pattern(types, n_layers, &pattern, err, err_len)) return -EINVAL;
  } else { /* __post_init__'s default: five sliding layers to one full, the last one full */
    pattern = 6;
    if (n_layers % 6 != 0) {
      snprintf(err, err_len, "config.json: no layer_types (transformers then forces the last of %d layers full, "
               "which breaks the periodic pattern tram runs)", n_layers);
      return -EINVAL;
    }
  }
  char *types_of = xcalloc((size_t)n_layers + 1, 1);
  for (int l = 0; l < n_layers; l++) types_of[l] = pattern && (l + 1) % pattern == 0 ? 'f' : 's';
  const int k_eq_v = cJSON_IsTrue(field(cfg, "attention_k_eq_v"));
  int rc = layer_geometry(cfg, types_of, n_layers, head_dim, n_kv_heads, k_eq_v, &hd_full, &kv_full, err, err_len);
  double theta = 0, theta_full = 0, cap = 0;
  int rot = 0, rot_full = 0;
  if (rc == 0) rc = rope_of(cfg, "sliding_attention", head_dim, 0, &theta, &rot, err, err_len);
  if (rc == 0 && pattern) rc = rope_of(cfg, "full_attention", (int)hd_full, 1, &theta_full, &rot_full, err, err_len);
  if (rc == 0 && !pattern) theta_full = theta, rot_full = head_dim, hd_full = head_dim, kv_full = n_kv_heads;
  if (rc == 0)
    rc = hf__int(field(cfg, "hidden_size_per_layer_input"), "config.json: hidden_size_per_layer_input", 256, 0, 4096,
                 &ple, err, err_len);
  if (rc == 0) rc = hf__int(field(cfg, "vocab_size"), "config.json: vocab_size", -1, 1, 1 << 24, &vocab, err, err_len);
  if (rc == 0)
    rc = hf__int(field(cfg, "vocab_size_per_layer_input"), "config.json: vocab_size_per_layer_input", 262144, 1,
                 1 << 24, &ple_vocab, err, err_len);
  if (rc == 0 && ple > 0 && ple_vocab != vocab) {
    snprintf(err, err_len, "config.json: vocab_size_per_layer_input %lld differs from vocab_size %lld (tram runs "
             "per-layer inputs over the whole vocabulary)", ple_vocab, vocab);
    rc = -EINVAL;
  }
  if (rc == 0)
    rc = hf__int(field(cfg, "num_kv_shared_layers"), "config.json: num_kv_shared_layers", 0, 0, n_layers - 1,
                 &shared, err, err_len);
  for (int l = n_layers - (int)shared; rc == 0 && l < n_layers; l++) { /* a producer of each shared type */
    const char *owner = memchr(types_of, types_of[l], (size_t)(n_layers - shared));
    if (!owner) {
      snprintf(err, err_len, "config.json: num_kv_shared_layers %lld: shared layer %d (%s) has no earlier layer of "
               "its type to read K/V from", shared, l, types_of[l] == 'f' ? "full" : "sliding");
      rc = -EINVAL;
    }
  }
  if (rc == 0) rc = hf__int(field(cfg, "intermediate_size"), "config.json: intermediate_size", -1, 1, 1 << 22, &ff,
                            err, err_len);
  const cJSON *c = field(cfg, "final_logit_softcapping");
  if (rc == 0 && c && !cJSON_IsNull(c))
    rc = hf__pos_float(c, "config.json: final_logit_softcapping", 0, &cap, err, err_len);
  free(types_of);
  if (rc != 0) return rc;
  /* the keys llama.cpp's converter writes (conversion/gemma.py Gemma4Model), read by model_gemma_hparams.c */
  char key[96];
#define U32(name, v) (snprintf(key, sizeof key, "%s." name, a), gguf_build_u32(b, key, (uint32_t)(v)))
#define F32(name, v) (snprintf(key, sizeof key, "%s." name, a), gguf_build_f32(b, key, (float)(v)))
#define KEY(name) (snprintf(key, sizeof key, "%s." name, a), key)
  uint8_t *swa = xmalloc((size_t)n_layers);
  int32_t *kv = xmalloc((size_t)n_layers * sizeof *kv), *ffs = xmalloc((size_t)n_layers * sizeof *ffs);
  const long long ff_shared = cJSON_IsTrue(field(cfg, "use_double_wide_mlp")) ? 2 * ff : ff;
  for (int l = 0; l < n_layers; l++) {
    const int full = pattern && (l + 1) % pattern == 0;
    swa[l] = !full;
    kv[l] = (int32_t)(full ? kv_full : n_kv_heads);
    ffs[l] = (int32_t)(l >= n_layers - shared ? ff_shared : ff);
  }
  gguf_build_arr_bool(b, KEY("attention.sliding_window_pattern"), swa, (size_t)n_layers);
  gguf_build_arr_i32(b, KEY("attention.head_count_kv"), kv, (size_t)n_layers);
  if (ff_shared != ff)
    gguf_build_arr_i32(b, KEY("feed_forward_length"), ffs, (size_t)n_layers);
  else
    U32("feed_forward_length", ff);
  free(swa);
  free(kv);
  free(ffs);
  U32("attention.key_length", hd_full);
  U32("attention.value_length", hd_full);
  U32("attention.key_length_swa", head_dim);
  U32("attention.value_length_swa", head_dim);
  U32("attention.shared_kv_layers", shared);
  U32("embedding_length_per_layer_input", ple);
  U32("rope.dimension_count", hd_full);
  U32("rope.dimension_count_swa", head_dim);
  F32("rope.freq_base", theta_full);
  F32("rope.freq_base_swa", theta);
  if (cap > 0) F32("final_logit_softcapping", cap);
  if (n_expert > 0) {
    U32("expert_count", n_expert);
    U32("expert_used_count", n_used);
    U32("expert_feed_forward_length", expert_ff);
  }
#undef U32
#undef F32
#undef KEY
  if (pattern) { /* the full layers' proportional RoPE as divisors: 1 for the pairs that turn, 1e30 for the rest */
    const int half = (int)hd_full / 2;
    float *div = xmalloc((size_t)half * sizeof *div);
    for (int i = 0; i < half; i++) div[i] = 2 * i < rot_full ? 1.0f : 1e30f;
    gguf_build_keep(b, div);
    const int64_t ne[1] = {half};
    if (gguf_build_tensor(b, "rope_freqs.weight", KERN_F32, 1, ne, div, (uint64_t)half * sizeof *div)) {
      snprintf(err, err_len, "config.json: the full layers' head_dim %lld", hd_full);
      return -EINVAL;
    }
  }
  return 0;
}
