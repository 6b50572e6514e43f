/* bench/matmul_bench.c — the CPU backend's matmul (kernels/cpu/matmul_cpu.h)
 * at the default model's shapes, and the decode / prefill proxies of
 * issue 4; results recorded in docs/benchmarks/matmul.md.
 *
 *   build/bench/matmul_bench [-t threads] [--quick] [--model-only] [--cpu-time]
 *                            [--precision exact|fast|both] [--shape ROWSxCOLS] [--types T,T,...]
 *
 * 1. Memory bandwidth: bench/membw's read probe (run from the same folder,
 *    same threads), the decode bound's denominator.
 * 2. Per weight type, y[n, rows] = x[n, cols] · wᵀ for rows × cols of
 *    576×576 (attn_q/attn_output), 1536×576 (ffn_gate/up), 576×1536
 *    (ffn_down), and 49152×576 for Q8_0 (the tied output projection), at
 *    n = 1, 8, 32, 512: GFLOP/s (2·rows·cols·n per call) and weight GB/s
 *    (the weight's bytes per call). K-quants need cols % 256 == 0: they run
 *    512 in place of 576.
 * 3. Decode proxy: every matmul of one step of the default model (30 layers ×
 *    q, k, v, o, gate, up, down in Q4_1, then the Q8_0 output projection),
 *    96.4 MB of distinct weights, at n = 1 and n = 32 rows: tokens/s, the
 *    32/1 ratio, and the n = 1 step against the bandwidth bound.
 *    Prefill proxy: the 30 layers at n = 512, plus the output projection of
 *    the one row that needs logits.
 * Every time is the best of repeated runs (other processes share this
 * machine; the best run is the one they disturbed least). --quick runs
 * fewer repetitions and only the Q4_1 / Q8_0 rows of table 2; --model-only
 * skips table 2. --precision (default exact) picks the matmul arithmetic
 * (kern.h); both runs tables 2 and 3 for exact, then for fast, in one
 * process, and ends with the fast/exact ratios of the step. --cpu-time
 * times every matmul by the process's cpu-time instead of the wall clock
 * (on a machine shared with other work the neighbours then do not count;
 * with -t 1 it is the one core's time), and the bandwidth bound by the
 * probe's cpu-time figure. --shape runs table 2 at that one shape only (for
 * each type whose block divides COLS; e.g. 2880x2880, a gpt-oss-20b expert
 * matrix) and skips table 3; --types keeps only the named types in table 2
 * (MXFP4 is in it only when named). */
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_probe.h"
#include "bench/bench_util.h"
#include "bench/bench_weights.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/simd.h"
#include "kernels/kern.h"

#ifdef KERN_CPU_AVX512
#define KERN_Q8_AVX512 1 /* the fast matmul's kernels are AVX-512 ones */
#else
#define KERN_Q8_AVX512 0
#endif

static double min_seconds = 0.4; /* per measured point, at least 3 runs */

static clockid_t clock_id = CLOCK_MONOTONIC; /* --cpu-time: CLOCK_PROCESS_CPUTIME_ID */

static double now(void) { return bench_clock_s(clock_id); }

/* --- memory bandwidth ------------------------------------------------------ */

/* bench/membw's read bandwidth in bytes/s, with the same thread count. */
static double membw_read(const char *argv0, int threads) {
  double wall, cpu;
  bench_probe_read_gbs(argv0, threads, &wall, &cpu);
  return (clock_id == CLOCK_MONOTONIC ? wall : cpu) * 1e9; /* in the clock the matmuls are timed by */
}

/* --- matmul points ------------------------------------------------------------ */

static double time_matmul(kern_backend_t *be, float *y, const float *x, const kern_weight_t *w, int n) {
  double best = 1e30, start = now();
  for (int r = 0; r < 3 || now() - start < min_seconds; r++) {
    double t = now();
    be->matmul(be, y, x, w, n);
    t = now() - t;
    if (t < best) best = t;
  }
  return best;
}

