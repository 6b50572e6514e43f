/* kernels/cpu/ops_gemma.c — the element-wise operations Gemma's block needs
 * beyond the Llama one: the GeGLU gate and a scale (the embedding times
 * sqrt(dim)); semantics in kernels/kern.h. Both are element-wise, so a
 * row's result cannot depend on the rest of the batch or the thread count. */
#include <math.h>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/ops_cpu.h"

#define GEMMA_GRAIN 16384 /* elements per pool item */

typedef struct {
  float *y;
  const float *a, *b;
  float s;
  int64_t count;
} gemma_job_t;

float kern_cpu_gelu_tanh(float x) {
  const float c = 0.7978845608028654f; /* sqrt(2 / pi) */
  return 0.5f * x * (1.0f + tanhf(c * fmaf(0.044715f * x, x * x, x)));
}

static void geglu_task(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const gemma_job_t *j = ctx;
  const int64_t hi = end * GEMMA_GRAIN < j->count ? end * GEMMA_GRAIN : j->count;
  for (int64_t i = begin * GEMMA_GRAIN; i < hi; i++) j->y[i] = kern_cpu_gelu_tanh(j->a[i]) * j->b[i];
}

static void scale_task(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const gemma_job_t *j = ctx;
  const int64_t hi = end * GEMMA_GRAIN < j->count ? end * GEMMA_GRAIN : j->count;
  for (int64_t i = begin * GEMMA_GRAIN; i < hi; i++) j->y[i] = j->a[i] * j->s;
}

static void run(kern_backend_t *be, const gemma_job_t *j, kern_pool_fn fn) {
  kern_pool_for(kern_cpu(be)->pool, (j->count + GEMMA_GRAIN - 1) / GEMMA_GRAIN, 1, fn, (void *)j);
}

void kern_cpu_geglu(kern_backend_t *be, float *y, const float *gate, const float *up, int64_t count) {
  gemma_job_t j = {y, gate, up, 0.0f, count};
  run(be, &j, geglu_task);
}

void kern_cpu_scale(kern_backend_t *be, float *y, const float *x, float s, int64_t count) {
  gemma_job_t j = {y, x, NULL, s, count};
  run(be, &j, scale_task);
}
