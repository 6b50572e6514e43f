/* kernels/cuda/moe.cuh — the mixture-of-experts operations (kern.h
 * moe_combine, swiglu_oai), f32. The experts' GEMMs are not here: model/
 * model_moe.c groups a step's rows by expert on the host and runs one
 * matmul (cuBLAS, matmul.cu) per chosen expert over the rows that chose
 * it, on the gathered rows (gather_rows.cu); these kernels are what is
 * left: gpt-oss's clamped SwiGLU between the expert GEMMs, and the
 * weighted sum of each row's terms. */
#ifndef TRAM_KERN_CUDA_MOE_CUH
#define TRAM_KERN_CUDA_MOE_CUH

#include "kernels/cuda/cuda_common.cuh"

/* y[t, :] = Σ_{j < k} w[t·k + j] · src[slot[t·k + j], :], term j after
 * term j - 1; y [n, dim] must not alias src. */
void kern_cuda__moe_combine(kern_backend_t *be, float *y, const float *src, const int32_t *slot, const float *w,
                            int n, int k, int dim);

/* g = min(gate, limit), u = clamp(up, -limit, limit),
 * y = g · sigmoid(alpha · g) · (u + 1); y may alias gate. */
void kern_cuda__swiglu_oai(kern_backend_t *be, float *y, const float *gate, const float *up, int64_t count,
                           float alpha, float limit);

#endif
