/* model/model_hparams.c — a Llama-family model's hyper-parameters from GGUF
 * metadata, checked, and its RoPE inverse frequencies (see model.h).
 *
 * Keys are `<arch>.<name>` with <arch> the value of general.architecture.
 * RoPE scaling follows llama.cpp's reading of the keys:
 *   - rope.scaling.type "linear" (or no type but rope.scaling.factor, or the
 *     older rope.scale_linear): every frequency divided by the factor;
 *   - rope.scaling.type "llama3": Llama 3.1's band — wavelengths longer than
 *     original_context_length / low_freq_factor are divided by the factor,
 *     shorter than original_context_length / high_freq_factor kept, and
 *     those between interpolated smoothly;
 *   - a rope_freqs.weight tensor (what llama.cpp's converter writes for
 *     Llama 3.1): frequency p divided by rope_freqs[p];
 *   - rope.scaling.type "yarn" (gpt-oss only; Hugging Face's
 *     _compute_yarn_parameters): with d = rot_dim, base b, factor s,
 *     original_context_length L and beta_fast/slow (32, 1), the ramp's
 *     ends lo/hi = d·ln(L / (2π·beta)) / (2 ln b) (floored/ceiled only
 *     under tram.rope.scaling.yarn_truncate), clamped to [0, d - 1];
 *     r_p = clamp((p - lo) / (hi - lo), 0, 1); inv_freq_p =
 *     inv_p / s · r_p + inv_p · (1 - r_p); cos and sin times the
 *     attention factor (rope.scaling.attn_factor, or 0.1 ln s + 1), which
 *     tram folds into the scores' scale as its square;
 *   - "none", or nothing: unscaled. Any other type (longrope through its
 *     tensors only) is refused. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"
#include "model/model_moe.h"
#include "base/alloc.h"

#define MAX_LAYERS 4096
#define MAX_DIM (1 << 20)     /* embedding, MLP, head sizes */
#define MAX_HEADS 4096
#define MAX_VOCAB (1 << 24)

/* An integer key `<arch>.<name>` into *out, in [lo, hi]. When absent: *out =
 * def if def >= 0, else an error. 0, or -EINVAL with err written. */
static int get_int(const gguf_ctx_t *g, const char *arch, const char *name, int64_t def, int64_t lo, int64_t hi,
                   int *out, char *err, size_t err_len) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", arch, name);
  int64_t v;
  int rc = gguf_get_i64(g, key, &v);
  if (rc == -ENOENT && def >= 0) {
    *out = (int)def;
    return 0;
  }
  if (rc == -ENOENT) {
    snprintf(err, err_len, "key '%s' is missing", key);
    return -EINVAL;
  }
  if (rc != 0) {
    snprintf(err, err_len, "key '%s' is not an integer", key);
    return -EINVAL;
  }
  if (v < lo || v > hi) {
    snprintf(err, err_len, "key '%s' is %lld, outside %lld..%lld", key, (long long)v, (long long)lo, (long long)hi);
    return -EINVAL;
  }
  *out = (int)v;
  return 0;
}

/* get_int, or with per_layer an array of one value per layer: *out = its
 * first (the family's reader checks the rest). */
static int get_layer_int(const gguf_ctx_t *g, const char *arch, const char *name, int64_t def, int64_t lo,
                         int64_t hi, int per_layer, int *out, char *err, size_t err_len) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", arch, name);
  const gguf_kv_t *kv = gguf_find_kv(g, key);
  if (!per_layer || !kv || kv->type != GGUF_TYPE_ARRAY) return get_int(g, arch, name, def, lo, hi, out, err, err_len);
  int64_t v;
  if (gguf_arr_i64(kv, 0, &v) != 0 || v < lo || v > hi) {
    snprintf(err, err_len, "key '%s': element 0 is not an integer in %lld..%lld", key, (long long)lo, (long long)hi);
    return -EINVAL;
  }
  *out = (int)v;
  return 0;
}

/* A float key `<arch>.<name>`, finite and > 0; def when absent if def > 0,
 * else an error. */
static int get_pos_float(const gguf_ctx_t *g, const char *arch, const char *name, float def, float *out, char *err,
                         size_t err_len) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", arch, name);
  float v;
  int rc = gguf_get_f32(g, key, &v);
  if (rc == -ENOENT && def > 0) {
    *out = def;
    return 0;
  }
  if (rc != 0 || !(v > 0) || !isfinite(v)) {
    snprintf(err, err_len, "key '%s' is %s", key,
             rc == -ENOENT ? "missing" : rc != 0 ? "not a float" : "not a positive finite number");
    return -EINVAL;
  }
  *out = v;
  return 0;
}

int model__get_int(const gguf_ctx_t *g, const char *arch, const char *name, int64_t def, int64_t lo, int64_t hi,
                   int *out, char *err, size_t err_len) {
  return get_int(g, arch, name, def, lo, hi, out, err, err_len);
}

