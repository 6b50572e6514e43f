/* cache/kv_alloc.h — the KV cache's block allocator and per-sequence block
 * tables. Pure bookkeeping: no device memory, no backend (cache/kv_cache.h
 * owns the storage the block ids index).
 *
 * Blocks. The cache is cut into num_blocks blocks of block_size tokens; a
 * block id is an index in [0, num_blocks). Every block has a reference count:
 * a block is *free* at 0 and sits on the free list. kv_block_alloc() hands out
 * the block at the head of the free list (the least recently freed one) with
 * one reference; kv_block_unref() puts a block whose count drops to 0 at the
 * tail. kv_block_ref() on a free block takes it off the list wherever it is.
 * All three are O(1): the free list is doubly linked through per-block
 * metadata.
 *
 * Sequences. A kv_seq_t is a sequence's block table, owned by its caller
 * (the scheduler embeds one per request): the ids of its blocks in token
 * order, grown on demand by kv_seq_reserve(), which either gets every block
 * it needs or changes nothing and returns -ENOSPC (so the scheduler can
 * preempt). Token `pos` of a sequence lives at slot
 * blocks[pos / block_size] * block_size + pos % block_size.
 *
 * Prefix caching. A full block can be published under the chained hash of
 * its content: kv_hash_block(parent, tokens), where parent is the hash of
 * the sequence's previous block (KV_HASH_ROOT for the first) and tokens
 * its block_size token ids. A hash names at most one block. The allocator
 * keeps each published block's parent hash and tokens too, so a lookup
 * (kv_prefix_find) returns only a block whose parent hash and tokens equal
 * the asked ones: a false hit needs a 64-bit collision of the parent chain.
 * A freed block keeps its hash and stays findable while it waits on the free
 * list; kv_block_ref() on it takes it back (a cache hit). kv_block_alloc()
 * reaches the least recently freed block first and evicts its hash then.
 * kv_seq_match_prefix() and kv_seq_publish() do this for whole sequences;
 * the token store and the hash table are allocated at the first publish,
 * so a cache that never publishes pays nothing.
 *
 * Running out is a normal return, never an abort. Misuse (an id out of range,
 * unref of a free block, committing tokens that were not reserved) is a
 * programmer error and aborts with a message.
 *
 * Not thread-safe: the engine thread owns the allocator and its sequences. */
#ifndef TRAM_KV_ALLOC_H
#define TRAM_KV_ALLOC_H

#include <stdint.h>

#include "cache/kv_observer.h"

typedef struct kv_alloc kv_alloc_t;

/* Creates an allocator of num_blocks (>= 1) blocks of block_size (>= 1)
 * tokens, all free, with num_blocks * block_size <= INT32_MAX (slots are
 * int32). Returns NULL after logging why. */
kv_alloc_t *kv_alloc_create(int32_t num_blocks, int32_t block_size);


/* Sets (a copy of *o) or, with NULL, clears the observer. */
void kv_alloc_set_observer(kv_alloc_t *a, const kv_observer_t *o);

/* Sets (fn NULL: clears) the function called with a published block's id
 * when its hash is evicted, before the block is reused: what is kept with
 * the block (a hybrid's recurrent-state snapshot, cache/kv_state.h) goes
 * with it. It must not call back into the allocator. */
void kv_alloc_set_evict_hook(kv_alloc_t *a, void (*fn)(void *arg, int32_t block), void *arg);

/* Frees the allocator (not the sequences' block arrays). NULL is a no-op. */
void kv_alloc_destroy(kv_alloc_t *a);

int32_t kv_alloc_num_blocks(const kv_alloc_t *a);
int32_t kv_alloc_block_size(const kv_alloc_t *a);
/* Blocks on the free list, and the others (num_blocks - free). */
int32_t kv_alloc_free_blocks(const kv_alloc_t *a);
int32_t kv_alloc_used_blocks(const kv_alloc_t *a);

