/* tests/gpu/model_check.c — the full-model check of a device backend
 * (CUDA) against a reference backend (the CPU one), through the real model
 * forward (model/model.h) and paged KV cache.
 *
 *   model_check -m MODEL [--dev cuda] [--ref cpu] [-t THREADS] [--seqs S]
 *               [--prompt N] [--gen G] [--tol 1e-2] [--row-tol 0.2]
 *               [--strict] [--no-ref] [--ref-model PATH]
 *
 * 1. logits. S sequences of random ordinary tokens (N/4..N long) run
 *    through the same steps on both backends: staggered starts, whole and
 *    chunked prefills beside decode rows, then decode steps; each new token
 *    is the reference's greedy choice, so both see the same batches. The
 *    logits of all rows must agree: relative L2 (over all rows at once)
 *    < tol (1e-2, the bound for bf16), and each row's < row-tol
 *    (default 20 x tol: it catches a broken row among many). Why not tol
 *    for each row: an exact bf16 pipeline (bf16 weights, bf16 matmul inputs
 *    and K/V, f32 elsewhere) already puts single rows from float64 at up to
 *    4e-2 (the default model) and 8e-2 (its first 10 blocks; first
 *    positions), over all rows at 3e-3 to 7e-3 (tests/gpu/bf16_ideal.py).
 * 2. batch composition, on the device backend alone. The same prompts
 *    generate G greedy tokens three ways: all together, each alone, and
 *    staggered with chunked prefill. The tokens must be the same. Where they
 *    are not, the report names the sequence, the token and its position,
 *    the two candidate logits and how far that row's logits moved between
 *    the runs. The row's inputs were identical up to there, so the movement
 *    is the batch's doing: within tol it is a WARN (a near tie flipped by a
 *    kernel that is not bitwise batch invariant: on CUDA, cuBLAS choosing
 *    another GEMM algorithm for another number of rows; see part 3), beyond
 *    tol a FAIL; --strict makes any change of token a FAIL. A backend
 *    other than "cuda" must be bitwise batch invariant (kernels/kern.h):
 *    any difference in bits is a FAIL.
 * 3. matmul probe: the device backend's matmul on random Q8_0 weights of
 *    the model's shapes; does row 0 keep its bits for n = 1 .. 256 rows?
 * 4. decode-step graphs (model/model_graph.h), on the device backend: the
 *    "together" and "staggered" generations of part 2 again on two more
 *    runners of the same model, one that pads decode steps to their bucket
 *    and issues the kernels (PADDED), one that captures and replays them
 *    (ON). ON against PADDED must be bit-identical (a replay runs the
 *    kernels that were captured, on the same shapes) and ON must have
 *    captured and replayed graphs, none failed; ON against the unpadded
 *    runs of part 2 must give the same tokens (padding rows change no real
 *    row; the GEMMs of n and of bucket(n) rows may differ in bits on CUDA,
 *    so rows within tol are a WARN on a flipped near tie, as in part 2).
 *    On a backend without graphs (--dev cpu) ON pads nothing: PADDED
 *    against the unpadded run must then be bit-identical. A hybrid or
 *    mixture-of-experts model's runners pad and capture nothing at all
 *    (model_runner_create): PADDED and ON must both be bit-identical to
 *    the unpadded run and count no padded step.
 *
 * A hybrid model (Gated DeltaNet layers) runs with a recurrent-state pool
 * (model_lane.h); the probe of part 3 skips a matrix the model lacks (a
 * mixture has no dense MLP) or whose rows are not whole Q8_0 blocks.
 *
 * --ref-model loads another file on the reference side (same vocabulary):
 * a negative control, to see part 1 fail (e.g. the model against a
 * truncated copy of itself).
 *
 * Prints PASS / FAIL / WARN lines and "checks: P passed, F failed, W
 * warnings"; exits 0, 1 on a failure, 2 on a usage or set-up error. Random
 * inputs from tu_seed() (printed; TRAM_TEST_SEED replays). Built by `make
 * gpu-tests` (no libuv, cJSON or systemd); --dev cpu runs without a GPU. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "model/model_graph.h"
#include "tests/gpu/model_lane.h"
#include "text/tokenizer.h"
#include "tests/unit/testutil.h"

typedef struct mc {
  int S, N, G;         /* sequences, longest prompt, generated tokens */
  double tol, row_tol; /* logits: all rows, each row */
  int strict;
  int V;               /* vocabulary */
  int pass, fail, warn;
  tu_rng_t rng;
  int32_t **toks;      /* [S][N + G] prompt, then generated tokens */
  int *plen, *len;     /* [S] prompt length; tokens known */
  float *rows;         /* [max step tokens, V] the device lane's logits */
  float *ref_rows;     /* [max step tokens, V] the reference lane's */
} mc_t;

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) abort();
  return p;
}

