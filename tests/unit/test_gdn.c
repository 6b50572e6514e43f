/* tests/unit/test_gdn.c — the CPU backend's Gated DeltaNet operations
 * (kernels/cpu/ops_gdn.c, gdn_head.c, gdn_vec.c) against a float64 model
 * of kernels/kern.h's contract written here (the causal convolution with
 * its window, the gated delta rule token by token):
 *   - the chunked form (whole 64-row chunks) and the recurrent form agree
 *     with the float64 rule and with each other, outputs and final states,
 *     with chunks, tails and decodes in one batch, strong decays included;
 *   - the AVX2 primitives give the portable ones' very bits;
 *   - a sequence's rows are the same bits alone or beside others, in any
 *     slot order, with 1 or 3 threads;
 *   - the convolution carries its window across steps bit for bit;
 *   - a verification step's kept states (kern_gdn_args_t.keep) are the
 *     states of its rows run one by one, bit for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gdn_cpu.h"
#include "kernels/cpu/simd.h"
#include "kernels/kern.h"
#include "tests/unit/testutil.h"

/* The layer's geometry: grouped heads (4 value heads on 2 key heads) and
 * head sizes that are not multiples of 8 (the vector tails). */
enum { HK = 2, HV = 4, DK = 36, DV = 28, KC = 4, C = 2 * HK * DK + HV * DV, NS = 3 };
#define SLOT ((size_t)(KC - 1) * C + (size_t)HV * DK * DV)

typedef struct {
  int rows[NS]; /* each sequence's rows */
  int total;
  float *y, *alpha, *beta, *a_neg, *dt_bias, *state0;
} inputs_t;

static void make_inputs(inputs_t *in, const int *rows, uint64_t seed) {
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + seed);
  in->total = 0;
  for (int b = 0; b < NS; b++) in->total += in->rows[b] = rows[b];
  in->y = malloc(sizeof(float) * (size_t)in->total * C);
  in->alpha = malloc(sizeof(float) * (size_t)in->total * HV);
  in->beta = malloc(sizeof(float) * (size_t)in->total * HV);
  in->a_neg = malloc(sizeof(float) * HV);
  in->dt_bias = malloc(sizeof(float) * HV);
  in->state0 = malloc(sizeof(float) * SLOT * NS);
  tu_fill_normal(&r, in->y, (size_t)in->total * C, 1.0f);
  tu_fill_normal(&r, in->alpha, (size_t)in->total * HV, 1.5f);
  tu_fill_normal(&r, in->beta, (size_t)in->total * HV, 2.0f);
  for (int h = 0; h < HV; h++) {
    in->a_neg[h] = -(float)exp(tu_uniform(&r, -1.5, 1.5));
    in->dt_bias[h] = (float)tu_uniform(&r, 0, 1);
  }
  in->a_neg[HV - 1] = -40.0f; /* a head whose decay underflows inside a chunk */
  tu_fill_normal(&r, in->state0, SLOT * NS, 0.3f);
}

static void free_inputs(inputs_t *in) {
  free(in->y), free(in->alpha), free(in->beta), free(in->a_neg), free(in->dt_bias), free(in->state0);
}

static kern_gdn_args_t args_for(const inputs_t *in, int32_t *cu, int32_t *slots, const int *order, float *state,
                                int v_tiled) {
  cu[0] = 0;
  for (int b = 0; b < NS; b++) {
    cu[b + 1] = cu[b] + in->rows[order[b]];
    slots[b] = order[b];
  }
  return (kern_gdn_args_t){.n_seqs = NS, .cu_rows = cu, .slots = slots, .state = state, .slot_stride = SLOT,
                           .conv_dim = C, .conv_kernel = KC, .n_k_heads = HK, .n_v_heads = HV, .head_k = DK,
                           .head_v = DV, .v_tiled = v_tiled, .qk_eps = 1e-6f};
}

