/* tests/unit/testutil.h — support shared by the C unit tests: a seeded
 * random source (the seed is printed, and TRAM_TEST_SEED replays it), random
 * fills, output poisoning, and error measures against float64 references. */
#ifndef TRAM_TESTUTIL_H
#define TRAM_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

typedef struct tu_rng {
  uint64_t s[4];
} tu_rng_t;

/* The run's seed: $TRAM_TEST_SEED if set, else from the clock; printed once
 * to stderr as "seed: N (replay with TRAM_TEST_SEED=N)". */
uint64_t tu_seed(void);

/* Seeds a generator (xoshiro256**). Distinct streams: tu_rng_init(r, seed + k). */
void tu_rng_init(tu_rng_t *r, uint64_t seed);
uint64_t tu_next(tu_rng_t *r);
/* Uniform in [0, n). */
uint64_t tu_below(tu_rng_t *r, uint64_t n);
/* Uniform in [lo, hi). */
double tu_uniform(tu_rng_t *r, double lo, double hi);
/* Standard normal. */
double tu_normal(tu_rng_t *r);

/* Fills x[n] with normal values * scale, never exactly zero. */
void tu_fill_normal(tu_rng_t *r, float *x, size_t n, float scale);
/* Shuffles a[n] in place. */
void tu_shuffle_i32(tu_rng_t *r, int32_t *a, size_t n);

/* Fills x[n] with NaN so that any element a kernel fails to write shows up. */
void tu_poison_f32(float *x, size_t n);

/* ||got - want||₂ / ||want||₂ (0 when both are zero; +inf if got has a NaN). */
double tu_rel_l2(const float *got, const double *want, size_t n);
/* max |got - want|. */
double tu_max_abs(const float *got, const double *want, size_t n);

#endif
