/* hf/hf_open.c — a Hugging Face checkpoint folder opened as a GGUF context
 * (see hf.h): the JSON files, then every safetensors tensor under its GGUF
 * name. Tensor names (Hugging Face → llama.cpp):
 *   model.embed_tokens.weight → token_embd.weight, model.norm.weight →
 *   output_norm.weight, lm_head.weight → output.weight (dropped when tied);
 *   model.layers.N.: input_layernorm → attn_norm, self_attn.{q,k,v,o}_proj →
 *   attn_{q,k,v,output}, self_attn.qkv_proj → attn_qkv, self_attn.{q,k}_norm
 *   → attn_{q,k}_norm, post_attention_layernorm → ffn_norm (gemma:
 *   post_attention_norm; gpt_oss too), pre_feedforward_layernorm → ffn_norm,
 *   post_feedforward_layernorm → post_ffw_norm, mlp.{gate,up,down}_proj →
 *   ffn_{gate,up,down}, mlp.gate_up_proj → ffn_up; qwen35's linear_attn.:
 *   in_proj_qkv → attn_qkv, in_proj_z → attn_gate, in_proj_a → ssm_alpha,
 *   in_proj_b → ssm_beta, conv1d → ssm_conv1d (squeezed to [C, K], F32),
 *   A_log → ssm_a (as −exp(A_log), llama.cpp's), dt_bias → ssm_dt.bias,
 *   norm → ssm_norm, out_proj → ssm_out (value heads kept in Hugging Face's
 *   order: hf_config.c says so in tram.ssm.v_heads_grouped); qwen3_next's
 *   in_proj_qkvz → attn_qkv and attn_gate (row copies: split_qkvz),
 *   in_proj_ba → ssm_ba; mlp.experts.{gate_up,down}_proj (Qwen3.5-MoE's
 *   stacked experts) → ffn_{gate_up,down}_exps (3-D views); a Qwen3.5
 *   multimodal checkpoint's model.language_model. read as model., its
 *   model.visual. and mtp. tensors skipped (tram runs text, no MTP);
 *   gemma4's per_layer_input_gate → inp_gate, per_layer_projection → proj,
 *   post_per_layer_input_norm → post_norm, layer_scalar →
 *   layer_output_scale, model.embed_tokens_per_layer →
 *   per_layer_token_embd, model.per_layer_model_projection →
 *   per_layer_model_proj, model.per_layer_projection_norm →
 *   per_layer_proj_norm, its multimodal folder unwrapped as Qwen3.5's and
 *   its towers (vision, audio and their embedders) skipped; its MoE block's
 *   router.proj → ffn_gate_inp, router.scale → ffn_gate_inp.scale,
 *   router.per_expert_scale → ffn_down_exps.scale, experts.gate_up_proj →
 *   ffn_gate_up_exps, experts.down_proj → ffn_down_exps (3-D views),
 *   pre_feedforward_layernorm_2 → pre_ffw_norm_2,
 *   post_feedforward_layernorm_{1,2} → post_ffw_norm_{1,2}.
 * Matrices stay views of the mapping, except Llama's Q and K (and their
 * biases), whose rows are reordered as llama.cpp's converter does so that
 * adjacent-pair RoPE applies; 1-D norm weights and biases become F32 copies
 * (Gemma's norms as 1 + w). */
#include "hf/hf.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/file.h"
#include "hf/hf_internal.h"
#include "kernels/cpu/half.h"
#include "st/safetensors.h"

#define HF_MAX_JSON (256u << 20) /* bytes of one JSON file (tokenizer.json runs to tens of MB) */

int hf_is_checkpoint(const char *path) {
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return 1;
  const size_t n = strlen(path);
  return (n > 12 && strcmp(path + n - 12, ".safetensors") == 0) || (n > 5 && strcmp(path + n - 5, ".json") == 0);
}

/* The whole file dir/name (at most HF_MAX_JSON bytes) as a malloc'd string;
 * NULL with *missing set when it does not exist, NULL with err written when
 * it cannot be read. */
