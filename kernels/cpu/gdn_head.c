/* kernels/cpu/gdn_head.c — the gated delta rule on one value head's state
 * S [dk, dv] (kernels/cpu/gdn_cpu.h): the recurrent form, one token, and
 * the chunked form, L <= 64 tokens at once.
 *
 * The chunked form (Yang, Kautz, Hatamizadeh, "Gated Delta Networks",
 * 2024, §3.3; the semantics of Hugging Face's torch_chunk_gated_delta_rule).
 * With γ_i = Σ_{s<=i} g_s the cumulative log decay inside the chunk and
 * Γ_ij = e^(γ_i − γ_j) (<= 1 for j <= i, so no exp can overflow; in f32
 * by kern_cpu_expf, a few ulp):
 *   A_ij   = β_i (k_i · k_j) Γ_ij for j < i     (the UT transform's system)
 *   U      = (I + A)⁻¹ diag(β) V                (forward substitution)
 *   W      = (I + A)⁻¹ diag(β e^γ) K
 *   V'     = U − W S                            (the corrections S misses)
 *   o_i    = e^(γ_i) q_i S + Σ_{j<=i} (q_i · k_j) Γ_ij V'_j
 *   S     <- e^(γ_L) S + Σ_j Γ_Lj k_j ⊗ V'_j
 * which is L recurrent steps (S = e^g S; S += k ⊗ β(v − Sᵀk); o = Sᵀq)
 * rewritten: one pass over S per chunk for the reads, one for the update,
 * instead of two per token. All products run through the vector
 * primitives (fixed-order fmaf chains): the result does not depend on the
 * thread, the batch or the SIMD path, only on the chunk's rows and S. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/gdn_cpu.h"
#include "kernels/cpu/ops_cpu.h"

void kern_cpu__gdn_step(const kern_gdn_vec_t *vec, float *S, int dk, int dv, const float *q, const float *k,
                        const float *v, double g, float beta, float *o, float *kv) {
  const float decay = (float)exp(g);
  memset(kv, 0, (size_t)dv * sizeof *kv);
  for (int i = 0; i < dk; i++) vec->decay_dot(S + (size_t)i * dv, decay, k[i], kv, dv); /* S = e^g S; kv = Sᵀk */
  for (int c = 0; c < dv; c++) kv[c] = (v[c] - kv[c]) * beta;                           /* the delta */
  memset(o, 0, (size_t)dv * sizeof *o);
  for (int i = 0; i < dk; i++) vec->update_dot(S + (size_t)i * dv, k[i], kv, q[i], o, dv); /* S += k ⊗ δ; o = Sᵀq */
}

size_t kern_cpu__gdn_chunk_floats(int dk, int dv) {
  return (size_t)KERN_GDN_CHUNK * (3 * (size_t)dk + dv) + 2 * (size_t)KERN_GDN_CHUNK * KERN_GDN_CHUNK;
}

void kern_cpu__gdn_chunk(const kern_gdn_vec_t *vec, float *S, int dk, int dv, int L, const float *Q, const float *K,
                         const float *V, const double *g, const float *beta, float *out, size_t ldo, float *scratch) {
  float *U = scratch;                          /* [L, dv]: U, then V' */
  float *W = U + (size_t)KERN_GDN_CHUNK * dv;  /* [L, dk]: W, then −W */
  float *Qe = W + (size_t)KERN_GDN_CHUNK * dk; /* [L, dk]: e^γ_i q_i */
  float *Kd = Qe + (size_t)KERN_GDN_CHUNK * dk; /* [dk, L]: Γ_Lj k_j, transposed */
  float *P = Kd + (size_t)KERN_GDN_CHUNK * dk;  /* [L, L]: (q_i · k_j) Γ_ij, 0 above the diagonal */
  float *G = P + (size_t)KERN_GDN_CHUNK * KERN_GDN_CHUNK; /* [L, L]: Γ_ij for j <= i */
  double gam[KERN_GDN_CHUNK];
  float eg[KERN_GDN_CHUNK];
  for (int i = 0; i < L; i++) {
    gam[i] = (i ? gam[i - 1] : 0.0) + g[i];
    eg[i] = (float)exp(gam[i]);
    for (int j = 0; j <= i; j++) G[i * L + j] = kern_cpu_expf((float)(gam[i] - gam[j]));
  }
  /* the UT system and its forward substitution, row by row */
  for (int i = 0; i < L; i++) {
    const float *ki = K + (size_t)i * dk;
    float *ui = U + (size_t)i * dv, *wi = W + (size_t)i * dk;
    for (int c = 0; c < dv; c++) ui[c] = V[(size_t)i * dv + c] * beta[i];
    const float bw = beta[i] * eg[i];
    for (int c = 0; c < dk; c++) wi[c] = ki[c] * bw;
    for (int j = 0; j < i; j++) {
      const float a = beta[i] * G[i * L + j] * vec->dot(ki, K + (size_t)j * dk, dk);
      vec->axpy(ui, -a, U + (size_t)j * dv, dv);
      vec->axpy(wi, -a, W + (size_t)j * dk, dk);
    }
  }
  /* the reads of the old S: V' = U − W S, o = (e^γ Q) S */
  for (size_t i = 0; i < (size_t)L * dk; i++) W[i] = -W[i];
  for (int i = 0; i < L; i++)
    for (int c = 0; c < dk; c++) Qe[(size_t)i * dk + c] = Q[(size_t)i * dk + c] * eg[i];
  for (int i = 0; i < L; i++) memset(out + (size_t)i * ldo, 0, (size_t)dv * sizeof *out);
  vec->gemm(U, dv, W, dk, S, dv, L, dv, dk);
  vec->gemm(out, (int)ldo, Qe, dk, S, dv, L, dv, dk);
  /* inside the chunk: o_i += Σ_{j<=i} (q_i · k_j) Γ_ij V'_j */
  for (int i = 0; i < L; i++)
    for (int j = 0; j < L; j++)
      P[i * L + j] = j <= i ? vec->dot(Q + (size_t)i * dk, K + (size_t)j * dk, dk) * G[i * L + j] : 0.0f;
  vec->gemm(out, (int)ldo, P, L, U, dv, L, dv, L);
  /* S = e^(γ_L) S + Σ_j Γ_Lj k_j ⊗ V'_j */
  for (int j = 0; j < L; j++) {
    const float d = G[(L - 1) * L + j];
    for (int c = 0; c < dk; c++) Kd[(size_t)c * L + j] = K[(size_t)j * dk + c] * d;
  }
  for (int a = 0; a < dk; a++) vec->scale(S + (size_t)a * dv, eg[L - 1], dv);
  vec->gemm(S, dv, Kd, L, U, dv, dk, dv, L);
}
