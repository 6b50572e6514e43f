/* tests/unit/test_attention.c — the CPU attention kernels (attn_varlen,
 * attn_varlen_paged, attn_decode) and the KV copies (kv_write, kv_gather):
 * random batches against a float64 naive attention, and the bitwise
 * agreements tram relies on (decode == varlen, paged == gather, a row's bits
 * independent of the thread count, the rest of the batch and chunking), with
 * and without sliding windows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern.h"
#include "tests/unit/attn_ref.h"
#include "tests/unit/testutil.h"

/* A batch with its keys both packed (the ground truth) and in a paged cache
 * with shuffled, non-contiguous blocks. All buffers come from be->alloc. */
typedef struct fixture {
  kern_backend_t *be;
  int n_seqs, n_heads, n_kv_heads, head_dim, block_size, kv_dim;
  int32_t *q_len, *k_len; /* [n_seqs] (malloc) */
  int32_t *cu_q, *cu_k;   /* [n_seqs + 1] */
  int total_q, total_k;
  float *q;               /* [total_q, n_heads, head_dim] */
  float *k, *v;           /* [total_k, n_kv_heads, head_dim], packed */
  int num_blocks, max_blocks;
  int32_t *block_table;   /* [n_seqs, max_blocks], -1 unused */
  float *k_cache, *v_cache; /* [num_blocks, block_size, n_kv_heads, head_dim] */
  float *out;             /* [total_q, n_heads, head_dim] */
  double *ref;            /* same, float64 (malloc) */
  int window;             /* kern_attn_args_t.sliding_window of the runs (0: none; see fx_window) */
  float softcap;          /* kern_attn_args_t.softcap of the runs (see fx_window) */
  const float *sinks;     /* kern_attn_args_t.sinks of the runs [n_heads], or NULL (see fx_window) */
} fixture_t;

static void *dev(kern_backend_t *be, size_t bytes) {
  void *p = be->alloc(be, bytes);
  assert_non_null(p);
  return p;
}

/* Slot of key `pos` of sequence b. */
static int32_t fx_slot(const fixture_t *f, int b, int pos) {
  return f->block_table[b * f->max_blocks + pos / f->block_size] * f->block_size + pos % f->block_size;
}

/* Builds a batch of n sequences with the given query and key lengths and
 * random data; the last `hold_back` keys of each sequence stay out of the
 * cache (their slots are NaN), for the decode path to append. */
