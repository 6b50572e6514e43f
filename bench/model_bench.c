/* bench/model_bench.c — the whole forward of the default model on the CPU
 * backend, driven as the engine drives it (kv_seq_reserve, attn_meta_build,
 * model_forward, kv_seq_commit).
 *
 *   decode 1    one decode step of one sequence (after a prefill of
 *               --context tokens): tokens/s, and the weight bytes the step
 *               reads (model_step_weight_bytes) / its time, as a share of
 *               the machine's read bandwidth (bench/membw's "read:" line, run
 *               from this program's folder, or --read-gbs). Goal: >= 50%.
 *   decode 32   one step of 32 sequences x 1 token (each after its own
 *               prefill of --context tokens): tokens/s, and the ratio to the
 *               1-row step's tokens/s. Goal: >= 8x.
 *   prefill     one sequence's 512-token prompt in one step (logits for the
 *               last row only): tokens/s.
 *
 * Usage: model_bench [-m MODEL] [-t threads] [-i iterations] [--context N]
 *                    [--read-gbs X] [--skip-prefill] [--precision exact|fast]
 *                    [--quantize Q8_0|Q4_0|Q4_1]   (model_load_opts: F32/F16/BF16
 *                                                   weights quantized at load)
 * Times are the median of the iterations (after one warm-up step), as wall
 * time and as cpu-time (process CPU time / threads: what the step takes on
 * cores it has to itself; on a shared machine compare cpu-time with
 * cpu-time). GB = 1e9 bytes. */
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "bench/bench_probe.h"
#include "bench/bench_util.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"

enum { MAX_SEQS = 32, PREFILL = 512 };

typedef struct bench {
  kern_backend_t *be;
  model_t *m;
  kv_cache_t *cache;
  model_runner_t *run;
  attn_meta_t meta;
  kv_seq_t seqs[MAX_SEQS];
  int32_t ids[PREFILL], pos[PREFILL], rows[PREFILL];
  float *logits; /* [MAX_SEQS, n_vocab] */
  uint64_t rng;
} bench_t;

/* One step: sequences [first, first + n) each add q tokens (random ids);
 * logits for the last row of each. Returns (wall, cpu-time) in *w, *c. */
