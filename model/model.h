/* model/model.h — a Llama-family model: its hyper-parameters (from GGUF
 * metadata), its weights prepared on a compute backend, and the forward
 * pass of one batch. The file's tokenizer and chat template are text/'s
 * (tok_create_from_gguf, chat_tmpl_from_gguf over model_gguf()).
 *
 * Architectures (`general.architecture`):
 *   llama  Llama 2 and 3, SmolLM, Mistral-style models. RoPE rotates adjacent
 *          pairs (2p, 2p + 1): llama.cpp's converters permute the Q and K
 *          rows of `llama` models so that this is the right pairing.
 *   qwen2  the same block with Q/K/V biases, RoPE on (p, p + rot_dim / 2)
 *          ("neox").
 *   qwen3  qwen2's RoPE without biases, and an RMSNorm over each head of
 *          Q and K (attn_q_norm, attn_k_norm, [head_dim]) before RoPE.
 * Any of them may carry `<arch>.attention.sliding_window` (Mistral-style
 * local attention: a query sees itself and the window - 1 keys before it).
 *   gemma2 the embedding times sqrt(dim); RMSNorm before and after both
 *          sub-blocks (post_attention_norm, post_ffw_norm; GGUF stores
 *          Gemma's (1 + w) weights with the 1 added); GeGLU (tanh GELU)
 *          MLP; attention and final logits soft-capped; a sliding window
 *          on every other layer (0, 2, ...); neox RoPE; tied output.
 *   gemma3 gemma2 without soft-capping, with per-head Q/K norms (as
 *          qwen3), five sliding layers to one global (pattern 6), the
 *          sliding layers on their own unscaled RoPE base (10000).
 *   qwen3moe, qwen2moe  qwen3's and qwen2's attention with a mixture-of-
 *          experts MLP (model/model_moe.h); a llama file with expert_count
 *          > 0 is Mixtral's.
 *   phi3   the llama block with neox RoPE, Q/K/V fused in one matrix
 *          (attn_qkv) and gate/up in another (ffn_up), both used as row
 *          views; LongRoPE (rope_factors_long/short) when present.
 *   qwen35 Qwen3.5's hybrid (model/model_gdn.c): three of every
 *          full_attention_interval layers are Gated DeltaNet (linear
 *          attention with a recurrent state per sequence, kept in a
 *          cache/kv_state.h pool), the last is qwen3's attention with an
 *          output gate (attn_q holds [q, gate] per head; out · sigmoid(gate))
 *          and partial neox RoPE; RMSNorm weights as stored (llama.cpp adds
 *          Qwen3.5's 1 + w); the paged cache holds only the attention layers.
 *   qwen35moe qwen35 with every layer's MLP a mixture of experts
 *          (model/model_moe.h: softmax top-k, renormalised unless
 *          expert_weights_norm says not) and the sigmoid-gated shared expert
 *          (ffn_*_shexp, ffn_gate_inp_shexp); no dense MLP width needed.
 *   qwen3next Qwen3-Next: qwen35moe's blocks with β and α from one matrix
 *          (ssm_ba [dim, 2 n_v_heads]: per key head, its value heads' β then
 *          their α), value heads always in Hugging Face's grouped order (its
 *          converter does not tile them), a dense MLP on the layers without
 *          a router (mlp_only_layers).
 *   gpt-oss qwen2's attention with an output bias and a learned sink logit
 *          per head (attn_sinks: it joins the softmax's denominator, no
 *          value), sliding (128) and full layers alternating (0, 2, ...
 *          sliding, as llama.cpp fixes it), YaRN RoPE (its attention factor
 *          folded into the scores' scale as its square), the MLP input norm
 *          named post_attention_norm, and a mixture of experts with biases:
 *          router top-k then softmax over the k, experts' clamped SwiGLU
 *          (kern_backend_t.swiglu_oai).
 *   smollm3 the llama block (Q/K rows permuted as for llama) whose every
 *          fourth layer (l + 1 ≡ 0 mod 4) has no RoPE ("NoPE"): llama.cpp
 *          fixes the step at 4, with no GGUF key for it.
 *   gemma4 Gemma 4's dense text model, from a Hugging Face folder only
 *          (hf/hf_gemma4.c's keys; model/model_gemma4.c): per-layer inputs,
 *          head geometry per layer type (the full layers' wider heads),
 *          KV-shared layers (the cache holds only the layers that own
 *          K/V), K = V on the full layers, proportional RoPE, layer_scalar.
 *
 * A model_t owns the GGUF mapping for its whole life: on the CPU backend the
 * weight matrices are views into it (other backends copy them to the device
 * at load). Norm weights and biases are f32 device buffers. The model is
 * immutable after model_load: any number of runners may share it.
 *
 * A model_runner_t is the per-engine state of the forward: the paged
 * attention forward (attention/attn.h) over the engine's KV cache, and every
 * activation buffer, sized once for the configured capacities (max_tokens
 * per step, max_seqs, max_logits rows): model_forward() allocates nothing.
 *
 * One step, as the scheduler drives it (the model never sees requests):
 *   kv_seq_reserve() each sequence's new tokens → attn_meta_build() →
 *   model_forward(runner, &batch, logits) → sample → kv_seq_commit().
 *
 * The forward (model_forward), for the batch's n_tokens rows:
 *   x = embed(tokens)                          (· sqrt(dim): gemma)
 *   per layer:  h = rmsnorm(x) · attn_norm
 *               q, k, v = h·Wqᵀ (+bq), h·Wkᵀ (+bk), h·Wvᵀ (+bv)
 *               q, k = rmsnorm(q) · q_norm, rmsnorm(k) · k_norm per head (qwen3)
 *               q, k = rope(q, k) at each token's own position (not on smollm3's NoPE layers)
 *               a = paged attention(q, k, v)     (writes k, v to the cache)
 *               x = x + a·Woᵀ                  (gemma: x + rmsnorm(a·Woᵀ) · post_attention_norm)
 *               h = rmsnorm(x) · ffn_norm
 *               x = x + (silu(h·Wgateᵀ) ⊙ h·Wupᵀ)·Wdownᵀ
 *                        (gemma: gelu_tanh, and the post_ffw_norm as above)
 *   logits = rmsnorm(x[logit_rows]) · output_norm · Woutᵀ   (Wout: output.weight,
 *            or token_embd.weight when the output is tied; gemma2: then
 *            cap · tanh(logits / cap))
 * Every kernel is batch invariant (kernels/kern.h), so a row's logits do not
 * depend on the other rows of the batch, on chunked prefill, or on the
 * attention path taken: bit for bit.
 *
 * Threads: the engine thread drives a runner; the model may be read from any
 * thread. */
