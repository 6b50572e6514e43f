/* hf/hf_config.c — config.json read into llama.cpp's `<arch>.*` keys (see
 * hf.h). Field by field, as Hugging Face's configuration_*.py define them:
 *   model_type            llama, mistral, mixtral → llama; qwen2; qwen3; gemma2;
 *                         gemma3_text → gemma3; phi3; smollm3 (Q/K rows
 *                         permuted as llama's; no_rope_layers must be
 *                         llama.cpp's fixed NoPE step of 4); qwen2_moe →
 *                         qwen2moe, qwen3_moe → qwen3moe (the experts'
 *                         fields: hf_moe.c)
 *   hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
 *   num_key_value_heads (default: heads), head_dim (default: hidden / heads),
 *   rms_norm_eps, rope_theta (default 10000), max_position_embeddings,
 *   vocab_size, tie_word_embeddings, partial_rotary_factor (phi)
 *   sliding_window        mistral, gemma, phi3 (qwen's use_sliding_window is refused)
 *   rope_scaling          none/default, linear, llama3, longrope (phi3)
 *   rope_parameters       transformers 5's form of rope_theta and the
 *                         scaling ({rope_theta, rope_type, factor, ...});
 *                         its per-layer-type form (Gemma 3) is refused
 *                         (both read in hf_rope.c)
 *   hidden_act / hidden_activation  silu (gelu_pytorch_tanh for gemma)
 *   gemma: query_pre_attn_scalar (must be what llama.cpp's reading gives),
 *   attn_logit_softcapping, final_logit_softcapping, sliding_window_pattern
 *   or layer_types, rope_local_base_freq.
 *   gemma4_text → gemma4 (and gemma4, Gemma 4's multimodal folder, read
 *   through its text_config): its own fields in hf_gemma4.c.
 *   gpt_oss → gpt-oss (hf_gptoss.c; rope_parameters yarn: factor,
 *   original_max_position_embeddings, beta_fast/slow, attention_factor,
 *   truncate as tram.rope.scaling.yarn_truncate)
 *   qwen3_5_text → qwen35 (and qwen3_5, Qwen3.5's multimodal wrapper, read
 *   through its text_config): partial_rotary_factor (in rope_parameters
 *   or top-level, default 0.25), layer_types
 *   (full_attention every n-th layer), linear_conv_kernel_dim,
 *   linear_{key,value}_head_dim, linear_num_{key,value}_heads.
 *   qwen3_5_moe_text → qwen35moe (and qwen3_5_moe's text_config): qwen35's
 *   fields and the experts' (hf_moe.c; no intermediate_size: every layer
 *   sparse). qwen3_next → qwen3next: the same, with intermediate_size for
 *   the dense layers of mlp_only_layers / decoder_sparse_step. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "hf/hf_internal.h"

int hf__int(const cJSON *v, const char *what, long long def, long long lo, long long hi, long long *out, char *err,
            size_t err_len) {
  if (!v || cJSON_IsNull(v)) {
    if (def < lo) {
      snprintf(err, err_len, "%s is missing", what);
      return -EINVAL;
    }
    *out = def;
    return 0;
  }
  const double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
  if (!(d >= (double)lo && d <= (double)hi) || floor(d) != d) {
    snprintf(err, err_len, "%s is not a whole number in %lld..%lld", what, lo, hi);
    return -EINVAL;
  }
  *out = (long long)d;
  return 0;
}

/* A positive finite number, def when absent (an error when def <= 0). */
static int pos_float(const cJSON *v, const char *what, double def, double *out, char *err, size_t err_len) {
  if (!v || cJSON_IsNull(v)) {
    if (!(def > 0)) {
      snprintf(err, err_len, "%s is missing", what);
      return -EINVAL;
    }
    *out = def;
    return 0;
  }
  if (!cJSON_IsNumber(v) || !(v->valuedouble > 0) || !isfinite(v->valuedouble)) {
    snprintf(err, err_len, "%s is not a positive number", what);
    return -EINVAL;
  }
  *out = v->valuedouble;
  return 0;
}