static char *read_text(const char *dir, const char *name, size_t *len, int *missing, char *err, size_t err_len) {
  char path[4096], why[160];
  *missing = 0;
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) {
    snprintf(err, err_len, "%.400s...: path too long", path);
    return NULL;
  }
  char *text;
  const int rc = file_read(path, HF_MAX_JSON, &text, len, why, sizeof why);
  *missing = rc == -ENOENT;
  if (rc != 0) snprintf(err, err_len, "%.340s: %.160s", path, why);
  return text;
}

/* dir/name parsed as JSON; NULL when absent (*missing set), unreadable or
 * malformed (err written). */
static cJSON *read_json(const char *dir, const char *name, int *missing, char *err, size_t err_len) {
  size_t n;
  char *text = read_text(dir, name, &n, missing, err, err_len);
  if (!text) return NULL;
  cJSON *j = cJSON_ParseWithLength(text, n);
  if (!j) snprintf(err, err_len, "%.400s/%s: not valid JSON", dir, name);
  free(text);
  return j;
}

enum { K_MATRIX, K_VECTOR, K_Q, K_K, K_SKIP, K_NEG_EXP, K_CONV, K_STACK, K_QKVZ };

/* The GGUF name of Hugging Face tensor `hf` into out, and its kind; -1 when
 * it has none. */