#ifndef TRAM_MODEL_H
#define TRAM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "attention/attn.h"
#include "cache/kv_cache.h"
#include "cache/kv_state.h"
#include "kernels/kern.h"
#include "sample/samp_params.h"

typedef struct gguf_ctx gguf_ctx_t; /* gguf/gguf.h: the model file, for the rooms that read more of it */

typedef enum model_arch {
  MODEL_ARCH_LLAMA = 0,
  MODEL_ARCH_QWEN2 = 1,
  MODEL_ARCH_QWEN3 = 2,
  MODEL_ARCH_GEMMA2 = 3,
  MODEL_ARCH_GEMMA3 = 4,
  MODEL_ARCH_PHI3 = 5,
  MODEL_ARCH_SMOLLM3 = 6,
  MODEL_ARCH_QWEN35 = 7,
  MODEL_ARCH_GEMMA4 = 8,
  MODEL_ARCH_QWEN2MOE = 30, /* mixtures of experts (model/model_moe.h); Mixtral is MODEL_ARCH_LLAMA */
  MODEL_ARCH_QWEN3MOE = 31,
  MODEL_ARCH_GPTOSS = 32,   /* gpt-oss: see above */
  MODEL_ARCH_QWEN35MOE = 33, /* hybrids with experts: see above */
  MODEL_ARCH_QWEN3NEXT = 34,
} model_arch_t;

