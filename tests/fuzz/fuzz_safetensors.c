/* tests/fuzz/fuzz_safetensors.c — libFuzzer target for the safetensors
 * reader (st/safetensors.h).
 *
 * Feeds arbitrary bytes to st_open_buffer(), then walks every tensor: its
 * name, shape and every byte of its data, so ASan reports a view outside
 * the input. It traps when a promise of safetensors.h is broken: a failure
 * without a message, a tensor whose byte count disagrees with its shape
 * and type, data outside the input, or a lookup by name that does not find
 * the tensor just listed.
 *
 *   make fuzz
 *   build/fuzz/fuzz_safetensors -max_total_time=180 tests/fuzz/corpus/fuzz_safetensors */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "st/safetensors.h"

static volatile uint64_t sink;

#define CHECK(cond) \
  do {              \
    if (!(cond)) __builtin_trap(); \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[256];
  err[0] = 0;
  st_ctx_t *st = st_open_buffer(data, size, err, sizeof err);
  if (!st) {
    CHECK(err[0] != 0);
    return 0;
  }
  for (size_t i = 0; i < st_tensor_count(st); i++) {
    const st_tensor_t *t = st_tensor_at(st, i);
    CHECK(st_find(st, t->name) == t);
    CHECK(t->n_dims >= 0 && t->n_dims <= ST_MAX_DIMS);
    int64_t n = 1;
    for (int d = 0; d < ST_MAX_DIMS; d++) n *= t->shape[d];
    CHECK(n == t->n_elems);
    const uint64_t elem = t->type == KERN_F32 ? 4 : 2;
    CHECK(t->nbytes == (uint64_t)t->n_elems * elem);
    const uint8_t *p = t->data;
    CHECK(t->nbytes == 0 || (p >= data && p + t->nbytes <= data + size));
    uint64_t s = strlen(t->name);
    for (uint64_t k = 0; k < t->nbytes; k++) s += p[k];
    sink += s;
  }
  st_close(st);
  return 0;
}
