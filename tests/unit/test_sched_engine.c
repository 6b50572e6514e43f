/* tests/unit/test_sched_engine.c — the engine's API contract on the real
 * default model (skipped when the model file is missing): submission
 * errors (-EINVAL with a reason, -EAGAIN past max_waiting, -ESHUTDOWN after
 * drain), event order and ownership (every sequence's events end with one
 * FINISHED, the request's final event last), the notify hook, abort_all,
 * statistics, and destroying an engine with requests in flight (ASan checks
 * that nothing leaks), also one that speculates with a draft model;
 * embeddings' pooling requests. The scheduling properties themselves are tested in
 * test_sched_plan.c and tests/integration/test_engine.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "model/model.h"
#include "scheduler/sched.h"
#include "text/tokenizer.h"

typedef struct fixture {
  kern_backend_t *be;
  model_t *m;
  tok_t *tok;
} fixture_t;

static const char *model_file(void) {
  const char *p = getenv("TRAM_MODEL");
  return p && *p ? p : "models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

static int setup(void **state) {
  log_set_level(LOG_LEVEL_WARN);
  if (access(model_file(), R_OK) != 0) {
    *state = NULL;
    return 0;
  }
  fixture_t *f = calloc(1, sizeof *f);
  f->be = kern_backend_create("cpu", 2);
  char err[256];
  f->m = model_load(model_file(), f->be, err, sizeof err);
  assert_non_null(f->m);
  f->tok = tok_create_from_gguf(model_gguf(f->m), err, sizeof err);
  assert_non_null(f->tok);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  if (!f) return 0;
  tok_destroy(f->tok);
  model_destroy(f->m);
  kern_backend_destroy(f->be);
  free(f);
  return 0;
}

static atomic_int notified;
static void on_notify(void *arg) { atomic_fetch_add((atomic_int *)arg, 1); }

static sched_engine_t *engine(fixture_t *f, int max_seqs, int max_waiting) {
  sched_config_t c = sched_config_default();
  c.kv_cache_blocks = 32;
  c.block_size = 16;
  c.max_seqs = max_seqs;
  c.max_batch_tokens = 64;
  c.max_waiting = max_waiting;
  sched_engine_t *e = sched_engine_create(f->m, f->tok, f->be, &c);
  assert_non_null(e);
  sched_engine_set_notify(e, on_notify, &notified);
  return e;
}

static sched_req_t *request(const int32_t *prompt, int32_t n, int32_t max_tokens, int32_t n_seqs) {
  sched_req_params_t p = sched_req_params_default();
  p.max_tokens = max_tokens;
  p.n = n_seqs;
  p.ignore_eos = 1;
  char err[256];
  sched_req_t *r = sched_req_create(prompt, n, &p, NULL, err, sizeof err);
  assert_non_null(r);
  return r;
}

/* Per request: tokens seen per sequence, FINISHED per sequence, final. */
typedef struct seen {
  int n; /* the request's sequences */
  int tokens[4], finished[4], final;
  sched_finish_t finish[4];
} seen_t;

/* Polls until `want` final events came; checks the order rules. */
static void collect(sched_engine_t *e, sched_req_t **reqs, seen_t *seen, int n_reqs, int want) {
  int finals = 0;
  for (int spins = 0; finals < want; spins++) {
    assert_true(spins < 60000); /* ~10 minutes */
    sched_event_t ev[16];
    int k = spins % 2 ? sched_poll_events(e, ev, 16) : sched_wait_events(e, ev, 16, 10000000);
    for (int i = 0; i < k; i++) {
      int r = 0;
      while (r < n_reqs && reqs[r] != ev[i].req) r++;
      assert_true(r < n_reqs);
      seen_t *s = &seen[r];
      assert_false(s->final);                 /* nothing after the final event */
      assert_false(s->finished[ev[i].index]); /* nothing after a sequence's FINISHED */
      if (ev[i].kind == SCHED_EV_TOKEN) {
        assert_true(ev[i].token >= 0);
        s->tokens[ev[i].index]++;
      } else {
        s->finished[ev[i].index] = 1;
        s->finish[ev[i].index] = ev[i].finish;
        if (ev[i].token >= 0) s->tokens[ev[i].index]++;
        assert_int_equal(ev[i].completion_tokens, s->tokens[ev[i].index]);
      }
      if (ev[i].final) {
        s->final = 1;
        finals++;
        for (int j = 0; j < s->n; j++) assert_true(s->finished[j]); /* every sequence ended before */
        assert_true(ev[i].times.arrival > 0 && ev[i].times.finished >= ev[i].times.arrival);
      }
      sched_event_release(&ev[i]);
    }
    if (k == 0 && spins % 2) usleep(10000);
  }
}

