/* server/srv_notify.c — what tram tells systemd (sd_notify): STATUS= lines,
 * and the watchdog, which is pinged only while the engine makes progress or
 * has nothing to do, so that a wedged engine gets the service restarted. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "base/log.h"
#include "base/clock.h"
#include "base/fault.h"
#include "server/srv_internal.h"

void srv__notify(const char *text) {
  int r = sd_notify(0, text);
  if (r < 0) log_warn("sd_notify(\"%s\"): %s", text, strerror(-r));
  else if (r > 0) log_debug("sd_notify: %s", text);
}

void srv__status(srv_t *s, const char *state, const char *fmt, ...) {
  char line[sizeof s->status];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (!state && strcmp(line, s->status) == 0) return;
  memcpy(s->status, line, sizeof line);
  char msg[sizeof line + 64];
  snprintf(msg, sizeof msg, "%s%sSTATUS=%s", state ? state : "", state ? "\n" : "", line);
  srv__notify(msg);
}

/* Work queued or running, and the step counter; updates seen_* when the
 * engine moved or is idle. Returns the time since it was last seen so. */
static int64_t idle_for(srv_t *s, sched_stats_t *st) {
  sched_get_stats(s->engine, st);
  const int64_t now = clock_now_ns();
  if (st->steps != s->seen_steps || st->running + st->waiting - st->paused == 0) { /* paused: held, not owed */
    s->seen_steps = st->steps;
    s->seen_at = now;
  }
  return now - s->seen_at;
}

int64_t srv__stall_ns(const srv_t *s, bool for_health) {
  const int64_t stall = fault_value("stall_ms", SRV_STALL_NS / 1000000) * 1000000; /* test builds may shorten it */
  const int64_t wd = (int64_t)s->wd_usec * 1000;
  return for_health && wd > 0 && wd < stall ? wd : stall;
}

bool srv__stalled(srv_t *s, int64_t stall_ns) {
  if (!s->engine) return false;
  sched_stats_t st;
  return idle_for(s, &st) > stall_ns;
}

void srv__watchdog(srv_t *s) {
  if (!s->wd_usec) return;
  const int64_t now = clock_now_ns();
  /* ping at half the period; the tick runs every second */
  if (now - s->wd_last < (int64_t)s->wd_usec * 1000 / 2) return;
  if (s->engine) {
    sched_stats_t st;
    idle_for(s, &st);
    const bool busy = st.running + st.waiting - st.paused > 0;
    if (busy && st.steps == s->wd_steps) {
      if (s->wd_warned) return;
      s->wd_warned = true;
      log_warn("watchdog: the engine ran no step for %.1f s with %d requests running and %d waiting: not "
               "pinging systemd",
               (double)(now - s->seen_at) / 1e9, st.running, st.waiting);
      return;
    }
    s->wd_steps = st.steps;
    s->wd_warned = false;
  }
  /* while loading there is no engine to watch: the loader either finishes or
   * fails, and TimeoutStartSec bounds it */
  s->wd_last = now;
  srv__notify("WATCHDOG=1");
}
