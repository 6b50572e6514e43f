/* kernels/cpu/matmul_q8.c — the fast (integer activation) matmul:
 * activation quantization, the portable kernel and the threaded driver (see
 * matmul_q8.h; the AVX2 tiles are in matmul_q8_avx2.c, the AVX-512 tiles
 * and packed panels in matmul_q8_avx512.c).
 *
 * Work split. The activations are quantized once per call (rows in
 * parallel when there are many), then the weight rows form panels of
 * Q8_PANEL rows and the activation rows row blocks of at most Q8_XBLOCK
 * rows; one work item is (row block, panel). A thread runs every row of its
 * block against its panel over the whole width, either in register tiles
 * (up to 4 activation rows × Q8_TILE_C weight rows, straight from the
 * stored weights) or, with AVX-512 and at least Q8_PACK_MIN rows, by
 * unpacking the panel once into its own scratch and running 8 rows at a
 * time against it. Each output is one kernel call's and every kernel
 * follows matmul_q8.h's arithmetic, so which one runs does not change a
 * bit. */
#include "kernels/cpu/matmul_q8.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/matmul_tile.h"
#include "kernels/quant_blocks.h"

#define Q8_PANEL 16   /* weight rows per work item (a multiple of the tile widths) */
#define Q8_XBLOCK 64  /* activation rows per row block */
#define Q8_QGRAIN 16  /* activation rows per quantization work item */
#define Q8_PACK_MIN 10 /* activation rows from which AVX-512 packs panels (the
                           unpacking, ~4 ns per weight row and block, pays
                           from about 10 rows: docs/benchmarks/precision.md) */

/* Weight rows per register tile (<= 4 for the AVX2 tiles' register file;
 * AVX-512: 8 = four 512-bit pairs, but 4 for one row, whose weight streams
 * from memory better four rows at a time), a divisor of Q8_PANEL. */
#ifdef KERN_CPU_AVX512
#ifndef Q8_TILE_C1
#define Q8_TILE_C1 4
#endif
#define Q8_TILE_C(R) ((R) == 1 ? Q8_TILE_C1 : 8)
#else
#define Q8_TILE_C(R) ((R) <= 2 ? 4 : 2)
#endif

int kern_cpu_q8_supported(kern_type_t type, int64_t cols) {
  if (cols <= 0 || cols % 32 != 0) return 0;
  switch (type) {
  case KERN_Q4_0: case KERN_Q4_1: case KERN_Q5_0: case KERN_Q5_1: case KERN_Q8_0:
  case KERN_Q4_K: case KERN_Q5_K: case KERN_Q6_K: case KERN_MXFP4:
    return 1;
  default:
    return 0;
  }
}

void kern_cpu_q8_quantize_row_scalar(const float *x, kern_cpu_q8a_t *out, int64_t cols) {
  for (int64_t b = 0; b < cols / 32; b++, x += 32, out++) {
    float amax = 0.0f;
    for (int e = 0; e < 32; e++) {
      float v = fabsf(x[e]);
      amax = v > amax ? v : amax; /* as vmaxps(v, amax): a NaN is skipped */
    }
    if (!(amax >= FLT_MIN && amax <= FLT_MAX)) {
      memset(out, 0, sizeof *out);
      continue;
    }
    float id = 32767.0f / amax;
    int sum = 0;
    for (int e = 0; e < 32; e++) {
      float t = x[e] * id;
      t = t > -32767.0f ? t : -32767.0f; /* vmaxps: NaN -> -32767 */
      t = t < 32767.0f ? t : 32767.0f;
      int q = (int)nearbyintf(t);
      out->q[e] = (int16_t)q;
      sum += q;
    }
    out->d = amax / 32767.0f;
    out->s = out->d * (float)sum;
  }
}

