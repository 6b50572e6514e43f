/* hf/hf_internal.h — what hf/'s files share: hf_open.c (the folder, the
 * files, the tensors), hf_config.c (config.json → keys; its RoPE fields:
 * hf_rope.c), hf_tokenizer.c
 * (tokenizer.json → tokenizer.ggml.* keys), hf_moe.c (the experts),
 * hf_pooling.c (modules.json → the pooling keys). Not for use outside hf/. */
#ifndef TRAM_HF_INTERNAL_H
#define TRAM_HF_INTERNAL_H

#include <cjson/cJSON.h>

#include "gguf/gguf_build.h"

/* What hf_config.c learns that the tensor mapping needs. */
typedef struct hf_arch {
  const char *name;  /* the GGUF architecture */
  int permute_qk;    /* llama: reorder Q/K rows for adjacent-pair RoPE (llama.cpp's permute) */
  int gemma;         /* norm weights stored as w, GGUF wants 1 + w */
  int tied;          /* tie_word_embeddings: lm_head.weight not used */
  int gemma4;        /* Gemma 4: Gemma's tensor names, norms as stored (w), per-layer inputs; its multimodal
                        folder's model.language_model. read as model., its towers skipped */
  int qwen35;        /* Qwen3.5's hybrid: zero-centred norms (1 + w, not the gated ssm_norm), A_log as
                        -exp(A_log), the conv1d squeezed, its multimodal wrapper's names unwrapped */
  int qwen3next;     /* qwen3_next: its fused in_proj_qkvz split into attn_qkv and attn_gate (copies),
                        in_proj_ba kept as ssm_ba (qwen35 set too) */
  int ssm_hk, ssm_hv, ssm_dk, ssm_dv; /* the linear layers' key and value heads and widths (qwen35) */
  int gptoss;        /* gpt_oss: the MLP's input norm is post_attention_norm, experts as hf_gptoss.c */
  int n_heads, n_kv_heads, n_layers, n_vocab;
  int dim, expert_ff; /* hidden_size, the experts' intermediate size (gpt_oss's stacks) */
  float *rope_long, *rope_short; /* phi3 LongRoPE factors [n_rope], malloc'd, or NULL */
  int n_rope;
  /* mixture of experts (hf_moe.c): 0 experts for a dense model */
  int n_expert;
  unsigned char *sparse;        /* [n_layers] 1: the layer's MLP is the experts' (malloc'd) */
  struct hf_moe_stack *stacks;  /* [n_layers * 3] the experts seen of each layer and matrix (malloc'd) */
} hf_arch_t;

/* config.json (cfg) → the architecture's keys in b, and *arch. 0, or
 * -EINVAL after writing one line naming the field into err. */
int hf__config(gguf_build_t *b, const cJSON *cfg, hf_arch_t *arch, char *err, size_t err_len);

/* tokenizer.json (tok) and tokenizer_config.json (tcfg, may be NULL), with
 * config.json's ids as fallbacks → tokenizer.ggml.* and
 * tokenizer.chat_template keys in b; the vocabulary padded to n_vocab. 0 or
 * -EINVAL with err written. */
int hf__tokenizer(gguf_build_t *b, const cJSON *tok, const cJSON *tcfg, const cJSON *cfg, int n_vocab, char *err,
                  size_t err_len);

/* The mixture-of-experts fields of config.json (model_type qwen2_moe,
 * qwen3_moe or mixtral) → the `<arch>.expert_*` keys, and which layers are
 * sparse (decoder_sparse_step, mlp_only_layers). 0 or -EINVAL naming the
 * field. */
int hf__moe_config(gguf_build_t *b, const cJSON *cfg, const char *model_type, hf_arch_t *arch, char *err,
                   size_t err_len);

struct st_tensor;
/* Tensor t of layer `layer` (`rest`: its name after "model.layers.N."):
 * an expert's matrix, added as blk.N.ffn_{gate,up,down}.E.weight: 1; not
 * an expert's: 0; -EINVAL with err written for a bad one. */
int hf__moe_tensor(gguf_build_t *b, const struct st_tensor *t, hf_arch_t *a, int layer, const char *rest, char *err,
                   size_t err_len);

/* Checks the GGUF name `gguf` of a layer tensor against the layer's kind
 * (a router or shared expert in a dense layer, a dense MLP matrix in a
 * sparse one: an error naming it). 0 or -EINVAL. */
int hf__moe_check(const hf_arch_t *a, int layer, const char *hf_name, const char *gguf, char *err, size_t err_len);

