/* bench/flops.c — the FMA peak of this machine, through the CPU backend's
 * persistent pool: every thread runs 12 independent chains of 8-lane f32
 * FMAs (enough to cover the FMA latency on current x86 cores) on registers
 * only. Prints GFLOP/s (2 per lane per FMA) for 1 .. n threads, the best of
 * several runs each — the ceiling the matmul's GFLOP/s compare with.
 *
 *   build/bench/flops [-t threads]        (default: one per online CPU) */
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
  fprintf(stderr, "(checksum %g)\n", (double)checksum); /* keeps the results alive */
  return 0;
}
