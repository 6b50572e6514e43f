/* hf/hf_gptoss.c — the gpt_oss parts of a Hugging Face checkpoint (see
 * hf_internal.h), read as llama.cpp's converter writes gpt-oss:
 *   config.json: num_local_experts, num_experts_per_tok, intermediate_size
 *   (hf_moe.c); layer_types must alternate sliding_attention (layers 0,
 *   2, ...) and full_attention, as llama.cpp fixes the pattern;
 *   attention_bias true; swiglu_alpha 1.702 and swiglu_limit 7.0 (the
 *   constants llama.cpp's clamped SwiGLU has, with no GGUF key); a
 *   quantization_config (OpenAI's MXFP4 experts, *_blocks / *_scales) is
 *   refused: tram reads gpt_oss folders of F32/F16/BF16 weights (a GGUF
 *   conversion carries MXFP4).
 *   tensors: self_attn.sinks → attn_sinks.weight, self_attn.o_proj.bias →
 *   attn_output.bias, mlp.router.{weight,bias} → ffn_gate_inp.{weight,bias}
 *   (hf_open.c's table); the experts, stored transposed and with gate and
 *   up interleaved (GptOssExperts: gate_up_proj [E, dim, 2 F], gate at
 *   even columns, up at odd; down_proj [E, F, dim]), become copies in
 *   GGUF's layout: ffn_gate_exps / ffn_up_exps [E, F, dim], ffn_down_exps
 *   [E, dim, F] (element type kept), and their biases F32
 *   ffn_{gate,up}_exps.bias [E, F], ffn_down_exps.bias [E, dim]. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "hf/hf_internal.h"
#include "st/safetensors.h"

static const cJSON *field(const cJSON *o, const char *name) { return cJSON_GetObjectItemCaseSensitive(o, name); }

int hf__gptoss_config(const cJSON *cfg, int n_layers, char *err, size_t err_len) {
  if (field(cfg, "quantization_config") && !cJSON_IsNull(field(cfg, "quantization_config"))) {
    const cJSON *qm = field(field(cfg, "quantization_config"), "quant_method");
    snprintf(err, err_len, "config.json: quantization_config (%.20s) is not something tram reads in a gpt_oss folder: "
             "use a folder of F32/F16/BF16 weights, or a GGUF conversion",
             cJSON_IsString(qm) ? qm->valuestring : "?");
    return -EINVAL;
  }
  const cJSON *bias = field(cfg, "attention_bias");
  if (bias && !cJSON_IsNull(bias) && !cJSON_IsTrue(bias)) {
    snprintf(err, err_len, "config.json: attention_bias false: tram runs gpt_oss with its attention biases");
    return -EINVAL;
  }
  static const struct {
    const char *name;
    double want;
  } FIXED[] = {{"swiglu_alpha", 1.702}, {"swiglu_limit", 7.0}};
  for (size_t i = 0; i < sizeof FIXED / sizeof FIXED[0]; i++) {
    const cJSON *v = field(cfg, FIXED[i].name);
    if (v && !cJSON_IsNull(v) && (!cJSON_IsNumber(v) || fabs(v->valuedouble - FIXED[i].want) > 1e-6)) {
      snprintf(err, err_len, "config.json: %s must be %g (tram, as llama.cpp, fixes gpt-oss's clamped SwiGLU)",
               FIXED[i].name, FIXED[i].want);
      return -EINVAL;
    }
  }
  const cJSON *types = field(cfg, "layer_types");
  if (!types || cJSON_IsNull(types)) return 0; /* transformers' default: the alternation */
  if (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != n_layers) {
    snprintf(err, err_len, "config.json: layer_types is not a list of %d layer types", n_layers);
    return -EINVAL;
  }
  for (int l = 0; l < n_layers; l++) {
    const cJSON *t = cJSON_GetArrayItem(types, l);
    const char *want = l % 2 == 0 ? "sliding_attention" : "full_attention";
    if (!cJSON_IsString(t) || strcmp(t->valuestring, want) != 0) {
      snprintf(err, err_len, "config.json: layer_types[%d] is not \"%s\": tram, as llama.cpp, runs gpt-oss with "
               "sliding and full attention alternating from layer 0", l, want);
      return -EINVAL;
    }
  }
  return 0;
}

/* Stacked [E, rows, cols] of t's element type: out[e][r][c] = src[e][c][r·step + off]
 * (src [E, cols, src_cols]), a copy the builder keeps. */
