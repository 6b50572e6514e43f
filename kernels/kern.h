/* kernels/kern.h — the compute backend interface.
 *
 * The model forward, the paged attention forward and the KV cache are written
 * against this table of operations; the CPU backend (kernels/cpu/) and the
 * CUDA backend (kernels/cuda/) implement it. Picking one is a start-up choice
 * (`--device cpu|cuda`); nothing above this line knows which runs.
 *
 * Memory. Every tensor pointer an operation takes is a *device buffer*: memory
 * from be->alloc() (for the CPU backend, ordinary host memory). Code above the
 * backend never dereferences device buffers; it moves bytes with upload() and
 * download(). Activations are f32; the KV cache holds be->kv_type elements.
 *
 * Ordering. Operations run in the order they are issued (a CUDA backend puts
 * them on one stream). download() and sync() wait for everything before them.
 *
 * Errors. Operations do not fail on valid arguments; arguments are the
 * caller's responsibility (the model and attention code validate input before
 * it gets here). A backend aborts, with the statement, file and line, on an
 * internal failure it cannot recover from (a sticky CUDA error).
 *
 * Determinism and batch invariance. The result for one row (a token, or one
 * query row of attention) must depend only on that row's inputs — never on
 * the other rows in the call, the number of threads or the scheduling — and
 * be bitwise reproducible. In particular attn_decode, attn_varlen_paged and
 * attn_varlen give the same bits for the same query row and keys. The
 * scheduler relies on this: a request's greedy output does not depend on what
 * else is in its batch, on chunked prefill, or on preemption.
 *
 * Shapes are written [outer, ..., inner], row-major, innermost contiguous. */
#ifndef TRAM_KERN_H
#define TRAM_KERN_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kern_types.h"

typedef struct kern_backend kern_backend_t;
struct kern_sample_row; /* kernels/kern_sample.h */
struct kern_sample_op;
struct kern_sample_out;
typedef struct kern_graph kern_graph_t; /* a captured run of operations (graph_end) */

/* The arithmetic of the matmuls (`--precision`). EXACT: f32 activations on
 * the exactly dequantized weights. FAST: activations quantized to int16 per
 * 32-element block and integer dot products (CPU: kernels/cpu/matmul_q8.h;
 * weight types without such a kernel stay exact). Both are deterministic
 * and batch invariant; they differ from each other in the last digits. */
typedef enum kern_precision { KERN_PRECISION_EXACT = 0, KERN_PRECISION_FAST = 1 } kern_precision_t;

/* Options of kern_backend_create_opts. */
typedef struct kern_backend_opts {
  int n_threads;              /* CPU threads; <= 0: one per online CPU (CUDA: ignored) */
  kern_precision_t precision; /* the CUDA backend has only EXACT (it logs so) */
  int keep_views;             /* CPU: 1 never repacks weights (the fast kernels then read
                                 the file's layout; no copy); 0 repacks those it has a
                                 faster layout for (kernels/cpu/repack.h) */
} kern_backend_opts_t;

/* A weight matrix of `rows` output features × `cols` input features (GGUF
 * dims ne[0] = cols, ne[1] = rows), in whatever form its backend chose at
 * load: views into the model file's mapping, a repacked copy, or device
 * memory. */
typedef struct kern_weight {
  kern_type_t type; /* the type the file stores (public, read-only) */
  int64_t rows;     /* output features */
  int64_t cols;     /* input features; a multiple of the type's block size */
  void *impl;       /* backend-private (CPU: the view of the GGUF bytes) */
  void *packed;     /* backend-private: a copy in the backend's own layout, or
                       NULL (CPU: the 8-row panels of kernels/cpu/repack.h) */
  int lazy;         /* set by the caller before weight_init: the weight may never
                       be used (an expert no token chooses), so the backend may
                       leave its copy to the first weight_use (CPU: the panels,
                       and the file's pages stay untouched until then); also a
                       matrix no matmul reads, whose weight_use never comes (an
                       untied token_embd: only embed reads it, from the view) */
} kern_weight_t;

