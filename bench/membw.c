/* bench/membw.c — this machine's memory bandwidth, the yardstick for the
 * bandwidth-bound kernels (decode attention, decode matmuls).
 *
 * Two probes over buffers much larger than the last-level cache, spread over
 * the CPU backend's persistent thread pool in 1 MiB chunks, best of several
 * runs:
 *   read  a streaming sum of one buffer (AVX2 when built with it): bytes read / s
 *   copy  one buffer to another (non-temporal stores with AVX2, else memcpy):
 *         (bytes read + bytes written) / s
 *
 * Usage: membw [-t threads] [-m MiB per buffer] [-r runs]
 * Prints "read: X GB/s (cpu-time Y GB/s)" and "copy: ..." lines
 * (bench/attn_bench.c reads the first). X is bytes / wall time; Y is bytes /
 * (process CPU time / threads), what the probe gets from the cores it
 * actually ran on: on a shared machine, compare Y with Y. GB = 1e9 bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "kernels/cpu/pool.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#define CHUNK (1 << 20) /* bytes per pool item */

typedef struct {
  const char *src;
  char *dst;
  size_t bytes;
  double sums[256]; /* per-thread sink, so the reads are not optimized away */
} probe_t;

static void read_fn(void *ctx, int64_t begin, int64_t end, int tid) {
  probe_t *p = ctx;
  const float *x = (const float *)(p->src + (size_t)begin * CHUNK);
  const size_t n = (size_t)(end - begin) * CHUNK / sizeof(float);
#if defined(__AVX2__)
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(x + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(x + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(x + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(x + i + 24));
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  double s = 0;
  for (int i = 0; i < 8; i++) s += lanes[i];
#else
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i < n; i += 4) s0 += x[i], s1 += x[i + 1], s2 += x[i + 2], s3 += x[i + 3];
  double s = (double)s0 + s1 + s2 + s3;
#endif
  p->sums[tid & 255] += s;
}

/* Non-temporal stores where available: the destination is not read first. */
static void copy_fn(void *ctx, int64_t begin, int64_t end, int tid) {
  probe_t *p = ctx;
  const size_t off = (size_t)begin * CHUNK, bytes = (size_t)(end - begin) * CHUNK;
#if defined(__AVX2__)
  const float *x = (const float *)(p->src + off);
  float *y = (float *)(p->dst + off);
  for (size_t i = 0; i < bytes / sizeof(float); i += 32) {
    __m256 v0 = _mm256_load_ps(x + i), v1 = _mm256_load_ps(x + i + 8);
    __m256 v2 = _mm256_load_ps(x + i + 16), v3 = _mm256_load_ps(x + i + 24);
    _mm256_stream_ps(y + i, v0);
    _mm256_stream_ps(y + i + 8, v1);
    _mm256_stream_ps(y + i + 16, v2);
    _mm256_stream_ps(y + i + 24, v3);
  }
  _mm_sfence();
#else
  memcpy(p->dst + off, p->src + off, bytes);
#endif
}

static void fill_fn(void *ctx, int64_t begin, int64_t end, int tid) {
  probe_t *p = ctx;
  float *x = (float *)(p->src + (size_t)begin * CHUNK);
  for (size_t i = 0; i < (size_t)(end - begin) * CHUNK / sizeof(float); i++) x[i] = (float)(i & 7);
  memset(p->dst + (size_t)begin * CHUNK, 0, (size_t)(end - begin) * CHUNK);
}

/* Best wall seconds of `runs` runs of fn over the buffer, and the best
 * process CPU seconds divided by the thread count (what the run would take
 * on otherwise idle cores: robust to other load, not to memory contention). */
static void best_of(kern_pool_t *pool, probe_t *p, kern_pool_fn fn, int runs, double *wall, double *cpu) {
  *wall = *cpu = 1e30;
  for (int r = 0; r < runs; r++) {
    double w0 = bench_clock_s(CLOCK_MONOTONIC), c0 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
    kern_pool_for(pool, (int64_t)(p->bytes / CHUNK), 1, fn, p);
    double w = bench_clock_s(CLOCK_MONOTONIC) - w0, c = (bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / kern_pool_size(pool);
    if (w < *wall) *wall = w;
    if (c < *cpu) *cpu = c;
  }
}

int main(int argc, char **argv) {
  int threads = 0, mib = 512, runs = 5, opt;
  while ((opt = getopt(argc, argv, "t:m:r:")) != -1) {
    switch (opt) {
      case 't': threads = atoi(optarg); break;
      case 'm': mib = atoi(optarg); break;
      case 'r': runs = atoi(optarg); break;
      default:
        fprintf(stderr, "usage: %s [-t threads] [-m MiB per buffer] [-r runs]\n", argv[0]);
        return 2;
    }
  }
  if (mib < 1 || runs < 1) {
    fprintf(stderr, "membw: -m and -r must be positive\n");
    return 2;
  }
  kern_pool_t *pool = kern_pool_create(threads);
  if (!pool) return 1;
  probe_t p = {.bytes = (size_t)mib << 20};
  char *src = aligned_alloc(64, p.bytes), *dst = aligned_alloc(64, p.bytes);
  if (!src || !dst) {
    fprintf(stderr, "membw: cannot allocate 2 x %d MiB\n", mib);
    return 1;
  }
  p.src = src;
  p.dst = dst;
  kern_pool_for(pool, (int64_t)(p.bytes / CHUNK), 1, fill_fn, &p); /* fault the pages in */

  double t_read, c_read, t_copy, c_copy;
  best_of(pool, &p, read_fn, runs, &t_read, &c_read);
  best_of(pool, &p, copy_fn, runs, &t_copy, &c_copy);
  double sink = 0;
  for (int i = 0; i < 256; i++) sink += p.sums[i];
  printf("membw: %d threads, 2 x %d MiB buffers, best of %d runs (checksum %.0f)\n", kern_pool_size(pool), mib,
         runs, sink);
  printf("read: %.2f GB/s (cpu-time %.2f GB/s)\n", (double)p.bytes / t_read / 1e9, (double)p.bytes / c_read / 1e9);
  printf("copy: %.2f GB/s (cpu-time %.2f GB/s; bytes read + bytes written)\n", 2.0 * (double)p.bytes / t_copy / 1e9,
         2.0 * (double)p.bytes / c_copy / 1e9);
  free(src);
  free(dst);
  kern_pool_destroy(pool);
  return 0;
}
