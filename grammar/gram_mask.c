/* grammar/gram_mask.c — token masks: the trie walk and the per-position
 * token cache.
 *
 * The walk steps a set of stack frames through the vocabulary in trie order
 * (gram_vocab.h), sharing each prefix's frontier between the tokens that
 * start with it and skipping every token below a dead prefix.
 *
 * The cache (the "adaptive token mask cache" idea of XGrammar): for a
 * stack's top (the position p waiting on a byte set and the return positions
 * of the GRAM_CTX - 1 frames below it), walk the whole vocabulary from those
 * frames with nothing known below them (GRAM_LOCAL).
 * A token consumed with a frame still alive, or one that ends exactly where
 * p's rule ends, is accepted whatever the real stack: "accepted". A token that
 * dies before p's rule could end is rejected whatever the stack. A token that
 * runs past the end of p's rule depends on the stack: "uncertain". A mask is
 * then the union of the accepted sets of the live frames' positions, plus a
 * walk with the real frames over only the uncertain tokens (few: in JSON,
 * e.g., the tokens that close a string and go on). Entries are computed on
 * first use, under the cache's lock. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_vocab.h"

typedef struct entry {
  int32_t n_acc;    /* accepted tokens */
  uint32_t *bits;   /* the accepted set as a mask (when large), or */
  int32_t *list;    /* [n_acc] as ids (when small) */
  int32_t n_unc;
  int32_t *unc;     /* [n_unc] uncertain tokens as indices into vocab->sorted, ascending */
} entry_t;

/* An entry's key: the positions of the top GRAM_CTX frames of a stack (the
 * byte set waiting, then the return positions below it); GRAM_ROOT where the
 * stack ends sooner. Deeper keys see past the end of small rules (a string's
 * character rule returns into the string's repetition), so fewer tokens are
 * uncertain. */
#define GRAM_CTX 2

typedef struct key {
  int32_t pos[GRAM_CTX];
} ctx_key_t;

struct gram_cache {
  const gram_t *g;
  const gram_vocab_t *v;
  ctx_key_t *keys;        /* open addressing: keys[i] / ent[i], ent NULL when empty */
  entry_t **ent;
  uint32_t mask;      /* table size - 1 */
  int32_t n_ent;
  pthread_mutex_t mu; /* guards the table, filling, run, walk, bytes */
  gram_run_t run;
  gram_walk_t walk;
  gram_ivec_t acc, unc;
  size_t bytes;
};

void gram__walk_free(gram_walk_t *w) {
  free(w->buf.v), free(w->off), free(w->cnt), free(w->top), free(w->unc), free(w->endok);
  memset(w, 0, sizeof *w);
}

static int walk_reserve(gram_walk_t *w, int32_t depth) {
  if (depth <= w->cap) return 0;
  int32_t nc = depth + 16;
  if (gram__resize(&w->off, sizeof *w->off, nc) || gram__resize(&w->cnt, sizeof *w->cnt, nc) ||
      gram__resize(&w->top, sizeof *w->top, nc) || gram__resize(&w->unc, 1, nc) || gram__resize(&w->endok, 1, nc))
    return GRAM_ENOMEM;
  w->cap = nc;
  return 0;
}

enum { R_REJECT, R_ACCEPT, R_UNCERTAIN };

/* Walks the tokens sorted[list[i]] (list NULL: all of them, in order) from
 * the frames start[0..n_start). Accepted ids go to acc (or straight into
 * mask), uncertain sorted indices to unc (cache mode only). Leaves the run's
 * frame count as it found it. */
/* Did the local rule end at a depth d < upto where the token's next byte
 * b[d] may follow it (follow)? Then the token depends on the real stack. */
static int uncertain(const gram_walk_t *w, const char *b, int32_t upto, const gram_set_t *follow) {
  for (int32_t d = 1; d < upto; d++)
    if (w->unc[d] && gram__set_has(follow, (unsigned char)b[d])) return 1;
  return 0;
}

