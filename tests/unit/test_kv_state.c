/* tests/unit/test_kv_state.c — the recurrent-state pool (cache/kv_state.h)
 * on the CPU backend, and the planner's use of it (scheduler/sched_plan.h):
 * a running sequence holds one slot, a full pool stops admission, removal
 * and preemption give the slot back, a fork copies the parent's state. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cache/kv_alloc.h"
#include "cache/kv_state.h"
#include "kernels/kern.h"
#include "model/model.h"
#include "scheduler/sched_plan.h"

static float *slot_ptr(const kv_state_t *p, int32_t slot) { return p->arena + (size_t)slot * p->slot_floats; }

static void fill(kv_state_t *p, int32_t slot, float v) {
  for (size_t i = 0; i < p->slot_floats; i++) slot_ptr(p, slot)[i] = v + (float)i;
}

static int is_zero(const kv_state_t *p, int32_t slot) {
  for (size_t i = 0; i < p->slot_floats; i++)
    if (slot_ptr(p, slot)[i] != 0.0f) return 0;
  return 1;
}

static void pool_alloc_reset_copy(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 1);
  const kv_state_config_t cfg = {.n_layers = 3, .layer_floats = 40, .n_slots = 3};
  assert_int_equal(kv_state_slot_bytes(&cfg), 3 * 40 * sizeof(float));
  kv_state_t *p = kv_state_create(be, &cfg);
  assert_non_null(p);
  assert_ptr_equal(kv_state_layer(p, 2), p->arena + 80);
  int32_t s[3];
  for (int i = 0; i < 3; i++) {
    s[i] = kv_state_alloc(p);
    assert_true(s[i] >= 0 && s[i] < 3);
    assert_true(is_zero(p, s[i]));
  }
  assert_int_equal(kv_state_alloc(p), -ENOSPC);
  assert_int_equal(kv_state_used(p), 3);
  fill(p, s[1], 5.0f);
  kv_state_set_tokens(p, s[1], 17);
  kv_state_copy(p, s[2], s[1]);
  assert_memory_equal(slot_ptr(p, s[2]), slot_ptr(p, s[1]), p->slot_floats * sizeof(float));
  assert_int_equal(p->n_tokens[s[2]], 17);
  kv_state_reset(p, s[1]);
  assert_true(is_zero(p, s[1]));
  assert_int_equal(p->n_tokens[s[1]], 0);
  fill(p, s[0], 1.0f);
  kv_state_free(p, s[0]);
  assert_false(kv_state_in_use(p, s[0]));
  assert_false(kv_state_in_use(p, -1));
  const int32_t again = kv_state_alloc(p); /* a reused slot starts from zeros */
  assert_int_equal(again, s[0]);
  assert_true(is_zero(p, again));
  kv_state_destroy(p);
  kv_state_destroy(NULL);
  const kv_state_config_t bad = {.n_layers = 0, .layer_floats = 4, .n_slots = 1};
  assert_null(kv_state_create(be, &bad));
  kern_backend_destroy(be);
}

static void planner_holds_slots(void **state) {
  (void)state;
  kern_backend_t *be = kern_backend_create("cpu", 1);
  const kv_state_config_t cfg = {.n_layers = 1, .layer_floats = 8, .n_slots = 2};
  kv_state_t *p = kv_state_create(be, &cfg);
  kv_alloc_t *a = kv_alloc_create(64, 4);
  sched_plan_t c;
  assert_int_equal(sched_plan_init(&c, a, 64, 4, 0), 0); /* room for 4 places: the 2 slots bind */
  c.state = p;
  const int32_t prompt[6] = {1, 2, 3, 4, 5, 6};
  sched_seq_t s[3];
  for (int i = 0; i < 3; i++) {
    sched_seq_init(&s[i], prompt, 6, 1);
    assert_int_equal(s[i].state_slot, -1);
    sched_plan_add(&c, &s[i]);
  }
  assert_int_equal(sched_plan_step(&c), 2); /* the third waits for a slot */
  assert_true(s[0].state_slot >= 0 && s[1].state_slot >= 0 && s[0].state_slot != s[1].state_slot);
  assert_int_equal(s[2].where, SCHED_SEQ_WAITING);
  assert_int_equal(s[2].state_slot, -1);
  sched_plan_commit(&c);
  sched_plan_remove(&c, &s[0]); /* the end of s[0]: its slot goes back */
  assert_int_equal(s[0].state_slot, -1);
  assert_int_equal(kv_state_used(p), 1);
  sched_seq_push(&s[1], 7);
  assert_true(sched_plan_step(&c) >= 1);
  assert_int_equal(s[2].where, SCHED_SEQ_RUNNING);
  assert_true(s[2].state_slot >= 0);
  sched_plan_commit(&c);
  /* a fork takes a slot and the parent's state */
  sched_plan_remove(&c, &s[2]);
  fill(p, s[1].state_slot, 3.0f);
  kv_state_set_tokens(p, s[1].state_slot, 7);
  sched_seq_t child;
  sched_seq_init(&child, s[1].tokens, (int32_t)s[1].len, 1);
  int32_t src = -1, dst = -1;
  assert_true(sched_plan_fork(&c, &s[1], &child, &src, &dst) >= 0);
  assert_true(child.state_slot >= 0 && child.state_slot != s[1].state_slot);
  assert_memory_equal(slot_ptr(p, child.state_slot), slot_ptr(p, s[1].state_slot), p->slot_floats * sizeof(float));
  assert_int_equal(p->n_tokens[child.state_slot], 7);
  sched_plan_remove(&c, &child);
  sched_plan_remove(&c, &s[1]);
  assert_int_equal(kv_state_used(p), 0);
  for (int i = 0; i < 3; i++) sched_seq_free(&s[i]);
  sched_seq_free(&child);
  sched_plan_free(&c);
  kv_alloc_destroy(a);
  kv_state_destroy(p);
  kern_backend_destroy(be);
}

/* A backend without the Gated DeltaNet operations (the CUDA backend's
 * table, today) refuses a hybrid model at load, naming why, and still
 * loads the same model where they exist. */
static void backend_without_gdn_refuses_hybrid(void **state) {
  (void)state;
  char path[4096];
  const char *self = __FILE__; /* .../tests/unit/test_kv_state.c: the fixture is beside tests/reference */
  const size_t root = strlen(self) - strlen("tests/unit/test_kv_state.c");
  snprintf(path, sizeof path, "%.*stests/reference/data/qwen35-tiny", (int)root, self);
  kern_backend_t *be = kern_backend_create("cpu", 1);
  char err[512] = "";
  model_t *m = model_load(path, be, err, sizeof err);
  if (!m) fail_msg("%s", err);
  kv_state_config_t sc = {.n_slots = 1};
  assert_int_equal(model_state_config(m, &sc), 0);
  assert_int_equal(sc.n_layers, 3);                 /* three Gated DeltaNet layers of four */
  assert_int_equal(sc.layer_floats, 3 * 128 + 4 * 16 * 16); /* conv window + 4 heads of 16 x 16 */
  kv_cache_config_t kc = {0};
  model_kv_config(m, &kc);
  assert_int_equal(kc.n_layers, 1); /* the paged cache holds the attention layer only */
  model_destroy(m);
  be->gdn_rule = NULL;
  assert_null(model_load(path, be, err, sizeof err));
  assert_non_null(strstr(err, "the cpu backend has no Gated DeltaNet kernels: hybrid qwen35 models run on"));
  kern_backend_destroy(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pool_alloc_reset_copy),
      cmocka_unit_test(planner_holds_slots),
      cmocka_unit_test(backend_without_gdn_refuses_hybrid),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
