/* kernels/cpu/cpu_backend.c — the CPU backend's table (see cpu_backend.h).
 * Memory is host memory: upload and download are copies. */
#include "kernels/cpu/cpu_backend.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "base/alloc.h"
#include "base/log.h"
#include "kernels/cpu/attn_cpu.h"
#include "kernels/cpu/matmul_cpu.h"
#include "kernels/cpu/ops_cpu.h"

/* Buffers of at least this size (the KV arena, large activations) are
 * 2 MiB-aligned and backed by transparent huge pages where the kernel allows
 * (advice only): paged attention reads K/V blocks in an order the hardware
 * prefetchers cannot follow across 4 KiB pages. Measured with
 * build/bench/attn_bench --decode-only: 7.5 -> 7.1 ms (2 threads). */
#define CPU_HUGE_BYTES ((size_t)2 << 20)

static void *cpu_alloc(kern_backend_t *be, size_t bytes) {
  (void)be;
  void *p = NULL;
  if (bytes >= CPU_HUGE_BYTES) {
    size_t size = (bytes + CPU_HUGE_BYTES - 1) & ~(CPU_HUGE_BYTES - 1);
    if (posix_memalign(&p, CPU_HUGE_BYTES, size) != 0) return NULL;
    (void)madvise(p, size, MADV_HUGEPAGE); /* fine if refused */
    return p;
  }
  if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) return NULL;
  return p;
}

static void cpu_free(kern_backend_t *be, void *buf) {
  (void)be;
  free(buf);
}

static void cpu_copy(kern_backend_t *be, void *dst, const void *src, size_t bytes) {
  (void)be;
  if (bytes) memmove(dst, src, bytes);
}

static void cpu_sync(kern_backend_t *be) { (void)be; }

static void *cpu_host_alloc(kern_backend_t *be, size_t bytes) {
  void *p = NULL;
  (void)be;
  return posix_memalign(&p, 64, bytes ? bytes : 64) == 0 ? p : NULL;
}

/* Every head layout: the CPU kernels take any head_dim and GQA ratio. */
static int cpu_attn_supported(kern_backend_t *be, int n_heads, int n_kv_heads, int head_dim, char *err,
                              size_t err_len) {
  (void)be, (void)n_heads, (void)n_kv_heads, (void)head_dim, (void)err, (void)err_len;
  return 0;
}

/* be->read_gbps: the pool's threads sum 64 MiB of fresh memory (larger
 * than the last-level caches) in 1 MiB chunks, best of 3 passes, as
 * bench/membw's read probe does (that one with 2 x 256 MiB). */
#define PROBE_BYTES ((size_t)64 << 20)
#define PROBE_CHUNK ((size_t)1 << 20)

typedef struct {
  const uint64_t *buf;
  uint64_t sink[64];
} probe_t;

static void probe_task(void *ctx, int64_t begin, int64_t end, int tid) {
  probe_t *p = ctx;
  const size_t words = PROBE_CHUNK / sizeof(uint64_t);
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (int64_t k = begin; k < end; k++)
    for (const uint64_t *w = p->buf + (size_t)k * words, *e = w + words; w < e; w += 4) a += w[0], b ^= w[1], c += w[2], d ^= w[3];
  p->sink[tid & 63] += a + b + c + d;
}

static double cpu_read_gbps(kern_backend_t *be) {
  probe_t p = {.buf = cpu_alloc(be, PROBE_BYTES)};
  if (!p.buf) return 0;
  memset((void *)p.buf, 1, PROBE_BYTES);
  double best = 0;
  for (int pass = 0; pass < 3; pass++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    kern_pool_for(kern_cpu(be)->pool, (int64_t)(PROBE_BYTES / PROBE_CHUNK), 1, probe_task, &p);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (s > 0 && PROBE_BYTES / s / 1e9 > best) best = (double)PROBE_BYTES / s / 1e9;
  }
  cpu_free(be, (void *)p.buf);
  return best;
}

static void cpu_destroy(kern_backend_t *be) {
  kern_cpu_t *cpu = kern_cpu(be);
  kern_pool_destroy(cpu->pool);
  free(cpu->scratch);
  free(cpu);
}

void *kern_cpu_scratch(kern_cpu_t *cpu, size_t bytes) {
  if (bytes <= cpu->scratch_bytes) return cpu->scratch;
  free(cpu->scratch);
  cpu->scratch = NULL;
  if (posix_memalign(&cpu->scratch, 64, bytes) != 0) abort();
  cpu->scratch_bytes = bytes;
  return cpu->scratch;
}

static const kern_backend_t cpu_table = {
    .name = "cpu",
    .kv_type = KERN_F32,
    .attn_window_granule = KERN_ATTN_TILE, /* attn_varlen.c starts at the window's first tile */
    .attn_sinks = 1,                       /* kern_cpu__attn_finish adds them */
    .destroy = cpu_destroy,

    /* memory */
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .sync = cpu_sync,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_free,
    .upload_async = cpu_copy,
    .attn_supported = cpu_attn_supported,
    .read_gbps = cpu_read_gbps,

    /* weights and dense operations: kernels/cpu/matmul*.c, ops.c */
    .weight_init = kern_cpu_weight_init,
    .weight_release = kern_cpu_weight_release,
    .weight_use = kern_cpu_weight_use,
    .weight_join = NULL, /* matmul reads each weight's own blocks: nothing to join */
    .matmul = kern_cpu_matmul,
    .embed = kern_cpu_embed,
    .rmsnorm = kern_cpu_rmsnorm,
    .rope = kern_cpu_rope,
    .swiglu = kern_cpu_swiglu,
    .geglu = kern_cpu_geglu,
    .glu_joined = kern_cpu_glu_joined,
    .swiglu_oai = kern_cpu_swiglu_oai,
    .scale = kern_cpu_scale,
    .add = kern_cpu_add,
    .add_bias = kern_cpu_add_bias,
    .gather_rows = kern_cpu_gather_rows,
    .moe_combine = kern_cpu_moe_combine,

    /* Gated DeltaNet: kernels/cpu/ops_gdn.c */
    .gdn_conv = kern_cpu_gdn_conv,
    .gdn_rule = kern_cpu_gdn_rule,
    .sigmoid_mul = kern_cpu_sigmoid_mul,
    .copy_cols = kern_cpu_copy_cols,

    /* KV cache and attention: kernels/cpu/attn_*.c */
    .kv_write = kern_cpu_kv_write,
    .kv_gather = kern_cpu_kv_gather,
    .attn_varlen = kern_cpu_attn_varlen,
    .attn_varlen_paged = kern_cpu_attn_varlen_paged,
    .attn_decode = kern_cpu_attn_decode,
};

kern_backend_t *kern_cpu_create(const kern_backend_opts_t *opts) {
  kern_cpu_t *cpu = xcalloc(1, sizeof *cpu);
  cpu->base = cpu_table;
  cpu->base.precision = opts->precision == KERN_PRECISION_FAST ? KERN_PRECISION_FAST : KERN_PRECISION_EXACT;
  cpu->repack = !opts->keep_views;
  cpu->pool = kern_pool_create(opts->n_threads);
  if (!cpu->pool) {
    log_error("kern_cpu_create: cannot start the thread pool");
    free(cpu);
    return NULL;
  }
  cpu->n_threads = kern_pool_size(cpu->pool);
  return &cpu->base;
}
