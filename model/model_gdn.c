/* model/model_gdn.c — the Gated DeltaNet layer of Qwen3.5's hybrid (qwen35,
 * qwen35moe; Qwen3-Next's, qwen3next;
 * Yang, Kautz, Hatamizadeh, "Gated Delta Networks", 2024; Hugging Face's
 * Qwen3_5GatedDeltaNet), and the geometry of its recurrent state.
 *
 * The token mixer of layer l, for the step's T rows (sequence b owns rows
 * [cu[b], cu[b + 1]) and state slot slots[b] of the cache/kv_state.h pool):
 *   h       = rmsnorm(x) · attn_norm
 *   mix     = h · W_qkvᵀ           [T, 2 Hk dk + Hv dv] (attn_qkv)
 *   z       = h · W_zᵀ             [T, Hv dv]           (attn_gate)
 *   β, α    = h · W_βᵀ, h · W_αᵀ    [T, Hv]              (ssm_beta, ssm_alpha; qwen3next:
 *             both from h · W_baᵀ [T, Hk, 2 Hv / Hk], per key head its
 *             value heads' β then their α, ssm_ba)
 *   conv    = silu(causal depthwise conv(mix))  kernel K, the last K - 1
 *             inputs kept in the state (ssm_conv1d)
 *   q, k, v = conv's three parts; q, k L2-normed per head, q / sqrt(dk)
 *   per value head h, token by token:
 *             g = a_neg[h] · softplus(α + dt_bias[h])   (ssm_a = -exp(A_log), ssm_dt)
 *             S = e^g S;  S += k ⊗ sigmoid(β) (v − Sᵀk);  o = Sᵀq
 *   o       = rmsnorm(o per head) · ssm_norm · silu(z)   (the gated norm)
 *   x      += o · W_outᵀ             (ssm_out)
 * Value head h reads key head h % Hk in llama.cpp's GGUF order (its
 * converter tiles the value heads) and h / (Hv / Hk) in Hugging Face's.
 * The MLP follows as in every layer (model_runner.c).
 *
 * The backend's gdn_rule runs a step's rows (kernels/kern.h): on the CPU a
 * sequence's whole 64-row chunks in the chunked form of the rule, the rest
 * (decodes, a step's shorter tail) in the recurrent form, equal within
 * rounding (kernels/cpu/ops_gdn.c). */
#include <errno.h>

#include "model/model_internal.h"

int model_state_config(const model_t *m, kv_state_config_t *cfg) {
  const model_hparams_t *hp = &m->hp;
  if (hp->full_attn_interval == 0) return -ENOENT;
  cfg->n_layers = hp->n_layers - hp->n_attn_layers;
  cfg->layer_floats = (size_t)(hp->ssm_conv_kernel - 1) * hp->ssm_conv_dim +
                      (size_t)hp->ssm_n_v_heads * hp->ssm_head_k * hp->ssm_head_v;
  return 0;
}

void model__gdn_layer(const model_t *m, int l, int li, const kv_state_t *state, model_gdn_io_t *io, int T) {
  const model_hparams_t *hp = &m->hp;
  const model_layer_t *w = &m->layers[l];
  kern_backend_t *be = m->be;
  const int Hv = hp->ssm_n_v_heads, dv = hp->ssm_head_v;
  be->rmsnorm(be, io->h, io->x, w->attn_norm, T, hp->dim, hp->rms_eps);
  be->matmul(be, io->mix, io->h, &w->w_qkv, T);    /* mix [T, conv_dim] */
  be->matmul(be, io->z, io->h, &w->w_z, T);        /* z [T, Hv dv] */
  if (hp->ssm_ba_fused) { /* qwen3next: ba [T, Hk, 2 Hv / Hk], per key head its β then its α */
    const int per = Hv / hp->ssm_n_k_heads;
    const int64_t rows = (int64_t)T * hp->ssm_n_k_heads;
    be->matmul(be, io->ba, io->h, &w->w_ba, T);
    be->copy_cols(be, io->beta, per, io->ba, 2 * per, rows, per);
    be->copy_cols(be, io->alpha, per, io->ba + per, 2 * per, rows, per);
  } else {
    be->matmul(be, io->beta, io->h, &w->w_beta, T);  /* beta [T, Hv] */
    be->matmul(be, io->alpha, io->h, &w->w_alpha, T); /* alpha [T, Hv] */
  }
  kern_gdn_args_t *a = &io->args;
  a->state = kv_state_layer(state, li);
  a->slot_stride = state->slot_floats;
  be->gdn_conv(be, io->conv, io->mix, w->conv_w, a);
  be->gdn_rule(be, io->o, io->conv, io->alpha, io->beta, w->a_neg, w->dt_bias, a); /* o [T, Hv, dv] */
  be->rmsnorm(be, io->o, io->o, w->ssm_norm, T * Hv, dv, hp->rms_eps);
  be->swiglu(be, io->o, io->z, io->o, (int64_t)T * Hv * dv); /* o · silu(z) */
  be->matmul(be, io->proj, io->o, &w->w_ssm_out, T);       /* proj [T, dim] */
  be->add(be, io->x, io->x, io->proj, (int64_t)T * hp->dim);
}