static void fx_init(fixture_t *f, kern_backend_t *be, tu_rng_t *rng, int n, const int32_t *q_len,
                    const int32_t *k_len, int n_heads, int n_kv_heads, int head_dim, int block_size,
                    int hold_back) {
  memset(f, 0, sizeof *f);
  f->be = be;
  f->n_seqs = n;
  f->n_heads = n_heads;
  f->n_kv_heads = n_kv_heads;
  f->head_dim = head_dim;
  f->block_size = block_size;
  f->kv_dim = n_kv_heads * head_dim;
  f->q_len = malloc((size_t)n * sizeof(int32_t));
  f->k_len = malloc((size_t)n * sizeof(int32_t));
  f->cu_q = dev(be, (size_t)(n + 1) * sizeof(int32_t));
  f->cu_k = dev(be, (size_t)(n + 1) * sizeof(int32_t));
  f->cu_q[0] = f->cu_k[0] = 0;
  int needed = 0;
  for (int b = 0; b < n; b++) {
    f->q_len[b] = q_len[b];
    f->k_len[b] = k_len[b];
    f->cu_q[b + 1] = f->cu_q[b] + q_len[b];
    f->cu_k[b + 1] = f->cu_k[b] + k_len[b];
    int nb = (k_len[b] + block_size - 1) / block_size;
    needed += nb;
    if (nb + 1 > f->max_blocks) f->max_blocks = nb + 1; /* at least one trailing -1 */
  }
  f->total_q = f->cu_q[n];
  f->total_k = f->cu_k[n];
  const size_t qn = (size_t)f->total_q * n_heads * head_dim, kn = (size_t)f->total_k * f->kv_dim;
  f->q = dev(be, qn * sizeof(float) + 4);
  f->k = dev(be, kn * sizeof(float) + 4);
  f->v = dev(be, kn * sizeof(float) + 4);
  f->out = dev(be, qn * sizeof(float) + 4);
  f->ref = malloc((qn + 1) * sizeof(double));
  tu_fill_normal(rng, f->q, qn, 1.0f);
  tu_fill_normal(rng, f->k, kn, 1.0f);
  tu_fill_normal(rng, f->v, kn, 1.0f);

  /* blocks: a shuffled permutation with unused holes */
  f->num_blocks = needed + needed / 2 + 3;
  int32_t *perm = malloc((size_t)f->num_blocks * sizeof *perm);
  for (int i = 0; i < f->num_blocks; i++) perm[i] = i;
  tu_shuffle_i32(rng, perm, (size_t)f->num_blocks);
  f->block_table = dev(be, (size_t)n * f->max_blocks * sizeof(int32_t));
  int next = 0;
  for (int b = 0; b < n; b++) {
    int nb = (k_len[b] + block_size - 1) / block_size;
    for (int i = 0; i < f->max_blocks; i++) f->block_table[b * f->max_blocks + i] = i < nb ? perm[next++] : -1;
  }
  free(perm);
  const size_t cn = (size_t)f->num_blocks * block_size * f->kv_dim;
  f->k_cache = dev(be, cn * sizeof(float));
  f->v_cache = dev(be, cn * sizeof(float));
  tu_poison_f32(f->k_cache, cn);
  tu_poison_f32(f->v_cache, cn);

  /* the cached keys go in through kv_write, one sequence at a time */
  for (int b = 0; b < n; b++) {
    int m = k_len[b] - hold_back;
    if (m <= 0) continue;
    int32_t *slots = dev(be, (size_t)m * sizeof(int32_t));
    for (int j = 0; j < m; j++) slots[j] = fx_slot(f, b, j);
    be->kv_write(be, f->k_cache, f->v_cache, f->k + (size_t)f->cu_k[b] * f->kv_dim,
                 f->v + (size_t)f->cu_k[b] * f->kv_dim, slots, m, f->kv_dim);
    be->free(be, slots);
  }

  for (int b = 0; b < n; b++)
    ref_attn_seq(q_len[b], k_len[b], n_heads, n_kv_heads, head_dim, f->q + (size_t)f->cu_q[b] * n_heads * head_dim,
                 f->k + (size_t)f->cu_k[b] * f->kv_dim, f->v + (size_t)f->cu_k[b] * f->kv_dim,
                 f->ref + (size_t)f->cu_q[b] * n_heads * head_dim);
}

static void fx_free(fixture_t *f) {
  kern_backend_t *be = f->be;
  be->free(be, f->cu_q);
  be->free(be, f->cu_k);
  be->free(be, f->q);
  be->free(be, f->k);
  be->free(be, f->v);
  be->free(be, f->out);
  be->free(be, f->block_table);
  be->free(be, f->k_cache);
  be->free(be, f->v_cache);
  free(f->q_len);
  free(f->k_len);
  free(f->ref);
}

static size_t fx_out_n(const fixture_t *f) { return (size_t)f->total_q * f->n_heads * f->head_dim; }

static kern_attn_args_t fx_args(const fixture_t *f) {
  int max_q = 0, max_k = 0;
  for (int b = 0; b < f->n_seqs; b++) {
    if (f->q_len[b] > max_q) max_q = f->q_len[b];
    if (f->k_len[b] > max_k) max_k = f->k_len[b];
  }
  return (kern_attn_args_t){
      .n_seqs = f->n_seqs, .n_heads = f->n_heads, .n_kv_heads = f->n_kv_heads,
      .head_dim = f->head_dim, .scale = 1.0f / sqrtf((float)f->head_dim),
      .q = f->q, .out = f->out,
      .cu_seq_lens_q = f->cu_q, .cu_seq_lens_k = f->cu_k, .max_seqlen_q = max_q, .max_seqlen_k = max_k,
      .k = f->k, .v = f->v,
      .k_cache = f->k_cache, .v_cache = f->v_cache, .block_size = f->block_size,
      .block_table = f->block_table, .max_blocks_per_seq = f->max_blocks,
      .sliding_window = f->window, .softcap = f->softcap, .sinks = f->sinks,
  };
}

/* Sets the fixture's sliding window W (0: none) and recomputes the
 * reference with flash-attn's window_size = (W - 1, 0), f->softcap and f->sinks. */
static void fx_window(fixture_t *f, int w) {
  f->window = w;
  const size_t row = (size_t)f->n_heads * f->head_dim;
  for (int b = 0; b < f->n_seqs; b++)
    ref_attn_seq_window(f->q_len[b], f->k_len[b], f->n_heads, f->n_kv_heads, f->head_dim, w > 0 ? w - 1 : -1,
                        f->softcap, f->sinks, f->q + (size_t)f->cu_q[b] * row, f->k + (size_t)f->cu_k[b] * f->kv_dim,
                        f->v + (size_t)f->cu_k[b] * f->kv_dim, f->ref + (size_t)f->cu_q[b] * row);
}