int model__get_pos_float(const gguf_ctx_t *g, const char *arch, const char *name, float def, float *out, char *err,
                         size_t err_len) {
  return get_pos_float(g, arch, name, def, out, err, err_len);
}

/* Reads the RoPE scaling keys into hp. */
static int read_rope_scaling(const gguf_ctx_t *g, const char *arch, model_hparams_t *hp, char *err, size_t err_len) {
  char key[128];
  gguf_str_t type = {"none", 4};
  snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
  int rc = gguf_get_str(g, key, &type);
  if (rc != 0 && rc != -ENOENT) {
    snprintf(err, err_len, "key '%s' is not a string", key);
    return -EINVAL;
  }
  int have_type = rc == 0;
  snprintf(key, sizeof key, "%s.rope.scaling.factor", arch);
  int have_factor = gguf_find_kv(g, key) != NULL;
  snprintf(key, sizeof key, "%s.rope.scale_linear", arch);
  int have_linear = gguf_find_kv(g, key) != NULL;

  hp->rope_scaling = MODEL_ROPE_SCALING_NONE;
  hp->rope_factor = 1.0f;
  if (gguf_str_eq(type, "none") && !have_type && (have_factor || have_linear)) type = (gguf_str_t){"linear", 6};
  if (gguf_str_eq(type, "none")) return 0;
  if (gguf_str_eq(type, "linear")) {
    rc = get_pos_float(g, arch, have_factor || !have_linear ? "rope.scaling.factor" : "rope.scale_linear", 0,
                       &hp->rope_factor, err, err_len);
    if (rc == 0 && hp->rope_factor != 1.0f) hp->rope_scaling = MODEL_ROPE_SCALING_LINEAR;
    return rc;
  }
  if (gguf_str_eq(type, "llama3")) {
    hp->rope_scaling = MODEL_ROPE_SCALING_LLAMA3;
    rc = get_pos_float(g, arch, "rope.scaling.factor", 8.0f, &hp->rope_factor, err, err_len);
    if (rc == 0)
      rc = get_pos_float(g, arch, "rope.scaling.low_freq_factor", 1.0f, &hp->rope_low_freq_factor, err, err_len);
    if (rc == 0)
      rc = get_pos_float(g, arch, "rope.scaling.high_freq_factor", 4.0f, &hp->rope_high_freq_factor, err, err_len);
    if (rc == 0)
      rc = get_int(g, arch, "rope.scaling.original_context_length", 8192, 1, INT32_MAX, &hp->rope_orig_ctx, err,
                   err_len);
    if (rc == 0 && !(hp->rope_high_freq_factor > hp->rope_low_freq_factor)) {
      snprintf(err, err_len, "key '%s.rope.scaling.high_freq_factor' (%g) must exceed low_freq_factor (%g)", arch,
               hp->rope_high_freq_factor, hp->rope_low_freq_factor);
      rc = -EINVAL;
    }
    return rc;
  }
  if (gguf_str_eq(type, "yarn") && hp->arch == MODEL_ARCH_GPTOSS) {
    hp->rope_scaling = MODEL_ROPE_SCALING_YARN;
    float af = 0;
    rc = get_pos_float(g, arch, "rope.scaling.factor", 0, &hp->rope_factor, err, err_len);
    if (rc == 0)
      rc = get_int(g, arch, "rope.scaling.original_context_length", 4096, 1, INT32_MAX, &hp->rope_orig_ctx, err,
                   err_len);
    if (rc == 0) rc = get_pos_float(g, arch, "rope.scaling.yarn_beta_fast", 32.0f, &hp->rope_yarn_beta_fast, err, err_len);
    if (rc == 0) rc = get_pos_float(g, arch, "rope.scaling.yarn_beta_slow", 1.0f, &hp->rope_yarn_beta_slow, err, err_len);
    if (rc == 0)
      rc = get_pos_float(g, arch, "rope.scaling.attn_factor",
                         hp->rope_factor > 1 ? (float)(0.1 * log((double)hp->rope_factor) + 1.0) : 1.0f, &af, err,
                         err_len);
    int64_t trunc = 0;
    hp->rope_yarn_truncate = gguf_get_i64(g, "tram.rope.scaling.yarn_truncate", &trunc) == 0 && trunc != 0;
    hp->attn_scale = af * af / sqrtf((float)hp->head_dim);
    return rc;
  }
  snprintf(err, err_len, "key '%s.rope.scaling.type' is \"%.*s\": tram supports none, linear and llama3", arch,
           (int)(type.len > 32 ? 32 : type.len), type.ptr);
  return -EINVAL;
}

/* Computes the inverse frequencies [rot_dim / 2] of hp (and rope_freqs, a
 * tensor already checked, or NULL). */
