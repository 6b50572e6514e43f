/* hf/hf_moe.c — the mixture-of-experts parts of a Hugging Face checkpoint
 * (see hf_internal.h), read as llama.cpp's converter writes them:
 *   config.json: num_experts (qwen; transformers 5 writes num_local_experts)
 *   or num_local_experts (mixtral) → expert_count; num_experts_per_tok →
 *   expert_used_count; moe_intermediate_size (qwen) or intermediate_size
 *   (mixtral) → expert_feed_forward_length; shared_expert_intermediate_size
 *   (qwen2_moe) → expert_shared_feed_forward_length; norm_topk_prob (qwen,
 *   default false; Mixtral always renormalises) → expert_weights_norm;
 *   decoder_sparse_step and mlp_only_layers: layer l is sparse iff l is
 *   not in mlp_only_layers and (l + 1) % decoder_sparse_step == 0 (HF's
 *   Qwen2Moe/Qwen3MoeDecoderLayer), the others keep a dense MLP of
 *   intermediate_size.
 *   tensors: mlp.gate / block_sparse_moe.gate → ffn_gate_inp;
 *   mlp.experts.E.{gate,up,down}_proj / block_sparse_moe.experts.E.w{1,3,2}
 *   → ffn_{gate,up,down}.E (one tensor per expert, as older llama.cpp files
 *   have them: views of the mapping, no copy; the model takes them where a
 *   converted file has the stacked ffn_*_exps); mlp.shared_expert.* →
 *   ffn_*_shexp, mlp.shared_expert_gate → ffn_gate_inp_shexp; or stacked,
 *   mlp.experts.gate_up_proj [E, 2 F, dim] → ffn_gate_up_exps and
 *   mlp.experts.down_proj → ffn_down_exps (views, hf_open.c; Qwen3.5-MoE
 *   as transformers 5 holds it). Every expert
 *   of every sparse layer must be there (hf__moe_finish). gpt_oss: Mixtral's
 *   fields, its stacked experts converted by hf_gptoss.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "hf/hf_internal.h"
#include "st/safetensors.h"

/* The experts of one layer and matrix seen so far. */
struct hf_moe_stack {
  unsigned char *have; /* [n_expert], NULL until the first */
  int n_have;
};

static const cJSON *field(const cJSON *o, const char *name) { return cJSON_GetObjectItemCaseSensitive(o, name); }

int hf__moe_config(gguf_build_t *b, const cJSON *cfg, const char *mt, hf_arch_t *arch, char *err, size_t err_len) {
  const int gptoss = strcmp(mt, "gpt_oss") == 0; /* Mixtral's fields, every layer sparse */
  const int mixtral = strcmp(mt, "mixtral") == 0 || gptoss, qwen2 = strcmp(mt, "qwen2_moe") == 0;
  /* Qwen3.5-MoE: every layer sparse, the top k always renormalised (its config class has no
   * decoder_sparse_step, mlp_only_layers or norm_topk_prob); Qwen3-Next: norm_topk_prob defaults to true */
  const int q35moe = strcmp(mt, "qwen3_5_moe_text") == 0, next = strcmp(mt, "qwen3_next") == 0;
  const int shexp = qwen2 || q35moe || next;
  const cJSON *ne = field(cfg, "num_experts");
  if (!ne || cJSON_IsNull(ne)) ne = field(cfg, "num_local_experts");
  long long n_exp, used, eff, shared = 0, step = 1;
  if (hf__int(ne, mixtral ? "config.json: num_local_experts" : "config.json: num_experts", -1, 1, 4096, &n_exp, err,
              err_len) ||
      hf__int(field(cfg, "num_experts_per_tok"), "config.json: num_experts_per_tok", -1, 1, n_exp, &used, err,
              err_len) ||
      hf__int(field(cfg, mixtral ? "intermediate_size" : "moe_intermediate_size"),
              mixtral ? "config.json: intermediate_size" : "config.json: moe_intermediate_size", -1, 1, 1 << 22, &eff,
              err, err_len) ||
      (shexp && hf__int(field(cfg, "shared_expert_intermediate_size"), "config.json: shared_expert_intermediate_size",
                        -1, 1, 1 << 22, &shared, err, err_len)) ||
      (!mixtral && !q35moe && hf__int(field(cfg, "decoder_sparse_step"), "config.json: decoder_sparse_step", 1, 1, 4096, &step,
                           err, err_len)))
    return -EINVAL;
  const cJSON *norm = field(cfg, "norm_topk_prob");
  if (norm && !cJSON_IsNull(norm) && !cJSON_IsBool(norm)) {
    snprintf(err, err_len, "config.json: norm_topk_prob is not a boolean");
    return -EINVAL;
  }
  arch->n_expert = (int)n_exp;
  arch->expert_ff = (int)eff;
  arch->sparse = xmalloc((size_t)arch->n_layers);
  for (int l = 0; l < arch->n_layers; l++) arch->sparse[l] = (l + 1) % step == 0;
  const cJSON *only = q35moe ? NULL : field(cfg, "mlp_only_layers");
  if (only && !cJSON_IsNull(only) && (mixtral || !cJSON_IsArray(only))) {
    snprintf(err, err_len, "config.json: mlp_only_layers is not a list of layer indices");
    return -EINVAL;
  }
  for (int i = 0; cJSON_IsArray(only) && i < cJSON_GetArraySize(only); i++) {
    long long l;
    char what[64];
    snprintf(what, sizeof what, "config.json: mlp_only_layers[%d]", i);
    if (hf__int(cJSON_GetArrayItem(only, i), what, -1, 0, arch->n_layers - 1, &l, err, err_len)) return -EINVAL;
    arch->sparse[l] = 0;
  }
  arch->stacks = xcalloc((size_t)arch->n_layers * 3, sizeof *arch->stacks);
  const char *a = arch->name;
  char key[96];
#define U32(name, v) (snprintf(key, sizeof key, "%s." name, a), gguf_build_u32(b, key, (uint32_t)(v)))
  U32("expert_count", n_exp);
  U32("expert_used_count", used);
  U32("expert_feed_forward_length", eff);
  if (shared > 0) U32("expert_shared_feed_forward_length", shared);
#undef U32
  snprintf(key, sizeof key, "%s.expert_weights_norm", a);
  gguf_build_bool(b, key, (mixtral && !gptoss) || q35moe || cJSON_IsTrue(norm) ||
                             (next && (!norm || cJSON_IsNull(norm)))); /* gpt-oss: a softmax over the k */
  return 0;
}

