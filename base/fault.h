/* base/fault.h — fault injection for test builds: the paths no request can
 * reach (a wedged engine, a starved loop, a failed model read, memory
 * running out in a parser) made reachable on purpose, so tests cover them.
 *
 * Compiled in only with -DTRAM_FAULTS=1 (`make sanitize` builds
 * build/san/tram so; `make FAULTS=1` any build). Without it every call
 * below is a constant (false, or the default) that the compiler drops:
 * release builds have no hook, no getenv, no cost.
 *
 * The faults come from the environment, read once at the first call:
 *
 *   TRAM_FAULTS="name=value,name=value,..."
 *
 * Names the tree knows (grep fault_ for the places):
 *   engine_stall=MS      the engine thread sleeps MS ms once, after its
 *                        first step that did work: a wedged engine
 *   loop_stall=MS        the loop thread sleeps MS ms once, in its first
 *                        handling of engine events: a starved loop
 *   model_read=fail      opening a model file fails as a read error (EIO)
 *   model_read_delay=MS  opening a model file takes MS ms longer: a slow load
 *   alloc_fail=N         every Nth allocation that may fail fails: a
 *                        request body's JSON parse (api/json_alloc.c),
 *                        the request parsers' arena allocations and the
 *                        HTTP head's copy (a fallible arena, base/arena.h)
 *   pool_late=N          every Nth time, the CPU thread pool's caller yields
 *                        while publishing a job, or a worker after seeing
 *                        one (kernels/cpu/pool.c): late workers, on purpose
 *   stall_ms=MS          an engine with work and no step for MS ms counts
 *                        as stalled (server/srv_notify.c; default 30 s)
 *
 * Thread-safe: the table is parsed once (pthread_once); counters are
 * atomic. */
#ifndef TRAM_BASE_FAULT_H
#define TRAM_BASE_FAULT_H

#include <stdbool.h>
#include <stdint.h>

#ifdef TRAM_FAULTS

/* The value given for name (a number; "fail" and a bare name count as 1),
 * or dflt when TRAM_FAULTS does not name it. */
int64_t fault_value(const char *name, int64_t dflt);

/* Whether the fault fires at this call: a counting fault (name=N) fires at
 * every Nth call, any other named one at every call; false when not named. */
bool fault_hit(const char *name);

/* Sleeps name's value in ms the first time it is called for name (later
 * calls, and an unnamed fault, return at once). Logs a warning first. */
void fault_stall_once(const char *name);

#else

static inline int64_t fault_value(const char *name, int64_t dflt) {
  (void)name;
  return dflt;
}
static inline bool fault_hit(const char *name) {
  (void)name;
  return false;
}
static inline void fault_stall_once(const char *name) { (void)name; }

#endif
#endif