/* The `general.architecture` name of arch ("llama", "qwen2", ...). */
const char *model_arch_name(model_arch_t arch);
/* Hugging Face's causal-LM class for arch, as config.json `architectures`
 * names it ("LlamaForCausalLM", "Gemma3ForCausalLM", ...). */
const char *model_arch_hf_class(model_arch_t arch);

typedef enum model_rope_scaling {
  MODEL_ROPE_SCALING_NONE = 0,
  MODEL_ROPE_SCALING_LINEAR,     /* rope.scaling.type "linear": inv_freq / factor */
  MODEL_ROPE_SCALING_LLAMA3,     /* rope.scaling.type "llama3": Llama 3.1's smooth band */
  MODEL_ROPE_SCALING_FREQ_TENSOR, /* a rope_freqs.weight tensor: inv_freq[p] / rope_freqs[p] (or phi3's
                                    LongRoPE factors) */
  MODEL_ROPE_SCALING_YARN        /* rope.scaling.type "yarn" (gpt-oss): model_hparams.c */
} model_rope_scaling_t;

/* The hyper-parameters, as read from `<arch>.*` metadata (key names in the
 * comments, relative to the architecture's prefix). */
typedef struct model_hparams {
  model_arch_t arch;
  int n_layers;   /* block_count */
  int dim;        /* embedding_length */
  int ff_dim;     /* feed_forward_length */
  int n_heads;    /* attention.head_count */
  int n_kv_heads; /* attention.head_count_kv (default: n_heads); divides n_heads */
  int head_dim;   /* attention.key_length (default: dim / n_heads) */
  int q_dim;      /* n_heads * head_dim */
  int kv_dim;     /* n_kv_heads * head_dim */
  int n_vocab;    /* tokenizer.ggml.tokens count (or vocab_size, or token_embd's rows) */
  int n_ctx;      /* context_length: the longest sequence the model was trained for */
  float rms_eps;  /* attention.layer_norm_rms_epsilon */
  /* RoPE */
  float rope_base; /* rope.freq_base (default 10000) */
  int rot_dim;     /* rope.dimension_count (default head_dim); even, <= head_dim */
  int rope_neox;   /* 0: adjacent pairs (llama), 1: halves (qwen2) */
  model_rope_scaling_t rope_scaling;
  float rope_factor;          /* rope.scaling.factor (linear, llama3) */
  float rope_low_freq_factor; /* rope.scaling.low_freq_factor (llama3; default 1) */
  float rope_high_freq_factor;/* rope.scaling.high_freq_factor (llama3; default 4) */
  int rope_orig_ctx;          /* rope.scaling.original_context_length (llama3: default 8192; yarn 4096) */
  float rope_yarn_beta_fast;  /* rope.scaling.yarn_beta_fast (yarn; default 32) */
  float rope_yarn_beta_slow;  /* rope.scaling.yarn_beta_slow (yarn; default 1) */
  int rope_yarn_truncate;     /* tram.rope.scaling.yarn_truncate: the ramp's ends floored/ceiled (Hugging
                                 Face's `truncate`, default off for gpt-oss as OpenAI's reference) */
  /* tensors present */
  int tied_output;  /* 1: no output.weight, the logits use token_embd.weight */
  int qkv_bias;     /* 1: attn_{q,k,v}.bias (qwen2; optional for llama) */
  int qk_norm;      /* 1: attn_{q,k}_norm.weight, per-head RMSNorm before RoPE (qwen3) */
  int fused;        /* 1: attn_qkv.weight and a gate/up ffn_up.weight (phi3) */
  int rope_longrope; /* 1: phi3's rope_factors_{long,short}.weight (the one in use per model_hparams.c) */
  int sliding_window; /* attention.sliding_window: a query sees this many keys, itself
                         included (flash-attn window_size (sliding_window - 1, 0)); 0: all */
  int swa_pattern;    /* attention.sliding_window_pattern: 0, every layer has the window;
                         n > 0, layer l has it iff (l + 1) % n != 0 (gemma2 2, gemma3 6) */
  int no_rope_step;    /* smollm3: layer l runs without RoPE iff (l + 1) % no_rope_step == 0
                          (4, as llama.cpp fixes it); 0: every layer rotates */
  float rope_base_swa; /* rope.freq_base_swa: the sliding layers' unscaled RoPE base (gemma3,
                          default 10000); 0: every layer uses rope_base and its scaling */
  /* Gemma */
  float embed_scale;   /* x = embed · embed_scale (sqrt(dim)); 0: no scaling */
  int gelu_mlp;        /* 1: GeGLU (gelu_tanh) instead of SwiGLU */
  int post_norms;      /* 1: post_attention_norm and post_ffw_norm */
  float attn_scale;    /* the scores' scale; 0: 1 / sqrt(head_dim) (gemma: see model_hparams.c) */
  float attn_softcap;  /* attn_logit_softcapping; 0: none */
  float final_softcap; /* final_logit_softcapping; 0: none */
  /* hybrid (qwen35, qwen35moe, qwen3next; model_gdn.c): zeros elsewhere */
  int full_attn_interval; /* full_attention_interval: layer l has attention iff (l + 1) % n == 0;
                             0: every layer has (not hybrid) */
  int n_attn_layers;      /* layers with attention: the paged cache's (n_layers when not hybrid) */
  int attn_out_gate;      /* 1: attn_q is [n_heads, 2 head_dim] ([q, gate] per head), out · sigmoid(gate) */
  int ssm_conv_kernel;    /* ssm.conv_kernel: the convolution's taps */
  int ssm_n_k_heads;      /* ssm.group_count: key (and query) heads */
  int ssm_n_v_heads;      /* ssm.time_step_rank: value heads; a multiple of ssm_n_k_heads */
  int ssm_head_k;         /* ssm.state_size: a key head's width */
  int ssm_head_v;         /* ssm.inner_size / time_step_rank: a value head's width */
  int ssm_conv_dim;       /* 2 n_k_heads head_k + n_v_heads head_v */
  int ssm_v_tiled;        /* 1: value heads in llama.cpp's tiled order (head h reads key head
                             h % n_k_heads); 0: Hugging Face's (tram.ssm.v_heads_grouped, hf/;
                             qwen3next always) */
  int ssm_ba_fused;       /* 1: β and α from ssm_ba (qwen3next), not ssm_beta and ssm_alpha */
  /* mixture of experts (model/model_moe.h) */
  int n_expert;        /* expert_count; 0: a dense model */
  int n_expert_used;   /* expert_used_count: experts per token (top-k) */
  int expert_ff_dim;   /* expert_feed_forward_length (default feed_forward_length) */
  int shexp_ff_dim;    /* expert_shared_feed_forward_length: the sigmoid-gated shared expert (qwen2moe,
                          qwen35moe, qwen3next); 0: none */
  int expert_norm;     /* expert_weights_norm: the top-k weights renormalised to sum 1 */
  /* gemma4 (model_gemma_hparams.c): zeros elsewhere; head_dim, n_kv_heads, rot_dim, rope_base, ff_dim are
     the sliding (or KV-owning) layers' */
  int head_dim_full;   /* attention.key_length: the full layers' head_dim (0: not gemma4) */
  int n_kv_heads_full; /* attention.head_count_kv of the full layers */
  float rope_base_full; /* rope.freq_base (the sliding layers': rope.freq_base_swa) */
  int ple_dim;         /* embedding_length_per_layer_input: per-layer inputs' width; 0: none */
  int n_kv_shared;     /* attention.shared_kv_layers: the last n layers read K/V of earlier ones */
  int ff_dim_shared;   /* feed_forward_length of those layers (double-wide MLP) */
  int moe_gating;      /* model_moe_gating_t: softmax then top-k (0), or top-k then softmax (gpt-oss) */
  int moe_bias;        /* 1: the router and the experts have biases (gpt-oss: ffn_gate_inp.bias,
                          ffn_{gate,up,down}_exps.bias) */
  float swiglu_alpha;  /* > 0: the experts' clamped SwiGLU (kern_backend_t.swiglu_oai, gpt-oss's 1.702 */
  float swiglu_limit;  /*   and 7.0, fixed as llama.cpp fixes them); 0: plain SwiGLU */
  /* gpt-oss's attention */
  int attn_sinks;      /* 1: blk.N.attn_sinks.weight [n_heads], a learned logit per head in the softmax */
  int o_bias;          /* 1: blk.N.attn_output.bias [dim] */
  /* embeddings */
  int pooling;         /* pooling_type, llama.cpp's enum: MODEL_POOL_* (0: none given) */
  int pool_normalize;  /* tram.pooling.normalize (a sentence-transformers Normalize module: hf/): 1/0,
                          -1: not said */
} model_hparams_t;