static int add_transposed(gguf_build_t *b, const char *name, const st_tensor_t *t, int64_t E, int64_t rows,
                          int64_t cols, int64_t src_cols, int step, int off) {
  const size_t es = t->type == KERN_F32 ? 4 : 2;
  char *dst = xmalloc((size_t)(E * rows * cols) * es);
  const char *src = t->data;
  for (int64_t e = 0; e < E; e++)
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < cols; c++)
        memcpy(dst + ((e * rows + r) * cols + c) * es, src + ((e * cols + c) * src_cols + r * step + off) * es, es);
  gguf_build_keep(b, dst);
  return gguf_build_tensor(b, name, t->type, 3, (int64_t[]){cols, rows, E}, dst, (uint64_t)(E * rows * cols) * es);
}

/* F32 [E, n] of every step-th element from off of t's rows of src_n. */
static int add_bias(gguf_build_t *b, const char *name, const st_tensor_t *t, int64_t E, int64_t n, int64_t src_n,
                    int step, int off) {
  float *f = xmalloc((size_t)(E * n) * sizeof *f);
  for (int64_t e = 0; e < E; e++)
    for (int64_t i = 0; i < n; i++) f[e * n + i] = hf__elem(t, e * src_n + i * step + off);
  gguf_build_keep(b, f);
  return gguf_build_tensor(b, name, KERN_F32, 2, (int64_t[]){n, E}, f, (uint64_t)(E * n) * 4);
}

int hf__gptoss_tensor(gguf_build_t *b, const st_tensor_t *t, const hf_arch_t *a, int layer, const char *rest,
                      char *err, size_t err_len) {
  static const char *const NAMES[] = {"mlp.experts.gate_up_proj", "mlp.experts.gate_up_proj_bias",
                                      "mlp.experts.down_proj", "mlp.experts.down_proj_bias"};
  int which = -1;
  for (int i = 0; i < 4; i++)
    if (strcmp(rest, NAMES[i]) == 0) which = i;
  if (which < 0) {
    if (strncmp(rest, "mlp.experts.", 12) == 0) {
      snprintf(err, err_len, "tensor 'model.layers.%d.%.100s' has no counterpart (an MXFP4 part? tram reads gpt_oss "
               "folders of F32/F16/BF16 weights)", layer, rest);
      return -EINVAL;
    }
    return 0;
  }
  const int64_t E = a->n_expert, D = a->dim, F = a->expert_ff;
  const int bias = which == 1 || which == 3, gate_up = which < 2;
  const int64_t want[3] = {E, bias ? (gate_up ? 2 * F : D) : (gate_up ? D : F), gate_up ? 2 * F : D};
  const int nd = bias ? 2 : 3;
  int ok = t->n_dims == nd && (t->type == KERN_F32 || t->type == KERN_F16 || t->type == KERN_BF16);
  for (int d = 0; d < nd && ok; d++) ok = t->shape[d] == want[d];
  if (!ok) {
    char shape[64];
    if (bias)
      snprintf(shape, sizeof shape, "[%lld, %lld]", (long long)want[0], (long long)want[1]);
    else
      snprintf(shape, sizeof shape, "[%lld, %lld, %lld]", (long long)want[0], (long long)want[1], (long long)want[2]);
    snprintf(err, err_len, "tensor 'model.layers.%d.%.100s' is not %s of F32/F16/BF16 (want %s)", layer, rest,
             bias ? "a bias" : "a stack of matrices", shape);
    return -EINVAL;
  }
  char name[64];
  int rc = 0;
#define NAME(kind, suffix) (snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.%s", layer, kind, suffix), name)
  if (which == 0) {
    rc = add_transposed(b, NAME("gate", "weight"), t, E, F, D, 2 * F, 2, 0);
    if (rc == 0) rc = add_transposed(b, NAME("up", "weight"), t, E, F, D, 2 * F, 2, 1);
  } else if (which == 1) {
    rc = add_bias(b, NAME("gate", "bias"), t, E, F, 2 * F, 2, 0);
    if (rc == 0) rc = add_bias(b, NAME("up", "bias"), t, E, F, 2 * F, 2, 1);
  } else if (which == 2) {
    rc = add_transposed(b, NAME("down", "weight"), t, E, D, F, D, 1, 0);
  } else {
    rc = add_bias(b, NAME("down", "bias"), t, E, D, D, 1, 0);
  }
#undef NAME
  if (rc != 0) {
    snprintf(err, err_len, "tensor 'model.layers.%d.%.100s' is given twice", layer, rest);
    return -EINVAL;
  }
  return 1;
}
