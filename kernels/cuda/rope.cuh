/* kernels/cuda/rope.cuh — rotary position embedding (kern.h rope), in place.
 * One block per token: the angles pos * inv_freq[p] are formed and turned
 * into cos/sin in double precision once per token, then applied to every
 * head in f32. */
#ifndef TRAM_KERN_CUDA_ROPE_CUH
#define TRAM_KERN_CUDA_ROPE_CUH

#include "kernels/cuda/cuda_common.cuh"

/* Rotates x [n, n_heads, head_dim] at positions pos [n]; inv_freq [rot_dim / 2];
 * neox = 0 pairs (2p, 2p + 1), neox = 1 pairs (p, p + rot_dim / 2). */
void kern_cuda__rope(kern_backend_t *be, float *x, const int32_t *pos, int n, int n_heads,
                     int head_dim, int rot_dim, const float *inv_freq, int neox);

#endif