/* Runs one kernel into a fresh malloc'd copy of the output (NaN-poisoned first). */
enum { RUN_VARLEN, RUN_PAGED };
static float *fx_run(fixture_t *f, kern_backend_t *be, int which) {
  kern_attn_args_t a = fx_args(f);
  tu_poison_f32(f->out, fx_out_n(f));
  if (which == RUN_VARLEN)
    be->attn_varlen(be, &a);
  else
    be->attn_varlen_paged(be, &a);
  float *copy = malloc(fx_out_n(f) * sizeof(float) + 4);
  memcpy(copy, f->out, fx_out_n(f) * sizeof(float));
  return copy;
}

static void assert_same_bits(const char *what, const float *x, const float *y, size_t n) {
  if (memcmp(x, y, n * sizeof(float)) != 0) {
    size_t i = 0;
    while (i < n && memcmp(&x[i], &y[i], sizeof(float)) == 0) i++;
    fail_msg("%s: outputs differ at element %zu (%.9g vs %.9g)", what, i, x[i], y[i]);
  }
}

/* The one sequence of f (q_len = k_len) prefilled in chunks [cuts[i],
 * cuts[i + 1]) — each chunk's queries over all keys so far, as chunked
 * prefill runs them, under f's window — gives the bits of `whole`. */
static void check_chunks(const fixture_t *f, kern_backend_t *be, const float *whole, const int *cuts, size_t n_cuts) {
  const size_t row = (size_t)f->n_heads * f->head_dim;
  for (size_t c = 0; c + 1 < n_cuts; c++) {
    const int done = cuts[c], len = cuts[c + 1] - cuts[c];
    int32_t cu_q[2] = {0, len}, cu_k[2] = {0, done + len};
    kern_attn_args_t a = fx_args(f);
    a.cu_seq_lens_q = cu_q;
    a.cu_seq_lens_k = cu_k;
    a.max_seqlen_q = len;
    a.max_seqlen_k = done + len;
    a.q = f->q + (size_t)done * row;
    float *o = malloc((size_t)len * row * sizeof(float));
    a.out = o;
    tu_poison_f32(o, (size_t)len * row);
    be->attn_varlen_paged(be, &a);
    assert_same_bits("chunked vs whole prefill", whole + (size_t)done * row, o, (size_t)len * row);
    free(o);
  }
}

/* A decode batch's inputs for a fixture built with hold_back 1: sequence b
 * has cached[b] keys in the cache and appends key cached[b] (its last). */
typedef struct decode_in {
  int32_t *seqlens, *slots; /* [n_seqs] */
  float *k_new, *v_new;     /* [n_seqs, kv_dim] */
} decode_in_t;

static void decode_in_init(decode_in_t *in, const fixture_t *f, const int32_t *cached) {
  kern_backend_t *be = f->be;
  const int n = f->n_seqs, kv_dim = f->kv_dim;
  in->seqlens = dev(be, (size_t)n * sizeof(int32_t));
  in->slots = dev(be, (size_t)n * sizeof(int32_t));
  in->k_new = dev(be, (size_t)n * kv_dim * sizeof(float));
  in->v_new = dev(be, (size_t)n * kv_dim * sizeof(float));
  for (int b = 0; b < n; b++) {
    in->seqlens[b] = cached[b];
    in->slots[b] = fx_slot(f, b, cached[b]);
    memcpy(in->k_new + (size_t)b * kv_dim, f->k + (size_t)(f->cu_k[b + 1] - 1) * kv_dim, (size_t)kv_dim * sizeof(float));
    memcpy(in->v_new + (size_t)b * kv_dim, f->v + (size_t)(f->cu_k[b + 1] - 1) * kv_dim, (size_t)kv_dim * sizeof(float));
  }
}

/* The fixture's arguments with the decode inputs. */
static kern_attn_args_t decode_in_args(const decode_in_t *in, const fixture_t *f) {
  kern_attn_args_t a = fx_args(f);
  a.cache_seqlens = in->seqlens;
  a.k_new = in->k_new;
  a.v_new = in->v_new;
  return a;
}

static void decode_in_free(decode_in_t *in, kern_backend_t *be) {
  be->free(be, in->seqlens);
  be->free(be, in->slots);
  be->free(be, in->k_new);
  be->free(be, in->v_new);
}

/* --- random batches against the float64 reference ----------------------- */

