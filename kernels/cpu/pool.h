/* kernels/cpu/pool.h — the persistent thread pool of the CPU backend.
 *
 * Threads are created once, by kern_pool_create(), and live until
 * kern_pool_destroy(). kern_pool_for() splits a range of work items into
 * chunks that the calling thread and the workers take from a shared counter;
 * it returns when every chunk has run. Between calls the workers spin for a
 * short while (so back-to-back kernels of one engine step pay no wake-up),
 * then sleep on a condition variable (so an idle daemon burns no CPU).
 *
 * One thread at a time drives a pool (the engine thread); a chunk function
 * must not call kern_pool_for() on the same pool. */
#ifndef TRAM_KERN_POOL_H
#define TRAM_KERN_POOL_H

#include <stdint.h>

typedef struct kern_pool kern_pool_t;

/* Runs items [begin, end) of a job; tid is 0 for the calling thread and
 * 1..n_threads-1 for the workers (use it to index per-thread scratch). */
typedef void (*kern_pool_fn)(void *ctx, int64_t begin, int64_t end, int tid);

/* Creates a pool of n_threads threads in all, the caller included (so
 * n_threads - 1 workers). n_threads <= 0 means one per online CPU.
 * Returns NULL, after logging why, if a thread cannot be created. */
kern_pool_t *kern_pool_create(int n_threads);

/* Stops and joins the workers and frees the pool. NULL is a no-op. */
void kern_pool_destroy(kern_pool_t *pool);

/* Number of threads that run chunks, the caller included. */
int kern_pool_size(const kern_pool_t *pool);

/* Runs fn over [0, n) in chunks of `grain` items (the last may be shorter;
 * grain <= 0 picks n / (4 * threads), at least 1). Returns after all chunks
 * ran. Which thread runs which chunk varies from call to call: a chunk's
 * result must depend only on its items, never on tid or timing. */
void kern_pool_for(kern_pool_t *pool, int64_t n, int64_t grain, kern_pool_fn fn, void *ctx);

#endif