static int64_t only_rows, only_cols;  /* --shape (0: the default shapes) */
static const char *only_types;       /* --types, comma-separated names (NULL: the default list) */

static int type_listed(kern_type_t type) {
  const char *name = kern_type_name(type);
  size_t len = strlen(name);
  for (const char *p = only_types; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
    if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == '\0')) return 1;
  return 0;
}

static void type_table(kern_backend_t *be, int quick, float *x, float *y) {
  const kern_type_t types[] = {KERN_F32,  KERN_F16,  KERN_BF16, KERN_Q4_0, KERN_Q4_1, KERN_Q5_0,
                               KERN_Q5_1, KERN_Q8_0, KERN_Q4_K, KERN_Q5_K, KERN_Q6_K, KERN_MXFP4};
  int64_t shapes[4][2] = {{576, 576}, {1536, 576}, {576, 1536}, {49152, 576}};
  int n_shapes = 4;
  if (only_rows) shapes[0][0] = only_rows, shapes[0][1] = only_cols, n_shapes = 1;
  const int ns[] = {1, 8, 32, 512};
  printf("\n## Matmul per weight type (GFLOP/s | weight GB/s)\n\n");
  printf("| type | rows × cols | n=1 | n=8 | n=32 | n=512 |\n| --- | --- | --- | --- | --- | --- |\n");
  for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
    kern_type_t type = types[t];
    if (only_types ? !type_listed(type) : type == KERN_MXFP4) continue;
    if (quick && type != KERN_Q4_1 && type != KERN_Q8_0) continue;
    for (int s = 0; s < n_shapes; s++) {
      int64_t rows = shapes[s][0], cols = shapes[s][1];
      if (only_rows && cols % kern_type_block_elems(type) != 0) continue;
      if (!only_rows && rows == 49152 && type != KERN_Q8_0) continue;
      if (!only_rows && kern_type_block_elems(type) == 256) rows = rows == 576 ? 512 : rows, cols = cols == 576 ? 512 : cols;
      void *data = bench_random_weight(type, rows, cols);
      kern_weight_t w;
      if (be->weight_init(be, &w, type, rows, cols, data) != 0) abort();
      printf("| %s | %lld × %lld |", kern_type_name(type), (long long)rows, (long long)cols);
      for (int k = 0; k < 4; k++) {
        double sec = time_matmul(be, y, x, &w, ns[k]);
        double bytes = (double)rows * (double)kern_type_row_bytes(type, cols);
        printf(" %.1f \\| %.2f |", 2.0 * (double)rows * (double)cols * ns[k] / sec / 1e9, bytes / sec / 1e9);
      }
      printf("\n");
      fflush(stdout);
      be->weight_release(be, &w);
      free(data);
    }
  }
}

/* --- the default model's step ------------------------------------------------ */

#define LAYERS 30
enum { M_Q, M_K, M_V, M_O, M_GATE, M_UP, M_DOWN, M_PER_LAYER };
static const int64_t model_shape[M_PER_LAYER][2] = {
    {576, 576}, {192, 576}, {192, 576}, {576, 576}, {1536, 576}, {1536, 576}, {576, 1536},
};

typedef struct {
  kern_weight_t w[LAYERS][M_PER_LAYER], out;
  void *data[LAYERS][M_PER_LAYER], *out_data;
  double bytes; /* weight bytes read by one step */
} model_t;

static void model_init(kern_backend_t *be, model_t *m) {
  m->bytes = 0;
  for (int l = 0; l < LAYERS; l++)
    for (int k = 0; k < M_PER_LAYER; k++) {
      int64_t rows = model_shape[k][0], cols = model_shape[k][1];
      m->data[l][k] = bench_random_weight(KERN_Q4_1, rows, cols);
      if (be->weight_init(be, &m->w[l][k], KERN_Q4_1, rows, cols, m->data[l][k]) != 0) abort();
      m->bytes += (double)rows * (double)kern_type_row_bytes(KERN_Q4_1, cols);
    }
  m->out_data = bench_random_weight(KERN_Q8_0, 49152, 576);
  if (be->weight_init(be, &m->out, KERN_Q8_0, 49152, 576, m->out_data) != 0) abort();
  m->bytes += 49152.0 * (double)kern_type_row_bytes(KERN_Q8_0, 576);
}

