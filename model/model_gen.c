/* model/model_gen.c — the model file's generation defaults (model.h:
 * model_gen_defaults): the sampling its authors recommend, read from the
 * keys llama.cpp's converter writes (general.sampling.*) and checked against
 * the ranges a request may ask (sample/samp_params.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/log.h"
#include "gguf/gguf.h"
#include "model/model.h"

/* The keys, and the request field each one sets. */
static const struct {
  const char *key, *field;
} KEYS[] = {
    {"general.sampling.temp", "temperature"},
    {"general.sampling.top_k", "top_k"},
    {"general.sampling.top_p", "top_p"},
    {"general.sampling.min_p", "min_p"},
    {"general.sampling.penalty_repeat", "repetition_penalty"},
};

#define MAX_NEW_TOKENS "tram.sampling.max_new_tokens"
#define PREFIX "general.sampling."

/* Key k's value as a number (any integer or float type): 0, -ENOENT, or
 * -EINVAL (another type). */
static int number(const gguf_ctx_t *g, const char *k, double *v) {
  float f;
  int64_t i;
  int rc = gguf_get_f32(g, k, &f);
  if (rc == 0) *v = f;
  else if (rc == -EINVAL && (rc = gguf_get_i64(g, k, &i)) == 0) *v = (double)i;
  return rc;
}

/* Whether key names one of KEYS. */
static bool known(gguf_str_t key) {
  for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0]; i++)
    if (gguf_str_eq(key, KEYS[i].key)) return true;
  return false;
}

void model_gen_defaults(const gguf_ctx_t *g, samp_gen_defaults_t *out) {
  memset(out, 0, sizeof *out);
  out->samp = samp_params_default();
  for (size_t k = 0; k < sizeof KEYS / sizeof KEYS[0]; k++) {
    double v;
    const int rc = number(g, KEYS[k].key, &v);
    if (rc == -ENOENT) continue;
    int i = 0;
    while (i < samp_n_fields && strcmp(samp_fields[i].name, KEYS[k].field) != 0) i++;
    char range[64];
    if (rc != 0) {
      log_warn("model: %s is not a number: ignored", KEYS[k].key);
    } else if (!samp_field_accepts(&samp_fields[i], v)) {
      log_warn("model: %s = %g is not a %s tram accepts %s: ignored", KEYS[k].key, v, samp_fields[i].name,
               samp_field_range(&samp_fields[i], range, sizeof range));
    } else {
      samp_field_set(&out->samp, &samp_fields[i], v);
      out->fields |= 1u << i;
    }
  }
  double v;
  const int rc = number(g, MAX_NEW_TOKENS, &v);
  if (rc == 0 && v >= 1 && v <= INT32_MAX && v == (double)(int64_t)v) out->max_tokens = (int32_t)v;
  else if (rc != -ENOENT) log_warn("model: %s is not a positive integer: ignored", MAX_NEW_TOKENS);
  for (uint64_t i = 0; i < gguf_kv_count(g); i++) {
    const gguf_kv_t *kv = gguf_kv_at(g, i);
    if (kv->key.len > strlen(PREFIX) && memcmp(kv->key.ptr, PREFIX, strlen(PREFIX)) == 0 && !known(kv->key))
      log_info("model: %.*s: tram's sampler has no such setting: ignored", (int)kv->key.len, kv->key.ptr);
  }
}
