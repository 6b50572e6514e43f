/* kernels/cpu/gdn_cpu.h — the Gated DeltaNet arithmetic of one value head
 * (kernels/cpu/gdn_head.c) on the CPU backend's vector primitives
 * (kernels/cpu/gdn_vec.c), for kernels/cpu/ops_gdn.c and the tests.
 *
 * Every operation is an fmaf chain of a fixed order per element, so the
 * portable primitives and the AVX2 ones give the same bits: elementwise
 * ones trivially, the dot product by summing element i in lane i % 8 and
 * the lanes in one fixed tree (tests/unit/test_gdn.c compares them). */
#ifndef TRAM_KERN_CPU_GDN_H
#define TRAM_KERN_CPU_GDN_H

#include <stddef.h>

/* The delta rule's prompt chunk (the chunked form runs whole chunks of this
 * many rows; decode steps and a step's shorter tail run the recurrent form). */
#define KERN_GDN_CHUNK 64

typedef struct kern_gdn_vec {
  /* Σ a[i] b[i]: element i in lane i % 8 (fmaf), lanes summed as
   * ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), then the n % 8 tail. */
  float (*dot)(const float *a, const float *b, int n);
  void (*axpy)(float *y, float a, const float *x, int n); /* y = fmaf(a, x, y) */
  void (*scale)(float *y, float a, int n);                /* y = y · a */
  /* C[M, N] += A[M, K] · B[K, N] (row strides lda, ldb, ldc): each element
   * an fmaf chain over k = 0..K-1 from its old value — the bits of K axpys
   * in k order, register-tiled. */
  void (*gemm)(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int M, int N, int K);
  /* s = s · d; kv = fmaf(s, ki, kv): one row of S in the rule's first pass. */
  void (*decay_dot)(float *s, float d, float ki, float *kv, int n);
  /* s = fmaf(ki, delta, s); o = fmaf(s, qi, o): one row in the second pass. */
  void (*update_dot)(float *s, float ki, const float *delta, float qi, float *o, int n);
  /* The convolution of one row over n channels, K taps:
   * acc = fmaf(w[k][c], in_k[c], acc) for k = 0..K-1 from acc = 0, where
   * w is the transposed weight [K, ldw] and in[k] the K input rows (oldest
   * first); y[c] = acc (the caller applies silu). */
  void (*conv_row)(float *y, const float *const *in, const float *w, int ldw, int K, int n);
} kern_gdn_vec_t;

extern const kern_gdn_vec_t kern_cpu__gdn_portable;
/* The primitives the kernels run: the AVX2 ones when built with AVX2
 * (simd.h), else the portable ones. */
const kern_gdn_vec_t *kern_cpu__gdn_vec(void);

/* One token of the recurrent form on S [dk, dv]: S = e^g S; S += k ⊗ β(v −
 * Sᵀk); o = Sᵀq. q, k normed (q scaled); kv is dv floats of scratch. */
void kern_cpu__gdn_step(const kern_gdn_vec_t *vec, float *S, int dk, int dv, const float *q, const float *k,
                        const float *v, double g, float beta, float *o, float *kv);

/* Floats of scratch kern_cpu__gdn_chunk needs for head sizes dk, dv. */
size_t kern_cpu__gdn_chunk_floats(int dk, int dv);

/* L <= KERN_GDN_CHUNK rows of the chunked form (the WY/UT-transform
 * algorithm of "Gated Delta Networks", Yang et al. 2024, as Hugging Face's
 * torch_chunk_gated_delta_rule computes it), advancing S [dk, dv] past them:
 * Q, K [L, dk] (rows normed, Q scaled), V [L, dv], g [L] (log decays, in
 * double), beta [L]; out row i at out + i · ldo. Equal to L recurrent
 * steps up to rounding (not bit for bit). */
void kern_cpu__gdn_chunk(const kern_gdn_vec_t *vec, float *S, int dk, int dv, int L, const float *Q, const float *K,
                         const float *V, const double *g, const float *beta, float *out, size_t ldo, float *scratch);

#endif
