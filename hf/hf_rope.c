/* hf/hf_rope.c — config.json's RoPE fields read into llama.cpp's keys (see
 * hf_internal.h): rope_theta (top-level, or in transformers 5's
 * rope_parameters, whose per-layer-type form is refused) and rope_scaling /
 * rope_parameters by rope_type:
 *   default               nothing to write
 *   linear, llama3        factor; llama3's low/high_freq_factor and
 *                         original_max_position_embeddings
 *   longrope (su)         phi3: long_factor / short_factor lists (the
 *                         rope_factors_{long,short} tensors hf_open.c writes),
 *                         original_max_position_embeddings, attention_factor
 *   yarn                  gpt_oss: factor, original_max_position_embeddings,
 *                         beta_fast/slow, attention_factor, truncate (as
 *                         tram.rope.scaling.yarn_truncate); DeepSeek's mscale
 *                         is refused
 * Any other type is refused by name. The other config.json fields are
 * hf_config.c's. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "hf/hf_internal.h"

static const cJSON *field(const cJSON *o, const char *name) { return cJSON_GetObjectItemCaseSensitive(o, name); }

/* Reads an array of n positive numbers (a LongRoPE factor list). */
static float *factors(const cJSON *v, int n, const char *what, char *err, size_t err_len) {
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != n) {
    snprintf(err, err_len, "%s is not a list of %d numbers", what, n);
    return NULL;
  }
  float *f = xmalloc((size_t)n * sizeof *f);
  for (int i = 0; i < n; i++) {
    const cJSON *x = cJSON_GetArrayItem(v, i);
    if (!cJSON_IsNumber(x) || !(x->valuedouble > 0) || !isfinite(x->valuedouble)) {
      snprintf(err, err_len, "%s[%d] is not a positive number", what, i);
      free(f);
      return NULL;
    }
    f[i] = (float)x->valuedouble;
  }
  return f;
}

/* `<a>.<name>` = v. */
static void put_f32(gguf_build_t *b, const char *a, const char *name, double v) {
  char key[96];
  snprintf(key, sizeof key, "%s.%s", a, name);
  gguf_build_f32(b, key, (float)v);
}
static void put_u32(gguf_build_t *b, const char *a, const char *name, long long v) {
  char key[96];
  snprintf(key, sizeof key, "%s.%s", a, name);
  gguf_build_u32(b, key, (uint32_t)v);
}

