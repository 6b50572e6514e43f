/* kernels/cuda/scan.cuh — the one-block exclusive scan that turns per-
 * sequence counts into a work map on the device: out[b] (b in 0..n) is the
 * sum of count(i) over i < b. Each of SCAN_THREADS threads sums a run of
 * sequences, the runs are scanned in shared memory, then each thread writes
 * its run's prefix sums. Used for the varlen row-tile map (attn_varlen.cu)
 * and the decode split list (attn_decode.cu); their host references are
 * kernels/cuda_geom.c's. Call it from a kernel of one block of SCAN_THREADS. */
#ifndef TRAM_KERN_CUDA_SCAN_CUH
#define TRAM_KERN_CUDA_SCAN_CUH

#include <stdint.h>

#define SCAN_THREADS 1024

template <class Count>
static __device__ __forceinline__ void kern_cuda__block_scan(int32_t *out, int n, Count count) {
  __shared__ int32_t run[SCAN_THREADS];
  const int per = (n + SCAN_THREADS - 1) / SCAN_THREADS, i0 = threadIdx.x * per;
  const int i1 = min(i0 + per, n);
  int32_t sum = 0;
  for (int i = i0; i < i1; i++) sum += count(i);
  run[threadIdx.x] = sum;
  __syncthreads();
  for (int step = 1; step < SCAN_THREADS; step *= 2) { /* inclusive scan of the runs */
    const int32_t add = threadIdx.x >= step ? run[threadIdx.x - step] : 0;
    __syncthreads();
    run[threadIdx.x] += add;
    __syncthreads();
  }
  int32_t acc = run[threadIdx.x] - sum; /* counts before this thread's run */
  if (threadIdx.x == 0) out[0] = 0;
  for (int i = i0; i < i1; i++) {
    acc += count(i);
    out[i + 1] = acc;
  }
}

#endif
