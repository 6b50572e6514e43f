/* tests/unit/test_repack.c — the 8-row panel layouts of the fast matmul's
 * repacked weights (kernels/cpu/repack.h):
 *   - the fast packer writes the bytes of the layout's definition (the
 *     bit-by-bit reference packer), for every type, full and ragged last
 *     panels, one block to many, packed whole or in panel ranges;
 *   - nothing is lost: every row unpacks to its GGUF bytes;
 *   - the activation split q = 256·h + l, with the half sums, AVX2 equal
 *     to portable;
 *   - weight_init repacks exactly the types and widths with a layout, with
 *     the fast precision and the AVX2 kernels, and nothing otherwise; a
 *     lazy weight at its first weight_use instead, to the same bits.
 * The kernels over the panels: test_matmul_q8_tiles.c (each, bit for bit
 * against the portable arithmetic) and test_matmul_q8.c (the driver). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/matmul_q8.h"
#include "kernels/cpu/repack.h"
#include "kernels/cpu/simd.h"
#include "kernels/kern.h"
#include "tests/unit/quant_ref.h"
#include "tests/unit/testutil.h"

static const kern_type_t rp_types[] = {KERN_Q4_0, KERN_Q4_1, KERN_Q5_0, KERN_Q5_1,
                                       KERN_Q8_0, KERN_Q4_K, KERN_Q5_K, KERN_Q6_K, KERN_MXFP4};
#define N_RP (sizeof rp_types / sizeof *rp_types)

static void pack_matches_definition_and_round_trips(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 61);
  const int64_t rows_list[] = {1, 7, 8, 13, 24};
  for (size_t t = 0; t < N_RP; t++) {
    const kern_type_t type = rp_types[t];
    const int64_t be = kern_type_block_elems(type);
    for (size_t ri = 0; ri < sizeof rows_list / sizeof *rows_list; ri++)
      for (int64_t nblk = 1; nblk <= 3; nblk++) {
        const int64_t rows = rows_list[ri], cols = be * nblk, rb = kern_type_row_bytes(type, cols);
        uint8_t *w = malloc((size_t)(rows * rb)), *row = malloc((size_t)rb);
        for (int64_t i = 0; i < rows; i++) tq_random_row(&r, type, w + i * rb, cols, 0);
        const size_t bytes = kern_cpu_rp_bytes(type, rows, cols);
        const int64_t panels = (rows + 7) / 8;
        assert_int_equal(bytes, (size_t)(panels * 8 * rb)); /* the GGUF size, whole panels */
        uint8_t *a = malloc(bytes), *b = malloc(bytes);
        memset(a, 0x5a, bytes);
        memset(b, 0xa5, bytes);
        kern_cpu_rp_pack_ref(type, w, rows, cols, a, 0, panels);
        for (int64_t p = 0; p < panels; p++) kern_cpu_rp_pack(type, w, rows, cols, b, p, p + 1); /* by ranges */
        if (memcmp(a, b, bytes) != 0)
          fail_msg("%s %lld x %lld: the packer differs from the layout's definition", kern_type_name(type),
                   (long long)rows, (long long)cols);
        for (int64_t i = 0; i < rows; i++) {
          kern_cpu_rp_unpack_row(type, b, cols, i, row);
          if (memcmp(row, w + i * rb, (size_t)rb) != 0)
            fail_msg("%s %lld x %lld: row %lld does not unpack to its bytes", kern_type_name(type), (long long)rows,
                     (long long)cols, (long long)i);
        }
        free(w), free(row), free(a), free(b);
      }
  }
}

static void split_is_exact(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 62);
  const int64_t nb = 64;
  kern_cpu_q8a_t *q = malloc(sizeof *q * nb);
  kern_cpu_q8s_t *a = malloc(sizeof *a * nb), *b = malloc(sizeof *b * nb);
  for (int rep = 0; rep < 50; rep++) {
    for (int64_t i = 0; i < nb; i++) {
      for (int e = 0; e < 32; e++) q[i].q[e] = (int16_t)((int)tu_below(&r, 65535) - 32767);
      if (rep == 0) q[i].q[i % 32] = i % 2 ? 32767 : -32767; /* the ends */
      q[i].d = (float)tu_uniform(&r, 0, 1);
      q[i].s = (float)tu_uniform(&r, -1, 1);
    }
    kern_cpu_q8_split_scalar(q, a, nb);
    memset(b, 0x77, sizeof *b * nb);
    kern_cpu_q8_split(q, b, nb);
    assert_memory_equal(a, b, sizeof *a * nb);
    for (int64_t i = 0; i < nb; i++) {
      int32_t sum[2] = {0, 0};
      for (int e = 0; e < 32; e++) {
        assert_int_equal(256 * a[i].h[e] + a[i].l[e], q[i].q[e]);
        sum[e / 16] += q[i].q[e];
      }
      assert_int_equal(a[i].qsum[0], sum[0]);
      assert_int_equal(a[i].qsum[1], sum[1]);
      assert_true(a[i].d == q[i].d && a[i].s == q[i].s);
    }
  }
  free(q), free(a), free(b);
}

