/* tests/unit/testutil.c — see testutil.h. */
#include "tests/unit/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

uint64_t tu_seed(void) {
  static int done;
  static uint64_t seed;
  if (!done) {
    const char *env = getenv("TRAM_TEST_SEED");
    if (env && *env) {
      seed = strtoull(env, NULL, 10);
    } else {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
    }
    fprintf(stderr, "seed: %llu (replay with TRAM_TEST_SEED=%llu)\n", (unsigned long long)seed,
            (unsigned long long)seed);
    done = 1;
  }
  return seed;
}

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void tu_rng_init(tu_rng_t *r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t tu_next(tu_rng_t *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

uint64_t tu_below(tu_rng_t *r, uint64_t n) { return n ? tu_next(r) % n : 0; }

double tu_uniform(tu_rng_t *r, double lo, double hi) {
  return lo + (hi - lo) * ((double)(tu_next(r) >> 11) * 0x1.0p-53);
}

double tu_normal(tu_rng_t *r) {
  double u1 = tu_uniform(r, 0x1.0p-53, 1.0), u2 = tu_uniform(r, 0.0, 1.0);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

void tu_fill_normal(tu_rng_t *r, float *x, size_t n, float scale) {
  for (size_t i = 0; i < n; i++) {
    float v;
    do v = (float)tu_normal(r) * scale;
    while (v == 0.0f);
    x[i] = v;
  }
}

void tu_shuffle_i32(tu_rng_t *r, int32_t *a, size_t n) {
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)tu_below(r, i);
    int32_t t = a[i - 1];
    a[i - 1] = a[j];
    a[j] = t;
  }
}

void tu_poison_f32(float *x, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] = NAN;
}

double tu_rel_l2(const float *got, const double *want, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    if (isnan(got[i])) return INFINITY;
    double d = (double)got[i] - want[i];
    num += d * d;
    den += want[i] * want[i];
  }
  if (den == 0) return num == 0 ? 0 : INFINITY;
  return sqrt(num / den);
}

double tu_max_abs(const float *got, const double *want, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - want[i]);
    if (isnan(d)) return INFINITY;
    if (d > m) m = d;
  }
  return m;
}