/* Random batches over head_dim {64, 128} x heads/KV-heads {1, 3, 4, 8} x
 * block size {16, 32}: key lengths 0, 1, bs-1, bs, bs+1, a medium prefill,
 * rows with q_len > k_len, and (every other case) one sequence of >= 2000
 * keys. Both varlen kernels match the reference and each other bitwise, and
 * kv_gather packs exactly the keys the test put in. */
static void random_batches_match_reference(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 2);
  assert_non_null(be);
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed());
  const int head_dims[] = {64, 128}, ratios[] = {1, 3, 4, 8}, block_sizes[] = {16, 32};
  int case_no = 0;
  for (int hi = 0; hi < 2; hi++)
    for (int ri = 0; ri < 4; ri++)
      for (int bi = 0; bi < 2; bi++, case_no++) {
        const int hd = head_dims[hi], bs = block_sizes[bi];
        const int kvh = 1 + (int)tu_below(&rng, 2), nh = kvh * ratios[ri];
        int32_t ql[12], kl[12];
        int n = 0;
        const int lens[] = {0, 1, bs - 1, bs, bs + 1};
        for (int i = 0; i < 5; i++) { /* each length as k_len, with a random q_len <= k_len */
          kl[n] = lens[i];
          ql[n++] = lens[i] ? 1 + (int)tu_below(&rng, (uint64_t)lens[i]) : 0;
        }
        kl[n] = bs + 1, ql[n++] = bs + 1;         /* a whole prefill across a block edge */
        kl[n] = 0, ql[n++] = 3;                   /* q_len > k_len: every row sees nothing */
        kl[n] = 2, ql[n++] = 5;                   /* q_len > k_len: the first rows see nothing */
        kl[n] = bs - 1, ql[n++] = bs + 2;
        int med = 100 + (int)tu_below(&rng, 60);
        kl[n] = med, ql[n++] = med;               /* a medium prefill */
        if (case_no % 2 == 0) {                   /* a long context, a short chunk */
          kl[n] = 2000 + (int)tu_below(&rng, 200);
          ql[n++] = 1 + (int)tu_below(&rng, 9);
        }
        /* shuffle the sequence order */
        for (int i = n - 1; i > 0; i--) {
          int j = (int)tu_below(&rng, (uint64_t)i + 1);
          int32_t t = ql[i]; ql[i] = ql[j]; ql[j] = t;
          t = kl[i]; kl[i] = kl[j]; kl[j] = t;
        }
        fixture_t f;
        fx_init(&f, be, &rng, n, ql, kl, nh, kvh, hd, bs, 0);
        char what[96];
        float *o_varlen = fx_run(&f, be, RUN_VARLEN);
        snprintf(what, sizeof what, "attn_varlen hd=%d heads=%d/%d bs=%d", hd, nh, kvh, bs);
        ref_check(what, o_varlen, f.ref, (long)fx_out_n(&f));
        float *o_paged = fx_run(&f, be, RUN_PAGED);
        snprintf(what, sizeof what, "attn_varlen_paged hd=%d heads=%d/%d bs=%d", hd, nh, kvh, bs);
        ref_check(what, o_paged, f.ref, (long)fx_out_n(&f));
        assert_same_bits("paged vs gather", o_paged, o_varlen, fx_out_n(&f));

        /* kv_gather rebuilds the packed keys exactly */
        const size_t kn = (size_t)f.total_k * f.kv_dim;
        float *kg = dev(be, kn * sizeof(float) + 4), *vg = dev(be, kn * sizeof(float) + 4);
        tu_poison_f32(kg, kn);
        tu_poison_f32(vg, kn);
        kern_attn_args_t a = fx_args(&f);
        be->kv_gather(be, kg, vg, &a);
        assert_same_bits("kv_gather K", kg, f.k, kn);
        assert_same_bits("kv_gather V", vg, f.v, kn);
        be->free(be, kg);
        be->free(be, vg);
        free(o_varlen);
        free(o_paged);
        fx_free(&f);
      }
  kern_backend_destroy(be);
}

/* --- decode == varlen ------------------------------------------------------ */

/* A decode batch (one query per sequence, cached lengths 0, 1, bs-1, bs,
 * bs+1, random and >= 2000): attn_decode appends k_new/v_new at
 * cache_seqlens[b] and matches the reference; attn_varlen_paged (after
 * kv_write of the same new K/V) and attn_varlen give the same bits. */