static void submit_errors_waiting_and_abort(void **state) {
  fixture_t *f = *state;
  if (!f) skip();
  sched_engine_t *e = engine(f, 2, 1);
  const int32_t prompt[8] = {504, 2988, 288, 451, 8170, 4119, 1732, 314};
  char err[256];

  /* refused with a reason: too long for the cache (32 blocks of 16), n > max_seqs, a bad temperature */
  sched_req_t *big = request(prompt, 8, 600, 1);
  assert_int_equal(sched_submit(e, big, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "KV cache holds only 512 tokens"));
  sched_req_destroy(big);
  sched_req_t *wide = request(prompt, 8, 4, 3);
  assert_int_equal(sched_submit(e, wide, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "max_seqs"));
  sched_req_destroy(wide);
  sched_req_params_t p = sched_req_params_default();
  p.samp.temperature = -1;
  sched_req_t *hot = sched_req_create(prompt, 8, &p, NULL, err, sizeof err);
  assert_int_equal(sched_submit(e, hot, err, sizeof err), -EINVAL);
  sched_req_destroy(hot);
  assert_null(sched_req_create(prompt, 0, &p, NULL, err, sizeof err));

  /* a request of n = 2 fills max_seqs: the next waits, the one after is one too many */
  sched_req_t *reqs[3] = {request(prompt, 8, 400, 2), request(prompt, 4, 3, 1), request(prompt, 4, 3, 1)};
  assert_int_equal(sched_submit(e, reqs[0], err, sizeof err), 0);
  sched_stats_t st;
  for (int i = 0; i < 100000; i++) { /* until it runs */
    sched_get_stats(e, &st);
    if (st.running == 2) break;
    usleep(1000);
  }
  assert_int_equal(st.running, 2);
  assert_int_equal(sched_submit(e, reqs[1], err, sizeof err), 0);
  assert_int_equal(sched_submit(e, reqs[2], err, sizeof err), -EAGAIN);
  sched_get_stats(e, &st);
  assert_int_equal(st.waiting, 1);
  assert_int_equal(st.kv_blocks_total, 32);
  assert_true(st.kv_blocks_used > 0);

  /* abort everything: each sequence ends with "abort", the final event last */
  sched_engine_abort_all(e);
  seen_t seen[2] = {{.n = 2}, {.n = 1}};
  collect(e, reqs, seen, 2, 2);
  for (int r = 0; r < 2; r++)
    for (int j = 0; j < (r == 0 ? 2 : 1); j++) assert_int_equal(seen[r].finish[j], SCHED_FINISH_ABORT);
  assert_true(atomic_load(&notified) > 0);
  sched_get_stats(e, &st);
  assert_int_equal(st.kv_blocks_used, 0);
  assert_int_equal(st.running + st.waiting, 0);
  assert_int_equal(st.requests_finished, 2);

  /* still usable after the abort; then drain refuses new work */
  sched_req_destroy(reqs[0]);
  sched_req_destroy(reqs[1]);
  reqs[1] = NULL;
  reqs[0] = request(prompt, 8, 2, 2);
  assert_int_equal(sched_submit(e, reqs[0], err, sizeof err), 0);
  memset(seen, 0, sizeof seen);
  seen[0].n = 2;
  collect(e, reqs, seen, 1, 1);
  assert_int_equal(seen[0].tokens[0], 2);
  assert_int_equal(seen[0].tokens[1], 2);
  assert_int_equal(seen[0].finish[1], SCHED_FINISH_LENGTH);
  sched_engine_drain(e);
  assert_int_equal(sched_submit(e, reqs[2], err, sizeof err), -ESHUTDOWN);
  sched_engine_destroy(e);
  for (int r = 0; r < 3; r++) sched_req_destroy(reqs[r]);
}

/* Destroying an engine with work in flight aborts it and frees the queued
 * events; the requests are then the submitter's to free. */
