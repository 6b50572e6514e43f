/* kernels/cpu/cpu_backend.h — the CPU backend: host memory, the persistent
 * thread pool, and the CPU kernels behind the kern_backend_t table.
 *
 * The kernels live in their own files (one family each) and take the
 * kern_cpu_t, which gives them the pool and per-thread scratch. */
#ifndef TRAM_KERN_CPU_BACKEND_H
#define TRAM_KERN_CPU_BACKEND_H

#include "kernels/cpu/pool.h"
#include "kernels/kern.h"

typedef struct kern_cpu {
  kern_backend_t base; /* must stay first: a kern_backend_t * is a kern_cpu_t * */
  kern_pool_t *pool;   /* owned */
  int n_threads;
  void *scratch;        /* owned: see kern_cpu_scratch() */
  size_t scratch_bytes; /* its size */
  int repack;           /* 1: weight_init repacks what the fast kernels have a layout for */
  int gdn_chunked;      /* 1 runs a sequence's whole 64-row chunks of a step in the delta rule's chunked
                         * form (tests, benchmarks; 0 in serving: not faster on CPU, and its bits would
                         * depend on where the scheduler cuts a prompt) */
  int gdn_portable;     /* tests, benchmarks: 1 runs the Gated DeltaNet ops on the portable primitives */
} kern_cpu_t;

/* Creates the CPU backend with opts->n_threads threads (<= 0: one per
 * online CPU), the matmul arithmetic opts->precision and, unless
 * opts->keep_views, repacked weights for the fast path. Returns NULL after
 * logging why. Destroy with kern_backend_destroy(). */
kern_backend_t *kern_cpu_create(const kern_backend_opts_t *opts);

/* A 64-byte aligned scratch buffer of at least `bytes` bytes, owned by the
 * backend, valid until the next call (it grows, never shrinks, so steady state
 * allocates nothing). One kernel uses it during its own call, on the engine
 * thread, and splits it between pool threads itself. Aborts when out of
 * memory. */
void *kern_cpu_scratch(kern_cpu_t *cpu, size_t bytes);

/* The kern_cpu_t behind a CPU backend. */
static inline kern_cpu_t *kern_cpu(kern_backend_t *be) { return (kern_cpu_t *)be; }

#endif
