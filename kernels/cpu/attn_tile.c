/* kernels/cpu/attn_tile.c — the inner routine every CPU attention kernel
 * shares: one query vector against one tile of keys, and the merges that fold
 * tiles and segments (see attn_cpu.h for the scheme).
 *
 * Each arithmetic expression here is compiled exactly once (these functions
 * are called, not inlined, by the kernels), so the bits of a row cannot
 * depend on which kernel or code path computed it. The AVX2/FMA path needs
 * head_dim to be a multiple of 8; other sizes, and machines without AVX2, use
 * the scalar routine (consistent with itself, not with the SIMD one). */
#include <math.h>
#include <string.h>

#include "kernels/cpu/attn_cpu.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define ATTN_SIMD 1
#else
#define ATTN_SIMD 0
#endif

void kern_cpu__attn_empty(float *st, int head_dim) {
  memset(st, 0, (size_t)head_dim * sizeof *st);
  st[head_dim] = -INFINITY;
  st[head_dim + 1] = 0.0f;
}

/* The portable tile: same contract as kern_cpu__attn_tile. */
/* Gemma 2's soft-capping of one score (softcap > 0). */
static inline float soft_cap(float s, float softcap) { return softcap * tanhf(s / softcap); }

static void tile_scalar(const float *q, const float *const *krows, const float *const *vrows,
                        int kv_off, int first, int n, int hd, float scale, float softcap, float *part) {
  float p[KERN_ATTN_TILE];
  float m = -INFINITY;
  for (int j = first; j < n; j++) {
    const float *k = krows[j] + kv_off;
    float dot = 0.0f;
    for (int d = 0; d < hd; d++) dot = fmaf(q[d], k[d], dot);
    p[j] = dot * scale;
    if (softcap > 0) p[j] = soft_cap(p[j], softcap);
    if (p[j] > m) m = p[j];
  }
  float l = 0.0f;
  for (int j = first; j < n; j++) {
    p[j] = expf(p[j] - m);
    l += p[j];
  }
  for (int d = 0; d < hd; d++) part[d] = 0.0f;
  for (int j = first; j < n; j++) {
    const float *v = vrows[j] + kv_off;
    for (int d = 0; d < hd; d++) part[d] = fmaf(p[j], v[d], part[d]);
  }
  part[hd] = m;
  part[hd + 1] = l;
}

#if ATTN_SIMD
/* exp(x) for x <= 0 (Cephes' single-precision polynomial, ~1 ulp); inputs
 * below about -87.3, -inf included, give 0. Not ops.c's exp8: that one
 * follows kern_cpu_expf's clamp to [-87.34, 88], which maps a masked key's
 * -inf to 1.2e-38 instead of the 0 that attention needs. */
static inline __m256 exp8(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-88.0f));
  __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), x);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
  /* 2^fx; fx = -127 builds the bit pattern of +0 */
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