void kern_cpu_q8_quantize_row(const float *x, kern_cpu_q8a_t *out, int64_t cols) {
#ifdef KERN_CPU_AVX2
  kern_cpu__q8_quantize_row_avx2(x, out, cols);
#else
  kern_cpu_q8_quantize_row_scalar(x, out, cols);
#endif
}

void kern_cpu_q8_split_scalar(const kern_cpu_q8a_t *in, kern_cpu_q8s_t *out, int64_t nb) {
  for (int64_t b = 0; b < nb; b++, in++, out++) {
    int32_t sum[2] = {0, 0};
    for (int e = 0; e < 32; e++) {
      const int q = in->q[e];
      out->l[e] = (uint8_t)(q & 255);
      out->h[e] = (int8_t)((q - (q & 255)) / 256);
      sum[e >> 4] += q;
    }
    out->d = in->d;
    out->s = in->s;
    out->qsum[0] = sum[0];
    out->qsum[1] = sum[1];
  }
}

void kern_cpu_q8_split(const kern_cpu_q8a_t *in, kern_cpu_q8s_t *out, int64_t nb) {
#ifdef KERN_CPU_AVX2
  kern_cpu__q8_split_avx2(in, out, nb);
#else
  kern_cpu_q8_split_scalar(in, out, nb);
#endif
}

static float h2f(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return kern_cpu_f16_to_f32(h);
}

/* Unit u of a weight row as in matmul_q8.h: w[32], dw, mw, and the Q6_K
 * sub-scales sc[2] (1 for the other types). */
static void unit_scalar(kern_type_t type, const uint8_t *row, int64_t u, int w[32], float *dw, float *mw, int sc[2]) {
  sc[0] = sc[1] = 1;
  *mw = 0.0f;
  if (type == KERN_Q4_K || type == KERN_Q5_K || type == KERN_Q6_K) {
    int s = (int)(u % 8);
    const uint8_t *p = row + (u / 8) * kern_type_block_bytes(type);
    if (type == KERN_Q6_K) {
      int half = s >> 2, j = s & 3;
      const uint8_t *ql = p + 64 * half + 32 * (j & 1), *qh = p + 128 + 32 * half;
      for (int e = 0; e < 32; e++) w[e] = (((ql[e] >> (4 * (j >> 1))) & 15) | ((qh[e] >> (2 * j)) & 3) << 4) - 32;
      sc[0] = (int8_t)p[192 + 8 * half + 2 * j];
      sc[1] = (int8_t)p[192 + 8 * half + 2 * j + 1];
      *dw = h2f(p + 208);
      return;
    }
    int scale, min;
    kern_cpu__k_scale_min(p + 4, s, &scale, &min);
    *dw = h2f(p) * (float)scale;
    *mw = -(h2f(p + 2) * (float)min);
    const uint8_t *qs = p + (type == KERN_Q4_K ? 16 : 48) + 32 * (s >> 1);
    for (int e = 0; e < 32; e++) {
      w[e] = (qs[e] >> (4 * (s & 1))) & 15;
      if (type == KERN_Q5_K) w[e] |= ((p[16 + e] >> s) & 1) << 4;
    }
    return;
  }
  const uint8_t *p = row + u * kern_type_block_bytes(type);
  if (type == KERN_MXFP4) {
    *dw = kern_cpu_e8m0_half(p[0]);
    for (int e = 0; e < 16; e++) {
      w[e] = kern_cpu__mxfp4_values[p[1 + e] & 15];
      w[e + 16] = kern_cpu__mxfp4_values[p[1 + e] >> 4];
    }
    return;
  }
  *dw = h2f(p);
  switch (type) {
  case KERN_Q4_0:
  case KERN_Q4_1: {
    const uint8_t *qs = p + (type == KERN_Q4_0 ? 2 : 4);
    for (int e = 0; e < 16; e++) {
      w[e] = qs[e] & 15;
      w[e + 16] = qs[e] >> 4;
    }
    break;
  }
  case KERN_Q5_0: kern_cpu__q5_ints_scalar(p + 2, p + 6, w); break;
  case KERN_Q5_1: kern_cpu__q5_ints_scalar(p + 4, p + 8, w); break;
  default: /* Q8_0 */
    for (int e = 0; e < 32; e++) w[e] = (int8_t)p[2 + e];
    break;
  }
  int off = type == KERN_Q4_0 ? 8 : type == KERN_Q5_0 ? 16 : 0;
  for (int e = 0; e < 32; e++) w[e] -= off;
  if (type == KERN_Q4_1 || type == KERN_Q5_1) *mw = h2f(p + 2);
}