/* rope_scaling → keys. */
int hf__rope_scaling(gguf_build_t *b, const cJSON *cfg, const char *a, hf_arch_t *arch, int rot_dim, char *err,
                     size_t err_len) {
  const cJSON *rs = field(cfg, "rope_scaling");
  if (!rs || cJSON_IsNull(rs)) rs = field(cfg, "rope_parameters"); /* transformers 5 */
  if ((!rs || cJSON_IsNull(rs)) && strcmp(a, "gpt-oss") == 0) { /* transformers' default: YaRN of factor 32 */
    snprintf(err, err_len, "config.json: rope_scaling / rope_parameters is missing (gpt_oss's YaRN must be given)");
    return -EINVAL;
  }
  if (!rs || cJSON_IsNull(rs)) return 0;
  const cJSON *type = field(rs, "rope_type");
  if (!cJSON_IsString(type)) type = field(rs, "type");
  const int v5 = rs == field(cfg, "rope_parameters");
  const char *fname = v5 ? "rope_parameters" : "rope_scaling";
  if (!type && v5 && strcmp(a, "gpt-oss") != 0) return 0; /* rope_parameters with rope_theta alone */
  if (!cJSON_IsObject(rs) || !cJSON_IsString(type)) {
    snprintf(err, err_len, "config.json: %s has no rope_type", fname);
    return -EINVAL;
  }
  const char *t = type->valuestring;
  char key[96];
  double factor, lo, hi;
  long long orig;
  if (strcmp(t, "default") == 0) return 0;
  if (strcmp(t, "linear") == 0 || strcmp(t, "llama3") == 0) {
    if (hf__pos_float(field(rs, "factor"), "config.json: rope_scaling.factor", 0, &factor, err, err_len))
      return -EINVAL;
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    gguf_build_str(b, key, t, strlen(t));
    put_f32(b, a, "rope.scaling.factor", factor);
    if (t[1] == 'i') return 0; /* linear */
    if (hf__pos_float(field(rs, "low_freq_factor"), "config.json: rope_scaling.low_freq_factor", 1.0, &lo, err,
                      err_len) ||
        hf__pos_float(field(rs, "high_freq_factor"), "config.json: rope_scaling.high_freq_factor", 4.0, &hi, err,
                      err_len) ||
        hf__int(field(rs, "original_max_position_embeddings"), "config.json: rope_scaling.original_max_position_embeddings",
                8192, 1, INT32_MAX, &orig, err, err_len))
      return -EINVAL;
    put_f32(b, a, "rope.scaling.low_freq_factor", lo);
    put_f32(b, a, "rope.scaling.high_freq_factor", hi);
    put_u32(b, a, "rope.scaling.original_context_length", orig);
    return 0;
  }
  if ((strcmp(t, "longrope") == 0 || strcmp(t, "su") == 0) && strcmp(a, "phi3") == 0) {
    if (hf__int(field(cfg, "original_max_position_embeddings"), "config.json: original_max_position_embeddings", -1,
                1, INT32_MAX, &orig, err, err_len))
      return -EINVAL;
    arch->n_rope = rot_dim / 2;
    arch->rope_long = factors(field(rs, "long_factor"), arch->n_rope, "config.json: rope_scaling.long_factor", err,
                              err_len);
    if (!arch->rope_long) return -EINVAL;
    arch->rope_short = factors(field(rs, "short_factor"), arch->n_rope, "config.json: rope_scaling.short_factor",
                               err, err_len);
    if (!arch->rope_short) return -EINVAL;
    snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", a);
    gguf_build_u32(b, key, (uint32_t)orig);
    double af;
    const cJSON *v = field(rs, "attention_factor");
    if (v && !cJSON_IsNull(v)) {
      if (hf__pos_float(v, "config.json: rope_scaling.attention_factor", 0, &af, err, err_len)) return -EINVAL;
      snprintf(key, sizeof key, "%s.rope.scaling.attn_factor", a);
      gguf_build_f32(b, key, (float)af);
    }
    return 0;
  }
  if (strcmp(t, "yarn") == 0 && strcmp(a, "gpt-oss") == 0) { /* HF _compute_yarn_parameters' fields */
    double bf, bs, af = 0;
    if (field(rs, "mscale") || field(rs, "mscale_all_dim")) {
      snprintf(err, err_len, "config.json: %s.mscale / mscale_all_dim (DeepSeek's YaRN attention factor) is not "
               "something tram runs", fname);
      return -EINVAL;
    }
    const cJSON *tr = field(rs, "truncate");
    char what[5][80];
    static const char *const NAMES[5] = {"factor", "original_max_position_embeddings", "beta_fast", "beta_slow",
                                         "attention_factor"};
    for (int i = 0; i < 5; i++) snprintf(what[i], sizeof what[i], "config.json: %s.%s", fname, NAMES[i]);
    const cJSON *afv = field(rs, "attention_factor");
    if (hf__pos_float(field(rs, "factor"), what[0], 0, &factor, err, err_len) ||
        hf__int(field(rs, "original_max_position_embeddings"), what[1], -1, 1, INT32_MAX, &orig, err, err_len) ||
        hf__pos_float(field(rs, "beta_fast"), what[2], 32.0, &bf, err, err_len) ||
        hf__pos_float(field(rs, "beta_slow"), what[3], 1.0, &bs, err, err_len) ||
        (afv && !cJSON_IsNull(afv) && hf__pos_float(afv, what[4], 0, &af, err, err_len)))
      return -EINVAL;
    if (tr && !cJSON_IsNull(tr) && !cJSON_IsBool(tr)) {
      snprintf(err, err_len, "config.json: %s.truncate is not a boolean", fname);
      return -EINVAL;
    }
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    gguf_build_str(b, key, t, strlen(t));
    put_f32(b, a, "rope.scaling.factor", factor);
    put_u32(b, a, "rope.scaling.original_context_length", orig);
    put_f32(b, a, "rope.scaling.yarn_beta_fast", bf);
    put_f32(b, a, "rope.scaling.yarn_beta_slow", bs);
    if (af > 0) put_f32(b, a, "rope.scaling.attn_factor", af);
    gguf_build_u32(b, "tram.rope.scaling.yarn_truncate", !tr || cJSON_IsNull(tr) || cJSON_IsTrue(tr)); /* HF: on */
    return 0;
  }
  snprintf(err, err_len, "config.json: %s type \"%.32s\" is not one tram runs for %s", fname, t, a);
  return -EINVAL;
}

/* rope_theta: top-level (transformers 4), or in rope_parameters (5). The
 * per-layer-type form of rope_parameters ({"full_attention": {...}, ...})
 * is not read: NULL, and the caller's default would be wrong, so it is
 * refused in hf__rope_parameters_flat. */
const cJSON *hf__rope_theta_field(const cJSON *cfg) {
  const cJSON *rp = field(cfg, "rope_parameters");
  const cJSON *v = cJSON_IsObject(rp) ? field(rp, "rope_theta") : NULL;
  return v ? v : field(cfg, "rope_theta");
}

/* Refuses transformers 5's per-layer-type rope_parameters (no rope_theta
 * of its own, objects per layer type), which tram does not map. */
int hf__rope_parameters_flat(const cJSON *cfg, char *err, size_t err_len) {
  const cJSON *rp = field(cfg, "rope_parameters");
  if (!rp || cJSON_IsNull(rp)) return 0;
  if (!cJSON_IsObject(rp)) {
    snprintf(err, err_len, "config.json: rope_parameters is not an object");
    return -EINVAL;
  }
  for (const cJSON *c = rp->child; c; c = c->next) {
    if (cJSON_IsObject(c)) {
      snprintf(err, err_len, "config.json: rope_parameters.%.40s: per-layer-type RoPE parameters are not something "
               "tram reads for this model type", c->string);
      return -EINVAL;
    }
  }
  return 0;
}
