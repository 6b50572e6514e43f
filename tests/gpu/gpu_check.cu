/* tests/gpu/gpu_check.cu — the CUDA backend's checks and timings.
 *
 *   gpu_check [--quick] check [GROUP...]
 *                                every kernel vs float64 references, the
 *                                bit-for-bit promises of kern.h, captured
 *                                replays; exit 1 on any failure. GROUPs
 *                                (default all): ops weights attn sample
 *                                graph families (tests/gpu/run-on-device.sh runs one
 *                                process per group: an abort costs one)
 *   gpu_check bench [--table F]  timings against measured ceilings (F: the
 *                                table, markdown)
 *
 * Inputs are fresh random data from a printed seed (TRAM_TEST_SEED replays).
 * Needs a GPU of compute capability 8.0+; exits 2 when there is none. */
#include <stdio.h>
#include <string.h>

#include "tests/gpu/gpu_test.cuh"

static const struct {
  const char *name;
  void (*fn)(gt_t *);
} groups[] = {
    {"ops", gt_check_ops}, {"weights", gt_check_weights}, {"attn", gt_check_attn},
    {"sample", gt_check_sample}, {"graph", gt_check_graph}, {"families", gt_check_families},
};
static constexpr int N_GROUPS = (int)(sizeof groups / sizeof groups[0]);

int main(int argc, char **argv) {
  const char *mode = "check", *table = NULL;
  int quick = 0, any_group = 0;
  int want[N_GROUPS] = {0};
  for (int i = 1; i < argc; i++) {
    int g = 0;
    while (g < N_GROUPS && strcmp(argv[i], groups[g].name) != 0) g++;
    if (g < N_GROUPS && strcmp(mode, "check") == 0) {
      want[g] = any_group = 1;
    } else if (strcmp(argv[i], "--quick") == 0)
      quick = 1;
    else if (strcmp(argv[i], "--table") == 0 && i + 1 < argc)
      table = argv[++i];
    else if (strcmp(argv[i], "check") == 0 || strcmp(argv[i], "bench") == 0)
      mode = argv[i];
    else {
      fprintf(stderr, "usage: %s [--quick] [check [ops|weights|attn|sample|graph|families]... | bench [--table FILE]]\n",
              argv[0]);
      return 2;
    }
  }
  gt_t t;
  memset(&t, 0, sizeof t);
  t.quick = quick;
  tu_rng_init(&t.rng, tu_seed());
  t.be = kern_cuda_create(0);
  if (!t.be) {
    fprintf(stderr, "gpu_check: no usable GPU (see the message above)\n");
    return 2;
  }
  int rc = 0;
  if (strcmp(mode, "bench") == 0) {
    rc = gt_bench(&t, table);
  } else {
    for (int g = 0; g < N_GROUPS; g++)
      if (!any_group || want[g]) groups[g].fn(&t);
    printf("checks: %d passed, %d failed, %d warnings\n", t.pass, t.fail, t.warn);
    rc = t.fail ? 1 : 0;
  }
  t.be->destroy(t.be);
  return rc;
}
