/* tests/gpu/check_sample.cu — be->sample against its host emulation,
 * kern_sample_ref (kernels/kern_sample.h): the same token for every row,
 * bit for bit, over greedy rows, temperatures with and without min-p,
 * top-k draws (k of 1, 7, 50 and 1,024, with top-p and min-p), top-p over
 * the whole vocabulary (0.35 and 0.9, with min-p, one row of ties), rows with
 * logprobs (0 to 20 top ones; within 1e-6, the same top ids), rows
 * with penalty ops (biases, one token twice; repetition and subtraction
 * ops) and the rows they leave behind, rows with NaN and infinities, a row without a finite logit, rows left to the
 * host (their token untouched), at the default model's vocabulary (49,152)
 * and Llama-3's (128,256). The emulation is itself checked against the host
 * sampler on the CPU (tests/unit/test_sample_device.c, test_sample_top_p.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <vector>

#include "tests/gpu/gpu_test.cuh"
extern "C" {
#include "kernels/kern_sample.h"
}

static void check_vocab(gt_t *t, int32_t V, int n_rows) {
  std::vector<float> x((size_t)n_rows * V);
  std::vector<kern_sample_row_t> rows(n_rows);
  std::vector<kern_sample_op_t> ops;
  for (int i = 0; i < n_rows; i++) {
    float *row = &x[(size_t)i * V];
    const float scale = 1.0f + (float)(i % 5) * 2.0f; /* flat to peaked */
    gt_normal(t, row, (size_t)V, scale);
    kern_sample_row_t &r = rows[i];
    memset(&r, 0, sizeof r);
    r.on_device = i % 11 != 10;
    r.temperature = i % 4 == 0 ? 0.0f : 0.25f + 0.5f * (float)(i % 4);
    r.min_p = i % 3 == 0 ? 0.0f : (i % 3 == 1 ? 0.05f : 0.5f);
    static const int32_t ks[4] = {1, 7, 50, 1024};
    if (i % 4 && i % 5 == 1 && ks[i % 4] < V) { /* a top-k draw, with top-p and min-p inside it */
      r.top_k = ks[i % 4];
      r.top_p = i % 2 ? 1.0f : 0.8f;
    } else { /* top-p over the whole vocabulary on some rows (the threshold searches) */
      r.top_p = i % 5 == 3 ? (i % 2 ? 0.9f : 0.35f) : 1.0f;
    }
    if (i % 7 == 3) r.logprobs = 1, r.n_top = (i / 7) % 21; /* raw logprobs (a row without ops) */
    r.seed = 1234567ull * (uint64_t)(i + 1);
    r.draw = 1 + (uint64_t)i * 7;
    if (i % 13 == 5) row[(i * 31) % V] = NAN;
    if (i % 17 == 6) row[(i * 37) % V] = -INFINITY;
    if (i % 19 == 7) row[(i * 41) % V] = INFINITY;
    if (i == 8)
      for (int32_t j = 0; j < V; j++) row[j] = j % 2 ? NAN : -INFINITY; /* no finite logit */
    if (i == 9) row[3] = row[V - 1] = 1e4f; /* a tie: the lower id */
    if (i == 13) /* top-p with ties at its cut: six values, each held by many ids */
      for (int32_t j = 0; j < V; j++) row[j] = (float)(j % 6) * 0.5f;
    if (i % 3 == 2 && !r.logprobs) { /* penalty ops: biases (one token twice), then distinct tokens */
      r.op_begin = (int32_t)ops.size();
      const int32_t tb = (i * 101) % V;
      ops.push_back({tb, KERN_SAMPLE_BIAS, 2.0f, 1.0f, 0.0f});
      ops.push_back({(tb + 7) % V, KERN_SAMPLE_BIAS, -1.5f, 1.0f, 0.0f});
      ops.push_back({tb, KERN_SAMPLE_BIAS, 0.25f, 1.0f, 0.0f});
      r.n_bias = 3;
      for (int32_t j = 0; j < 3000 && j < V / 2; j++) {
        const uint32_t fl = KERN_SAMPLE_REP | (j % 3 ? KERN_SAMPLE_SUB : 0u);
        ops.push_back({2 * j, fl, 0.0f, 1.1f + 0.01f * (float)(i % 7), 0.3f * (float)(j % 5)});
      }
      r.n_count = (int32_t)ops.size() - r.op_begin - r.n_bias;
    }
  }
  kern_sample_out_t blank;
  memset(&blank, 0, sizeof blank);
  blank.token = -7; /* rows left to the host keep it */
  std::vector<kern_sample_out_t> want(n_rows, blank), got(n_rows);
  float *dx = (float *)gt_dev_from(t, x.data(), x.size() * 4); /* before the emulation changes x */
  kern_sample_ref(want.data(), x.data(), rows.data(), ops.data(), n_rows, V);
  kern_sample_row_t *dr = (kern_sample_row_t *)gt_dev_from(t, rows.data(), rows.size() * sizeof rows[0]);
  kern_sample_op_t *dop = (kern_sample_op_t *)gt_dev_from(t, ops.data(), (ops.size() + 1) * sizeof(kern_sample_op_t));
  const std::vector<kern_sample_out_t> fill(n_rows, blank);
  kern_sample_out_t *dt = (kern_sample_out_t *)gt_dev_from(t, fill.data(), (size_t)n_rows * sizeof blank);
  t->be->sample(t->be, dt, dx, dr, dop, n_rows, V);
  gt_get(t, got.data(), dt, (size_t)n_rows * sizeof blank);
  char name[96];
  std::vector<int32_t> tw(n_rows), tg(n_rows);
  int lp_bad = 0;
  for (int i = 0; i < n_rows; i++) {
    tw[i] = want[i].token, tg[i] = got[i].token;
    if (!rows[i].logprobs || want[i].token < 0) continue;
    /* log() on the device may differ from the host's in a double's last bit */
    lp_bad += fabsf(got[i].logprob - want[i].logprob) > 1e-6f * (1 + fabsf(want[i].logprob));
    for (int j = 0; j < rows[i].n_top; j++)
      lp_bad += got[i].top_id[j] != want[i].top_id[j] ||
                fabsf(got[i].top_logprob[j] - want[i].top_logprob[j]) > 1e-6f * (1 + fabsf(want[i].top_logprob[j]));
  }
  snprintf(name, sizeof name, "sample = kern_sample_ref, vocabulary %d, %d rows", V, n_rows);
  gt_check_same(t, name, tg.data(), tw.data(), (size_t)n_rows * 4);
  snprintf(name, sizeof name, "sample logprobs = kern_sample_ref's, vocabulary %d", V);
  gt_result(t, name, lp_bad == 0, "%d logprobs or top ids off", lp_bad);
  std::vector<float> gx(x.size()); /* the penalised rows, as the emulation left them */
  gt_get(t, gx.data(), dx, x.size() * 4);
  snprintf(name, sizeof name, "sample applies the penalty ops, vocabulary %d", V);
  gt_check_same(t, name, gx.data(), x.data(), x.size() * 4);
  gt_free(t, dx), gt_free(t, dr), gt_free(t, dop), gt_free(t, dt);
}

void gt_check_sample(gt_t *t) {
  check_vocab(t, 49152, t->quick ? 24 : 96);
  check_vocab(t, 128256, t->quick ? 12 : 64);
  check_vocab(t, 1000, 16); /* chunks of one token and empty ones */
}
