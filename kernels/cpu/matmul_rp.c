/* kernels/cpu/matmul_rp.c — the fast matmul over repacked weights: the
 * repacking at weight_init and the threaded driver (repack.h for the
 * layouts, matmul_rp_avx2.c for the kernels, matmul_q8.h for the
 * arithmetic, which is the same whether a weight is repacked or not).
 *
 * When. With the fast precision, on a build with AVX2 (the kernels are
 * AVX2; a portable build keeps the views and the portable path), for the
 * types repack.h lays out. The copy lives in backend memory (2 MiB pages
 * where the kernel gives them: streaming a panel range then crosses
 * fewer TLB entries) and is exactly the weight's GGUF size plus at most 7
 * zero rows; the view into the file stays in w->impl for the embedding
 * lookup and the exact path, its pages handed back (MADV_PAGEOUT) once
 * copied, so the resident set holds the panels, not both. Repacking runs
 * on the pool (a few hundred MB/s a core, so a 1 GB model adds about a
 * second to its load). A lazy weight (an expert) is repacked at its first
 * weight_use instead: experts no token chooses are never read, and an
 * untied token_embd (lazy too: only the embedding lookup reads it, from
 * the view) never. be->packed_bytes counts the copies held.
 *
 * Work split. Activation rows form row blocks of at most RP_XBLOCK rows
 * and RP_XBYTES of split blocks (they stay in L2 while every panel passes
 * them; 50 rows at a width of 2048, 12 at 8192) and one work item is (row
 * block, pair of panels): its rows go through both panels two at a time by
 * the register-blocked kernel (matmul_rp_blk_avx2.c) where the type has
 * one, the panels' bytes staying in L1/L2 between them, else (and for an
 * odd last row or a lone last panel) through each panel RP_R rows at a
 * time by the tiles (matmul_rp_avx2.c). With one row (decode), items are
 * panel pairs, so the pool's chunks are runs of consecutive panels —
 * contiguous memory each thread streams. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/log.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/matmul_cpu.h"
#include "kernels/cpu/matmul_q8.h"
#include "kernels/cpu/repack.h"

#define RP_XBLOCK 64 /* activation rows per row block, at most */
#ifndef RP_XBYTES
#define RP_XBYTES (256 << 10) /* and their split blocks' bytes, at most (half an L2) */
#endif
#define RP_QGRAIN 16 /* activation rows per quantization work item */
#ifndef RP_R
#define RP_R 4 /* activation rows per kernel call */
#endif

typedef struct {
  kern_type_t type;
  const uint8_t *src;
  int64_t rows, cols;
  uint8_t *dst;
} pack_job_t;

static void pack_task(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const pack_job_t *j = ctx;
  kern_cpu_rp_pack(j->type, j->src, j->rows, j->cols, j->dst, begin, end);
}

/* Hands the pages wholly inside [p, p + bytes) back to the kernel: the
 * source of a repacked weight, no longer read by the matmul. MADV_PAGEOUT
 * keeps the contents (a file's pages are read again when the view is, an
 * anonymous copy stays), so it is safe whatever the bytes are. */
static void drop_source(const void *p, size_t bytes) {
#ifdef MADV_PAGEOUT
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = ((uintptr_t)p + page - 1) & ~(page - 1),
                  b = ((uintptr_t)p + bytes) & ~(page - 1);
  if (b > a) (void)madvise((void *)a, b - a, MADV_PAGEOUT);
#else
  (void)p, (void)bytes;
#endif
}

static int rp_pack(kern_backend_t *be, kern_weight_t *w) {
#ifdef KERN_CPU_AVX2
  if (be->precision != KERN_PRECISION_FAST || !kern_cpu(be)->repack || !kern_cpu_rp_supported(w->type, w->cols))
    return 0;
  const size_t bytes = kern_cpu_rp_bytes(w->type, w->rows, w->cols);
  uint8_t *dst = be->alloc(be, bytes);
  if (!dst) {
    log_error("weight_init: out of memory for the repacked %s weight %lld x %lld (%zu bytes)", kern_type_name(w->type),
              (long long)w->rows, (long long)w->cols, bytes);
    return -ENOMEM;
  }
  pack_job_t j = {w->type, w->impl, w->rows, w->cols, dst};
  kern_pool_for(kern_cpu(be)->pool, (w->rows + KERN_CPU_RP_ROWS - 1) / KERN_CPU_RP_ROWS, 0, pack_task, &j);
  w->packed = dst;
  be->packed_bytes += (int64_t)bytes;
  drop_source(w->impl, (size_t)(w->rows * kern_type_row_bytes(w->type, w->cols)));
#else
  (void)be, (void)w;
#endif
  return 0;
}

int kern_cpu__rp_weight_init(kern_backend_t *be, kern_weight_t *w) {
  w->packed = NULL;
  return w->lazy ? 0 : rp_pack(be, w);
}

void kern_cpu__rp_weight_use(kern_backend_t *be, kern_weight_t *w) {
  if (!w->lazy) return;
  w->lazy = 0;
  if (rp_pack(be, w) != 0) /* logged; the fast kernels read the view instead: the same bits */
    w->packed = NULL;
}

void kern_cpu__rp_weight_release(kern_backend_t *be, kern_weight_t *w) {
#ifdef KERN_CPU_AVX2
  if (w->packed) be->packed_bytes -= (int64_t)kern_cpu_rp_bytes(w->type, w->rows, w->cols);
#endif
  be->free(be, w->packed);
  w->packed = NULL;
}

