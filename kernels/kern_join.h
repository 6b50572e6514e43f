/* kernels/kern_join.h — the layout of a joined weight (kern.h weight_join):
 * n parts of the same input width stacked by rows, parts[0] first, so one
 * GEMM computes all of them and each output row holds the parts' outputs
 * side by side. Plain C, no backend: the CUDA backend lays the joined bf16
 * matrix out by it (kernels/cuda/weights.cu) and the model splits the
 * joined outputs by it (model/model_runner.c); tests/unit/test_kern_join.c
 * tests it on any machine, for every weight type and Gemma 4's per-layer
 * head sizes. */
#ifndef TRAM_KERN_JOIN_H
#define TRAM_KERN_JOIN_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kern.h"

#define KERN_JOIN_MAX_PARTS 4

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kern_join_plan {
  int n;                             /* parts */
  int64_t rows, cols;                /* the joined matrix: [Σ rows, cols] */
  int64_t row0[KERN_JOIN_MAX_PARTS]; /* part i's first row = its first output column */
  kern_type_t type;                  /* the parts' type when they share one, else KERN_BF16 */
} kern_join_plan_t;

/* Plans the join of parts[0..n): 0, or -EINVAL with the reason in err when
 * they do not join (n outside 2..KERN_JOIN_MAX_PARTS, a part with no rows,
 * widths that differ, more than INT_MAX rows in all, or a joined matrix of
 * more than SIZE_MAX / 4 elements). The parts' types do not matter: the
 * backend that joins holds every weight in one element type. */
int kern_join_plan(kern_join_plan_t *p, const kern_weight_t *const *parts, int n, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif

#endif
