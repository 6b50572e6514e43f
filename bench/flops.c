/* bench/flops.c — the FMA peak of this machine, through the CPU backend's
 * persistent pool: every thread runs 12 independent chains of 8-lane f32
 * FMAs (enough to cover the FMA latency on current x86 cores) on registers
 * only. Prints GFLOP/s (2 per lane per FMA) for 1 .. n threads, the best of
 * several runs each — the ceiling the matmul's GFLOP/s compare with.
 * With AVX2, then the integer ceiling of the fast matmul's prefill kernel
 * (kernels/cpu/matmul_rp_blk_avx2.c) on one thread: vpmaddubsw and vpaddw
 * alone (12 independent chains each: instructions/s), and its inner step
 * as it runs there — 4 activation broadcasts from memory, 8 vpmaddubsw
 * against 2 weight registers, 8 vpaddw into 8 accumulators — in GFLOP/s
 * (one step is 128 multiply-adds of int16 activations by 4-bit weights,
 * 2 flops each), before any unpacking or scaling.
 *
 *   build/bench/flops [-t threads]        (default: one per online CPU) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/pool.h"

#ifdef __AVX2__
#include <immintrin.h>
#endif

#define ITERS 2000000 /* FMA rounds per thread per run */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct {
  float sink[64]; /* one result per thread, so nothing is optimized away */
} flops_ctx_t;

#ifdef __FMA__
#define CHAINS 12
#define FLOPS_PER_ITER (CHAINS * 8 * 2)
static void fma_task(void *arg, int64_t begin, int64_t end, int tid) {
  flops_ctx_t *c = arg;
  (void)tid;
  for (int64_t item = begin; item < end; item++) {
    __m256 a[CHAINS];
    for (int k = 0; k < CHAINS; k++) a[k] = _mm256_set1_ps(0.001f * (float)(k + item));
    const __m256 m = _mm256_set1_ps(0.9999f), b = _mm256_set1_ps(1e-4f);
    for (long i = 0; i < ITERS; i++) {
#pragma GCC unroll 12
      for (int k = 0; k < CHAINS; k++) a[k] = _mm256_fmadd_ps(a[k], m, b);
    }
    __m256 s = a[0];
    for (int k = 1; k < CHAINS; k++) s = _mm256_add_ps(s, a[k]);
    c->sink[item % 64] = _mm256_cvtss_f32(s);
  }
}
#else
#define CHAINS 12
#define FLOPS_PER_ITER (CHAINS * 2)
static void fma_task(void *arg, int64_t begin, int64_t end, int tid) {
  flops_ctx_t *c = arg;
  (void)tid;
  for (int64_t item = begin; item < end; item++) {
    float a[CHAINS];
    for (int k = 0; k < CHAINS; k++) a[k] = 0.001f * (float)(k + item);
    for (long i = 0; i < ITERS; i++)
      for (int k = 0; k < CHAINS; k++) a[k] = a[k] * 0.9999f + 1e-4f;
    float s = 0;
    for (int k = 0; k < CHAINS; k++) s += a[k];
    c->sink[item % 64] = s;
  }
}
#endif

#ifdef __AVX2__
/* Best-of-5 seconds of `rounds` rounds of one of the integer loops (OP on
 * 12 chains a..l, or the kernel's step into 8 of them); the empty asm keeps
 * every chain in a register and in order, and the weights unknown. */