/* Arguments of the three attention kernels (one layer, one batch).
 *
 * Sequence b of the batch has q_len = cu_seq_lens_q[b+1] - cu_seq_lens_q[b]
 * query rows and attends over k_len keys; query row i (0-based within the
 * sequence) sees keys j <= p = i + k_len - q_len (causal, aligned
 * bottom-right). With a sliding window W > 0 it sees only keys j > p - W:
 * itself and the W - 1 keys before it, flash-attn's window_size = (W - 1, 0)
 * (the count of Hugging Face's sliding_window and GGUF's
 * attention.sliding_window).
 * A row that sees no key outputs zeros. Query head h reads KV head
 * h / (n_heads / n_kv_heads). Scores are scaled by `scale`; softmax in f32.
 *
 * The paged KV layout of one layer: k_cache, v_cache are
 * [num_blocks, block_size, n_kv_heads, head_dim]; key j of sequence b is at
 * block block_table[b * max_blocks_per_seq + j / block_size], offset
 * j % block_size. Unused block-table entries are -1. */
typedef struct kern_attn_args {
  int n_seqs;
  int n_heads;    /* query heads */
  int n_kv_heads; /* key/value heads; divides n_heads */
  int head_dim;
  float scale;    /* usually 1 / sqrt(head_dim) */
  int sliding_window; /* W: keys a row sees, itself included; 0: no window (every key up to p) */
  float softcap;      /* > 0: each score s (after the scale) becomes softcap * tanh(s / softcap)
                         (Gemma 2's attn_logit_softcapping); 0: none */
  const float *sinks; /* [n_heads] or NULL: head h's learned sink logit joins its softmax's
                         denominator (exp(sinks[h] - m) added to l) with no value (gpt-oss);
                         only on a backend with attn_sinks */
  const float *q; /* [total_q, n_heads, head_dim] */
  float *out;     /* [total_q, n_heads, head_dim] */

  /* varlen paths: sequence b owns query rows [cu_seq_lens_q[b], cu_seq_lens_q[b+1])
   * and keys [cu_seq_lens_k[b], cu_seq_lens_k[b+1]) of the packed K/V. */
  const int32_t *cu_seq_lens_q; /* [n_seqs + 1], first entry 0 */
  const int32_t *cu_seq_lens_k; /* [n_seqs + 1], first entry 0 */
  int max_seqlen_q;             /* max q_len over the batch */
  int max_seqlen_k;             /* max k_len over the batch (every path, decode's included:
                                   cache_seqlens[b] + 1 <= max_seqlen_k; backends size their
                                   grids and workspaces by it, never by the table's width) */
  int total_q;                  /* cu_seq_lens_q[n_seqs] (0: unknown; grids are then sized
                                   by n_seqs * max_seqlen_q) */
  const void *k;                /* attn_varlen only: [total_k, n_kv_heads, head_dim] kv_type */
  const void *v;                /* attn_varlen only: [total_k, n_kv_heads, head_dim] kv_type */

  /* paged paths (attn_varlen_paged, attn_decode) */
  void *k_cache;              /* [num_blocks, block_size, n_kv_heads, head_dim] kv_type */
  void *v_cache;              /* same */
  int block_size;             /* tokens per block */
  const int32_t *block_table; /* [n_seqs, max_blocks_per_seq], -1 = unallocated */
  int max_blocks_per_seq;

  /* decode path: every sequence has one query row (total_q == n_seqs);
   * k_new/v_new are written at position cache_seqlens[b] of sequence b, in
   * place, then the row attends over cache_seqlens[b] + 1 keys. A row with
   * cache_seqlens[b] < 0 is padding (a captured step's rows past the live
   * ones, model/model_graph.h): nothing is written, its output is zeros,
   * its block-table row is never read. */
  const int32_t *cache_seqlens; /* [n_seqs] tokens cached before this step */
  const float *k_new;           /* [n_seqs, n_kv_heads, head_dim] */
  const float *v_new;           /* [n_seqs, n_kv_heads, head_dim] */
} kern_attn_args_t;