static void step(bench_t *b, int first, int n, int q, double *w, double *c) {
  const kv_seq_t *sp[MAX_SEQS];
  int32_t ql[MAX_SEQS];
  const int n_vocab = model_hparams(b->m)->n_vocab;
  int t = 0;
  for (int s = 0; s < n; s++) {
    kv_seq_t *seq = &b->seqs[first + s];
    if (kv_seq_reserve(b->cache->alloc, seq, q) != 0) {
      fprintf(stderr, "model_bench: the cache is full\n");
      exit(1);
    }
    for (int i = 0; i < q; i++, t++) {
      b->rng = b->rng * 6364136223846793005ull + 1442695040888963407ull;
      b->ids[t] = (int32_t)((b->rng >> 33) % (uint64_t)n_vocab);
      b->pos[t] = (int32_t)seq->n_tokens + i;
    }
    b->rows[s] = t - 1;
    sp[s] = seq;
    ql[s] = q;
  }
  if (attn_meta_build(&b->meta, b->cache->alloc, sp, ql, n) != 0) exit(1);
  const model_batch_t batch = {.n_tokens = t, .tokens = b->ids, .positions = b->pos, .attn = &b->meta.batch,
                               .n_logits = n, .logit_rows = b->rows};
  const double w0 = bench_clock_s(CLOCK_MONOTONIC), c0 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
  if (model_forward(b->run, &batch, b->logits) != 0) exit(1);
  *w = bench_clock_s(CLOCK_MONOTONIC) - w0;
  *c = (bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / kern_cpu(b->be)->n_threads;
  for (int s = 0; s < n; s++) kv_seq_commit(b->cache->alloc, &b->seqs[first + s], q);
}

/* Median (wall, cpu-time) of `iters` steps after one warm-up. */
static void timed(bench_t *b, int first, int n, int q, int iters, double *w, double *c, int fresh) {
  double *tw = malloc((size_t)iters * 2 * sizeof *tw), *tc = tw + iters;
  for (int i = -1; i < iters; i++) {
    if (fresh)
      for (int s = 0; s < n; s++) kv_seq_free(b->cache->alloc, &b->seqs[first + s]);
    double x, y;
    step(b, first, n, q, &x, &y);
    if (i >= 0) tw[i] = x, tc[i] = y;
  }
  qsort(tw, (size_t)iters, sizeof *tw, bench_cmp_double);
  qsort(tc, (size_t)iters, sizeof *tc, bench_cmp_double);
  *w = tw[iters / 2];
  *c = tc[iters / 2];
  free(tw);
}

int main(int argc, char **argv) {
  const char *path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  int threads = 0, iters = 10, context = 64, skip_prefill = 0;
  kern_precision_t precision = KERN_PRECISION_EXACT;
  model_load_opts_t mo = {.quantize = KERN_F32};
  double read_wall = 0, read_cpu = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-m") && i + 1 < argc) path = argv[++i];
    else if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-i") && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--context") && i + 1 < argc) context = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--read-gbs") && i + 1 < argc) read_wall = read_cpu = atof(argv[++i]);
    else if (!strcmp(argv[i], "--skip-prefill")) skip_prefill = 1;
    else if (!strcmp(argv[i], "--precision") && i + 1 < argc && !strcmp(argv[i + 1], "fast"))
      precision = KERN_PRECISION_FAST, i++;
    else if (!strcmp(argv[i], "--precision") && i + 1 < argc && !strcmp(argv[i + 1], "exact")) i++;
    else if (!strcmp(argv[i], "--quantize") && i + 1 < argc) {
      i++;
      for (int t = 0; t < KERN_TYPE_COUNT; t++)
        if (kern_type_name((uint32_t)t) && !strcmp(kern_type_name((uint32_t)t), argv[i])) mo.quantize = (kern_type_t)t;
    } else {
      fprintf(stderr, "usage: model_bench [-m MODEL] [-t threads] [-i iterations] [--context N] [--read-gbs X] "
                      "[--skip-prefill] [--precision exact|fast] [--quantize TYPE]\n");
      return 2;
    }
  }
  if (iters < 1 || context < 1 || context > PREFILL) return 2;
  log_set_level(LOG_LEVEL_WARN);
  bench_t b = {.rng = 0x9e3779b97f4a7c15ull};
  const kern_backend_opts_t bo = {.n_threads = threads, .precision = precision};
  b.be = kern_backend_create_opts("cpu", &bo);
  char err[512];
  b.m = b.be ? model_load_opts(path, b.be, &mo, err, sizeof err) : NULL;
  if (!b.m) {
    fprintf(stderr, "model_bench: %s\n", b.be ? err : "no backend");
    return 1;
  }
  threads = kern_cpu(b.be)->n_threads;
  if (read_wall == 0) bench_probe_read_gbs(argv[0], threads, &read_wall, &read_cpu);

  /* room for every sequence's context and steps, and the prefill */
  kv_cache_config_t kc = {.block_size = KV_DEFAULT_BLOCK_SIZE};
  const int bs = kc.block_size;
  kc.num_blocks = (int64_t)MAX_SEQS * ((context + 2 * iters + 2 + bs - 1) / bs) + (PREFILL + bs - 1) / bs;
  model_kv_config(b.m, &kc);
  b.cache = kv_cache_create(b.be, &kc);
  const model_runner_config_t rc = {.max_tokens = PREFILL, .max_seqs = MAX_SEQS};
  b.run = b.cache ? model_runner_create(b.m, b.cache, &rc) : NULL;
  if (!b.run || attn_meta_init(&b.meta, MAX_SEQS, PREFILL, model_runner_max_blocks_per_seq(b.run)) != 0) return 1;
  b.logits = malloc((size_t)MAX_SEQS * model_hparams(b.m)->n_vocab * sizeof(float));
  for (int s = 0; s < MAX_SEQS; s++) kv_seq_init(&b.seqs[s]);

  const double bytes = (double)model_step_weight_bytes(b.m);
  printf("model %s: %.1f MB of weights per token; %d threads; precision %s; context %d; load average:", path,
         bytes / 1e6, threads, precision == KERN_PRECISION_FAST ? "fast" : "exact", context);
  FILE *la = fopen("/proc/loadavg", "r");
  char lbuf[64] = "";
  if (la && fgets(lbuf, sizeof lbuf, la)) printf(" %.*s", 14, lbuf);
  if (la) fclose(la);
  printf("\n");

  /* every sequence's context, 8 sequences per step */
  double w, c;
  for (int s = 0; s < MAX_SEQS; s += 8) step(&b, s, 8, context, &w, &c);

  double w1, c1;
  timed(&b, 0, 1, 1, iters, &w1, &c1, 0);
  printf("decode 1 row:   %7.2f ms wall (%6.1f tok/s), %7.2f ms cpu-time (%6.1f tok/s)\n", w1 * 1e3, 1 / w1,
         c1 * 1e3, 1 / c1);
  printf("  weights:      %.2f GB/s wall = %.0f%% of read %.2f GB/s; %.2f GB/s cpu-time = %.0f%% of %.2f GB/s\n",
         bytes / w1 / 1e9, read_wall > 0 ? 100 * bytes / w1 / 1e9 / read_wall : 0, read_wall, bytes / c1 / 1e9,
         read_cpu > 0 ? 100 * bytes / c1 / 1e9 / read_cpu : 0, read_cpu);

  double w32, c32;
  timed(&b, 0, MAX_SEQS, 1, iters, &w32, &c32, 0);
  printf("decode 32 rows: %7.2f ms wall (%6.1f tok/s, %.1fx), %7.2f ms cpu-time (%6.1f tok/s, %.1fx)\n", w32 * 1e3,
         MAX_SEQS / w32, w1 * MAX_SEQS / w32, c32 * 1e3, MAX_SEQS / c32, c1 * MAX_SEQS / c32);

  if (!skip_prefill) {
    double wp, cp;
    const int pi = iters < 3 ? iters : 3;
    timed(&b, MAX_SEQS - 1, 1, PREFILL, pi, &wp, &cp, 1);
    printf("prefill %d:    %7.1f ms wall (%6.1f tok/s), %7.1f ms cpu-time (%6.1f tok/s), median of %d\n", PREFILL,
           wp * 1e3, PREFILL / wp, cp * 1e3, PREFILL / cp, pi);
  }

  for (int s = 0; s < MAX_SEQS; s++) kv_seq_free(b.cache->alloc, &b.seqs[s]);
  free(b.logits);
  attn_meta_free(&b.meta);
  model_runner_destroy(b.run);
  kv_cache_destroy(b.cache);
  model_destroy(b.m);
  kern_backend_destroy(b.be);
  return 0;
}
