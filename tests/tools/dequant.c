/* tests/tools/dequant.c — dequantizes raw GGUF tensor bytes with tram's CPU
 * kernels, for tests/integration/test_dequant.py to compare with the `gguf`
 * Python package.
 *
 *   dequant [--scalar] [--binary] TYPE < bytes > floats
 *
 * TYPE is a GGML type name (F32, F16, BF16, Q4_0, ..., Q6_K, MXFP4). stdin holds
 * whole blocks; the output is one value per line ("%.9g", exact for f32), or
 * raw little-endian f32 with --binary. --scalar uses the portable path
 * instead of the default (AVX2 when built with it). Exit status 2, with a
 * message, on bad arguments or input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/dequant.h"
#include "kernels/kern_types.h"

static int usage(const char *why) {
  fprintf(stderr, "dequant: %s\nusage: dequant [--scalar] [--binary] TYPE < bytes\n", why);
  return 2;
}

int main(int argc, char **argv) {
  int scalar = 0, binary = 0;
  const char *name = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--scalar") == 0) scalar = 1;
    else if (strcmp(argv[i], "--binary") == 0) binary = 1;
    else if (!name) name = argv[i];
    else return usage("too many arguments");
  }
  if (!name) return usage("no type");
  int type = -1;
  for (int t = 0; t < KERN_TYPE_COUNT; t++) {
    const char *n = kern_type_name((uint32_t)t);
    if (n && strcmp(n, name) == 0) type = t;
  }
  if (type < 0 || !kern_type_is_weight((uint32_t)type)) return usage("not a weight type");

  size_t cap = 1 << 20, len = 0;
  unsigned char *in = malloc(cap);
  if (!in) return usage("out of memory");
  for (size_t got; (got = fread(in + len, 1, cap - len, stdin)) > 0;) {
    len += got;
    if (len == cap) {
      unsigned char *bigger = realloc(in, cap *= 2);
      if (!bigger) return usage("out of memory");
      in = bigger;
    }
  }
  int64_t bb = kern_type_block_bytes((uint32_t)type), be = kern_type_block_elems((uint32_t)type);
  if (len % (size_t)bb != 0) return usage("input is not a whole number of blocks");
  int64_t n = (int64_t)len / bb * be;
  float *out = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  if (!out) return usage("out of memory");
  if (scalar) kern_cpu_dequant_row_scalar((kern_type_t)type, in, out, n);
  else kern_cpu_dequant_row((kern_type_t)type, in, out, n);
  if (binary) {
    if (fwrite(out, sizeof(float), (size_t)n, stdout) != (size_t)n) return usage("write failed");
  } else {
    for (int64_t i = 0; i < n; i++) printf("%.9g\n", out[i]);
  }
  free(in);
  free(out);
  return fflush(stdout) == 0 ? 0 : 2;
}
