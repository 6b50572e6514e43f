/* server/srv_stack.c — settings → backend, model, chat template, engine
 * (see srv_stack.h). */
#include "server/srv_stack.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "kernels/kern.h"
#include "model/model.h"

sched_config_t srv_stack_sched_config(const cfg_t *c) {
  return (sched_config_t){
      .max_batch_tokens = c->max_batch_tokens,
      .max_seqs = c->max_seqs,
      .kv_cache_bytes = c->kv_cache_bytes,
      .kv_cache_blocks = c->kv_cache_blocks,
      .block_size = c->block_size,
      .max_model_len = c->max_model_len,
      .max_waiting = c->max_waiting,
      .prefix_caching = 1,
  };
}

int srv_stack_open(srv_stack_t *st, const cfg_t *c, const sched_config_t *sc, char *err, size_t err_len) {
  memset(st, 0, sizeof *st);
  const char *device = c->device == CFG_DEVICE_CUDA ? "cuda" : "cpu";
  st->be = kern_backend_create(device, c->threads);
  if (!st->be) {
    snprintf(err, err_len, "cannot create the %s backend (see above)", device);
    return -EINVAL;
  }
  st->model = model_load(c->model, st->be, err, err_len);
  if (!st->model) {
    srv_stack_close(st);
    return -EINVAL;
  }
  const char *src = model_chat_template(st->model);
  st->tmpl = chat_tmpl_from_model(src, src ? strlen(src) : 0);
  if (!st->tmpl) log_warn("the model's chat template does not compile: chat requests will be refused");
  st->engine = sched_engine_create(st->model, st->be, sc);
  if (!st->engine) {
    snprintf(err, err_len, "cannot start the engine (see above)");
    srv_stack_close(st);
    return -EINVAL;
  }
  return 0;
}

const tok_t *srv_stack_tokenizer(const srv_stack_t *st) { return model_tokenizer(st->model); }

void srv_stack_close(srv_stack_t *st) {
  sched_engine_destroy(st->engine);
  chat_tmpl_free(st->tmpl);
  model_destroy(st->model);
  kern_backend_destroy(st->be);
  memset(st, 0, sizeof *st);
}
