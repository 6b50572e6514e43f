/* tests/gpu/gpu_test.cu — shared helpers of the GPU checks (see gpu_test.cuh). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/gpu_test.cuh"

static void vreport(const char *tag, const char *name, const char *fmt, va_list ap) {
  printf("%s %s: ", tag, name);
  vprintf(fmt, ap);
  printf("\n");
  fflush(stdout);
}

void gt_result(gt_t *t, const char *name, int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(ok ? "PASS" : "FAIL", name, fmt, ap);
  va_end(ap);
  if (ok)
    t->pass++;
  else
    t->fail++;
}

void gt_warn(gt_t *t, const char *name, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport("WARN", name, fmt, ap);
  va_end(ap);
  t->warn++;
}

void *gt_malloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "gpu_check: out of host memory (%zu bytes)\n", bytes);
    abort();
  }
  return p;
}

void *gt_dev(gt_t *t, size_t bytes) {
  void *p = t->be->alloc(t->be, bytes);
  if (!p) {
    fprintf(stderr, "gpu_check: out of device memory (%zu bytes)\n", bytes);
    abort();
  }
  return p;
}

void *gt_dev_from(gt_t *t, const void *host, size_t bytes) {
  void *p = gt_dev(t, bytes);
  t->be->upload(t->be, p, host, bytes);
  return p;
}

void gt_put(gt_t *t, void *dev, const void *host, size_t bytes) { t->be->upload(t->be, dev, host, bytes); }
void gt_get(gt_t *t, void *host, const void *dev, size_t bytes) { t->be->download(t->be, host, dev, bytes); }
void gt_free(gt_t *t, void *dev) { t->be->free(t->be, dev); }

void gt_poison(gt_t *t, float *dev, size_t n) {
  float *h = (float *)gt_malloc(n * sizeof *h);
  tu_poison_f32(h, n);
  gt_put(t, dev, h, n * sizeof *h);
  t->be->sync(t->be); /* the upload has consumed h */
  free(h);
}

uint16_t gt_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float gt_bf16_f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float x;
  memcpy(&x, &u, 4);
  return x;
}

float gt_f16_f(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
  double v;
  if (exp == 0)
    v = ldexp((double)man, -24);
  else if (exp == 31)
    v = man ? NAN : INFINITY;
  else
    v = ldexp((double)(man | 1024), exp - 25);
  return (float)(sign ? -v : v);
}

uint16_t gt_f16(float x) {
  /* Exhaustive search is simplest and exact: the nearest of the 63488 finite
   * f16 values by bisection over the positive ones (monotonic in the bits). */
  const uint16_t sign = signbit(x) ? 0x8000 : 0;
  const double a = fabs((double)x);
  if (a >= 65520.0) return sign | 0x7c00;
  uint16_t lo = 0, hi = 0x7bff;
  while (lo < hi) { /* first value >= a */
    uint16_t mid = (uint16_t)((lo + hi) / 2);
    if ((double)gt_f16_f(mid) < a)
      lo = (uint16_t)(mid + 1);
    else
      hi = mid;
  }
  if (lo > 0) {
    const double up = gt_f16_f(lo), down = gt_f16_f((uint16_t)(lo - 1));
    if (a - down < up - a || (a - down == up - a && ((lo - 1) & 1) == 0)) lo = (uint16_t)(lo - 1);
  }
  return sign | lo;
}

int gt_all_finite(const float *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(x[i])) return 0;
  return 1;
}

void gt_normal(gt_t *t, float *x, size_t n, float scale) { tu_fill_normal(&t->rng, x, n, scale); }

int gt_check_close(gt_t *t, const char *name, const float *got, const double *want, size_t n,
                   double tol) {
  size_t bad = n;
  for (size_t i = 0; i < n; i++)
    if (!isfinite(got[i])) {
      bad = i;
      break;
    }
  const double rel = tu_rel_l2(got, want, n);
  const int ok = bad == n && rel < tol;
  if (bad != n)
    gt_result(t, name, 0, "element %zu of %zu not written or not finite (%g)", bad, n,
              (double)got[bad]);
  else
    gt_result(t, name, ok, "rel L2 %.3g (tol %.0e), max abs %.3g, n %zu", rel, tol,
              tu_max_abs(got, want, n), n);
  return ok;
}

int gt_check_same(gt_t *t, const char *name, const void *a, const void *b, size_t bytes) {
  const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
  size_t diff = 0, first = bytes;
  for (size_t i = 0; i < bytes; i++)
    if (x[i] != y[i]) {
      if (first == bytes) first = i;
      diff++;
    }
  if (diff)
    gt_result(t, name, 0, "%zu of %zu bytes differ (first at byte %zu)", diff, bytes, first);
  else
    gt_result(t, name, 1, "bitwise identical (%zu bytes)", bytes);
  return diff == 0;
}