static float *inv_freq_compute(const model_hparams_t *hp, const gguf_tensor_t *rope_freqs) {
  const int half = hp->rot_dim / 2;
  float *out = xmalloc((size_t)half * sizeof *out);
  for (int p = 0; p < half; p++) {
    double inv = 1.0 / pow((double)hp->rope_base, 2.0 * p / hp->rot_dim);
    if (hp->rope_scaling == MODEL_ROPE_SCALING_LINEAR) {
      inv /= hp->rope_factor;
    } else if (hp->rope_scaling == MODEL_ROPE_SCALING_LLAMA3) {
      const double wavelen = 2.0 * M_PI / inv, old_ctx = hp->rope_orig_ctx;
      const double lo = hp->rope_low_freq_factor, hi = hp->rope_high_freq_factor, factor = hp->rope_factor;
      if (wavelen > old_ctx / lo) {
        inv /= factor;
      } else if (wavelen >= old_ctx / hi) {
        const double smooth = (old_ctx / wavelen - lo) / (hi - lo);
        inv = (1 - smooth) * inv / factor + smooth * inv;
      }
    } else if (hp->rope_scaling == MODEL_ROPE_SCALING_YARN) {
      const double d = hp->rot_dim, lb = 2.0 * log((double)hp->rope_base);
      double lo = d * log(hp->rope_orig_ctx / (2.0 * M_PI * hp->rope_yarn_beta_fast)) / lb;
      double hi = d * log(hp->rope_orig_ctx / (2.0 * M_PI * hp->rope_yarn_beta_slow)) / lb;
      if (hp->rope_yarn_truncate) lo = floor(lo), hi = ceil(hi);
      lo = lo > 0 ? lo : 0;
      hi = hi < d - 1 ? hi : d - 1;
      if (lo == hi) hi += 0.001;
      double r = (p - lo) / (hi - lo);
      r = r < 0 ? 0 : r > 1 ? 1 : r;
      inv = inv / hp->rope_factor * r + inv * (1 - r);
    } else if (hp->rope_scaling == MODEL_ROPE_SCALING_FREQ_TENSOR) {
      float f;
      memcpy(&f, (const char *)rope_freqs->data + (size_t)p * sizeof f, sizeof f);
      inv /= f;
    }
    out[p] = (float)inv;
  }
  return out;
}

/* Checks the per-frequency divisor tensor `name` (rope_freqs.weight, or
 * phi3's rope_factors_{long,short}.weight), when present: F32
 * [rot_dim / 2], positive finite values, and no other scaling. *t = the
 * tensor or NULL. */
static int check_freq_tensor(const gguf_ctx_t *g, const model_hparams_t *hp, const char *name,
                             const gguf_tensor_t **t, char *err, size_t err_len) {
  *t = gguf_find_tensor(g, name);
  if (!*t) return 0;
  const gguf_tensor_t *f = *t;
  if (f->type != KERN_F32 || f->n_dims != 1 || f->ne[0] != hp->rot_dim / 2) {
    snprintf(err, err_len, "tensor '%s' must be F32 [%d] (rope.dimension_count / 2)", name, hp->rot_dim / 2);
    return -EINVAL;
  }
  if (hp->rope_scaling != MODEL_ROPE_SCALING_NONE) {
    snprintf(err, err_len, "tensor '%s' and rope.scaling.type given together", name);
    return -EINVAL;
  }
  for (int64_t p = 0; p < f->ne[0]; p++) {
    float v;
    memcpy(&v, (const char *)f->data + p * (int64_t)sizeof v, sizeof v);
    if (!(v > 0) || !isfinite(v)) {
      snprintf(err, err_len, "tensor '%s': element %lld is %g, not a positive finite factor", name, (long long)p, v);
      return -EINVAL;
    }
  }
  return 0;
}

/* rope_freqs.weight (Llama 3.1's scaling as llama.cpp stores it). */
static int check_rope_freqs(const gguf_ctx_t *g, model_hparams_t *hp, const gguf_tensor_t **t, char *err,
                            size_t err_len) {
  int rc = check_freq_tensor(g, hp, "rope_freqs.weight", t, err, err_len);
  if (rc == 0 && *t) hp->rope_scaling = MODEL_ROPE_SCALING_FREQ_TENSOR;
  return rc;
}

/* Phi-3's LongRoPE (HF _compute_longrope_parameters): frequency p divided
 * by long_factor[p] when the model's context exceeds
 * rope.scaling.original_context_length, else by short_factor[p], fixed at
 * load as llama.cpp does with its default context (HF switches per
 * forward on the sequence length); cos and sin times the attention factor
 * (rope.scaling.attn_factor, or sqrt(1 + ln(ctx / orig) / ln(orig))),
 * which tram folds into the scores' scale as its square. */
