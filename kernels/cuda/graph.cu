/* kernels/cuda/graph.cu — CUDA graphs by stream capture (see graph.cuh).
 *
 * The capture is thread-local (cudaStreamCaptureModeThreadLocal): only the
 * engine thread, which issues the operations, is held to the capture's
 * rules. cuBLAS captures its GEMMs as kernels over the workspace set at
 * creation (cublasSetWorkspace), so it allocates nothing while capturing.
 * A captured kernel keeps the pointers and scalars it was issued with: the
 * caller (model/model_graph.h) fixes every buffer and every launch-shape
 * scalar of the run it captures, and changes only buffer contents between
 * replays.
 *
 * A launch or cuBLAS call that fails while capturing does not abort
 * (cuda_common.cuh): nothing ran, so the context holds no sticky error; the
 * first failure is recorded here, later operations of the capture are still
 * issued (they fail or are recorded, and never run), and graph_end returns
 * NULL, after which the runner runs the step uncaptured, and that bucket
 * from then on (model/model_graph.h, MODEL_GRAPH_FAILED). */
#include "kernels/cuda/graph.cuh"

struct kern_graph {
  cudaGraphExec_t exec;
};

/* The capture this thread has under way (the capture mode is thread-local,
 * so only this thread's operations are recorded into it). */
static thread_local struct {
  int active; /* between graph_begin and graph_end */
  int failed; /* a launch or cuBLAS call failed since graph_begin */
} capture_state;

int kern_cuda__capture_failed(const char *stmt, const char *file, int line, const char *why) {
  if (!capture_state.active) return 0;
  if (!capture_state.failed)
    log_error("graph capture: %s at %s:%d: %s (the capture is dropped; the step runs uncaptured)", why, file,
              line, stmt);
  capture_state.failed = 1;
  return 1;
}

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
  capture_state.active = 1;
  capture_state.failed = 0;
  return 0;
}

kern_graph_t *kern_cuda__graph_end(kern_backend_t *be) {
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  cu->capturing = 0;
  const int op_failed = capture_state.failed;
  capture_state.active = capture_state.failed = 0;
  cudaGraph_t graph = NULL;
  cudaError_t err = cudaStreamEndCapture(cu->stream, &graph);
  if (op_failed) { /* logged by kern_cuda__capture_failed */
    (void)cudaGetLastError();
    if (graph) (void)cudaGraphDestroy(graph);
    return NULL;
  }
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