static void report(mc_t *c, const char *tag, const char *name, const char *fmt, va_list ap) {
  printf("%s %s: ", tag, name);
  vprintf(fmt, ap);
  printf("\n");
  fflush(stdout);
  (void)c;
}

static void result(mc_t *c, int ok, const char *name, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void result(mc_t *c, int ok, const char *name, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report(c, ok ? "PASS" : "FAIL", name, fmt, ap);
  va_end(ap);
  ok ? c->pass++ : c->fail++;
}

static void warn(mc_t *c, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void warn(mc_t *c, const char *name, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report(c, "WARN", name, fmt, ap);
  va_end(ap);
  c->warn++;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int argmax(const float *x, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

/* Second-largest value of x[n]. */
static float runner_up(const float *x, int n, int top) {
  float v = -INFINITY;
  for (int i = 0; i < n; i++)
    if (i != top && x[i] > v) v = x[i];
  return v;
}

/* ||a - b||² and ||b||² in double, and max |a - b|; -1 when a has a
 * non-finite value. */
static int l2_parts(const float *a, const float *b, int n, double *num, double *den, double *max_abs) {
  double nu = 0, de = 0, m = 0;
  for (int i = 0; i < n; i++) {
    if (!isfinite(a[i])) return -1;
    const double d = (double)a[i] - (double)b[i];
    nu += d * d;
    de += (double)b[i] * b[i];
    if (fabs(d) > m) m = fabs(d);
  }
  *num = nu, *den = de;
  if (max_abs) *max_abs = m;
  return 0;
}

/* ||a - b|| / ||b|| (inf when a has a non-finite value). */
static double rel_l2(const float *a, const float *b, int n, double *max_abs) {
  double num, den;
  if (l2_parts(a, b, n, &num, &den, max_abs) != 0) return INFINITY;
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ---- the step plan shared by every run ------------------------------------ */

/* Sequence b joins at step start[b] and prefills chunk[b] tokens a step;
 * once its prompt is in, one token a step, until it has generated G. */
typedef struct mc_plan {
  const char *name;
  int start[64], chunk[64];
} mc_plan_t;

static int generated(const mc_t *c, int b) { return c->len[b] - c->plen[b]; }

/* The sequences of step k and their new tokens; returns how many. */
static int plan_step(const mc_t *c, const ml_lane_t *l, const mc_plan_t *p, int k, int *seq, int *q) {
  int n = 0;
  for (int b = 0; b < c->S; b++) {
    const int have = ml_cached(l, b);
    if (k < p->start[b] || generated(c, b) >= c->G) continue;
    seq[n] = b;
    q[n++] = have < c->plen[b] ? (p->chunk[b] < c->plen[b] - have ? p->chunk[b] : c->plen[b] - have)
                               : c->len[b] - have;
  }
  return n;
}

static int all_generated(const mc_t *c) {
  for (int b = 0; b < c->S; b++)
    if (generated(c, b) < c->G) return 0;
  return 1;
}

static void restart(mc_t *c) {
  for (int b = 0; b < c->S; b++) c->len[b] = c->plen[b];
}

/* ---- 1. logits against the reference --------------------------------------- */

static void check_logits(mc_t *c, ml_lane_t *dev, ml_lane_t *ref, const mc_plan_t *p) {
  int seq[64], q[64];
  int64_t rows = 0, same_bits = 0, same_top = 0;
  double worst = -1, num = 0, den = 0, worst_abs = 0;
  int worst_seq = -1, worst_pos = -1, bad = 0, non_finite = 0;
  const double t0 = now_s();
  restart(c);
  for (int k = 0; !all_generated(c); k++) {
    const int n = plan_step(c, ref, p, k, seq, q);
    if (n == 0) continue;
    int before[64];
    for (int i = 0; i < n; i++) before[i] = ml_cached(ref, seq[i]);
    if (ml_step(ref, n, seq, q, c->toks, 1, c->ref_rows) != 0 || ml_step(dev, n, seq, q, c->toks, 1, c->rows) != 0) {
      result(c, 0, "logits", "step %d failed (see above)", k);
      return;
    }
    for (int i = 0, r = 0; i < n; i++) {
      for (int j = 0; j < q[i]; j++, r++) {
        const float *d = c->rows + (size_t)r * c->V, *w = c->ref_rows + (size_t)r * c->V;
        double mabs = 0, nu = 0, de = 0;
        non_finite += l2_parts(d, w, c->V, &nu, &de, &mabs) != 0;
        const double e = de > 0 ? sqrt(nu / de) : sqrt(nu);
        rows++;
        num += nu, den += de;
        same_bits += memcmp(d, w, (size_t)c->V * sizeof *d) == 0;
        same_top += argmax(d, c->V) == argmax(w, c->V);
        if (!(e < c->row_tol)) bad++;
        if (!(e <= worst)) {
          worst = e, worst_abs = mabs, worst_seq = seq[i], worst_pos = before[i] + j;
        }
      }
      /* the reference's greedy token extends the sequence on both lanes */
      const int b = seq[i];
      if (ml_cached(ref, b) == c->len[b] && generated(c, b) < c->G)
        c->toks[b][c->len[b]++] = argmax(c->ref_rows + (size_t)(r - 1) * c->V, c->V);
    }
  }
  const double all = den > 0 ? sqrt(num / den) : sqrt(num);
  result(c, non_finite == 0 && all < c->tol && bad == 0, "logits",
         "%s vs %s, %lld rows (%d varlen + %d decode steps): rel L2 %.3g over all rows (tol %g), per row max %.3g "
         "(sequence %d, position %d, max |diff| %.3g; %lld rows over %g); %d rows not finite; argmax agrees on %lld, "
         "bit-identical %lld (%.1f s)",
         dev->be->name, ref->be->name, (long long)rows, dev->paths[2], dev->paths[1], all, c->tol,
         worst > 0 ? worst : 0.0, worst_seq, worst_pos, worst_abs, (long long)bad, c->row_tol, non_finite,
         (long long)same_top, (long long)same_bits, now_s() - t0);
}

/* ---- 2. greedy outputs across batch compositions ----------------------------- */

typedef struct mc_gen {
  int32_t *tok;  /* [S, G] */
  float *logits; /* [S, G, V] the row each token was chosen from */
} mc_gen_t;

static int generate(mc_t *c, ml_lane_t *l, const mc_plan_t *p, mc_gen_t *out) {
  int seq[64], q[64];
  restart(c);
  ml_reset(l);
  for (int k = 0; !all_generated(c); k++) {
    const int n = plan_step(c, l, p, k, seq, q);
    if (n == 0) continue;
    if (ml_step(l, n, seq, q, c->toks, 0, c->rows) != 0) return -1;
    for (int i = 0; i < n; i++) {
      const int b = seq[i], g = generated(c, b);
      if (ml_cached(l, b) != c->len[b]) continue; /* a prefill chunk: no token yet */
      const float *row = c->rows + (size_t)i * c->V;
      memcpy(out->logits + ((size_t)b * c->G + g) * c->V, row, (size_t)c->V * sizeof *row);
      out->tok[b * c->G + g] = c->toks[b][c->len[b]++] = argmax(row, c->V);
    }
  }
  return 0;
}

/* Compares run x with run t (the reference composition), row by row up to
 * and including each sequence's first differing token. */
static void compare_runs(mc_t *c, const char *name, const mc_gen_t *t, const mc_gen_t *x, int need_bits) {
  int64_t rows = 0, same_bits = 0;
  double worst = 0;
  int diverged = 0;
  char where[1024] = "";
  size_t w = 0;
  for (int b = 0; b < c->S; b++) {
    for (int g = 0; g < c->G; g++) {
      const size_t o = ((size_t)b * c->G + g) * c->V;
      const float *tr = t->logits + o, *xr = x->logits + o;
      double mabs = 0;
      const double e = rel_l2(xr, tr, c->V, &mabs);
      rows++;
      same_bits += memcmp(xr, tr, (size_t)c->V * sizeof *xr) == 0;
      if (!(e <= worst)) worst = e;
      const int tt = t->tok[b * c->G + g], xt = x->tok[b * c->G + g];
      if (tt == xt) continue;
      if (diverged++ < 4 && w < sizeof where - 256)
        w += (size_t)snprintf(where + w, sizeof where - w,
                              "%ssequence %d token %d (position %d): together %d (logit %.5g, runner-up %.5g), "
                              "%s %d (its logit there %.5g); that row moved by rel L2 %.3g, max |diff| %.3g",
                              diverged > 1 ? "; " : "", b, g, c->plen[b] + g, tt, tr[tt],
                              runner_up(tr, c->V, tt), name, xt, xr[xt], e, mabs);
      break; /* later rows of b had other inputs */
    }
  }
  const int bits_ok = same_bits == rows;
  if (worst >= c->tol || (need_bits && !bits_ok)) {
    result(c, 0, name, "rows of identical inputs differ: %lld of %lld not bit-identical, rel L2 max %.3g (tol %g)%s%s",
           (long long)(rows - same_bits), (long long)rows, worst, c->tol, diverged ? "; " : "", where);
  } else if (diverged) {
    if (c->strict)
      result(c, 0, name, "%d of %d sequences generate other tokens: %s", diverged, c->S, where);
    else
      warn(c, name, "%d of %d sequences generate other tokens, rows within tol (rel L2 max %.3g): %s", diverged,
           c->S, worst, where);
  } else {
    result(c, 1, name, "the same %d x %d greedy tokens; %lld of %lld rows bit-identical%s (rel L2 max %.3g)", c->S,
           c->G, (long long)same_bits, (long long)rows, bits_ok ? "" : ", the others within tol", worst);
  }
}

static void check_composition(mc_t *c, ml_lane_t *dev) {
  mc_plan_t together = {.name = "together"}, alone = {.name = "alone"}, staggered = {.name = "staggered"};
  for (int b = 0; b < c->S; b++) {
    together.start[b] = 0, together.chunk[b] = c->N;
    alone.start[b] = b * (c->N + c->G), alone.chunk[b] = c->N; /* one after the other */
    staggered.start[b] = 2 * b, staggered.chunk[b] = 7;
  }
  const size_t n = (size_t)c->S * c->G;
  mc_gen_t run[3];
  const mc_plan_t *plans[3] = {&together, &alone, &staggered};
  const double t0 = now_s();
  for (int i = 0; i < 3; i++) {
    run[i].tok = xmalloc(n * sizeof *run[i].tok);
    run[i].logits = xmalloc(n * c->V * sizeof *run[i].logits);
    if (generate(c, dev, plans[i], &run[i]) != 0) {
      result(c, 0, plans[i]->name, "generation failed (see above)");
      for (int j = 0; j <= i; j++) free(run[j].tok), free(run[j].logits);
      return;
    }
  }
  printf("batch compositions: %d sequences x %d tokens, 3 runs in %.1f s\n", c->S, c->G, now_s() - t0);
  const int need_bits = strcmp(dev->be->name, "cuda") != 0;
  compare_runs(c, "alone", &run[0], &run[1], need_bits);
  compare_runs(c, "staggered", &run[0], &run[2], need_bits);
  for (int i = 0; i < 3; i++) free(run[i].tok), free(run[i].logits);
}

/* ---- 3. the matmul probe ------------------------------------------------------ */

static void probe_matmul(mc_t *c, kern_backend_t *be, const model_hparams_t *hp) {
  const struct {
    const char *name;
    int rows, cols;
  } shapes[] = {{"attn_q", hp->q_dim, hp->dim}, {"ffn_up", hp->ff_dim, hp->dim}, {"ffn_down", hp->dim, hp->ff_dim},
                {"output", hp->n_vocab, hp->dim}};
  const int ns[] = {1, 2, 3, 8, 17, 64, 256}, max_n = 256;
  const int need_bits = strcmp(be->name, "cuda") != 0;
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    const int rows = shapes[s].rows, cols = shapes[s].cols;
    if (rows < 1 || cols < 1 || cols % 32 != 0) { /* no dense MLP (experts), or rows not whole Q8_0 blocks */
      printf("%s: matmul [%d x %d] not probed (%s)\n", shapes[s].name, rows, cols,
             rows < 1 || cols < 1 ? "the model has no such matrix" : "rows not whole blocks of 32");
      continue;
    }
    const int64_t row_bytes = kern_type_row_bytes(KERN_Q8_0, cols);
    uint8_t *wq = xmalloc((size_t)rows * row_bytes);
    for (int64_t i = 0; i < rows * row_bytes; i += 34) {
      const uint64_t r = tu_next(&c->rng);
      const uint16_t d = (uint16_t)(0x1C00 + (r & 0xFF)); /* f16 scale near 2^-8 */
      memcpy(wq + i, &d, 2);
      for (int j = 0; j < 32; j += 8) {
        const uint64_t v = tu_next(&c->rng);
        memcpy(wq + i + 2 + j, &v, 8);
      }
    }
    kern_weight_t w;
    if (be->weight_init(be, &w, KERN_Q8_0, rows, cols, wq) != 0) {
      result(c, 0, shapes[s].name, "weight_init refused Q8_0 [%d, %d]", rows, cols);
      free(wq);
      continue;
    }
    float *xh = xmalloc((size_t)max_n * cols * sizeof *xh);
    tu_fill_normal(&c->rng, xh, (size_t)max_n * cols, 1.0f);
    float *x = be->alloc(be, (size_t)max_n * cols * sizeof *x), *y = be->alloc(be, (size_t)max_n * rows * sizeof *y);
    float *y1 = xmalloc((size_t)rows * sizeof *y1), *yn = xmalloc((size_t)rows * sizeof *yn);
    if (!x || !y) abort();
    be->upload(be, x, xh, (size_t)max_n * cols * sizeof *x);
    char differ[128] = "";
    size_t dl = 0;
    double worst = 0;
    int det = 1;
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
      be->matmul(be, y, x, &w, ns[k]);
      be->download(be, k ? yn : y1, y, (size_t)rows * sizeof *y1);
      if (k == 0) { /* n = 1 again: deterministic? */
        be->matmul(be, y, x, &w, 1);
        be->download(be, yn, y, (size_t)rows * sizeof *yn);
        det = memcmp(y1, yn, (size_t)rows * sizeof *y1) == 0;
        continue;
      }
      if (memcmp(y1, yn, (size_t)rows * sizeof *y1) != 0) {
        dl += (size_t)snprintf(differ + dl, sizeof differ - dl, "%s%d", dl ? ", " : "", ns[k]);
        const double e = rel_l2(yn, y1, rows, NULL);
        if (e > worst) worst = e;
      }
    }
    if (!det)
      result(c, 0, shapes[s].name, "matmul [%d x %d] gives other bits for the same n = 1 call twice", rows, cols);
    else if (dl == 0)
      result(c, 1, shapes[s].name, "matmul [%d x %d]: row 0 has the same bits for n = 1 .. %d", rows, cols, max_n);
    else if (need_bits)
      result(c, 0, shapes[s].name, "matmul [%d x %d]: row 0 changes bits at n = %s (rel %.3g)", rows, cols, differ,
             worst);
    else
      warn(c, shapes[s].name, "matmul [%d x %d]: row 0 changes bits at n = %s against n = 1 (rel %.3g): the GEMM is "
           "not bitwise batch invariant", rows, cols, differ, worst);
    be->free(be, x), be->free(be, y);
    be->weight_release(be, &w);
    free(wq), free(xh), free(y1), free(yn);
  }
}

/* ---- 4. decode-step graphs ------------------------------------------------------ */

static void check_graphs(mc_t *c, ml_lane_t *dev, const char *dev_name, const char *model, int threads,
                         int max_tokens, int max_len) {
  ml_lane_t padded, on;
  if (ml_open_graphs(&padded, dev_name, model, threads, c->S, max_tokens, max_len, MODEL_GRAPHS_PADDED) != 0) {
    result(c, 0, "graphs", "cannot open the padded runner");
    return;
  }
  if (ml_open_graphs(&on, dev_name, model, threads, c->S, max_tokens, max_len, MODEL_GRAPHS_ON) != 0) {
    ml_close(&padded);
    result(c, 0, "graphs", "cannot open the graph runner");
    return;
  }
  /* the runner pads and captures decode steps only for models without
   * recurrent layers or experts (model_runner_create: a hybrid's padding
   * rows would need states, a mixture of experts routes on the host) */
  const int pads = dev->hp->full_attn_interval == 0 && dev->hp->n_expert == 0;
  const int captures = pads && on.be->graph_begin != NULL;
  mc_plan_t together = {.name = "together"}, staggered = {.name = "staggered"};
  for (int b = 0; b < c->S; b++) {
    together.start[b] = 0, together.chunk[b] = c->N;
    staggered.start[b] = 2 * b, staggered.chunk[b] = 7;
  }
  const mc_plan_t *plans[2] = {&together, &staggered};
  const size_t n = (size_t)c->S * c->G;
  const double t0 = now_s();
  for (int p = 0; p < 2; p++) {
    mc_gen_t run[3]; /* unpadded (dev), padded, replayed */
    ml_lane_t *lanes[3] = {dev, &padded, &on};
    int ok = 1;
    for (int i = 0; i < 3; i++) {
      run[i].tok = xmalloc(n * sizeof *run[i].tok);
      run[i].logits = xmalloc(n * c->V * sizeof *run[i].logits);
      if (ok && generate(c, lanes[i], plans[p], &run[i]) != 0) ok = 0;
    }
    char name[64];
    if (!ok) {
      result(c, 0, "graphs", "%s: generation failed (see above)", plans[p]->name);
    } else if (captures) {
      snprintf(name, sizeof name, "graphs %s replayed vs padded", plans[p]->name);
      compare_runs(c, name, &run[1], &run[2], 1);
      snprintf(name, sizeof name, "graphs %s replayed vs unpadded", plans[p]->name);
      compare_runs(c, name, &run[0], &run[2], 0);
    } else {
      snprintf(name, sizeof name, "graphs %s padded vs unpadded", plans[p]->name);
      compare_runs(c, name, &run[0], &run[1], 1);
      if (!pads) { /* nothing padded, nothing captured: the same kernels on the same shapes */
        snprintf(name, sizeof name, "graphs %s graph runner vs unpadded", plans[p]->name);
        compare_runs(c, name, &run[0], &run[2], 1);
      }
    }
    for (int i = 0; i < 3; i++) free(run[i].tok), free(run[i].logits);
  }
  model_graph_stats_t ps, gs;
  model_runner_graph_stats(padded.run, &ps);
  model_runner_graph_stats(on.run, &gs);
  if (captures)
    result(c, gs.captured > 0 && gs.replayed >= gs.captured && gs.failed == 0 && ps.eager > 0,
           "graphs used", "%llu graphs captured, %llu steps replayed, %llu failed, %llu eager (warm-ups); the padded runner "
           "issued %llu padded steps (%.1f s)",
           (unsigned long long)gs.captured, (unsigned long long)gs.replayed, (unsigned long long)gs.failed,
           (unsigned long long)gs.eager, (unsigned long long)ps.eager, now_s() - t0);
  else if (!pads)
    result(c, gs.captured + gs.replayed + gs.eager + ps.eager == 0, "graphs used",
           "a %s model runs unpadded and uncaptured: the graph runner padded %llu steps, the padded runner %llu",
           dev->hp->full_attn_interval ? "hybrid" : "mixture-of-experts",
           (unsigned long long)(gs.captured + gs.replayed + gs.eager), (unsigned long long)ps.eager);
  else
    result(c, gs.captured + gs.replayed + gs.eager == 0 && ps.eager > 0, "graphs used",
           "the %s backend has no graphs: the graph runner padded nothing (%llu steps), the padded runner %llu steps",
           dev->be->name, (unsigned long long)(gs.captured + gs.replayed + gs.eager), (unsigned long long)ps.eager);
  ml_close(&on);
  ml_close(&padded);
}

/* ---- main ------------------------------------------------------------------------ */

static int usage(void) {
  fprintf(stderr, "usage: model_check -m MODEL [--dev cuda] [--ref cpu] [-t THREADS] [--seqs S] [--prompt N] "
                  "[--gen G] [--tol 1e-2] [--row-tol 0.2] [--strict] [--no-ref] [--ref-model PATH]\n");
  return 2;
}

int main(int argc, char **argv) {
  const char *model = NULL, *ref_model = NULL, *dev_name = "cuda", *ref_name = "cpu";
  int threads = 0, no_ref = 0;
  mc_t c = {.S = 8, .N = 48, .G = 16, .tol = 1e-2};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--strict")) c.strict = 1;
    else if (!strcmp(a, "--no-ref")) no_ref = 1;
    else if (!v) return usage();
    else if (!strcmp(a, "-m")) model = v, i++;
    else if (!strcmp(a, "--ref-model")) ref_model = v, i++;
    else if (!strcmp(a, "--dev")) dev_name = v, i++;
    else if (!strcmp(a, "--ref")) ref_name = v, i++;
    else if (!strcmp(a, "-t")) threads = atoi(v), i++;
    else if (!strcmp(a, "--seqs")) c.S = atoi(v), i++;
    else if (!strcmp(a, "--prompt")) c.N = atoi(v), i++;
    else if (!strcmp(a, "--gen")) c.G = atoi(v), i++;
    else if (!strcmp(a, "--tol")) c.tol = atof(v), i++;
    else if (!strcmp(a, "--row-tol")) c.row_tol = atof(v), i++;
    else return usage();
  }
  if (c.row_tol == 0) c.row_tol = 20 * c.tol;
  if (!model || c.S < 1 || c.S > 64 || c.N < 4 || c.G < 1 || !(c.tol > 0) || !(c.row_tol > 0)) return usage();
  log_set_level(LOG_LEVEL_WARN);
  const uint64_t seed = tu_seed();
  tu_rng_init(&c.rng, seed);

  const int max_tokens = c.S * (c.N + 1), max_len = c.N + c.G;
  ml_lane_t dev, ref;
  memset(&ref, 0, sizeof ref);
  double t0 = now_s();
  if (ml_open(&dev, dev_name, model, threads, c.S, max_tokens, max_len) != 0) return 2;
  const double load_dev = now_s() - t0;
  const model_hparams_t *hp = dev.hp;
  c.V = hp->n_vocab;
  printf("model_check: %s: %d layers, dim %d, %d/%d heads of %d, vocabulary %d; device %s (loaded in %.1f s), "
         "reference %s; %d sequences of %d..%d prompt tokens, %d generated; seed %llu\n",
         model, hp->n_layers, hp->dim, hp->n_heads, hp->n_kv_heads, hp->head_dim, c.V, dev_name, load_dev,
         no_ref ? "none" : ref_name, c.S, c.N / 4, c.N, c.G, (unsigned long long)seed);

  /* prompts: random ordinary tokens, lengths N/4..N (the first N, the longest) */
  char tok_err[384];
  tok_t *tok = tok_create_from_gguf(model_gguf(dev.model), tok_err, sizeof tok_err);
  if (!tok) {
    fprintf(stderr, "model_check: %s\n", tok_err);
    return 1;
  }
  c.toks = xmalloc((size_t)c.S * sizeof *c.toks);
  c.plen = xmalloc((size_t)c.S * sizeof *c.plen);
  c.len = xmalloc((size_t)c.S * sizeof *c.len);
  for (int b = 0; b < c.S; b++) {
    c.plen[b] = b == 0 ? c.N : c.N / 4 + (int)tu_below(&c.rng, (uint64_t)(c.N - c.N / 4 + 1));
    c.toks[b] = xmalloc((size_t)(c.N + c.G) * sizeof **c.toks);
    for (int j = 0; j < c.plen[b]; j++) {
      int32_t id;
      do id = (int32_t)tu_below(&c.rng, (uint64_t)c.V);
      while (tok_type(tok, id) != TOK_TYPE_NORMAL);
      c.toks[b][j] = id;
    }
  }
  c.rows = xmalloc((size_t)max_tokens * c.V * sizeof *c.rows);
  c.ref_rows = xmalloc((size_t)max_tokens * c.V * sizeof *c.ref_rows);

  if (!no_ref) {
    t0 = now_s();
    if (!ref_model) ref_model = model;
    if (ml_open(&ref, ref_name, ref_model, threads, c.S, max_tokens, max_len) != 0) return 2;
    if (ref.hp->n_vocab != c.V) {
      fprintf(stderr, "model_check: %s has another vocabulary\n", ref_model);
      return 2;
    }
    printf("reference %s: %s, loaded in %.1f s\n", ref_name, ref_model, now_s() - t0);
    mc_plan_t mixed = {.name = "mixed"};
    for (int b = 0; b < c.S; b++) mixed.start[b] = b % 3, mixed.chunk[b] = b % 2 ? 5 + b : c.N;
    check_logits(&c, &dev, &ref, &mixed);
    ml_close(&ref);
  }
  check_composition(&c, &dev);
  probe_matmul(&c, dev.be, hp);
  check_graphs(&c, &dev, dev_name, model, threads, max_tokens, max_len);
  printf("checks: %d passed, %d failed, %d warnings\n", c.pass, c.fail, c.warn);

  for (int b = 0; b < c.S; b++) free(c.toks[b]);
  free(c.toks), free(c.plen), free(c.len), free(c.rows), free(c.ref_rows);
  tok_destroy(tok);
  ml_close(&dev);
  return c.fail ? 1 : 0;
}