static int read_longrope(const gguf_ctx_t *g, const char *arch, model_hparams_t *hp, const gguf_tensor_t **t,
                         char *err, size_t err_len) {
  const gguf_tensor_t *lf, *sf;
  int rc = check_freq_tensor(g, hp, "rope_factors_long.weight", &lf, err, err_len);
  if (rc == 0) rc = check_freq_tensor(g, hp, "rope_factors_short.weight", &sf, err, err_len);
  if (rc != 0 || (!lf && !sf)) return rc;
  if (!lf || !sf) {
    snprintf(err, err_len, "tensor 'rope_factors_%s.weight' is missing (LongRoPE needs both)", lf ? "short" : "long");
    return -EINVAL;
  }
  int orig;
  rc = get_int(g, arch, "rope.scaling.original_context_length", -1, 1, INT32_MAX, &orig, err, err_len);
  if (rc != 0) return rc;
  const double factor = (double)hp->n_ctx / orig;
  float af = factor <= 1.0 || orig < 2 ? 1.0f : (float)sqrt(1.0 + log(factor) / log((double)orig));
  rc = get_pos_float(g, arch, "rope.scaling.attn_factor", af, &af, err, err_len);
  if (rc != 0) return rc;
  *t = hp->n_ctx > orig ? lf : sf;
  hp->rope_scaling = MODEL_ROPE_SCALING_FREQ_TENSOR;
  hp->rope_longrope = 1;
  hp->rope_orig_ctx = orig;
  hp->attn_scale = af * af / sqrtf((float)hp->head_dim);
  return 0;
}

/* The vocabulary size: the tokenizer's token count, checked against
 * vocab_size when both are given; token_embd's rows when neither is. */
static int read_vocab(const gguf_ctx_t *g, const char *arch, model_hparams_t *hp, char *err, size_t err_len) {
  const gguf_str_t *toks;
  int64_t n = gguf_get_arr_str(g, "tokenizer.ggml.tokens", &toks);
  if (n < 0 && n != -ENOENT) {
    snprintf(err, err_len, "key 'tokenizer.ggml.tokens' is not an array of strings");
    return -EINVAL;
  }
  int from_key = -1;
  int rc = get_int(g, arch, "vocab_size", 0, 1, MAX_VOCAB, &from_key, err, err_len);
  if (rc != 0) return rc;
  if (n > 0 && from_key > 0 && n != from_key) {
    snprintf(err, err_len, "key '%s.vocab_size' is %d but tokenizer.ggml.tokens holds %lld tokens", arch, from_key,
             (long long)n);
    return -EINVAL;
  }
  if (n <= 0) n = from_key;
  if (n <= 0) {
    const gguf_tensor_t *e = gguf_find_tensor(g, "token_embd.weight");
    n = e ? e->ne[1] : 0;
  }
  if (n < 1 || n > MAX_VOCAB) {
    snprintf(err, err_len, "vocabulary size %lld (tokenizer.ggml.tokens) outside 1..%d", (long long)n, MAX_VOCAB);
    return -EINVAL;
  }
  hp->n_vocab = (int)n;
  return 0;
}

/* The `<arch>.` keys only phi3 reads. */
static const char *const PHI3_KEYS[] = {"rope.scaling.attn_factor", NULL};

/* The `<arch>.` keys only the qwen35 hybrid reads (read_hybrid). */
static const char *const QWEN35_KEYS[] = {"ssm.conv_kernel", "ssm.state_size", "ssm.group_count",
                                          "ssm.time_step_rank", "ssm.inner_size", "full_attention_interval",
                                          "rope.dimension_sections", "nextn_predict_layers",
                                          "attention.recurrent_layers", NULL};

/* The `<arch>.` keys the hybrids with experts read: the hybrid's and the
 * mixture's. */
static const char *const HYBRID_MOE_KEYS[] = {"ssm.conv_kernel", "ssm.state_size", "ssm.group_count",
                                              "ssm.time_step_rank", "ssm.inner_size", "full_attention_interval",
                                              "rope.dimension_sections", "nextn_predict_layers",
                                              "attention.recurrent_layers", "expert_count",
                                              "expert_used_count", "expert_feed_forward_length",
                                              "expert_shared_feed_forward_length", "expert_weights_norm", NULL};

/* The `<arch>.` keys gpt-oss reads: the mixture's and YaRN's. */
static const char *const GPTOSS_KEYS[] = {"expert_count", "expert_used_count", "expert_feed_forward_length",
                                          "expert_shared_feed_forward_length", "expert_weights_norm",
                                          "rope.scaling.attn_factor", "rope.scaling.yarn_beta_fast",
                                          "rope.scaling.yarn_beta_slow", NULL};

/* The architectures tram runs: name, Hugging Face's causal-LM class for it
 * (its config.json `architectures`), RoPE pairing, Q/K/V biases (1: always,
 * 0: when the file has them), per-head Q/K norms, Gemma's block (2 or 3),
 * the keys beyond KNOWN_KEYS it reads, fused QKV and gate/up (phi3). */