/* Arguments of the Gated DeltaNet operations (one layer, one batch;
 * Qwen3.5's linear-attention block, model/model_gdn.c). Sequence b owns
 * rows [cu_rows[b], cu_rows[b + 1]) of the step, in token order, and the
 * recurrent state at state + slots[b] * slot_stride (floats):
 *   [conv_kernel - 1, conv_dim]       the last conv_kernel - 1 inputs of
 *                                     the convolution, oldest first
 *   [n_v_heads, head_k, head_v]       the delta rule's matrix S per value head
 * Both operations read the state and leave it advanced past the sequence's
 * rows (a decode is a chunk of one row). Each sequence and head is computed
 * alone, in a fixed order: batch invariant (a row's bits depend only on its
 * sequence's rows in the step and the state they start from).
 * Speculative verification (keep): with keep non-NULL and keep[b] >= 0,
 * sequence b's rows run in the recurrent form, one by one, and the state
 * after each of its rows but the last (t = 0 .. rows - 2) is also written to
 * slot keep[b] + t, both parts (the convolution's window and the rule's
 * matrices): the very bits the slot would hold had the step ended after
 * row t, so a verification that accepts j drafts takes the state after row
 * j without recomputing (cache/kv_state.h's kept states). */
typedef struct kern_gdn_args {
  int n_seqs;
  const int32_t *cu_rows; /* device [n_seqs + 1], first entry 0 */
  const int32_t *slots;   /* device [n_seqs] */
  float *state;           /* device: the pool's layer base (slot 0) */
  size_t slot_stride;     /* floats from one slot's state to the next */
  int conv_dim;           /* channels of the convolution: 2 n_k_heads head_k + n_v_heads head_v */
  int conv_kernel;        /* taps (4) */
  int n_k_heads, n_v_heads, head_k, head_v;
  int v_tiled;            /* value head h reads key head h % n_k_heads (llama.cpp's GGUF order);
                             0: h / (n_v_heads / n_k_heads) (Hugging Face's order) */
  float qk_eps;           /* the L2 norm's epsilon (1e-6) */
  const int32_t *keep;    /* device [n_seqs], or NULL: where the states after each row go (above); -1: none */
} kern_gdn_args_t;

struct kern_backend {
  const char *name;    /* "cpu", "cuda" (public, read-only) */
  kern_type_t kv_type; /* element type of KV cache storage (KERN_F32 on CPU) */
  kern_precision_t precision; /* the matmul arithmetic in use (public, read-only) */
  /* > 0: the paged attention reads no key of a row before its sliding
   * window's edge rounded down to a multiple of this (a key tile), so
   * blocks wholly before that may be released; 0: it may read any key of
   * the sequence (public, read-only) */
  int attn_window_granule;
  int attn_sinks; /* 1: the attention kernels honour kern_attn_args_t.sinks (public, read-only) */
  /* bytes the weights' own-layout copies (kern_weight_t.packed) hold now:
   * the CPU's repacked panels (kernels/cpu/repack.h), counted as they are
   * made and released; the CUDA backend counts none (public, read-only) */
  int64_t packed_bytes;

  /* Frees the backend and everything it allocated. */
  void (*destroy)(kern_backend_t *be);

  /* --- device memory ------------------------------------------------------ */
  /* 64-byte aligned, uninitialised; NULL when out of memory (not fatal). */
  void *(*alloc)(kern_backend_t *be, size_t bytes);
  void (*free)(kern_backend_t *be, void *buf); /* NULL is a no-op */
  void (*upload)(kern_backend_t *be, void *dst, const void *src, size_t bytes);
  void (*download)(kern_backend_t *be, void *dst, const void *src, size_t bytes);
  /* device → device, ordered with the operations (e.g. copying a KV block
   * when a sequence forks); the ranges must not overlap. */
  void (*copy)(kern_backend_t *be, void *dst, const void *src, size_t bytes);
  void (*sync)(kern_backend_t *be);
  /* Host staging memory for upload_async: page-locked on CUDA (the copy is
   * then a DMA that leaves the host free), ordinary memory on CPU. NULL when
   * out of memory (not fatal); host_free(NULL) is a no-op. */
  void *(*host_alloc)(kern_backend_t *be, size_t bytes);
  void (*host_free)(kern_backend_t *be, void *buf);
  /* upload() from host_alloc memory without waiting for the copy: src must
   * stay unchanged until the next upload_async, sync() or download() has
   * returned (each waits for it). Ordered with the operations like upload. */
  void (*upload_async)(kern_backend_t *be, void *dst, const void *src, size_t bytes);