/* model_arch_hf_class for a model's hyper-parameters: a llama file with
 * experts is "MixtralForCausalLM". */
const char *model_hf_class(const model_hparams_t *hp);

/* `<arch>.pooling_type` as llama.cpp writes it (enum llama_pooling_type);
 * 4 (rank: a reranker's classification head) is refused at load. */
enum { MODEL_POOL_NONE = 0, MODEL_POOL_MEAN = 1, MODEL_POOL_CLS = 2, MODEL_POOL_LAST = 3 };

typedef struct model model_t;

/* Opens the GGUF file at `path`, reads and checks the hyper-parameters,
 * checks every tensor the architecture needs (present, of a weight type,
 * of the shape the hyper-parameters imply; no tensor left unused), prepares
 * the weights on `be` (which must outlive the model). Returns NULL on failure and writes one line into err (err_len
 * bytes, always terminated) naming the key or tensor at fault, e.g.
 * "model.gguf: tensor 'blk.3.attn_k.weight' has shape [576, 256], the
 * hyper-parameters need [576, 192]". Logs one line on success (the backend
 * may log why it refused a weight). */
model_t *model_load(const char *path, kern_backend_t *be, char *err, size_t err_len);

/* How model_load_opts prepares the weights (zero: as model_load). */
typedef struct model_load_opts {
  /* KERN_Q8_0, KERN_Q4_0 or KERN_Q4_1: every weight matrix stored as F32,
   * F16 or BF16 (a Hugging Face checkpoint, an unquantized GGUF file) whose
   * rows are whole blocks of 32 is quantized to it at load
   * (kernels/kern_quant.h), into host memory the model owns, except the
   * output projection (output.weight, or token_embd.weight when tied),
   * which a 4-bit target quantizes to Q8_0; matrices already quantized,
   * and norms and biases, stay as they are. KERN_F32 (0): every weight as
   * stored. */
  kern_type_t quantize;
} model_load_opts_t;

