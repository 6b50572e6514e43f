/* tests/fuzz/fuzz_hf_config.c — libFuzzer target for the config.json
 * reader (hf/hf_config.c): every model_type's fields, Qwen3.5's
 * rope_parameters, layer_types and linear_* sizes included.
 *
 * Parses the input as config.json and translates it into `<arch>.*` keys;
 * when that succeeds, finishes the GGUF context and reads the model's
 * hyper-parameters from it as model_load would (model_hparams.c, through
 * a context without tensors, so a vocabulary must come from the keys). It
 * traps when a failure comes without a message.
 *
 *   make fuzz
 *   build/fuzz/fuzz_hf_config -max_total_time=180 tests/fuzz/corpus/fuzz_hf_config */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hf/hf_internal.h"
#include "model/model_internal.h"

#define CHECK(cond) \
  do {              \
    if (!(cond)) __builtin_trap(); \
  } while (0)

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
  if (rc != 0) {
    CHECK(err[0] != 0);
    gguf_build_abort(b);
    return 0;
  }
  gguf_ctx_t *g = gguf_build_finish(b, err, sizeof err);
  if (!g) {
    CHECK(err[0] != 0);
    return 0;
  }
  model_hparams_t hp;
  float *inv_freq = NULL;
  err[0] = 0;
  rc = model__hparams_read(g, &hp, &inv_freq, err, sizeof err);
  CHECK(rc == 0 || err[0] != 0);
  if (rc == 0 && hp.full_attn_interval > 0) CHECK(hp.n_attn_layers >= 1 && hp.ssm_n_v_heads % hp.ssm_n_k_heads == 0);
  free(inv_freq);
  gguf_close(g);
  return 0;
}
