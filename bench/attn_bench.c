/* bench/attn_bench.c — the paged attention forward on the CPU backend,
 * driven through cache/ and attention/ as the engine drives it.
 *
 *   decode   32 sequences x 2,048 cached tokens, 9 query / 3 KV heads,
 *            head_dim 64, blocks of 32 scattered over the cache: K/V bytes
 *            read / time, and that as a share of the machine's read
 *            bandwidth (bench/membw's "read:" line, run from this program's
 *            folder, or --read-gbs). Goal: >= 50%.
 *   varlen   prefill-like batches through the paged varlen kernel (default)
 *            and through the reference gather + attn_varlen: times and the
 *            speed ratio, for whole prefills, chunks over a long context, and
 *            a continuous-batching step (decodes with one prefill chunk, which
 *            takes the varlen path).
 *
 * Usage: attn_bench [-t threads] [-i iterations] [--read-gbs X] [--decode-only]
 * Times are the median of the iterations (after one warm-up); GB = 1e9 bytes.
 * Each is given as wall time and as cpu-time (process CPU time / threads:
 * what the call takes on cores it has to itself; on a shared machine the
 * cpu-time ratios are the meaningful ones). */
#include <errno.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention/attn.h"
#include "cache/kv_cache.h"
#include "bench/bench_probe.h"
#include "bench/bench_util.h"
#include "kernels/cpu/cpu_backend.h"

enum { N_HEADS = 9, N_KV_HEADS = 3, HEAD_DIM = 64, BLOCK = 32 };

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static void fill(float *x, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] = (float)((int)(rnd() % 2001) - 1000) / 1000.0f + 1e-3f;
}

typedef struct bench {
  kern_backend_t *be;
  kv_cache_t *cache;
  kv_seq_t *seqs;
  int n_seqs;
} bench_t;

/* A cache with room for n sequences of `len` tokens, its free list shuffled
 * so that every sequence's blocks are scattered, and the sequences holding
 * `cached` tokens of random K/V each. */
static void bench_init(bench_t *b, kern_backend_t *be, int n, int len, int cached) {
  b->be = be;
  b->n_seqs = n;
  int blocks_per_seq = (len + BLOCK - 1) / BLOCK;
  kv_cache_config_t cc = {.n_layers = 1, .n_kv_heads = N_KV_HEADS, .head_dim = HEAD_DIM, .block_size = BLOCK,
                          .num_blocks = (int64_t)n * blocks_per_seq + 8};
  b->cache = kv_cache_create(be, &cc);
  if (!b->cache) exit(1);
  kv_alloc_t *a = b->cache->alloc;
  const int nb = b->cache->num_blocks;
  int32_t *ids = malloc((size_t)nb * sizeof *ids);
  for (int i = 0; i < nb; i++) ids[i] = kv_block_alloc(a);
  for (int i = nb - 1; i > 0; i--) {
    int j = (int)(rnd() % (uint64_t)(i + 1));
    int32_t t = ids[i];
    ids[i] = ids[j];
    ids[j] = t;
  }
  for (int i = 0; i < nb; i++) kv_block_unref(a, ids[i]);
  free(ids);
  const size_t slots = (size_t)nb * BLOCK * b->cache->kv_dim;
  fill(kv_cache_k(b->cache, 0), slots);
  fill(kv_cache_v(b->cache, 0), slots);
  b->seqs = calloc((size_t)n, sizeof *b->seqs);
  for (int i = 0; i < n; i++) {
    kv_seq_init(&b->seqs[i]);
    if (kv_seq_reserve(a, &b->seqs[i], cached) != 0) exit(1);
    kv_seq_commit(a, &b->seqs[i], cached);
  }
}

static void bench_free(bench_t *b) {
  for (int i = 0; i < b->n_seqs; i++) kv_seq_free(b->cache->alloc, &b->seqs[i]);
  free(b->seqs);
  kv_cache_destroy(b->cache);
}

/* Median wall seconds of one attn_layer_forward over `iters` runs of the
 * step in which every sequence adds q_len tokens but the last, which adds
 * last_q (after one warm-up); *cpu gets the median process CPU seconds
 * divided by the thread count. */
