/* kernels/cuda/graph.cu — CUDA graphs by stream capture (see graph.cuh).
 *
 * The capture is thread-local (cudaStreamCaptureModeThreadLocal): only the
 * engine thread, which issues the operations, is held to the capture's
 * rules. cuBLAS captures its GEMMs as kernels over the workspace set at
 * creation (cublasSetWorkspace), so it allocates nothing while capturing.
 * A captured kernel keeps the pointers and scalars it was issued with: the
 * caller (model/model_graph.h) fixes every buffer and every launch-shape
 * scalar of the run it captures, and changes only buffer contents between
 * replays. */
#include "kernels/cuda/graph.cuh"

struct kern_graph {
  cudaGraphExec_t exec;
};

void kern_cuda__not_capturing(const kern_cuda_t *cu, const char *what) {
  if (!cu->capturing) return;
  log_error("%s during a graph capture (kern.h: only operations may be captured)", what);
  abort();
}

int kern_cuda__graph_begin(kern_backend_t *be) {
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  kern_cuda__not_capturing(cu, "graph_begin");
  /* an upload_async still in flight is stream work before the capture: fine,
   * but the event it recorded must not be waited for inside the capture */
  if (cu->upload_pending) CUDA_CHECK(cudaEventSynchronize(cu->uploaded));
  cu->upload_pending = 0;
  CUDA_CHECK(cudaStreamBeginCapture(cu->stream, cudaStreamCaptureModeThreadLocal));
  cu->capturing = 1;
  return 0;
}

kern_graph_t *kern_cuda__graph_end(kern_backend_t *be) {
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  cu->capturing = 0;
  cudaGraph_t graph = NULL;
  cudaError_t err = cudaStreamEndCapture(cu->stream, &graph);
  if (err != cudaSuccess || !graph) {
    log_error("graph_end: the capture failed: %s", cudaGetErrorString(err));
    (void)cudaGetLastError();
    if (graph) (void)cudaGraphDestroy(graph);
    return NULL;
  }
  cudaGraphExec_t exec = NULL;
  err = cudaGraphInstantiateWithFlags(&exec, graph, 0);
  (void)cudaGraphDestroy(graph); /* the executable graph holds its own copy */
  if (err != cudaSuccess) {
    log_error("graph_end: cannot instantiate the captured graph: %s", cudaGetErrorString(err));
    (void)cudaGetLastError();
    return NULL;
  }
  kern_graph_t *g = (kern_graph_t *)calloc(1, sizeof *g);
  if (!g) abort();
  g->exec = exec;
  return g;
}

void kern_cuda__graph_launch(kern_backend_t *be, kern_graph_t *g) {
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  kern_cuda__not_capturing(cu, "graph_launch");
  CUDA_CHECK(cudaGraphLaunch(g->exec, cu->stream));
}

void kern_cuda__graph_destroy(kern_backend_t *be, kern_graph_t *g) {
  if (!g) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  CUDA_CHECK(cudaStreamSynchronize(cu->stream)); /* a replay may still run */
  cu->upload_pending = 0;
  CUDA_CHECK(cudaGraphExecDestroy(g->exec));
  free(g);
}
