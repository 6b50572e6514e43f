/* kernels/cuda/cuda_backend.cu — the CUDA backend's table, creation and
 * memory operations (see cuda_backend.h). The operations live one per file
 * in this folder. */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/add.cuh"
#include "kernels/cuda/attn_decode.cuh"
#include "kernels/cuda/attn_varlen.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/embed.cuh"
#include "kernels/cuda/gather_rows.cuh"
#include "kernels/cuda/gdn.cuh"
#include "kernels/cuda/graph.cuh"
#include "kernels/cuda/kv_gather.cuh"
#include "kernels/cuda/kv_write.cuh"
#include "kernels/cuda/matmul.cuh"
#include "kernels/cuda/moe.cuh"
#include "kernels/cuda/rmsnorm.cuh"
#include "kernels/cuda/rope.cuh"
#include "kernels/cuda/sample.cuh"
#include "kernels/cuda/swiglu.cuh"
#include "kernels/cuda/gemma_ops.cuh"
#include "kernels/cuda/weights.cuh"

void kern_cuda__fail(const char *stmt, const char *file, int line, cudaError_t err) {
  if (kern_cuda__capture_failed(stmt, file, line, cudaGetErrorString(err))) {
    (void)cudaGetLastError(); /* a launch error is not sticky: clear it */
    return;
  }
  log_error("CUDA error %s (%s) at %s:%d: %s", cudaGetErrorName(err), cudaGetErrorString(err),
            file, line, stmt);
  abort();
}

void kern_cuda__fail_cublas(const char *stmt, const char *file, int line, cublasStatus_t st) {
  if (kern_cuda__capture_failed(stmt, file, line, cublasGetStatusString(st))) return;
  log_error("cuBLAS error %s (%s) at %s:%d: %s", cublasGetStatusName(st), cublasGetStatusString(st),
            file, line, stmt);
  abort();
}

void kern_cuda__enter(kern_cuda_t *cu) { CUDA_CHECK(cudaSetDevice(cu->device)); }

/* --- memory ---------------------------------------------------------------- */

/* p when err is success; NULL when out of memory (not sticky: cleared);
 * aborts on any other error. */
static void *alloc_result(cudaError_t err, void *p) {
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    return NULL;
  }
  CUDA_CHECK(err);
  return p;
}

static void *cuda_alloc(kern_backend_t *be, size_t bytes) {
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  kern_cuda__not_capturing(cu, "alloc");
  void *p = NULL;
  /* cudaMalloc returns 256-byte aligned memory (kern.h asks for 64). */
  cudaError_t err = cudaMalloc(&p, bytes ? bytes : 256);
  return alloc_result(err, p);
}

static void cuda_free(kern_backend_t *be, void *buf) {
  if (!buf) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  kern_cuda__not_capturing(cu, "free");
  /* Work queued on the stream may still read buf: let it finish first. */
  CUDA_CHECK(cudaStreamSynchronize(cu->stream));
  CUDA_CHECK(cudaFree(buf));
}

/* From pageable host memory, cudaMemcpyAsync returns once src has been
 * consumed, so the caller may reuse src when upload returns. */
static void cuda_upload(kern_backend_t *be, void *dst, const void *src, size_t bytes) {
  if (!bytes) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  kern_cuda__not_capturing(cu, "upload");
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cu->stream));
}

static void cuda_download(kern_backend_t *be, void *dst, const void *src, size_t bytes) {
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  kern_cuda__not_capturing(cu, "download");
  if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cu->stream));
  CUDA_CHECK(cudaStreamSynchronize(cu->stream));
  cu->upload_pending = 0; /* the stream is idle: every upload_async has landed */
}

/* Page-locked, so cudaMemcpyAsync from it is a DMA the host does not wait
 * for (from pageable memory the runtime stages it synchronously). */
static void *cuda_host_alloc(kern_backend_t *be, size_t bytes) {
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  kern_cuda__not_capturing(cu, "host_alloc");
  void *p = NULL;
  cudaError_t err = cudaHostAlloc(&p, bytes ? bytes : 64, cudaHostAllocDefault);
  return alloc_result(err, p);
}

static void cuda_host_free(kern_backend_t *be, void *buf) {
  if (!buf) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  kern_cuda__not_capturing(cu, "host_free");
  CUDA_CHECK(cudaStreamSynchronize(cu->stream)); /* an upload from buf may be in flight */
  cu->upload_pending = 0;
  CUDA_CHECK(cudaFreeHost(buf));
}

/* The previous upload_async has finished once this returns (kern.h: its
 * source may then be rewritten); this one is marked by cu->uploaded. */
static void cuda_upload_async(kern_backend_t *be, void *dst, const void *src, size_t bytes) {
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  kern_cuda__not_capturing(cu, "upload_async");
  if (cu->upload_pending) CUDA_CHECK(cudaEventSynchronize(cu->uploaded));
  cu->upload_pending = 0;
  if (!bytes) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cu->stream));
  CUDA_CHECK(cudaEventRecord(cu->uploaded, cu->stream));
  cu->upload_pending = 1;
}