static int walk(gram_run_t *r, gram_walk_t *w, const gram_vocab_t *v, const int32_t *start, int32_t n_start,
                const int32_t *list, int32_t n_list, const gram_set_t *follow, gram_ivec_t *acc, gram_ivec_t *unc,
                uint32_t *mask) {
  int rc = walk_reserve(w, v->max_len + 2);
  if (rc) return rc;
  const int32_t base = r->n_fr;
  w->buf.n = 0;
  if (gram__ivec_reserve(&w->buf, n_start)) return GRAM_ENOMEM;
  if (n_start) memcpy(w->buf.v, start, sizeof *start * (size_t)n_start);
  w->buf.n = n_start;
  w->off[0] = 0, w->cnt[0] = n_start, w->top[0] = base, w->unc[0] = 0, w->endok[0] = 0;
  int32_t reach = 0, dead = -1;
  const char *prev = NULL;
  size_t prev_len = 0;
  int32_t total = list ? n_list : v->n_sorted;
  for (int32_t i = 0; i < total; i++) {
    int32_t si = list ? list[i] : i;
    int32_t id = v->sorted[si];
    size_t n;
    const char *b = gram__vocab_token(v, id, &n, NULL);
    size_t l;
    if (!list) l = v->lcp[si];
    else {
      l = 0;
      while (l < prev_len && l < n && prev[l] == b[l]) l++;
    }
    prev = b, prev_len = n;
    int32_t die = -1; /* depth at which this token's frontier became empty */
    if (dead >= 0 && (int32_t)l >= dead) {
      die = dead;
    } else {
      dead = -1;
      int32_t k = (int32_t)l < reach ? (int32_t)l : reach;
      gram__run_truncate(r, w->top[k]);
      w->buf.n = w->off[k] + w->cnt[k];
      for (int32_t j = k; j < (int32_t)n; j++) {
        int32_t o = w->buf.n;
        int f = gram__run_step(r, w->buf.v + w->off[j], w->cnt[j], (unsigned char)b[j], &w->buf);
        if (f < 0) {
          gram__run_truncate(r, base);
          return f;
        }
        w->off[j + 1] = o, w->cnt[j + 1] = w->buf.n - o, w->top[j + 1] = r->n_fr;
        w->unc[j + 1] = (f & GRAM_HIT_LOCAL) != 0;
        w->endok[j + 1] = w->cnt[j + 1] > 0 || f != 0;
        if (!w->cnt[j + 1]) {
          die = dead = j + 1;
          break;
        }
      }
      reach = dead >= 0 ? dead : (int32_t)n;
    }
    int res;
    if (die < 0 || die == (int32_t)n) res = w->endok[n] ? R_ACCEPT : R_REJECT;
    else res = R_REJECT;
    if (res == R_REJECT && follow && uncertain(w, b, die < 0 ? (int32_t)n : die + 1 > (int32_t)n ? (int32_t)n : die + 1, follow))
      res = R_UNCERTAIN;
    if (res == R_ACCEPT) {
      if (mask) mask[id >> 5] |= 1u << (id & 31);
      else {
        if (gram__ivec_reserve(acc, 1)) return GRAM_ENOMEM;
        acc->v[acc->n++] = id;
      }
    } else if (res == R_UNCERTAIN && unc) {
      if (gram__ivec_reserve(unc, 1)) return GRAM_ENOMEM;
      unc->v[unc->n++] = si;
    }
  }
  gram__run_truncate(r, base);
  return 0;
}

gram_cache_t *gram_cache_create(const gram_t *g, const gram_vocab_t *v) {
  gram_cache_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->g = g, c->v = v;
  c->mask = 255;
  c->ent = calloc(c->mask + 1, sizeof *c->ent);
  c->keys = calloc(c->mask + 1, sizeof *c->keys);
  if (!c->ent || !c->keys || gram__run_init(&c->run, g) || gram__ivec_reserve(&c->acc, 64) ||
      gram__ivec_reserve(&c->unc, 64)) {
    gram_cache_destroy(c);
    return NULL;
  }
  pthread_mutex_init(&c->mu, NULL);
  c->bytes = sizeof *c + (sizeof *c->ent + sizeof *c->keys) * (c->mask + 1);
  return c;
}

