/* base/log.c — leveled logging (see log.h).
 *
 * The destination is one file descriptor number, log_fd: 2 (stderr) or a
 * descriptor of the log file. log_reopen() opens the file again and moves the
 * new descriptor onto that same number with dup3(), which replaces it
 * atomically: a concurrent write(2) goes wholly to the old or the new file.
 * That is also what makes log_reopen() async-signal-safe. */
#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/utf8.h"

static _Atomic int write_error; /* errno of the last line that could not be written */
static _Atomic int log_level = LOG_LEVEL_INFO;
static _Atomic int log_format = LOG_FORMAT_TEXT;
static _Atomic int log_fd = STDERR_FILENO;
static char log_path[PATH_MAX]; /* the log file; "" when logging to stderr */

static const char *const level_names[] = {"error", "warn", "info", "debug"};
static const char level_prio[] = {'3', '4', '6', '7'}; /* syslog priorities */

/* --- levels and formats ---------------------------------------------------- */

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

const char *log_level_name(log_level_t level) {
  return (unsigned)level < 4 ? level_names[level] : "?";
}

void log_set_format(log_format_t format) { atomic_store(&log_format, (int)format); }
log_format_t log_get_format(void) { return (log_format_t)atomic_load(&log_format); }

/* --- journald detection ------------------------------------------------------ */

static pthread_once_t journal_once = PTHREAD_ONCE_INIT;
static bool journal_on;

/* JOURNAL_STREAM is "DEV:INODE" of the stream systemd connected; it counts
 * only if stderr is still that stream (not redirected by a wrapper). */