/* The layout, then the GPU's shared memory (sm_86/89: no head_dim 128;
 * sm_80: no 256),
 * then the decode workspace: refused at model load, never mid-serving. */
static int cuda_attn_supported(kern_backend_t *be, int n_heads, int n_kv_heads, int head_dim, char *err,
                               size_t err_len) {
  const kern_cuda_t *cu = kern_cuda(be);
  int rc = cuda_geom_attn_supported(n_heads, n_kv_heads, head_dim, err, err_len);
  if (rc == 0) rc = cuda_geom_attn_smem_fits(head_dim, cu->smem_optin, err, err_len);
  if (rc == 0) rc = cuda_geom_decode_fits(n_heads, head_dim, cu->attn_ws_bytes, err, err_len);
  return rc;
}

static void cuda_copy(kern_backend_t *be, void *dst, const void *src, size_t bytes) {
  if (!bytes) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  kern_cuda__not_capturing(cu, "copy");
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cu->stream));
}

static void cuda_sync(kern_backend_t *be) {
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  kern_cuda__not_capturing(cu, "sync");
  CUDA_CHECK(cudaStreamSynchronize(cu->stream));
  cu->upload_pending = 0;
}

/* Frees what create took; tolerates a half-built backend. Errors here are
 * not fatal (the context may already be gone at exit). */
static void cuda_release(kern_cuda_t *cu) {
  (void)cudaSetDevice(cu->device);
  if (cu->stream) (void)cudaStreamSynchronize(cu->stream);
  if (cu->cublas) (void)cublasDestroy(cu->cublas);
  if (cu->cublas_ws) (void)cudaFree(cu->cublas_ws);
  if (cu->work) (void)cudaFree(cu->work);
  if (cu->attn_ws) (void)cudaFree(cu->attn_ws);
  if (cu->tiles) (void)cudaFree(cu->tiles);
  if (cu->uploaded) (void)cudaEventDestroy(cu->uploaded);
  if (cu->stream) (void)cudaStreamDestroy(cu->stream);
  free(cu);
}

static void cuda_destroy(kern_backend_t *be) { cuda_release(kern_cuda(be)); }

static const kern_backend_t cuda_table = {
    .name = "cuda",
    .kv_type = KERN_BF16,
    .precision = KERN_PRECISION_EXACT, /* no fast kernels here (kern.h) */
    .attn_window_granule = 0,          /* the kernels' window start is not promised: release no block */
    .attn_sinks = 1, /* learned sinks joined once after the merge (attn_tile.cuh attn_sink_sum) */
    .packed_bytes = 0, /* counts none (kern.h): device weights are no repacked copies */
    .destroy = cuda_destroy,

    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy = cuda_copy,
    .sync = cuda_sync,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .upload_async = cuda_upload_async,
    .attn_supported = cuda_attn_supported,
    .read_gbps = nullptr, /* no probe: the gauge shows no bound */

    .weight_init = kern_cuda__weight_init,
    .weight_release = kern_cuda__weight_release,
    .weight_use = nullptr, /* uploads every weight at load: nothing deferred */
    .weight_join = kern_cuda__weight_join, /* QKV and gate/up as one GEMM each (model_join.c) */

    .matmul = kern_cuda__matmul,
    .rmsnorm_matmul = kern_cuda__rmsnorm_matmul,
    .embed = kern_cuda__embed,
    .rmsnorm = kern_cuda__rmsnorm,
    .rope = kern_cuda__rope,
    .swiglu = kern_cuda__swiglu,
    .geglu = kern_cuda__geglu,
    .glu_joined = kern_cuda__glu_joined,
    .swiglu_oai = kern_cuda__swiglu_oai,
    .scale = kern_cuda__scale,
    .add = kern_cuda__add,
    .add_bias = kern_cuda__add_bias,
    .gather_rows = kern_cuda__gather_rows,
    .moe_combine = kern_cuda__moe_combine, /* the experts' GEMMs: one matmul per chosen expert (moe.cuh) */

    .kv_write = kern_cuda__kv_write,
    .kv_gather = kern_cuda__kv_gather,
    .attn_varlen = kern_cuda__attn_varlen,
    .attn_varlen_paged = kern_cuda__attn_varlen_paged,
    .attn_decode = kern_cuda__attn_decode,

    .gdn_conv = kern_cuda__gdn_conv,
    .gdn_rule = kern_cuda__gdn_rule,
    .sigmoid_mul = kern_cuda__sigmoid_mul,
    .copy_cols = kern_cuda__copy_cols,
    .sample = kern_cuda__sample,

    .graph_begin = kern_cuda__graph_begin,
    .graph_end = kern_cuda__graph_end,
    .graph_launch = kern_cuda__graph_launch,
    .graph_destroy = kern_cuda__graph_destroy,

};

