/* kernels/cpu/matmul.c — weights and the matmul driver (see matmul_cpu.h).
 *
 * Work split. The weight rows form panels of KERN_CPU_MM_PANEL rows; the
 * activation rows form row blocks small enough to stay in L2 (MM_XBLOCK_BYTES).
 * One work item is (row block, panel), numbered row-block-major, handed out
 * by the pool: a thread dequantizes its panel into its own slice of the
 * backend scratch, then multiplies every row of the block by it, two rows
 * by half a panel at a time, K in chunks of up to MM_KC_MAX so that the operands stay
 * in L1 (the lanes of the outputs wait in the scratch between chunks). With one row block (decode steps) every weight byte is read
 * exactly once per call, whatever n. */
#include "kernels/cpu/matmul_cpu.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/matmul_q8.h"
#include "kernels/cpu/matmul_tile.h"

#define MM_XBLOCK_BYTES (256 * 1024)
/* At most this many rows per block (bounds the per-thread lane state). */
#define MM_XBLOCK_ROWS 256
/* Longest K chunk: a chunk of half a panel (6 rows) and of two activation
 * rows, at most 20 KiB, stays in L1 while the tiles walk down the row block.
 * K is cut in equal chunks (multiples of 8) no longer than this. */
#define MM_KC_MAX 640

int kern_cpu_weight_init(kern_backend_t *be, kern_weight_t *w, kern_type_t type, int64_t rows, int64_t cols,
                         const void *data) {
  const char *name = kern_type_name(type);
  if (!kern_type_is_weight(type)) {
    log_error("weight_init: type %s (%d) is not a weight type the CPU backend computes with",
              name ? name : "unknown", (int)type);
    return -EINVAL;
  }
  int64_t row_bytes = kern_type_row_bytes(type, cols);
  if (rows <= 0 || cols <= 0 || row_bytes < 0 || rows > INT64_MAX / row_bytes || cols > INT32_MAX) {
    log_error("weight_init: bad %s shape %lld x %lld (block of %lld elements)", name, (long long)rows,
              (long long)cols, (long long)kern_type_block_elems(type));
    return -EINVAL;
  }
  if (!data) {
    log_error("weight_init: no data for a %s weight %lld x %lld", name, (long long)rows, (long long)cols);
    return -EINVAL;
  }
  w->type = type;
  w->rows = rows;
  w->cols = cols;
  w->impl = (void *)data; /* a view: the caller keeps the data valid */
  return kern_cpu__rp_weight_init(be, w); /* the fast path's panels, if any */
}

void kern_cpu_weight_use(kern_backend_t *be, kern_weight_t *w) { kern_cpu__rp_weight_use(be, w); }

void kern_cpu_weight_release(kern_backend_t *be, kern_weight_t *w) {
  kern_cpu__rp_weight_release(be, w);
  w->impl = NULL;
}

void kern_cpu__mm_tile_scalar(int R, int C, const float *x, int64_t ldx, const float *w, int64_t ldw, int64_t k0,
                              int64_t k1, float *acc, int64_t ldacc, float *out) {
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) {
      float *a = acc + r * ldacc + 8 * c;
      if (k0 == 0)
        for (int l = 0; l < 8; l++) a[l] = 0.0f;
      const float *xr = x + r * ldx, *wr = w + c * ldw;
      for (int64_t k = k0; k < k1; k += 8)
        for (int l = 0; l < 8; l++) a[l] = fmaf(wr[k + l], xr[k + l], a[l]);
      if (out) out[r * KERN_CPU_MM_PANEL + c] = kern_cpu__mm_hsum(a);
    }
}

static inline void run_tile(int R, int C, const float *x, int64_t ldx, const float *w, int64_t ldw, int64_t k0,
                            int64_t k1, float *acc, int64_t ldacc, float *out) {
#ifdef KERN_CPU_AVX2
  kern_cpu__mm_tile_avx2(R, C, x, ldx, w, ldw, k0, k1, acc, ldacc, out);
#else
  kern_cpu__mm_tile_scalar(R, C, x, ldx, w, ldw, k0, k1, acc, ldacc, out);
#endif
}

