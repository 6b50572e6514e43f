/* boot/boot.h — the start-up assembly, a room above the scheduler: the one
 * path from a model file, a device and the engine's configuration to a
 * running engine. It creates the kernel backend, loads the model, builds
 * the file's tokenizer and chat template (text/), the grammar vocabulary
 * and the cache of compiled grammars (structured output), and starts the
 * engine. `tram serve` (on its loader thread) and `tram generate` both
 * build their stack here, from the settings (boot_opts_from_cfg).
 *
 * Ownership: the stack owns every part; each outlives the ones after it
 * (the engine uses the backend, the model and the tokenizer). */
#ifndef TRAM_BOOT_H
#define TRAM_BOOT_H

#include <stddef.h>

#include "config/cfg.h"
#include "grammar/gram_lru.h"
#include "scheduler/sched.h"

typedef struct chat_tmpl chat_tmpl_t;

typedef struct boot_opts {
  const char *model_path; /* the GGUF file */
  const char *device;     /* "cpu" or "cuda" */
  int threads;            /* compute threads (the CPU backend's pool) */
  int precision;          /* kern_precision_t: the matmul arithmetic (0 exact, 1 fast) */
  const char *quantize;   /* a GGML type name, any case ("q8_0", "q4_0", "q4_1"): F32/F16/BF16
                             weights quantized to it at load (model_load_opts_t); NULL or
                             "off": as stored */
  sched_config_t sched;   /* the engine's configuration */
  const char *chat_template_path; /* a template file replacing the model's; NULL: the model's */
  const char *draft_model_path;   /* speculative decoding's draft model (a GGUF file with the model's
                                   * vocabulary), loaded when sched.spec.method is SCHED_SPEC_DRAFT */
  size_t grammar_cache_bytes;     /* the compiled grammars' token caches together (0: 256 MiB) */
} boot_opts_t;

typedef struct boot {
  kern_backend_t *be;
  model_t *model;
  model_t *draft;         /* the draft model (speculative decoding), or NULL */
  tok_t *tok;
  chat_tmpl_t *tmpl;      /* NULL when the model's template does not compile (logged) */
  sched_engine_t *engine;
  gram_vocab_t *gvocab;   /* the tokenizer's grammar vocabulary (structured output) */
  gram_lru_t *grammars;   /* compiled grammars over gvocab, by content (sched_req_params_t.grammar) */
  samp_gen_defaults_t gen; /* the sampling the model file recommends (model_gen_defaults) */
  int pooling;            /* the model file's <arch>.pooling_type (sched_pool_t; 0: none given) */
  int pool_normalize;     /* the model file's tram.pooling.normalize: 1/0, -1: not said */
  int32_t embed_dim;      /* the model's hidden size: an embedding's length */
} boot_t;

/* Builds *st for o. Returns 0, or -EINVAL with the reason in err[err_len]
 * and *st all NULL (what was built is freed). A model template that does
 * not compile is not an error: st->tmpl is NULL and chat is the caller's
 * to refuse; a chat_template_path that cannot be read or does not compile
 * is. A draft model whose vocabulary differs from the model's (size, or
 * any token's text) is refused, naming the first difference. */
int boot_open(boot_t *st, const boot_opts_t *o, char *err, size_t err_len);

/* Frees what st holds, the engine first (sched_engine_destroy's contract:
 * requests still submitted are then the caller's); NULL parts are skipped.
 * Leaves *st all NULL. */
void boot_close(boot_t *st);

/* The options of settings c: the model file, the device, the threads, the
 * engine's batch, sequence and cache sizes, block size, max_model_len,
 * max_waiting, speculative decoding; prefix caching on. Borrows c's
 * strings. */
boot_opts_t boot_opts_from_cfg(const cfg_t *c);

#endif