static const cJSON *field(const cJSON *o, const char *name) { return cJSON_GetObjectItemCaseSensitive(o, name); }

/* Qwen3.5's hybrid fields (llama.cpp's qwen35 keys). layer_types must put
 * full attention on every n-th layer (full_attention_interval n). */
static int qwen35_fields(gguf_build_t *b, const cJSON *cfg, const char *a, long long layers, hf_arch_t *arch,
                         char *err, size_t err_len) {
  long long conv, dk, dv, hk, hv, interval = 4;
  if (hf__int(field(cfg, "linear_conv_kernel_dim"), "config.json: linear_conv_kernel_dim", 4, 1, 9, &conv, err,
              err_len) ||
      hf__int(field(cfg, "linear_key_head_dim"), "config.json: linear_key_head_dim", 128, 1, 512, &dk, err, err_len) ||
      hf__int(field(cfg, "linear_value_head_dim"), "config.json: linear_value_head_dim", 128, 1, 512, &dv, err,
              err_len) ||
      hf__int(field(cfg, "linear_num_key_heads"), "config.json: linear_num_key_heads", 16, 1, 4096, &hk, err,
              err_len) ||
      hf__int(field(cfg, "linear_num_value_heads"), "config.json: linear_num_value_heads", 32, 1, 4096, &hv, err,
              err_len))
    return -EINVAL;
  const cJSON *types = field(cfg, "layer_types");
  if (types && !cJSON_IsNull(types)) {
    if (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != layers) {
      snprintf(err, err_len, "config.json: layer_types is not a list of %lld layer types", layers);
      return -EINVAL;
    }
    interval = 0;
    for (long long l = 0; l < layers && !interval; l++) {
      const cJSON *t = cJSON_GetArrayItem(types, (int)l);
      if (cJSON_IsString(t) && strcmp(t->valuestring, "full_attention") == 0) interval = l + 1;
    }
    for (long long l = 0; l < layers && interval; l++) {
      const cJSON *t = cJSON_GetArrayItem(types, (int)l);
      const char *want = (l + 1) % interval == 0 ? "full_attention" : "linear_attention";
      if (!cJSON_IsString(t) || strcmp(t->valuestring, want) != 0) interval = 0;
    }
    if (!interval) {
      snprintf(err, err_len, "config.json: layer_types must put full_attention on every n-th layer and "
               "linear_attention elsewhere (tram runs that pattern)");
      return -EINVAL;
    }
  }
  char key[96];
#define U32(name, v) (snprintf(key, sizeof key, "%s." name, a), gguf_build_u32(b, key, (uint32_t)(v)))
  U32("ssm.conv_kernel", conv);
  U32("ssm.state_size", dk);
  U32("ssm.group_count", hk);
  U32("ssm.time_step_rank", hv);
  U32("ssm.inner_size", hv * dv);
  U32("full_attention_interval", interval);
#undef U32
  gguf_build_u32(b, "tram.ssm.v_heads_grouped", 1); /* Hugging Face's value-head order (model_hparams.c) */
  arch->ssm_hk = (int)hk, arch->ssm_hv = (int)hv, arch->ssm_dk = (int)dk, arch->ssm_dv = (int)dv;
  return 0;
}