static double time_step(bench_t *b, int q_len, int last_q, int gather, int iters, attn_path_t *path, double *cpu) {
  kern_backend_t *be = b->be;
  const int n = b->n_seqs, total = (n - 1) * q_len + last_q;
  int64_t max_len = 0;
  const kv_seq_t **sp = malloc((size_t)n * sizeof *sp);
  int32_t *ql = malloc((size_t)n * sizeof *ql);
  for (int i = 0; i < n; i++) {
    ql[i] = i == n - 1 ? last_q : q_len;
    if (kv_seq_reserve(b->cache->alloc, &b->seqs[i], ql[i]) != 0) exit(1);
    sp[i] = &b->seqs[i];
    if (b->seqs[i].n_tokens + ql[i] > max_len) max_len = b->seqs[i].n_tokens + ql[i];
  }
  attn_config_t ac = {.n_heads = N_HEADS, .max_seqs = n, .max_tokens = total, .max_seq_len = (int)max_len,
                      .gather = gather, .max_kv_tokens = (int64_t)n * max_len};
  attn_t *at = attn_create(be, b->cache, &ac);
  attn_meta_t m;
  if (!at || attn_meta_init(&m, n, total, attn_max_blocks_per_seq(at)) != 0) exit(1);
  if (attn_meta_build(&m, b->cache->alloc, sp, ql, n) != 0 || attn_step_begin(at, &m.batch) != 0) exit(1);
  *path = attn_step_path(at);
  const size_t qn = (size_t)total * N_HEADS * HEAD_DIM, kn = (size_t)total * N_KV_HEADS * HEAD_DIM;
  float *q = be->alloc(be, qn * 4), *k = be->alloc(be, kn * 4), *v = be->alloc(be, kn * 4), *o = be->alloc(be, qn * 4);
  fill(q, qn);
  fill(k, kn);
  fill(v, kn);
  double *t = malloc((size_t)iters * 2 * sizeof *t), *c = t + iters;
  attn_layer_forward(at, 0, q, k, v, o); /* warm-up */
  for (int i = 0; i < iters; i++) {
    double w0 = bench_clock_s(CLOCK_MONOTONIC), c0 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
    attn_layer_forward(at, 0, q, k, v, o);
    be->sync(be);
    t[i] = bench_clock_s(CLOCK_MONOTONIC) - w0;
    c[i] = (bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / kern_cpu(be)->n_threads;
  }
  qsort(t, (size_t)iters, sizeof *t, bench_cmp_double);
  qsort(c, (size_t)iters, sizeof *c, bench_cmp_double);
  double med = t[iters / 2];
  *cpu = c[iters / 2];
  be->free(be, q), be->free(be, k), be->free(be, v), be->free(be, o);
  free(t);
  free(sp);
  free(ql);
  attn_meta_free(&m);
  attn_destroy(at);
  return med;
}

static void varlen_case(kern_backend_t *be, const char *what, int n, int cached, int q_len, int last_q, int iters) {
  bench_t b;
  bench_init(&b, be, n, cached + (q_len > last_q ? q_len : last_q), cached);
  attn_path_t p1, p2;
  double cp, cg;
  double tp = time_step(&b, q_len, last_q, 0, iters, &p1, &cp);
  double tg = time_step(&b, q_len, last_q, 1, iters, &p2, &cg);
  printf("varlen %-34s paged %8.2f ms  gather %8.2f ms  gather/paged %.2fx  (cpu-time %.2f / %.2f ms, %.2fx)\n",
         what, tp * 1e3, tg * 1e3, tg / tp, cp * 1e3, cg * 1e3, cg / cp);
  if (p1 != ATTN_PATH_VARLEN || p2 != ATTN_PATH_VARLEN) printf("  (unexpected path)\n");
  bench_free(&b);
}

int main(int argc, char **argv) {
  int threads = 0, iters = 20, decode_only = 0;
  double read_gbs = 0, read_cpu_gbs = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-i") && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--read-gbs") && i + 1 < argc) read_gbs = atof(argv[++i]);
    else if (!strcmp(argv[i], "--decode-only")) decode_only = 1;
    else {
      fprintf(stderr, "usage: %s [-t threads] [-i iterations] [--read-gbs X] [--decode-only]\n", argv[0]);
      return 2;
    }
  }
  if (iters < 1) iters = 1;
  kern_backend_t *be = kern_backend_create("cpu", threads);
  if (!be) return 1;
  threads = kern_cpu(be)->n_threads;
  if (read_gbs <= 0) bench_probe_read_gbs(argv[0], threads, &read_gbs, &read_cpu_gbs);

  /* decode: 32 x 2,048 cached, the new token appended in place */
  enum { N = 32, CACHED = 2048 };
  bench_t b;
  bench_init(&b, be, N, CACHED + 1, CACHED);
  attn_path_t path;
  double c;
  double t = time_step(&b, 1, 1, 0, iters, &path, &c);
  const double bytes = (double)N * (CACHED + 1) * N_KV_HEADS * HEAD_DIM * sizeof(float) * 2;
  const double gbs = bytes / t / 1e9, cpu_gbs = bytes / c / 1e9;
  printf("decode %d seqs x %d cached, %d/%d heads, head_dim %d, %d threads: K/V %.1f MB\n", N, CACHED, N_HEADS,
         N_KV_HEADS, HEAD_DIM, threads, bytes / 1e6);
  printf("decode wall     %8.3f ms -> %6.2f GB/s", t * 1e3, gbs);
  if (read_gbs > 0)
    printf(" = %3.0f%% of read %.2f GB/s (goal >= 50%%)\n", 100.0 * gbs / read_gbs, read_gbs);
  else
    printf(" (no bandwidth probe)\n");
  printf("decode cpu-time %8.3f ms -> %6.2f GB/s", c * 1e3, cpu_gbs);
  if (read_cpu_gbs > 0)
    printf(" = %3.0f%% of read cpu-time %.2f GB/s\n", 100.0 * cpu_gbs / read_cpu_gbs, read_cpu_gbs);
  else
    printf("\n");
  if (path != ATTN_PATH_DECODE) printf("  (unexpected path)\n");
  bench_free(&b);

  /* varlen: paged vs gather */
  if (decode_only) {
    kern_backend_destroy(be);
    return 0;
  }
  varlen_case(be, "prefill 4 x 512 (q = k)", 4, 0, 512, 512, iters / 4 + 1);
  varlen_case(be, "chunk 4 x 256 over 2,048 cached", 4, 2048, 256, 256, iters / 4 + 1);
  varlen_case(be, "chunk 16 x 16 over 2,048 cached", 16, 2048, 16, 16, iters);
  varlen_case(be, "mixed 31 decodes + 1 x 256, 2,048 cached", 32, 2048, 1, 256, iters);
  kern_backend_destroy(be);
  return 0;
}