static const struct arch_info {
  const char *name;
  const char *hf_class;
  model_arch_t arch;
  int neox, qkv_bias, qk_norm, gemma;
  const char *const *extra_keys;
  int fused;
} ARCHS[] = {
    {"llama", "LlamaForCausalLM", MODEL_ARCH_LLAMA, 0, 0, 0, 0, MODEL_MOE_KEYS, 0}, /* experts: Mixtral */
    {"qwen2", "Qwen2ForCausalLM", MODEL_ARCH_QWEN2, 1, 1, 0, 0, NULL, 0},
    {"qwen3", "Qwen3ForCausalLM", MODEL_ARCH_QWEN3, 1, 0, 1, 0, NULL, 0},
    {"gemma2", "Gemma2ForCausalLM", MODEL_ARCH_GEMMA2, 1, 0, 0, 2, model__gemma_keys, 0},
    {"gemma3", "Gemma3ForCausalLM", MODEL_ARCH_GEMMA3, 1, 0, 1, 3, model__gemma_keys, 0},
    {"phi3", "Phi3ForCausalLM", MODEL_ARCH_PHI3, 1, 0, 0, 0, PHI3_KEYS, 1},
    {"qwen35", "Qwen3_5ForCausalLM", MODEL_ARCH_QWEN35, 1, 0, 1, 0, QWEN35_KEYS, 0},
    {"smollm3", "SmolLM3ForCausalLM", MODEL_ARCH_SMOLLM3, 0, 0, 0, 0, NULL, 0},
    {"gemma4", "Gemma4ForCausalLM", MODEL_ARCH_GEMMA4, 1, 0, 1, 0, model__gemma4_keys, 0},
    {"qwen2moe", "Qwen2MoeForCausalLM", MODEL_ARCH_QWEN2MOE, 1, 1, 0, 0, MODEL_MOE_KEYS, 0},
    {"qwen3moe", "Qwen3MoeForCausalLM", MODEL_ARCH_QWEN3MOE, 1, 0, 1, 0, MODEL_MOE_KEYS, 0},
    {"gpt-oss", "GptOssForCausalLM", MODEL_ARCH_GPTOSS, 1, 1, 0, 0, GPTOSS_KEYS, 0},
    {"qwen35moe", "Qwen3_5MoeForCausalLM", MODEL_ARCH_QWEN35MOE, 1, 0, 1, 0, HYBRID_MOE_KEYS, 0},
    {"qwen3next", "Qwen3NextForCausalLM", MODEL_ARCH_QWEN3NEXT, 1, 0, 1, 0, HYBRID_MOE_KEYS, 0},
};
#define N_ARCHS (sizeof ARCHS / sizeof ARCHS[0])

const char *model_arch_name(model_arch_t arch) {
  for (size_t i = 0; i < N_ARCHS; i++)
    if (ARCHS[i].arch == arch) return ARCHS[i].name;
  return "?";
}

const char *model_arch_hf_class(model_arch_t arch) {
  for (size_t i = 0; i < N_ARCHS; i++)
    if (ARCHS[i].arch == arch) return ARCHS[i].hf_class;
  return "?";
}

/* The `<arch>.` keys tram reads (above), and those it may ignore because
 * they do not change the forward. Any other key under the architecture's
 * prefix means a feature tram does not run: an error naming it. */
static const char *const KNOWN_KEYS[] = {
    "block_count", "embedding_length", "feed_forward_length", "context_length", "vocab_size",
    "attention.head_count", "attention.head_count_kv", "attention.key_length", "attention.value_length",
    "attention.layer_norm_rms_epsilon", "attention.sliding_window", "rope.freq_base", "rope.dimension_count",
    "rope.scaling.type", "rope.scaling.factor", "rope.scale_linear", "rope.scaling.low_freq_factor",
    "rope.scaling.high_freq_factor", "rope.scaling.original_context_length",
    "rope.scaling.finetuned", /* a training note */
    "pooling_type",           /* embeddings only: how /v1/embeddings pools the hidden states */
};

/* Checks that every `<arch>.*` key is known (or one of extra, NULL
 * terminated); integer-valued expert counts of 0 (what converters write
 * for dense models) are accepted too. */
static int check_keys(const gguf_ctx_t *g, const char *arch, const char *const *extra, char *err, size_t err_len) {
  const size_t alen = strlen(arch);
  for (uint64_t i = 0; i < gguf_kv_count(g); i++) {
    const gguf_str_t key = gguf_kv_at(g, i)->key;
    if (key.len <= alen || memcmp(key.ptr, arch, alen) != 0 || key.ptr[alen] != '.') continue;
    const gguf_str_t rest = {key.ptr + alen + 1, key.len - alen - 1};
    int known = 0;
    for (size_t k = 0; k < sizeof KNOWN_KEYS / sizeof KNOWN_KEYS[0] && !known; k++)
      known = gguf_str_eq(rest, KNOWN_KEYS[k]);
    for (size_t k = 0; extra && extra[k] && !known; k++) known = gguf_str_eq(rest, extra[k]);
    if (!known && (gguf_str_eq(rest, "expert_count") || gguf_str_eq(rest, "expert_used_count"))) {
      int64_t v;
      char name[64];
      snprintf(name, sizeof name, "%s.%.*s", arch, (int)rest.len, rest.ptr);
      known = gguf_get_i64(g, name, &v) == 0 && v == 0;
    }
    if (!known) {
      snprintf(err, err_len, "key '%.*s' is not something tram handles for the %s architecture",
               (int)(key.len > 80 ? 80 : key.len), key.ptr, arch);
      return -EINVAL;
    }
  }
  return 0;
}