/* Gemma's fields. n_layers, head_dim, dim, heads as read. */
static int gemma_fields(gguf_build_t *b, const cJSON *cfg, const char *a, int version, int n_layers, int head_dim,
                        int dim, int heads, char *err, size_t err_len) {
  char key[96];
  double v;
  const int big = version == 2 ? 46 : 62;
  const int want = n_layers == big ? dim / heads : head_dim;
  long long qpas;
  if (hf__int(field(cfg, "query_pre_attn_scalar"), "config.json: query_pre_attn_scalar", want, 1, INT32_MAX, &qpas,
              err, err_len))
    return -EINVAL;
  if (qpas != want) {
    snprintf(err, err_len, "config.json: query_pre_attn_scalar %lld: tram (as llama.cpp) uses %d for this model", qpas,
             want);
    return -EINVAL;
  }
  const char *caps[] = {"attn_logit_softcapping", "final_logit_softcapping"};
  for (int i = 0; i < 2; i++) {
    const cJSON *c = field(cfg, caps[i]);
    if (!c || cJSON_IsNull(c)) continue;
    char what[64];
    snprintf(what, sizeof what, "config.json: %s", caps[i]);
    if (pos_float(c, what, 0, &v, err, err_len)) return -EINVAL;
    snprintf(key, sizeof key, "%s.%s", a, caps[i]);
    gguf_build_f32(b, key, (float)v);
  }
  long long pattern;
  const cJSON *types = field(cfg, "layer_types");
  if (cJSON_IsArray(types)) { /* newer configs: the pattern spelled out; tram runs a periodic one */
    if (hf__layer_pattern(types, n_layers, &pattern, err, err_len)) return -EINVAL;
  } else if (hf__int(field(cfg, "sliding_window_pattern"), "config.json: sliding_window_pattern", version == 2 ? 2 : 6,
                     0, 4096, &pattern, err, err_len)) {
    return -EINVAL;
  }
  snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", a);
  gguf_build_u32(b, key, (uint32_t)pattern);
  if (version == 3) {
    if (pos_float(field(cfg, "rope_local_base_freq"), "config.json: rope_local_base_freq", 10000.0, &v, err, err_len))
      return -EINVAL;
    snprintf(key, sizeof key, "%s.rope.freq_base_swa", a);
    gguf_build_f32(b, key, (float)v);
  }
  return 0;
}

int hf__layer_pattern(const cJSON *types, int n_layers, long long *pattern, char *err, size_t err_len) {
  *pattern = 0;
  for (int l = 0; l < cJSON_GetArraySize(types) && !*pattern; l++) {
    const cJSON *t = cJSON_GetArrayItem(types, l);
    if (cJSON_IsString(t) && strcmp(t->valuestring, "full_attention") == 0) *pattern = l + 1;
  }
  if (cJSON_GetArraySize(types) != n_layers) {
    snprintf(err, err_len, "config.json: layer_types has %d entries for %d layers", cJSON_GetArraySize(types),
             n_layers);
    return -EINVAL;
  }
  for (int l = 0; l < n_layers; l++) {
    const cJSON *t = cJSON_GetArrayItem(types, l);
    const int full = *pattern && (l + 1) % *pattern == 0;
    if (!cJSON_IsString(t) || strcmp(t->valuestring, full ? "full_attention" : "sliding_attention") != 0) {
      snprintf(err, err_len, "config.json: layer_types[%d] breaks the periodic sliding/full pattern tram runs", l);
      return -EINVAL;
    }
  }
  return 0;
}

int hf__pos_float(const cJSON *v, const char *what, double def, double *out, char *err, size_t err_len) {
  return pos_float(v, what, def, out, err, err_len);
}

/* SmolLM3's NoPE layers: no_rope_layers[l] is 1 where layer l uses RoPE.
 * tram runs them as llama.cpp does (its GGUF has no key for them): NoPE
 * exactly where (l + 1) % 4 == 0, so any other list is refused. */