void gram_cache_destroy(gram_cache_t *c) {
  if (!c) return;
  if (c->ent && c->keys) {
    for (uint32_t i = 0; i <= c->mask; i++)
      if (c->ent[i]) {
        free(c->ent[i]->bits), free(c->ent[i]->list), free(c->ent[i]->unc);
        free(c->ent[i]);
      }
    pthread_mutex_destroy(&c->mu);
  }
  free(c->ent), free(c->keys);
  gram__run_free(&c->run);
  gram__walk_free(&c->walk);
  free(c->acc.v), free(c->unc.v);
  free(c);
}

const gram_vocab_t *gram__cache_vocab(const gram_cache_t *c) { return c->v; }
const gram_t *gram__cache_grammar(const gram_cache_t *c) { return c->g; }

size_t gram_cache_bytes(const gram_cache_t *c) {
  pthread_mutex_t *mu = (pthread_mutex_t *)&c->mu;
  pthread_mutex_lock(mu);
  size_t b = c->bytes;
  pthread_mutex_unlock(mu);
  return b;
}

/* Computes the entry of key k; called with the lock held. */
static int compute(gram_cache_t *c, const ctx_key_t *k, entry_t **out) {
  gram__run_truncate(&c->run, 0);
  c->run.err = 0;
  int depth = 0;
  while (depth < GRAM_CTX && k->pos[depth] != GRAM_ROOT) depth++;
  int32_t f = depth < GRAM_CTX ? GRAM_ROOT : GRAM_LOCAL;
  for (int i = depth - 1; i >= 0; i--) {
    f = gram__run_frame(&c->run, k->pos[i], f);
    if (f < 0) return c->run.err ? c->run.err : GRAM_ENOMEM;
  }
  c->acc.n = c->unc.n = 0;
  /* bytes that may follow the bottom frame's rule: only tokens going on with
   * one of them past the rule's end can depend on the real stack */
  const gram_set_t *follow = depth == GRAM_CTX ? &c->g->follow[c->g->elem_rule[k->pos[depth - 1]]] : NULL;
  int rc = walk(&c->run, &c->walk, c->v, &f, 1, NULL, 0, follow, &c->acc, &c->unc, NULL);
  if (rc) return rc;
  entry_t *e = calloc(1, sizeof *e);
  if (!e) return GRAM_ENOMEM;
  size_t words = gram_mask_words(c->v);
  e->n_acc = c->acc.n;
  if ((size_t)c->acc.n > words) {
    e->bits = calloc(words, sizeof *e->bits);
    if (e->bits)
      for (int32_t i = 0; i < c->acc.n; i++) e->bits[c->acc.v[i] >> 5] |= 1u << (c->acc.v[i] & 31);
    c->bytes += words * sizeof *e->bits;
  } else if (c->acc.n) {
    e->list = malloc(sizeof *e->list * (size_t)c->acc.n);
    if (e->list) memcpy(e->list, c->acc.v, sizeof *e->list * (size_t)c->acc.n);
    c->bytes += sizeof *e->list * (size_t)c->acc.n;
  }
  e->n_unc = c->unc.n;
  if (c->unc.n) {
    e->unc = malloc(sizeof *e->unc * (size_t)c->unc.n);
    if (e->unc) memcpy(e->unc, c->unc.v, sizeof *e->unc * (size_t)c->unc.n);
    c->bytes += sizeof *e->unc * (size_t)c->unc.n;
  }
  c->bytes += sizeof *e;
  if ((e->n_acc && !e->bits && !e->list) || (e->n_unc && !e->unc)) {
    free(e->bits), free(e->list), free(e->unc), free(e);
    return GRAM_ENOMEM;
  }
  *out = e;
  return 0;
}

static uint32_t key_hash(const ctx_key_t *k) {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < GRAM_CTX; i++) h = (h ^ (uint32_t)k->pos[i]) * 0xBF58476D1CE4E5B9ull;
  return (uint32_t)(h >> 32);
}

