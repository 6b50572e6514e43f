/* boot/boot_cfg.c — the settings (cfg_t) as the start-up options (see
 * boot.h). */
#include "boot/boot.h"

boot_opts_t boot_opts_from_cfg(const cfg_t *c) {
  return (boot_opts_t){
      .model_path = c->model,
      .device = c->device == CFG_DEVICE_CUDA ? "cuda" : "cpu",
      .threads = c->threads,
      .precision = c->precision,
      .quantize = cfg_quantize_choices[c->quantize],
      .sched =
          {
              .max_batch_tokens = c->max_batch_tokens,
              .max_seqs = c->max_seqs,
              .step_target_ms = c->step_target_ms,
              /* the default: 0, the engine's own (a hybrid's states then come on top) */
              .kv_cache_bytes = c->source[CFG_KV_CACHE_BYTES] == CFG_SRC_DEFAULT ? 0 : c->kv_cache_bytes,
              .kv_cache_blocks = c->kv_cache_blocks,
              .state_snapshot_bytes = c->state_snapshot_bytes > 0 ? c->state_snapshot_bytes : -1,
              .block_size = c->block_size,
              .max_model_len = c->max_model_len,
              .max_waiting = c->max_waiting,
              .prefix_caching = 1,
              .cuda_graphs = c->cuda_graphs,
              .spec = {.method = (sched_spec_method_t)c->speculative,
                       .k = c->num_speculative_tokens,
                       .ngram_min = c->prompt_lookup_min,
                       .ngram_max = c->prompt_lookup_max,
                       .max_batch = c->speculative_max_batch,
                       .draft_kv_cache_bytes = c->draft_kv_cache_bytes},
          },
      .chat_template_path = c->chat_template,
      .draft_model_path = c->draft_model,
      .grammar_cache_bytes = (size_t)c->grammar_cache_bytes,
  };
}
