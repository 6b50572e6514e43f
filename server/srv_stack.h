/* server/srv_stack.h — the one start-up path: from the settings (cfg_t) to
 * a running engine. It maps the device name, creates the kernel backend,
 * loads the model, compiles its chat template and starts the engine with
 * the settings' scheduler configuration. `tram serve` (srv_main.c, on its
 * loader thread) and `tram generate` (generate.c) both build their stack
 * here; the only file of server/ that includes the model and the kernels. */
#ifndef TRAM_SRV_STACK_H
#define TRAM_SRV_STACK_H

#include <stddef.h>

#include "config/cfg.h"
#include "text/chat_template.h"
#include "scheduler/sched.h"

/* What serves requests. Each part outlives the ones after it; the engine
 * uses the backend and the model. */
typedef struct srv_stack {
  kern_backend_t *be;
  model_t *model;
  chat_tmpl_t *tmpl;      /* NULL when the model's template does not compile (logged) */
  sched_engine_t *engine;
} srv_stack_t;

/* The engine's configuration from the settings: batch, sequence and cache
 * sizes, block size, max_model_len, max_waiting; prefix caching on. */
sched_config_t srv_stack_sched_config(const cfg_t *c);

/* Builds *st for c (device, threads, model) with engine configuration sc.
 * Returns 0, or -EINVAL with the reason in err[err_len] and *st all NULL
 * (what was built is freed). A template that does not compile is not an
 * error: st->tmpl is NULL and chat is the caller's to refuse. */
int srv_stack_open(srv_stack_t *st, const cfg_t *c, const sched_config_t *sc, char *err, size_t err_len);

/* The model's tokenizer (valid while st->model is). */
const tok_t *srv_stack_tokenizer(const srv_stack_t *st);

/* Frees what st holds, the engine first (sched_engine_destroy's contract:
 * requests still submitted are then the caller's); NULL parts are skipped.
 * Leaves *st all NULL. */
void srv_stack_close(srv_stack_t *st);

#endif
