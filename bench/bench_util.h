/* bench/bench_util.h — small helpers the C benchmarks share: a clock in
 * seconds and a comparator for sorting timings. Header-only: each benchmark
 * is its own program. */
#ifndef TRAM_BENCH_UTIL_H
#define TRAM_BENCH_UTIL_H

#include <time.h>

/* Seconds on clock id (CLOCK_MONOTONIC, CLOCK_PROCESS_CPUTIME_ID, ...). */
static inline double bench_clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* qsort comparator for doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

#endif