static int grow_table(gram_cache_t *c) {
  uint32_t nm = c->mask * 2 + 1;
  entry_t **ne = calloc(nm + 1, sizeof *ne);
  ctx_key_t *nk = calloc(nm + 1, sizeof *nk);
  if (!ne || !nk) {
    free(ne), free(nk);
    return GRAM_ENOMEM;
  }
  for (uint32_t i = 0; i <= c->mask; i++) {
    if (!c->ent[i]) continue;
    uint32_t h = key_hash(&c->keys[i]) & nm;
    while (ne[h]) h = (h + 1) & nm;
    ne[h] = c->ent[i], nk[h] = c->keys[i];
  }
  c->bytes += (sizeof *ne + sizeof *nk) * (c->mask + 1);
  free(c->ent), free(c->keys);
  c->ent = ne, c->keys = nk, c->mask = nm;
  return 0;
}

/* The entry of key k, computed now if new. */
static int get_entry(const gram_cache_t *cc, const ctx_key_t *k, const entry_t **out) {
  gram_cache_t *c = (gram_cache_t *)cc; /* filling is internal mutation under the lock */
  pthread_mutex_lock(&c->mu);
  uint32_t h = key_hash(k) & c->mask;
  while (c->ent[h] && memcmp(&c->keys[h], k, sizeof *k)) h = (h + 1) & c->mask;
  int rc = 0;
  entry_t *e = c->ent[h];
  if (!e && !(rc = compute(c, k, &e))) {
    c->ent[h] = e, c->keys[h] = *k;
    if ((uint32_t)++c->n_ent * 2 > c->mask) rc = grow_table(c);
  }
  pthread_mutex_unlock(&c->mu);
  *out = e;
  return e ? 0 : rc;
}

int32_t gram_cache_entries(const gram_cache_t *cc) {
  gram_cache_t *c = (gram_cache_t *)cc;
  pthread_mutex_lock(&c->mu);
  int32_t n = c->n_ent;
  pthread_mutex_unlock(&c->mu);
  return n;
}

static ctx_key_t key_of(const gram_run_t *run, int32_t frame) {
  ctx_key_t k;
  for (int i = 0; i < GRAM_CTX; i++) {
    k.pos[i] = frame >= 0 ? run->fr[frame].pos : GRAM_ROOT;
    if (frame >= 0) frame = run->fr[frame].below;
  }
  return k;
}

int32_t gram__cache_fill(const gram_cache_t *c, gram_run_t *run, gram_walk_t *w, const int32_t *front,
                         int32_t n, int accepting, uint32_t *mask) {
  const gram_vocab_t *v = c->v;
  size_t words = gram_mask_words(v);
  memset(mask, 0, words * sizeof *mask);
  int rc = 0;
  /* group the frames by position: one cached set and one uncertain walk each */
  int32_t *grp = malloc(sizeof *grp * (size_t)(n + 1));
  if (!grp) return GRAM_ENOMEM;
  uint8_t *done = calloc((size_t)n + 1, 1);
  if (!done) {
    free(grp);
    return GRAM_ENOMEM;
  }
  for (int32_t i = 0; i < n && !rc; i++) {
    if (done[i]) continue;
    ctx_key_t key = key_of(run, front[i]);
    int32_t k = 0;
    for (int32_t j = i; j < n; j++) {
      if (done[j]) continue;
      ctx_key_t kj = key_of(run, front[j]);
      if (!memcmp(&kj, &key, sizeof key)) grp[k++] = front[j], done[j] = 1;
    }
    const entry_t *e;
    if ((rc = get_entry(c, &key, &e))) break;
    if (e->bits)
      for (size_t x = 0; x < words; x++) mask[x] |= e->bits[x];
    else
      for (int32_t x = 0; x < e->n_acc; x++) mask[e->list[x] >> 5] |= 1u << (e->list[x] & 31);
    if (e->n_unc) rc = walk(run, w, v, grp, k, e->unc, e->n_unc, NULL, NULL, NULL, mask);
  }
  free(grp), free(done);
  if (rc) {
    memset(mask, 0, words * sizeof *mask);
    return rc;
  }
  if (accepting)
    for (int32_t i = 0; i < v->n_eog; i++) mask[v->eog[i] >> 5] |= 1u << (v->eog[i] & 31);
  int32_t count = 0;
  for (size_t x = 0; x < words; x++) count += __builtin_popcount(mask[x]);
  return count;
}
