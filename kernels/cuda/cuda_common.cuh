/* kernels/cuda/cuda_common.cuh — what every file of the CUDA backend shares:
 * the backend's state (kern_cuda_t), CUDA_CHECK / CUBLAS_CHECK, bf16
 * conversions and small launch helpers. CUDA C++ only (nvcc).
 *
 * Error policy (kern.h): a failing CUDA or cuBLAS call is an internal error
 * the backend cannot recover from (errors are sticky on a CUDA context), so
 * the macros log the statement, file, line and error, then abort. The only
 * failures that are returned instead are out-of-memory at alloc and at
 * weight_init, every failure inside kern_cuda_create, and any failure while
 * this thread captures a graph: nothing runs during a capture, so no error
 * there is sticky; the first is recorded, the capture goes on to graph_end,
 * which returns NULL (the caller runs that step uncaptured, graph.cu). */
#ifndef TRAM_KERN_CUDA_COMMON_CUH
#define TRAM_KERN_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "base/log.h"
#include "kernels/kern.h"
}
#include "kernels/cuda_geom.h"
#include "kernels/cuda/cuda_backend.h"

/* Logs the statement, file, line and the error's name and text, then
 * aborts; while this thread captures a graph, records the failure for
 * graph_end instead (graph.cu) and returns. */
void kern_cuda__fail(const char *stmt, const char *file, int line, cudaError_t err);
void kern_cuda__fail_cublas(const char *stmt, const char *file, int line, cublasStatus_t st);

#define CUDA_CHECK(stmt)                                                                   \
  do {                                                                                     \
    cudaError_t kc_err_ = (stmt);                                                          \
    if (kc_err_ != cudaSuccess) kern_cuda__fail(#stmt, __FILE__, __LINE__, kc_err_);       \
  } while (0)

#define CUBLAS_CHECK(stmt)                                                                  \
  do {                                                                                      \
    cublasStatus_t kc_st_ = (stmt);                                                         \
    if (kc_st_ != CUBLAS_STATUS_SUCCESS) kern_cuda__fail_cublas(#stmt, __FILE__, __LINE__, kc_st_); \
  } while (0)

/* After every kernel launch: a bad launch configuration shows up here. */
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

/* Bytes of the scratch workspace (bf16 activations of a GEMM chunk; weight
 * staging at load) and of the decode split-K workspace. */
#define KERN_CUDA_WORK_BYTES ((size_t)64 << 20)
#define KERN_CUDA_ATTN_WS_BYTES ((size_t)64 << 20)
#define KERN_CUDA_CUBLAS_WS_BYTES ((size_t)32 << 20)

typedef struct kern_cuda {
  kern_backend_t base; /* must stay first: a kern_backend_t * is a kern_cuda_t * */
  int device;
  int n_sm;              /* multiprocessors (read at creation) */
  cudaStream_t stream;   /* every operation runs on it, in issue order */
  cublasHandle_t cublas; /* bound to stream, with cublas_ws as its workspace */
  void *cublas_ws;       /* [KERN_CUDA_CUBLAS_WS_BYTES] */
  void *work;            /* [KERN_CUDA_WORK_BYTES] scratch, stream-ordered */
  float *attn_ws;        /* [attn_ws_bytes / 4] decode partials */
  size_t attn_ws_bytes;  /* KERN_CUDA_ATTN_WS_BYTES (tests/gpu may lower it: cuda_geom_decode_plan's windows) */
  size_t smem_optin;     /* shared memory a block may take (cudaDeviceProp.sharedMemPerBlockOptin) */
  int32_t *tiles;        /* [CUDA_GEOM_MAX_SEQS + 1] varlen row-tile starts, stream-ordered */
  int decode_splits_only; /* 0; tests/gpu sets 1 to run the split decode kernel where the run kernel would go */
  cudaEvent_t uploaded;  /* recorded after the last upload_async */
  int upload_pending;    /* 1 while `uploaded` marks an upload_async not yet waited for */
  int capturing;         /* 1 between graph_begin and graph_end (graph.cu) */
} kern_cuda_t;

static inline kern_cuda_t *kern_cuda(kern_backend_t *be) { return (kern_cuda_t *)be; }

/* Makes the backend's device current on the calling thread (the engine thread
 * may differ from the one that created the backend). */
void kern_cuda__enter(kern_cuda_t *cu);

/* 1 if every pointer is 16-byte aligned (vectorised paths). */
static inline int kern_cuda__aligned16(const void *a, const void *b = nullptr,
                                       const void *c = nullptr) {
  return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) & 15u) == 0;
}

/* Blocks for a grid-stride loop over `count` items with `threads` per block,
 * capped so the launch stays cheap (each thread then loops). */
static inline unsigned kern_cuda__grid(int64_t count, int threads) {
  int64_t blocks = (count + threads - 1) / threads;
  if (blocks > 65536) blocks = 65536;
  return (unsigned)(blocks < 1 ? 1 : blocks);
}

/* f32 → bf16, round to nearest even (the one conversion used everywhere:
 * KV cache writes, activations for GEMMs, weights, attention operands). */
__device__ __forceinline__ __nv_bfloat16 kern_cuda__bf16(float x) { return __float2bfloat16_rn(x); }

#endif