  /* 0 when the attention kernels support this head layout; otherwise
   * -EINVAL with the reason in err. Model load asks, so an unsupported
   * model is refused before it serves. */
  int (*attn_supported)(kern_backend_t *be, int n_heads, int n_kv_heads, int head_dim, char *err,
                        size_t err_len);
  /* The memory read bandwidth the weights stream at, in GB/s, measured
   * now (a few tens of ms; the engine asks once, at start-up, for its
   * bandwidth gauge); NULL where the backend has no probe. */
  double (*read_gbps)(kern_backend_t *be);

  /* --- weights ------------------------------------------------------------- */
  /* Prepares w (rows × cols of `type`) from `data`, host memory holding the
   * GGUF layout (rows × kern_type_row_bytes(type, cols) bytes) that stays
   * valid and unchanged until weight_release (the model file's mapping).
   * Returns 0, or a negative errno (-ENOMEM, -EINVAL for a type the backend
   * cannot compute with) after logging why. */
  int (*weight_init)(kern_backend_t *be, kern_weight_t *w, kern_type_t type, int64_t rows,
                     int64_t cols, const void *data);
  void (*weight_release)(kern_backend_t *be, kern_weight_t *w);
  /* Before a lazy weight's matmuls: makes the copy weight_init left for
   * later, the first time (then clears w->lazy). On the engine thread,
   * between kernels. NULL where a backend defers nothing. */
  void (*weight_use)(kern_backend_t *be, kern_weight_t *w);
  /* Joins n weights prepared by weight_init, all of the same cols, into one
   * matrix *out of [Σ rows, cols], parts[0]'s rows first: matmul(out) writes
   * in each row the parts' outputs side by side, part i's from column
   * Σ_{j<i} parts[j]->rows (kernels/kern_join.h). The parts stay usable (their
   * matmuls give what they gave) and each is released as before, out too, in
   * any order. The parts may have different types (out->type is theirs when
   * they share one, else KERN_BF16). Returns 0, or a negative errno (-ENOMEM,
   * -EINVAL for parts that do not join) after logging why; the parts are then
   * untouched. NULL where a backend joins nothing (CPU: its matmul reads each
   * weight's own blocks). */
  int (*weight_join)(kern_backend_t *be, kern_weight_t *out, kern_weight_t *const *parts, int n);

