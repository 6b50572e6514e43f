/* tests/unit/test_engine_sampling.c — the engine picking tokens where the
 * logits are (be->sample), on the real default model (skipped when the
 * model file is missing), on the CPU: the CPU backend leaves sampling to the
 * host, so this test gives a copy of it the host emulation of the GPU's
 * sampling kernel (kern_sample_ref, bit for bit the kernel's result) as its
 * be->sample, and runs the same requests through both.
 *
 * Every request gets the same tokens either way: greedy, seeded draws at a
 * temperature with and without min-p, over a top-k with top-p, with
 * repetition, frequency and presence penalties and a logit_bias that names
 * a token twice, with logprobs (device rows), and the requests the device
 * leaves to the host (top-p over the whole vocabulary, logprobs with
 * penalties, the first row of n = 2), batched together so one step mixes
 * device and host rows. The test also
 * counts the rows the emulation picked, so the device path cannot silently
 * go unused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "kernels/kern_sample.h"
#include "kernels/kern.h"
#include "model/model.h"
#include "scheduler/sched.h"
#include "text/tokenizer.h"

enum { N_REQS = 11, MAX_TOKENS = 6, MAX_SEQS = 14 };

/* logit_bias with a token twice (applied twice, in order) */
static const samp_logit_bias_t BIAS[4] = {{314, 2.5f}, {288, -1.0f}, {314, 0.75f}, {451, 3.0f}};