static void journal_detect(void) {
  const char *v = getenv("JOURNAL_STREAM");
  if (!v) return;
  char *end;
  errno = 0;
  unsigned long long dev = strtoull(v, &end, 10);
  if (errno || end == v || *end != ':') return;
  const char *p = end + 1;
  unsigned long long ino = strtoull(p, &end, 10);
  if (errno || end == p || *end) return;
  struct stat st;
  if (fstat(STDERR_FILENO, &st) != 0) return;
  journal_on = (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

bool log_journal(void) {
  pthread_once(&journal_once, journal_detect);
  return journal_on;
}

/* --- destination ------------------------------------------------------------- */

static int open_log(const char *path) {
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
  return fd < 0 ? -errno : fd;
}

int log_configure(log_level_t level, log_format_t format, const char *path) {
  if (path && *path) {
    if (strlen(path) >= sizeof log_path) return -ENAMETOOLONG;
    int fd = open_log(path);
    if (fd < 0) return fd;
    int old = atomic_load(&log_fd);
    if (old != STDERR_FILENO) {
      if (dup3(fd, old, O_CLOEXEC) < 0) {
        int e = -errno;
        close(fd);
        return e;
      }
      close(fd);
    } else {
      atomic_store(&log_fd, fd);
    }
    strcpy(log_path, path);
  } else {
    log_close();
  }
  log_set_level(level);
  log_set_format(format);
  return 0;
}

int log_reopen(void) {
  int cur = atomic_load(&log_fd);
  if (cur == STDERR_FILENO || !log_path[0]) return 0;
  int saved = errno; /* a signal handler must leave errno alone */
  int fd = open_log(log_path);
  int rc = 0;
  if (fd < 0) {
    rc = fd;
  } else {
    if (dup3(fd, cur, O_CLOEXEC) < 0) rc = -errno;
    close(fd);
  }
  errno = saved;
  return rc;
}

void log_close(void) {
  int old = atomic_exchange(&log_fd, STDERR_FILENO);
  if (old != STDERR_FILENO) close(old);
  log_path[0] = '\0';
}

/* --- line assembly ----------------------------------------------------------- */

/* A line under construction; `len` never exceeds `cap`. */
typedef struct {
  char buf[LOG_LINE_MAX];
  size_t len;
  size_t cap; /* room for content; the tail of buf is kept for the closing */
} line_t;

static void put(line_t *l, const char *s, size_t n) {
  if (n > l->cap - l->len) n = l->cap - l->len;
  memcpy(l->buf + l->len, s, n);
  l->len += n;
}

static void puts_(line_t *l, const char *s) { put(l, s, strlen(s)); }

static void putf(line_t *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(line_t *l, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) put(l, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Appends s as the inside of a JSON string; an escape or character that does
 * not fit whole is left out, so the result always stays valid JSON. */
static void put_json_str(line_t *l, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  size_t avail = strlen(s);
  while (avail > 0) {
    char esc[8];
    const char *out = esc;
    size_t n, used;
    int k;
    unsigned char c = *p;
    if (c == '"' || c == '\\') {
      esc[0] = '\\', esc[1] = (char)c, n = 2, used = 1;
    } else if (c < 0x20) {
      const char *named = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
      if (named) memcpy(esc, named, 3), n = 2;
      else n = (size_t)snprintf(esc, sizeof esc, "\\u%04x", c);
      used = 1;
    } else if ((k = utf8_char(p, avail)) > 0) {
      out = (const char *)p, n = used = (size_t)k;
    } else {
      out = "\xef\xbf\xbd", n = 3, used = 1; /* U+FFFD */
    }
    if (n > l->cap - l->len) break;
    put(l, out, n);
    p += used;
    avail -= used;
  }
}

/* Appends s with control characters (and, if `word`, spaces) replaced. */
static void put_text(line_t *l, const char *s, bool word) {
  for (; *s && l->len < l->cap; s++) {
    unsigned char c = (unsigned char)*s;
    char r = (c < 0x20 || c == 0x7f) ? (word ? '_' : ' ') : (word && c == ' ') ? '_' : (char)c;
    l->buf[l->len++] = r;
  }
}

static void put_timestamp(line_t *l) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char t[32];
  strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%S", &tm);
  putf(l, "%s.%03ldZ", t, ts.tv_nsec / 1000000);
}

/* Starts a line: the priority prefix or timestamp, the level, and (json) the
 * opening of the object up to the message's opening quote. */
static void line_begin(line_t *l, log_level_t level, bool json) {
  l->len = 0;
  l->cap = sizeof l->buf - 3; /* room for "\"}\n" at the end */
  int fd = atomic_load(&log_fd);
  bool journal = fd == STDERR_FILENO && log_journal();
  if (journal) {
    char prefix[3] = {'<', level_prio[level], '>'};
    put(l, prefix, 3);
  }
  if (json) {
    puts_(l, "{\"ts\":\"");
    put_timestamp(l);
    putf(l, "\",\"level\":\"%s\",\"msg\":\"", level_names[level]);
  } else {
    if (!journal) {
      put_timestamp(l);
      puts_(l, " ");
    }
    putf(l, "%s: ", level_names[level]);
  }
}

static void line_end(line_t *l, bool json_close) {
  l->cap = sizeof l->buf;
  if (json_close) puts_(l, "}");
  puts_(l, "\n");
  const char *p = l->buf;
  size_t left = l->len;
  while (left > 0) {
    ssize_t w = write(atomic_load(&log_fd), p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) { /* nowhere to report it but log_write_error() */
      atomic_store(&write_error, w < 0 ? errno : ENOSPC);
      return;
    }
    p += w;
    left -= (size_t)w;
  }
}

static bool enabled(log_level_t level) {
  return (unsigned)level < 4 && (int)level <= atomic_load(&log_level);
}

int log_write_error(void) { return -atomic_load(&write_error); }

void log_vwrite(log_level_t level, const char *fmt, va_list ap) {
  if (!enabled(level)) return;
  int saved = errno; /* callers log then return -errno */
  char msg[LOG_LINE_MAX];
  vsnprintf(msg, sizeof msg, fmt, ap);
  line_t l;
  bool json = log_get_format() == LOG_FORMAT_JSON;
  line_begin(&l, level, json);
  if (json) {
    put_json_str(&l, msg);
    l.cap = sizeof l.buf;
    puts_(&l, "\"");
  } else {
    put_text(&l, msg, false);
  }
  line_end(&l, json);
  errno = saved;
}

void log_write(log_level_t level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_vwrite(level, fmt, ap);
  va_end(ap);
}

/* --- access log -------------------------------------------------------------- */

static void put_ms(line_t *l, const char *name, double ms, bool json) {
  if (json) {
    if (ms < 0) putf(l, ",\"%s\":null", name);
    else putf(l, ",\"%s\":%.1f", name, ms);
  } else {
    if (ms < 0) putf(l, " %s=-", name);
    else putf(l, " %s=%.1f", name, ms);
  }
}

/* Appends a free-form string of the access log, escaped (json) or with
 * spaces and control characters replaced (text), in at most `budget` bytes,
 * so that the fixed fields after it always fit. */
static void put_field(line_t *l, const char *s, size_t budget, bool json) {
  size_t cap = l->cap;
  if (l->len + budget < cap) l->cap = l->len + budget;
  if (json) put_json_str(l, s);
  else put_text(l, s[0] ? s : "-", true);
  l->cap = cap;
}

void log_access(const log_access_t *a) {
  if (!enabled(LOG_LEVEL_INFO)) return;
  int saved = errno;
  bool json = log_get_format() == LOG_FORMAT_JSON;
  line_t l;
  line_begin(&l, LOG_LEVEL_INFO, json);
  /* Line budget: prefix ~80, id and endpoint 512 each, fixed fields ~250,
   * finish reason 128: well under LOG_LINE_MAX. */
  puts_(&l, json ? "request\",\"id\":\"" : "request id=");
  put_field(&l, a->id ? a->id : "", 512, json);
  puts_(&l, json ? "\",\"endpoint\":\"" : " endpoint=");
  put_field(&l, a->endpoint ? a->endpoint : "", 512, json);
  putf(&l, json ? "\",\"status\":%d,\"prompt_tokens\":%lld,\"output_tokens\":%lld"
                : " status=%d prompt_tokens=%lld output_tokens=%lld",
       a->status, (long long)a->prompt_tokens, (long long)a->output_tokens);
  put_ms(&l, "queue_ms", a->queue_ms, json);
  put_ms(&l, "ttft_ms", a->ttft_ms, json);
  put_ms(&l, "total_ms", a->total_ms, json);
  if (a->finish_reason) {
    puts_(&l, json ? ",\"finish_reason\":\"" : " finish_reason=");
    put_field(&l, a->finish_reason, 128, json);
    if (json) puts_(&l, "\"");
  }
  line_end(&l, json);
  errno = saved;
}