/* Qwen3.5's hybrid (llama.cpp's qwen35 keys): the Gated DeltaNet shape
 * under ssm.* (conv_kernel, state_size = key head width, group_count = key
 * heads, time_step_rank = value heads, inner_size = value heads × width),
 * full_attention_interval (4 when absent), the gated attention. The
 * multi-token-prediction layers (nextn_predict_layers > 0) are refused:
 * tram does not run them, and they count in block_count.
 * rope.dimension_sections (M-RoPE's split) changes nothing for text, whose
 * three position components are equal. attention.recurrent_layers (one
 * boolean per layer, what llama.cpp's converter writes from layer_types)
 * must be the pattern full_attention_interval gives; an interval of 1 (no
 * recurrent layer) is refused. */
static int read_hybrid(const gguf_ctx_t *g, const char *arch, model_hparams_t *hp, char *err, size_t err_len) {
  int inner, nextn;
  int rc = get_int(g, arch, "full_attention_interval", 4, 1, MAX_LAYERS, &hp->full_attn_interval, err, err_len);
  if (rc == 0) rc = get_int(g, arch, "ssm.conv_kernel", -1, 1, 9, &hp->ssm_conv_kernel, err, err_len);
  if (rc == 0) rc = get_int(g, arch, "ssm.state_size", -1, 1, 512, &hp->ssm_head_k, err, err_len);
  if (rc == 0) rc = get_int(g, arch, "ssm.group_count", -1, 1, MAX_HEADS, &hp->ssm_n_k_heads, err, err_len);
  if (rc == 0) rc = get_int(g, arch, "ssm.time_step_rank", -1, 1, MAX_HEADS, &hp->ssm_n_v_heads, err, err_len);
  if (rc == 0) rc = get_int(g, arch, "ssm.inner_size", -1, 1, MAX_DIM, &inner, err, err_len);
  if (rc == 0) rc = get_int(g, arch, "nextn_predict_layers", 0, 0, MAX_LAYERS, &nextn, err, err_len);
  if (rc != 0) return rc;
  if (nextn > 0) {
    snprintf(err, err_len, "key '%s.nextn_predict_layers' is %d: tram does not run multi-token-prediction layers "
             "(convert without them)", arch, nextn);
    return -EINVAL;
  }
  if (hp->full_attn_interval == 1) { /* nothing recurrent: no state to keep, and not what tram runs as a hybrid */
    snprintf(err, err_len, "key '%s.full_attention_interval' is 1: every layer is full attention, no layer is "
             "recurrent (a %s model has Gated DeltaNet layers; tram does not run it without them)", arch, arch);
    return -EINVAL;
  }
  if (hp->ssm_n_v_heads % hp->ssm_n_k_heads != 0 || inner % hp->ssm_n_v_heads != 0 ||
      inner / hp->ssm_n_v_heads > 512) {
    snprintf(err, err_len, "keys '%s.ssm.*': %d value heads, %d key heads, inner size %d (want value heads a "
             "multiple of key heads, inner size a multiple of value heads, heads of at most 512)",
             arch, hp->ssm_n_v_heads, hp->ssm_n_k_heads, inner);
    return -EINVAL;
  }
  hp->ssm_head_v = inner / hp->ssm_n_v_heads;
  hp->ssm_ba_fused = hp->arch == MODEL_ARCH_QWEN3NEXT;
  hp->ssm_conv_dim = 2 * hp->ssm_n_k_heads * hp->ssm_head_k + inner;
  hp->attn_out_gate = 1;
  int64_t grouped = 0; /* hf/'s view keeps Hugging Face's value-head order */
  hp->ssm_v_tiled = !(gguf_get_i64(g, "tram.ssm.v_heads_grouped", &grouped) == 0 && grouped == 1) &&
                    hp->arch != MODEL_ARCH_QWEN3NEXT; /* llama.cpp's qwen3next keeps Hugging Face's order */
  hp->n_attn_layers = hp->n_layers / hp->full_attn_interval;
  char key[128]; /* attention.recurrent_layers (llama.cpp's converter, from layer_types): the same pattern */
  snprintf(key, sizeof key, "%s.attention.recurrent_layers", arch);
  const gguf_kv_t *rl = gguf_find_kv(g, key);
  if (rl && (rl->type != GGUF_TYPE_ARRAY || rl->n != (uint64_t)hp->n_layers)) {
    snprintf(err, err_len, "key '%s' is not an array of %d booleans (one per layer)", key, hp->n_layers);
    return -EINVAL;
  }
  for (int l = 0; rl && l < hp->n_layers; l++) {
    int rec;
    if (gguf_arr_bool(rl, (uint64_t)l, &rec) != 0) {
      snprintf(err, err_len, "key '%s': element %d is not a boolean", key, l);
      return -EINVAL;
    }
    if (rec != model_layer_recurrent(hp, l)) {
      snprintf(err, err_len, "key '%s' makes layer %d %s, which full_attention_interval %d does not: tram runs "
               "attention on every n-th layer only", key, l, rec ? "recurrent" : "attention", hp->full_attn_interval);
      return -EINVAL;
    }
  }
  if (hp->n_attn_layers < 1) {
    snprintf(err, err_len, "key '%s.full_attention_interval' is %d for %d layers: no attention layer", arch,
             hp->full_attn_interval, hp->n_layers);
    return -EINVAL;
  }
  return 0;
}

