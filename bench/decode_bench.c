/* bench/decode_bench.c — the matmuls of one decode step at the shapes of
 * real models, against the memory bandwidth measured in the same run
 * (docs/benchmarks/cpu-decode.md).
 *
 *   build/bench/decode_bench [-t threads] [--shape NAME] [--type T] [--out-type T]
 *                            [--layers N] [-n ROWS[,ROWS...]] [--reps R] [--cpu-time]
 *                            [--views] [--precision exact|fast]
 *
 * Shapes (llama.cpp's tensor shapes of the model of that name): smollm2-1.7b
 * (default), llama3.2-3b, llama3.1-8b, gemma3-270m, smollm2-135m. Every layer's
 * q, k, v, o, gate, up, down in --type (default Q4_0), then the output
 * projection in --out-type (default Q8_0), all random and distinct, so a step
 * streams its weights from memory (--layers N keeps the first N layers, for
 * the large shapes on a small machine). For each row count (default 1):
 * the best step over --reps (default 5) and the sum of each call's best
 * (filters out the moments other processes took the CPU), the weight bytes
 * per second, and that as a share of bench/membw's read bandwidth with the
 * same threads. --views keeps the weights in the file's layout (no repacked
 * copy: the A/B of kernels/cpu/repack.h); --cpu-time times by the process's
 * cpu-time divided by the threads (the pool's workers spin between calls,
 * so this counts them busy then) and takes the probe's cpu-time figure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_probe.h"
#include "bench/bench_util.h"
#include "bench/bench_weights.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/kern.h"

typedef struct {
  const char *name;
  int dim, layers, heads, kv_heads, head_dim, ff, vocab;
} shape_t;

static const shape_t shapes[] = {
    {"smollm2-1.7b", 2048, 24, 32, 32, 64, 8192, 49152},
    {"llama3.2-3b", 3072, 28, 24, 8, 128, 8192, 128256},
    {"llama3.1-8b", 4096, 32, 32, 8, 128, 14336, 128256},
    {"gemma3-270m", 640, 18, 4, 1, 256, 2048, 262144},
    {"smollm2-135m", 576, 30, 9, 3, 64, 1536, 49152},
};

static clockid_t clock_id = CLOCK_MONOTONIC;

static double now(void) { return bench_clock_s(clock_id); }

typedef struct {
  kern_weight_t w;
  void *data;
} mat_t;

static kern_type_t type_named(const char *s) {
  for (int t = 0; t < KERN_TYPE_COUNT; t++) {
    const char *n = kern_type_name((kern_type_t)t);
    if (n && strcmp(n, s) == 0 && kern_type_is_weight((kern_type_t)t)) return (kern_type_t)t;
  }
  fprintf(stderr, "decode_bench: unknown weight type %s\n", s);
  exit(2);
}

int main(int argc, char **argv) {
  int threads = 0, layers = -1, reps = 5, views = 0;
  kern_precision_t prec = KERN_PRECISION_FAST;
  const char *shape_name = "smollm2-1.7b", *rows_list = "1";
  kern_type_t type = KERN_Q4_0, out_type = KERN_Q8_0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "-t") == 0 && v) threads = atoi(v), i++;
    else if (strcmp(a, "--shape") == 0 && v) shape_name = v, i++;
    else if (strcmp(a, "--type") == 0 && v) type = type_named(v), i++;
    else if (strcmp(a, "--out-type") == 0 && v) out_type = type_named(v), i++;
    else if (strcmp(a, "--layers") == 0 && v) layers = atoi(v), i++;
    else if (strcmp(a, "-n") == 0 && v) rows_list = v, i++;
    else if (strcmp(a, "--reps") == 0 && v) reps = atoi(v), i++;
    else if (strcmp(a, "--cpu-time") == 0) clock_id = CLOCK_PROCESS_CPUTIME_ID;
    else if (strcmp(a, "--views") == 0) views = 1;
    else if (strcmp(a, "--precision") == 0 && v) prec = strcmp(v, "exact") == 0 ? KERN_PRECISION_EXACT : KERN_PRECISION_FAST, i++;
    else {
      fprintf(stderr, "usage: decode_bench [-t threads] [--shape NAME] [--type T] [--out-type T] [--layers N] "
                      "[-n ROWS,...] [--reps R] [--cpu-time] [--views] [--precision exact|fast]\n");
      return 2;
    }
  }
  const shape_t *s = NULL;
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
    if (strcmp(shapes[i].name, shape_name) == 0) s = &shapes[i];
  if (!s) {
    fprintf(stderr, "decode_bench: unknown shape %s\n", shape_name);
    return 2;
  }
  if (layers < 0 || layers > s->layers) layers = s->layers;
  const kern_backend_opts_t o = {.n_threads = threads, .precision = prec, .keep_views = views};
  kern_backend_t *be = kern_backend_create_opts("cpu", &o);
  if (!be) return 1;
  const int nthreads = kern_cpu(be)->n_threads;
  double wall_bw, cpu_bw;
  bench_probe_read_gbs(argv[0], nthreads, &wall_bw, &cpu_bw);
  const double bw = clock_id == CLOCK_MONOTONIC ? wall_bw : cpu_bw;

  const int64_t q = (int64_t)s->heads * s->head_dim, kv = (int64_t)s->kv_heads * s->head_dim;
  const int64_t shp[7][2] = {{q, s->dim}, {kv, s->dim}, {kv, s->dim}, {s->dim, q},
                             {s->ff, s->dim}, {s->ff, s->dim}, {s->dim, s->ff}};
  const int n_mats = 7 * layers + 1;
  mat_t *m = calloc((size_t)n_mats, sizeof *m);
  double bytes = 0, t_load = now();
  int64_t max_in = s->ff > q ? s->ff : q, max_out = s->vocab;
  for (int i = 0; i < n_mats; i++) {
    const int last = i == n_mats - 1;
    const kern_type_t t = last ? out_type : type;
    const int64_t rows = last ? s->vocab : shp[i % 7][0], cols = last ? s->dim : shp[i % 7][1];
    m[i].data = bench_random_weight(t, rows, cols);
    if (be->weight_init(be, &m[i].w, t, rows, cols, m[i].data) != 0) return 1;
    bytes += (double)rows * (double)kern_type_row_bytes(t, cols);
  }
  t_load = now() - t_load;
  printf("# decode_bench: %s, %d of %d layers, %s layers + %s output, %.1f MB a step; %d threads, precision %s%s; "
         "read bandwidth %.2f GB/s (%s)\n",
         s->name, layers, s->layers, kern_type_name(type), kern_type_name(out_type), bytes / 1e6, nthreads,
         prec == KERN_PRECISION_FAST ? "fast" : "exact", views ? ", weights as views" : ", repacked",
         bw, clock_id == CLOCK_MONOTONIC ? "wall" : "cpu-time");
  printf("# set-up %.1f s\n\n| rows | best step ms | sum of call bests ms | GB/s (sum) | share of read bw | tokens/s |\n"
         "| --- | --- | --- | --- | --- | --- |\n", t_load);
  float *x = malloc(sizeof(float) * 512 * (size_t)max_in), *y = malloc(sizeof(float) * 512 * (size_t)max_out);
  for (int64_t i = 0; i < 512 * max_in; i++) x[i] = bench_rnd_unit();
  for (const char *p = rows_list; *p;) {
    const int n = atoi(p);
    if (n < 1 || n > 512) {
      fprintf(stderr, "decode_bench: rows must be 1..512\n");
      return 2;
    }
    double best = 1e30, *call = malloc(sizeof(double) * (size_t)n_mats);
    for (int i = 0; i < n_mats; i++) call[i] = 1e30;
    for (int r = 0; r < reps; r++) {
      double t0 = now(), t = t0;
      for (int i = 0; i < n_mats; i++) {
        be->matmul(be, y, x, &m[i].w, n);
        const double t1 = now();
        if (t1 - t < call[i]) call[i] = t1 - t;
        t = t1;
      }
      if (t - t0 < best) best = t - t0;
    }
    double sum = 0;
    for (int i = 0; i < n_mats; i++) sum += call[i];
    if (clock_id != CLOCK_MONOTONIC) sum /= nthreads, best /= nthreads; /* cpu-time of all threads */
    printf("| %d | %.2f | %.2f | %.2f | %.0f %% | %.1f |\n", n, best * 1e3, sum * 1e3, bytes / sum / 1e9,
           bw > 0 ? 100.0 * bytes / sum / 1e9 / bw : 0.0, n / sum);
    fflush(stdout);
    free(call);
    p = strchr(p, ',');
    if (!p) break;
    p++;
  }
  for (int i = 0; i < n_mats; i++) {
    be->weight_release(be, &m[i].w);
    free(m[i].data);
  }
  free(m), free(x), free(y);
  kern_backend_destroy(be);
  return 0;
}
