/* hf/hf_pooling.c — a sentence-transformers folder's pooling (modules.json:
 * Qwen3-Embedding, e5, bge) as the keys an embedding model's GGUF holds:
 * the Pooling module's mode (<path>/config.json: pooling_mode_lasttoken,
 * _mean_tokens, _cls_token) as `<arch>.pooling_type` (llama.cpp's numbers:
 * 3, 1, 2), and whether a Normalize module follows as
 * tram.pooling.normalize (1/0). The files come through the caller's reader,
 * so the folder (hf_open.c) and the fuzz target (tests/fuzz/fuzz_hf_modules.c)
 * feed the same code. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "hf/hf_internal.h"

/* The Pooling module's config (pc, read from `name`): its one mode's
 * llama.cpp number into *pooling. 0, or -EINVAL with err written: a mode
 * tram does not pool with (max, mean_sqrt_len, weightedmean) or several. */
static int pooling_mode(const cJSON *pc, const char *dir, const char *name, int *pooling, char *err,
                        size_t err_len) {
  static const struct {
    const char *key;
    int type; /* 0: refused */
  } MODES[] = {{"pooling_mode_lasttoken", 3}, {"pooling_mode_mean_tokens", 1}, {"pooling_mode_cls_token", 2},
               {"pooling_mode_max_tokens", 0}, {"pooling_mode_mean_sqrt_len_tokens", 0},
               {"pooling_mode_weightedmean_tokens", 0}};
  int n_on = 0;
  for (size_t i = 0; i < sizeof MODES / sizeof MODES[0]; i++) {
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pc, MODES[i].key))) continue;
    n_on++;
    *pooling = MODES[i].type;
    if (!MODES[i].type || n_on > 1) {
      snprintf(err, err_len, "%.150s/%.150s: %s%s is not a pooling tram runs (last token, mean or cls, one of them)",
               dir, name, MODES[i].key, n_on > 1 ? " with another mode" : "");
      return -EINVAL;
    }
  }
  return 0;
}

int hf__pooling(gguf_build_t *b, const cJSON *modules, const char *arch, hf_read_json_fn read, void *read_ctx,
                const char *dir, char *err, size_t err_len) {
  int rc = 0, normalize = 0, pooling = 0;
  const cJSON *m, *list = cJSON_IsArray(modules) ? modules : NULL;
  cJSON_ArrayForEach(m, list) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(m, "type");
    const cJSON *path = cJSON_GetObjectItemCaseSensitive(m, "path");
    if (!cJSON_IsString(type)) continue;
    if (strstr(type->valuestring, "models.Normalize")) normalize = 1;
    if (!strstr(type->valuestring, "models.Pooling") || !cJSON_IsString(path) || rc != 0) continue;
    char name[256];
    snprintf(name, sizeof name, "%.200s/config.json", path->valuestring);
    int missing;
    cJSON *pc = read(read_ctx, name, &missing, err, err_len);
    if (!pc) {
      if (missing) snprintf(err, err_len, "%.200s/%.250s: missing (modules.json names it)", dir, name);
      rc = -EINVAL;
      continue;
    }
    rc = pooling_mode(pc, dir, name, &pooling, err, err_len);
    cJSON_Delete(pc);
  }
  if (rc != 0) return rc;
  char key[128];
  if (pooling) {
    snprintf(key, sizeof key, "%.100s.pooling_type", arch);
    gguf_build_u32(b, key, (uint32_t)pooling);
  }
  gguf_build_u32(b, "tram.pooling.normalize", (uint32_t)normalize);
  return 0;
}
