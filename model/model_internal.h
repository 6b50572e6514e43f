/* model/model_internal.h — the model's private structures, shared by
 * model_hparams.c (metadata), model_load.c and model_layers.c (tensors) and
 * model_runner.c (the forward). Not for use outside model/model_*.c. */
#ifndef TRAM_MODEL_LLAMA_INTERNAL_H
#define TRAM_MODEL_LLAMA_INTERNAL_H

#include "gguf/gguf.h"
#include "model/model.h"
#include "model/model_moe.h"

/* One transformer block. Matrices are [rows = out features, cols = in
 * features]; vectors are f32 device buffers. */
typedef struct model_layer {
  float *attn_norm;      /* [dim] */
  kern_weight_t wq;      /* [q_dim, dim] */
  kern_weight_t wk;      /* [kv_dim, dim] */
  kern_weight_t wv;      /* [kv_dim, dim] */
  float *bq, *bk, *bv;   /* [q_dim], [kv_dim], [kv_dim]; NULL without qkv_bias */
  float *bo;             /* [dim] attn_output.bias; NULL without o_bias */
  float *sinks;          /* [n_heads] attn_sinks (gpt-oss); NULL without */
  float *q_norm, *k_norm; /* [head_dim] each; NULL without qk_norm */
  float *post_attn_norm, *post_ffn_norm; /* [dim] each; NULL without post_norms */
  kern_weight_t wo;      /* [dim, q_dim] */
  float *ffn_norm;       /* [dim] */
  kern_weight_t w_gate;  /* [ff_dim, dim] */
  kern_weight_t w_up;    /* [ff_dim, dim] */
  kern_weight_t w_down;  /* [dim, ff_dim] */
  /* joined (model_join.c; rows 0: not joined): wq, wk, wv (w_gate, w_up)
   * are then views of these */
  kern_weight_t wqkv;    /* [q_dim + 2 kv_dim, dim] = [Wq; Wk; Wv] */
  kern_weight_t w_gu;    /* [2 ff_dim, dim] = [Wgate; Wup] */
  /* a hybrid's Gated DeltaNet layer (model_layer_recurrent; wq..wo unset) */
  kern_weight_t w_qkv;   /* [ssm_conv_dim, dim] attn_qkv: the convolution's input [q, k, v] */
  kern_weight_t w_z;     /* [n_v_heads head_v, dim] attn_gate: the output norm's gate */
  kern_weight_t w_beta;  /* [n_v_heads, dim] ssm_beta */
  kern_weight_t w_alpha; /* [n_v_heads, dim] ssm_alpha */
  kern_weight_t w_ba;    /* [2 n_v_heads, dim] ssm_ba (qwen3next, instead of the two above): per key head,
                            its n_v_heads / n_k_heads β rows then as many α rows */
  kern_weight_t w_ssm_out; /* [dim, n_v_heads head_v] ssm_out */
  float *conv_w;         /* [ssm_conv_dim, conv_kernel] ssm_conv1d */
  float *a_neg;          /* [n_v_heads] ssm_a: -exp(A_log) */
  float *dt_bias;        /* [n_v_heads] ssm_dt.bias */
  float *ssm_norm;       /* [head_v] ssm_norm: the gated RMSNorm's weight */
  model_moe_layer_t *moe; /* a sparse layer's experts (owned), instead of w_gate/w_up/w_down; NULL: dense */
  /* gemma4 (model_gemma4.c) */
  kern_weight_t w_pl_gate; /* [ple_dim, dim] inp_gate: the per-layer input's gate */
  kern_weight_t w_pl_proj; /* [dim, ple_dim] proj */
  float *pl_norm;          /* [dim] post_norm */
  float *moe_pre_norm;     /* [dim] pre_ffw_norm_2: the experts' input norm (a layer with the MoE block) */
  float *mlp_post_norm;    /* [dim] post_ffw_norm_1: the dense MLP's output norm there */
  float *moe_post_norm;    /* [dim] post_ffw_norm_2: the experts' output norm */
  float layer_scale;       /* layer_output_scale: x *= it at the layer's end */
} model_layer_t;

struct model {
  kern_backend_t *be;    /* not owned */
  gguf_ctx_t *gguf;      /* owned: the mapping the weights view */
  model_hparams_t hp;
  float *inv_freq;       /* host [rot_dim / 2], owned */
  float *inv_freq_dev;   /* device [rot_dim / 2] */
  float *inv_freq_swa_dev; /* device [rot_dim / 2]: the sliding layers' (rope_base_swa), or NULL */