static int no_rope_fields(const cJSON *cfg, int n_layers, char *err, size_t err_len) {
  const cJSON *list = field(cfg, "no_rope_layers");
  long long interval;
  if (hf__int(field(cfg, "no_rope_layer_interval"), "config.json: no_rope_layer_interval", 4, 1, 4096, &interval,
              err, err_len))
    return -EINVAL;
  for (int l = 0; l < n_layers; l++) {
    const int want = (l + 1) % 4 != 0;
    int got = (l + 1) % (int)interval != 0; /* transformers' default list */
    if (list && !cJSON_IsNull(list)) {
      const cJSON *x = cJSON_IsArray(list) ? cJSON_GetArrayItem(list, l) : NULL;
      if (!cJSON_IsNumber(x) || (x->valuedouble != 0 && x->valuedouble != 1)) {
        snprintf(err, err_len, "config.json: no_rope_layers[%d] is not 0 or 1 (a list of num_hidden_layers flags)", l);
        return -EINVAL;
      }
      got = x->valuedouble != 0;
    }
    if (got != want) {
      snprintf(err, err_len, "config.json: no_rope_layers[%d] is %d: tram, as llama.cpp, runs SmolLM3 with RoPE off "
               "on every fourth layer only", l, got);
      return -EINVAL;
    }
  }
  return 0;
}

