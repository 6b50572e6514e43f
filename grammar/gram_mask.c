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
#include <stdatomic.h>
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
  pthread_mutex_t mu; /* guards the table, filling, run, walk; bytes change under it */
  gram_run_t run;
  gram_walk_t walk;
  gram_ivec_t acc, unc;
  _Atomic int64_t bytes;
  gram_budget_t *budget; /* shared with other caches, or NULL */
};

void gram__walk_free(gram_walk_t *w) {
  free(w->st), free(w->unc), free(w->endok), free(w->sfr.v), free(w->soff.v), free(w->sid), free(w->sstamp);
  free(w->tkey), free(w->tstamp), free(w->tnext), free(w->tflag), free(w->tmp.v);
  memset(w, 0, sizeof *w);
}

#define WALK_MAX_STATES (1 << 22)

static int walk_reserve(gram_walk_t *w, int32_t depth) {
  if (!w->sid) {
    w->smask = w->tmask = 1023;
    w->sid = malloc(sizeof *w->sid * 1024), w->sstamp = calloc(1024, sizeof *w->sstamp);
    w->tkey = malloc(sizeof *w->tkey * 1024), w->tstamp = calloc(1024, sizeof *w->tstamp);
    w->tnext = malloc(sizeof *w->tnext * 1024), w->tflag = malloc(1024);
    if (!w->sid || !w->sstamp || !w->tkey || !w->tstamp || !w->tnext || !w->tflag) return GRAM_ENOMEM;
  }
  if (depth <= w->cap) return 0;
  int32_t nc = depth + 16;
  if (gram__resize(&w->st, sizeof *w->st, nc) || gram__resize(&w->unc, 1, nc) || gram__resize(&w->endok, 1, nc))
    return GRAM_ENOMEM;
  w->cap = nc;
  return 0;
}

static uint32_t mix(uint64_t h) {
  h ^= h >> 33, h *= 0xff51afd7ed558ccdull, h ^= h >> 33;
  return (uint32_t)h;
}

static uint32_t state_hash(const int32_t *f, int32_t n) {
  uint64_t h = (uint64_t)n;
  for (int32_t i = 0; i < n; i++) h = (h ^ (uint32_t)f[i]) * 0x9E3779B97F4A7C15ull;
  return mix(h);
}

static int32_t *state_frames(const gram_walk_t *w, int32_t s, int32_t *n) {
  *n = w->soff.v[s + 1] - w->soff.v[s];
  return w->sfr.v + w->soff.v[s];
}

/* Doubles a stamped table of 2^k slots; live entries are rehashed. */
static int grow_states(gram_walk_t *w) {
  uint32_t nm = w->smask * 2 + 1;
  int32_t *sid = malloc(sizeof *sid * (nm + 1));
  uint32_t *st = calloc(nm + 1, sizeof *st);
  if (!sid || !st) {
    free(sid), free(st);
    return GRAM_ENOMEM;
  }
  for (int32_t s = 0; s < w->soff.n - 1; s++) {
    int32_t n, *f = state_frames(w, s, &n);
    uint32_t h = state_hash(f, n) & nm;
    while (st[h] == w->epoch) h = (h + 1) & nm;
    st[h] = w->epoch, sid[h] = s;
  }
  free(w->sid), free(w->sstamp);
  w->sid = sid, w->sstamp = st, w->smask = nm;
  return 0;
}

static int grow_trans(gram_walk_t *w) {
  uint32_t nm = w->tmask * 2 + 1;
  uint32_t *key = malloc(sizeof *key * (nm + 1)), *st = calloc(nm + 1, sizeof *st);
  int32_t *nx = malloc(sizeof *nx * (nm + 1));
  uint8_t *fl = malloc(nm + 1);
  if (!key || !st || !nx || !fl) {
    free(key), free(st), free(nx), free(fl);
    return GRAM_ENOMEM;
  }
  for (uint32_t i = 0; i <= w->tmask; i++) {
    if (w->tstamp[i] != w->epoch) continue;
    uint32_t h = mix(w->tkey[i]) & nm;
    while (st[h] == w->epoch) h = (h + 1) & nm;
    st[h] = w->epoch, key[h] = w->tkey[i], nx[h] = w->tnext[i], fl[h] = w->tflag[i];
  }
  free(w->tkey), free(w->tstamp), free(w->tnext), free(w->tflag);
  w->tkey = key, w->tstamp = st, w->tnext = nx, w->tflag = fl, w->tmask = nm;
  return 0;
}