  kern_weight_t tok_embd; /* [n_vocab, dim]: the embedding, and the output when tied */
  kern_weight_t output;   /* [n_vocab, dim]: output.weight, unset (impl NULL) when tied */
  float *output_norm;     /* device [dim] */
  model_layer_t *layers;  /* [n_layers], owned */
  int64_t step_bytes;     /* model_step_weight_bytes() */
  /* --quantize (model_load_opts_t.quantize): the host copies quantized at
   * load that weights view instead of the mapping; freed after them */
  kern_type_t quantize;   /* the target type; KERN_F32 (0): weights as stored */
  void **quant_bufs;      /* [n_quant_bufs], owned */
  size_t n_quant_bufs, quant_bufs_cap;
  int n_quantized;        /* matrices quantized (for the load's log line) */
  /* gemma4 (model_gemma4.c) */
  kern_weight_t pl_embd;   /* [n_layers ple_dim, n_vocab] per_layer_token_embd */
  kern_weight_t pl_proj;   /* [n_layers ple_dim, dim] per_layer_model_proj */
  float *pl_proj_norm;     /* device [ple_dim] per_layer_proj_norm */
  float *inv_freq_full_dev; /* device [head_dim_full / 2]: the full layers' (divided by rope_freqs.weight) */
  float *inv_freq_full;     /* host [head_dim_full / 2]: the same */
  float *ones;             /* device [max head_dim]: the weight of v_norm, an RMSNorm without one */
  int *cache_kv_heads, *cache_head_dim; /* [n_attn_layers] host: the cache's per-layer geometry */
};

/* model_hparams.c's readers of `<arch>.<name>`: an integer in [lo, hi]
 * (def when absent, if def >= 0), a positive finite float (def when
 * absent, if def > 0). 0, or -EINVAL naming the key. */
int model__get_int(const gguf_ctx_t *g, const char *arch, const char *name, int64_t def, int64_t lo, int64_t hi,
                   int *out, char *err, size_t err_len);
int model__get_pos_float(const gguf_ctx_t *g, const char *arch, const char *name, float def, float *out, char *err,
                         size_t err_len);

/* The state of one load (model_load.c): the tensors used so far, and the
 * error line. */
typedef struct loader {
  model_t *m;
  const gguf_tensor_t **used; /* [n_used] */
  size_t n_used, cap;
  char *err;
  size_t err_len;
} loader_t;

/* A weight matrix rows × cols prepared on the backend; an F32 vector of n
 * copied to a device buffer (a missing optional one leaves *dst NULL).
 * 0 or -EINVAL with ld->err written (model_load.c). */
int model__load_matrix(loader_t *ld, const char *name, int64_t rows, int64_t cols, kern_weight_t *w);
int model__load_vector(loader_t *ld, const char *name, int64_t n, float **dst, int required);
/* The F32 tensor `name` of one element, read on the host into *out. */
int model__load_scalar(loader_t *ld, const char *name, float *out);
/* The F32 tensor `name` of [ne0] (ne1 == 0) or [ne0, ne1] copied into a new
 * device buffer (*dst; a missing optional one leaves it NULL). 0 or -EINVAL
 * (or -ENOMEM). */
int model__load_f32(loader_t *ld, const char *name, int64_t ne0, int64_t ne1, float **dst, int required);
/* Rows [row0, row0 + rows) of the matrix `name` of total_rows x cols
 * prepared on the backend (one part of a fused matrix: phi3's attn_qkv and
 * ffn_up), counted in step_bytes. 0 or -EINVAL. */
int model__load_rows(loader_t *ld, const char *name, int64_t total_rows, int64_t cols, int64_t row0, int64_t rows,
                     kern_weight_t *w);
/* The tensor `name` of shape [ne0] (ne1 == 0), [ne0, ne1] (ne2 == 0) or
 * [ne0, ne1, ne2], recorded as used; NULL when absent (an error if
 * required: *bad set) or of another shape (an error: *bad set). */
const gguf_tensor_t *model__find3(loader_t *ld, const char *name, int64_t ne0, int64_t ne1, int64_t ne2,
                                  int required, int *bad);
/* rows x cols of `type` at data (the GGUF layout; NULL: a type without a
 * row size) prepared on the backend as w, quantized first under
 * --quantize; not counted in step_bytes. 0 or -EINVAL. */
int model__prepare(loader_t *ld, const char *name, kern_type_t type, const void *data, int64_t rows, int64_t cols,
                   kern_weight_t *w);
/* Layer l's router and experts (a sparse layer: model_moe.h) into its moe
 * (model_layers.c). */
int model__load_moe(loader_t *ld, int l);
/* Layer l's tensors, by family (model_layers.c; Gemma 4's: model_gemma4.c). */
int model__load_layer(loader_t *ld, int l);
/* The F32 vector `name` of n elements, read on the host into out[n]; a
 * missing optional one leaves out as it is. 0 or -EINVAL. */
int model__load_host(loader_t *ld, const char *name, int64_t n, float *out, int required);

/* The Gemma families' keys (model_gemma_hparams.c), on top of the common
 * ones: Gemma 2 and 3's block (version 2 or 3), and Gemma 4's keys as
 * llama.cpp writes them. 0 or -EINVAL naming the key. The `<arch>.` keys
 * each reads beyond the common ones (NULL-terminated). */