static void model_free(kern_backend_t *be, model_t *m) {
  for (int l = 0; l < LAYERS; l++)
    for (int k = 0; k < M_PER_LAYER; k++) {
      be->weight_release(be, &m->w[l][k]);
      free(m->data[l][k]);
    }
  be->weight_release(be, &m->out);
  free(m->out_data);
}

/* One step, `reps` times: every layer matmul at n rows, the output
 * projection at out_n rows. Returns the best step's seconds; *sum_best gets
 * the sum over the step's calls of each call's best time (each call still
 * runs with its weights cold, in step order; this filters out the moments
 * other processes took the CPU, which a whole 50 ms step rarely escapes on
 * a shared machine). */
static double model_step(kern_backend_t *be, model_t *m, const float *x, float *y, int n, int out_n, int reps,
                         double *sum_best) {
  enum { CALLS = LAYERS * M_PER_LAYER + 1 };
  double best_call[CALLS], best = 1e30;
  for (int c = 0; c < CALLS; c++) best_call[c] = 1e30;
  for (int r = 0; r < reps; r++) {
    double t0 = now(), t = t0;
    for (int c = 0; c < CALLS; c++) {
      if (c < CALLS - 1) be->matmul(be, y, x, &m->w[c / M_PER_LAYER][c % M_PER_LAYER], n);
      else be->matmul(be, y, x, &m->out, out_n);
      double t1 = now();
      if (t1 - t < best_call[c]) best_call[c] = t1 - t;
      t = t1;
    }
    if (t - t0 < best) best = t - t0;
  }
  *sum_best = 0;
  for (int c = 0; c < CALLS; c++) *sum_best += best_call[c];
  return best;
}

/* Tables 2 and 3 for one precision; *steps gets the best 1-, 32- and
 * 512-row step times. */
static void run_precision(kern_precision_t prec, int threads, int quick, int model_only, const char *argv0, float *x,
                          float *y, double steps[3]) {
  const kern_backend_opts_t o = {.n_threads = threads, .precision = prec};
  kern_backend_t *be = kern_backend_create_opts("cpu", &o);
  if (!be) abort();
  kern_cpu_t *cpu = kern_cpu(be);
  printf("# matmul_bench: %d threads, %s kernels, precision %s\n\n", cpu->n_threads,
         !kern_cpu_simd() ? "portable" : prec == KERN_PRECISION_FAST && KERN_Q8_AVX512 ? "AVX-512" : "AVX2",
         prec == KERN_PRECISION_FAST ? "fast" : "exact");
  double bw = membw_read(argv0, cpu->n_threads);
  if (bw <= 0) fprintf(stderr, "matmul_bench: bench/membw did not run: no bandwidth bound\n");
  if (!model_only) type_table(be, quick, x, y);
  if (only_rows) {
    kern_backend_destroy(be);
    return;
  }

  model_t *m = malloc(sizeof *m);
  if (!m) abort();
  model_init(be, m);
  int reps = quick ? 3 : 10;
  double s1, s32, s512;
  double t1 = model_step(be, m, x, y, 1, 1, reps, &s1);
  double t32 = model_step(be, m, x, y, 32, 32, reps, &s32);
  double t512 = model_step(be, m, x, y, 512, 1, quick ? 1 : 3, &s512);
  double bound = bw > 0 ? m->bytes / bw : 0;
  printf("\n## Default model, all matmuls of one step (%.1f MB of weights)\n\n", m->bytes / 1e6);
  printf("best step | sum of each call's best (see model_step)\n\n");
  printf("| step | ms | tokens/s | |\n| --- | --- | --- | --- |\n");
  printf("| decode, 1 row | %.2f \\| %.2f | %.1f \\| %.1f | %.0f %% \\| %.0f %% of the %.2f ms bandwidth bound |\n",
         t1 * 1e3, s1 * 1e3, 1 / t1, 1 / s1, 100 * bound / t1, 100 * bound / s1, bound * 1e3);
  printf("| decode, 32 rows | %.2f \\| %.2f | %.1f \\| %.1f | %.2f× \\| %.2f× the 1-row tokens/s |\n", t32 * 1e3,
         s32 * 1e3, 32 / t32, 32 / s32, t1 * 32 / t32, s1 * 32 / s32);
  printf("| prefill, 512 rows | %.2f \\| %.2f | %.1f \\| %.1f | output projection for 1 row |\n\n", t512 * 1e3,
         s512 * 1e3, 512 / t512, 512 / s512);
  steps[0] = s1, steps[1] = s32, steps[2] = s512;
  model_free(be, m);
  free(m);
  kern_backend_destroy(be);
}

