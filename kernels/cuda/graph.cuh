/* kernels/cuda/graph.cuh — captured replays of the stream's operations
 * (kern.h graph_begin, graph_end, graph_launch, graph_destroy): CUDA graphs
 * by stream capture. */
#ifndef TRAM_KERN_CUDA_GRAPH_CUH
#define TRAM_KERN_CUDA_GRAPH_CUH

#include "kernels/cuda/cuda_common.cuh"

int kern_cuda__graph_begin(kern_backend_t *be);
kern_graph_t *kern_cuda__graph_end(kern_backend_t *be);
void kern_cuda__graph_launch(kern_backend_t *be, kern_graph_t *g);
void kern_cuda__graph_destroy(kern_backend_t *be, kern_graph_t *g);

/* While this thread captures a graph: records that `stmt` (at file:line)
 * failed with `why`, logs the first such failure, and returns 1 (graph_end
 * will return NULL); otherwise returns 0 (the caller aborts). */
int kern_cuda__capture_failed(const char *stmt, const char *file, int line, const char *why);

/* Aborts, naming `what`, when a capture is under way: the memory, copy and
 * sync operations call it (kern.h: a programmer error). */
void kern_cuda__not_capturing(const kern_cuda_t *cu, const char *what);

#endif