/* The state of the frames in w->tmp (sorted here), made if new; -1 if empty. */
static int32_t intern(gram_walk_t *w) {
  int32_t n = w->tmp.n, *f = w->tmp.v;
  if (!n) return -1;
  for (int32_t i = 1; i < n; i++) /* insertion sort: frontiers are small */
    for (int32_t j = i; j > 0 && f[j - 1] > f[j]; j--) {
      int32_t t = f[j];
      f[j] = f[j - 1], f[j - 1] = t;
    }
  uint32_t h = state_hash(f, n) & w->smask;
  for (; w->sstamp[h] == w->epoch; h = (h + 1) & w->smask) {
    int32_t m, *g = state_frames(w, w->sid[h], &m);
    if (m == n && !memcmp(f, g, sizeof *f * (size_t)n)) return w->sid[h];
  }
  int32_t s = w->soff.n - 1;
  if (s >= WALK_MAX_STATES) return GRAM_ELIMIT - 16; /* (distinct from -1; see dfa_step) */
  if (gram__ivec_reserve(&w->sfr, n) || gram__ivec_reserve(&w->soff, 1)) return GRAM_ENOMEM - 16;
  memcpy(w->sfr.v + w->sfr.n, f, sizeof *f * (size_t)n);
  w->sfr.n += n;
  w->soff.v[w->soff.n++] = w->sfr.n;
  w->sstamp[h] = w->epoch, w->sid[h] = s;
  if ((uint32_t)(s + 1) * 2 > w->smask && grow_states(w)) return GRAM_ENOMEM - 16;
  return s;
}

/* The state after byte c from state s, and the step's GRAM_HIT_* flags. */
static int dfa_step(gram_run_t *r, gram_walk_t *w, int32_t s, unsigned c, int32_t *next, int *flags) {
  uint32_t key = (uint32_t)s << 8 | c, h = mix(key) & w->tmask;
  for (; w->tstamp[h] == w->epoch; h = (h + 1) & w->tmask)
    if (w->tkey[h] == key) {
      *next = w->tnext[h], *flags = w->tflag[h];
      return 0;
    }
  int32_t n, *f = state_frames(w, s, &n);
  w->tmp.n = 0;
  int fl = gram__run_step(r, f, n, c, &w->tmp);
  if (fl < 0) return fl;
  int32_t ns = intern(w);
  if (ns < -1) return ns + 16;
  w->tstamp[h] = w->epoch, w->tkey[h] = key, w->tnext[h] = ns, w->tflag[h] = (uint8_t)fl;
  if ((uint32_t)++w->n_trans * 2 > w->tmask && grow_trans(w)) return GRAM_ENOMEM;
  *next = ns, *flags = fl;
  return 0;
}

/* Starts a walk: forgets the states and transitions of the last one. */
static int walk_begin(gram_walk_t *w, const int32_t *start, int32_t n_start, int32_t *s0) {
  if (++w->epoch == 0) {
    memset(w->sstamp, 0, sizeof *w->sstamp * (w->smask + 1));
    memset(w->tstamp, 0, sizeof *w->tstamp * (w->tmask + 1));
    w->epoch = 1;
  }
  w->sfr.n = 0, w->soff.n = 0, w->n_trans = 0;
  if (gram__ivec_reserve(&w->soff, 1) || gram__ivec_reserve(&w->tmp, n_start)) return GRAM_ENOMEM;
  w->soff.v[w->soff.n++] = 0;
  if (n_start) memcpy(w->tmp.v, start, sizeof *start * (size_t)n_start);
  w->tmp.n = n_start;
  *s0 = intern(w);
  return *s0 < -1 ? *s0 + 16 : 0;
}

enum { R_REJECT, R_ACCEPT, R_UNCERTAIN };

/* Did the local rule end at a depth d < upto where the token's next byte
 * b[d] may follow it (follow)? Then the token depends on the real stack. */
static int uncertain(const gram_walk_t *w, const char *b, int32_t upto, const gram_set_t *follow) {
  for (int32_t d = 1; d < upto; d++)
    if (w->unc[d] && gram__set_has(follow, (unsigned char)b[d])) return 1;
  return 0;
}

