/* tests/fuzz/fuzz_json_strict.c — libFuzzer target for the strict JSON gate
 * (api/json_strict.h): on any bytes it must not crash, hang or read out
 * of bounds; what it accepts cJSON must parse in full (the gate is never
 * looser than the parser behind it), and the duplicate-key walk must run on
 * the tree. */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "api/json_strict.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[160];
  if (json_strict_check((const char *)data, size, err, sizeof err) != 0) return 0;
  const char *end = NULL;
  cJSON *x = cJSON_ParseWithLengthOpts((const char *)data, size, &end, 0);
  if (!x) abort(); /* accepted by the gate, refused by cJSON */
  (void)json_strict_dup_key(x);
  cJSON_Delete(x);
  return 0;
}
