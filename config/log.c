/* config/log.c — leveled logging (see log.h). */
#include "config/log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static _Atomic int log_level = LOG_LEVEL_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void log_set_level(log_level_t level) { atomic_store(&log_level, (int)level); }

log_level_t log_get_level(void) { return (log_level_t)atomic_load(&log_level); }

int log_level_parse(const char *name, log_level_t *out) {
  for (int i = 0; i < 4; i++) {
    if (strcmp(name, level_names[i]) == 0) {
      *out = (log_level_t)i;
      return 0;
    }
  }
  return -1;
}

void log_vwrite(log_level_t level, const char *fmt, va_list ap) {
  if ((int)level > atomic_load(&log_level)) return;
  char line[4096];
  int n = snprintf(line, sizeof line, "tram: %s: ", level_names[level]);
  int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  if (m < 0) m = 0;
  size_t len = (size_t)n + (size_t)m;
  if (len > sizeof line - 2) len = sizeof line - 2; /* truncated */
  line[len++] = '\n';
  ssize_t w = write(STDERR_FILENO, line, len);
  (void)w;
}

void log_write(log_level_t level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_vwrite(level, fmt, ap);
  va_end(ap);
}
