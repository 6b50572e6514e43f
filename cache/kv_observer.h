/* cache/kv_observer.h — who is told of prefix-cache blocks stored and
 * evicted (KV-cache events for routers): a table of callbacks, on its own so
 * that the scheduler's public header and the server's event publisher carry
 * it without the allocator. */
#ifndef TRAM_KV_OBSERVER_H
#define TRAM_KV_OBSERVER_H

#include <stdint.h>

/* Who watches the prefix cache's content (e.g. to publish vLLM's KV-cache
 * events): the allocator calls stored() when a block is published (tokens:
 * its block_size token ids) and removed() when a published block's hash is
 * evicted, on the thread that owns the allocator. flush() is for the
 * allocator's owner to call once a batch of changes is complete (the engine:
 * after each step); the allocator never calls it. Each function may be
 * NULL. They must not call back into the allocator. */
/* The parent hash of a sequence's first block. */
#define KV_HASH_ROOT UINT64_C(0x9e3779b97f4a7c15)

typedef struct kv_observer {
  void (*stored)(void *arg, uint64_t hash, uint64_t parent, const int32_t *tokens, int32_t block_size);
  void (*removed)(void *arg, uint64_t hash);
  void (*flush)(void *arg);
  void *arg;
} kv_observer_t;

#endif
