/* kernels/cpu/pool.c — persistent thread pool (see pool.h).
 *
 * A job is published by bumping `epoch`; workers that are spinning see it at
 * once, sleeping ones are woken by a broadcast. Chunks are claimed one at a
 * time from `claim`, which packs the job's generation (high 32 bits) with the
 * next chunk index (low 32 bits), so a claim is a compare-and-swap that only
 * succeeds for the current job. The caller claims chunks too and returns when
 * `done` counts every chunk: it never waits for a worker that has not started
 * (a worker descheduled by a busy machine simply finds nothing left to claim),
 * only for chunks already running.
 *
 * Why a late worker is harmless: before the caller rewrites the fields for a
 * new job it closes the old one (its claim word set to CLAIM_CLOSED, an
 * index no job has, then a release fence). A worker reads the claim word
 * first (its generation must be the worker's), then the fields, then an
 * acquire fence, and only then claims with a compare-and-swap on the value
 * it read. If any field it read was already the next job's, the fences make
 * the close visible to that compare-and-swap, which fails: so a claim that
 * succeeds was made with the fields of the claimed job, and counted in that
 * job's `done`. (Checking the index against a chunk count read before the
 * close was the bug: a worker late for a 2-chunk job could read the next
 * job's 64 and the old fn or ctx, claim "chunk 2" of the finished job and
 * run it on a dead stack frame; issue 17's soak died of it after 55 min.)
 * The fields are relaxed atomics so such reads are not races.
 *
 * The sleep handshake: a worker increments `sleepers` and re-reads `epoch`
 * under the mutex before waiting; the caller bumps `epoch` and then reads
 * `sleepers` (both sequentially consistent), broadcasting under the mutex if
 * anyone may be asleep. One of the two always sees the other's write, so no
 * wake-up is lost. */
#include "kernels/cpu/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/fault.h"
#include "base/log.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif

/* The low 32 bits of a closed job's claim word: no chunk index reaches it. */
#define CLAIM_CLOSED UINT32_MAX

/* How long an idle worker spins before it sleeps, in pause iterations
 * (a pause is ~10-140 cycles: this is tens of microseconds to a millisecond). */
#define POOL_SPIN_ITERS 20000
/* ... and yields the core every this many iterations while it spins. */
#define POOL_YIELD_EVERY 512

typedef struct worker {
  kern_pool_t *pool;
  pthread_t thread;
  int tid;
} worker_t;

struct kern_pool {
  int n_threads;     /* caller included */
  worker_t *workers; /* [n_threads - 1] */

  /* the current job: written (relaxed) by the caller before `epoch` is bumped,
   * rewritten only once all its chunks are done */
  _Atomic(kern_pool_fn) fn;
  _Atomic(void *) ctx;
  _Atomic int64_t n, grain;
  _Atomic uint32_t n_chunks;

  _Atomic uint64_t claim; /* generation << 32 | next chunk index */
  _Atomic uint32_t done;  /* chunks of the current job finished */
  _Atomic uint32_t epoch;   /* job number; bumped once per job */
  _Atomic int sleepers;   /* workers waiting (or about to wait) on `wake` */
  _Atomic int stop;
  int in_job; /* guards against nested use (programmer error) */

  pthread_mutex_t mu;
  pthread_cond_t wake;
};