/* The float64 rule of sequence b (rows y_b, state S_b) as kern.h states it. */
static void rule_f64(const inputs_t *in, int b, int v_tiled, double *out, double *S) {
  int r0 = 0;
  for (int i = 0; i < b; i++) r0 += in->rows[i];
  const float *st = in->state0 + SLOT * b + (size_t)(KC - 1) * C;
  for (size_t i = 0; i < (size_t)HV * DK * DV; i++) S[i] = st[i];
  for (int t = 0; t < in->rows[b]; t++) {
    const float *row = in->y + (size_t)(r0 + t) * C;
    for (int h = 0; h < HV; h++) {
      const int kh = v_tiled ? h % HK : h / (HV / HK);
      double q[DK], k[DK], qs = 0, ks = 0;
      for (int i = 0; i < DK; i++) {
        q[i] = row[kh * DK + i], k[i] = row[(HK + kh) * DK + i];
        qs += q[i] * q[i], ks += k[i] * k[i];
      }
      for (int i = 0; i < DK; i++) q[i] /= sqrt(qs + 1e-6) * sqrt((double)DK), k[i] /= sqrt(ks + 1e-6);
      const double x = (double)in->alpha[(size_t)(r0 + t) * HV + h] + in->dt_bias[h];
      const double decay = exp(in->a_neg[h] * (x > 20 ? x : log1p(exp(x))));
      const double beta = 1 / (1 + exp(-(double)in->beta[(size_t)(r0 + t) * HV + h]));
      double *s = S + (size_t)h * DK * DV, kv[DV] = {0};
      for (int i = 0; i < DK * DV; i++) s[i] *= decay;
      for (int i = 0; i < DK; i++)
        for (int c = 0; c < DV; c++) kv[c] += s[i * DV + c] * k[i];
      for (int i = 0; i < DK; i++)
        for (int c = 0; c < DV; c++) s[i * DV + c] += k[i] * beta * (row[2 * HK * DK + h * DV + c] - kv[c]);
      for (int c = 0; c < DV; c++) {
        double o = 0;
        for (int i = 0; i < DK; i++) o += s[i * DV + c] * q[i];
        out[((size_t)t * HV + h) * DV + c] = o;
      }
    }
  }
}

typedef struct {
  int threads, recurrent, portable, v_tiled;
  int order[NS];
} how_t;

/* Runs the rule on a fresh backend; out [total, HV, DV] in sequence order
 * (b = 0, 1, 2 whatever the batch order), state [NS slots]. */
static void run_rule(const inputs_t *in, how_t how, float *out, float *state) {
  kern_backend_t *be = kern_backend_create("cpu", how.threads);
  assert_non_null(be);
  kern_cpu(be)->gdn_chunked = !how.recurrent;
  kern_cpu(be)->gdn_portable = how.portable;
  memcpy(state, in->state0, sizeof(float) * SLOT * NS);
  int32_t cu[NS + 1], slots[NS];
  kern_gdn_args_t a = args_for(in, cu, slots, how.order, state, how.v_tiled);
  /* the step's rows in batch order */
  float *y = malloc(sizeof(float) * (size_t)in->total * C), *al = malloc(sizeof(float) * (size_t)in->total * HV);
  float *bt = malloc(sizeof(float) * (size_t)in->total * HV), *o = malloc(sizeof(float) * (size_t)in->total * HV * DV);
  int src0[NS] = {0};
  for (int b = 1; b < NS; b++) src0[b] = src0[b - 1] + in->rows[b - 1];
  for (int b = 0; b < NS; b++) {
    const int s = how.order[b], n = in->rows[s];
    memcpy(y + (size_t)cu[b] * C, in->y + (size_t)src0[s] * C, sizeof(float) * (size_t)n * C);
    memcpy(al + (size_t)cu[b] * HV, in->alpha + (size_t)src0[s] * HV, sizeof(float) * (size_t)n * HV);
    memcpy(bt + (size_t)cu[b] * HV, in->beta + (size_t)src0[s] * HV, sizeof(float) * (size_t)n * HV);
  }
  tu_poison_f32(o, (size_t)in->total * HV * DV);
  be->gdn_rule(be, o, y, al, bt, in->a_neg, in->dt_bias, &a);
  for (int b = 0; b < NS; b++) {
    const int s = how.order[b];
    memcpy(out + (size_t)src0[s] * HV * DV, o + (size_t)cu[b] * HV * DV, sizeof(float) * (size_t)in->rows[s] * HV * DV);
  }
  free(y), free(al), free(bt), free(o);
  kern_backend_destroy(be);
}

static const int ROWS[NS] = {150, 1, 70}; /* two chunks and a tail; a decode; a chunk and a tail */

