/* tests/unit/test_kern_types.c — type ids, names and block geometry. The
 * expected sizes are GGUF's, restated here independently of quant_blocks.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/kern_types.h"

static void geometry_matches_gguf(void **state) {
  (void)state;
  static const struct {
    uint32_t id;
    const char *name;
    int64_t elems, bytes;
  } want[] = {
      {0, "F32", 1, 4},      {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},    {3, "Q4_1", 32, 20},
      {6, "Q5_0", 32, 22},   {7, "Q5_1", 32, 24},    {8, "Q8_0", 32, 34},    {12, "Q4_K", 256, 144},
      {13, "Q5_K", 256, 176}, {14, "Q6_K", 256, 210}, {30, "BF16", 1, 2},  {39, "MXFP4", 32, 17},
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    assert_string_equal(kern_type_name(want[i].id), want[i].name);
    assert_int_equal(kern_type_block_elems(want[i].id), want[i].elems);
    assert_int_equal(kern_type_block_bytes(want[i].id), want[i].bytes);
    assert_true(kern_type_is_weight(want[i].id));
    assert_int_equal(kern_type_row_bytes(want[i].id, 576 * 16), 576 * 16 / want[i].elems * want[i].bytes);
  }
}

static void unsupported_and_bad_sizes(void **state) {
  (void)state;
  /* Q2_K (10), Q3_K (11), IQ types (16+), TQ1_0/TQ2_0 (34, 35), 40 (past MXFP4), out of range */
  const uint32_t bad[] = {4, 5, 10, 11, 16, 29, 31, 34, 35, 38, 40, 1000, UINT32_MAX};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_null(kern_type_name(bad[i]));
    assert_false(kern_type_is_weight(bad[i]));
    assert_int_equal(kern_type_row_bytes(bad[i], 256), -1);
  }
  assert_false(kern_type_is_weight(KERN_Q8_1)); /* activations only */
  assert_int_equal(kern_type_row_bytes(KERN_Q4_1, 33), -1);     /* not whole blocks */
  assert_int_equal(kern_type_row_bytes(KERN_Q6_K, 128), -1);
  assert_int_equal(kern_type_row_bytes(KERN_F32, -1), -1);
  assert_int_equal(kern_type_row_bytes(KERN_F32, INT64_MAX / 2), -1); /* overflow */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(geometry_matches_gguf),
      cmocka_unit_test(unsupported_and_bad_sizes),
  };
  return cmocka_run_group_tests_name("kern_types", tests, NULL, NULL);
}
