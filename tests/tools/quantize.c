/* tests/tools/quantize.c — quantizes raw F32/F16/BF16 rows with tram's
 * load-time quantizer (kernels/kern_quant.c), for
 * tests/integration/test_quantize.py to compare with the `gguf` Python
 * package's gguf.quants.quantize.
 *
 *   quantize TO FROM COLS < elements > blocks
 *
 * TO is Q8_0, Q4_0 or Q4_1; FROM is F32, F16 or BF16; stdin holds whole
 * rows of COLS elements of FROM, stdout gets the GGUF bytes of TO. Exit
 * status 2, with a message, on bad arguments or input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_quant.h"
#include "kernels/kern_types.h"

static int usage(const char *why) {
  fprintf(stderr, "quantize: %s\nusage: quantize Q8_0|Q4_0|Q4_1 F32|F16|BF16 COLS < elements\n", why);
  return 2;
}

static int type_of(const char *name) {
  for (int t = 0; t < KERN_TYPE_COUNT; t++) {
    const char *n = kern_type_name((uint32_t)t);
    if (n && strcmp(n, name) == 0) return t;
  }
  return -1;
}

int main(int argc, char **argv) {
  if (argc != 4) return usage("three arguments");
  const int to = type_of(argv[1]), from = type_of(argv[2]);
  const long long cols = atoll(argv[3]);
  if (to < 0 || from < 0) return usage("unknown type");
  const int64_t in_row = kern_type_row_bytes((uint32_t)from, cols), out_row = kern_type_row_bytes((uint32_t)to, cols);
  if (cols <= 0 || in_row <= 0 || out_row <= 0) return usage("COLS is not a whole number of blocks");
  size_t cap = 1 << 20, len = 0;
  unsigned char *in = malloc(cap);
  if (!in) return usage("out of memory");
  for (size_t got; (got = fread(in + len, 1, cap - len, stdin)) > 0;) {
    len += got;
    if (len == cap) {
      unsigned char *bigger = realloc(in, cap *= 2);
      if (!bigger) {
        free(in);
        return usage("out of memory");
      }
      in = bigger;
    }
  }
  const int64_t rows = (int64_t)len / in_row;
  void *out = len % (size_t)in_row == 0 ? malloc((size_t)(rows * out_row > 0 ? rows * out_row : 1)) : NULL;
  int rc = 0;
  if (len % (size_t)in_row != 0) rc = usage("input is not a whole number of rows");
  else if (!out) rc = usage("out of memory");
  else if (kern_quantize_rows((kern_type_t)to, out, (kern_type_t)from, in, rows, cols) != 0)
    rc = usage("the quantizer refused these types");
  else if (fwrite(out, 1, (size_t)(rows * out_row), stdout) != (size_t)(rows * out_row)) rc = usage("write failed");
  free(in);
  free(out);
  return rc;
}
