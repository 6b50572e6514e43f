/* base/clock.h — the one clock: CLOCK_MONOTONIC in nanoseconds, what every
 * timestamp in tram (request times, step times, deadlines, metrics) uses. */
#ifndef TRAM_BASE_CLOCK_H
#define TRAM_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t clock_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