/* Both forms against the float64 rule, and against each other. */
static void forms_match_f64(void **state) {
  (void)state;
  inputs_t in;
  make_inputs(&in, ROWS, 1);
  const size_t n_out = (size_t)in.total * HV * DV;
  float *out[2], *st[2];
  double *want = malloc(sizeof(double) * n_out), *S = malloc(sizeof(double) * (size_t)HV * DK * DV);
  for (int v_tiled = 0; v_tiled < 2; v_tiled++) {
    for (int rec = 0; rec < 2; rec++) {
      out[rec] = malloc(sizeof(float) * n_out), st[rec] = malloc(sizeof(float) * SLOT * NS);
      run_rule(&in, (how_t){2, rec, 0, v_tiled, {0, 1, 2}}, out[rec], st[rec]);
    }
    size_t row0 = 0;
    for (int b = 0; b < NS; b++) {
      const size_t n = (size_t)in.rows[b] * HV * DV, ns = (size_t)HV * DK * DV;
      rule_f64(&in, b, v_tiled, want, S);
      for (int rec = 0; rec < 2; rec++) {
        const double e = tu_rel_l2(out[rec] + row0, want, n), es = tu_rel_l2(st[rec] + SLOT * b + (KC - 1) * C, S, ns);
        print_message("seq %d (%d rows) %s v_tiled %d: out rel L2 %.2e, state %.2e\n", b, in.rows[b],
                      rec ? "recurrent" : "chunked", v_tiled, e, es);
        assert_true(e < 1e-5 && es < 1e-5);
      }
      /* the two forms: close, and equal where no chunk ran (the decode) */
      double d = 0, m = 0;
      for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)out[0][row0 + i] - out[1][row0 + i]));
        m = fmax(m, fabs((double)out[1][row0 + i]));
      }
      assert_true(d <= 1e-5 * m);
      if (in.rows[b] < KERN_GDN_CHUNK) assert_memory_equal(out[0] + row0, out[1] + row0, n * sizeof(float));
      row0 += n;
    }
    for (int rec = 0; rec < 2; rec++) free(out[rec]), free(st[rec]);
  }
  free(want), free(S);
  free_inputs(&in);
}

/* AVX2 and portable primitives: the same bits (both forms); the rows of a
 * sequence: the same bits in any batch order and thread count. */
static void same_bits_everywhere(void **state) {
  (void)state;
  inputs_t in;
  make_inputs(&in, ROWS, 2);
  const size_t n_out = (size_t)in.total * HV * DV;
  float *o0 = malloc(sizeof(float) * n_out), *s0 = malloc(sizeof(float) * SLOT * NS);
  float *o1 = malloc(sizeof(float) * n_out), *s1 = malloc(sizeof(float) * SLOT * NS);
  if (!kern_cpu_simd()) print_message("built without AVX2: the portable path is the only one\n");
  for (int rec = 0; rec < 2; rec++) {
    run_rule(&in, (how_t){2, rec, 0, 1, {0, 1, 2}}, o0, s0);
    const how_t others[] = {{2, rec, 1, 1, {0, 1, 2}}, {1, rec, 0, 1, {2, 0, 1}}, {3, rec, 0, 1, {1, 2, 0}}};
    for (size_t k = 0; k < sizeof others / sizeof *others; k++) {
      run_rule(&in, others[k], o1, s1);
      assert_memory_equal(o0, o1, n_out * sizeof(float));
      assert_memory_equal(s0, s1, SLOT * NS * sizeof(float));
    }
  }
  free(o0), free(s0), free(o1), free(s1);
  free_inputs(&in);
}

/* A sequence alone: the same bits as beside others (its own rows, the
 * same cuts). */
static void alone_is_together(void **state) {
  (void)state;
  inputs_t in, solo;
  make_inputs(&in, ROWS, 3);
  const int rows[NS] = {0, 0, 70};
  make_inputs(&solo, rows, 3);
  /* solo's third sequence := in's third: the same rows and state */
  memcpy(solo.y, in.y + (size_t)151 * C, sizeof(float) * 70 * C);
  memcpy(solo.alpha, in.alpha + (size_t)151 * HV, sizeof(float) * 70 * HV);
  memcpy(solo.beta, in.beta + (size_t)151 * HV, sizeof(float) * 70 * HV);
  memcpy(solo.a_neg, in.a_neg, sizeof(float) * HV), memcpy(solo.dt_bias, in.dt_bias, sizeof(float) * HV);
  memcpy(solo.state0, in.state0, sizeof(float) * SLOT * NS);
  float *o0 = malloc(sizeof(float) * (size_t)in.total * HV * DV), *s0 = malloc(sizeof(float) * SLOT * NS);
  float *o1 = malloc(sizeof(float) * 70 * HV * DV), *s1 = malloc(sizeof(float) * SLOT * NS);
  run_rule(&in, (how_t){3, 0, 0, 0, {1, 2, 0}}, o0, s0);
  run_rule(&solo, (how_t){1, 0, 0, 0, {0, 1, 2}}, o1, s1);
  assert_memory_equal(o0 + (size_t)151 * HV * DV, o1, sizeof(float) * 70 * HV * DV);
  assert_memory_equal(s0 + SLOT * 2, s1 + SLOT * 2, sizeof(float) * SLOT);
  free(o0), free(s0), free(o1), free(s1);
  free_inputs(&in), free_inputs(&solo);
}