void hf__moe_free(hf_arch_t *a) {
  for (int i = 0; a->stacks && i < a->n_layers * 3; i++) free(a->stacks[i].have);
  free(a->stacks);
  free(a->sparse);
  a->stacks = NULL;
  a->sparse = NULL;
}

static const char *const KIND[3] = {"gate", "up", "down"};

/* A layer's experts given stacked: mlp.experts.gate_up_proj [E, 2 F, dim]
 * (each expert's gate rows, then its up rows) or mlp.experts.down_proj
 * [E, dim, F], checked and counted as every expert of its matrices: 0 (the
 * caller maps the tensor), or -EINVAL. */
static int stacked(const st_tensor_t *t, hf_arch_t *a, int layer, const char *rest, int gate_up, char *err,
                   size_t err_len) {
  const int64_t F = a->expert_ff, D = a->dim;
  const int64_t want[3] = {a->n_expert, gate_up ? 2 * F : D, gate_up ? D : F};
  if (!a->sparse[layer] || t->n_dims != 3 || t->shape[0] != want[0] || t->shape[1] != want[1] ||
      t->shape[2] != want[2]) {
    snprintf(err, err_len, "tensor 'model.layers.%d.%.100s': %s", layer, rest,
             !a->sparse[layer] ? "the layer is dense (mlp_only_layers, decoder_sparse_step)" : "not of the shape "
             "config.json gives ([num_experts, 2 moe_intermediate_size, hidden_size] for gate_up_proj, "
             "[num_experts, hidden_size, moe_intermediate_size] for down_proj)");
    return -EINVAL;
  }
  for (int k = gate_up ? 0 : 2; k < (gate_up ? 2 : 3); k++) {
    struct hf_moe_stack *s = &a->stacks[layer * 3 + k];
    if (!s->have) s->have = xcalloc((size_t)a->n_expert, 1);
    if (s->n_have > 0) {
      snprintf(err, err_len, "tensor 'model.layers.%d.%.100s': the layer's experts are given twice", layer, rest);
      return -EINVAL;
    }
    memset(s->have, 1, (size_t)a->n_expert);
    s->n_have = a->n_expert;
  }
  return 0;
}

int hf__moe_tensor(gguf_build_t *b, const st_tensor_t *t, hf_arch_t *a, int layer, const char *rest, char *err,
                   size_t err_len) {
  if (!a->n_expert) return 0;
  if (a->gptoss) return hf__gptoss_tensor(b, t, a, layer, rest, err, err_len); /* stacked, transposed */
  const int gate_up = strcmp(rest, "mlp.experts.gate_up_proj") == 0, down = strcmp(rest, "mlp.experts.down_proj") == 0;
  if (gate_up || down) /* stacked (transformers 5's Qwen3.5-MoE form): hf_open.c maps it, a view */
    return stacked(t, a, layer, rest, gate_up, err, err_len);
  int e, at = 0, kind = -1;
  char which[16] = "";
  if (sscanf(rest, "mlp.experts.%d.%15[a-z_].weight%n", &e, which, &at) == 2 && rest[at] == 0) {
    kind = !strcmp(which, "gate_proj") ? 0 : !strcmp(which, "up_proj") ? 1 : !strcmp(which, "down_proj") ? 2 : -1;
  } else if (sscanf(rest, "block_sparse_moe.experts.%d.w%15[0-9].weight%n", &e, which, &at) == 2 && rest[at] == 0) {
    kind = !strcmp(which, "1") ? 0 : !strcmp(which, "3") ? 1 : !strcmp(which, "2") ? 2 : -1;
  } else {
    return 0;
  }
  if (kind < 0 || e < 0 || e >= a->n_expert || !a->sparse[layer]) {
    snprintf(err, err_len, "tensor 'model.layers.%d.%.100s' has no counterpart: %s", layer, rest,
             kind < 0 ? "not an expert matrix" : !a->sparse[layer] ? "the layer is dense (mlp_only_layers, "
                                                                     "decoder_sparse_step)" : "expert out of range");
    return -EINVAL;
  }
  struct hf_moe_stack *s = &a->stacks[layer * 3 + kind];
  if (t->n_dims != 2) {
    snprintf(err, err_len, "tensor 'model.layers.%d.%.100s' has %d dimensions (want 2)", layer, rest, t->n_dims);
    return -EINVAL;
  }
  if (!s->have) s->have = xcalloc((size_t)a->n_expert, 1);
  if (s->have[e]) {
    snprintf(err, err_len, "tensor 'model.layers.%d.%.100s' is given twice", layer, rest);
    return -EINVAL;
  }
  s->have[e] = 1;
  s->n_have++;
  char name[64];
  snprintf(name, sizeof name, "blk.%d.ffn_%s.%d.weight", layer, KIND[kind], e);
  if (gguf_build_tensor(b, name, t->type, 2, (int64_t[]){t->shape[1], t->shape[0]}, t->data, t->nbytes) != 0) {
    snprintf(err, err_len, "tensor 'model.layers.%d.%.100s' is not a matrix tram can use", layer, rest);
    return -EINVAL;
  }
  return 1;
}

int hf__moe_check(const hf_arch_t *a, int layer, const char *hf_name, const char *gguf, char *err, size_t err_len) {
  if (!a->n_expert) return 0;
  const char *dot = strchr(gguf, '.'); /* "blk.N.<name>" */
  dot = dot ? strchr(dot + 1, '.') : NULL;
  if (!dot) return 0;
  const char *n = dot + 1;
  const int moe = strncmp(n, "ffn_gate_inp", 12) == 0 || strstr(n, "_shexp") != NULL;
  const int dense = !strcmp(n, "ffn_gate.weight") || !strcmp(n, "ffn_up.weight") || !strcmp(n, "ffn_down.weight");
  if ((moe && !a->sparse[layer]) || (dense && a->sparse[layer])) {
    snprintf(err, err_len, "tensor '%.100s': layer %d is %s by config.json (decoder_sparse_step, mlp_only_layers)",
             hf_name, layer, a->sparse[layer] ? "sparse" : "dense");
    return -EINVAL;
  }
  return 0;
}

int hf__moe_finish(hf_arch_t *a, char *err, size_t err_len) {
  int rc = 0;
  for (int l = 0; a->stacks && !a->gptoss && l < a->n_layers && rc == 0; l++) /* gpt_oss: model_load checks */
    for (int k = 0; k < 3 && rc == 0 && a->sparse[l]; k++) {
      const struct hf_moe_stack *s = &a->stacks[l * 3 + k];
      if (s->n_have == a->n_expert) continue;
      int e = 0;
      while (s->have && e < a->n_expert && s->have[e]) e++;
      snprintf(err, err_len, "layer %d: expert %d's %s matrix is missing", l, e, KIND[k]);
      rc = -EINVAL;
    }
  hf__moe_free(a);
  return rc;
}