static void weight_init_repacks_what_it_can(void **state) {
  (void)state;
  for (int fast = 0; fast <= 1; fast++) {
    const kern_backend_opts_t o = {.n_threads = 2, .precision = fast ? KERN_PRECISION_FAST : KERN_PRECISION_EXACT};
    kern_backend_t *be = kern_backend_create_opts("cpu", &o);
    assert_non_null(be);
    for (size_t i = 0; i < sizeof tq_weight_types / sizeof *tq_weight_types; i++) {
      const kern_type_t type = tq_weight_types[i];
      const int64_t cols = kern_type_block_elems(type) == 256 ? 512 : 64, rows = 11;
      uint8_t *data = calloc((size_t)rows, (size_t)kern_type_row_bytes(type, cols));
      kern_weight_t w;
      memset(&w, 0x11, sizeof w);
      w.lazy = 0; /* the caller's input; the rest is weight_init's to fill */
      assert_int_equal(be->weight_init(be, &w, type, rows, cols, data), 0);
      assert_ptr_equal(w.impl, data); /* the view stays */
      int want = fast && kern_cpu_rp_supported(type, cols);
#ifndef KERN_CPU_AVX2
      want = 0;
#endif
      if ((w.packed != NULL) != want)
        fail_msg("%s, %s precision: packed %p", kern_type_name(type), fast ? "fast" : "exact", w.packed);
      be->weight_release(be, &w);
      assert_null(w.packed);
      free(data);
    }
    kern_backend_destroy(be);
  }
  assert_false(kern_cpu_rp_supported(KERN_Q4_0, 48));
  assert_false(kern_cpu_rp_supported(KERN_Q4_K, 128));
  assert_false(kern_cpu_rp_supported(KERN_F16, 64));
}

/* A lazy weight (an expert) is left unpacked by weight_init and repacked by
 * its first weight_use, once, into the same panels as an eager one: the
 * fast matmul gives the same bits before (on the view), after, and as the
 * eager weight. The source's pages handed back after packing keep their
 * bytes (an anonymous buffer here: MADV_DONTNEED would zero it). */
static void lazy_weight_packs_at_first_use(void **state) {
  (void)state;
  const kern_backend_opts_t o = {.n_threads = 2, .precision = KERN_PRECISION_FAST};
  kern_backend_t *be = kern_backend_create_opts("cpu", &o);
  assert_non_null(be);
  assert_non_null(be->weight_use);
  tu_rng_t rng;
  tu_rng_init(&rng, 30);
  for (size_t i = 0; i < N_RP; i++) {
    const kern_type_t type = rp_types[i];
    const int64_t cols = 512, rows = 37, rb = kern_type_row_bytes(type, cols);
    const size_t bytes = (size_t)(rows * rb), page = 4096;
    uint8_t *data = aligned_alloc(page, (bytes + page - 1) / page * page), *copy = malloc(bytes);
    for (int64_t r = 0; r < rows; r++) tq_random_row(&rng, type, data + r * rb, cols, 1);
    memcpy(copy, data, bytes);
    float x[3 * 512], y_eager[3 * 37], y_view[3 * 37], y_lazy[3 * 37];
    tu_fill_normal(&rng, x, 3 * 512, 1.0f);
    kern_weight_t eager = {0}, lazy = {.lazy = 1};
    assert_int_equal(be->weight_init(be, &eager, type, rows, cols, data), 0);
    assert_int_equal(be->weight_init(be, &lazy, type, rows, cols, data), 0);
    assert_null(lazy.packed);
    assert_int_equal(lazy.lazy, 1);
    be->matmul(be, y_view, x, &lazy, 3);
    be->weight_use(be, &lazy);
    assert_int_equal(lazy.lazy, 0);
    void *packed = lazy.packed;
#ifdef KERN_CPU_AVX2
    assert_non_null(packed);
    assert_memory_equal(packed, eager.packed, kern_cpu_rp_bytes(type, rows, cols));
#endif
    be->weight_use(be, &lazy); /* once */
    assert_ptr_equal(lazy.packed, packed);
    be->matmul(be, y_lazy, x, &lazy, 3);
    be->matmul(be, y_eager, x, &eager, 3);
    if (memcmp(y_lazy, y_eager, sizeof y_lazy) || memcmp(y_view, y_eager, sizeof y_view))
      fail_msg("%s: the lazy weight's matmul differs from the eager one's", kern_type_name(type));
    assert_memory_equal(data, copy, bytes); /* the source survives being handed back */
    be->weight_release(be, &lazy);
    be->weight_release(be, &eager);
    free(data), free(copy);
  }
  kern_backend_destroy(be);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pack_matches_definition_and_round_trips),
      cmocka_unit_test(split_is_exact),
      cmocka_unit_test(weight_init_repacks_what_it_can),
      cmocka_unit_test(lazy_weight_packs_at_first_use),
  };
  return cmocka_run_group_tests_name("repack", tests, NULL, NULL);
}
