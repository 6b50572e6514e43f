/* model/model_graph.h — the host decisions of captured decode steps (CUDA
 * graphs): which steps replay a captured forward instead of issuing their
 * kernels one by one, at which padded shape, and when a shape is captured.
 * Pure functions over plain values: tested on any machine
 * (tests/unit/test_model_graph.c); model_runner.c acts on them.
 *
 * Why. A decode step of a small model on a GPU is a few hundred short
 * kernels; launching them costs more host time than they take to run. A
 * captured graph launches them all in one call. A graph replays its kernels
 * with the pointers and scalars they were captured with, so a captured step
 * must look, to every kernel, exactly like the step captured: the same
 * buffers (the runner's, fixed at creation), the same row count and the
 * same attention shape. Hence the buckets:
 *
 *   rows   the step's sequences n (decode: one token, one logit row each)
 *          round up to a power of two, capped at max_rows (the capacities'
 *          minimum): 1, 2, 4, ..., max_rows. Rows n .. rows - 1 are padding.
 *   keys   the attention's longest context (keys, the new one included)
 *          rounds up to MODEL_GRAPH_MIN_KEYS · 2^k, capped at max_seq_len;
 *          the block table is uploaded `width` = ceil(keys / block_size)
 *          entries wide and the decode kernel provides splits for `keys`
 *          (kernels/cuda_geom.h), whatever the live rows hold.
 *
 * One graph per (rows, keys) pair, kept for the runner's life: the first
 * step of a pair runs its kernels uncaptured (a warm-up: cuBLAS picks and
 * loads its kernels, lazily loaded modules load, outside any capture), the
 * second captures them, later ones replay. Every buffer and scalar a graph
 * bakes in is a function of the pair, so no graph ever needs to be
 * captured again. A capture that fails is not retried: that pair runs
 * uncaptured.
 *
 * Padding rows do not change real rows: a padding row reads token 0 at
 * position 0 and its attention sees no key (cache_seqlens -1, kern.h) and
 * writes nothing to the cache; every other operation is row-independent
 * (kern.h: a row's result depends only on its own inputs), so the real
 * rows compute what they compute unpadded. The one caveat is cuBLAS, whose
 * GEMM algorithm may differ between n and `rows` rows (docs/architecture.md:
 * the known exception to batch invariance). */
#ifndef TRAM_MODEL_GRAPH_H
#define TRAM_MODEL_GRAPH_H

#include <stdint.h>

#define MODEL_GRAPH_MIN_KEYS 256 /* the smallest keys bucket: one decode split (CUDA_GEOM_SPLIT_KEYS) */
#define MODEL_GRAPH_MAX_BUCKETS 32

/* model_runner_config_t.graphs */
typedef enum model_graphs_mode {
  MODEL_GRAPHS_OFF = 0,    /* every step issues its kernels */
  MODEL_GRAPHS_ON = 1,     /* decode steps replay graphs, on a backend that has them */
  MODEL_GRAPHS_PADDED = 2, /* decode steps are padded to their bucket but not captured (on any
                              backend: tests the padding without a GPU) */
} model_graphs_mode_t;

/* The buckets of one runner, fixed at its creation. */
typedef struct model_graph_plan {
  int max_rows;     /* the largest rows bucket */
  int max_seq_len;  /* the largest keys bucket */
  int block_size;   /* the cache's */
  int n_rows, n_keys; /* buckets of each kind (0: graphs off) */
} model_graph_plan_t;

/* Sets up p for rows up to max_rows and contexts up to max_seq_len keys in
 * blocks of block_size. Returns 0, or -EINVAL for a non-positive value. */
int model_graph_plan_init(model_graph_plan_t *p, int max_rows, int max_seq_len, int block_size);

/* The rows bucket of n sequences: the smallest power of two >= n, capped at
 * p->max_rows; 0 when n < 1 or n > p->max_rows. *index (may be NULL) gets
 * its position among the buckets. */
int model_graph_rows(const model_graph_plan_t *p, int n, int *index);

/* The keys bucket of a longest context of max_k keys:
 * MODEL_GRAPH_MIN_KEYS · 2^k >= max_k, capped at p->max_seq_len; 0 when
 * max_k < 1 or max_k > p->max_seq_len. *width (may be NULL) gets the
 * block-table width it needs (ceil(keys / block_size)), *index its position. */
int model_graph_keys(const model_graph_plan_t *p, int max_k, int *width, int *index);

/* What a step is, as far as graphs care. */
typedef struct model_graph_step {
  int n_seqs, n_tokens;         /* the attention batch's */
  const int32_t *cu_seq_lens_q; /* [n_seqs + 1] */
  int max_seqlen_k;             /* a bound of the longest context (keys, the new one included) */
} model_graph_step_t;

typedef enum model_graph_why {
  MODEL_GRAPH_OK = 0,
  MODEL_GRAPH_NOT_DECODE, /* some sequence adds other than one token */
  MODEL_GRAPH_TOO_MANY,   /* more sequences than the largest rows bucket */
  MODEL_GRAPH_TOO_LONG,   /* a context past the largest keys bucket (or none) */
} model_graph_why_t;

/* The padded shape of an eligible step. */
typedef struct model_graph_key {
  int rows;  /* padded sequences = tokens = logit rows */
  int keys;  /* the attention's max_seqlen_k */
  int width; /* block-table entries per row */
  int slot;  /* index of the graph in a table of n_rows * n_keys */
} model_graph_key_t;

/* Whether step s may run padded (decode only: every sequence adds one
 * token; within the buckets), and at which shape (*key, on MODEL_GRAPH_OK). */
model_graph_why_t model_graph_eligible(const model_graph_plan_t *p, const model_graph_step_t *s,
                                       model_graph_key_t *key);

/* A short name of a model_graph_why_t, for logs. */
const char *model_graph_why_name(model_graph_why_t why);

/* What the runner does with a graph slot in a given state. */
typedef enum model_graph_state {
  MODEL_GRAPH_EMPTY = 0, /* the pair has not run */
  MODEL_GRAPH_WARM,      /* it ran once, uncaptured */
  MODEL_GRAPH_READY,     /* its graph is captured */
  MODEL_GRAPH_FAILED,    /* its capture failed */
} model_graph_state_t;
typedef enum model_graph_action {
  MODEL_GRAPH_EAGER = 0, /* issue the kernels (padded), no graph */
  MODEL_GRAPH_WARM_UP,   /* issue the kernels (padded); the slot becomes WARM */
  MODEL_GRAPH_CAPTURE,   /* capture now, then replay; the slot becomes READY (FAILED) */
  MODEL_GRAPH_REPLAY,    /* replay the captured graph */
} model_graph_action_t;

/* With mode ON and a backend that captures: EMPTY warms up, WARM captures,
 * READY replays, FAILED runs eager; otherwise eager. */
model_graph_action_t model_graph_action(model_graphs_mode_t mode, int backend_captures, model_graph_state_t state);

/* The padded inputs of an eligible step of n rows at `rows` (>= n): ids and
 * pos ([rows]) the step's tokens and positions, then token 0 at position 0;
 * logit_rows_out ([rows]) the step's n_logits logit rows, then the rows
 * n_logits .. rows - 1 (any in range: their logits are not read). */
void model_graph_pad_inputs(int n, int rows, const int32_t *tokens, const int32_t *positions, int n_logits,
                            const int32_t *logit_rows, int32_t *ids, int32_t *pos, int32_t *logit_rows_out);

#endif
