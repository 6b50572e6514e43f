/* base/log.h — leveled logging for the daemon and its library code.
 *
 * One line per call, to stderr or to a log file, written with one write(2)
 * so that lines from different threads never interleave. The level, format
 * and destination are process-wide and set once at start-up from the
 * configuration (log_configure); until then lines go to stderr as text at
 * level info.
 *
 * Line formats:
 *   text               2025-06-01T10:00:00.123Z info: listening on 127.0.0.1:8080
 *   text under journald <6>info: listening on 127.0.0.1:8080
 *   json               {"ts":"2025-06-01T10:00:00.123Z","level":"info","msg":"..."}
 *   json under journald <6>{"ts":...}
 * "Under journald" means stderr is the journal stream systemd gave us: the
 * JOURNAL_STREAM variable names stderr's device and inode. journald strips the
 * "<N>" syslog priority prefix (3 error, 4 warn, 6 info, 7 debug) and stores
 * it as the entry's priority; it stamps the time itself. Lines to a log file
 * always carry the timestamp and no prefix.
 *
 * Text lines have control characters replaced by spaces (one entry, one
 * line); JSON strings are escaped, invalid UTF-8 replaced by U+FFFD. A line
 * longer than LOG_LINE_MAX bytes is truncated (JSON lines stay valid). */
#ifndef TRAM_LOG_H
#define TRAM_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

/* The longest line written, newline included. */
#define LOG_LINE_MAX 4096

typedef enum {
  LOG_LEVEL_ERROR = 0,
  LOG_LEVEL_WARN = 1,
  LOG_LEVEL_INFO = 2,
  LOG_LEVEL_DEBUG = 3,
} log_level_t;

typedef enum {
  LOG_FORMAT_TEXT = 0,
  LOG_FORMAT_JSON = 1,
} log_format_t;

/* Sets the most verbose level written (default LOG_LEVEL_INFO). */
void log_set_level(log_level_t level);
log_level_t log_get_level(void);

/* Parses "error", "warn", "info" or "debug"; returns 0 or -1. */
int log_level_parse(const char *name, log_level_t *out);
/* "error", "warn", "info", "debug" ("?" for anything else). */
const char *log_level_name(log_level_t level);

/* Sets the line format (default LOG_FORMAT_TEXT). */
void log_set_format(log_format_t format);
log_format_t log_get_format(void);

/* Sets level and format and sends lines to `path` (opened for appending,
 * created with mode 0640), or to stderr when path is NULL or "". Call at
 * start-up, before other threads log. Returns 0, or a negative errno when
 * the file cannot be opened (then nothing changes). */
int log_configure(log_level_t level, log_format_t format, const char *path);

/* Reopens the log file by its path (after logrotate moved it away): lines
 * written after the call go to the new file; no line is lost or split.
 * Async-signal-safe (open, dup3 and close only), so a SIGHUP handler may
 * call it directly. Returns 0 (also when logging to stderr: nothing to do)
 * or a negative errno, in which case lines keep going to the old file. */
int log_reopen(void);

/* The negative errno of the last line that could not be written (a full
 * disk, /dev/full), or 0 if every line was. */
int log_write_error(void);

/* Goes back to stderr and closes the log file, if any. Call when no other
 * thread logs any more. */
void log_close(void);

/* Whether lines to stderr carry journald priority prefixes (see above). */
bool log_journal(void);

/* Writes one line at `level` if it is enabled; the newline is added. */
void log_write(log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_vwrite(log_level_t level, const char *fmt, va_list ap);

#define log_error(...) log_write(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...) log_write(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...) log_write(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_write(LOG_LEVEL_DEBUG, __VA_ARGS__)

/* One finished request, for the access log. Strings are borrowed for the
 * call. A negative time means "did not happen" (e.g. no token was produced)
 * and is written as null (json) or "-" (text). */
typedef struct log_access {
  const char *id;            /* request id, e.g. "cmpl-3f2a" */
  const char *endpoint;      /* the route, e.g. "/v1/chat/completions" */
  int status;                /* HTTP status sent */
  int64_t prompt_tokens;     /* tokens in the prompt */
  int64_t output_tokens;     /* tokens generated */
  double queue_ms;           /* from arrival to the first engine step that ran it */
  double ttft_ms;            /* from arrival to the first output token */
  double total_ms;           /* from arrival to the last byte sent */
  const char *finish_reason; /* "stop", "length", "cancelled", ...; NULL: omitted */
} log_access_t;

/* Writes the access-log line of one finished request at level info:
 *   text  ... info: request id=cmpl-1 endpoint=/v1/completions status=200
 *             prompt_tokens=12 output_tokens=50 queue_ms=1.2 ttft_ms=40.1
 *             total_ms=900.5 finish_reason=stop        (one line)
 *   json  {"ts":..,"level":"info","msg":"request","id":"cmpl-1",
 *          "endpoint":"/v1/completions","status":200,"prompt_tokens":12,
 *          "output_tokens":50,"queue_ms":1.2,"ttft_ms":40.1,
 *          "total_ms":900.5,"finish_reason":"stop"}
 * Times are written with 0.1 ms precision. In text, spaces and control
 * characters in id and endpoint become '_'. */
void log_access(const log_access_t *a);

#endif