/* After the last tensor: every sparse layer's stacks complete (else an
 * error naming the first missing expert). Frees the stacking state (also
 * on the error paths). 0 or -EINVAL. */
int hf__moe_finish(hf_arch_t *a, char *err, size_t err_len);
void hf__moe_free(hf_arch_t *a);

/* A positive finite JSON number into *out; def when v is NULL or JSON null
 * (an error when def <= 0). 0 or -EINVAL naming `what`. */
int hf__pos_float(const cJSON *v, const char *what, double def, double *out, char *err, size_t err_len);

/* config.json's RoPE fields (hf_rope.c). hf__rope_scaling writes rope_scaling
 * / rope_parameters (by rope_type) as `<a>.rope.scaling.*` keys, phi3's
 * LongRoPE factor lists into arch (rot_dim / 2 each); 0 or -EINVAL with err
 * naming the field. hf__rope_theta_field: rope_theta, top-level or in
 * rope_parameters (NULL when absent). hf__rope_parameters_flat refuses the
 * per-layer-type form of rope_parameters; 0 or -EINVAL. */
int hf__rope_scaling(gguf_build_t *b, const cJSON *cfg, const char *a, hf_arch_t *arch, int rot_dim, char *err,
                     size_t err_len);
const cJSON *hf__rope_theta_field(const cJSON *cfg);
int hf__rope_parameters_flat(const cJSON *cfg, char *err, size_t err_len);

/* layer_types (a JSON array of n_layers "sliding_attention" /
 * "full_attention") as the periodic pattern tram runs: *pattern = p when
 * layer l is full exactly where (l + 1) % p == 0 (0: no full layer). 0, or
 * -EINVAL naming the first layer that breaks it. */
int hf__layer_pattern(const cJSON *types, int n_layers, long long *pattern, char *err, size_t err_len);

/* Gemma 4's fields of config.json (hf_gemma4.c) → the gemma4.* keys that
 * model/model_gemma4.c reads, beyond the common ones hf__config wrote
 * (attention.head_count_kv and key_length there are the sliding layers').
 * a: the architecture prefix; n_layers, head_dim, n_kv_heads as read. 0 or
 * -EINVAL naming the field. */
int hf__gemma4_config(gguf_build_t *b, const cJSON *cfg, const char *a, int n_layers, int head_dim, int n_kv_heads,
                      char *err, size_t err_len);

/* gpt_oss's config.json fields beyond the common and the experts' ones
 * (hf_gptoss.c): 0 or -EINVAL naming the field. */
int hf__gptoss_config(const cJSON *cfg, int n_layers, char *err, size_t err_len);

/* gpt_oss's stacked expert tensor t of layer `layer` (`rest`: its name
 * after "model.layers.N.") → GGUF's ffn_*_exps copies: 1; not one: 0;
 * -EINVAL with err written for a bad one. */
int hf__gptoss_tensor(gguf_build_t *b, const struct st_tensor *t, const hf_arch_t *a, int layer, const char *rest,
                      char *err, size_t err_len);

/* Element i of t (F32, F16 or BF16) as f32. */
float hf__elem(const struct st_tensor *t, int64_t i);

/* Reads the JSON file `name` (a path relative to the checkpoint's folder):
 * the parsed file; NULL with *missing set when it does not exist, NULL with
 * err written when it cannot be read or parsed. */
typedef cJSON *(*hf_read_json_fn)(void *ctx, const char *name, int *missing, char *err, size_t err_len);

/* A sentence-transformers modules.json (modules, parsed; any JSON) →
 * `<arch>.pooling_type` from its Pooling module's config.json (fetched
 * through read(read_ctx, "<path>/config.json")) and tram.pooling.normalize
 * (1 when a Normalize module is listed). dir names the folder in messages.
 * 0, or -EINVAL with err written: the Pooling config missing or malformed,
 * a mode tram does not pool with (max, mean_sqrt_len, weightedmean), or
 * several modes at once. */
int hf__pooling(gguf_build_t *b, const cJSON *modules, const char *arch, hf_read_json_fn read, void *read_ctx,
                const char *dir, char *err, size_t err_len);

/* A whole number JSON value in [lo, hi] into *out; def when v is NULL or
 * JSON null (an error when def < lo). 0 or -EINVAL naming `what`. */
int hf__int(const cJSON *v, const char *what, long long def, long long lo, long long hi, long long *out, char *err,
            size_t err_len);

#endif