static void destroy_in_flight(void **state) {
  fixture_t *f = *state;
  if (!f) skip();
  sched_engine_t *e = engine(f, 4, 0);
  const int32_t prompt[5] = {504, 2988, 288, 451, 8170};
  char err[256];
  sched_req_t *reqs[3];
  for (int i = 0; i < 3; i++) {
    reqs[i] = request(prompt, 5, 50, 1 + i % 2);
    assert_int_equal(sched_submit(e, reqs[i], err, sizeof err), 0);
  }
  sched_req_cancel(reqs[1]);
  sched_req_cancel(reqs[1]); /* twice: a no-op */
  usleep(20000);
  sched_engine_destroy(e);
  for (int i = 0; i < 3; i++) sched_req_destroy(reqs[i]);
}

/* Waits for r's final event (other requests' events are dropped); returns
 * its vector (malloc'd, dim floats) or NULL. */
static float *embedding_of(sched_engine_t *e, sched_req_t *r, int32_t *dim) {
  for (int spins = 0; spins < 60000; spins++) {
    sched_event_t ev[16];
    const int k = sched_wait_events(e, ev, 16, 10000000);
    float *out = NULL;
    int done = 0;
    for (int i = 0; i < k; i++) {
      if (ev[i].req == r && ev[i].final) {
        assert_int_equal(ev[i].kind, SCHED_EV_FINISHED);
        assert_int_equal(ev[i].completion_tokens, 0);
        out = ev[i].embedding;
        *dim = ev[i].n_embedding;
        ev[i].embedding = NULL; /* ours now */
        done = 1;
      }
      sched_event_release(&ev[i]);
    }
    if (done) return out;
  }
  fail_msg("no final event");
  return NULL;
}

static sched_req_t *pool_request(const int32_t *prompt, int32_t n, sched_pool_t pool) {
  sched_req_params_t p = sched_req_params_default();
  p.pooling = pool;
  char err[256];
  sched_req_t *r = sched_req_create(prompt, n, &p, NULL, err, sizeof err);
  assert_non_null(r);
  return r;
}

/* Embeddings (sched_pool.c): a pooling request's vector is the same bits
 * alone and beside generations that fill the cache (preemptions), with its
 * 150-token prompt chunked (64-token steps); CLS of a prompt is LAST (and
 * MEAN) of its first token alone; nothing is sampled, no block is kept; a
 * pooling request with n > 1 or prompt_logprobs is refused; an input of
 * the whole context is accepted (no room for output is needed), one longer
 * is refused. */
static void pooling(void **state) {
  fixture_t *f = *state;
  if (!f) skip();
  sched_engine_t *e = engine(f, 4, 0);
  int32_t prompt[150];
  for (int i = 0; i < 150; i++) prompt[i] = 100 + (i * 37) % 3000;
  char err[256];
  int32_t dim = 0, d2 = 0;
  sched_req_t *r = pool_request(prompt, 150, SCHED_POOL_MEAN);
  assert_int_equal(sched_submit(e, r, err, sizeof err), 0);
  float *alone = embedding_of(e, r, &dim);
  assert_non_null(alone);
  assert_int_equal(dim, model_hparams(f->m)->dim);
  sched_req_destroy(r);

  sched_req_t *gen[3];
  for (int i = 0; i < 3; i++) { /* 3 x (140 + 60) tokens, with the embedding's 150: more than 32 x 16 */
    gen[i] = request(prompt + i, 140, 60, 1);
    assert_int_equal(sched_submit(e, gen[i], err, sizeof err), 0);
  }
  usleep(200000); /* the generations are decoding */
  r = pool_request(prompt, 150, SCHED_POOL_MEAN);
  assert_int_equal(sched_submit(e, r, err, sizeof err), 0);
  float *busy = embedding_of(e, r, &d2);
  assert_non_null(busy);
  assert_memory_equal(alone, busy, (size_t)dim * sizeof *alone);
  sched_req_destroy(r);
  sched_stats_t st;
  for (int spins = 0; spins < 60000; spins++) { /* the generations end */
    sched_event_t ev[16];
    const int k = sched_wait_events(e, ev, 16, 10000000);
    for (int i = 0; i < k; i++) sched_event_release(&ev[i]);
    sched_get_stats(e, &st);
    if (st.running + st.waiting == 0 && k == 0) break;
  }
  assert_true(st.preemptions > 0);
  assert_int_equal(st.kv_blocks_used, 0);
  for (int i = 0; i < 3; i++) sched_req_destroy(gen[i]);

  float *v[3];
  const sched_pool_t pools[3] = {SCHED_POOL_CLS, SCHED_POOL_LAST, SCHED_POOL_MEAN};
  for (int i = 0; i < 3; i++) {
    r = pool_request(prompt, i == 0 ? 150 : 1, pools[i]);
    assert_int_equal(sched_submit(e, r, err, sizeof err), 0);
    v[i] = embedding_of(e, r, &d2);
    assert_non_null(v[i]);
    sched_req_destroy(r);
  }
  assert_memory_equal(v[0], v[1], (size_t)dim * sizeof *alone);
  assert_memory_equal(v[0], v[2], (size_t)dim * sizeof *alone);
  for (int i = 0; i < 3; i++) free(v[i]);

  sched_req_params_t p = sched_req_params_default();
  p.pooling = SCHED_POOL_LAST;
  p.n = 2;
  assert_null(sched_req_create(prompt, 5, &p, NULL, err, sizeof err));
  p.n = 1;
  p.prompt_logprobs = 1;
  assert_null(sched_req_create(prompt, 5, &p, NULL, err, sizeof err));
  const int32_t max = sched_engine_max_model_len(e);
  int32_t *whole = calloc((size_t)max + 1, sizeof *whole);
  r = pool_request(whole, max + 1, SCHED_POOL_LAST);
  assert_int_equal(sched_submit(e, r, err, sizeof err), -EINVAL);
  sched_req_destroy(r);
  r = pool_request(whole, max, SCHED_POOL_LAST);
  assert_int_equal(sched_submit(e, r, err, sizeof err), 0);
  float *full = embedding_of(e, r, &d2);
  assert_non_null(full);
  free(full);
  sched_req_destroy(r);
  free(whole);
  free(alone);
  free(busy);
  sched_engine_destroy(e);
}

