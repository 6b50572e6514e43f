/* kernels/cuda/matmul.cu — y = x · wᵀ through cuBLAS (see matmul.cuh).
 *
 * cuBLAS is column-major. The bf16 weight [rows, cols] row-major is, read
 * column-major, a cols × rows matrix with ld = cols, so op(A) = Aᵀ gives
 * rows × cols; x in bf16 [n, cols] is cols × n with ld = cols; y [n, rows] is
 * rows × n with ld = rows. That is the "TN" GEMM, both operands contiguous
 * along k, the layout tensor cores read best. */
#include "kernels/cuda/matmul.cuh"
#include "kernels/cuda/rmsnorm.cuh"
#include "kernels/cuda/weights.cuh"

static __global__ void to_bf16_vec4(uint2 *out, const float4 *x, int64_t n4) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4;
       i += (int64_t)gridDim.x * blockDim.x) {
    float4 v = x[i];
    __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y), b = __floats2bfloat162_rn(v.z, v.w);
    out[i] = make_uint2(*(uint32_t *)&a, *(uint32_t *)&b);
  }
}

static __global__ void to_bf16_scalar(__nv_bfloat16 *out, const float *x, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = kern_cuda__bf16(x[i]);
}

/* y [n, w->rows] = xb · wᵀ over chunks of rows that fit the workspace (a
 * multiple of 8, to keep chunk boundaries tensor-core friendly):
 * fill(xb, r0, nc) writes the chunk's nc bf16 input rows from row r0 into
 * the workspace xb, then one GEMM. */
template <typename FILL>
static void gemm_chunks(kern_cuda_t *cu, float *y, const kern_weight_t *w, int n, const char *what, FILL fill) {
  const int rows = (int)w->rows, cols = (int)w->cols;
  __nv_bfloat16 *xb = (__nv_bfloat16 *)cu->work;
  int64_t chunk = (int64_t)(KERN_CUDA_WORK_BYTES / sizeof(__nv_bfloat16)) / cols;
  if (chunk > 8) chunk -= chunk % 8;
  if (chunk < 1) {
    log_error("%s: %d input features do not fit the workspace", what, cols);
    abort(); /* programmer error: no supported model has rows this wide */
  }
  const float one = 1.0f, zero = 0.0f;
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int nc = (int)(n - r0 < chunk ? n - r0 : chunk);
    fill(xb, r0, nc);
    CUBLAS_CHECK(cublasGemmEx(cu->cublas, CUBLAS_OP_T, CUBLAS_OP_N, rows, nc, cols, &one,
                              kern_cuda__weight_data(w), CUDA_R_16BF, cols, xb, CUDA_R_16BF, cols,
                              &zero, y + r0 * rows, CUDA_R_32F, rows, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
  }
}

void kern_cuda__matmul(kern_backend_t *be, float *y, const float *x, const kern_weight_t *w, int n) {
  if (n <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  const int64_t cols = w->cols;
  gemm_chunks(cu, y, w, n, "matmul", [&](__nv_bfloat16 *xb, int64_t r0, int nc) {
    const float *xc = x + r0 * cols;
    const int64_t count = (int64_t)nc * cols;
    if (cols % 4 == 0 && kern_cuda__aligned16(xc)) {
      to_bf16_vec4<<<kern_cuda__grid(count / 4, 256), 256, 0, cu->stream>>>(
          (uint2 *)xb, (const float4 *)xc, count / 4);
    } else {
      to_bf16_scalar<<<kern_cuda__grid(count, 256), 256, 0, cu->stream>>>(xb, xc, count);
    }
    CUDA_CHECK_LAUNCH();
  });
}

void kern_cuda__rmsnorm_matmul(kern_backend_t *be, float *y, const float *x, const float *weight, float eps,
                               const kern_weight_t *w, int n) {
  if (n <= 0) return;
  kern_cuda_t *cu = kern_cuda(be);
  kern_cuda__enter(cu);
  const int dim = (int)w->cols;
  gemm_chunks(cu, y, w, n, "rmsnorm_matmul", [&](__nv_bfloat16 *xb, int64_t r0, int nc) {
    kern_cuda__rmsnorm_bf16(cu, xb, x + r0 * dim, weight, nc, dim, eps);
  });
}
