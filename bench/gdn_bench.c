/* bench/gdn_bench.c — what one Gated DeltaNet layer's convolution and
 * delta rule (kernels/cpu/ops_gdn.c) cost per token on the CPU backend, at
 * Qwen3.5-2B's shape (16 key and 16 value heads of 128, conv 4, conv_dim
 * 6144; docs/benchmarks/hybrid.md): a decode step of one sequence (one
 * row) and a 256-row prompt chunk of one sequence, in each form the
 * backend has: chunked (whole 64-row chunks) or every row recurrent, on the
 * AVX2 or the portable primitives (kern_cpu_t's gdn_chunked and
 * gdn_portable). Prints the median of --reps runs per token and layer, and
 * times the 18 GDN layers of the 2B shape: the process's CPU time with one
 * thread (so a loaded machine's preemptions do not count), wall time with
 * more.
 *
 *   build/bench/gdn_bench [threads] [reps]          (default 1 thread, 15 reps)
 *
 * The matrices (attn_qkv etc.) are not part of it: model_bench has those. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_util.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/simd.h"
#include "kernels/kern.h"

enum { HK = 16, HV = 16, DK = 128, DV = 128, KC = 4, C = 2 * HK * DK + HV * DV, LAYERS = 18 };
#define SLOT ((size_t)(KC - 1) * C + (size_t)HV * DK * DV)

static float frand(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static double run(kern_backend_t *be, int rows, int reps, clockid_t clk) {
  float *x = malloc(sizeof(float) * (size_t)rows * C), *y = malloc(sizeof(float) * (size_t)rows * C);
  float *al = malloc(sizeof(float) * (size_t)rows * HV), *bt = malloc(sizeof(float) * (size_t)rows * HV);
  float *o = malloc(sizeof(float) * (size_t)rows * HV * DV), *w = malloc(sizeof(float) * C * KC);
  float *state = malloc(sizeof(float) * SLOT), a_neg[HV], dt[HV];
  unsigned s = 31;
  for (size_t i = 0; i < (size_t)rows * C; i++) x[i] = frand(&s);
  for (size_t i = 0; i < (size_t)rows * HV; i++) al[i] = frand(&s), bt[i] = 2 * frand(&s);
  for (int i = 0; i < C * KC; i++) w[i] = 0.5f * frand(&s);
  for (int h = 0; h < HV; h++) a_neg[h] = -1.0f + 0.5f * frand(&s), dt[h] = 0.5f + 0.5f * frand(&s);
  for (size_t i = 0; i < SLOT; i++) state[i] = 0.1f * frand(&s);
  const int32_t cu[2] = {0, rows}, slot = 0;
  kern_gdn_args_t a = {.n_seqs = 1, .cu_rows = cu, .slots = &slot, .state = state, .slot_stride = SLOT,
                       .conv_dim = C, .conv_kernel = KC, .n_k_heads = HK, .n_v_heads = HV, .head_k = DK,
                       .head_v = DV, .v_tiled = 1, .qk_eps = 1e-6f};
  double *t = malloc(sizeof(double) * (size_t)reps);
  for (int r = -2; r < reps; r++) { /* two warm-up runs */
    const double t0 = bench_clock_s(clk);
    be->gdn_conv(be, y, x, w, &a);
    be->gdn_rule(be, o, y, al, bt, a_neg, dt, &a);
    if (r >= 0) t[r] = bench_clock_s(clk) - t0;
  }
  qsort(t, (size_t)reps, sizeof *t, bench_cmp_double);
  const double med = t[reps / 2] / rows;
  free(x), free(y), free(al), free(bt), free(o), free(w), free(state), free(t);
  return med;
}

int main(int argc, char **argv) {
  const int threads = argc > 1 ? atoi(argv[1]) : 1, reps = argc > 2 ? atoi(argv[2]) : 15;
  if (threads < 1 || reps < 1) {
    fprintf(stderr, "usage: gdn_bench [threads >= 1] [reps >= 1]\n");
    return 2;
  }
  kern_backend_t *be = kern_backend_create("cpu", threads);
  if (!be) return 1;
  /* one thread: the process's CPU time (a loaded machine's preemptions do
   * not count); more: wall time (the pool's workers spin between calls) */
  const clockid_t clk = threads == 1 ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC;
  printf("Gated DeltaNet conv + rule, one layer of Qwen3.5-2B's shape, %d thread(s), median of %d, %s time "
         "(SIMD build: %s)\n",
         threads, reps, threads == 1 ? "CPU" : "wall", kern_cpu_simd() ? "AVX2" : "portable");
  printf("| form | primitives | decode µs/token/layer | 256-row prompt µs/token/layer | decode ms/token, 18 layers "
         "| prompt ms/token, 18 layers |\n| --- | --- | ---: | ---: | ---: | ---: |\n");
  for (int portable = 0; portable < 2; portable++)
    for (int rec = 0; rec < 2; rec++) {
      kern_cpu(be)->gdn_chunked = !rec, kern_cpu(be)->gdn_portable = portable;
      const double d = run(be, 1, reps * 20, clk), p = run(be, 256, reps, clk);
      printf("| %s | %s | %.1f | %.1f | %.2f | %.2f |\n", rec ? "recurrent" : "chunked (64)",
             portable ? "portable" : (kern_cpu_simd() ? "AVX2" : "portable"), d * 1e6, p * 1e6, d * 1e3 * LAYERS,
             p * 1e3 * LAYERS);
    }
  kern_backend_destroy(be);
  return 0;
}