int hf__config(gguf_build_t *b, const cJSON *cfg, hf_arch_t *arch, char *err, size_t err_len) {
  memset(arch, 0, sizeof *arch);
  const cJSON *mt = field(cfg, "model_type");
  if (!cJSON_IsObject(cfg) || !cJSON_IsString(mt)) {
    snprintf(err, err_len, "config.json: no model_type");
    return -EINVAL;
  }
  const char *t = mt->valuestring;
  const cJSON *text = field(cfg, "text_config");
  if (strcmp(t, "qwen3_5") == 0 && cJSON_IsObject(text)) { /* the multimodal wrapper: its text model */
    cfg = text;
    t = "qwen3_5_text";
  } else if (strcmp(t, "qwen3_5_moe") == 0 && cJSON_IsObject(text)) {
    cfg = text;
    t = "qwen3_5_moe_text";
  } else if (strcmp(t, "gemma4") == 0 && cJSON_IsObject(text)) { /* Gemma 4's multimodal folder: its text model */
    cfg = text;
    t = "gemma4_text";
  }
  int gemma = 0, gemma4 = 0;
  if (strcmp(t, "qwen3_5_text") == 0 || strcmp(t, "qwen3_5_moe_text") == 0 || strcmp(t, "qwen3_next") == 0) {
    arch->qwen3next = strcmp(t, "qwen3_next") == 0;
    arch->name = arch->qwen3next ? "qwen3next" : strcmp(t, "qwen3_5_text") == 0 ? "qwen35" : "qwen35moe";
    arch->qwen35 = 1;
  } else if (strcmp(t, "llama") == 0 || strcmp(t, "mistral") == 0) {
    arch->name = "llama";
    arch->permute_qk = 1;
  } else if (strcmp(t, "qwen2") == 0 || strcmp(t, "qwen3") == 0 || strcmp(t, "phi3") == 0) {
    arch->name = t[0] == 'p' ? "phi3" : t[4] == '2' ? "qwen2" : "qwen3";
  } else if (strcmp(t, "qwen2_moe") == 0 || strcmp(t, "qwen3_moe") == 0) {
    arch->name = t[4] == '2' ? "qwen2moe" : "qwen3moe";
  } else if (strcmp(t, "mixtral") == 0) {
    arch->name = "llama";
    arch->permute_qk = 1;
  } else if (strcmp(t, "gpt_oss") == 0) {
    arch->name = "gpt-oss";
  } else if (strcmp(t, "gemma2") == 0) {
    arch->name = "gemma2", gemma = 2;
  } else if (strcmp(t, "gemma3_text") == 0) {
    arch->name = "gemma3", gemma = 3;
  } else if (strcmp(t, "gemma4_text") == 0) {
    arch->name = "gemma4", gemma4 = 1;
  } else if (strcmp(t, "smollm3") == 0) {
    arch->name = "smollm3";
    arch->permute_qk = 1;
  } else {
    snprintf(err, err_len, "config.json: model_type \"%.40s\" is not one tram runs (llama, mistral, qwen2, qwen3, "
             "gemma2, gemma3_text, gemma4_text, phi3, smollm3, qwen3_5_text, qwen3_5_moe_text, qwen3_next, qwen2_moe, "
             "qwen3_moe, mixtral, gpt_oss)", t);
    return -EINVAL;
  }
  const int qwen35 = arch->qwen35; /* (memset above cleared the rest) */
  arch->gptoss = strcmp(t, "gpt_oss") == 0;
  arch->gemma = gemma != 0;
  arch->gemma4 = gemma4;
  if (gemma4) gemma = 4; /* Gemma's activation field and tied default; its own fields below */
  const char *a = arch->name;
  const int no_dense = strcmp(a, "qwen35moe") == 0; /* every layer sparse: no intermediate_size */
  long long dim, ff, layers, heads, kv, head_dim, ctx, vocab, window = 0;
  if (hf__int(field(cfg, "hidden_size"), "config.json: hidden_size", -1, 1, 1 << 20, &dim, err, err_len) ||
      hf__int(field(cfg, "intermediate_size"), "config.json: intermediate_size", no_dense ? 0 : -1, no_dense ? 0 : 1,
              1 << 22, &ff, err, err_len) ||
      hf__int(field(cfg, "num_hidden_layers"), "config.json: num_hidden_layers", -1, 1, 4096, &layers, err, err_len) ||
      hf__int(field(cfg, "num_attention_heads"), "config.json: num_attention_heads", -1, 1, 4096, &heads, err,
              err_len) ||
      hf__int(field(cfg, "num_key_value_heads"), "config.json: num_key_value_heads", heads, 1, heads, &kv, err,
              err_len) ||
      hf__int(field(cfg, "head_dim"), "config.json: head_dim", dim / heads, 2, 1 << 16, &head_dim, err, err_len) ||
      hf__int(field(cfg, "max_position_embeddings"), "config.json: max_position_embeddings", 4096, 1, INT32_MAX, &ctx,
              err, err_len) ||
      hf__int(field(cfg, "vocab_size"), "config.json: vocab_size", -1, 1, 1 << 24, &vocab, err, err_len))
    return -EINVAL;
  const cJSON *sw = field(cfg, "sliding_window");
  const cJSON *use_sw = field(cfg, "use_sliding_window");
  if (strncmp(a, "qwen", 4) == 0 || strcmp(a, "smollm3") == 0) {
    if (cJSON_IsTrue(use_sw)) {
      snprintf(err, err_len, "config.json: use_sliding_window (%s's per-layer windows) is not something tram runs",
               a[0] == 'q' ? "Qwen" : "SmolLM3");
      return -EINVAL;
    }
  } else if (hf__int(sw, "config.json: sliding_window", 0, 0, INT32_MAX, &window, err, err_len)) {
    return -EINVAL;
  }
  double eps, theta, partial;
  if ((!gemma4 && hf__rope_parameters_flat(cfg, err, err_len)) || /* gemma4: per layer type (hf_gemma4.c) */
      pos_float(field(cfg, "rms_norm_eps"), "config.json: rms_norm_eps", 0, &eps, err, err_len) ||
      pos_float(hf__rope_theta_field(cfg), "config.json: rope_theta",
                !strcmp(a, "smollm3") ? 2000000.0 : !strcmp(a, "gpt-oss") ? 150000.0 : 10000.0, &theta, err,
                err_len) || /* the configuration classes' defaults */
      pos_float(field(cfg, "partial_rotary_factor"), "config.json: partial_rotary_factor", 1.0, &partial, err,
                err_len))
    return -EINVAL;
  if (qwen35) { /* partial_rotary_factor: in rope_parameters (transformers 5) or top-level; default 0.25 */
    const cJSON *rp = field(cfg, "rope_parameters");
    const cJSON *pf = cJSON_IsObject(rp) ? field(rp, "partial_rotary_factor") : NULL;
    if (pos_float(pf ? pf : field(cfg, "partial_rotary_factor"), "config.json: partial_rotary_factor", 0.25, &partial,
                  err, err_len))
      return -EINVAL;
  }
  const cJSON *act = field(cfg, gemma ? "hidden_activation" : "hidden_act");
  if (gemma && !cJSON_IsString(act)) act = field(cfg, "hidden_act");
  const char *want_act = gemma ? "gelu_pytorch_tanh" : "silu";
  if (act && !cJSON_IsNull(act) && (!cJSON_IsString(act) || strcmp(act->valuestring, want_act) != 0)) {
    snprintf(err, err_len, "config.json: activation \"%.32s\": tram runs %s for %s",
             cJSON_IsString(act) ? act->valuestring : "?", want_act, a);
    return -EINVAL;
  }
  if (cJSON_IsTrue(field(cfg, "mlp_bias"))) {
    snprintf(err, err_len, "config.json: mlp_bias is not something tram runs");
    return -EINVAL;
  }
  if (partial > 1.0) { /* (and the rotated width below stays an int) */
    snprintf(err, err_len, "config.json: partial_rotary_factor %g is more than 1 (the share of a head RoPE turns)",
             partial);
    return -EINVAL;
  }
  const int rot_dim = (int)(head_dim * partial) & ~1;
  char key[96];
#define U32(name, v) (snprintf(key, sizeof key, "%s." name, a), gguf_build_u32(b, key, (uint32_t)(v)))
#define F32(name, v) (snprintf(key, sizeof key, "%s." name, a), gguf_build_f32(b, key, (float)(v)))
  gguf_build_str(b, "general.architecture", a, strlen(a));
  U32("block_count", layers);
  U32("embedding_length", dim);
  if (!gemma4 && !no_dense) U32("feed_forward_length", ff); /* gemma4: per layer (hf_gemma4.c) */
  U32("context_length", ctx);
  U32("vocab_size", vocab);
  U32("attention.head_count", heads);
  if (!gemma4) U32("attention.head_count_kv", kv);
  if (!gemma4) U32("attention.key_length", head_dim);
  if (!gemma4) U32("attention.value_length", head_dim);
  if (!gemma4) U32("rope.dimension_count", rot_dim);
  F32("attention.layer_norm_rms_epsilon", eps);
  if (!gemma4) F32("rope.freq_base", theta);
  if (window > 0) U32("attention.sliding_window", window);
#undef U32
#undef F32
  arch->n_heads = (int)heads;
  arch->n_kv_heads = (int)kv;
  arch->n_layers = (int)layers;
  arch->n_vocab = (int)vocab;
  arch->dim = (int)dim;
  const cJSON *tie = field(cfg, "tie_word_embeddings");
  arch->tied = tie ? cJSON_IsTrue(tie) : gemma != 0; /* the configs' defaults: gemma true, the others false */
  if (hf__rope_scaling(b, cfg, a, arch, rot_dim, err, err_len)) return -EINVAL;
  if ((strstr(t, "_moe") || strcmp(t, "mixtral") == 0 || arch->gptoss || arch->qwen3next) &&
      hf__moe_config(b, cfg, t, arch, err, err_len))
    return -EINVAL;
  if (arch->gptoss && hf__gptoss_config(cfg, (int)layers, err, err_len)) return -EINVAL;
  if (gemma && !gemma4 &&
      gemma_fields(b, cfg, a, gemma, (int)layers, (int)head_dim, (int)dim, (int)heads, err, err_len))
    return -EINVAL;
  if (gemma4 && hf__gemma4_config(b, cfg, a, (int)layers, (int)head_dim, (int)kv, err, err_len)) return -EINVAL;
  if (qwen35 && qwen35_fields(b, cfg, a, layers, arch, err, err_len)) return -EINVAL;
  if (strcmp(a, "smollm3") == 0 && no_rope_fields(cfg, (int)layers, err, err_len)) return -EINVAL;
  return 0;
}
