/* config/log.h — leveled logging for the daemon and its library code.
 *
 * One line per call, to stderr (or a log file), prefixed with the level. The
 * level is process-wide and set once at start-up from the configuration.
 * Thread-safe: a line is written with one write(2). */
#ifndef TRAM_LOG_H
#define TRAM_LOG_H

#include <stdarg.h>

typedef enum {
  LOG_LEVEL_ERROR = 0,
  LOG_LEVEL_WARN = 1,
  LOG_LEVEL_INFO = 2,
  LOG_LEVEL_DEBUG = 3,
} log_level_t;

/* Sets the most verbose level written (default LOG_LEVEL_INFO). */
void log_set_level(log_level_t level);
log_level_t log_get_level(void);

/* Parses "error", "warn", "info" or "debug"; returns 0 or -1. */
int log_level_parse(const char *name, log_level_t *out);

/* Writes one line at `level` if it is enabled; a trailing newline is added. */
void log_write(log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_vwrite(log_level_t level, const char *fmt, va_list ap);

#define log_error(...) log_write(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...) log_write(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...) log_write(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_write(LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif
