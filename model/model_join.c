/* model/model_join.c — joined projections (kern.h weight_join): on a
 * backend that joins (CUDA), each attention layer's Wq, Wk, Wv become one
 * matrix [q_dim + 2 kv_dim, dim] and each dense MLP's Wgate, Wup one
 * [2 ff_dim, dim], so a small step runs one GEMM where it ran three (two).
 *
 * Why only small steps (model__join_rows): downstream operations take q, k
 * and v as separate [T, ·] tensors, so the joined output is split by three
 * copy_cols, 8 T (q_dim + 2 kv_dim) bytes more traffic against the
 * weights' 2 dim (q_dim + 2 kv_dim): 4 T / dim of it, a few percent at
 * decode sizes, a quarter at a 2,048-row prefill chunk of a dim-4096 model,
 * where three large GEMMs run at full speed anyway. The gate needs no
 * split (glu_joined reads the joined rows). Larger steps use the parts,
 * which stay usable: the join makes them views of the joined matrix.
 *
 * Not joined: Qwen3.5's gated attention (its Wq interleaves [q, gate] per
 * head, split by copy_cols of its own), Gemma 4 (model_gemma4.c: its
 * layers share K/V and vary head sizes; its own path), the recurrent and
 * the expert layers. A join that fails (out of device memory) leaves the
 * layer unjoined and the load goes on. */
#include "base/log.h"
#include "model/model_internal.h"

int model__join_rows(int T) { return T >= 1 && T <= MODEL_JOIN_MAX_ROWS; }

void model__join_layers(model_t *m) {
  kern_backend_t *be = m->be;
  const model_hparams_t *hp = &m->hp;
  if (!be->weight_join || !be->glu_joined || !be->copy_cols || hp->arch == MODEL_ARCH_GEMMA4) return;
  int n_qkv = 0, n_gu = 0;
  for (int l = 0; l < hp->n_layers; l++) {
    model_layer_t *L = &m->layers[l];
    if (model_layer_recurrent(hp, l)) continue;
    if (!hp->attn_out_gate && L->wq.rows > 0 && L->wk.rows > 0 && L->wv.rows > 0) {
      kern_weight_t *qkv[3] = {&L->wq, &L->wk, &L->wv};
      n_qkv += be->weight_join(be, &L->wqkv, qkv, 3) == 0;
    }
    if (!L->moe && L->w_gate.rows > 0 && L->w_up.rows > 0) {
      kern_weight_t *gu[2] = {&L->w_gate, &L->w_up};
      n_gu += be->weight_join(be, &L->w_gu, gu, 2) == 0;
    }
  }
  if (n_qkv || n_gu)
    log_info("model: %d QKV and %d gate/up projections joined (one GEMM each for steps of up to %d rows)", n_qkv,
             n_gu, MODEL_JOIN_MAX_ROWS);
}