typedef struct {
  float *y;          /* [n, rows] */
  const float *x;    /* [n, ldx], zero-padded to kp when cols < kp */
  int64_t ldx;       /* floats between activation rows */
  const uint8_t *wd; /* [rows, row_bytes] the weight as stored */
  kern_type_t type;
  int64_t rows, cols, kp, row_bytes;
  int n;
  int rb_rows;       /* activation rows per row block */
  int64_t n_panels;
  int64_t kc;        /* K chunk */
  float *scratch;    /* per thread: panel [PANEL, kp], then lanes [rb_rows, PANEL, 8] */
  int64_t per_thread; /* floats of scratch per thread */
} mm_job_t;

/* Dequantizes weight rows [c0, c0 + PANEL) into panel [PANEL, kp]; rows past
 * the end and the padding columns are zero. */
static void load_panel(const mm_job_t *j, int64_t c0, float *panel) {
  for (int c = 0; c < KERN_CPU_MM_PANEL; c++) {
    float *dst = panel + c * j->kp;
    if (c0 + c < j->rows) {
      kern_cpu_dequant_row(j->type, j->wd + (c0 + c) * j->row_bytes, dst, j->cols);
      memset(dst + j->cols, 0, (size_t)(j->kp - j->cols) * sizeof(float));
    } else {
      memset(dst, 0, (size_t)j->kp * sizeof(float));
    }
  }
}

/* y rows [r0, r1) × panel columns [c0, c0 + PANEL), keeping the valid ones:
 * K chunk by K chunk, two rows and half a panel per tile, the lanes of
 * every output in `lanes` [r1 - r0, PANEL, 8] until the last chunk. */
static void panel_rows(const mm_job_t *j, const float *panel, float *lanes, int64_t c0, int r0, int r1) {
  const int P = KERN_CPU_MM_PANEL, H = KERN_CPU_MM_PANEL / 2;
  int valid = j->rows - c0 < P ? (int)(j->rows - c0) : P;
  float out[2 * KERN_CPU_MM_PANEL];
  for (int64_t k0 = 0; k0 < j->kp; k0 += j->kc) {
    int64_t k1 = k0 + j->kc < j->kp ? k0 + j->kc : j->kp;
    for (int r = r0; r < r1; r += 2) {
      int R = r1 - r >= 2 ? 2 : 1;
      const float *x = j->x + (int64_t)r * j->ldx;
      float *st = lanes + (int64_t)(r - r0) * P * 8;
      for (int h = 0; h < valid; h += H)
        run_tile(R, H, x, j->ldx, panel + h * j->kp, j->kp, k0, k1, st + 8 * h, P * 8, k1 == j->kp ? out + h : NULL);
      if (k1 == j->kp)
        for (int i = 0; i < R; i++) memcpy(j->y + (int64_t)(r + i) * j->rows + c0, out + i * P, (size_t)valid * sizeof(float));
    }
  }
}

/* The fused tiles for all j->n (<= 2) rows of a full panel; 0 if none. */
static int fused_rows(const mm_job_t *j, int64_t c0) {
#ifdef KERN_CPU_AVX2
  const int P = KERN_CPU_MM_PANEL;
  if (j->n > 2 || c0 + P > j->rows) return 0;
  float out[2 * KERN_CPU_MM_PANEL];
  const uint8_t *w = j->wd + c0 * j->row_bytes;
  if (!kern_cpu__mm_fused_avx2(j->type, j->n, j->x, j->ldx, w, j->row_bytes, j->cols, out)) return 0;
  for (int i = 0; i < j->n; i++) memcpy(j->y + (int64_t)i * j->rows + c0, out + i * P, (size_t)P * sizeof(float));
  return 1;
#else
  (void)j;
  (void)c0;
  return 0;
#endif
}

