/* model/model_internal.h — the model's private structures, shared by
 * model_hparams.c (metadata), model_load.c (tensors) and model_runner.c (the
 * forward). Not for use outside model/model_*.c. */
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
  /* a hybrid's Gated DeltaNet layer (model_layer_recurrent; wq..wo unset) */
  kern_weight_t w_qkv;   /* [ssm_conv_dim, dim] attn_qkv: the convolution's input [q, k, v] */
  kern_weight_t w_z;     /* [n_v_heads head_v, dim] attn_gate: the output norm's gate */
  kern_weight_t w_beta;  /* [n_v_heads, dim] ssm_beta */
  kern_weight_t w_alpha; /* [n_v_heads, dim] ssm_alpha */
  kern_weight_t w_ssm_out; /* [dim, n_v_heads head_v] ssm_out */
  float *conv_w;         /* [ssm_conv_dim, conv_kernel] ssm_conv1d */
  float *a_neg;          /* [n_v_heads] ssm_a: -exp(A_log) */
  float *dt_bias;        /* [n_v_heads] ssm_dt.bias */
  float *ssm_norm;       /* [head_v] ssm_norm: the gated RMSNorm's weight */
  model_moe_layer_t *moe; /* a sparse layer's experts (owned), instead of w_gate/w_up/w_down; NULL: dense */
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
};

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
  float *o;      /* [T, n_v_heads head_v] the rule's output, normed and gated in place */
  float *proj;   /* [T, dim] */
  kern_gdn_args_t args; /* the step's sequences and slots; state set per layer */
} model_gdn_io_t;

/* Issues the token mixer of Gated DeltaNet layer l (li: its index among
 * the recurrent layers) for T rows: x += out_proj(norm(rule(conv(...))) ·
 * silu(z)), the state of each sequence advanced. */
void model__gdn_layer(const model_t *m, int l, int li, const kv_state_t *state, model_gdn_io_t *io, int T);

/* The output projection: output.weight, or token_embd.weight when tied. */
static inline const kern_weight_t *model__output(const model_t *m) {
  return m->hp.tied_output ? &m->tok_embd : &m->output;
}

#endif