/* model_load with options (o NULL: none); -EINVAL-style failure, with err
 * written, for a quantize type kern_quant_is_target refuses. */
model_t *model_load_opts(const char *path, kern_backend_t *be, const model_load_opts_t *o, char *err,
                         size_t err_len);

/* Frees the weights and the mapping. NULL is a no-op. */
void model_destroy(model_t *m);

const model_hparams_t *model_hparams(const model_t *m);
/* The model file's mapping (owned by the model, valid while it is): what
 * text/ reads the tokenizer and the chat template from. */
const gguf_ctx_t *model_gguf(const model_t *m);
/* The sampling the model file recommends (model_gen.c) into *out: llama.cpp's
 * general.sampling.{temp, top_k, top_p, min_p, penalty_repeat} (a GGUF file,
 * or hf/'s view of a checkpoint's generation_config.json) and
 * tram.sampling.max_new_tokens (the view's max_new_tokens). A value of
 * another type, or outside what a request may ask, is logged and skipped;
 * keys tram's sampler has no field for (mirostat, xtc, penalty_last_n) are
 * logged as ignored. */
void model_gen_defaults(const gguf_ctx_t *g, samp_gen_defaults_t *out);
/* RoPE inverse frequencies [rot_dim / 2], host memory owned by the model,
 * scaling applied: pair p turns by pos · inv_freq[p]. */
