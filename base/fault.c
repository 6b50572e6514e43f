/* base/fault.c — the TRAM_FAULTS table of test builds (see fault.h). In a
 * build without -DTRAM_FAULTS this file is empty. */
#include "base/fault.h"

#ifdef TRAM_FAULTS

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"

#define FAULT_MAX 16

typedef struct fault {
  char name[32];
  int64_t value;
  atomic_llong calls; /* fault_hit's counter */
  atomic_int stalled; /* fault_stall_once fired */
} fault_t;

static fault_t faults[FAULT_MAX];
static int n_faults;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void parse(void) {
  const char *env = getenv("TRAM_FAULTS");
  if (!env || !*env) return;
  char buf[512];
  snprintf(buf, sizeof buf, "%s", env);
  char *save = NULL;
  for (char *item = strtok_r(buf, ",", &save); item && n_faults < FAULT_MAX; item = strtok_r(NULL, ",", &save)) {
    fault_t *f = &faults[n_faults];
    char *eq = strchr(item, '=');
    if (eq) *eq = 0;
    snprintf(f->name, sizeof f->name, "%s", item);
    f->value = 1;
    if (eq && strcmp(eq + 1, "fail") != 0) {
      char *end = NULL;
      f->value = strtoll(eq + 1, &end, 10);
      if (!end || *end || f->value < 0) {
        log_warn("TRAM_FAULTS: %s=%s: not a number; ignored", item, eq + 1);
        continue;
      }
    }
    n_faults++;
  }
  for (int i = 0; i < n_faults; i++) log_warn("fault injection on: %s=%lld", faults[i].name, (long long)faults[i].value);
}

static fault_t *find(const char *name) {
  pthread_once(&once, parse);
  for (int i = 0; i < n_faults; i++)
    if (strcmp(faults[i].name, name) == 0) return &faults[i];
  return NULL;
}

int64_t fault_value(const char *name, int64_t dflt) {
  const fault_t *f = find(name);
  return f ? f->value : dflt;
}

bool fault_hit(const char *name) {
  fault_t *f = find(name);
  if (!f) return false;
  if (f->value <= 1) return true;
  return (atomic_fetch_add(&f->calls, 1) + 1) % f->value == 0;
}

void fault_stall_once(const char *name) {
  fault_t *f = find(name);
  if (!f || atomic_exchange(&f->stalled, 1)) return;
  log_warn("fault injection: %s: sleeping %lld ms", name, (long long)f->value);
  struct timespec ts = {.tv_sec = f->value / 1000, .tv_nsec = (long)(f->value % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

#else
typedef int fault_unused_t; /* ISO C: a translation unit is not empty */
#endif