/* Takes the block at the head of the free list and returns its id, with a
 * reference count of 1; -ENOSPC when no block is free. A published block
 * taken this way loses its hash (an eviction). */
int32_t kv_block_alloc(kv_alloc_t *a);

/* Adds a reference to `block`. A free block is taken off the free list (it is
 * then in use with a count of 1). */
void kv_block_ref(kv_alloc_t *a, int32_t block);

/* Drops a reference to `block` (which must be in use); at 0 the block goes
 * to the tail of the free list. */
void kv_block_unref(kv_alloc_t *a, int32_t block);

/* The reference count of `block` (0 when free). */
int32_t kv_block_refs(const kv_alloc_t *a, int32_t block);

/* A sequence's block table. Fields are read-only to callers; only the
 * kv_seq_* functions change them. */
typedef struct kv_seq {
  int32_t *blocks;  /* [n_blocks] block ids in token order (owned; malloc'd); -1 for the
                       first n_released, given back by kv_seq_release_before */
  int32_t n_blocks; /* blocks held: room for n_blocks * block_size tokens */
  int32_t cap;      /* entries allocated in `blocks` (private) */
  int64_t n_tokens; /* tokens whose K/V are in the cache (committed) */
  int32_t n_hashed; /* leading blocks whose chained hash is known (private) */
  uint64_t hash;    /* chained hash of block n_hashed - 1, when n_hashed > 0 (private) */
  int32_t n_released; /* leading blocks released (entries -1) */
} kv_seq_t;

/* Makes s an empty sequence (no blocks, no tokens). */
void kv_seq_init(kv_seq_t *s);

/* Blocks that kv_seq_reserve(a, s, n_new) would take: enough for
 * s->n_tokens + n_new tokens minus those s holds (0 if it has room). */
int32_t kv_seq_blocks_needed(const kv_alloc_t *a, const kv_seq_t *s, int64_t n_new);

/* Makes room for n_new more tokens after s->n_tokens: takes the missing
 * blocks from the allocator, all or nothing. Returns 0; -ENOSPC when fewer
 * blocks are free than needed (s and the allocator unchanged); -EINVAL when
 * n_new < 0 or the sequence would pass INT32_MAX tokens. */
int kv_seq_reserve(kv_alloc_t *a, kv_seq_t *s, int64_t n_new);

/* Records that n more tokens of s now have their K/V in the cache
 * (s->n_tokens += n), after the step that wrote them. They must have been
 * reserved. */
void kv_seq_commit(const kv_alloc_t *a, kv_seq_t *s, int64_t n);

/* The slot of token `pos` through a block-table row `blocks` (block ids in
 * token order): block * block_size + offset. The one place this arithmetic
 * is written on the host; the row must hold a block for pos. */
static inline int32_t kv_table_slot(const int32_t *blocks, int block_size, int64_t pos) {
  return blocks[pos / block_size] * block_size + (int32_t)(pos % block_size);
}

/* Forgets s's tokens from n on (a rejected speculative draft): n_tokens
 * = n, and the blocks past the one holding token n - 1, reserved or
 * committed, are released (unref, last first). n must not reach into the
 * blocks s has hashed for the prefix cache, so no published block ever
 * holds a forgotten token. */
void kv_seq_truncate(kv_alloc_t *a, kv_seq_t *s, int64_t n);

/* Gives back (unref, first first) every block of s that holds only tokens
 * before `pos` (<= s->n_tokens): their table entries become -1 and no
 * token before pos may be read again (a sliding window has passed them).
 * The table keeps its length (n_blocks), so reservation, slots and the
 * prefix-cache chain go on as before; a block still shared stays in use. */
void kv_seq_release_before(kv_alloc_t *a, kv_seq_t *s, int64_t pos);

/* The cache slot of token `pos` of s (block * block_size + offset), or -1
 * when s holds no block for it (past its blocks, or released). */