  /* --- dense operations ---------------------------------------------------- */
  /* y[n, w->rows] = x[n, w->cols] · wᵀ. */
  void (*matmul)(kern_backend_t *be, float *y, const float *x, const kern_weight_t *w, int n);
  /* y[n, w->rows] = rmsnorm(x)[n, dim] · wᵀ, rmsnorm as below with weight
   * [dim] and eps, dim = w->cols: the bits of rmsnorm into a buffer then
   * matmul, without that buffer (CUDA: the norm writes the GEMM's bf16
   * input); x is left as it is. NULL on a backend without it (the caller
   * runs the two). */
  void (*rmsnorm_matmul)(kern_backend_t *be, float *y, const float *x, const float *weight, float eps,
                         const kern_weight_t *w, int n);
  /* y[i, :] = row ids[i] of w, as f32: y [n, w->cols]; ids [n] in [0, w->rows). */
  void (*embed)(kern_backend_t *be, float *y, const kern_weight_t *w, const int32_t *ids, int n);
  /* y[i, :] = x[i, :] / sqrt(mean(x[i, :]²) + eps) * weight; x, y [n, dim],
   * weight [dim]; y may alias x. */
  void (*rmsnorm)(kern_backend_t *be, float *y, const float *x, const float *weight, int n,
                  int dim, float eps);
  /* Rotates x [n, n_heads, head_dim] in place at positions pos [n]: pair p
   * (p < rot_dim / 2) turns by angle pos * inv_freq[p]. neox = 0 pairs
   * elements (2p, 2p + 1) (GGUF `llama`); neox = 1 pairs (p, p + rot_dim / 2)
   * (`qwen2`). Elements past rot_dim are left alone. */
  void (*rope)(kern_backend_t *be, float *x, const int32_t *pos, int n, int n_heads, int head_dim,
               int rot_dim, const float *inv_freq, int neox);
  /* y[i] = silu(gate[i]) * up[i] over `count` elements; y may alias gate. */
  void (*swiglu)(kern_backend_t *be, float *y, const float *gate, const float *up, int64_t count);
  /* y[i] = gelu_tanh(gate[i]) * up[i] (Gemma's GeGLU; PyTorch's
   * gelu(approximate="tanh")) over `count` elements; y may alias gate. */
  void (*geglu)(kern_backend_t *be, float *y, const float *gate, const float *up, int64_t count);
  /* The gate of a joined [gate, up] matmul's output (weight_join): for each
   * of n rows t, y[t, i] = act(x[t, i]) · x[t, ff + i], i < ff, with act
   * silu (gelu = 0, as swiglu) or gelu_tanh (gelu = 1, as geglu), the same
   * bits those give for the same values; x [n, 2 ff], y [n, ff], y must not
   * overlap x. NULL on a backend without it (the model then joins nothing). */
  void (*glu_joined)(kern_backend_t *be, float *y, const float *x, int n, int64_t ff, int gelu);
  /* gpt-oss's clamped SwiGLU (Hugging Face's GptOssExperts._apply_gate):
   * g = min(gate[i], limit), u = clamp(up[i], -limit, limit),
   * y[i] = g · sigmoid(alpha · g) · (u + 1) over `count` elements; y may
   * alias gate. NULL on a backend without it (model load refuses gpt-oss). */
  void (*swiglu_oai)(kern_backend_t *be, float *y, const float *gate, const float *up, int64_t count, float alpha,
                     float limit);
  /* y[i] = x[i] * s; y may alias x (Gemma's embedding times sqrt(dim)). */
  void (*scale)(kern_backend_t *be, float *y, const float *x, float s, int64_t count);
  /* y[i] = a[i] + b[i]; y may alias a or b. */
  void (*add)(kern_backend_t *be, float *y, const float *a, const float *b, int64_t count);
  /* y[i, :] += bias for each of n rows of dim (Q/K/V biases of qwen2). */
  void (*add_bias)(kern_backend_t *be, float *y, const float *bias, int n, int dim);
  /* y[i, :] = x[idx[i], :]: y [n_idx, dim]; picks the rows that need logits. */
  void (*gather_rows)(kern_backend_t *be, float *y, const float *x, const int32_t *idx, int n_idx,
                      int dim);
  /* The weighted sum of a mixture of experts (model/model_moe.c):
   * y[t, :] = Σ_{j < k} w[t·k + j] · src[slot[t·k + j], :] for each of n
   * rows t, term j after term j - 1 (the caller's fixed order, so a row's
   * bits depend on its own terms only); y [n, dim], src [*, dim], slot and
   * w [n, k]; y must not alias src. NULL on a backend without MoE (the
   * model load then refuses such models). */
  void (*moe_combine)(kern_backend_t *be, float *y, const float *src, const int32_t *slot, const float *w, int n,
                      int k, int dim);

  /* --- KV cache and attention (called by cache/ and attention/) ----------- */
  /* Writes k[i], v[i] ([n, kv_dim] f32) to cache row slots[i] (slot =
   * block * block_size + offset; cache viewed as [num_slots, kv_dim] of
   * kv_type). A slot of -1 is skipped. */
  void (*kv_write)(kern_backend_t *be, void *k_cache, void *v_cache, const float *k, const float *v,
                   const int32_t *slots, int n, int kv_dim);
  /* The gather of the reference varlen path: copies each sequence's k_len
   * keys, read through a's block table, into k_out and v_out
   * ([total_k, n_kv_heads, head_dim] kv_type) packed along cu_seq_lens_k. */
  void (*kv_gather)(kern_backend_t *be, void *k_out, void *v_out, const kern_attn_args_t *a);
  /* Varlen attention over packed K/V (a->k, a->v): the reference path. */
  void (*attn_varlen)(kern_backend_t *be, const kern_attn_args_t *a);
  /* Varlen attention reading K/V through the block table (no gather copy). */
  void (*attn_varlen_paged)(kern_backend_t *be, const kern_attn_args_t *a);
  /* Decode attention: one query per sequence, new K/V appended in place. */
  void (*attn_decode)(kern_backend_t *be, const kern_attn_args_t *a);