/* Walks the tokens sorted[list[i]] (list NULL: all of them, in order) from
 * the frames start[0..n_start). Accepted ids go to acc (or straight into
 * mask), uncertain sorted indices to unc (cache mode, follow given). Leaves
 * the run's frame count as it found it. */
static int walk(gram_run_t *r, gram_walk_t *w, const gram_vocab_t *v, const int32_t *start, int32_t n_start,
                const int32_t *list, int32_t n_list, const gram_set_t *follow, gram_ivec_t *acc, gram_ivec_t *unc,
                uint32_t *mask) {
  int rc = walk_reserve(w, v->max_len + 2);
  if (rc) return rc;
  const int32_t base = r->n_fr;
  if ((rc = walk_begin(w, start, n_start, &w->st[0]))) return rc;
  w->unc[0] = 0, w->endok[0] = 0;
  int32_t reach = 0, dead = w->st[0] < 0 ? 0 : -1;
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
      for (int32_t j = (int32_t)l < reach ? (int32_t)l : reach; j < (int32_t)n; j++) {
        int f = 0;
        if (r->fuel >= 0 && --r->fuel < 0)
          rc = gram__run_fail(r, GRAM_ELIMIT, "one token mask needs more than %lld steps of work (bound: mask_fuel)",
                              (long long)r->g->lim.mask_fuel);
        else rc = dfa_step(r, w, w->st[j], (unsigned char)b[j], &w->st[j + 1], &f);
        if (rc) {
          gram__run_truncate(r, base);
          return rc;
        }
        w->unc[j + 1] = (f & GRAM_HIT_LOCAL) != 0;
        w->endok[j + 1] = w->st[j + 1] >= 0 || f != 0;
        if (w->st[j + 1] < 0) {
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
  atomic_init(&c->bytes, (int64_t)(sizeof *c + (sizeof *c->ent + sizeof *c->keys) * (c->mask + 1)));
  return c;
}

void gram__budget_unref(gram_budget_t *b) {
  if (b && atomic_fetch_sub(&b->refs, 1) == 1) free(b);
}

void gram__cache_share(gram_cache_t *c, gram_budget_t *b) {
  atomic_fetch_add(&b->refs, 1);
  c->budget = b;
  atomic_fetch_add(&b->used, atomic_load(&c->bytes));
}

/* Takes need more bytes for c (under its lock): 0, or GRAM_ELIMIT when the
 * grammar's own bound or the shared one would be passed (c->run.why says). */
static int take_bytes(gram_cache_t *c, int64_t need) {
  const int64_t own = c->g->lim.cache_bytes;
  if (atomic_load(&c->bytes) + need > own)
    return gram__run_fail(&c->run, GRAM_ELIMIT, "the grammar's token cache needs more than %lld MiB (bound: cache_bytes)",
                          (long long)(own >> 20));
  gram_budget_t *b = c->budget;
  if (b) {
    if (atomic_load(&b->used) + need > b->max && b->reclaim) b->reclaim(b->ctx, need, c);
    if (atomic_load(&b->used) + need > b->max)
      return gram__run_fail(&c->run, GRAM_ELIMIT,
                            "the token caches of the grammars in use need more than %lld MiB (bound: the total of all)",
                            (long long)(b->max >> 20));
    atomic_fetch_add(&b->used, need);
  }
  atomic_fetch_add(&c->bytes, need);
  return 0;
}

static void free_entry(entry_t *e) {
  free(e->bits), free(e->list), free(e->unc);
  free(e);
}

void gram_cache_destroy(gram_cache_t *c) {
  if (!c) return;
  if (c->ent && c->keys) {
    for (uint32_t i = 0; i <= c->mask; i++)
      if (c->ent[i]) free_entry(c->ent[i]);
    pthread_mutex_destroy(&c->mu);
  }
  free(c->ent), free(c->keys);
  gram__run_free(&c->run);
  gram__walk_free(&c->walk);
  free(c->acc.v), free(c->unc.v);
  if (c->budget) {
    atomic_fetch_sub(&c->budget->used, atomic_load(&c->bytes));
    gram__budget_unref(c->budget);
  }
  free(c);
}

const gram_vocab_t *gram__cache_vocab(const gram_cache_t *c) { return c->v; }
const gram_t *gram__cache_grammar(const gram_cache_t *c) { return c->g; }

size_t gram_cache_bytes(const gram_cache_t *c) { return (size_t)atomic_load(&((gram_cache_t *)c)->bytes); }

/* Computes the entry of key k; called with the lock held. */
static int compute(gram_cache_t *c, const ctx_key_t *k, entry_t **out) {
  gram__run_truncate(&c->run, 0);
  c->run.err = 0;
  c->run.max_out = c->g->lim.max_stacks;
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
  size_t words = gram_mask_words(c->v);
  const int big = (size_t)c->acc.n > words;
  const int64_t need = (int64_t)(sizeof(entry_t) + (big ? words * sizeof(uint32_t) : sizeof(int32_t) * (size_t)c->acc.n) +
                                 sizeof(int32_t) * (size_t)c->unc.n);
  if ((rc = take_bytes(c, need))) return rc;
  entry_t *e = calloc(1, sizeof *e);
  if (e) {
    e->n_acc = c->acc.n;
    if (big) {
      e->bits = calloc(words, sizeof *e->bits);
      if (e->bits)
        for (int32_t i = 0; i < c->acc.n; i++) e->bits[c->acc.v[i] >> 5] |= 1u << (c->acc.v[i] & 31);
    } else if (c->acc.n) {
      e->list = malloc(sizeof *e->list * (size_t)c->acc.n);
      if (e->list) memcpy(e->list, c->acc.v, sizeof *e->list * (size_t)c->acc.n);
    }
    e->n_unc = c->unc.n;
    if (c->unc.n) {
      e->unc = malloc(sizeof *e->unc * (size_t)c->unc.n);
      if (e->unc) memcpy(e->unc, c->unc.v, sizeof *e->unc * (size_t)c->unc.n);
    }
  }
  if (!e || (e->n_acc && !e->bits && !e->list) || (e->n_unc && !e->unc)) {
    if (e) free_entry(e);
    atomic_fetch_sub(&c->bytes, need);
    if (c->budget) atomic_fetch_sub(&c->budget->used, need);
    return gram__run_fail(&c->run, GRAM_ENOMEM, "out of memory for the grammar's token cache");
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
  atomic_fetch_add(&c->bytes, (int64_t)((sizeof *ne + sizeof *nk) * (c->mask + 1)));
  if (c->budget) atomic_fetch_add(&c->budget->used, (int64_t)((sizeof *ne + sizeof *nk) * (c->mask + 1)));
  free(c->ent), free(c->keys);
  c->ent = ne, c->keys = nk, c->mask = nm;
  return 0;
}

/* The entry of key k, computed now if new, on the fuel of the caller's run
 * (which gets the reason of a failure). */
static int get_entry(const gram_cache_t *cc, gram_run_t *caller, const ctx_key_t *k, const entry_t **out) {
  gram_cache_t *c = (gram_cache_t *)cc; /* filling is internal mutation under the lock */
  pthread_mutex_lock(&c->mu);
  uint32_t h = key_hash(k) & c->mask;
  while (c->ent[h] && memcmp(&c->keys[h], k, sizeof *k)) h = (h + 1) & c->mask;
  int rc = 0;
  entry_t *e = c->ent[h];
  if (!e) {
    c->run.fuel = caller->fuel;
    rc = compute(c, k, &e);
    caller->fuel = c->run.fuel;
    c->run.fuel = -1;
    if (rc) {
      e = NULL;
      memcpy(caller->why, c->run.why, sizeof caller->why);
    } else if ((uint32_t)(c->n_ent + 1) * 2 > c->mask && grow_table(c)) {
      free_entry(e); /* (its bytes stay counted: memory ran out, the request fails) */
      e = NULL;
      rc = gram__run_fail(caller, GRAM_ENOMEM, "out of memory for the grammar's token cache");
    } else {
      h = key_hash(k) & c->mask; /* (the table may have grown) */
      while (c->ent[h]) h = (h + 1) & c->mask;
      c->ent[h] = e, c->keys[h] = *k;
      c->n_ent++;
    }
  }
  pthread_mutex_unlock(&c->mu);
  *out = e;
  return e ? 0 : rc;
}

const gram_vocab_t *gram_cache_vocab(const gram_cache_t *c) { return c->v; }

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
    if ((rc = get_entry(c, run, &key, &e))) break;
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