/* The convolution against float64, one step or row by row (the window
 * carried in the state): the same bits either way, AVX2 or portable. */
static void conv_matches_f64_and_carries(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 4);
  enum { T = 9 };
  float *x = malloc(sizeof(float) * T * C), *w = malloc(sizeof(float) * C * KC);
  float *st0 = malloc(sizeof(float) * SLOT), *st = malloc(sizeof(float) * SLOT);
  float *y[3] = {malloc(sizeof(float) * T * C), malloc(sizeof(float) * T * C), malloc(sizeof(float) * T * C)};
  tu_fill_normal(&r, x, (size_t)T * C, 1.0f), tu_fill_normal(&r, w, (size_t)C * KC, 0.5f);
  tu_fill_normal(&r, st0, SLOT, 1.0f);
  float *win_end[3];
  for (int way = 0; way < 3; way++) { /* 0: one step; 1: row by row; 2: one step, portable */
    kern_backend_t *be = kern_backend_create("cpu", 2);
    kern_cpu(be)->gdn_portable = way == 2;
    memcpy(st, st0, sizeof(float) * SLOT);
    const int32_t slot = 0;
    for (int t0 = 0; t0 < T;) {
      const int n = way == 1 ? 1 : T;
      const int32_t cu[2] = {0, n};
      kern_gdn_args_t a = {.n_seqs = 1, .cu_rows = cu, .slots = &slot, .state = st, .slot_stride = SLOT,
                           .conv_dim = C, .conv_kernel = KC};
      be->gdn_conv(be, y[way] + (size_t)t0 * C, x + (size_t)t0 * C, w, &a);
      t0 += n;
    }
    win_end[way] = malloc(sizeof(float) * (KC - 1) * C);
    memcpy(win_end[way], st, sizeof(float) * (KC - 1) * C);
    kern_backend_destroy(be);
  }
  double worst = 0;
  for (int t = 0; t < T; t++)
    for (int c = 0; c < C; c++) {
      double acc = 0, mag = 0; /* mag: Σ |w x|, the scale of the f32 sum's rounding */
      for (int k = 0; k < KC; k++) {
        const int src = t - (KC - 1) + k;
        const double term =
            (double)w[c * KC + k] * (src < 0 ? st0[(size_t)(KC - 1 + src) * C + c] : x[(size_t)src * C + c]);
        acc += term, mag += fabs(term);
      }
      const double want = acc / (1 + exp(-acc));
      worst = fmax(worst, fabs(y[0][(size_t)t * C + c] - want) / (1e-30 + mag));
    }
  assert_true(worst < 1e-5);
  for (int i = 0; i < KC - 1; i++) /* the window: the last K - 1 inputs */
    assert_memory_equal(win_end[0] + (size_t)i * C, x + (size_t)(T - (KC - 1) + i) * C, sizeof(float) * C);
  for (int way = 1; way < 3; way++) {
    assert_memory_equal(y[0], y[way], sizeof(float) * T * C);
    assert_memory_equal(win_end[0], win_end[way], sizeof(float) * (KC - 1) * C);
  }
  for (int way = 0; way < 3; way++) free(y[way]), free(win_end[way]);
  free(x), free(w), free(st0), free(st);
}

/* Speculative verification (kern_gdn_args_t.keep): the states a step keeps
 * after each row of a verified sequence are, bit for bit, the states of
 * running its rows one by one (what j + 1 plain decodes leave: the state a
 * verification that accepts j drafts takes), both parts (window and
 * matrices), beside a sequence that keeps none; outputs and final states
 * are the row-by-row ones too, with the chunked form on (a verified
 * sequence runs row by row whatever its length). */
