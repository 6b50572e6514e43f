/* api/json_alloc.c — cJSON's allocator: fallible inside a request's
 * parse, aborting elsewhere (see json_alloc.h). */
#include "api/json_alloc.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

#include "base/alloc.h"

static _Thread_local bool fallible; /* inside a begin/end section */
static _Thread_local bool failed;   /* an allocation of the section failed */

static void *json_malloc(size_t n) {
  if (!fallible) return xmalloc(n);
  void *p = alloc_fallible(n);
  if (!p) failed = true;
  return p;
}

void json_alloc_init(void) {
  cJSON_Hooks h = {.malloc_fn = json_malloc, .free_fn = free};
  cJSON_InitHooks(&h);
}

void json_alloc_begin(void) {
  fallible = true;
  failed = false;
}

bool json_alloc_end(void) {
  fallible = false;
  const bool f = failed;
  failed = false;
  return f;
}
