/* tests/gpu/check_graph.cu — captured replays (kern.h graph_begin, graph_end,
 * graph_launch) and the capture's fallback (kernels/cuda/graph.cu):
 *
 *   replay    a small chain (add, RMSNorm, scale) captured once, replayed
 *             over new inputs twice: each replay's bits equal an uncaptured
 *             run of the same operations on the same inputs, and the
 *             captured run itself wrote nothing;
 *   fallback  a launch that fails inside a capture (a block of 4096
 *             threads) does not abort: graph_end returns NULL, none of the
 *             capture's operations ran (the output keeps its poison), and
 *             the backend still runs the same operations uncaptured, with
 *             the bits of the first uncaptured run. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/cuda_common.cuh"
#include "tests/gpu/gpu_test.cuh"

#define G_N 8
#define G_DIM 1024

/* One block of 1024 threads at most: a launch of 4096 fails at once. */
static __global__ void too_many_threads_kernel(float *x) { x[threadIdx.x] = 0.f; }

typedef struct gchain {
  float *a, *b, *w, *y; /* device: inputs [G_N * G_DIM] (w: [G_DIM]) and output */
} gchain_t;

static void chain_issue(kern_backend_t *be, const gchain_t *c) {
  const int64_t n = (int64_t)G_N * G_DIM;
  be->add(be, c->y, c->a, c->b, n);
  be->rmsnorm(be, c->y, c->y, c->w, G_N, G_DIM, 1e-5f);
  be->scale(be, c->y, c->y, 0.5f, n);
}

/* An uncaptured run of the chain over the current inputs, into host `out`. */
static void chain_eager(gt_t *t, const gchain_t *c, float *out) {
  gt_poison(t, c->y, (size_t)G_N * G_DIM);
  chain_issue(t->be, c);
  gt_get(t, out, c->y, (size_t)G_N * G_DIM * 4);
}

static void new_inputs(gt_t *t, const gchain_t *c, float *host) {
  const size_t n = (size_t)G_N * G_DIM;
  gt_normal(t, host, n, 1.0f);
  gt_put(t, c->a, host, n * 4);
  gt_normal(t, host, n, 1.0f);
  gt_put(t, c->b, host, n * 4);
}

void gt_check_graph(gt_t *t) {
  kern_backend_t *be = t->be;
  if (!be->graph_begin) {
    gt_result(t, "graph: the backend captures", 0, "graph_begin is NULL");
    return;
  }
  const size_t n = (size_t)G_N * G_DIM;
  float *host = (float *)gt_malloc(n * 4), *want = (float *)gt_malloc(n * 4), *got = (float *)gt_malloc(n * 4);
  gchain_t c;
  c.a = (float *)gt_dev(t, n * 4);
  c.b = (float *)gt_dev(t, n * 4);
  c.y = (float *)gt_dev(t, n * 4);
  gt_normal(t, host, G_DIM, 0.2f);
  for (int i = 0; i < G_DIM; i++) host[i] += 1.0f;
  c.w = (float *)gt_dev_from(t, host, (size_t)G_DIM * 4);

  /* replay */
  new_inputs(t, &c, host);
  gt_poison(t, c.y, n);
  be->sync(be);
  be->graph_begin(be);
  chain_issue(be, &c);
  kern_graph_t *g = be->graph_end(be);
  gt_result(t, "graph capture: graph_end returns a graph", g != NULL, "%s", g ? "yes" : "NULL");
  if (g) {
    gt_get(t, got, c.y, n * 4);
    int untouched = 1;
    for (size_t i = 0; i < n && untouched; i++) untouched = isnan(got[i]);
    gt_result(t, "graph capture: nothing ran while capturing", untouched, "output %s",
              untouched ? "still poisoned" : "written");
    for (int round = 0; round < 2; round++) {
      char name[64];
      snprintf(name, sizeof name, "graph replay %d == uncaptured run", round + 1);
      new_inputs(t, &c, host);
      chain_eager(t, &c, want);
      gt_poison(t, c.y, n);
      be->graph_launch(be, g);
      gt_get(t, got, c.y, n * 4);
      if (gt_all_finite(got, n)) gt_check_same(t, name, got, want, n * 4);
      else gt_result(t, name, 0, "an element left unwritten");
    }
    be->graph_destroy(be, g);
  }

  /* fallback: a failing launch inside the capture */
  new_inputs(t, &c, host);
  chain_eager(t, &c, want);
  gt_poison(t, c.y, n);
  be->sync(be);
  kern_cuda_t *cu = kern_cuda(be);
  be->graph_begin(be);
  be->add(be, c.y, c.a, c.b, (int64_t)n);
  too_many_threads_kernel<<<1, 4096, 0, cu->stream>>>(c.y);
  CUDA_CHECK_LAUNCH(); /* records the failure while capturing (no abort) */
  be->scale(be, c.y, c.y, 0.5f, (int64_t)n);
  g = be->graph_end(be);
  gt_result(t, "graph fallback: a launch error inside a capture gives NULL", g == NULL, "%s",
            g ? "a graph" : "NULL");
  be->graph_destroy(be, g);
  gt_get(t, got, c.y, n * 4);
  int untouched = 1;
  for (size_t i = 0; i < n && untouched; i++) untouched = isnan(got[i]);
  gt_result(t, "graph fallback: nothing of the failed capture ran", untouched, "output %s",
            untouched ? "still poisoned" : "written");
  chain_eager(t, &c, got);
  if (gt_all_finite(got, n)) gt_check_same(t, "graph fallback: the uncaptured run afterwards", got, want, n * 4);
  else gt_result(t, "graph fallback: the uncaptured run afterwards", 0, "an element left unwritten");
  /* a second capture after the failed one works */
  be->graph_begin(be);
  chain_issue(be, &c);
  g = be->graph_end(be);
  gt_result(t, "graph fallback: the next capture succeeds", g != NULL, "%s", g ? "a graph" : "NULL");
  if (g) {
    gt_poison(t, c.y, n);
    be->graph_launch(be, g);
    gt_get(t, got, c.y, n * 4);
    gt_check_same(t, "graph fallback: the next capture's replay", got, want, n * 4);
    be->graph_destroy(be, g);
  }

  gt_free(t, c.a);
  gt_free(t, c.b);
  gt_free(t, c.w);
  gt_free(t, c.y);
  free(host);
  free(want);
  free(got);
}