static void decode_equals_varlen(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 2);
  assert_non_null(be);
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed() + 1);
  const int configs[][4] = {{64, 9, 3, 32}, {128, 8, 1, 16}, {64, 4, 4, 16}, {128, 8, 2, 32}};
  for (size_t c = 0; c < sizeof configs / sizeof *configs; c++) {
    const int hd = configs[c][0], nh = configs[c][1], kvh = configs[c][2], bs = configs[c][3];
    int32_t cached[] = {0, 1, bs - 1, bs, bs + 1, 2 * bs - 1, 5 + (int)tu_below(&rng, 300), 2000 + (int)tu_below(&rng, 100)};
    const int n = (int)(sizeof cached / sizeof *cached);
    int32_t ql[8], kl[8];
    for (int b = 0; b < n; b++) ql[b] = 1, kl[b] = cached[b] + 1;
    fixture_t f;
    fx_init(&f, be, &rng, n, ql, kl, nh, kvh, hd, bs, 1);
    const int kv_dim = f.kv_dim;
    decode_in_t in;
    decode_in_init(&in, &f, cached);
    int32_t *slots = in.slots;
    float *k_new = in.k_new, *v_new = in.v_new;
    kern_attn_args_t a = decode_in_args(&in, &f);
    tu_poison_f32(f.out, fx_out_n(&f));
    be->attn_decode(be, &a);
    float *o_decode = malloc(fx_out_n(&f) * sizeof(float));
    memcpy(o_decode, f.out, fx_out_n(&f) * sizeof(float));
    char what[80];
    snprintf(what, sizeof what, "attn_decode hd=%d heads=%d/%d bs=%d", hd, nh, kvh, bs);
    ref_check(what, o_decode, f.ref, (long)fx_out_n(&f));
    for (int b = 0; b < n; b++) { /* appended in place */
      assert_same_bits("decode appended K", f.k_cache + (size_t)slots[b] * kv_dim, k_new + (size_t)b * kv_dim, (size_t)kv_dim);
      assert_same_bits("decode appended V", f.v_cache + (size_t)slots[b] * kv_dim, v_new + (size_t)b * kv_dim, (size_t)kv_dim);
    }

    /* the varlen path on the same decode batch: new K/V poisoned, then kv_write */
    for (int b = 0; b < n; b++) {
      tu_poison_f32(f.k_cache + (size_t)slots[b] * kv_dim, (size_t)kv_dim);
      tu_poison_f32(f.v_cache + (size_t)slots[b] * kv_dim, (size_t)kv_dim);
    }
    be->kv_write(be, f.k_cache, f.v_cache, k_new, v_new, slots, n, kv_dim);
    float *o_paged = fx_run(&f, be, RUN_PAGED);
    assert_same_bits("decode vs varlen_paged", o_decode, o_paged, fx_out_n(&f));
    float *o_varlen = fx_run(&f, be, RUN_VARLEN);
    assert_same_bits("decode vs varlen (gather)", o_decode, o_varlen, fx_out_n(&f));
    free(o_decode);
    free(o_paged);
    free(o_varlen);
    decode_in_free(&in, be);
    fx_free(&f);
  }
  kern_backend_destroy(be);
}

/* --- invariance ------------------------------------------------------------- */

/* A row's bits do not depend on the thread count (1, 2, 3: with more than one
 * thread the long sequences are split along keys and their segments combined),
 * nor on the other sequences of the batch (each sequence run alone). */
