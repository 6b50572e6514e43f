/* tests/fuzz/fuzz_hf_config.c — libFuzzer target for the config.json reader
 * (hf/hf_config.c and its RoPE fields in hf/hf_rope.c, the experts' fields of hf/hf_moe.c, gpt_oss's of
 * hf/hf_gptoss.c, Gemma 4's of hf/hf_gemma4.c) and the
 * hyper-parameter checks it feeds (model/model_hparams.c, model_moe.c).
 *
 * Parses the input as config.json, translates it into `<arch>.*` keys,
 * finishes the GGUF context and reads the hyper-parameters from it as a
 * model load would (no tensors: the vocabulary comes from vocab_size;
 * fuzz_hparams.h). It traps when a failure comes without a message, and
 * when a config the reader accepted gives hyper-parameters outside their
 * checked ranges.
 *
 *   make fuzz
 *   build/fuzz/fuzz_hf_config -max_total_time=180 tests/fuzz/corpus/fuzz_hf_config */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "tests/fuzz/fuzz_hf.h"
#include "tests/fuzz/fuzz_hparams.h"

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
  fuzz_check_hparams(g);
  gguf_close(g);
  return 0;
}