int model__gemma_hparams(const gguf_ctx_t *g, const char *arch, int version, model_hparams_t *hp, char *err,
                         size_t err_len);
int model__gemma4_hparams(const gguf_ctx_t *g, const char *arch, model_hparams_t *hp, char *err, size_t err_len);
extern const char *const model__gemma_keys[];
extern const char *const model__gemma4_keys[];

/* Gemma 4 (model_gemma4.c). */
/* The tensors of the per-layer inputs (model-wide), and layer l's. */
int model__gemma4_load_globals(loader_t *ld);
int model__gemma4_load_layer(loader_t *ld, int l);
/* After the tensors: RoPE frequencies, v_norm's ones, the cache geometry. */
int model__gemma4_extras(model_t *m, char *err, size_t err_len);
void model__gemma4_free(model_t *m);

/* The device buffers of Gemma 4's layers, T rows (the runner's, and these). */
typedef struct model_g4_io {
  float *x, *h, *proj, *q, *att, *gate, *up; /* the runner's */
  const int32_t *ids, *pos;                 /* the runner's */
  float *k[2], *v[2]; /* [T, kv_dim of the type] sliding (0) and full (1) layers' K/V: the last owner's,
                         which the KV-shared layers of the type read again */
  float *pli;         /* [T, n_layers ple_dim] the per-layer inputs */
  float *plc;         /* [T, n_layers ple_dim] scratch: their context part */
  float *pg;          /* [T, ple_dim] a layer's gate */
  float *pl;          /* [T, ple_dim] a layer's input */
  float *mx, *mr, *my; /* [T, dim] each, with the MoE block: the experts' input, the router's, their output */
  struct model_moe_scratch *moe; /* the runner's (not owned), set before each step; NULL: no MoE block */
} model_g4_io_t;

/* Allocates the gemma4-only buffers of io for T rows (0, or -ENOMEM with
 * what was allocated freed by model__gemma4_io_free); frees them. */
int model__gemma4_io_alloc(kern_backend_t *be, const model_hparams_t *hp, int T, model_g4_io_t *io);
void model__gemma4_io_free(kern_backend_t *be, model_g4_io_t *io);

/* Issues every layer of Gemma 4 for T rows whose embedding (scaled) is in
 * io->x: x goes through the layers, attending through attn's layers. */
int model__gemma4_layers(const model_t *m, attn_t *attn, model_g4_io_t *io, int T);

/* Reads and checks the hyper-parameters from g's metadata into hp (tensor
 * presence fields, tied_output and qkv_bias, included), and computes the
 * RoPE inverse frequencies into a malloc'd [rot_dim / 2] array (*inv_freq,
 * the caller's), applying the scaling (a rope_freqs.weight tensor included).
 * Returns 0, or -EINVAL after writing one line naming the key into err. */
int model__hparams_read(const gguf_ctx_t *g, model_hparams_t *hp, float **inv_freq, char *err, size_t err_len);

/* The device buffers of one Gated DeltaNet layer's forward, T rows. */
typedef struct model_gdn_io {
  float *x;      /* [T, dim] the residual stream (x += the layer's output) */
  float *h;      /* [T, dim] scratch: the normed input */
  float *mix;    /* [T, ssm_conv_dim] the projection, then the convolution's output in conv */
  float *conv;   /* [T, ssm_conv_dim] */
  float *z;      /* [T, n_v_heads head_v] */
  float *alpha;  /* [T, n_v_heads] */
  float *beta;   /* [T, n_v_heads] */
  float *ba;     /* [T, n_k_heads, 2 n_v_heads / n_k_heads] qwen3next's fused β, α; NULL elsewhere */
  float *o;      /* [T, n_v_heads head_v] the rule's output, normed and gated in place */
  float *proj;   /* [T, dim] */
  kern_gdn_args_t args; /* the step's sequences and slots; state set per layer */
} model_gdn_io_t;

/* Issues the token mixer of Gated DeltaNet layer l (li: its index among
 * the recurrent layers) for T rows: x += out_proj(norm(rule(conv(...))) ·
 * silu(z)), the state of each sequence advanced. */
void model__gdn_layer(const model_t *m, int l, int li, const kv_state_t *state, model_gdn_io_t *io, int T);

/* Joined projections (model_join.c). The most rows of a step that runs
 * the joined GEMMs; larger steps run the parts. */
#define MODEL_JOIN_MAX_ROWS 64
/* 1 when a step of T rows runs the joined GEMMs (1 <= T <= MODEL_JOIN_MAX_ROWS). */
int model__join_rows(int T);
/* Joins each layer's projections where the backend can (after the load). */
void model__join_layers(model_t *m);

/* The output projection: output.weight, or token_embd.weight when tied. */
static inline const kern_weight_t *model__output(const model_t *m) {
  return m->hp.tied_output ? &m->tok_embd : &m->output;
}

#endif