  /* --- Gated DeltaNet (kern_gdn_args_t; NULL on a backend without them:
   * model load then refuses hybrid models) --------------------------------
   * gdn_conv: y[t, c] = silu(Σ_j w[c, j] · x'[t - K + 1 + j, c]) over the
   * sequence's inputs x' (the state's K - 1 cached rows, then x), the
   * depthwise causal convolution; w [conv_dim, K] f32; x, y [T, conv_dim].
   * gdn_rule: the gated delta rule (a backend may run a sequence's rows
   * in the chunked form, equal to this recurrent one within rounding: the
   * CPU does for whole 64-row chunks). Row t of y (the
   * convolution's output) is [q (n_k_heads × head_k), k (same), v
   * (n_v_heads × head_v)]; q and k are L2-normed per head (eps qk_eps) and
   * q scaled by 1 / sqrt(head_k); per value head h: g = a_neg[h] ·
   * softplus(alpha[t, h] + dt_bias[h]), β = sigmoid(beta[t, h]);
   * S = e^g S; S += k ⊗ β (v − Sᵀk); out[t, h] = Sᵀq. alpha, beta [T,
   * n_v_heads]; a_neg, dt_bias [n_v_heads] (a_neg = −exp(A_log), as
   * llama.cpp stores ssm_a); out [T, n_v_heads, head_v]. */
  void (*gdn_conv)(kern_backend_t *be, float *y, const float *x, const float *w, const kern_gdn_args_t *a);
  void (*gdn_rule)(kern_backend_t *be, float *out, const float *y, const float *alpha, const float *beta,
                   const float *a_neg, const float *dt_bias, const kern_gdn_args_t *a);
  /* y[i] = x[i] · sigmoid(g[i]) over count elements (the gated attention's
   * output gate); y may alias x. */
  void (*sigmoid_mul)(kern_backend_t *be, float *y, const float *x, const float *g, int64_t count);
  /* y[r · ldy + c] = x[r · ldx + c] for r < rows, c < cols (a column slice:
   * the query half of a row of interleaved [q, gate] heads). */
  void (*copy_cols)(kern_backend_t *be, float *y, int64_t ldy, const float *x, int64_t ldx, int64_t rows,
                    int64_t cols);

  /* --- sampling (kernels/kern_sample.h) ----------------------------------- */
  /* outs[i] ([n_rows]) for each row i of logits [n_rows, n_vocab] whose
   * rows[i] ([n_rows]) is on_device, after its ops (ops, the step's list;
   * the row's logits change): kern_sample_ref's result (the token bit for
   * bit; logprobs within a float ulp); other rows are left alone. All
   * device buffers. NULL when the backend leaves sampling to the host (the
   * CPU backend: its logits are host memory already). */
  void (*sample)(kern_backend_t *be, struct kern_sample_out *outs, float *logits, const struct kern_sample_row *rows,
                 const struct kern_sample_op *ops, int n_rows, int32_t n_vocab);

  /* --- captured replays (CUDA graphs; all four NULL on a backend without) --
   * graph_begin() starts capturing: the operations issued after it are
   * recorded, not run. graph_end() stops and returns them as a graph, or
   * NULL after logging why (nothing recorded ran either). graph_launch()
   * runs a graph's operations again, ordered with the others, with the
   * arguments they were issued with (the same pointers and scalars) over
   * what the buffers hold at the time. Between begin and end only
   * operations may be issued (no alloc, free, upload, download, copy or
   * sync: the backend aborts on one, a programmer error).
   * graph_destroy(NULL) is a no-op. */
  int (*graph_begin)(kern_backend_t *be);
  kern_graph_t *(*graph_end)(kern_backend_t *be);
  void (*graph_launch)(kern_backend_t *be, kern_graph_t *g);
  void (*graph_destroy)(kern_backend_t *be, kern_graph_t *g);
};

/* Creates the backend named `device` ("cpu" or "cuda") with `n_threads` CPU
 * threads (<= 0: one per online CPU; the CUDA backend ignores it). Returns
 * NULL after logging why (unknown name, no CUDA support built in, no GPU).
 * The matmuls are EXACT. */
kern_backend_t *kern_backend_create(const char *device, int n_threads);

/* The same with options (opts NULL: one thread per CPU, EXACT). */
kern_backend_t *kern_backend_create_opts(const char *device, const kern_backend_opts_t *opts);

/* be->destroy(be); NULL is a no-op. */
void kern_backend_destroy(kern_backend_t *be);

#endif
