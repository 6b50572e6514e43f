/* server/srv_stack.h — the settings (cfg_t) as the options of the one
 * start-up path (scheduler/sched_stack.h), for `tram serve` and
 * `tram generate`. */
#ifndef TRAM_SRV_STACK_H
#define TRAM_SRV_STACK_H

#include "config/cfg.h"
#include "scheduler/sched_stack.h"

/* The stack options of settings c: the model file, the device, the
 * threads, and the engine's batch, sequence and cache sizes, block size,
 * max_model_len, max_waiting; prefix caching on. Borrows c's strings. */
sched_stack_opts_t srv_stack_opts(const cfg_t *c);

#endif