float kern_cpu__q8_dot_scalar(kern_type_t type, const uint8_t *wrow, const kern_cpu_q8a_t *xq, int64_t cols) {
  float acc = 0.0f, off = 0.0f, dw, mw;
  int w[32], sc[2];
  const int units = type == KERN_Q6_K ? 2 : 1, len = 32 / units;
  for (int64_t u = 0; u < cols / 32; u++) {
    unit_scalar(type, wrow, u, w, &dw, &mw, sc);
    for (int h = 0; h < units; h++) {
      int32_t isum = 0;
      for (int e = h * len; e < (h + 1) * len; e++) isum += w[e] * xq[u].q[e];
      float dwh = units == 2 ? dw * (float)sc[h] : dw;
      acc = fmaf(dwh * xq[u].d, (float)isum, acc);
    }
    off = fmaf(mw, xq[u].s, off);
  }
  return acc + off;
}

typedef struct {
  float *y;
  const float *x;
  kern_cpu_q8a_t *xq; /* [n, nb] */
  const uint8_t *wd;
  kern_type_t type;
  int64_t rows, cols, nb, row_bytes, n_panels;
  int n, rb_rows;
  uint8_t *panels;    /* packed panels, one per thread (NULL: tiles only) */
  size_t panel_bytes;
} q8_job_t;

static void quantize_task(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const q8_job_t *j = ctx;
  for (int64_t i = begin; i < end; i++) kern_cpu_q8_quantize_row(j->x + i * j->cols, j->xq + i * j->nb, j->cols);
}

/* Outputs of rows [r0, r0 + R) × weight rows [c0, c0 + C). */
static void tile(const q8_job_t *j, int r0, int R, int64_t c0, int C) {
  const kern_cpu_q8a_t *xq = j->xq + r0 * j->nb;
  const uint8_t *w = j->wd + c0 * j->row_bytes;
  float *y = j->y + (int64_t)r0 * j->rows + c0;
#ifdef KERN_CPU_AVX512
  if (kern_cpu__q8_tile_avx512(j->type, R, C, xq, j->nb, w, j->row_bytes, j->cols, y, j->rows)) return;
#endif
#ifdef KERN_CPU_AVX2
  if (kern_cpu__q8_tile_avx2(j->type, R, C, xq, j->nb, w, j->row_bytes, j->cols, y, j->rows)) return;
#endif
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++)
      y[r * j->rows + c] = kern_cpu__q8_dot_scalar(j->type, w + c * j->row_bytes, xq + r * j->nb, j->cols);
}

/* Rows [r0, r1) × weight rows [c0, c1) through the thread's packed panel;
 * 0 when there is none or the type has no packed kernel. */
static int packed_item(const q8_job_t *j, int r0, int r1, int64_t c0, int64_t c1, int tid) {
#ifdef KERN_CPU_AVX512
  if (!j->panels) return 0;
  uint8_t *panel = j->panels + (size_t)tid * j->panel_bytes;
  if (!kern_cpu__q8_pack_avx512(j->type, j->wd + c0 * j->row_bytes, j->row_bytes, j->cols, (int)(c1 - c0), panel))
    return 0;
  for (int r = r0; r < r1; r += 8)
    kern_cpu__q8_packed_avx512(j->type, r1 - r < 8 ? r1 - r : 8, j->xq + r * j->nb, j->nb, panel, j->cols,
                               (int)(c1 - c0), j->y + (int64_t)r * j->rows + c0, j->rows);
  return 1;
#else
  (void)j, (void)r0, (void)r1, (void)c0, (void)c1, (void)tid;
  return 0;
#endif
}