static void mm_task(void *ctx, int64_t begin, int64_t end, int tid) {
  const mm_job_t *j = ctx;
  float *panel = j->scratch + tid * j->per_thread, *lanes = panel + KERN_CPU_MM_PANEL * j->kp;
  for (int64_t item = begin; item < end; item++) {
    int64_t rb = item / j->n_panels, p = item % j->n_panels;
    int64_t c0 = p * KERN_CPU_MM_PANEL;
    if (fused_rows(j, c0)) continue;
    int r0 = (int)rb * j->rb_rows;
    int r1 = r0 + j->rb_rows < j->n ? r0 + j->rb_rows : j->n;
    load_panel(j, c0, panel);
    panel_rows(j, panel, lanes, c0, r0, r1);
  }
}

void kern_cpu_matmul(kern_backend_t *be, float *y, const float *x, const kern_weight_t *w, int n) {
  if (n <= 0) return;
  if (be->precision == KERN_PRECISION_FAST && kern_cpu_q8_supported(w->type, w->cols)) {
    kern_cpu_matmul_q8(be, y, x, w, n);
    return;
  }
  kern_cpu_t *cpu = kern_cpu(be);
  mm_job_t j = {.y = y, .x = x, .wd = w->impl, .type = w->type, .rows = w->rows, .cols = w->cols, .n = n};
  j.kp = (w->cols + 7) / 8 * 8;
  j.row_bytes = kern_type_row_bytes(w->type, w->cols);
  j.n_panels = (w->rows + KERN_CPU_MM_PANEL - 1) / KERN_CPU_MM_PANEL;
  int64_t n_kc = (j.kp + MM_KC_MAX - 1) / MM_KC_MAX;
  j.kc = (j.kp / n_kc + 7) / 8 * 8;
  int64_t rb_max = MM_XBLOCK_BYTES / (j.kp * (int64_t)sizeof(float));
  rb_max = rb_max < 2 ? 2 : rb_max > MM_XBLOCK_ROWS ? MM_XBLOCK_ROWS : rb_max;
  int64_t n_rb = (n + rb_max - 1) / rb_max;
  j.rb_rows = (int)((n + n_rb - 1) / n_rb);
  j.per_thread = KERN_CPU_MM_PANEL * (j.kp + 8 * (int64_t)j.rb_rows);
  size_t xpad = j.kp != w->cols ? (size_t)n * (size_t)j.kp : 0;
  float *scratch = kern_cpu_scratch(cpu, (xpad + (size_t)cpu->n_threads * (size_t)j.per_thread) * sizeof(float));
  j.scratch = scratch + xpad;
  j.ldx = w->cols;
  if (xpad) { /* only float weights can have cols % 8 != 0 */
    for (int i = 0; i < n; i++) {
      memcpy(scratch + (size_t)i * j.kp, x + (size_t)i * w->cols, (size_t)w->cols * sizeof(float));
      memset(scratch + (size_t)i * j.kp + w->cols, 0, (size_t)(j.kp - w->cols) * sizeof(float));
    }
    j.x = scratch;
    j.ldx = j.kp;
  }
  kern_pool_for(cpu->pool, n_rb * j.n_panels, 0, mm_task, &j);
}

void kern_cpu_matmul_ref(float *y, const float *x, const kern_weight_t *w, int n) {
  int64_t kp = (w->cols + 7) / 8 * 8, row_bytes = kern_type_row_bytes(w->type, w->cols);
  float *wr = xcalloc((size_t)kp, sizeof(float)), *xr = xcalloc((size_t)kp, sizeof(float)), lanes[8];
  for (int64_t c = 0; c < w->rows; c++) {
    kern_cpu_dequant_row_scalar(w->type, (const uint8_t *)w->impl + c * row_bytes, wr, w->cols);
    for (int i = 0; i < n; i++) {
      memcpy(xr, x + (int64_t)i * w->cols, (size_t)w->cols * sizeof(float));
      float out;
      kern_cpu__mm_tile_scalar(1, 1, xr, kp, wr, kp, 0, kp, lanes, 8, &out);
      y[(int64_t)i * w->rows + c] = out;
    }
  }
  free(wr);
  free(xr);
}