#define CHAINS8_ASM() __asm__("" : "+x"(a), "+x"(b), "+x"(c), "+x"(d), "+x"(e), "+x"(f), "+x"(g), "+x"(h))
#define CHAINS12_ASM() CHAINS8_ASM(); __asm__("" : "+x"(k), "+x"(l), "+x"(m), "+x"(n), "+x"(w0))
static inline __m256i bc4(const uint8_t *p) { /* one vpbroadcastd from memory, as the kernel's */
  int32_t v;
  memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

/* This thread's cpu-time: the neighbours' share of the core does not count. */
static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double int_loop(int which, long rounds, float *sink) {
  static uint8_t act_bytes[48] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  const uint8_t *act = act_bytes;
  __asm__("" : "+r"(act)); /* bytes in memory, unknown: broadcast from memory */
  double best = 1e30;
  for (int rep = 0; rep < 5; rep++) {
    __m256i a = _mm256_set1_epi8((char)rep), b = a, c = a, d = a, e = a, f = a, g = a, h = a, k = a, l = a, m = a,
            n = a, w0 = _mm256_set1_epi8(3), w1 = _mm256_set1_epi8(5);
    double t0 = cpu_now();
    if (which == 0) {
      for (long i = 0; i < rounds; i++) {
#define OP(v) v = _mm256_maddubs_epi16(w0, v)
        OP(a), OP(b), OP(c), OP(d), OP(e), OP(f), OP(g), OP(h), OP(k), OP(l), OP(m), OP(n);
#undef OP
        CHAINS12_ASM();
      }
    } else if (which == 1) {
      for (long i = 0; i < rounds; i++) {
#define OP(v) v = _mm256_add_epi16(w0, v)
        OP(a), OP(b), OP(c), OP(d), OP(e), OP(f), OP(g), OP(h), OP(k), OP(l), OP(m), OP(n);
#undef OP
        CHAINS12_ASM();
      }
    } else {
      for (long i = 0; i < rounds; i++) {
        const uint8_t *x = act + (i & 7) * 4;
        const __m256i b0 = bc4(x), b1 = bc4(x + 4), b2 = bc4(x + 8), b3 = bc4(x + 12);
        a = _mm256_add_epi16(a, _mm256_maddubs_epi16(w0, b0)), b = _mm256_add_epi16(b, _mm256_maddubs_epi16(w1, b0));
        c = _mm256_add_epi16(c, _mm256_maddubs_epi16(b1, w0)), d = _mm256_add_epi16(d, _mm256_maddubs_epi16(b1, w1));
        e = _mm256_add_epi16(e, _mm256_maddubs_epi16(w0, b2)), f = _mm256_add_epi16(f, _mm256_maddubs_epi16(w1, b2));
        g = _mm256_add_epi16(g, _mm256_maddubs_epi16(b3, w0)), h = _mm256_add_epi16(h, _mm256_maddubs_epi16(b3, w1));
        CHAINS8_ASM();
        __asm__("" : "+x"(w0), "+x"(w1));
      }
    }
    double dt = cpu_now() - t0;
    if (dt < best) best = dt;
    const __m256i s = _mm256_xor_si256(_mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d)),
                                       _mm256_xor_si256(_mm256_xor_si256(e, f), _mm256_xor_si256(g, h)));
    *sink += (float)_mm256_extract_epi16(_mm256_xor_si256(s, _mm256_xor_si256(_mm256_xor_si256(k, l), _mm256_xor_si256(m, n))), 0);
  }
  return best;
}

static void int_ceiling(float *sink) {
  const long rounds = 20000000;
  printf("\nfast matmul integer ceiling, 1 thread, cpu-time, best of 5 runs of %ld rounds\n", rounds);
  const double tm = int_loop(0, rounds, sink), ta = int_loop(1, rounds, sink), tx = int_loop(2, rounds, sink);
  printf("  vpmaddubsw   %6.2f G/s\n", 12.0 * (double)rounds / tm / 1e9);
  printf("  vpaddw       %6.2f G/s\n", 12.0 * (double)rounds / ta / 1e9);
  printf("  2x2 step     %6.1f GFLOP/s (%.2f G steps/s: 4 broadcasts, 8 vpmaddubsw, 8 vpaddw)\n",
         256.0 * (double)rounds / tx / 1e9, (double)rounds / tx / 1e9);
}
#endif

int main(int argc, char **argv) {
  int max_threads = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) max_threads = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: flops [-t threads]\n");
      return 2;
    }
  }
  kern_pool_t *probe = kern_pool_create(max_threads);
  if (!probe) return 1;
  max_threads = kern_pool_size(probe);
  kern_pool_destroy(probe);
  printf("FMA peak (%s), best of 5 runs of %d rounds per thread\n",
#ifdef __FMA__
         "AVX2 FMA, 8 f32 lanes",
#else
         "scalar",
#endif
         ITERS);
  printf("%8s %12s %16s\n", "threads", "GFLOP/s", "GFLOP/s/thread");
  float checksum = 0;
  for (int t = 1; t <= max_threads; t++) {
    kern_pool_t *pool = kern_pool_create(t);
    if (!pool) return 1;
    flops_ctx_t c;
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
      double t0 = now();
      kern_pool_for(pool, t, 1, fma_task, &c); /* one item per thread */
      double dt = now() - t0;
      if (dt < best) best = dt;
    }
    double gflops = (double)t * ITERS * FLOPS_PER_ITER / best / 1e9;
    printf("%8d %12.1f %16.1f\n", t, gflops, gflops / t);
    checksum += c.sink[0];
    kern_pool_destroy(pool);
  }
#ifdef __AVX2__
  int_ceiling(&checksum);
#endif
  fprintf(stderr, "(checksum %g)\n", (double)checksum); /* keeps the results alive */
  return 0;
}
