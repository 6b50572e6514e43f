/* server/kv_events.c — vLLM's KV-cache events over ZeroMQ (see
 * kv_events.h): the step's events gathered, encoded with msgpack-c and sent
 * on a PUB socket. */
#include "server/kv_events.h"

#include <errno.h>
#include <msgpack.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "base/alloc.h"
#include "base/log.h"

typedef enum { EV_STORED, EV_REMOVED, EV_CLEARED } ev_kind_t;

/* One event of the batch; its hashes and tokens are ranges of the shared arrays. */
typedef struct ev {
  ev_kind_t kind;
  uint64_t parent; /* EV_STORED: the first block's parent */
  bool root;       /* EV_STORED: the first block starts a sequence (parent nil) */
  int32_t block_size;
  size_t hash0, n_hashes, tok0, n_tokens;
} ev_t;

struct kvev {
  void *ctx, *sock;
  char *topic;
  ev_t *evs;
  size_t n_evs, cap_evs;
  uint64_t *hashes;
  size_t n_hashes, cap_hashes;
  int32_t *tokens;
  size_t n_tokens, cap_tokens;
  uint64_t seq;
  _Atomic uint64_t sent, failed;
};

static ev_t *new_event(kvev_t *k, ev_t ev);

/* vLLM's rule: bind a wildcard or local transport, connect to anything else. */
static bool binds(const char *endpoint) {
  return strchr(endpoint, '*') || strstr(endpoint, "::") || strncmp(endpoint, "ipc://", 6) == 0 ||
         strncmp(endpoint, "inproc://", 9) == 0;
}

kvev_t *kvev_create(const char *endpoint, const char *topic, char *err, size_t err_len) {
  kvev_t *k = xcalloc(1, sizeof *k);
  k->topic = xstrdup(topic ? topic : "");
  const int hwm = 100000, linger = 0; /* vLLM's high-water mark; close drops what is unsent */
  k->ctx = zmq_ctx_new();
  k->sock = k->ctx ? zmq_socket(k->ctx, ZMQ_PUB) : NULL;
  int rc = k->sock ? 0 : -1;
  if (rc == 0) rc = zmq_setsockopt(k->sock, ZMQ_SNDHWM, &hwm, sizeof hwm);
  if (rc == 0) rc = zmq_setsockopt(k->sock, ZMQ_LINGER, &linger, sizeof linger);
  if (rc == 0) rc = binds(endpoint) ? zmq_bind(k->sock, endpoint) : zmq_connect(k->sock, endpoint);
  if (rc != 0) {
    snprintf(err, err_len, "kv_events: cannot %s %s: %s", binds(endpoint) ? "bind" : "connect to", endpoint,
             zmq_strerror(zmq_errno()));
    kvev_destroy(k);
    return NULL;
  }
  new_event(k, (ev_t){.kind = EV_CLEARED}); /* the cache starts empty: say so first */
  log_info("kv_events: publishing vLLM KV-cache events on %s (%s, topic \"%s\")", endpoint,
           binds(endpoint) ? "bound" : "connected", k->topic);
  return k;
}

void kvev_destroy(kvev_t *k) {
  if (!k) return;
  if (k->sock)
    log_info("kv_events: %llu batches sent, %llu not sent", (unsigned long long)atomic_load(&k->sent),
             (unsigned long long)atomic_load(&k->failed));
  if (k->sock) zmq_close(k->sock);
  if (k->ctx) zmq_ctx_term(k->ctx);
  free(k->topic);
  free(k->evs);
  free(k->hashes);
  free(k->tokens);
  free(k);
}

void kvev_counts(const kvev_t *k, uint64_t *sent, uint64_t *failed) {
  *sent = atomic_load(&k->sent);
  *failed = atomic_load(&k->failed);
}

/* Appends ev (its ranges start at the arrays' ends) and returns it. */
static ev_t *new_event(kvev_t *k, ev_t ev) {
  xgrow(&k->evs, &k->cap_evs, k->n_evs + 1, sizeof *k->evs, 16);
  ev.hash0 = k->n_hashes;
  ev.tok0 = k->n_tokens;
  k->evs[k->n_evs] = ev;
  return &k->evs[k->n_evs++];
}

/* The batch's last event, or NULL. */
static ev_t *last_event(kvev_t *k) { return k->n_evs ? &k->evs[k->n_evs - 1] : NULL; }

static void push_hash(kvev_t *k, ev_t *e, uint64_t h) {
  xgrow(&k->hashes, &k->cap_hashes, k->n_hashes + 1, sizeof *k->hashes, 16);
  k->hashes[k->n_hashes++] = h;
  e->n_hashes++;
}