static void mm_task(void *ctx, int64_t begin, int64_t end, int tid) {
  const q8_job_t *j = ctx;
  for (int64_t item = begin; item < end; item++) {
    int64_t rb = item / j->n_panels, c0 = item % j->n_panels * Q8_PANEL;
    int r0 = (int)rb * j->rb_rows, r1 = r0 + j->rb_rows < j->n ? r0 + j->rb_rows : j->n;
    int64_t c1 = c0 + Q8_PANEL < j->rows ? c0 + Q8_PANEL : j->rows;
    if (packed_item(j, r0, r1, c0, c1, tid)) continue;
    for (int r = r0; r < r1; r += 4) {
      int R = r1 - r < 4 ? r1 - r : 4, cstep = Q8_TILE_C(R);
      for (int64_t c = c0; c < c1; c += cstep) tile(j, r, R, c, c1 - c < cstep ? (int)(c1 - c) : cstep);
    }
  }
}

void kern_cpu_matmul_q8(kern_backend_t *be, float *y, const float *x, const kern_weight_t *w, int n) {
  if (n <= 0) return;
  if (w->packed) {
    kern_cpu__matmul_rp(be, y, x, w, n);
    return;
  }
  kern_cpu_t *cpu = kern_cpu(be);
  q8_job_t j = {.y = y, .x = x, .wd = w->impl, .type = w->type, .rows = w->rows, .cols = w->cols, .n = n};
  j.nb = w->cols / 32;
  j.row_bytes = kern_type_row_bytes(w->type, w->cols);
  j.n_panels = (w->rows + Q8_PANEL - 1) / Q8_PANEL;
  int64_t n_rb = (n + Q8_XBLOCK - 1) / Q8_XBLOCK;
  j.rb_rows = (int)((n + n_rb - 1) / n_rb);
  size_t xq_bytes = ((size_t)n * (size_t)j.nb * sizeof(kern_cpu_q8a_t) + 63) & ~(size_t)63;
#ifdef KERN_CPU_AVX512
  if (n >= Q8_PACK_MIN) j.panel_bytes = kern_cpu__q8_panel_bytes(w->cols);
#endif
  uint8_t *scratch = kern_cpu_scratch(cpu, xq_bytes + (size_t)cpu->n_threads * j.panel_bytes + 64);
  scratch = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
  j.xq = (kern_cpu_q8a_t *)scratch;
  j.panels = j.panel_bytes ? scratch + xq_bytes : NULL;
  if (n >= 2 * Q8_QGRAIN) kern_pool_for(cpu->pool, n, Q8_QGRAIN, quantize_task, &j);
  else quantize_task(&j, 0, n, 0);
  kern_pool_for(cpu->pool, n_rb * j.n_panels, 0, mm_task, &j);
}

void kern_cpu_matmul_q8_ref(float *y, const float *x, const kern_weight_t *w, int n) {
  int64_t nb = w->cols / 32, row_bytes = kern_type_row_bytes(w->type, w->cols);
  kern_cpu_q8a_t *xq = xmalloc((size_t)nb * sizeof *xq);
  for (int i = 0; i < n; i++) {
    kern_cpu_q8_quantize_row_scalar(x + (int64_t)i * w->cols, xq, w->cols);
    for (int64_t c = 0; c < w->rows; c++)
      y[(int64_t)i * w->rows + c] = kern_cpu__q8_dot_scalar(w->type, (const uint8_t *)w->impl + c * row_bytes, xq, w->cols);
  }
  free(xq);
}