int32_t kv_seq_slot(const kv_alloc_t *a, const kv_seq_t *s, int64_t pos);

/* Drops s's reference on each of its blocks, last block first (the ones no
 * one else holds become free in that order), frees its block array and makes it empty again. */
void kv_seq_free(kv_alloc_t *a, kv_seq_t *s);

/* --- prefix caching -------------------------------------------------------- */


/* The chained hash of a block holding tokens[n] after a prefix whose hash
 * is `parent`. A pure function: the same on every run and machine. */
uint64_t kv_hash_block(uint64_t parent, const int32_t *tokens, int32_t n);

/* Publishes `block` (in use, full) as holding tokens[block_size] after a
 * prefix of hash `parent`, under kv_hash_block(parent, tokens). Returns 1
 * when published; 0 when nothing changed because the block is published
 * already or another block holds that hash. */
int kv_prefix_insert(kv_alloc_t *a, int32_t block, uint64_t parent, const int32_t *tokens);

/* The published block (in use or free) that holds exactly tokens[block_size]
 * after a prefix of hash `parent`, or -1. Takes no reference. */
int32_t kv_prefix_find(const kv_alloc_t *a, uint64_t parent, const int32_t *tokens);

/* Whether `block` is published; if so and hash is not NULL, *hash = its hash. */
int kv_block_published(const kv_alloc_t *a, int32_t block, uint64_t *hash);

/* Published blocks (in use or free), and published blocks evicted so far. */
int32_t kv_alloc_published_blocks(const kv_alloc_t *a);
uint64_t kv_alloc_evictions(const kv_alloc_t *a);

/* Prefix-cache lookup for an empty sequence s (no blocks): walks tokens[n]
 * a full block at a time and, while the chained hash finds a published
 * block, appends it to s with a reference. Only blocks that lie wholly in
 * tokens[0, n) count: pass n = prompt length - 1 to leave a token to
 * compute. On return s->n_tokens = the matched tokens (a multiple of
 * block_size) and the hash chain continues from there. Returns the number
 * of blocks matched (0 when none). */
int32_t kv_seq_match_prefix(kv_alloc_t *a, kv_seq_t *s, const int32_t *tokens, int64_t n);

/* Gives back the matched blocks of s past its first `keep` (last first):
 * s must hold only what kv_seq_match_prefix gave it, and keeps keep blocks
 * (<= s->n_blocks), keep * block_size tokens, its hash chain at the last
 * one kept. A hybrid keeps the match only up to a block whose recurrent
 * state it can restore. */
void kv_seq_unmatch(kv_alloc_t *a, kv_seq_t *s, int32_t keep);

/* The published block that holds s's last hashed block's content (s's own,
 * or the block that held that hash first), or -1 when s has hashed no block
 * or the hash has been evicted. */
int32_t kv_seq_tail_block(const kv_alloc_t *a, const kv_seq_t *s);

/* Publishes every block of s that is full of committed tokens and not yet
 * hashed along s's chain: tokens[s->n_tokens] are the sequence's token ids
 * (only full blocks are read). A block whose hash another block already
 * holds stays unpublished; the chain goes on. */
void kv_seq_publish(kv_alloc_t *a, kv_seq_t *s, const int32_t *tokens);

/* Makes the empty sequence `child` a copy of `parent`'s committed tokens:
 * it references every full block of parent, and when parent's last block is
 * partial (n_tokens not a multiple of block_size) it gets a fresh block for
 * it, whose K/V the caller copies from *copy_src into *copy_dst on the
 * device. Returns 1 when that copy is needed, 0 when not, or -ENOSPC when no
 * block is free for it (child stays empty). Parent's reserved but
 * uncommitted blocks are not shared. */
int kv_seq_fork(kv_alloc_t *a, kv_seq_t *child, const kv_seq_t *parent, int32_t *copy_src, int32_t *copy_dst);

#endif