/* Speculation with a draft model: none given is refused; the model as its
 * own draft, with a draft cache too small for all three requests (the
 * n = 2 one forks a child whose draft cache starts empty), accepts every
 * greedy draft and gives every draft block back; then destroying it with
 * speculating sequences in flight frees their draft blocks (ASan). */
static void draft_model_engine(void **state) {
  fixture_t *f = *state;
  if (!f) skip();
  sched_config_t c = sched_config_default();
  c.kv_cache_blocks = 32;
  c.block_size = 16;
  c.max_seqs = 4;
  c.max_batch_tokens = 64;
  c.spec.method = SCHED_SPEC_DRAFT;
  assert_null(sched_engine_create(f->m, f->tok, f->be, &c));
  c.spec.draft_model = f->m;
  c.spec.draft_kv_cache_bytes = 6 * 16 * 30 * 2 * 192 * 4; /* 6 blocks of 16 tokens (30 layers, K and V of 192) */
  sched_engine_t *e = sched_engine_create(f->m, f->tok, f->be, &c);
  assert_non_null(e);
  const int32_t prompt[5] = {504, 2988, 288, 451, 8170};
  char err[256];
  sched_req_t *reqs[3];
  seen_t seen[3] = {{0}};
  for (int i = 0; i < 3; i++) {
    reqs[i] = request(prompt, 5, 24, 1 + i % 2);
    seen[i].n = 1 + i % 2;
    assert_int_equal(sched_submit(e, reqs[i], err, sizeof err), 0);
  }
  collect(e, reqs, seen, 3, 3);
  sched_stats_t st;
  sched_get_stats(e, &st);
  assert_int_equal(st.draft_kv_blocks_total, 6);
  assert_int_equal(st.draft_kv_blocks_used, 0);
  assert_int_equal(st.kv_blocks_used, 0);
  assert_true(st.spec_drafts > 0 && st.spec_draft_tokens > 0);
  assert_true(st.spec_accepted_tokens == st.spec_draft_tokens);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(seen[i].tokens[0], 24);
    sched_req_destroy(reqs[i]);
    reqs[i] = request(prompt, 5, 40, 1 + i % 2);
    assert_int_equal(sched_submit(e, reqs[i], err, sizeof err), 0);
  }
  usleep(50000);
  sched_engine_destroy(e);
  for (int i = 0; i < 3; i++) sched_req_destroy(reqs[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(submit_errors_waiting_and_abort),
      cmocka_unit_test(destroy_in_flight),
      cmocka_unit_test(draft_model_engine),
      cmocka_unit_test(pooling),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
