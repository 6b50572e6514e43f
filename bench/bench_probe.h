/* bench/bench_probe.h — the memory-bandwidth probe as the C benchmarks read
 * it: runs bench/membw (built next to them) with the same thread count and
 * picks its "read:" line. Header-only: each benchmark is its own program. */
#ifndef TRAM_BENCH_PROBE_H
#define TRAM_BENCH_PROBE_H

#include <libgen.h>
#include <stdio.h>

/* Read bandwidth in GB/s, wall and cpu-time (process CPU time ÷ threads), of
 * `membw -t threads` next to argv0; both 0 when it cannot be run. The probe's
 * line is echoed to stdout. */
static inline void bench_probe_read_gbs(const char *argv0, int threads, double *wall, double *cpu) {
  char path[4096], cmd[4300], line[256];
  snprintf(path, sizeof path, "%s", argv0);
  snprintf(cmd, sizeof cmd, "'%s/membw' -t %d -m 256", dirname(path), threads);
  *wall = *cpu = 0;
  FILE *f = popen(cmd, "r");
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    double w, c = 0;
    int got = sscanf(line, "read: %lf GB/s (cpu-time %lf", &w, &c);
    if (got >= 1) {
      fputs(line, stdout);
      *wall = w;
      *cpu = c;
    }
  }
  pclose(f);
}

#endif