/* [sum(a0), ..., sum(a7)]: every lane summed with the same tree. */
static inline __m256 hsum8x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5,
                             __m256 a6, __m256 a7) {
  __m256 t0 = _mm256_hadd_ps(a0, a1), t1 = _mm256_hadd_ps(a2, a3);
  __m256 t2 = _mm256_hadd_ps(a4, a5), t3 = _mm256_hadd_ps(a6, a7);
  __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

static inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static inline float hmax8(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* acc[0..w*8) += sum_{j0 <= j < j1} p[j] * v_j[0..w*8), v_j = vrows[j] + off,
 * w <= 8, starting from zeros when `init`. Every element is one FMA chain
 * over j in order, however the keys are split into calls and whatever w is. */
static inline void accumulate_v(float *acc, const float *p, const float *const *vrows, int off, int j0, int j1,
                                int w, int init) {
  if (w == 8) {
    __m256 a0, a1, a2, a3, a4, a5, a6, a7;
    if (init) {
      a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = _mm256_setzero_ps();
    } else {
      a0 = _mm256_loadu_ps(acc + 0), a1 = _mm256_loadu_ps(acc + 8), a2 = _mm256_loadu_ps(acc + 16);
      a3 = _mm256_loadu_ps(acc + 24), a4 = _mm256_loadu_ps(acc + 32), a5 = _mm256_loadu_ps(acc + 40);
      a6 = _mm256_loadu_ps(acc + 48), a7 = _mm256_loadu_ps(acc + 56);
    }
    for (int j = j0; j < j1; j++) {
      const float *v = vrows[j] + off;
      __m256 pj = _mm256_broadcast_ss(&p[j]);
      a0 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 0), a0);
      a1 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 8), a1);
      a2 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 16), a2);
      a3 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 24), a3);
      a4 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 32), a4);
      a5 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 40), a5);
      a6 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 48), a6);
      a7 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 56), a7);
    }
    _mm256_storeu_ps(acc + 0, a0);
    _mm256_storeu_ps(acc + 8, a1);
    _mm256_storeu_ps(acc + 16, a2);
    _mm256_storeu_ps(acc + 24, a3);
    _mm256_storeu_ps(acc + 32, a4);
    _mm256_storeu_ps(acc + 40, a5);
    _mm256_storeu_ps(acc + 48, a6);
    _mm256_storeu_ps(acc + 56, a7);
    return;
  }
  for (int c = 0; c < w; c++) {
    __m256 a = init ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + 8 * c);
    for (int j = j0; j < j1; j++)
      a = _mm256_fmadd_ps(_mm256_broadcast_ss(&p[j]), _mm256_loadu_ps(vrows[j] + off + 8 * c), a);
    _mm256_storeu_ps(acc + 8 * c, a);
  }
}

/* The key loop runs in groups of 8 keys, every head of the row per group,
 * so the tile's K (then V) rows are read front to back once, each KV head's
 * slice serving its `group` query heads from L1. */
static void tile_avx2(const float *q, int n_heads, int group, int hd, float scale, float softcap,
                      const kern_cpu__attn_keys_t *keys, float *part) {
  const int n = keys->n, nc = (n + 7) / 8, n_kv = n_heads / group, P = KERN_ATTN_PART(hd);
  const float *const *krows = keys->krows, *const *vrows = keys->vrows;
  float p[n_heads][KERN_ATTN_TILE]; /* scores, then exp(score - m) */
  __m256 vmax[n_heads];
  const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
  for (int h = 0; h < n_heads; h++) vmax[h] = _mm256_set1_ps(-INFINITY);

  /* scores, 8 keys at a time: one FMA chain per key over head_dim */
  for (int c = 0; c < nc; c++) {
    const float *const *kr = krows + 8 * c;
    /* keys in [first, n): the window's edge and the tile's end */
    const __m256 valid = _mm256_and_ps(_mm256_cmp_ps(lane, _mm256_set1_ps((float)(n - 8 * c)), _CMP_LT_OQ),
                                       _mm256_cmp_ps(lane, _mm256_set1_ps((float)(keys->first - 8 * c)), _CMP_GE_OQ));
    for (int g = 0; g < n_kv; g++) {
      const int off = g * hd;
      const float *k0 = kr[0] + off, *k1 = kr[1] + off, *k2 = kr[2] + off, *k3 = kr[3] + off,
                  *k4 = kr[4] + off, *k5 = kr[5] + off, *k6 = kr[6] + off, *k7 = kr[7] + off;
      for (int h = g * group; h < (g + 1) * group; h++) {
        const float *qh = q + (size_t)h * hd;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
        for (int d = 0; d < hd; d += 8) {
          __m256 qd = _mm256_loadu_ps(qh + d);
          a0 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k0 + d), a0);
          a1 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k1 + d), a1);
          a2 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k2 + d), a2);
          a3 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k3 + d), a3);
          a4 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k4 + d), a4);
          a5 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k5 + d), a5);
          a6 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k6 + d), a6);
          a7 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k7 + d), a7);
        }
        __m256 sc = _mm256_mul_ps(hsum8x8(a0, a1, a2, a3, a4, a5, a6, a7), _mm256_set1_ps(scale));
        if (softcap > 0) { /* before the mask: a capped -inf would be -softcap */
          float t[8];
          _mm256_storeu_ps(t, sc);
          for (int e = 0; e < 8; e++) t[e] = soft_cap(t[e], softcap);
          sc = _mm256_loadu_ps(t);
        }
        sc = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), sc, valid); /* masked keys add nothing */
        _mm256_storeu_ps(&p[h][8 * c], sc);
        vmax[h] = _mm256_max_ps(vmax[h], sc);
      }
    }
  }

  /* p = exp(s - m) and l = sum p, per head */
  for (int h = 0; h < n_heads; h++) {
    const float m = hmax8(vmax[h]);
    const __m256 vm = _mm256_set1_ps(m);
    __m256 vl = _mm256_setzero_ps();
    for (int c = 0; c < nc; c++) {
      __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(&p[h][8 * c]), vm));
      _mm256_storeu_ps(&p[h][8 * c], e);
      vl = _mm256_add_ps(vl, e);
    }
    part[(size_t)h * P + hd] = m;
    part[(size_t)h * P + hd + 1] = hsum8(vl);
  }

  /* acc = sum p_j v_j: per head, every key of the tile in one pass, 64
   * dimensions at a time, the accumulators held in registers; the heads of
   * one KV head follow each other, so its V slice is read from L1 */
  for (int h = 0; h < n_heads; h++) {
    float *acc = part + (size_t)h * P;
    const int off = (h / group) * hd;
    for (int d0 = 0; d0 < hd; d0 += 64)
      accumulate_v(acc + d0, p[h], vrows, off + d0, 0, n, (hd - d0 < 64 ? hd - d0 : 64) / 8, 1);
  }
}
#endif

