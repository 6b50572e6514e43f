/* tests/fuzz/fuzz_hf_config.c — libFuzzer target for the config.json reader
 * (hf/hf_config.c and its RoPE fields in hf/hf_rope.c, the experts' fields of hf/hf_moe.c, gpt_oss's of
 * hf/hf_gptoss.c, Gemma 4's of hf/hf_gemma4.c) and the
 * hyper-parameter checks it feeds (model/model_hparams.c, model_moe.c).
 *
 * Parses the input as config.json, translates it into `<arch>.*` keys,
 * finishes the GGUF context and reads the hyper-parameters from it as a
 * model load would (no tensors: the vocabulary comes from vocab_size). It
 * traps when a failure comes without a message, and when a config the
 * reader accepted gives hyper-parameters outside their checked ranges.
 *
 *   make fuzz
 *   build/fuzz/fuzz_hf_config -max_total_time=180 tests/fuzz/corpus/fuzz_hf_config */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "model/model_internal.h"
#include "tests/fuzz/fuzz_hf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cJSON *cfg = cJSON_ParseWithLength((const char *)data, size);
  if (!cfg) return 0;
  char err[256] = "";
  gguf_build_t *b = gguf_build_new();
  hf_arch_t arch;
  int rc = hf__config(b, cfg, &arch, err, sizeof err);
  cJSON_Delete(cfg);
  free(arch.rope_long);
  free(arch.rope_short);
  hf__moe_free(&arch);
  gguf_ctx_t *g = fuzz_hf_finish(b, rc, err, sizeof err);
  if (!g) return 0;
  model_hparams_t hp;
  float *inv_freq = NULL;
  err[0] = 0;
  rc = model__hparams_read(g, &hp, &inv_freq, err, sizeof err);
  if (rc != 0) {
    CHECK(err[0] != 0);
  } else {
    CHECK(hp.n_layers >= 1 && hp.n_heads >= 1 && hp.n_kv_heads >= 1 && hp.n_heads % hp.n_kv_heads == 0);
    CHECK(hp.rot_dim >= 2 && hp.rot_dim <= hp.head_dim && hp.rot_dim % 2 == 0);
    for (int l = 0; l < hp.n_layers && l < 64; l++) (void)model_layer_rope(&hp, l);
    if (hp.full_attn_interval > 0) /* qwen35: at least one attention layer, value heads in whole groups */
      CHECK(hp.n_attn_layers >= 1 && hp.ssm_n_v_heads % hp.ssm_n_k_heads == 0 && hp.ssm_head_v >= 1);
    CHECK(hp.n_expert == 0 || (hp.n_expert_used >= 1 && hp.n_expert_used <= hp.n_expert && hp.expert_ff_dim > 0));
    for (int p = 0; p < hp.rot_dim / 2; p++) CHECK(isfinite(inv_freq[p]) && inv_freq[p] >= 0); /* YaRN's ramp too */
    CHECK(isfinite(hp.attn_scale) && hp.attn_scale >= 0);
    if (hp.arch == MODEL_ARCH_GEMMA4) { /* every layer's geometry whole, every layer reads a cache layer there is */
      CHECK(hp.n_attn_layers >= 1 && hp.n_kv_heads_full >= 1 && hp.n_heads % hp.n_kv_heads_full == 0);
      CHECK(hp.head_dim_full >= 2 && hp.head_dim_full % 2 == 0 && hp.ff_dim_shared >= 1);
      for (int l = 0; l < hp.n_layers && l < 64; l++) {
        const int cl = model_layer_cache_layer(&hp, l);
        CHECK(cl >= 0 && cl < hp.n_attn_layers && model_layer_head_dim(&hp, l) == model_layer_head_dim(&hp, cl));
        CHECK(model_layer_kv_heads(&hp, l) == model_layer_kv_heads(&hp, cl) && model_layer_ff_dim(&hp, l) >= 1);
      }
    }
  }
  free(inv_freq);
  gguf_close(g);
  return 0;
}