int model__hparams_read(const gguf_ctx_t *g, model_hparams_t *hp, float **inv_freq, char *err, size_t err_len) {
  memset(hp, 0, sizeof *hp);
  *inv_freq = NULL;
  gguf_str_t a;
  if (gguf_get_str(g, "general.architecture", &a) != 0) {
    snprintf(err, err_len, "key 'general.architecture' is missing or not a string");
    return -EINVAL;
  }
  const struct arch_info *ai = NULL;
  for (size_t i = 0; i < N_ARCHS && !ai; i++)
    if (gguf_str_eq(a, ARCHS[i].name)) ai = &ARCHS[i];
  if (!ai) {
    snprintf(err, err_len,
             "unsupported architecture \"%.*s\" (general.architecture): tram runs llama, qwen2, qwen3, "
             "gemma2, gemma3, gemma4, phi3, smollm3, qwen35, qwen35moe, qwen3next, qwen2moe, qwen3moe and gpt-oss",
             (int)(a.len > 40 ? 40 : a.len), a.ptr);
    return -EINVAL;
  }
  const char *arch = ai->name;
  hp->arch = ai->arch;
  hp->rope_neox = ai->neox;
  hp->qk_norm = ai->qk_norm;
  hp->fused = ai->fused;
  int rc = check_keys(g, arch, ai->extra_keys, err, err_len);
  if (rc != 0) return rc;
  const int per_layer = ai->arch == MODEL_ARCH_GEMMA4; /* MLP widths and KV heads may be per layer */
  const int hybrid = ai->arch == MODEL_ARCH_QWEN35 || ai->extra_keys == HYBRID_MOE_KEYS;

  rc = get_int(g, arch, "block_count", -1, 1, MAX_LAYERS, &hp->n_layers, err, err_len);
  if (rc == 0) rc = get_int(g, arch, "embedding_length", -1, 1, MAX_DIM, &hp->dim, err, err_len);
  /* qwen35moe: no dense MLP, no feed_forward_length (0: every layer must have a router) */
  const int no_dense = ai->arch == MODEL_ARCH_QWEN35MOE;
  if (rc == 0)
    rc = get_layer_int(g, arch, "feed_forward_length", no_dense ? 0 : -1, no_dense ? 0 : 1, MAX_DIM, per_layer,
                       &hp->ff_dim, err, err_len);
  if (rc == 0) rc = model__moe_hparams(g, arch, ai->arch != MODEL_ARCH_LLAMA && ai->extra_keys != NULL &&
                                                   (ai->extra_keys == MODEL_MOE_KEYS || ai->extra_keys == GPTOSS_KEYS ||
                                                    ai->extra_keys == HYBRID_MOE_KEYS),
                                       hp, err, err_len);
  if (rc == 0) rc = get_int(g, arch, "attention.head_count", -1, 1, MAX_HEADS, &hp->n_heads, err, err_len);
  if (rc == 0)
    rc = get_layer_int(g, arch, "attention.head_count_kv", hp->n_heads, 1, hp->n_heads, per_layer, &hp->n_kv_heads,
                       err, err_len);
  if (rc == 0) rc = get_int(g, arch, "context_length", -1, 1, INT32_MAX, &hp->n_ctx, err, err_len);
  if (rc == 0)
    rc = get_int(g, arch, "attention.sliding_window", 0, 0, INT32_MAX, &hp->sliding_window, err, err_len);
  if (rc == 0) /* 4, rank, needs a classification head tram does not run */
    rc = get_int(g, arch, "pooling_type", MODEL_POOL_NONE, MODEL_POOL_NONE, MODEL_POOL_LAST, &hp->pooling, err, err_len);
  if (rc != 0) return rc;
  int64_t pn;
  hp->pool_normalize = gguf_get_i64(g, "tram.pooling.normalize", &pn) == 0 ? pn != 0 : -1;
  if (hp->n_heads % hp->n_kv_heads != 0) {
    snprintf(err, err_len, "key '%s.attention.head_count_kv' (%d) does not divide head_count (%d)", arch,
             hp->n_kv_heads, hp->n_heads);
    return -EINVAL;
  }
  /* head_dim: key_length, else dim / n_heads (which must then be whole) */
  const int def_head = hp->dim % hp->n_heads == 0 ? hp->dim / hp->n_heads : -1;
  rc = get_int(g, arch, "attention.key_length", def_head, 2, MAX_DIM, &hp->head_dim, err, err_len);
  if (rc != 0) {
    if (def_head < 0)
      snprintf(err, err_len, "key '%s.attention.head_count' (%d) does not divide embedding_length (%d)", arch,
               hp->n_heads, hp->dim);
    return rc;
  }
  int v_dim;
  rc = get_int(g, arch, "attention.value_length", hp->head_dim, 1, MAX_DIM, &v_dim, err, err_len);
  if (rc != 0) return rc;
  if (v_dim != hp->head_dim) {
    snprintf(err, err_len, "key '%s.attention.value_length' (%d) differs from the key length (%d)", arch, v_dim,
             hp->head_dim);
    return -EINVAL;
  }
  if ((int64_t)hp->n_heads * hp->head_dim > MAX_DIM) {
    snprintf(err, err_len, "%d heads of %d: query width past %d", hp->n_heads, hp->head_dim, MAX_DIM);
    return -EINVAL;
  }
  hp->q_dim = hp->n_heads * hp->head_dim;
  hp->kv_dim = hp->n_kv_heads * hp->head_dim;

  rc = get_pos_float(g, arch, "attention.layer_norm_rms_epsilon", 0, &hp->rms_eps, err, err_len);
  if (rc == 0) rc = get_pos_float(g, arch, "rope.freq_base", 10000.0f, &hp->rope_base, err, err_len);
  if (rc == 0) rc = get_int(g, arch, "rope.dimension_count", hp->head_dim, 2, hp->head_dim, &hp->rot_dim, err, err_len);
  if (rc != 0) return rc;
  if (hp->rot_dim % 2 != 0) {
    snprintf(err, err_len, "key '%s.rope.dimension_count' is %d, not even", arch, hp->rot_dim);
    return -EINVAL;
  }
  const gguf_tensor_t *rope_freqs;
  rc = read_rope_scaling(g, arch, hp, err, err_len);
  rope_freqs = NULL; /* gemma4's are its full layers' alone (model_gemma4.c) */
  if (rc == 0 && ai->arch != MODEL_ARCH_GEMMA4) rc = check_rope_freqs(g, hp, &rope_freqs, err, err_len);
  if (rc == 0 && ai->fused && !rope_freqs) rc = read_longrope(g, arch, hp, &rope_freqs, err, err_len);
  if (rc == 0) rc = read_vocab(g, arch, hp, err, err_len);
  if (rc != 0) return rc;

  if (ai->gemma) rc = model__gemma_hparams(g, arch, ai->gemma, hp, err, err_len);
  hp->n_attn_layers = hp->n_layers;
  if (rc == 0 && hybrid) rc = read_hybrid(g, arch, hp, err, err_len);
  if (rc != 0) return rc;
  if (ai->arch == MODEL_ARCH_SMOLLM3) hp->no_rope_step = 4; /* llama.cpp's n_no_rope_layer_step: no key */
  if (ai->arch == MODEL_ARCH_GPTOSS) { /* what llama.cpp fixes for gpt-oss, with no key */
    hp->swa_pattern = 2;               /* layers 0, 2, ... sliding */
    hp->moe_gating = MODEL_MOE_TOPK_SOFTMAX;
    hp->moe_bias = 1;
    hp->swiglu_alpha = 1.702f;
    hp->swiglu_limit = 7.0f;
    hp->attn_sinks = 1;
    hp->o_bias = 1;
  }
  if (ai->arch == MODEL_ARCH_GEMMA4) rc = model__gemma4_hparams(g, arch, hp, err, err_len);
  if (rc != 0) return rc;

  hp->tied_output = gguf_find_tensor(g, "output.weight") == NULL;
  hp->qkv_bias = ai->qkv_bias || gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL;
  *inv_freq = inv_freq_compute(hp, rope_freqs);
  return 0;
}

int model_layer_recurrent(const model_hparams_t *hp, int l) {
  return hp->full_attn_interval > 0 && (l + 1) % hp->full_attn_interval != 0;
}

int model_layer_rope(const model_hparams_t *hp, int l) {
  return hp->no_rope_step <= 0 || (l + 1) % hp->no_rope_step != 0;
}

int model_layer_window(const model_hparams_t *hp, int l) {
  if (hp->swa_pattern > 0 && (l + 1) % hp->swa_pattern == 0) return 0;
  return hp->sliding_window;
}