static void kept_states_are_row_by_row(void **state) {
  (void)state;
  enum { NK = 6, TOT = 9 };
  const int32_t cu[NS + 1] = {0, 5, 6, 9};     /* 4 drafts; a plain decode; 2 drafts */
  const int32_t keep[NS] = {NS, -1, NS + 4}, slots[NS] = {0, 1, 2}; /* kept states from slot NS on */
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 5);
  float *x = malloc(sizeof(float) * TOT * C), *w = malloc(sizeof(float) * C * KC);
  float *al = malloc(sizeof(float) * TOT * HV), *bt = malloc(sizeof(float) * TOT * HV), a_neg[HV], dt_bias[HV];
  float *pool = malloc(sizeof(float) * SLOT * (NS + NK)), *st0 = malloc(sizeof(float) * SLOT * NS);
  tu_fill_normal(&r, x, (size_t)TOT * C, 1.0f), tu_fill_normal(&r, w, (size_t)C * KC, 0.5f);
  tu_fill_normal(&r, al, (size_t)TOT * HV, 1.5f), tu_fill_normal(&r, bt, (size_t)TOT * HV, 2.0f);
  for (int h = 0; h < HV; h++) a_neg[h] = -(float)exp(tu_uniform(&r, -1.5, 1.5)), dt_bias[h] = (float)tu_uniform(&r, 0, 1);
  tu_fill_normal(&r, st0, SLOT * NS, 0.3f);
  memcpy(pool, st0, sizeof(float) * SLOT * NS);
  tu_poison_f32(pool + SLOT * NS, SLOT * NK);
  kern_backend_t *be = kern_backend_create("cpu", 2);
  kern_cpu(be)->gdn_chunked = 1;
  kern_gdn_args_t a = {.n_seqs = NS, .cu_rows = cu, .slots = slots, .state = pool, .slot_stride = SLOT,
                       .conv_dim = C, .conv_kernel = KC, .n_k_heads = HK, .n_v_heads = HV, .head_k = DK,
                       .head_v = DV, .v_tiled = 1, .qk_eps = 1e-6f, .keep = keep};
  float *y = malloc(sizeof(float) * TOT * C), *o = malloc(sizeof(float) * TOT * HV * DV);
  be->gdn_conv(be, y, x, w, &a);
  be->gdn_rule(be, o, y, al, bt, a_neg, dt_bias, &a);
  float *one = malloc(sizeof(float) * SLOT), *y1 = malloc(sizeof(float) * C), *o1 = malloc(sizeof(float) * HV * DV);
  for (int b = 0; b < NS; b++) { /* each sequence alone, one row a step */
    memcpy(one, st0 + SLOT * b, sizeof(float) * SLOT);
    for (int row = cu[b]; row < cu[b + 1]; row++) {
      const int32_t cu1[2] = {0, 1}, slot = 0;
      kern_gdn_args_t a1 = a;
      a1.n_seqs = 1, a1.cu_rows = cu1, a1.slots = &slot, a1.state = one, a1.keep = NULL;
      be->gdn_conv(be, y1, x + (size_t)row * C, w, &a1);
      be->gdn_rule(be, o1, y1, al + (size_t)row * HV, bt + (size_t)row * HV, a_neg, dt_bias, &a1);
      assert_memory_equal(y1, y + (size_t)row * C, sizeof(float) * C);
      assert_memory_equal(o1, o + (size_t)row * HV * DV, sizeof(float) * HV * DV);
      if (keep[b] >= 0 && row + 1 < cu[b + 1]) /* the state after row - cu[b] + 1 rows */
        assert_memory_equal(pool + SLOT * (size_t)(keep[b] + row - cu[b]), one, sizeof(float) * SLOT);
    }
    assert_memory_equal(pool + SLOT * (size_t)b, one, sizeof(float) * SLOT); /* all accepted: the slot's */
  }
  free(one), free(y1), free(o1), free(y), free(o);
  kern_backend_destroy(be);
  free(x), free(w), free(al), free(bt), free(pool), free(st0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(forms_match_f64),
      cmocka_unit_test(same_bits_everywhere),
      cmocka_unit_test(alone_is_together),
      cmocka_unit_test(conv_matches_f64_and_carries),
      cmocka_unit_test(kept_states_are_row_by_row),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
