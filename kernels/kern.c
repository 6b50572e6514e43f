/* kernels/kern.c — picks a compute backend by name (see kern.h). */
#include "kernels/kern.h"

#include <string.h>

#include "base/log.h"
#include "kernels/cpu/cpu_backend.h"
#ifdef TRAM_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

kern_backend_t *kern_backend_create_opts(const char *device, const kern_backend_opts_t *opts) {
  const kern_backend_opts_t def = {0};
  if (!opts) opts = &def;
  if (strcmp(device, "cpu") == 0) return kern_cpu_create(opts);
  if (strcmp(device, "cuda") == 0) {
#ifdef TRAM_CUDA
    if (opts->precision != KERN_PRECISION_EXACT)
      log_warn("device \"cuda\": precision \"fast\" has no CUDA kernels yet; the matmuls stay exact");
    return kern_cuda_create(0);
#else
    log_error("device \"cuda\": this tram was built without CUDA (build with nvcc present, or CUDA=1)");
    return NULL;
#endif
  }
  log_error("unknown device \"%s\" (expected \"cpu\" or \"cuda\")", device);
  return NULL;
}

kern_backend_t *kern_backend_create(const char *device, int n_threads) {
  const kern_backend_opts_t opts = {.n_threads = n_threads, .precision = KERN_PRECISION_EXACT};
  return kern_backend_create_opts(device, &opts);
}

void kern_backend_destroy(kern_backend_t *be) {
  if (be) be->destroy(be);
}