static void invariant_to_threads_and_batch(void **state) {
  (void)state;
  kern_backend_t *bes[3];
  for (int t = 0; t < 3; t++) {
    bes[t] = kern_backend_create("cpu", t + 1);
    assert_non_null(bes[t]);
  }
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed() + 2);
  const int32_t ql[] = {1, 3, 40, 1, 7}, kl[] = {2600, 3100, 40, 1, 2049};
  const int n = 5, nh = 6, kvh = 2, hd = 64, bs = 16;
  fixture_t f;
  fx_init(&f, bes[0], &rng, n, ql, kl, nh, kvh, hd, bs, 0);
  float *base_paged = fx_run(&f, bes[0], RUN_PAGED);
  float *base_varlen = fx_run(&f, bes[0], RUN_VARLEN);
  ref_check("1 thread", base_paged, f.ref, (long)fx_out_n(&f));
  assert_same_bits("1 thread: paged vs gather", base_paged, base_varlen, fx_out_n(&f));
  for (int t = 1; t < 3; t++) {
    float *o = fx_run(&f, bes[t], RUN_PAGED);
    assert_same_bits("paged: threads", base_paged, o, fx_out_n(&f));
    free(o);
    o = fx_run(&f, bes[t], RUN_VARLEN);
    assert_same_bits("gather: threads", base_varlen, o, fx_out_n(&f));
    free(o);
  }
  /* each sequence alone, as a batch of one, on 2 threads */
  for (int b = 0; b < n; b++) {
    kern_attn_args_t a = fx_args(&f);
    int32_t cu_q[2] = {0, ql[b]}, cu_k[2] = {0, kl[b]};
    const size_t row = (size_t)nh * hd, qn = (size_t)ql[b] * row;
    a.n_seqs = 1;
    a.cu_seq_lens_q = cu_q;
    a.cu_seq_lens_k = cu_k;
    a.q = f.q + (size_t)f.cu_q[b] * row;
    a.k = f.k + (size_t)f.cu_k[b] * f.kv_dim;
    a.v = f.v + (size_t)f.cu_k[b] * f.kv_dim;
    a.block_table = f.block_table + b * f.max_blocks;
    float *o = malloc(qn * sizeof(float) + 4);
    a.out = o;
    tu_poison_f32(o, qn);
    bes[1]->attn_varlen_paged(bes[1], &a);
    assert_same_bits("paged: alone vs in the batch", base_paged + (size_t)f.cu_q[b] * row, o, qn);
    tu_poison_f32(o, qn);
    bes[1]->attn_varlen(bes[1], &a);
    assert_same_bits("gather: alone vs in the batch", base_paged + (size_t)f.cu_q[b] * row, o, qn);
    free(o);
  }
  free(base_paged);
  free(base_varlen);
  fx_free(&f);
  for (int t = 0; t < 3; t++) kern_backend_destroy(bes[t]);
}

/* A prompt computed in one prefill or in chunks (each chunk's queries over
 * all keys so far, as chunked prefill runs them) gives the same bits per row. */
static void invariant_to_chunking(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 2);
  assert_non_null(be);
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed() + 3);
  const int L = 1500, nh = 4, kvh = 2, hd = 64, bs = 32;
  int32_t ql[1] = {L}, kl[1] = {L};
  fixture_t f;
  fx_init(&f, be, &rng, 1, ql, kl, nh, kvh, hd, bs, 0);
  float *whole = fx_run(&f, be, RUN_PAGED);
  ref_check("whole prefill", whole, f.ref, (long)fx_out_n(&f));
  const int cuts[] = {0, 1, 63, 64, 500, 1100, 1499, L};
  check_chunks(&f, be, whole, cuts, sizeof cuts / sizeof *cuts);
  free(whole);
  fx_free(&f);
  kern_backend_destroy(be);
}

/* The spec's varlen example: query lengths [10, 3, 1], key lengths [0, 1, 7].
 * The keys are built per request from the spec's request index of every K
 * token (r1 x1, r2 x7), independently of cu_seq_lens_k. */
static void spec_varlen_example(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 2);
  assert_non_null(be);
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed() + 4);
  const int32_t ql[] = {10, 3, 1}, kl[] = {0, 1, 7};
  const int k_owner[8] = {1, 2, 2, 2, 2, 2, 2, 2}, q_owner[14] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 2};
  fixture_t f;
  fx_init(&f, be, &rng, 3, ql, kl, 4, 2, 64, 32, 0);
  assert_int_equal(f.total_q, 14);
  assert_int_equal(f.total_k, 8);
  /* reference per request from the token owners */
  const size_t row = (size_t)4 * 64;
  double *want = malloc(14 * row * sizeof(double));
  for (int r = 0; r < 3; r++) {
    int q0 = -1, nq = 0, k0 = -1, nk = 0;
    for (int t = 0; t < 14; t++)
      if (q_owner[t] == r) q0 = q0 < 0 ? t : q0, nq++;
    for (int t = 0; t < 8; t++)
      if (k_owner[t] == r) k0 = k0 < 0 ? t : k0, nk++;
    ref_attn_seq(nq, nk, 4, 2, 64, f.q + (size_t)q0 * row, nk ? f.k + (size_t)k0 * f.kv_dim : f.k,
                 nk ? f.v + (size_t)k0 * f.kv_dim : f.v, want + (size_t)q0 * row);
  }
  float *o = fx_run(&f, be, RUN_VARLEN);
  ref_check("spec example, attn_varlen", o, want, (long)(14 * row));
  for (size_t i = 0; i < 10 * row; i++) assert_true(o[i] == 0.0f); /* r0 has no keys */
  free(o);
  o = fx_run(&f, be, RUN_PAGED);
  ref_check("spec example, attn_varlen_paged", o, want, (long)(14 * row));
  free(o);
  free(want);
  fx_free(&f);
  kern_backend_destroy(be);
}

