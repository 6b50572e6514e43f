/* kernels/cpu/gdn_vec.c — the vector primitives of the Gated DeltaNet
 * kernels (kernels/cpu/gdn_cpu.h): portable C, and AVX2 + FMA when built
 * with it (simd.h), operation for operation the same, so the same bits. */
#include <math.h>

#include "kernels/cpu/gdn_cpu.h"
#include "kernels/cpu/simd.h"

#ifdef KERN_CPU_AVX2
#include <immintrin.h>
#endif

/* --- portable ----------------------------------------------------------------- */

static float dot_c(const float *a, const float *b, int n) {
  float l[8] = {0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++) l[k] = fmaf(a[i + k], b[i + k], l[k]);
  float s = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
  for (; i < n; i++) s = fmaf(a[i], b[i], s);
  return s;
}

static void axpy_c(float *y, float a, const float *x, int n) {
  for (int i = 0; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}

static void scale_c(float *y, float a, int n) {
  for (int i = 0; i < n; i++) y[i] *= a;
}

static void gemm_c(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int M, int N, int K) {
  for (int i = 0; i < M; i++)
    for (int c = 0; c < N; c++) {
      float acc = C[(size_t)i * ldc + c];
      for (int k = 0; k < K; k++) acc = fmaf(A[(size_t)i * lda + k], B[(size_t)k * ldb + c], acc);
      C[(size_t)i * ldc + c] = acc;
    }
}

static void decay_dot_c(float *s, float d, float ki, float *kv, int n) {
  for (int i = 0; i < n; i++) {
    s[i] *= d;
    kv[i] = fmaf(s[i], ki, kv[i]);
  }
}

static void update_dot_c(float *s, float ki, const float *delta, float qi, float *o, int n) {
  for (int i = 0; i < n; i++) {
    s[i] = fmaf(ki, delta[i], s[i]);
    o[i] = fmaf(s[i], qi, o[i]);
  }
}

static void conv_row_c(float *y, const float *const *in, const float *w, int ldw, int K, int n) {
  for (int c = 0; c < n; c++) {
    float acc = 0.0f;
    for (int k = 0; k < K; k++) acc = fmaf(w[(size_t)k * ldw + c], in[k][c], acc);
    y[c] = acc;
  }
}

const kern_gdn_vec_t kern_cpu__gdn_portable = {dot_c, axpy_c, scale_c, gemm_c, decay_dot_c, update_dot_c, conv_row_c};

/* --- AVX2 --------------------------------------------------------------------- */

#ifdef KERN_CPU_AVX2
static float dot_avx2(const float *a, const float *b, int n) {
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  /* lanes l0..l7: (l0 + l4, l1 + l5, l2 + l6, l3 + l7), then ((0 + 2) + (1 + 3)) as dot_c */
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  __m128 p = _mm_add_ps(h, _mm_movehl_ps(h, h)); /* (h0 + h2, h1 + h3) */
  float s = _mm_cvtss_f32(_mm_add_ss(p, _mm_shuffle_ps(p, p, 1)));
  for (; i < n; i++) s = fmaf(a[i], b[i], s);
  return s;
}

static void axpy_avx2(float *y, float a, const float *x, int n) {
  const __m256 va = _mm256_set1_ps(a);
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  axpy_c(y + i, a, x + i, n - i);
}

static void scale_avx2(float *y, float a, int n) {
  const __m256 va = _mm256_set1_ps(a);
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), va));
  scale_c(y + i, a, n - i);
}

/* Tiles of 4 rows × 16 columns in 8 accumulators (2 loads of B, 4
 * broadcasts of A, 8 FMAs per k); the row and column tails by gemm_c. */
static void gemm_avx2(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int M, int N, int K) {
  const int M4 = M / 4 * 4, N16 = N / 16 * 16;
  for (int c = 0; c < N16; c += 16) /* a 16-column slab of B stays in L1 across the row tiles */
    for (int i = 0; i < M4; i += 4) {
      __m256 acc[4][2];
      for (int r = 0; r < 4; r++)
        for (int h = 0; h < 2; h++) acc[r][h] = _mm256_loadu_ps(C + (size_t)(i + r) * ldc + c + 8 * h);
      for (int k = 0; k < K; k++) {
        const __m256 b0 = _mm256_loadu_ps(B + (size_t)k * ldb + c), b1 = _mm256_loadu_ps(B + (size_t)k * ldb + c + 8);
        for (int r = 0; r < 4; r++) {
          const __m256 a = _mm256_broadcast_ss(A + (size_t)(i + r) * lda + k);
          acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
        }
      }
      for (int r = 0; r < 4; r++)
        for (int h = 0; h < 2; h++) _mm256_storeu_ps(C + (size_t)(i + r) * ldc + c + 8 * h, acc[r][h]);
    }
  if (N16 < N) gemm_c(C + N16, ldc, A, lda, B + N16, ldb, M4, N - N16, K);
  if (M4 < M) gemm_c(C + (size_t)M4 * ldc, ldc, A + (size_t)M4 * lda, lda, B, ldb, M - M4, N, K);
}

static void decay_dot_avx2(float *s, float d, float ki, float *kv, int n) {
  const __m256 vd = _mm256_set1_ps(d), vk = _mm256_set1_ps(ki);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(s + i), vd);
    _mm256_storeu_ps(s + i, v);
    _mm256_storeu_ps(kv + i, _mm256_fmadd_ps(v, vk, _mm256_loadu_ps(kv + i)));
  }
  decay_dot_c(s + i, d, ki, kv + i, n - i);
}

static void update_dot_avx2(float *s, float ki, const float *delta, float qi, float *o, int n) {
  const __m256 vk = _mm256_set1_ps(ki), vq = _mm256_set1_ps(qi);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_fmadd_ps(vk, _mm256_loadu_ps(delta + i), _mm256_loadu_ps(s + i));
    _mm256_storeu_ps(s + i, v);
    _mm256_storeu_ps(o + i, _mm256_fmadd_ps(v, vq, _mm256_loadu_ps(o + i)));
  }
  update_dot_c(s + i, ki, delta + i, qi, o + i, n - i);
}

static void conv_row_avx2(float *y, const float *const *in, const float *w, int ldw, int K, int n) {
  int c = 0;
  for (; c + 8 <= n; c += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int k = 0; k < K; k++)
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(w + (size_t)k * ldw + c), _mm256_loadu_ps(in[k] + c), acc);
    _mm256_storeu_ps(y + c, acc);
  }
  if (c < n) {
    const float *tail[16]; /* K <= 9: model/ checks it */
    for (int k = 0; k < K; k++) tail[k] = in[k] + c;
    conv_row_c(y + c, tail, w + c, ldw, K, n - c);
  }
}

static const kern_gdn_vec_t gdn_avx2 = {dot_avx2,       axpy_avx2,       scale_avx2,   gemm_avx2,
                                        decay_dot_avx2, update_dot_avx2, conv_row_avx2};
#endif

const kern_gdn_vec_t *kern_cpu__gdn_vec(void) {
#ifdef KERN_CPU_AVX2
  return &gdn_avx2;
#else
  return &kern_cpu__gdn_portable;
#endif
}