int main(int argc, char **argv) {
  int threads = 0, quick = 0, model_only = 0, first = KERN_PRECISION_EXACT, last = KERN_PRECISION_EXACT;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
    else if (strcmp(argv[i], "--quick") == 0) quick = 1;
    else if (strcmp(argv[i], "--model-only") == 0) model_only = 1;
    else if (strcmp(argv[i], "--cpu-time") == 0) clock_id = CLOCK_PROCESS_CPUTIME_ID;
    else if (strcmp(argv[i], "--precision") == 0 && i + 1 < argc && strcmp(argv[i + 1], "fast") == 0)
      first = last = KERN_PRECISION_FAST, i++;
    else if (strcmp(argv[i], "--precision") == 0 && i + 1 < argc && strcmp(argv[i + 1], "both") == 0)
      last = KERN_PRECISION_FAST, i++;
    else if (strcmp(argv[i], "--precision") == 0 && i + 1 < argc && strcmp(argv[i + 1], "exact") == 0)
      i++;
    else if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc &&
             sscanf(argv[i + 1], "%" SCNd64 "x%" SCNd64, &only_rows, &only_cols) == 2 && only_rows > 0 &&
             only_rows <= 1 << 20 && only_cols > 0 && only_cols <= 1 << 16)
      i++;
    else if (strcmp(argv[i], "--types") == 0 && i + 1 < argc)
      only_types = argv[++i];
    else {
      fprintf(stderr, "usage: matmul_bench [-t threads] [--quick] [--model-only] [--cpu-time] "
                      "[--precision exact|fast|both] [--shape ROWSxCOLS] [--types T,T,...]\n");
      return 2;
    }
  }
  if (!only_rows) only_cols = 0;
  if (quick) min_seconds = 0.1;
  const int64_t xcols = only_cols > 1536 ? only_cols : 1536, yrows = only_rows > 49152 ? only_rows : 49152;
  float *x = malloc(sizeof(float) * 512 * (size_t)xcols), *y = malloc(sizeof(float) * 512 * (size_t)yrows);
  if (!x || !y) abort();
  for (int64_t i = 0; i < 512 * xcols; i++) x[i] = bench_rnd_unit();
  double steps[2][3];
  for (int p = first; p <= last; p++) run_precision((kern_precision_t)p, threads, quick, model_only, argv[0], x, y, steps[p]);
  if (first != last && !only_rows)
    printf("## fast / exact, same run (sum of each call's best)\n\n| step | speed-up |\n| --- | --- |\n"
           "| decode, 1 row | %.2f× |\n| decode, 32 rows | %.2f× |\n| prefill, 512 rows | %.2f× |\n",
           steps[0][0] / steps[1][0], steps[0][1] / steps[1][1], steps[0][2] / steps[1][2]);
  free(x), free(y);
  return 0;
}