/* Claims and runs chunks of job `g` until none is left (or the job is over). */
static void run_chunks(kern_pool_t *p, uint32_t g, int tid) {
  uint64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
  if ((uint32_t)(c >> 32) != g) return; /* over, or not ours: read nothing */
  kern_pool_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
  void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
  int64_t n = atomic_load_explicit(&p->n, memory_order_relaxed);
  int64_t grain = atomic_load_explicit(&p->grain, memory_order_relaxed);
  uint32_t n_chunks = atomic_load_explicit(&p->n_chunks, memory_order_relaxed);
  /* pairs with the caller's release fence after a close: if a field above was
   * the next job's, the CAS below sees the close and fails */
  atomic_thread_fence(memory_order_acquire);
  for (;;) {
    if ((uint32_t)(c >> 32) != g || (uint32_t)c >= n_chunks) return;
    if (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1, memory_order_acq_rel,
                                               memory_order_acquire))
      continue; /* c now holds the current value */
    int64_t begin = (int64_t)(uint32_t)c * grain;
    int64_t end = begin + grain < n ? begin + grain : n;
    fn(ctx, begin, end, tid);
    atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    c = atomic_load_explicit(&p->claim, memory_order_acquire);
  }
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  kern_pool_t *p = w->pool;
  uint32_t seen = 0;
  char name[16]; /* as `top -H` and /proc/PID/task/TID/comm show it */
  snprintf(name, sizeof name, "tram-cpu%d", w->tid);
  pthread_setname_np(pthread_self(), name);
  for (;;) {
    /* wait for a new generation: spin first, then sleep */
    uint32_t g;
    int spins = 0;
    while ((g = atomic_load(&p->epoch)) == seen && !atomic_load(&p->stop)) {
      if (++spins < POOL_SPIN_ITERS) {
        /* between jobs, let any other runnable thread on this core (the
         * HTTP loop, woken by the engine) go first: a yield with nobody
         * waiting returns at once */
        if (spins % POOL_YIELD_EVERY == 0) sched_yield();
        cpu_relax();
        continue;
      }
      pthread_mutex_lock(&p->mu);
      atomic_fetch_add(&p->sleepers, 1);
      while (atomic_load(&p->epoch) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->wake, &p->mu);
      atomic_fetch_sub(&p->sleepers, 1);
      pthread_mutex_unlock(&p->mu);
      spins = 0;
    }
    if (atomic_load(&p->stop)) break;
    seen = g;
    if (fault_hit("pool_late")) sched_yield(); /* test builds: a worker late for job g */
    run_chunks(p, g, w->tid);
  }
  return NULL;
}

kern_pool_t *kern_pool_create(int n_threads) {
  if (n_threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    n_threads = n > 0 ? (int)n : 1;
  }
  kern_pool_t *p = xcalloc(1, sizeof *p);
  p->n_threads = n_threads;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  if (n_threads > 1) {
    p->workers = xcalloc((size_t)n_threads - 1, sizeof *p->workers);
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
  int64_t n_chunks = (n + grain - 1) / grain;
  if (n_chunks >= CLAIM_CLOSED) abort(); /* programmer error: use a larger grain */
  if (p->in_job) abort();             /* nested kern_pool_for on one pool */
  p->in_job = 1;
  const uint32_t prev = atomic_load_explicit(&p->epoch, memory_order_relaxed);
  uint32_t g = prev + 1;
  if (g == 0) g = 1; /* 0 is the workers' initial "seen" */
  /* close the previous job before its fields change (see the top of the file) */
  atomic_store_explicit(&p->claim, (uint64_t)prev << 32 | CLAIM_CLOSED, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
  atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
  atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
  atomic_store_explicit(&p->n, n, memory_order_relaxed);
  atomic_store_explicit(&p->grain, grain, memory_order_relaxed);
  atomic_store_explicit(&p->n_chunks, (uint32_t)n_chunks, memory_order_relaxed);
  if (fault_hit("pool_late")) sched_yield(); /* test builds: widen the hand-off's window */
  atomic_store_explicit(&p->done, 0, memory_order_relaxed);
  atomic_store_explicit(&p->claim, (uint64_t)g << 32, memory_order_release);
  atomic_store(&p->epoch, g); /* publishes the job (seq_cst) */
  if (atomic_load(&p->sleepers) > 0) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
  }
  run_chunks(p, g, 0);
  /* every chunk is claimed now; wait for those still running elsewhere */
  int spins = 0;
  while (atomic_load_explicit(&p->done, memory_order_acquire) < (uint32_t)n_chunks) {
    if (++spins < POOL_SPIN_ITERS && spins % POOL_YIELD_EVERY != 0) {
      cpu_relax();
    } else {
      sched_yield();
    }
  }
  p->in_job = 0;
}
