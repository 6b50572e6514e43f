/* tests/fuzz/fuzz_hparams.h — the hyper-parameter check the GGUF and the
 * config.json fuzz targets share: reads g's hyper-parameters as a model
 * load does (model/model_hparams.c, model_moe.c) and traps when a failure
 * comes without a message, or when a file the reader accepted
 * gives hyper-parameters outside their checked ranges. */
#ifndef TRAM_FUZZ_HPARAMS_H
#define TRAM_FUZZ_HPARAMS_H

#include <math.h>
#include <stdlib.h>

#include "model/model_internal.h"

#define FUZZ_TRAP_UNLESS(cond) \
  do {                         \
    if (!(cond)) __builtin_trap(); \
  } while (0)

static inline void fuzz_check_hparams(const gguf_ctx_t *g) {
  model_hparams_t hp;
  float *inv_freq = NULL;
  char err[512] = "";
  if (model__hparams_read(g, &hp, &inv_freq, err, sizeof err) != 0) {
    FUZZ_TRAP_UNLESS(err[0] != 0);
    free(inv_freq);
    return;
  }
  FUZZ_TRAP_UNLESS(hp.n_layers >= 1 && hp.n_heads >= 1 && hp.n_kv_heads >= 1 && hp.n_heads % hp.n_kv_heads == 0);
  FUZZ_TRAP_UNLESS(hp.rot_dim >= 2 && hp.rot_dim <= hp.head_dim && hp.rot_dim % 2 == 0);
  for (int l = 0; l < hp.n_layers && l < 64; l++) (void)model_layer_rope(&hp, l);
  if (hp.full_attn_interval > 0) { /* qwen35: an attention and a recurrent layer, value heads in whole groups */
    FUZZ_TRAP_UNLESS(hp.n_attn_layers >= 1 && hp.full_attn_interval >= 2);
    FUZZ_TRAP_UNLESS(hp.ssm_n_v_heads % hp.ssm_n_k_heads == 0 && hp.ssm_head_v >= 1);
  }
  FUZZ_TRAP_UNLESS(hp.n_expert == 0 ||
                   (hp.n_expert_used >= 1 && hp.n_expert_used <= hp.n_expert && hp.expert_ff_dim > 0));
  for (int p = 0; p < hp.rot_dim / 2; p++) FUZZ_TRAP_UNLESS(isfinite(inv_freq[p]) && inv_freq[p] >= 0); /* YaRN too */
  FUZZ_TRAP_UNLESS(isfinite(hp.attn_scale) && hp.attn_scale >= 0);
  if (hp.arch == MODEL_ARCH_GEMMA4) { /* every layer's geometry whole, every layer reads a cache layer there is */
    FUZZ_TRAP_UNLESS(hp.n_attn_layers >= 1 && hp.n_kv_heads_full >= 1 && hp.n_heads % hp.n_kv_heads_full == 0);
    FUZZ_TRAP_UNLESS(hp.head_dim_full >= 2 && hp.head_dim_full % 2 == 0 && hp.ff_dim_shared >= 1);
    for (int l = 0; l < hp.n_layers && l < 64; l++) {
      const int cl = model_layer_cache_layer(&hp, l);
      FUZZ_TRAP_UNLESS(cl >= 0 && cl < hp.n_attn_layers &&
                       model_layer_head_dim(&hp, l) == model_layer_head_dim(&hp, cl));
      FUZZ_TRAP_UNLESS(model_layer_kv_heads(&hp, l) == model_layer_kv_heads(&hp, cl) &&
                       model_layer_ff_dim(&hp, l) >= 1);
    }
  }
  free(inv_freq);
}

#endif