static const char *model_file(void) {
  const char *p = getenv("TRAM_MODEL");
  return p && *p ? p : "models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

static atomic_int device_rows; /* rows the emulation picked */

static atomic_int device_ops; /* penalty ops they applied */

static atomic_int device_logprobs; /* logprobs rows they answered */

static void emulated_sample(kern_backend_t *be, kern_sample_out_t *outs, float *logits, const kern_sample_row_t *rows,
                            const kern_sample_op_t *ops, int n_rows, int32_t n_vocab) {
  (void)be;
  for (int i = 0; i < n_rows; i++) {
    atomic_fetch_add(&device_rows, rows[i].on_device);
    if (rows[i].on_device) atomic_fetch_add(&device_ops, rows[i].n_bias + rows[i].n_count);
    if (rows[i].on_device) atomic_fetch_add(&device_logprobs, rows[i].logprobs);
  }
  kern_sample_ref(outs, logits, rows, ops, n_rows, n_vocab);
}

/* The requests: what each asks of the sampler. */
static sched_req_params_t params_of(int i) {
  sched_req_params_t p = sched_req_params_default();
  p.max_tokens = MAX_TOKENS;
  p.ignore_eos = 1;
  p.samp.has_seed = 1;
  p.samp.seed = 1000 + (uint64_t)i;
  switch (i) {
  case 0: break; /* greedy */
  case 1: p.samp.temperature = 0.8f; break;
  case 2: p.samp.temperature = 1.3f, p.samp.min_p = 0.05f; break;
  case 3: p.samp.temperature = 0.7f, p.samp.top_k = 20, p.samp.top_p = 0.8f; break;
  case 4: p.samp.temperature = 0.9f, p.samp.top_p = 0.9f; break;      /* host */
  case 5: p.samp.repetition_penalty = 1.3f; break;
  case 6: p.samp.logprobs = 1, p.samp.top_logprobs = 3, p.samp.temperature = 0.9f, p.samp.min_p = 0.01f; break;
  case 7: p.samp.temperature = 1.0f, p.n = 2; break;                  /* host first, then device */
  case 8: p.samp.temperature = 0.6f, p.samp.min_p = 0.2f; break;
  case 9: p.samp.temperature = 0.9f, p.samp.frequency_penalty = 0.7f, p.samp.presence_penalty = 0.4f;
    p.samp.logprobs = 1; /* logprobs of a penalised row: the host's */
    p.samp.repetition_penalty = 0.9f, p.samp.logit_bias = BIAS, p.samp.n_logit_bias = 4;
    break;
  default: p.samp.logit_bias = BIAS, p.samp.n_logit_bias = 4, p.samp.presence_penalty = 1.5f; break;
  }
  return p;
}

/* What each token event carried: the token, its logprob and the top list. */
typedef struct got {
  int32_t token, n_top;
  float logprob;
  samp_logprob_t top[3];
} got_t;

/* Runs every request on one engine over `be`; tokens[i][j][t]. */
static void run_all(model_t *m, const tok_t *tok, kern_backend_t *be, got_t tokens[N_REQS][2][MAX_TOKENS]) {
  sched_config_t c = sched_config_default();
  c.kv_cache_blocks = 64;
  c.block_size = 16;
  c.max_seqs = MAX_SEQS;
  c.max_batch_tokens = 256;
  sched_engine_t *e = sched_engine_create(m, tok, be, &c);
  assert_non_null(e);
  static const int32_t prompt[8] = {504, 2988, 288, 451, 8170, 4119, 1732, 314};
  sched_req_t *reqs[N_REQS];
  int n_tok[N_REQS][2] = {{0}};
  char err[256];
  for (int i = 0; i < N_REQS; i++) {
    const sched_req_params_t p = params_of(i);
    reqs[i] = sched_req_create(prompt, 5 + i % 4, &p, NULL, err, sizeof err);
    assert_non_null(reqs[i]);
    assert_int_equal(sched_submit(e, reqs[i], err, sizeof err), 0);
  }
  memset(tokens, 0, sizeof(got_t) * N_REQS * 2 * MAX_TOKENS);
  int finals = 0;
  for (int spins = 0; finals < N_REQS; spins++) {
    assert_true(spins < 60000);
    sched_event_t ev[16];
    const int k = sched_wait_events(e, ev, 16, 10000000);
    for (int j = 0; j < k; j++) {
      int r = 0;
      while (reqs[r] != ev[j].req) r++;
      const int s = ev[j].index;
      if (ev[j].token >= 0) {
        assert_true(n_tok[r][s] < MAX_TOKENS);
        got_t *g = &tokens[r][s][n_tok[r][s]++];
        g->token = ev[j].token;
        g->logprob = ev[j].logprob;
        g->n_top = ev[j].n_top;
        assert_true(g->n_top <= 3);
        for (int t = 0; t < g->n_top; t++) g->top[t] = ev[j].top[t];
      }
      finals += ev[j].final;
      sched_event_release(&ev[j]);
    }
  }
  for (int i = 0; i < N_REQS; i++) {
    assert_int_equal(n_tok[i][0], MAX_TOKENS);
    sched_req_destroy(reqs[i]);
  }
  sched_engine_destroy(e);
}

static void device_rows_give_the_host_tokens(void **state) {
  (void)state;
  if (access(model_file(), R_OK) != 0) skip();
  log_set_level(LOG_LEVEL_WARN);
  kern_backend_t *be = kern_backend_create("cpu", 2);
  assert_non_null(be);
  assert_null(be->sample); /* the CPU backend samples on the host */
  char err[256];
  model_t *m = model_load(model_file(), be, err, sizeof err);
  assert_non_null(m);
  tok_t *tok = tok_create_from_gguf(model_gguf(m), err, sizeof err);
  assert_non_null(tok);
  static got_t host[N_REQS][2][MAX_TOKENS], dev[N_REQS][2][MAX_TOKENS];
  run_all(m, tok, be, host);
  be->sample = emulated_sample;
  run_all(m, tok, be, dev);
  be->sample = NULL;
  for (int i = 0; i < N_REQS; i++)
    for (int s = 0; s < 2; s++)
      for (int t = 0; t < MAX_TOKENS; t++) {
        const got_t *h = &host[i][s][t], *d = &dev[i][s][t];
        if (h->token != d->token)
          fail_msg("request %d, sequence %d, token %d: host %d, device %d", i, s, t, h->token, d->token);
        /* the device sums in another order: logprobs within a few float ulps */
        assert_int_equal(h->n_top, d->n_top);
        assert_float_equal(h->logprob, d->logprob, 1e-5 * (1 + fabsf(h->logprob)));
        for (int j = 0; j < h->n_top; j++) {
          assert_int_equal(h->top[j].token, d->top[j].token);
          assert_float_equal(h->top[j].logprob, d->top[j].logprob, 1e-5 * (1 + fabsf(h->top[j].logprob)));
        }
      }
  /* requests 0, 1, 2, 3, 5, 6, 8, 10 and request 7's second sequence (and
   * its first after the fork) sample on the device: at least 9 rows a step
   * for the steps after the first, with the penalty ops of 5 and 10 */
  assert_true(atomic_load(&device_rows) >= 9 * (MAX_TOKENS - 1));
  assert_true(atomic_load(&device_ops) >= 2 * 4 * (MAX_TOKENS - 1));
  assert_true(atomic_load(&device_logprobs) >= MAX_TOKENS - 1); /* request 6's */
  tok_destroy(tok);
  model_destroy(m);
  kern_backend_destroy(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(device_rows_give_the_host_tokens),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
