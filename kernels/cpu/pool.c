/* kernels/cpu/pool.c — persistent thread pool (see pool.h).
 *
 * A job is published by bumping `gen`; workers that are spinning see it at
 * once, sleeping ones are woken by a broadcast. Chunks are handed out by an
 * atomic counter, so uneven chunks balance themselves. The caller runs chunks
 * too, then waits for `busy` (workers still inside the job) to reach zero.
 *
 * The sleep handshake: a worker increments `sleepers` and re-reads `gen`
 * under the mutex before waiting; the caller bumps `gen` and then reads
 * `sleepers` (both sequentially consistent), broadcasting under the mutex if
 * anyone may be asleep. One of the two always sees the other's write, so no
 * wake-up is lost. */
#include "kernels/cpu/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/log.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif

/* How long an idle worker spins before it sleeps, in pause iterations
 * (a pause is ~10-140 cycles: this is tens of microseconds to a millisecond). */
#define POOL_SPIN_ITERS 20000

typedef struct worker {
  kern_pool_t *pool;
  pthread_t thread;
  int tid;
} worker_t;

struct kern_pool {
  int n_threads;     /* caller included */
  worker_t *workers; /* [n_threads - 1] */

  /* the current job; written by the caller before `gen` is bumped */
  kern_pool_fn fn;
  void *ctx;
  int64_t n, grain;
  _Atomic int64_t next; /* first item not yet handed out */

  _Atomic uint64_t gen; /* job generation; bumped once per job */
  _Atomic int busy;     /* workers that have not finished the current job */
  _Atomic int sleepers; /* workers waiting (or about to wait) on `wake` */
  _Atomic int stop;
  int in_job; /* guards against nested use (programmer error) */

  pthread_mutex_t mu;
  pthread_cond_t wake;
};

static void run_chunks(kern_pool_t *p, int tid) {
  for (;;) {
    int64_t begin = atomic_fetch_add_explicit(&p->next, p->grain, memory_order_relaxed);
    if (begin >= p->n) break;
    int64_t end = begin + p->grain < p->n ? begin + p->grain : p->n;
    p->fn(p->ctx, begin, end, tid);
  }
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  kern_pool_t *p = w->pool;
  uint64_t seen = 0;
  for (;;) {
    /* wait for a new generation: spin first, then sleep */
    uint64_t g;
    int spins = 0;
    while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop)) {
      if (++spins < POOL_SPIN_ITERS) {
        cpu_relax();
        continue;
      }
      pthread_mutex_lock(&p->mu);
      atomic_fetch_add(&p->sleepers, 1);
      while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->wake, &p->mu);
      atomic_fetch_sub(&p->sleepers, 1);
      pthread_mutex_unlock(&p->mu);
      spins = 0;
    }
    if (atomic_load(&p->stop)) break;
    seen = g;
    run_chunks(p, w->tid);
    atomic_fetch_sub_explicit(&p->busy, 1, memory_order_release);
  }
  return NULL;
}

kern_pool_t *kern_pool_create(int n_threads) {
  if (n_threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    n_threads = n > 0 ? (int)n : 1;
  }
  kern_pool_t *p = calloc(1, sizeof *p);
  if (!p) abort();
  p->n_threads = n_threads;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  if (n_threads > 1) {
    p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
    if (!p->workers) abort();
  }
  for (int i = 0; i < n_threads - 1; i++) {
    worker_t *w = &p->workers[i];
    w->pool = p;
    w->tid = i + 1;
    int rc = pthread_create(&w->thread, NULL, worker_main, w);
    if (rc != 0) {
      log_error("kern_pool_create: cannot start worker %d of %d: %s", i + 1, n_threads - 1, strerror(rc));
      p->n_threads = i + 1; /* join only those started */
      kern_pool_destroy(p);
      return NULL;
    }
  }
  return p;
}

void kern_pool_destroy(kern_pool_t *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->stop, 1);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->n_threads - 1; i++) pthread_join(p->workers[i].thread, NULL);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->mu);
  free(p->workers);
  free(p);
}

int kern_pool_size(const kern_pool_t *p) { return p->n_threads; }

void kern_pool_for(kern_pool_t *p, int64_t n, int64_t grain, kern_pool_fn fn, void *ctx) {
  if (n <= 0) return;
  if (grain <= 0) {
    grain = n / (4 * (int64_t)p->n_threads);
    if (grain < 1) grain = 1;
  }
  /* one chunk or no workers: run inline, no hand-off */
  if (p->n_threads == 1 || grain >= n) {
    fn(ctx, 0, n, 0);
    return;
  }
  if (p->in_job) abort(); /* nested kern_pool_for on one pool */
  p->in_job = 1;
  p->fn = fn;
  p->ctx = ctx;
  p->n = n;
  p->grain = grain;
  atomic_store_explicit(&p->next, 0, memory_order_relaxed);
  atomic_store(&p->busy, p->n_threads - 1);
  atomic_fetch_add(&p->gen, 1); /* publishes the job (seq_cst) */
  if (atomic_load(&p->sleepers) > 0) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
  }
  run_chunks(p, 0);
  int spins = 0;
  while (atomic_load_explicit(&p->busy, memory_order_acquire) > 0) {
    if (++spins < POOL_SPIN_ITERS) {
      cpu_relax();
    } else {
      sched_yield();
    }
  }
  p->in_job = 0;
}
