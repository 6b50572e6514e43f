/* scheduler/sched_snapshot.h — snapshots of the engine at work, for the live
 * dashboard (server/srv_dash.c): the state of every KV block with its owner,
 * the steps since the last snapshot (prefill and decode tokens, attention
 * path, step time), the queues, the live sequences, and the statistics.
 *
 * Cost. Nothing is recorded while no one is subscribed, except two counters
 * per step. While someone is (sched_snap_subscribe), the engine thread keeps
 * a ring of per-step records (a few integers per step) and builds a snapshot
 * only when asked (sched_snap_request), at the end of its next step (an
 * idle engine is woken for it): one pass over the block table, the running
 * and waiting lists, and a copy of SCHED_SNAP_MAX_* entries at most. The
 * asker throttles (the server asks a few times a second), and so does the
 * engine: after a build that took T it builds again only once T / share has
 * passed (SCHED_SNAP_MAX_SHARE), so however large the cache, snapshots take
 * at most 1 % of its time (a huge cache gets fewer a second). The build's
 * time is measured (build_ns) so its cost can be shown.
 *
 * Size. A cache with more blocks than SCHED_SNAP_MAX_CELLS is drawn as
 * cells of blocks_per_cell consecutive blocks, each with its count of
 * blocks per state; sequences past SCHED_SNAP_MAX_SEQS and steps past
 * SCHED_SNAP_MAX_STEPS are counted, not listed. A snapshot is therefore at
 * most a few hundred KiB however big the cache is.
 *
 * Threads: subscribe, request and get are for any thread; the engine
 * thread builds and publishes (sched_snapshot.c); a published snapshot is
 * copied out under a lock the engine only ever try-locks, so a reader never
 * stalls a step. */
#ifndef TRAM_SCHED_SNAPSHOT_H
#define TRAM_SCHED_SNAPSHOT_H

#include <stdint.h>

#include "scheduler/sched.h"

#define SCHED_SNAP_MAX_CELLS 8192 /* block-map cells at most */
#define SCHED_SNAP_MAX_SEQS 64    /* live sequences listed at most */
#define SCHED_SNAP_MAX_STEPS 256  /* steps kept between two snapshots at most */
#define SCHED_SNAP_MAX_SHARE 0.01 /* of the engine thread's time spent building snapshots at most */

/* A KV block's state. */
typedef enum sched_blk_state {
  SCHED_BLK_FREE = 0,   /* on the free list, holding nothing findable */
  SCHED_BLK_CACHED = 1, /* on the free list, holding a prefix-cache entry (a hit would take it back) */
  SCHED_BLK_OWNED = 2,  /* held by one sequence */
  SCHED_BLK_SHARED = 3, /* held by several sequences (prefix sharing, n > 1 forks) */
  SCHED_BLK_N_STATES
} sched_blk_state_t;

/* "free", "cached", "owned", "shared". */
const char *sched_blk_state_name(sched_blk_state_t s);

/* One cell of the block map: blocks [first, first + blocks_per_cell). */
typedef struct sched_snap_cell {
  int32_t n[SCHED_BLK_N_STATES]; /* blocks per state */
  uint64_t owner;                /* request id of the first sequence found holding one of them; 0: none */
  int32_t owner_index;           /* that sequence's index in its request */
  int32_t max_refs;              /* the most references of one of its blocks */
} sched_snap_cell_t;

/* One engine step that ran a forward. */
typedef struct sched_snap_step {
  uint64_t step;           /* sched_stats_t.steps numbering */
  int64_t end_ns;          /* CLOCK_MONOTONIC when it ended */
  int64_t step_ns;         /* wall time of the whole step */
  int32_t prefill_tokens;  /* prompt chunks (and recomputation after preemption) */
  int32_t decode_tokens;   /* one generated token per sequence */
  int32_t seqs;            /* sequences in the batch */
  int32_t decode_path;     /* 1: the decode attention path ran; 0: varlen */
  int32_t preemptions;     /* sequences preempted while planning it */
  int32_t prefix_hit_blocks; /* blocks the prefix cache gave while planning it */
} sched_snap_step_t;

typedef enum sched_seq_state {
  SCHED_SEQ_ST_WAITING = 0,   /* never admitted yet */
  SCHED_SEQ_ST_PREEMPTED = 1, /* waiting again after a preemption */
  SCHED_SEQ_ST_PREFILL = 2,   /* running, prompt (or recomputation) not all computed */
  SCHED_SEQ_ST_DECODE = 3,    /* running, generating */
} sched_seq_state_t;

/* "waiting", "preempted", "prefill", "decode". */
const char *sched_seq_state_name(sched_seq_state_t s);

/* One live sequence. */
typedef struct sched_snap_seq {
  uint64_t id;             /* its request's id (sched_req_id) */
  int32_t index;           /* 0..n-1 in its request */
  int32_t state;           /* sched_seq_state_t */
  int32_t prompt_tokens;
  int32_t cached_tokens;   /* prompt tokens the prefix cache gave at its last admission */
  int32_t generated;       /* tokens sampled */
  int32_t blocks;          /* KV blocks it holds */
  int32_t admissions;      /* times admitted (> 1: it was preempted) */
  int64_t arrival_ns;      /* its request's submit */
  int64_t first_token_ns;  /* its request's first token; 0: none yet */
} sched_snap_seq_t;

/* One snapshot. Filled by sched_snap_get into a caller-owned value. */
typedef struct sched_snap {
  uint64_t seq;            /* 1, 2, ... per published snapshot */
  int64_t time_ns;         /* CLOCK_MONOTONIC when it was built */
  int64_t build_ns;        /* what building it cost the engine thread */
  uint64_t builds;         /* snapshots built so far */
  uint64_t build_ns_total; /* their summed cost */
  sched_stats_t stats;     /* as sched_get_stats would have answered at that moment */
  int32_t max_batch_tokens, max_seqs; /* the token budget and sequence budget of a step */
  /* queues: waiting = new + preempted (stats.waiting also counts the inbox) */
  int32_t running, waiting_new, preempted, inbox;
  /* the block map */
  int32_t num_blocks, blocks_per_cell, n_cells;
  int32_t blocks[SCHED_BLK_N_STATES]; /* blocks per state, whole cache */
  sched_snap_cell_t cells[SCHED_SNAP_MAX_CELLS];
  /* steps since the previous snapshot, oldest first */
  int32_t n_steps;
  uint64_t steps_dropped;  /* steps since the previous snapshot not kept (ring overrun) */
  sched_snap_step_t steps[SCHED_SNAP_MAX_STEPS];
  /* live sequences: running ones in admission order, then waiting ones */
  int32_t n_seqs, n_seqs_total;
  sched_snap_seq_t seqs[SCHED_SNAP_MAX_SEQS];
} sched_snap_t;

/* Adds (delta = 1) or removes (-1) a subscriber. While there is none the
 * engine keeps no step records and builds nothing. Any thread. */
void sched_snap_subscribe(sched_engine_t *e, int delta);

/* Asks the engine for a snapshot at the end of its next step, waking it
 * when it is idle. Any thread; cheap; a no-op without subscribers. */
void sched_snap_request(sched_engine_t *e);

/* Copies the latest published snapshot into *out if its seq is above
 * `after`. Returns 1 when copied, 0 when there is none newer. Any thread. */
int sched_snap_get(sched_engine_t *e, sched_snap_t *out, uint64_t after);

#endif