__attribute__((noinline)) void kern_cpu__attn_tile(const float *q, int n_heads, int group, int head_dim,
                                                   float scale, float softcap, const kern_cpu__attn_keys_t *keys,
                                                   float *part) {
#if ATTN_SIMD
  if (head_dim % 8 == 0) {
    tile_avx2(q, n_heads, group, head_dim, scale, softcap, keys, part);
    return;
  }
#endif
  for (int h = 0; h < n_heads; h++)
    tile_scalar(q + (size_t)h * head_dim, keys->krows, keys->vrows, (h / group) * head_dim, keys->first, keys->n,
                head_dim, scale, softcap,
                part + (size_t)h * KERN_ATTN_PART(head_dim));
}

__attribute__((noinline)) void kern_cpu__attn_merge(float *dst, const float *src, int head_dim) {
  const float ls = src[head_dim + 1], ld = dst[head_dim + 1];
  if (ls == 0.0f) return; /* empty src */
  if (ld == 0.0f) {       /* empty dst */
    memcpy(dst, src, (size_t)(head_dim + 2) * sizeof *dst);
    return;
  }
  const float ms = src[head_dim], md = dst[head_dim];
  const float m = ms > md ? ms : md;
  const float a = expf(md - m), b = expf(ms - m);
  for (int d = 0; d < head_dim; d++) dst[d] = fmaf(src[d], b, dst[d] * a);
  dst[head_dim] = m;
  dst[head_dim + 1] = fmaf(ls, b, ld * a);
}

__attribute__((noinline)) void kern_cpu__attn_finish(float *out, const float *st, int head_dim, float sink) {
  float l = st[head_dim + 1];
  if (l == 0.0f) {
    memset(out, 0, (size_t)head_dim * sizeof *out);
    return;
  }
  if (sink > -INFINITY) l += expf(sink - st[head_dim]); /* exp overflow: l = inf, out = 0, the limit */
  for (int d = 0; d < head_dim; d++) out[d] = st[d] / l;
}
