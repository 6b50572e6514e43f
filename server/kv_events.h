/* server/kv_events.h — vLLM's KV-cache events: every block the prefix cache
 * stores or evicts, published over ZeroMQ in vLLM's wire format so that
 * KV-aware routers (the llm-d inference scheduler's precise prefix scorer,
 * and anything else that reads vLLM's events) can track what each replica
 * holds.
 *
 * Wire format (vLLM's ZmqEventPublisher with its msgspec structs, array
 * layout): a PUB socket sends one three-frame message per engine step that
 * changed the cache: the topic, the sequence number (8 bytes, big-endian,
 * 0, 1, 2, ... per batch; a gap means batches were lost), and a msgpack
 * EventBatch [ts, [event, ...], data_parallel_rank] with ts the wall-clock
 * time in seconds (float64) and rank 0. Events:
 *   ["BlockStored", [hash, ...], parent_hash | nil, [token_id, ...], block_size, nil, "GPU", nil]
 *       consecutive blocks of one chain: hashes[i]'s parent is hashes[i-1],
 *       the first's is parent_hash (nil for a sequence's first block), and
 *       token_ids is their block_size * len(hashes) tokens (lora_id nil,
 *       medium "GPU": the engine's own KV cache, whatever the device;
 *       lora_name nil)
 *   ["BlockRemoved", [hash, ...], "GPU"]
 *   ["AllBlocksCleared"]      (the first batch: the cache starts empty)
 * Hashes are tram's own 64-bit chained block hashes (unsigned integers).
 *
 * The observer's functions and the flush run on the engine thread and never
 * block: events are gathered in memory during a step and the batch is
 * handed to ZeroMQ with ZMQ_DONTWAIT at its end (a PUB socket drops, rather
 * than waits, for a subscriber that does not keep up). */
#ifndef TRAM_KV_EVENTS_H
#define TRAM_KV_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "cache/kv_observer.h"

typedef struct kvev kvev_t;

/* A publisher on endpoint (bound when it contains "*" or "::" or starts
 * with ipc:// or inproc://, connected otherwise: vLLM's rule), messages
 * headed by topic (may be empty). Returns NULL with the reason in err. */
kvev_t *kvev_create(const char *endpoint, const char *topic, char *err, size_t err_len);

/* Closes the socket (unsent messages are dropped). Call after the engine
 * that used the observer has stopped. NULL: no-op. */
void kvev_destroy(kvev_t *k);

/* The observer to give the engine (sched_config_t.kv_observer). */
kv_observer_t kvev_observer(kvev_t *k);

/* Batches sent and batches ZeroMQ refused (each still took a sequence number). */
void kvev_counts(const kvev_t *k, uint64_t *sent, uint64_t *failed);

#endif
