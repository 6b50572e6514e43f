/* bench/sampler.c — time per sampled token of samp_sample() at the
 * vocabulary sizes of SmolLM2 (49,152), Llama 3 (128,256) and Qwen2
 * (151,936), for each truncation, with a full sort of the vocabulary as the
 * baseline it avoids.
 *
 *   build/bench/sampler [ITERATIONS]
 *
 * Logits are normal with standard deviation 3 (peaked, like a model's) or
 * 0.5 (flat: the nucleus holds most of the vocabulary, top-p's worst case). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sample/sampler.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: steadier on a shared machine */
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t state = 88172645463325252ull;
static double uniform(void) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return (double)(state >> 11) * 0x1.0p-53;
}
static float normal(void) {
  double u = uniform() + 1e-300, v = uniform();
  return (float)(sqrt(-2 * log(u)) * cos(2 * M_PI * v));
}

typedef struct {
  float v;
  int32_t id;
} pair_t;

static int cmp_pair(const void *a, const void *b) {
  float x = ((const pair_t *)a)->v, y = ((const pair_t *)b)->v;
  return (x < y) - (x > y);
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 200;
  const int32_t vocabs[] = {49152, 128256, 151936};
  struct {
    const char *name;
    float t, top_p, min_p, sd;
    int32_t k;
    int penalties, logprobs;
  } cfgs[] = {
      {"greedy", 0, 1, 0, 3, 0, 0, 0},
      {"temperature 0.8", 0.8f, 1, 0, 3, 0, 0, 0},
      {"top_k 40", 0.8f, 1, 0, 3, 40, 0, 0},
      {"top_k 2000 (quickselect)", 0.8f, 1, 0, 3, 2000, 0, 0},
      {"top_p 0.9", 0.8f, 0.9f, 0, 3, 0, 0, 0},
      {"top_p 0.9, flat logits", 1.0f, 0.9f, 0, 0.5f, 0, 0, 0},
      {"min_p 0.05", 0.8f, 1, 0.05f, 3, 0, 0, 0},
      {"top_k 50 + top_p 0.95 + min_p 0.05", 0.8f, 0.95f, 0.05f, 3, 50, 0, 0},
      {"top_p 0.9 + penalties (2k prompt)", 0.8f, 0.9f, 0, 3, 0, 1, 0},
      {"top_p 0.9 + top_logprobs 5", 0.8f, 0.9f, 0, 3, 0, 0, 5},
  };
  printf("%-38s %10s %10s %10s   (CPU microseconds per token, %d iterations)\n", "", "49152", "128256", "151936",
         iters);
  for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs + 1; c++) {
    int baseline = c == sizeof cfgs / sizeof *cfgs;
    printf("%-38s", baseline ? "baseline: full sort of the vocabulary" : cfgs[c].name);
    for (size_t vi = 0; vi < sizeof vocabs / sizeof *vocabs; vi++) {
      int32_t V = vocabs[vi];
      float sd = baseline ? 3 : cfgs[c].sd;
      float *logits = malloc((size_t)V * sizeof *logits);
      for (int32_t i = 0; i < V; i++) logits[i] = normal() * sd;
      double t0, t1;
      if (baseline) {
        pair_t *p = malloc((size_t)V * sizeof *p);
        t0 = now();
        for (int it = 0; it < iters; it++) {
          for (int32_t i = 0; i < V; i++) p[i] = (pair_t){logits[i], i};
          qsort(p, (size_t)V, sizeof *p, cmp_pair);
        }
        t1 = now();
        free(p);
      } else {
        samp_params_t prm = samp_params_default();
        prm.temperature = cfgs[c].t;
        prm.top_k = cfgs[c].k;
        prm.top_p = cfgs[c].top_p;
        prm.min_p = cfgs[c].min_p;
        prm.has_seed = 1;
        prm.seed = 42;
        prm.top_logprobs = cfgs[c].logprobs;
        int32_t prompt[2000];
        for (int i = 0; i < 2000; i++) prompt[i] = (int32_t)(uniform() * V);
        if (cfgs[c].penalties) {
          prm.repetition_penalty = 1.1f;
          prm.frequency_penalty = 0.2f;
          prm.presence_penalty = 0.2f;
        }
        samp_state_t *s = samp_state_create(&prm, V, prompt, cfgs[c].penalties ? 2000 : 0);
        samp_ws_t *w = samp_ws_create(V);
        samp_result_t r;
        t0 = now();
        for (int it = 0; it < iters; it++) {
          samp_sample(s, w, logits, &r);
          samp_state_accept(s, r.token);
        }
        t1 = now();
        samp_ws_destroy(w);
        samp_state_destroy(s);
      }
      printf(" %10.1f", (t1 - t0) / iters * 1e6);
      free(logits);
    }
    printf("\n");
  }
  return 0;
}
