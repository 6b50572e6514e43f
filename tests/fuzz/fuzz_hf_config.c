/* tests/fuzz/fuzz_hf_config.c — libFuzzer target for the config.json
 * reader (hf/hf_config.c, the experts' fields of hf/hf_moe.c) and the
 * hyper-parameters model/ reads from what it writes.
 *
 * Parses the input as config.json, translates it into `<arch>.*` keys
 * (hf__config), finishes the GGUF context and reads the hyper-parameters
 * from it (model__hparams_read, the experts' keys included). It traps
 * when a failure comes without a message or a model's numbers break the
 * promises the forward relies on (top-k within the experts, dimensions
 * positive).
 *
 *   make fuzz
 *   build/fuzz/fuzz_hf_config -max_total_time=180 tests/fuzz/corpus/fuzz_hf_config */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "hf/hf_internal.h"
#include "model/model_internal.h"

#define CHECK(cond) \
  do {              \
    if (!(cond)) __builtin_trap(); \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int quiet;
  if (!quiet) log_set_level(LOG_LEVEL_ERROR), quiet = 1;
  cJSON *cfg = cJSON_ParseWithLength((const char *)data, size);
  if (!cfg) return 0;
  char err[512] = "";
  gguf_build_t *b = gguf_build_new();
  hf_arch_t arch;
  const int rc = hf__config(b, cfg, &arch, err, sizeof err);
  cJSON_Delete(cfg);
  free(arch.rope_long);
  free(arch.rope_short);
  hf__moe_free(&arch);
  if (rc != 0) {
    CHECK(err[0] != '\0');
    gguf_build_abort(b);
    return 0;
  }
  gguf_ctx_t *g = gguf_build_finish(b, err, sizeof err);
  CHECK(g != NULL);
  model_hparams_t hp;
  float *inv_freq = NULL;
  err[0] = '\0';
  if (model__hparams_read(g, &hp, &inv_freq, err, sizeof err) != 0) {
    CHECK(err[0] != '\0' && inv_freq == NULL);
  } else {
    CHECK(hp.n_layers > 0 && hp.dim > 0 && hp.ff_dim > 0 && hp.n_vocab > 0 && inv_freq != NULL);
    CHECK(hp.n_expert == 0 || (hp.n_expert_used >= 1 && hp.n_expert_used <= hp.n_expert && hp.expert_ff_dim > 0));
    free(inv_freq);
  }
  gguf_close(g);
  return 0;
}
