/* tests/gpu/gpu_test.cuh — what the GPU check program's files share: the
 * run's state (backend, seeded random source, pass/fail counts), result
 * reporting, device-buffer helpers over the backend table, and host-side
 * f16/bf16 conversions written from the IEEE formats.
 *
 * The program (gpu_check.cu) checks every kernel of kernels/cuda/ against a
 * float64 reference on fresh random inputs and times the issue's goals. It
 * builds with the CUDA toolkit alone (`make gpu-tests`). */
#ifndef TRAM_TESTS_GPU_TEST_CUH
#define TRAM_TESTS_GPU_TEST_CUH

#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "kernels/kern.h"
#include "tests/unit/testutil.h"
}
#include "kernels/cuda/cuda_backend.h"

typedef struct gt {
  kern_backend_t *be; /* the CUDA backend under test */
  tu_rng_t rng;       /* seeded from tu_seed() (printed; TRAM_TEST_SEED replays) */
  int quick;          /* smaller cases (e.g. under compute-sanitizer) */
  int pass, fail, warn;
} gt_t;

/* Records one check: prints "PASS name: detail" or "FAIL name: detail". */
void gt_result(gt_t *t, const char *name, int ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Records a known deviation that is not a failure ("WARN name: detail"). */
void gt_warn(gt_t *t, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Device buffers through the backend (abort when out of memory). */
void *gt_dev(gt_t *t, size_t bytes);
void *gt_dev_from(gt_t *t, const void *host, size_t bytes);
void gt_put(gt_t *t, void *dev, const void *host, size_t bytes);
void gt_get(gt_t *t, void *host, const void *dev, size_t bytes);
void gt_free(gt_t *t, void *dev);
/* Fills a device f32 buffer with NaN (poison before a kernel writes it). */
void gt_poison(gt_t *t, float *dev, size_t n);

/* Host copies that must not fail. */
void *gt_malloc(size_t bytes);

/* IEEE conversions: f32 → bf16 round to nearest even; bf16, f16 → f32
 * exactly; f32 → f16 round to nearest even (normal and subnormal range). */
uint16_t gt_bf16(float x);
float gt_bf16_f(uint16_t h);
float gt_f16_f(uint16_t h);
uint16_t gt_f16(float x);

/* Every element finite (a NaN left means an element was not written). */
int gt_all_finite(const float *x, size_t n);
/* Fills x[n] with normal values * scale, never zero. */
void gt_normal(gt_t *t, float *x, size_t n, float scale);

/* Checks got [n] against want [n]: all finite and rel L2 < tol. */
int gt_check_close(gt_t *t, const char *name, const float *got, const double *want, size_t n,
                   double tol);
/* Checks two buffers hold the same bits. */
int gt_check_same(gt_t *t, const char *name, const void *a, const void *b, size_t bytes);

/* Weights (check_weights.cu): every supported type, for loops; random
 * data of `type` (random quant bytes, finite f16 scales) of rows × cols in
 * the GGUF layout (*bytes: its size; free() it); one row dequantized in
 * float64 from the format; y [n, rows] = x [n, cols] · wᵀ in float64. */
extern const kern_type_t gt_weight_types[12];
uint8_t *gt_make_weight(gt_t *t, kern_type_t type, int64_t rows, int64_t cols, size_t *bytes);
void gt_ref_dequant_row(kern_type_t type, const uint8_t *src, int64_t cols, double *y);
void gt_ref_matmul(const float *x, const double *w, int n, int64_t rows, int64_t cols, double *y);

/* The check groups (check_*.cu) and the timings (bench.cu). */
void gt_check_ops(gt_t *t);
void gt_check_weights(gt_t *t);
void gt_check_join(gt_t *t); /* part of the weights group */
void gt_check_attn(gt_t *t);
void gt_check_sample(gt_t *t);
void gt_check_graph(gt_t *t);
void gt_check_families(gt_t *t);
int gt_bench(gt_t *t, const char *table_path);

#endif
