/* kernels/kern.c — picks a compute backend by name (see kern.h). */
#include "kernels/kern.h"

#include <string.h>

#include "base/log.h"
#include "kernels/cpu/cpu_backend.h"
#ifdef TRAM_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

kern_backend_t *kern_backend_create(const char *device, int n_threads) {
  if (strcmp(device, "cpu") == 0) return kern_cpu_create(n_threads);
  if (strcmp(device, "cuda") == 0) {
#ifdef TRAM_CUDA
    return kern_cuda_create(0);
#else
    log_error("device \"cuda\": this tram was built without CUDA (build with nvcc present, or CUDA=1)");
    return NULL;
#endif
  }
  log_error("unknown device \"%s\" (expected \"cpu\" or \"cuda\")", device);
  return NULL;
}

void kern_backend_destroy(kern_backend_t *be) {
  if (be) be->destroy(be);
}

int kern_attn_head_dim_ok(const kern_backend_t *be, int head_dim) {
  if (strcmp(be->name, "cuda") == 0) return head_dim == 64 || head_dim == 128;
  return head_dim > 0;
}
