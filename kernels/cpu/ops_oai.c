/* kernels/cpu/ops_oai.c — gpt-oss's clamped SwiGLU, the activation of its
 * experts (semantics in kernels/kern.h): the gate clamped from above, the
 * up projection on both sides, a sigmoid of alpha times the gate, and the
 * up term shifted by one. Element-wise, so a row's result cannot depend on
 * the rest of the batch or the thread count. */
#include <math.h>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/ops_cpu.h"

#define OAI_GRAIN 16384 /* elements per pool item */

typedef struct {
  float *y;
  const float *gate, *up;
  float alpha, limit;
  int64_t count;
} oai_job_t;

static void swiglu_oai_task(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  const oai_job_t *j = ctx;
  const int64_t hi = end * OAI_GRAIN < j->count ? end * OAI_GRAIN : j->count;
  for (int64_t i = begin * OAI_GRAIN; i < hi; i++) {
    const float g = fminf(j->gate[i], j->limit), u = fmaxf(fminf(j->up[i], j->limit), -j->limit);
    j->y[i] = g / (1.0f + expf(-j->alpha * g)) * (u + 1.0f);
  }
}

void kern_cpu_swiglu_oai(kern_backend_t *be, float *y, const float *gate, const float *up, int64_t count, float alpha,
                         float limit) {
  oai_job_t j = {y, gate, up, alpha, limit, count};
  kern_pool_for(kern_cpu(be)->pool, (count + OAI_GRAIN - 1) / OAI_GRAIN, 1, swiglu_oai_task, &j);
}
