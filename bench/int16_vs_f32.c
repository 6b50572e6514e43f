/* bench/int16_vs_f32.c — the measurement behind the matmul's arithmetic
 * (docs/benchmarks/matmul.md): f32 activations against dequantized weights
 * (what kernels/cpu/ ships) versus int16 activation blocks with
 * _mm256_madd_epi16 against weights widened to int16 (the other form that
 * keeps the forward within its 1e-3 logits bound; int8 does not).
 *
 * Both on one thread, Q4_1 weights of rows × 576 (in L2, so this measures
 * compute, not memory), n activation rows; each variant's time includes its
 * per-call work (the int16 one quantizes the activations). Prints the best
 * of many runs and the agreement of the two with each other.
 *
 *   build/bench/int16_vs_f32 [rows]        (default 256) */
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/half.h"
#include "kernels/cpu/matmul_cpu.h"
#include "kernels/kern.h"
#include "kernels/quant_blocks.h"

#ifdef __AVX2__

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One activation block: x ≈ d · q, and lane l of s = d · (sum of the q in
 * madd lane l: elements 2l, 2l + 1, 16 + 2l, 17 + 2l). */
typedef struct {
  int16_t q[32];
  float s[8];
  float d;
} act16_t;

static void quantize16(const float *x, act16_t *a, int64_t nb) {
  for (int64_t b = 0; b < nb; b++, x += 32) {
    float amax = 0;
    for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[i]));
    float d = amax / 32767.0f, id = d > 0 ? 1.0f / d : 0.0f;
    a[b].d = d;
    for (int i = 0; i < 32; i++) a[b].q[i] = (int16_t)lrintf(x[i] * id);
    for (int l = 0; l < 8; l++)
      a[b].s[l] = d * (float)(a[b].q[2 * l] + a[b].q[2 * l + 1] + a[b].q[16 + 2 * l] + a[b].q[17 + 2 * l]);
  }
}

static float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* y[r, c0 + c] for R activation rows × C weight rows, int16 path. */
static inline __attribute__((always_inline)) void tile16(int R, int C, const act16_t *a, int64_t lda,
                                                         const block_q4_1 *w, int64_t ldw, int64_t nb, float *y,
                                                         int64_t ldy) {
  __m256 acc[3][8];
#pragma GCC unroll 3
  for (int r = 0; r < R; r++)
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
  const __m128i mask = _mm_set1_epi8(15);
  for (int64_t b = 0; b < nb; b++) {
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) {
      const block_q4_1 *blk = w + c * ldw + b;
      __m128i qs = _mm_loadu_si128((const __m128i *)blk->qs);
      __m256i w0 = _mm256_cvtepu8_epi16(_mm_and_si128(qs, mask));
      __m256i w1 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(qs, 4), mask));
      __m256 d = _mm256_set1_ps(_cvtsh_ss(blk->d)), m = _mm256_set1_ps(_cvtsh_ss(blk->m));
#pragma GCC unroll 3
      for (int r = 0; r < R; r++) {
        const act16_t *x = a + r * lda + b;
        __m256i p = _mm256_add_epi32(_mm256_madd_epi16(w0, _mm256_loadu_si256((const __m256i *)x->q)),
                                     _mm256_madd_epi16(w1, _mm256_loadu_si256((const __m256i *)(x->q + 16))));
        acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(d, _mm256_set1_ps(x->d)), acc[r][c]);
        acc[r][c] = _mm256_fmadd_ps(m, _mm256_loadu_ps(x->s), acc[r][c]);
      }
    }
  }
#pragma GCC unroll 3
  for (int r = 0; r < R; r++)
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) y[r * ldy + c] = hsum(acc[r][c]);
}

static void matmul16(float *y, const float *x, act16_t *a, const block_q4_1 *w, int64_t rows, int64_t cols, int n) {
  int64_t nb = cols / 32;
  for (int i = 0; i < n; i++) quantize16(x + i * cols, a + i * nb, nb);
  for (int64_t c = 0; c < rows; c += 8) {
    int r = 0;
    if (n == 1) {
      tile16(1, 8, a, nb, w + c * nb, nb, nb, y + c, rows);
      continue;
    }
    for (; r + 3 <= n; r += 3)
      for (int h = 0; h < 8; h += 4) tile16(3, 4, a + r * nb, nb, w + (c + h) * nb, nb, nb, y + r * rows + c + h, rows);
    for (; r < n; r++) tile16(1, 8, a + r * nb, nb, w + c * nb, nb, nb, y + r * rows + c, rows);
  }
}

int main(int argc, char **argv) {
  int64_t rows = argc > 1 ? atoll(argv[1]) : 256, cols = 576, nb = cols / 32;
  if (rows <= 0 || rows % 8) {
    fprintf(stderr, "rows must be a positive multiple of 8\n");
    return 2;
  }
  block_q4_1 *w = malloc((size_t)(rows * nb) * sizeof *w);
  srand(1);
  for (int64_t i = 0; i < rows * nb; i++) {
    w[i].d = kern_cpu_f32_to_f16(0.01f + 0.001f * (float)(rand() % 100));
    w[i].m = kern_cpu_f32_to_f16(-0.1f + 0.002f * (float)(rand() % 100));
    for (int k = 0; k < 16; k++) w[i].qs[k] = (uint8_t)rand();
  }
  kern_backend_t *be = kern_backend_create("cpu", 1);
  kern_weight_t kw;
  be->weight_init(be, &kw, KERN_Q4_1, rows, cols, w);
  printf("Q4_1 %lld x %lld, one thread; best of 2 s per point\n", (long long)rows, (long long)cols);
  printf("%4s %12s %12s %8s %14s\n", "n", "f32 GFLOP/s", "i16 GFLOP/s", "i16/f32", "rel diff");
  const int ns[] = {1, 2, 8, 32, 128};
  for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
    int n = ns[k];
    float *x = malloc(sizeof(float) * (size_t)(n * cols)), *y = malloc(sizeof(float) * (size_t)(n * rows));
    float *y16 = malloc(sizeof(float) * (size_t)(n * rows));
    act16_t *a = aligned_alloc(64, sizeof(act16_t) * (size_t)(n * nb));
    for (int64_t i = 0; i < n * cols; i++) x[i] = (float)((double)rand() / RAND_MAX) - 0.5f;
    double best[2] = {1e9, 1e9};
    for (int v = 0; v < 2; v++) {
      double t0 = now();
      while (now() - t0 < 2.0) {
        double t = now();
        if (v == 0) be->matmul(be, y, x, &kw, n);
        else matmul16(y16, x, a, w, rows, cols, n);
        t = now() - t;
        if (t < best[v]) best[v] = t;
      }
    }
    double num = 0, den = 0;
    for (int64_t i = 0; i < n * rows; i++) {
      num += (double)(y16[i] - y[i]) * (y16[i] - y[i]);
      den += (double)y[i] * y[i];
    }
    double flop = 2.0 * (double)(rows * cols) * n;
    printf("%4d %12.1f %12.1f %8.2f %14.2e\n", n, flop / best[0] / 1e9, flop / best[1] / 1e9, best[0] / best[1],
           sqrt(num / den));
    free(x), free(y), free(y16), free(a);
  }
  be->weight_release(be, &kw);
  kern_backend_destroy(be);
  free(w);
  return 0;
}

#else
int main(void) {
  puts("int16_vs_f32: needs an AVX2 build");
  return 0;
}
#endif