static void on_stored(void *arg, uint64_t hash, uint64_t parent, const int32_t *tokens, int32_t block_size) {
  kvev_t *k = arg;
  ev_t *e = last_event(k);
  /* a block joins the last event only if it continues that event's chain */
  if (!e || e->kind != EV_STORED || e->block_size != block_size || k->hashes[e->hash0 + e->n_hashes - 1] != parent)
    e = new_event(k, (ev_t){.kind = EV_STORED, .parent = parent, .root = parent == KV_HASH_ROOT,
                            .block_size = block_size});
  push_hash(k, e, hash);
  xgrow(&k->tokens, &k->cap_tokens, k->n_tokens + (size_t)block_size, sizeof *k->tokens, 16);
  memcpy(k->tokens + k->n_tokens, tokens, (size_t)block_size * sizeof *tokens);
  k->n_tokens += (size_t)block_size;
  e->n_tokens += (size_t)block_size;
}

static void on_removed(void *arg, uint64_t hash) {
  kvev_t *k = arg;
  ev_t *e = last_event(k);
  if (!e || e->kind != EV_REMOVED) e = new_event(k, (ev_t){.kind = EV_REMOVED});
  push_hash(k, e, hash);
}

static void pack_str(msgpack_packer *p, const char *s) {
  msgpack_pack_str(p, strlen(s));
  msgpack_pack_str_body(p, s, strlen(s));
}

static void pack_hashes(msgpack_packer *p, const kvev_t *k, const ev_t *e) {
  msgpack_pack_array(p, e->n_hashes);
  for (size_t i = 0; i < e->n_hashes; i++) msgpack_pack_uint64(p, k->hashes[e->hash0 + i]);
}

static void pack_event(msgpack_packer *p, const kvev_t *k, const ev_t *e) {
  if (e->kind == EV_CLEARED) {
    msgpack_pack_array(p, 1);
    pack_str(p, "AllBlocksCleared");
  } else if (e->kind == EV_REMOVED) {
    msgpack_pack_array(p, 3);
    pack_str(p, "BlockRemoved");
    pack_hashes(p, k, e);
    pack_str(p, "GPU");
  } else {
    msgpack_pack_array(p, 8);
    pack_str(p, "BlockStored");
    pack_hashes(p, k, e);
    if (e->root) msgpack_pack_nil(p);
    else msgpack_pack_uint64(p, e->parent);
    msgpack_pack_array(p, e->n_tokens);
    for (size_t i = 0; i < e->n_tokens; i++) msgpack_pack_int32(p, k->tokens[e->tok0 + i]);
    msgpack_pack_int32(p, e->block_size);
    msgpack_pack_nil(p); /* lora_id */
    pack_str(p, "GPU");  /* medium */
    msgpack_pack_nil(p); /* lora_name */
  }
}

static void on_flush(void *arg) {
  kvev_t *k = arg;
  if (!k->n_evs) return;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  msgpack_sbuffer buf;
  msgpack_sbuffer_init(&buf);
  msgpack_packer p;
  msgpack_packer_init(&p, &buf, msgpack_sbuffer_write);
  msgpack_pack_array(&p, 3);
  msgpack_pack_double(&p, (double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
  msgpack_pack_array(&p, k->n_evs);
  for (size_t i = 0; i < k->n_evs; i++) pack_event(&p, k, &k->evs[i]);
  msgpack_pack_int32(&p, 0); /* data_parallel_rank */
  unsigned char seq[8];
  for (int i = 0; i < 8; i++) seq[i] = (unsigned char)(k->seq >> (56 - 8 * i));
  k->seq++;
  const size_t tlen = strlen(k->topic);
  const bool ok = zmq_send(k->sock, k->topic, tlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) == (int)tlen &&
                  zmq_send(k->sock, seq, sizeof seq, ZMQ_SNDMORE | ZMQ_DONTWAIT) == (int)sizeof seq &&
                  zmq_send(k->sock, buf.data, buf.size, ZMQ_DONTWAIT) == (int)buf.size;
  if (ok) atomic_fetch_add(&k->sent, 1);
  else if (atomic_fetch_add(&k->failed, 1) == 0) /* once: the engine thread must not flood the log */
    log_warn("kv_events: a batch was not sent (%s); subscribers see a gap in the sequence numbers",
             zmq_strerror(zmq_errno()));
  msgpack_sbuffer_destroy(&buf);
  k->n_evs = k->n_hashes = k->n_tokens = 0;
}

kv_observer_t kvev_observer(kvev_t *k) {
  return (kv_observer_t){.stored = on_stored, .removed = on_removed, .flush = on_flush, .arg = k};
}