/* kv_write skips slots of -1 and writes the others exactly. */
static void kv_write_skips_minus_one(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 2);
  assert_non_null(be);
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed() + 5);
  const int kv_dim = 24, n_slots = 40, n = 9;
  float *kc = dev(be, (size_t)n_slots * kv_dim * sizeof(float)), *vc = dev(be, (size_t)n_slots * kv_dim * sizeof(float));
  float *k = dev(be, (size_t)n * kv_dim * sizeof(float)), *v = dev(be, (size_t)n * kv_dim * sizeof(float));
  int32_t *slots = dev(be, (size_t)n * sizeof(int32_t));
  const int32_t s[9] = {5, -1, 0, 39, 17, -1, 18, 2, 33};
  memcpy(slots, s, sizeof s);
  tu_poison_f32(kc, (size_t)n_slots * kv_dim);
  tu_poison_f32(vc, (size_t)n_slots * kv_dim);
  tu_fill_normal(&rng, k, (size_t)n * kv_dim, 1.0f);
  tu_fill_normal(&rng, v, (size_t)n * kv_dim, 1.0f);
  be->kv_write(be, kc, vc, k, v, slots, n, kv_dim);
  for (int i = 0; i < n_slots; i++) {
    int src = -1;
    for (int j = 0; j < n; j++)
      if (s[j] == i) src = j;
    for (int d = 0; d < kv_dim; d++) {
      if (src < 0) {
        assert_true(isnan(kc[i * kv_dim + d]) && isnan(vc[i * kv_dim + d]));
      } else {
        assert_true(kc[i * kv_dim + d] == k[src * kv_dim + d]);
        assert_true(vc[i * kv_dim + d] == v[src * kv_dim + d]);
      }
    }
  }
  be->free(be, kc);
  be->free(be, vc);
  be->free(be, k);
  be->free(be, v);
  be->free(be, slots);
  kern_backend_destroy(be);
}

/* --- sliding windows ---------------------------------------------------------- */

/* Windows smaller than, equal to and larger than the sequences, on tile (64),
 * block (16) and segment (1,024 keys) edges: both varlen kernels match the
 * float64 reference, agree bitwise, and keep their bits on 1 and 3 threads
 * (3 threads split the long sequences along keys, the segments before the
 * window skipped). */
static void sliding_window_varlen(void **state) {
  (void)state;
  kern_backend_t *be1 = kern_backend_create("cpu", 1), *be3 = kern_backend_create("cpu", 3);
  assert_non_null(be1);
  assert_non_null(be3);
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed() + 6);
  const int32_t ql[] = {200, 7, 1, 5, 40, 1, 130}, kl[] = {200, 2500, 1, 3, 40, 1100, 1200};
  fixture_t f;
  fx_init(&f, be1, &rng, 7, ql, kl, 4, 2, 64, 16, 0);
  const int windows[] = {1, 2, 15, 16, 17, 40, 64, 65, 100, 1024, 1025, 1100, 2500, 2501, 5000};
  for (size_t w = 0; w < sizeof windows / sizeof *windows; w++) {
    fx_window(&f, windows[w]);
    char what[80];
    float *o_varlen = fx_run(&f, be1, RUN_VARLEN);
    snprintf(what, sizeof what, "attn_varlen, window %d", windows[w]);
    ref_check(what, o_varlen, f.ref, (long)fx_out_n(&f));
    float *o_paged = fx_run(&f, be1, RUN_PAGED);
    snprintf(what, sizeof what, "attn_varlen_paged, window %d", windows[w]);
    ref_check(what, o_paged, f.ref, (long)fx_out_n(&f));
    assert_same_bits("window: paged vs gather", o_paged, o_varlen, fx_out_n(&f));
    float *o3 = fx_run(&f, be3, RUN_PAGED);
    assert_same_bits("window: 3 threads vs 1", o_paged, o3, fx_out_n(&f));
    free(o3);
    free(o_varlen);
    free(o_paged);
  }
  /* a window changes the output where it hides keys (the test can fail) */
  fx_window(&f, 0);
  float *full = fx_run(&f, be1, RUN_PAGED);
  fx_window(&f, 64);
  float *win = fx_run(&f, be1, RUN_PAGED);
  const size_t row = (size_t)4 * 64;
  assert_memory_equal(full, win, 64 * row * sizeof(float)); /* rows 0..63 of the prefill see <= 64 keys */
  assert_memory_not_equal(full + 64 * row, win + 64 * row, row * sizeof(float));
  free(full);
  free(win);
  fx_free(&f);
  kern_backend_destroy(be1);
  kern_backend_destroy(be3);
}

