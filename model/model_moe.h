/* model/model_moe.h — the mixture-of-experts MLP (model_moe.c): its
 * hyper-parameters, the router, and its forward over one step's rows. For
 * model/model_*.c only (it is part of the model's private interface).
 *
 * A sparse layer replaces the dense MLP with E experts, each a SwiGLU MLP
 * of expert_ff_dim, and a router (ffn_gate_inp, [E, dim]):
 *   p = softmax(h · Wrouterᵀ)        over the E experts, per row
 *   S = the k experts of highest p   (ties: the lower index), k = n_expert_used
 *   w_e = p_e, or p_e / Σ_S p        (expert_norm: Qwen3-MoE's norm_topk_prob,
 *                                     Mixtral always, Qwen2-MoE's default off)
 *   y = Σ_{e ∈ S, ascending e} w_e · down_e(silu(gate_e(h)) ⊙ up_e(h))
 *       + sigmoid(h · w_shᵀ) · down_sh(silu(gate_sh(h)) ⊙ up_sh(h))   (qwen2moe's shared expert)
 * as Hugging Face's Qwen2/Qwen3-MoE and Mixtral sparse blocks compute it.
 * gpt-oss (hp->moe_gating MODEL_MOE_TOPK_SOFTMAX, hp->moe_bias, hp->swiglu_*):
 *   logits = h · Wrouterᵀ + b_router; S = the top k logits; w = softmax over S
 *   expert e: down_e(swiglu_oai(gate_e(h) + bg_e, up_e(h) + bu_e)) + bd_e
 * as Hugging Face's GptOssTopKRouter and GptOssExperts compute it.
 * Gemma 4's MoE block (hp->gelu_mlp; the router_norm and expert_scale
 * below): the router reads its own input hr = rmsnorm(r) · scale ·
 * dim^-½ (the caller's), softmax over all experts, the top k renormalised,
 * each w_e times per_expert_scale[e]; each expert a GeGLU MLP
 * (gelu_tanh(gate_e(h)) ⊙ up_e(h)), as Gemma4TextRouter and
 * Gemma4TextExperts compute it.
 *
 * The step (model__moe_forward): router logits for every row (one matmul),
 * routing on the host (the logits downloaded: the CPU backend's memory is
 * the host's), the rows grouped by expert in ascending expert order and row
 * order, one gather of the chosen rows, then per chosen expert one matmul
 * over all the rows that chose it for each of gate, up and down (each
 * chosen expert's weights read once per step, experts no row chose never
 * touched: on the CPU their pages of the mapping stay cold), and the
 * weighted sum per row in expert order (be->moe_combine). Every step of it
 * is per row, so a row's bits do not depend on the rest of the batch or
 * on the thread count. A backend without moe_combine is refused at
 * load. The routing's download mid-forward cannot be captured: a runner
 * never pads or captures a MoE model's steps (model_runner.c). */
#ifndef TRAM_MODEL_MOE_H
#define TRAM_MODEL_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "kernels/kern.h"
#include "model/model.h"

/* One sparse layer's weights; expert e's matrices are views of slice e of
 * the stacked tensors ffn_{gate,up,down}_exps. */
typedef struct model_moe_layer {
  kern_weight_t router;            /* ffn_gate_inp [n_expert, dim] */
  kern_weight_t *gate, *up, *down; /* [n_expert] each: [eff, dim], [eff, dim], [dim, eff] */
  kern_weight_t sh_gate, sh_up, sh_down; /* ffn_{gate,up,down}_shexp; rows 0: no shared expert */
  kern_weight_t sh_router;         /* ffn_gate_inp_shexp [1, dim] */
  float *router_b;                 /* device [n_expert] ffn_gate_inp.bias, or NULL (hp->moe_bias) */
  float *gate_b, *up_b;            /* device [n_expert, eff] ffn_{gate,up}_exps.bias, or NULL */
  float *down_b;                   /* device [n_expert, dim] ffn_down_exps.bias, or NULL */
  float *router_norm;              /* device [dim] gemma4: ffn_gate_inp.scale · dim^-½, the router input's
                                      RMSNorm weight; NULL elsewhere */
  float *expert_scale;             /* host [n_expert] gemma4: ffn_down_exps.scale (per_expert_scale), each
                                      expert's weight times it; NULL: 1 */
} model_moe_layer_t;

typedef enum model_moe_gating {
  MODEL_MOE_SOFTMAX_TOPK = 0, /* softmax over all experts, then the top k (Qwen, Mixtral) */
  MODEL_MOE_TOPK_SOFTMAX = 1, /* the top k logits, then a softmax over them (gpt-oss) */
} model_moe_gating_t;

/* The `<arch>.` keys the mixture reads (for check_keys; NULL terminated). */
extern const char *const MODEL_MOE_KEYS[];

/* Reads expert_count, expert_used_count, expert_feed_forward_length,
 * expert_shared_feed_forward_length and expert_weights_norm into hp
 * (hp->ff_dim read before). `sparse`: the architecture is a mixture
 * (qwen2moe, qwen3moe: expert_count required, >= 1); llama may have
 * experts (Mixtral) or not (expert_count absent or 0). Returns 0 or
 * -EINVAL with one line naming the key in err. */
int model__moe_hparams(const gguf_ctx_t *g, const char *arch, int sparse, model_hparams_t *hp, char *err,
                       size_t err_len);

/* Routes one row: logits [n_expert] → ids[k] (ascending) and their
 * weights w[k] (see above); 1 <= k <= n_expert <= 4096 (expert_count's
 * bound). Pure, deterministic. */
void model__moe_route(const float *logits, int n_expert, int k, int norm, model_moe_gating_t gating, int32_t *ids,
                      float *w);

/* A runner's buffers for sparse layers of hp, up to max_tokens rows; NULL
 * when the backend is out of memory (logged). */
typedef struct model_moe_scratch model_moe_scratch_t;
model_moe_scratch_t *model__moe_scratch_create(kern_backend_t *be, const model_hparams_t *hp, int max_tokens);
void model__moe_scratch_destroy(kern_backend_t *be, model_moe_scratch_t *s); /* NULL: no-op */

/* y [T, dim] = the sparse MLP of layer w over h [T, dim], routed by hr
 * [T, dim] (NULL: h; Gemma 4's router reads its own input) (device
 * buffers; y must not alias h). Syncs the backend once or twice (the
 * routing). */
void model__moe_forward(kern_backend_t *be, const model_hparams_t *hp, const model_moe_layer_t *w,
                        model_moe_scratch_t *s, float *y, const float *h, const float *hr, int T);

/* The experts run so far by s's steps (each counted once per layer and
 * step, however many rows chose it), for the tests' accounting. */
uint64_t model__moe_experts_run(const model_moe_scratch_t *s);

#endif