const float *model_rope_inv_freq(const model_t *m);
/* Layer l's sliding window (hp->sliding_window on the layers swa_pattern
 * selects), or 0 when it attends over every key. */
int model_layer_window(const model_hparams_t *hp, int l);
/* 1 when layer l is a Gated DeltaNet layer (a hybrid's, model_gdn.c). */
int model_layer_recurrent(const model_hparams_t *hp, int l);
/* The recurrent-state pool a hybrid model needs (n_layers and
 * layer_floats of cfg; n_slots left as it is): 0, or -ENOENT for a model
 * without recurrent layers. */
int model_state_config(const model_t *m, kv_state_config_t *cfg);
/* 1 when layer l turns Q and K by RoPE, 0 for a NoPE layer (no_rope_step). */
int model_layer_rope(const model_hparams_t *hp, int l);
/* Layer l's attention geometry: its head_dim and KV heads (gemma4's full
 * layers have their own), its MLP width, and the paged-cache layer it
 * reads (its index among the attention layers; a gemma4 KV-shared layer
 * reads the last layer of its type that owns K/V). */
int model_layer_head_dim(const model_hparams_t *hp, int l);
int model_layer_kv_heads(const model_hparams_t *hp, int l);
int model_layer_ff_dim(const model_hparams_t *hp, int l);
int model_layer_cache_layer(const model_hparams_t *hp, int l);
/* Bytes of weights, as the file stores them, that a forward of one token
 * reads: every matrix of every layer and the output projection once, plus
 * one embedding row (the numerator of the decode bandwidth bound). */
int64_t model_step_weight_bytes(const model_t *m);

/* The cache geometry the model needs: fills n_layers (the layers with
 * attention: a hybrid's full-attention layers only; gemma4's layers that
 * own K/V), n_kv_heads and head_dim of cfg, and for gemma4 the per-layer
 * geometry (layer_kv_heads, layer_head_dim: arrays the model owns), leaving the sizing fields (block_size, num_blocks,
 * budget_bytes) as they are. */
void model_kv_config(const model_t *m, kv_cache_config_t *cfg);

/* ---- the runner --------------------------------------------------------- */

typedef struct model_runner_config {
  int max_tokens;  /* query tokens per step (>= 1) */
  int max_seqs;    /* sequences per step (>= 1) */
  int max_logits;  /* rows per step that need logits (<= max_tokens); 0: min(max_seqs, max_tokens) */
  int max_seq_len; /* tokens one sequence may hold; 0: the model's n_ctx, capped by the cache's slots */
  int gather;      /* 1: the attention's reference varlen path (attn_config_t.gather) */
  int max_sample_ops; /* with be->sample: penalty ops per step (model_batch_t.sample_ops) */
  int graphs;         /* model_graphs_mode_t (model/model_graph.h): decode steps padded to buckets and
                         replayed from captured graphs (ON, on a backend that captures), padded only
                         (PADDED), or neither (OFF, 0); a hybrid model runs neither */
  kv_state_t *state;  /* a hybrid model's recurrent-state pool (model_state_config geometry; not
                         owned, outlives the runner); NULL for other models */
} model_runner_config_t;

/* What became of the decode steps run padded (model_graph.h). */
typedef struct model_graph_stats {
  uint64_t captured; /* graphs captured (each then replayed for its step) */
  uint64_t replayed; /* steps run by a graph launch, the capturing ones included */
  uint64_t eager;    /* padded steps issued kernel by kernel (mode PADDED, a bucket's warm-up
                        step, a failed capture) */
  uint64_t failed;   /* captures that failed (their bucket then runs eager) */
} model_graph_stats_t;

/* One step's batch, all host memory, borrowed for the call. Sequence b of
 * the step owns rows [attn->cu_seq_lens_q[b], attn->cu_seq_lens_q[b + 1]). */