/* Decode rows under windows across tile, block and segment edges (and with
 * soft-capped scores, and with learned sinks): the appended key counts, attn_decode matches the reference and gives the bits
 * of attn_varlen_paged and attn_varlen on the same batch; a prompt run in
 * chunks gives the bits of its whole prefill. */
static void sliding_window_decode_and_chunks(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 2);
  assert_non_null(be);
  tu_rng_t rng;
  tu_rng_init(&rng, tu_seed() + 7);
  int32_t cached[] = {0, 1, 15, 16, 17, 63, 64, 65, 1030, 2100};
  const int n = (int)(sizeof cached / sizeof *cached), hd = 128, nh = 8, kvh = 2, bs = 16;
  int32_t ql[10], kl[10];
  for (int b = 0; b < n; b++) ql[b] = 1, kl[b] = cached[b] + 1;
  fixture_t f;
  fx_init(&f, be, &rng, n, ql, kl, nh, kvh, hd, bs, 1);
  decode_in_t in;
  decode_in_init(&in, &f, cached);
  const int windows[] = {1, 16, 17, 64, 100, 1025, 4000, 0, 64, 0, 17, 1};
  /* gpt-oss's learned sinks, one per head: small, negative, one that dominates (outputs near 0)
   * and one far past float exp's range (the kernel's denominator overflows to inf, its outputs are
   * 0; the reference's are ~1e-40) */
  const float sinks[8] = {0.5f, -1.0f, 3.0f, 12.0f, -6.0f, 0.0f, 2.0f, 95.0f};
  for (size_t w = 0; w < sizeof windows / sizeof *windows; w++) {
    f.softcap = w == 7 || w == 8 ? 1.5f : 0.0f; /* Gemma 2's soft-capped scores */
    f.sinks = w >= 9 ? sinks : NULL;               /* the last three: gpt-oss's sinks */
    fx_window(&f, windows[w]);
    kern_attn_args_t a = decode_in_args(&in, &f);
    tu_poison_f32(f.out, fx_out_n(&f));
    be->attn_decode(be, &a); /* appends, then attends */
    float *o_decode = malloc(fx_out_n(&f) * sizeof(float));
    memcpy(o_decode, f.out, fx_out_n(&f) * sizeof(float));
    char what[64];
    snprintf(what, sizeof what, "attn_decode, window %d, softcap %g, sinks %s", windows[w], f.softcap,
             f.sinks ? "on" : "off");
    ref_check(what, o_decode, f.ref, (long)fx_out_n(&f));
    float *o_paged = fx_run(&f, be, RUN_PAGED);
    assert_same_bits("window: decode vs varlen_paged", o_decode, o_paged, fx_out_n(&f));
    float *o_varlen = fx_run(&f, be, RUN_VARLEN);
    assert_same_bits("window: decode vs varlen (gather)", o_decode, o_varlen, fx_out_n(&f));
    free(o_decode);
    free(o_paged);
    free(o_varlen);
  }
  decode_in_free(&in, be);
  fx_free(&f);

  /* chunked prefill of one prompt under a window of 100 */
  const int L = 1300;
  int32_t q1[1] = {L}, k1[1] = {L};
  fx_init(&f, be, &rng, 1, q1, k1, 4, 2, 64, 32, 0);
  fx_window(&f, 100);
  float *whole = fx_run(&f, be, RUN_PAGED);
  ref_check("window 100, whole prefill", whole, f.ref, (long)fx_out_n(&f));
  const int cuts[] = {0, 1, 99, 100, 101, 700, 1100, 1299, L};
  check_chunks(&f, be, whole, cuts, sizeof cuts / sizeof *cuts);
  free(whole);
  fx_free(&f);
  kern_backend_destroy(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(random_batches_match_reference),
      cmocka_unit_test(decode_equals_varlen),
      cmocka_unit_test(invariant_to_threads_and_batch),
      cmocka_unit_test(invariant_to_chunking),
      cmocka_unit_test(spec_varlen_example),
      cmocka_unit_test(kv_write_skips_minus_one),
      cmocka_unit_test(sliding_window_varlen),
      cmocka_unit_test(sliding_window_decode_and_chunks),
  };
  return cmocka_run_group_tests_name("attention kernels", tests, NULL, NULL);
}