#ifdef KERN_CPU_AVX2
typedef struct {
  float *y;
  const float *x;
  kern_cpu_q8a_t *xq; /* [n, nb] */
  kern_cpu_q8s_t *xs; /* [n, nb] (all types but Q8_0) */
  const uint8_t *packed;
  kern_type_t type;
  int64_t rows, cols, nb, panel_bytes, n_panels;
  int n, rb_rows;
} rp_job_t;

static void quantize_task(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const rp_job_t *j = ctx;
  for (int64_t i = begin; i < end; i++) {
    kern_cpu_q8_quantize_row(j->x + i * j->cols, j->xq + i * j->nb, j->cols);
    if (j->xs) kern_cpu_q8_split(j->xq + i * j->nb, j->xs + i * j->nb, j->nb);
  }
}

/* Rows [r, r1) of the job against panels p0 .. p0 + np - 1 (np 1 or 2)
 * by the R-row tiles. */
static void tiles(const rp_job_t *j, int r, int r1, int64_t p0, int np) {
  for (int64_t p = p0; p < p0 + np; p++) {
    const int64_t c0 = p * KERN_CPU_RP_ROWS;
    const int ncols = j->rows - c0 < KERN_CPU_RP_ROWS ? (int)(j->rows - c0) : KERN_CPU_RP_ROWS;
    for (int rr = r; rr < r1; rr += RP_R) {
      const int R = r1 - rr < RP_R ? r1 - rr : RP_R;
      const int64_t q = (int64_t)rr * j->nb;
      const int ok = kern_cpu__rp_tile_avx2(j->type, R, j->xq + q, j->xs ? j->xs + q : NULL, j->nb,
                                            j->packed + p * j->panel_bytes, j->cols, j->y + (int64_t)rr * j->rows + c0,
                                            j->rows, ncols);
      (void)ok; /* kern_cpu__rp_weight_init repacks only the types with a kernel */
    }
  }
}

/* Work item: (row block, pair of panels). Pairs of rows against both
 * panels take the register-blocked kernel where the type has one; the
 * rest (an odd last row, a lone last panel, other types) the tiles. */
static void mm_task(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const rp_job_t *j = ctx;
  const int64_t n_pairs = (j->n_panels + 1) / 2;
  for (int64_t item = begin; item < end; item++) {
    const int64_t rb = item / n_pairs, p0 = 2 * (item % n_pairs), c0 = p0 * KERN_CPU_RP_ROWS;
    const int np = j->n_panels - p0 < 2 ? 1 : 2;
    const int r0 = (int)rb * j->rb_rows, r1 = r0 + j->rb_rows < j->n ? r0 + j->rb_rows : j->n;
    int r = r0;
    if (np == 2) {
      const int ncols = j->rows - c0 < 2 * KERN_CPU_RP_ROWS ? (int)(j->rows - c0) : 2 * KERN_CPU_RP_ROWS;
      for (; r + 2 <= r1; r += 2) {
        const int64_t q = (int64_t)r * j->nb;
        if (!kern_cpu__rp_block_avx2(j->type, j->xq + q, j->xs ? j->xs + q : NULL, j->nb,
                                     j->packed + p0 * j->panel_bytes, j->cols, j->y + (int64_t)r * j->rows + c0,
                                     j->rows, ncols))
          break; /* no blocked kernel for this type */
      }
    }
    tiles(j, r, r1, p0, np);
  }
}
#endif

void kern_cpu__matmul_rp(kern_backend_t *be, float *y, const float *x, const kern_weight_t *w, int n) {
#ifdef KERN_CPU_AVX2
  kern_cpu_t *cpu = kern_cpu(be);
  rp_job_t j = {.y = y, .x = x, .packed = w->packed, .type = w->type, .rows = w->rows, .cols = w->cols, .n = n};
  j.nb = w->cols / 32;
  j.panel_bytes = kern_cpu_rp_panel_bytes(w->type, w->cols);
  j.n_panels = (w->rows + KERN_CPU_RP_ROWS - 1) / KERN_CPU_RP_ROWS;
  int64_t xblock = RP_XBYTES / (j.nb * (int64_t)sizeof(kern_cpu_q8s_t));
  xblock = xblock > RP_XBLOCK ? RP_XBLOCK : xblock < 8 ? 8 : xblock;
  const int64_t n_blocks = (n + xblock - 1) / xblock;
  j.rb_rows = (int)((n + n_blocks - 1) / n_blocks); /* blocks of (nearly) equal sizes */
  j.rb_rows += j.rb_rows % 2 && j.rb_rows < n; /* whole pairs of rows for the blocked kernel */
  const int64_t n_rb = (n + j.rb_rows - 1) / j.rb_rows;
  const size_t xq_bytes = ((size_t)n * (size_t)j.nb * sizeof(kern_cpu_q8a_t) + 63) & ~(size_t)63;
  const size_t xs_bytes = w->type == KERN_Q8_0 ? 0 : (size_t)n * (size_t)j.nb * sizeof(kern_cpu_q8s_t);
  uint8_t *scratch = kern_cpu_scratch(cpu, xq_bytes + xs_bytes + 64);
  scratch = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
  j.xq = (kern_cpu_q8a_t *)scratch;
  j.xs = xs_bytes ? (kern_cpu_q8s_t *)(scratch + xq_bytes) : NULL;
  if (n >= 2 * RP_QGRAIN) kern_pool_for(cpu->pool, n, RP_QGRAIN, quantize_task, &j);
  else quantize_task(&j, 0, n, 0);
  kern_pool_for(cpu->pool, n_rb * ((j.n_panels + 1) / 2), 0, mm_task, &j);
#else
  (void)be, (void)y, (void)x, (void)w, (void)n;
  abort(); /* nothing is repacked without AVX2 */
#endif
}