static int map_name(const char *hf, const hf_arch_t *a, char *out, size_t len) {
  static const struct {
    const char *hf, *gguf, *gguf_gemma;
    int kind;
  } layer[] = {
      {"input_layernorm.weight", "attn_norm.weight", NULL, K_VECTOR},
      {"self_attn.q_proj.weight", "attn_q.weight", NULL, K_Q},
      {"self_attn.k_proj.weight", "attn_k.weight", NULL, K_K},
      {"self_attn.v_proj.weight", "attn_v.weight", NULL, K_MATRIX},
      {"self_attn.o_proj.weight", "attn_output.weight", NULL, K_MATRIX},
      {"self_attn.q_proj.bias", "attn_q.bias", NULL, K_Q},
      {"self_attn.k_proj.bias", "attn_k.bias", NULL, K_K},
      {"self_attn.v_proj.bias", "attn_v.bias", NULL, K_VECTOR},
      {"self_attn.o_proj.bias", "attn_output.bias", NULL, K_VECTOR},
      {"self_attn.sinks", "attn_sinks.weight", NULL, K_VECTOR},
      {"self_attn.q_norm.weight", "attn_q_norm.weight", NULL, K_VECTOR},
      {"self_attn.k_norm.weight", "attn_k_norm.weight", NULL, K_VECTOR},
      {"self_attn.qkv_proj.weight", "attn_qkv.weight", NULL, K_MATRIX},
      {"self_attn.rotary_emb.inv_freq", NULL, NULL, K_SKIP}, /* a buffer some checkpoints save */
      {"post_attention_layernorm.weight", "ffn_norm.weight", "post_attention_norm.weight", K_VECTOR},
      {"pre_feedforward_layernorm.weight", "ffn_norm.weight", NULL, K_VECTOR},
      {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", NULL, K_VECTOR},
      {"mlp.gate_proj.weight", "ffn_gate.weight", NULL, K_MATRIX},
      {"mlp.up_proj.weight", "ffn_up.weight", NULL, K_MATRIX},
      {"mlp.down_proj.weight", "ffn_down.weight", NULL, K_MATRIX},
      {"mlp.gate_up_proj.weight", "ffn_up.weight", NULL, K_MATRIX},
      {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight", NULL, K_MATRIX},
      {"linear_attn.in_proj_z.weight", "attn_gate.weight", NULL, K_MATRIX},
      {"linear_attn.in_proj_a.weight", "ssm_alpha.weight", NULL, K_MATRIX},
      {"linear_attn.in_proj_b.weight", "ssm_beta.weight", NULL, K_MATRIX},
      {"linear_attn.conv1d.weight", "ssm_conv1d.weight", NULL, K_CONV},
      {"linear_attn.A_log", "ssm_a", NULL, K_NEG_EXP},
      {"linear_attn.dt_bias", "ssm_dt.bias", NULL, K_VECTOR},
      {"linear_attn.norm.weight", "ssm_norm.weight", NULL, K_VECTOR},
      {"linear_attn.out_proj.weight", "ssm_out.weight", NULL, K_MATRIX},
      {"linear_attn.in_proj_qkvz.weight", "attn_qkv.weight", NULL, K_QKVZ}, /* qwen3_next: and attn_gate */
      {"linear_attn.in_proj_ba.weight", "ssm_ba.weight", NULL, K_MATRIX},
      {"mlp.experts.gate_up_proj", "ffn_gate_up_exps.weight", NULL, K_STACK}, /* Qwen3.5-MoE stacked (hf_moe.c) */
      {"mlp.experts.down_proj", "ffn_down_exps.weight", NULL, K_STACK},
      /* mixtures of experts (the experts themselves: hf_moe.c) */
      {"mlp.gate.weight", "ffn_gate_inp.weight", NULL, K_MATRIX},
      {"mlp.router.weight", "ffn_gate_inp.weight", NULL, K_MATRIX}, /* gpt_oss (its experts: hf_gptoss.c) */
      {"mlp.router.bias", "ffn_gate_inp.bias", NULL, K_VECTOR},
      {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight", NULL, K_MATRIX},
      {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight", NULL, K_MATRIX},
      {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight", NULL, K_MATRIX},
      {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight", NULL, K_MATRIX},
      {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", NULL, K_MATRIX},
      /* gemma4: per-layer inputs, the layer's output scale */
      {"per_layer_input_gate.weight", "inp_gate.weight", NULL, K_MATRIX},
      {"per_layer_projection.weight", "proj.weight", NULL, K_MATRIX},
      {"post_per_layer_input_norm.weight", "post_norm.weight", NULL, K_VECTOR},
      {"layer_scalar", "layer_output_scale.weight", NULL, K_VECTOR},
      /* gemma4's MoE block: the router, its input scale and per-expert scales, the stacked experts
         ([E, 2 eff, dim] gate then up, [E, dim, eff]: GGUF's stacks as they lie), their norms */
      {"router.proj.weight", "ffn_gate_inp.weight", NULL, K_MATRIX},
      {"router.scale", "ffn_gate_inp.scale", NULL, K_VECTOR},
      {"router.per_expert_scale", "ffn_down_exps.scale", NULL, K_VECTOR},
      {"experts.gate_up_proj", "ffn_gate_up_exps.weight", NULL, K_STACK},
      {"experts.down_proj", "ffn_down_exps.weight", NULL, K_STACK},
      {"pre_feedforward_layernorm_2.weight", "pre_ffw_norm_2.weight", NULL, K_VECTOR},
      {"post_feedforward_layernorm_1.weight", "post_ffw_norm_1.weight", NULL, K_VECTOR},
      {"post_feedforward_layernorm_2.weight", "post_ffw_norm_2.weight", NULL, K_VECTOR},
  };
  char unwrapped[160];
  if (a->gemma4) { /* Gemma4ForConditionalGeneration: the towers and their embedders skipped (text only) */
    static const char *const towers[] = {"model.vision_tower.", "model.audio_tower.", "model.embed_vision.",
                                         "model.embed_audio."};
    for (size_t i = 0; i < sizeof towers / sizeof towers[0]; i++)
      if (strncmp(hf, towers[i], strlen(towers[i])) == 0) return K_SKIP;
  }
  if (a->qwen35 || a->gemma4) { /* a multimodal wrapper: the text model under model.language_model. */
    if (a->qwen35 && (strncmp(hf, "model.visual.", 13) == 0 || strncmp(hf, "mtp.", 4) == 0)) return K_SKIP;
    if (strncmp(hf, "model.language_model.", 21) == 0) {
      snprintf(unwrapped, sizeof unwrapped, "model.%s", hf + 21);
      hf = unwrapped;
    }
  }
  int l, at = 0;
  if (sscanf(hf, "model.layers.%d.%n", &l, &at) == 1 && at > 0 && l >= 0 && l < a->n_layers) {
    for (size_t i = 0; i < sizeof layer / sizeof layer[0]; i++)
      if (strcmp(hf + at, layer[i].hf) == 0) {
        const char *g = (a->gemma || a->gemma4 || a->qwen35 || a->gptoss) && layer[i].gguf_gemma
                            ? layer[i].gguf_gemma
                            : layer[i].gguf;
        if (g) snprintf(out, len, "blk.%d.%s", l, g);
        return layer[i].kind;
      }
    return -1;
  }
  if (strcmp(hf, "model.embed_tokens.weight") == 0) return snprintf(out, len, "token_embd.weight"), K_MATRIX;
  if (strcmp(hf, "model.norm.weight") == 0) return snprintf(out, len, "output_norm.weight"), K_VECTOR;
  if (strcmp(hf, "lm_head.weight") == 0) return a->tied ? K_SKIP : (snprintf(out, len, "output.weight"), K_MATRIX);
  if (a->gemma4) { /* per-layer inputs: llama.cpp's gemma3n names */
    if (strcmp(hf, "model.embed_tokens_per_layer.weight") == 0)
      return snprintf(out, len, "per_layer_token_embd.weight"), K_MATRIX;
    if (strcmp(hf, "model.per_layer_model_projection.weight") == 0)
      return snprintf(out, len, "per_layer_model_proj.weight"), K_MATRIX;
    if (strcmp(hf, "model.per_layer_projection_norm.weight") == 0)
      return snprintf(out, len, "per_layer_proj_norm.weight"), K_VECTOR;
  }
  return -1;
}

float hf__elem(const st_tensor_t *t, int64_t i) {
  if (t->type == KERN_F32) {
    float f;
    memcpy(&f, (const char *)t->data + 4 * i, 4);
    return f;
  }
  uint16_t h;
  memcpy(&h, (const char *)t->data + 2 * i, 2);
  return t->type == KERN_F16 ? kern_cpu_f16_to_f32(h) : kern_cpu__bits_f32((uint32_t)h << 16);
}

/* Rows of t (n_rows of row_bytes) reordered for adjacent-pair RoPE over
 * heads of n_rows / n_head rows: new row h·hd + 2i + j = old row
 * h·hd + j·hd/2 + i (llama.cpp's permute). A copy the builder keeps. */
static void *permuted(gguf_build_t *b, const void *src, int64_t n_rows, int64_t row_bytes, int n_head) {
  char *dst = xmalloc((size_t)(n_rows * row_bytes));
  const int64_t hd = n_rows / n_head;
  for (int64_t h = 0; h < n_head; h++)
    for (int64_t i = 0; i < hd / 2; i++)
      for (int64_t j = 0; j < 2; j++)
        memcpy(dst + (h * hd + 2 * i + j) * row_bytes, (const char *)src + (h * hd + j * (hd / 2) + i) * row_bytes,
               (size_t)row_bytes);
  gguf_build_keep(b, dst);
  return dst;
}

/* Qwen3-Next's in_proj_qkvz (t: [Hk (2 dk + 2 r dv), dim], r = Hv / Hk;
 * per key head g its q, k, r value heads' v, then their z) as llama.cpp's
 * converter splits it: name (blk.N.attn_qkv.weight) = [q of every head; k
 * of every head; v of every head], and blk.N.attn_gate.weight = the z
 * rows, value heads in Hugging Face's grouped order. Two copies the builder
 * keeps. */
static int split_qkvz(gguf_build_t *b, const st_tensor_t *t, const hf_arch_t *a, const char *name, char *err,
                      size_t err_len) {
  const int64_t hk = a->ssm_hk, r = a->ssm_hk > 0 ? a->ssm_hv / a->ssm_hk : 0, dk = a->ssm_dk, dv = a->ssm_dv;
  const int64_t per = 2 * dk + 2 * r * dv; /* rows per key head */
  if (t->n_dims != 2 || r <= 0 || t->shape[0] != hk * per || t->shape[1] <= 0) {
    snprintf(err, err_len, "tensor '%.100s' is not [linear_num_key_heads (2 linear_key_head_dim + 2 "
             "linear_value_head_dim linear_num_value_heads / linear_num_key_heads), hidden_size]", t->name);
    return -EINVAL;
  }
  const int64_t rb = (int64_t)(t->nbytes / (uint64_t)t->shape[0]); /* bytes per row */
  const char *src = t->data;
  char *qkv = xmalloc((size_t)(hk * (2 * dk + r * dv) * rb)), *z = xmalloc((size_t)(hk * r * dv * rb));
  gguf_build_keep(b, qkv);
  gguf_build_keep(b, z);
  for (int64_t g = 0; g < hk; g++) {
    const char *grp = src + g * per * rb;
    memcpy(qkv + g * dk * rb, grp, (size_t)(dk * rb));                                 /* q */
    memcpy(qkv + (hk * dk + g * dk) * rb, grp + dk * rb, (size_t)(dk * rb));           /* k */
    memcpy(qkv + (2 * hk * dk + g * r * dv) * rb, grp + 2 * dk * rb, (size_t)(r * dv * rb)); /* v */
    memcpy(z + g * r * dv * rb, grp + (2 * dk + r * dv) * rb, (size_t)(r * dv * rb));  /* z */
  }
  char zname[160];
  snprintf(zname, sizeof zname, "%.*sattn_gate.weight", (int)(strlen(name) - strlen("attn_qkv.weight")), name);
  if (gguf_build_tensor(b, name, t->type, 2, (int64_t[]){t->shape[1], hk * (2 * dk + r * dv)}, qkv,
                        (uint64_t)(hk * (2 * dk + r * dv) * rb)) != 0 ||
      gguf_build_tensor(b, zname, t->type, 2, (int64_t[]){t->shape[1], hk * r * dv}, z, (uint64_t)(hk * r * dv * rb))) {
    snprintf(err, err_len, "tensor '%.100s' is not a matrix tram can use", t->name);
    return -EINVAL;
  }
  return 0;
}

static int add_tensor(gguf_build_t *b, const st_tensor_t *t, hf_arch_t *a, char *err, size_t err_len) {
  char name[160];
  int l, at = 0;
  if (sscanf(t->name, "model.layers.%d.%n", &l, &at) == 1 && at > 0 && l >= 0 && l < a->n_layers) {
    const int rc = hf__moe_tensor(b, t, a, l, t->name + at, err, err_len); /* an expert: stacked */
    if (rc != 0) return rc < 0 ? rc : 0;
  }
  const int kind = map_name(t->name, a, name, sizeof name);
  if (kind == K_SKIP) return 0;
  if (kind >= 0 && at > 0 && hf__moe_check(a, l, t->name, name, err, err_len)) return -EINVAL;
  if (kind < 0) {
    snprintf(err, err_len, "tensor '%.100s' has no counterpart in the %s architecture as tram runs it", t->name,
             a->name);
    return -EINVAL;
  }
  if (kind == K_CONV) { /* [C, 1, K] (or [C, K]) → F32 [C, K] */
    if (!(t->n_dims == 3 && t->shape[1] == 1) && t->n_dims != 2) {
      snprintf(err, err_len, "tensor '%.100s' is not a depthwise convolution [channels, 1, taps]", t->name);
      return -EINVAL;
    }
    float *f = xmalloc((size_t)t->n_elems * sizeof *f);
    for (int64_t i = 0; i < t->n_elems; i++) f[i] = hf__elem(t, i);
    gguf_build_keep(b, f);
    const int64_t taps = t->shape[t->n_dims - 1];
    return gguf_build_tensor(b, name, KERN_F32, 2, (int64_t[]){taps, t->shape[0]}, f, (uint64_t)t->n_elems * 4);
  }
  if (kind == K_QKVZ) return split_qkvz(b, t, a, name, err, err_len);
  if (kind == K_STACK) { /* [n, rows, cols]: a view, GGUF's [cols, rows, n] */
    if (t->n_dims != 3 || gguf_build_tensor(b, name, t->type, 3, (int64_t[]){t->shape[2], t->shape[1], t->shape[0]},
                                            t->data, t->nbytes) != 0) {
      snprintf(err, err_len, "tensor '%.100s' is not a stack of matrices tram can use", t->name);
      return -EINVAL;
    }
    return 0;
  }
  const int vector = t->n_dims == 1;
  if (!vector && t->n_dims != 2) {
    snprintf(err, err_len, "tensor '%.100s' has %d dimensions (want 1 or 2)", t->name, t->n_dims);
    return -EINVAL;
  }
  const int n_head = kind == K_Q ? a->n_heads : a->n_kv_heads;
  if ((kind == K_Q || kind == K_K) && a->permute_qk && (t->shape[0] % (2 * n_head) != 0)) {
    snprintf(err, err_len, "tensor '%.100s': %lld rows do not split into %d heads", t->name,
             (long long)t->shape[0], n_head);
    return -EINVAL;
  }
  const int permute = (kind == K_Q || kind == K_K) && a->permute_qk;
  if (vector) { /* norms and biases: F32 copies (Gemma's and Qwen3.5's norms as 1 + w) */
    const int norm = strstr(name, "norm") != NULL && !strstr(name, "ssm_norm"); /* the gated norm is w */
    float *f = xmalloc((size_t)(t->n_elems ? t->n_elems : 1) * sizeof *f);
    for (int64_t i = 0; i < t->n_elems; i++)
      f[i] = kind == K_NEG_EXP ? -expf(hf__elem(t, i)) : hf__elem(t, i) + ((a->gemma || a->qwen35) && norm ? 1.0f : 0.0f);
    gguf_build_keep(b, f);
    const void *data = permute ? permuted(b, f, t->n_elems, 4, n_head) : f;
    return gguf_build_tensor(b, name, KERN_F32, 1, (int64_t[]){t->shape[0]}, data, (uint64_t)t->n_elems * 4);
  }
  const int64_t row_bytes = (int64_t)(t->nbytes / (uint64_t)(t->shape[0] ? t->shape[0] : 1));
  const void *data = permute ? permuted(b, t->data, t->shape[0], row_bytes, n_head) : t->data;
  if (gguf_build_tensor(b, name, t->type, 2, (int64_t[]){t->shape[1], t->shape[0]}, data, t->nbytes) != 0) {
    snprintf(err, err_len, "tensor '%.100s' is not a matrix tram can use", t->name);
    return -EINVAL;
  }
  return 0;
}

static void release_st(void *st) { st_close(st); }

/* generation_config.json's sampling, under the keys llama.cpp's converter
 * writes (general.sampling.*), and max_new_tokens, which GGUF has no key
 * for, as tram.sampling.max_new_tokens: what model_gen_defaults reads.
 * Integers go in as u32 (others as f32: the reader refuses them). */
static void add_generation(gguf_build_t *b, const cJSON *gen) {
  static const struct {
    const char *json, *key;
    bool integral;
  } MAP[] = {
      {"temperature", "general.sampling.temp", false},
      {"top_k", "general.sampling.top_k", true},
      {"top_p", "general.sampling.top_p", false},
      {"min_p", "general.sampling.min_p", false},
      {"repetition_penalty", "general.sampling.penalty_repeat", false},
      {"max_new_tokens", "tram.sampling.max_new_tokens", true},
  };
  for (size_t i = 0; i < sizeof MAP / sizeof MAP[0]; i++) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(gen, MAP[i].json);
    if (!cJSON_IsNumber(x)) continue;
    const double v = x->valuedouble;
    if (MAP[i].integral && v >= 0 && v <= UINT32_MAX && v == (double)(uint32_t)v)
      gguf_build_u32(b, MAP[i].key, (uint32_t)v);
    else
      gguf_build_f32(b, MAP[i].key, (float)v);
  }
}

/* read_json as an hf_read_json_fn: ctx is the folder. */
static cJSON *read_in_dir(void *ctx, const char *name, int *missing, char *err, size_t err_len) {
  return read_json(ctx, name, missing, err, err_len);
}

/* A sentence-transformers folder's pooling keys (hf__pooling, hf_pooling.c);
 * no modules.json: nothing. 0, or -EINVAL with err written. */
static int add_pooling(gguf_build_t *b, char *dir, const char *arch, char *err, size_t err_len) {
  int missing;
  cJSON *mods = read_json(dir, "modules.json", &missing, err, err_len);
  if (!mods) return missing ? 0 : -EINVAL;
  const int rc = hf__pooling(b, mods, arch, read_in_dir, dir, dir, err, err_len);
  cJSON_Delete(mods);
  return rc;
}

gguf_ctx_t *hf_open(const char *path, char *err, size_t err_len) {
  char dir[4096], msg[512] = "";
  struct stat sb;
  if (strlen(path) >= sizeof dir) {
    snprintf(err, err_len, "%.200s...: path too long", path);
    return NULL;
  }
  memcpy(dir, path, strlen(path) + 1);
  if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    char *slash = strrchr(dir, '/');
    if (slash)
      *slash = 0;
    else
      snprintf(dir, sizeof dir, ".");
  }
  /* config.json and tokenizer.json are needed; tokenizer_config.json and
   * generation_config.json may be absent, not malformed */
  int missing, rc = 0;
  cJSON *cfg = read_json(dir, "config.json", &missing, msg, sizeof msg);
  cJSON *tok = cfg ? read_json(dir, "tokenizer.json", &missing, msg, sizeof msg) : NULL;
  cJSON *tcfg = NULL, *gen = NULL;
  if (!cfg || !tok) rc = -EINVAL;
  if (rc == 0 && !(tcfg = read_json(dir, "tokenizer_config.json", &missing, msg, sizeof msg)) && !missing) rc = -EINVAL;
  if (rc == 0 && !(gen = read_json(dir, "generation_config.json", &missing, msg, sizeof msg)) && !missing) rc = -EINVAL;
  gguf_build_t *b = gguf_build_new();
  hf_arch_t arch = {0};
  st_ctx_t *st = NULL;
  if (rc == 0) rc = hf__config(b, cfg, &arch, msg, sizeof msg);
  if (rc == 0) {
    const cJSON *ids = gen && cJSON_GetObjectItemCaseSensitive(gen, "eos_token_id") ? gen : cfg;
    rc = hf__tokenizer(b, tok, tcfg, ids, arch.n_vocab, msg, sizeof msg);
  }
  if (rc == 0 && gen) add_generation(b, gen);
  if (rc == 0) rc = add_pooling(b, dir, arch.name, msg, sizeof msg);
  if (rc == 0 && !cJSON_GetObjectItemCaseSensitive(tcfg, "chat_template")) {
    size_t len;
    char *tpl = read_text(dir, "chat_template.jinja", &len, &missing, msg, sizeof msg);
    if (tpl) gguf_build_str(b, "tokenizer.chat_template", tpl, len);
    else if (!missing) rc = -EINVAL;
    free(tpl);
  }
  if (rc == 0) {
    st = st_open(stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) ? dir : path, msg, sizeof msg);
    rc = st ? 0 : -EINVAL;
  }
  if (rc == 0) gguf_build_on_close(b, release_st, st);
  for (size_t i = 0; rc == 0 && i < st_tensor_count(st); i++) rc = add_tensor(b, st_tensor_at(st, i), &arch, msg, sizeof msg);
  if (rc == 0) rc = hf__moe_finish(&arch, msg, sizeof msg);
  hf__moe_free(&arch);
  if (rc == 0 && arch.rope_long) {
    gguf_build_keep(b, arch.rope_long);
    gguf_build_keep(b, arch.rope_short);
    const int64_t ne[1] = {arch.n_rope};
    gguf_build_tensor(b, "rope_factors_long.weight", KERN_F32, 1, ne, arch.rope_long, (uint64_t)arch.n_rope * 4);
    gguf_build_tensor(b, "rope_factors_short.weight", KERN_F32, 1, ne, arch.rope_short, (uint64_t)arch.n_rope * 4);
    arch.rope_long = arch.rope_short = NULL;
  }
  free(arch.rope_long);
  free(arch.rope_short);
  cJSON_Delete(cfg);
  cJSON_Delete(tok);
  cJSON_Delete(tcfg);
  cJSON_Delete(gen);
  gguf_ctx_t *g = NULL;
  if (rc == 0)
    g = gguf_build_finish(b, msg, sizeof msg);
  else
    gguf_build_abort(b); /* closes st too, through on_close */
  if (!g) snprintf(err, err_len, "%.400s: %s", path, msg[0] ? msg : "cannot read the checkpoint");
  return g;
}
