/* tests/tools/sample.c — runs the sampler on one row of logits for the
 * pytest suite's float64 reference.
 *
 *   sample INPUT_JSON_FILE
 *
 * Input: {"logits": [V floats], "params": {temperature, top_k, top_p, min_p,
 * repetition_penalty, presence_penalty, frequency_penalty, seed, logprobs,
 * top_logprobs, logit_bias: {"id": bias}}, "prompt": [ids], "output": [ids
 * already generated], "draws": N, "steps": M}. Missing params keep
 * samp_params_default(); a seed given means has_seed.
 *
 * Output (JSON on stdout): "penalized" (the logits after bias and
 * penalties), "ids" and "probs" (what is left to draw from), "token",
 * "logprob" and "top" ([[id, logprob], ...]) of one samp_sample() call, then
 * with "draws": "counts" ([[id, times], ...]) over N more calls on the same
 * state, and with "steps": "sequence", M tokens sampled and accepted one
 * after the other (a fresh state from the same input). Exit 1 with a message
 * on bad input or a sampler error. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/sampler.h"

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 20, n = 0, got;
  char *buf = malloc(cap);
  while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (n + 1 == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  buf[n] = 0;
  return buf;
}

static double num(const cJSON *o, const char *key, double dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static int32_t *ids_of(const cJSON *a, size_t *n) {
  *n = (size_t)cJSON_GetArraySize(a);
  int32_t *ids = malloc((*n + 1) * sizeof *ids);
  size_t i = 0;
  for (const cJSON *e = a ? a->child : NULL; e; e = e->next) ids[i++] = (int32_t)e->valuedouble;
  return ids;
}

static void print_floats(const char *key, const float *x, size_t n) {
  printf("\"%s\": [", key);
  for (size_t i = 0; i < n; i++) printf(i ? ", %.9g" : "%.9g", x[i]);
  printf("]");
}

static samp_state_t *make_state(const samp_params_t *p, int32_t V, const int32_t *prompt, size_t n_prompt,
                                const int32_t *output, size_t n_output) {
  samp_state_t *s = samp_state_create(p, V, prompt, n_prompt);
  if (!s) exit(1);
  for (size_t i = 0; i < n_output; i++) samp_state_accept(s, output[i]);
  return s;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s INPUT_JSON_FILE\n", argv[0]);
    return 1;
  }
  char *text = read_file(argv[1]);
  cJSON *in = text ? cJSON_Parse(text) : NULL;
  if (!in) {
    fprintf(stderr, "cannot read %s as JSON\n", argv[1]);
    return 1;
  }
  const cJSON *jl = cJSON_GetObjectItemCaseSensitive(in, "logits");
  const cJSON *jp = cJSON_GetObjectItemCaseSensitive(in, "params");
  int32_t V = cJSON_GetArraySize(jl);
  float *logits = malloc((size_t)V * sizeof *logits), *work = malloc((size_t)V * sizeof *work);
  int32_t k = 0;
  for (const cJSON *e = jl ? jl->child : NULL; e; e = e->next) logits[k++] = (float)e->valuedouble;

  samp_params_t p = samp_params_default();
  p.temperature = (float)num(jp, "temperature", p.temperature);
  p.top_k = (int32_t)num(jp, "top_k", p.top_k);
  p.top_p = (float)num(jp, "top_p", p.top_p);
  p.min_p = (float)num(jp, "min_p", p.min_p);
  p.repetition_penalty = (float)num(jp, "repetition_penalty", p.repetition_penalty);
  p.presence_penalty = (float)num(jp, "presence_penalty", p.presence_penalty);
  p.frequency_penalty = (float)num(jp, "frequency_penalty", p.frequency_penalty);
  p.logprobs = (int32_t)num(jp, "logprobs", 0);
  p.top_logprobs = (int32_t)num(jp, "top_logprobs", 0);
  const cJSON *seed = cJSON_GetObjectItemCaseSensitive(jp, "seed");
  if (cJSON_IsNumber(seed)) {
    p.has_seed = 1;
    p.seed = (uint64_t)seed->valuedouble;
  }
  const cJSON *jb = cJSON_GetObjectItemCaseSensitive(jp, "logit_bias");
  samp_logit_bias_t *bias = malloc((size_t)(cJSON_GetArraySize(jb) + 1) * sizeof *bias);
  for (const cJSON *e = jb ? jb->child : NULL; e; e = e->next)
    bias[p.n_logit_bias++] = (samp_logit_bias_t){(int32_t)atoi(e->string), (float)e->valuedouble};
  p.logit_bias = bias;

  size_t n_prompt, n_output;
  int32_t *prompt = ids_of(cJSON_GetObjectItemCaseSensitive(in, "prompt"), &n_prompt);
  int32_t *output = ids_of(cJSON_GetObjectItemCaseSensitive(in, "output"), &n_output);
  samp_state_t *s = make_state(&p, V, prompt, n_prompt, output, n_output);
  samp_ws_t *w = samp_ws_create(V);

  memcpy(work, logits, (size_t)V * sizeof *work);
  samp_state_penalize(s, work);
  printf("{");
  print_floats("penalized", work, (size_t)V);
  const int32_t *ids;
  const float *probs;
  int n = samp_candidates(samp_state_params(s), w, work, &ids, &probs);
  if (n < 0) {
    fprintf(stderr, "samp_candidates failed: %d\n", n);
    return 1;
  }
  printf(", \"ids\": [");
  for (int i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
  printf("], ");
  print_floats("probs", probs, (size_t)n);

  samp_result_t r;
  if (samp_sample(s, w, logits, &r) < 0) {
    fprintf(stderr, "samp_sample failed\n");
    return 1;
  }
  printf(", \"token\": %d, \"logprob\": %.9g, \"top\": [", r.token, r.logprob);
  for (int i = 0; i < r.n_top; i++) printf(i ? ", [%d, %.9g]" : "[%d, %.9g]", r.top[i].token, r.top[i].logprob);
  printf("]");

  int64_t draws = (int64_t)num(in, "draws", 0);
  if (draws > 0) {
    int64_t *counts = calloc((size_t)V, sizeof *counts);
    for (int64_t d = 0; d < draws; d++) {
      samp_sample(s, w, logits, &r);
      counts[r.token]++;
    }
    printf(", \"counts\": [");
    int first = 1;
    for (int32_t i = 0; i < V; i++) {
      if (!counts[i]) continue;
      printf(first ? "[%d, %lld]" : ", [%d, %lld]", i, (long long)counts[i]);
      first = 0;
    }
    printf("]");
    free(counts);
  }
  int64_t steps = (int64_t)num(in, "steps", 0);
  if (steps > 0) {
    samp_state_t *s2 = make_state(&p, V, prompt, n_prompt, output, n_output);
    printf(", \"sequence\": [");
    for (int64_t i = 0; i < steps; i++) {
      samp_sample(s2, w, logits, &r);
      samp_state_accept(s2, r.token);
      printf(i ? ", %d" : "%d", r.token);
    }
    printf("]");
    samp_state_destroy(s2);
  }
  printf("}\n");
  samp_state_destroy(s);
  samp_ws_destroy(w);
  free(logits);
  free(work);
  free(bias);
  free(prompt);
  free(output);
  cJSON_Delete(in);
  free(text);
  return 0;
}