/* cudaMalloc for create: logs and returns -1 on failure. */
static int create_alloc(void **p, size_t bytes, const char *what) {
  cudaError_t err = cudaMalloc(p, bytes);
  if (err != cudaSuccess) {
    log_error("kern_cuda_create: cannot allocate the %s (%zu MiB): %s", what, bytes >> 20,
              cudaGetErrorString(err));
    *p = NULL;
    return -1;
  }
  return 0;
}

kern_backend_t *kern_cuda_create(int device) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    log_error("kern_cuda_create: no usable CUDA driver or device (%s: %s)", cudaGetErrorName(err),
              cudaGetErrorString(err));
    (void)cudaGetLastError();
    return NULL;
  }
  if (device < 0 || device >= count) {
    log_error("kern_cuda_create: no CUDA device %d (%d found)", device, count);
    return NULL;
  }
  cudaDeviceProp prop;
  err = cudaGetDeviceProperties(&prop, device);
  if (err != cudaSuccess) {
    log_error("kern_cuda_create: cannot read device %d: %s", device, cudaGetErrorString(err));
    return NULL;
  }
  if (prop.major < 8) {
    log_error("kern_cuda_create: %s has compute capability %d.%d; tram needs 8.0 or newer (bf16 "
              "tensor cores)",
              prop.name, prop.major, prop.minor);
    return NULL;
  }
  err = cudaSetDevice(device);
  if (err != cudaSuccess) {
    log_error("kern_cuda_create: cannot use device %d: %s", device, cudaGetErrorString(err));
    return NULL;
  }

  kern_cuda_t *cu = (kern_cuda_t *)calloc(1, sizeof *cu);
  if (!cu) abort();
  cu->base = cuda_table;
  cu->device = device;
  cu->n_sm = prop.multiProcessorCount;
  cu->attn_ws_bytes = KERN_CUDA_ATTN_WS_BYTES;
  cu->smem_optin = prop.sharedMemPerBlockOptin;
  char why[200];
  if (cuda_geom_attn_smem_fits(64, cu->smem_optin, why, sizeof why) != 0) { /* no head_dim at all */
    log_error("kern_cuda_create: %s: %s", prop.name, why);
    free(cu);
    return NULL;
  }

  err = cudaStreamCreateWithFlags(&cu->stream, cudaStreamNonBlocking);
  if (err != cudaSuccess) {
    log_error("kern_cuda_create: cannot create a stream: %s", cudaGetErrorString(err));
    cu->stream = NULL;
    cuda_release(cu);
    return NULL;
  }
  if (create_alloc(&cu->cublas_ws, KERN_CUDA_CUBLAS_WS_BYTES, "cuBLAS workspace") ||
      create_alloc(&cu->work, KERN_CUDA_WORK_BYTES, "scratch workspace") ||
      create_alloc((void **)&cu->attn_ws, cu->attn_ws_bytes, "attention workspace") ||
      create_alloc((void **)&cu->tiles, (CUDA_GEOM_MAX_SEQS + 1) * sizeof(int32_t), "varlen tile map")) {
    cuda_release(cu);
    return NULL;
  }
  err = cudaEventCreateWithFlags(&cu->uploaded, cudaEventDisableTiming);
  if (err != cudaSuccess) {
    log_error("kern_cuda_create: cannot create an event: %s", cudaGetErrorString(err));
    cu->uploaded = NULL;
    cuda_release(cu);
    return NULL;
  }
  cublasStatus_t st = cublasCreate(&cu->cublas);
  if (st != CUBLAS_STATUS_SUCCESS) {
    log_error("kern_cuda_create: cublasCreate failed: %s", cublasGetStatusString(st));
    cu->cublas = NULL;
    cuda_release(cu);
    return NULL;
  }
  st = cublasSetStream(cu->cublas, cu->stream);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetWorkspace(cu->cublas, cu->cublas_ws, KERN_CUDA_CUBLAS_WS_BYTES);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetPointerMode(cu->cublas, CUBLAS_POINTER_MODE_HOST);
  if (st != CUBLAS_STATUS_SUCCESS) { /* create returns NULL, never aborts */
    log_error("kern_cuda_create: cannot set up cuBLAS: %s", cublasGetStatusString(st));
    cuda_release(cu);
    return NULL;
  }
  err = kern_cuda__attn_varlen_init(cu->smem_optin);
  if (err == cudaSuccess) err = kern_cuda__attn_decode_init(cu->smem_optin);
  if (err != cudaSuccess) {
    log_error("kern_cuda_create: cannot raise the attention kernels' shared-memory limit: %s",
              cudaGetErrorString(err));
    (void)cudaGetLastError();
    cuda_release(cu);
    return NULL;
  }
  for (int d = 128; d <= 256; d *= 2)
    if (cuda_geom_attn_smem_fits(d, cu->smem_optin, why, sizeof why) != 0) {
      log_warn("cuda: %s: models of head_dim %d and up will be refused (%s)", prop.name, d, why);
      break;
    }

  log_info("cuda: %s (compute %d.%d, %d SMs, %.1f GiB), device %d", prop.name, prop.major,
           prop.minor, prop.multiProcessorCount, (double)prop.totalGlobalMem / (1 << 30), device);
  return &cu->base;
}