typedef struct model_batch {
  int n_tokens;               /* rows; equals attn->n_tokens */
  const int32_t *tokens;      /* [n_tokens] token ids in [0, n_vocab) */
  const int32_t *positions;   /* [n_tokens] each token's position in its sequence (>= 0) */
  const attn_batch_t *attn;   /* from attn_meta_build(): lengths, block tables, slots */
  int n_logits;               /* rows that need logits (0..max_logits) */
  const int32_t *logit_rows;  /* [n_logits] row indices in [0, n_tokens), any order */
  /* optional, with a backend that has be->sample: how the device picks the
   * token of each logit row (kernels/kern_sample.h); the device's tokens
   * (and logprobs) go to sampled[n_logits], and only the rows left to the host get their
   * logits downloaded. NULL: every row's logits are downloaded. */
  const struct kern_sample_row *sample; /* [n_logits] */
  const struct kern_sample_op *sample_ops; /* [n_sample_ops] the rows' penalty ops */
  int n_sample_ops;                        /* <= max_sample_ops */
  struct kern_sample_out *sampled;         /* [n_logits] host memory, written for rows on the device */
  /* hybrid models: sequence b's recurrent-state slot in the runner's pool
   * (cfg.state). Its rows must continue the state: a chunk starting at
   * position 0 resets it, one starting at p needs a state of p tokens. */
  const int32_t *state_slots; /* [attn->n_seqs] */
  /* optional, speculative verification: sequence b's states after each of
   * its rows but the last go to the pool's kept states from
   * state_keep[b] = kv_state_kept(pool, i) on (kern_gdn_args_t.keep: kept
   * states i, i + 1, ...); -1 (or NULL): none */
  const int32_t *state_keep; /* [attn->n_seqs] */
  /* optional, embeddings: rows whose final-normed hidden state
   * (rmsnorm(x) · output_norm, the input of the output projection) goes to
   * hidden[n_hidden, dim] (host memory) */
  int n_hidden;               /* 0..n_tokens */
  const int32_t *hidden_rows; /* [n_hidden] row indices in [0, n_tokens), any order */
  float *hidden;              /* [n_hidden, dim] */
} model_batch_t;

typedef struct model_runner model_runner_t;

/* Creates a runner of model m over `cache` (geometry from model_kv_config;
 * same backend as the model), with device buffers for cfg's capacities. m
 * and cache must outlive it. Returns NULL after logging why (bad
 * capacities, a cache of another geometry or backend, out of device
 * memory). */
model_runner_t *model_runner_create(const model_t *m, kv_cache_t *cache, const model_runner_config_t *cfg);

/* Frees the runner and its buffers. NULL is a no-op. */
void model_runner_destroy(model_runner_t *r);

/* The block-table row length the runner accepts: build the step's
 * attn_meta_t with at most this max_blocks_per_seq
 * (ceil(max_seq_len / block_size), capped by the cache's blocks). */
int model_runner_max_blocks_per_seq(const model_runner_t *r);

/* A copy of the runner's graph counters. */
void model_runner_graph_stats(const model_runner_t *r, model_graph_stats_t *out);

/* Expert MLPs the runner has run (model/model_moe.h): each expert some row
 * chose, once per sparse layer and step however many rows chose it; 0 for
 * a dense model. */
uint64_t model_runner_experts_run(const model_runner_t *r);

/* The attention forward the runner drives (for its path counters). */
const attn_t *model_runner_attn(const model_runner_t *r);

/* Runs the forward of one step: writes the K/V of every row into the cache
 * at the batch's slots and writes logits [n_logits, n_vocab] (host memory,
 * row i for row logit_rows[i]; with b->sample, only the rows left to the
 * host, and the device's tokens to b->sampled), and the final-normed hidden
 * states of b->hidden_rows to b->hidden. Returns 0; -E2BIG when a capacity is
 * exceeded; -EINVAL for an inconsistent batch (a token id out of range, a
 * negative position, a logit row out of range, attention metadata that
 * attn_step_begin rejects), logged, with nothing written to the cache. */
int model_forward(model_runner_t *r, const model_batch_t *b, float *logits);

#endif
