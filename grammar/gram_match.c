/* grammar/gram_match.c — the per-sequence parser state: the live frames after
 * the bytes accepted so far, a history of them per step (for rollback), and
 * the calls the sampler needs: fill a token mask, accept a token, say whether
 * the output is complete. */
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_int.h"

typedef struct step {
  int32_t off, n;   /* the live frames: fronts.v[off .. off+n) */
  int32_t n_fr;     /* frames in the pool after this step */
  uint8_t accepting, eog;
} step_t;

struct gram_matcher {
  const gram_cache_t *c;
  const gram_t *g;
  gram_run_t run;
  gram_walk_t walk;
  gram_ivec_t fronts; /* every step's frontier, end to end */
  step_t *hist;
  int32_t n_hist, cap_hist;
  gram_ivec_t a, b;   /* scratch frontiers */
};

static const step_t *cur(const gram_matcher_t *m) { return &m->hist[m->n_hist - 1]; }

static int push_step_(gram_matcher_t *m, const int32_t *front, int32_t n, int accepting, int eog) {
  if ((int64_t)m->fronts.n + n > m->g->lim.max_frames)
    return gram__run_fail(&m->run, GRAM_ELIMIT, "the parser's history needs more than %d entries (bound: max_frames)",
                          m->g->lim.max_frames);
  if (m->n_hist == m->cap_hist) {
    int32_t nc = m->cap_hist ? m->cap_hist * 2 : 64;
    step_t *h = realloc(m->hist, sizeof *h * (size_t)nc);
    if (!h) return gram__run_fail(&m->run, GRAM_ENOMEM, "out of memory in the grammar's parser");
    m->hist = h, m->cap_hist = nc;
  }
  if (gram__ivec_reserve(&m->fronts, n)) return gram__run_fail(&m->run, GRAM_ENOMEM, "out of memory in the grammar's parser");
  step_t *s = &m->hist[m->n_hist++];
  s->off = m->fronts.n, s->n = n, s->n_fr = m->run.n_fr;
  s->accepting = (uint8_t)(accepting != 0), s->eog = (uint8_t)(eog != 0);
  if (n) memcpy(m->fronts.v + m->fronts.n, front, sizeof *front * (size_t)n);
  m->fronts.n += n;
  return 0;
}

/* Pushes one history step. A failure (a bound, memory) names itself in the
 * matcher's error and leaves the matcher as it was, with no sticky error: the
 * next step must not fail on this one's account. */
static int push_step(gram_matcher_t *m, const int32_t *front, int32_t n, int accepting, int eog) {
  int rc = push_step_(m, front, n, accepting, eog);
  if (rc) m->run.err = 0;
  return rc;
}

void gram_matcher_reset(gram_matcher_t *m) {
  m->n_hist = 1;
  m->fronts.n = m->hist[0].off + m->hist[0].n;
  gram__run_truncate(&m->run, m->hist[0].n_fr);
  m->run.err = 0;
}

gram_matcher_t *gram_matcher_create(const gram_cache_t *c, int *rc) {
  int code = GRAM_ENOMEM;
  gram_matcher_t *m = calloc(1, sizeof *m);
  if (!m) goto fail;
  m->c = c;
  m->g = gram__cache_grammar(c);
  if (gram__run_init(&m->run, m->g) || gram__ivec_reserve(&m->fronts, 64) || gram__ivec_reserve(&m->a, 64) ||
      gram__ivec_reserve(&m->b, 64))
    goto fail;
  const gram_t *g = m->g;
  int32_t seeds[64], *sp = seeds, n = g->rule_alt[g->root + 1] - g->rule_alt[g->root];
  if (n > 64 && !(sp = malloc(sizeof *sp * (size_t)n))) goto fail;
  for (int32_t i = 0; i < n; i++) sp[i] = gram__run_frame(&m->run, g->alt_start[g->rule_alt[g->root] + i], GRAM_ROOT);
  m->run.max_out = g->lim.max_stacks; /* the start is a frontier a mask is made for at once */
  int f = gram__run_closure(&m->run, sp, n, &m->a);
  m->run.max_out = 0;
  if (sp != seeds) free(sp);
  if (f < 0) code = f;
  if (f < 0 || (code = push_step(m, m->a.v, m->a.n, f & GRAM_HIT_ROOT, 0))) goto fail;
  if (rc) *rc = 0;
  return m;
fail:
  if (rc) *rc = code;
  gram_matcher_destroy(m);
  return NULL;
}

const char *gram_matcher_error(const gram_matcher_t *m) { return m->run.why; }

void gram_matcher_destroy(gram_matcher_t *m) {
  if (!m) return;
  gram__run_free(&m->run);
  gram__walk_free(&m->walk);
  free(m->fronts.v), free(m->hist), free(m->a.v), free(m->b.v);
  free(m);
}

int gram_matcher_is_accepting(const gram_matcher_t *m) { return cur(m)->accepting; }

int gram_matcher_is_ended(const gram_matcher_t *m) {
  const step_t *s = cur(m);
  return s->eog || (s->accepting && s->n == 0);
}

int32_t gram_matcher_fill_mask(gram_matcher_t *m, uint32_t *mask) {
  const step_t *s = cur(m);
  const gram_limits_t *lim = &m->g->lim;
  if (s->eog) {
    memset(mask, 0, gram_mask_words(gram__cache_vocab(m->c)) * sizeof *mask);
    return 0;
  }
  /* The frontier's size is checked here, not in the step that made it: the
   * step of a token a mask allowed must not fail on it (the token cache
   * judged that token from the stack's top, without the real stacks below,
   * whose closure may be far larger). */
  if (s->n > lim->max_stacks) {
    memset(mask, 0, gram_mask_words(gram__cache_vocab(m->c)) * sizeof *mask);
    const int rc = gram__run_fail(&m->run, GRAM_ELIMIT, "more than %d parser stacks at once (%d; bound: max_stacks)",
                                  lim->max_stacks, s->n);
    m->run.err = 0; /* it fails this mask, not the matcher */
    return rc;
  }
  int32_t n_fr = m->run.n_fr;
  m->run.why[0] = 0;
  m->run.fuel = lim->mask_fuel;
  m->run.max_out = lim->max_stacks;
  int32_t rc = gram__cache_fill(m->c, &m->run, &m->walk, m->fronts.v + s->off, s->n, s->accepting, mask);
  m->run.fuel = -1;
  m->run.max_out = 0;
  gram__run_truncate(&m->run, n_fr);
  m->run.err = 0; /* a bound hit while walking fails this mask, not the matcher */
  return rc;
}

/* Steps the current frontier through bytes; on success pushes one history
 * step. On failure the pool is restored. */
static int advance(gram_matcher_t *m, const unsigned char *p, size_t len) {
  const step_t *s = cur(m);
  if (s->eog) return GRAM_EREJECT;
  m->run.why[0] = 0;
  int32_t n_fr = m->run.n_fr;
  m->a.n = 0;
  if (gram__ivec_reserve(&m->a, s->n)) return GRAM_ENOMEM;
  if (s->n) memcpy(m->a.v, m->fronts.v + s->off, sizeof *m->a.v * (size_t)s->n);
  m->a.n = s->n;
  int acc = s->accepting;
  for (size_t i = 0; i < len; i++) {
    m->b.n = 0;
    int f = gram__run_step(&m->run, m->a.v, m->a.n, p[i], &m->b);
    if (f < 0 || (!m->b.n && !(f & GRAM_HIT_ROOT)) || (!m->b.n && i + 1 < len)) {
      gram__run_truncate(&m->run, n_fr);
      int err = f < 0 ? f : GRAM_EREJECT;
      m->run.err = 0;
      return err;
    }
    acc = (f & GRAM_HIT_ROOT) != 0;
    gram_ivec_t t = m->a;
    m->a = m->b, m->b = t;
  }
  int rc = push_step(m, m->a.v, m->a.n, acc, 0);
  if (rc) gram__run_truncate(&m->run, n_fr);
  return rc;
}

int gram_matcher_accept_bytes(gram_matcher_t *m, const void *bytes, size_t len) {
  return advance(m, bytes, len);
}

int gram_matcher_accept_token(gram_matcher_t *m, int32_t id) {
  size_t len;
  int eog;
  const char *b = gram__vocab_token(gram__cache_vocab(m->c), id, &len, &eog);
  if (!b) return GRAM_EREJECT;
  if (eog) {
    const step_t *s = cur(m);
    if (!s->accepting || s->eog) return GRAM_EREJECT;
    return push_step(m, NULL, 0, 1, 1);
  }
  if (!len) return GRAM_EREJECT;
  return advance(m, (const unsigned char *)b, len);
}

int gram_matcher_rollback(gram_matcher_t *m, int n) {
  int k = 0;
  while (k < n && m->n_hist > 1) {
    m->n_hist--;
    k++;
  }
  const step_t *s = cur(m);
  m->fronts.n = s->off + s->n;
  gram__run_truncate(&m->run, s->n_fr);
  return k;
}

int gram_matcher_shortest_byte(const gram_matcher_t *m) {
  const step_t *s = cur(m);
  if (s->accepting || s->eog) return -1;
  const gram_t *g = m->g;
  int64_t best = GRAM_INF_LEN;
  int32_t best_pos = -1;
  for (int32_t i = 0; i < s->n; i++) {
    int32_t id = m->fronts.v[s->off + i];
    int64_t cost = 0;
    int32_t pos = m->run.fr[id].pos;
    for (int32_t f = id; f >= 0 && cost < GRAM_INF_LEN; f = m->run.fr[f].below) cost += g->suffix_min[m->run.fr[f].pos];
    if (cost < best) best = cost, best_pos = pos;
  }
  if (best_pos < 0) return -1;
  const gram_set_t *set = &g->sets[g->elems[best_pos]];
  for (unsigned c = 0x20; c < 0x7F; c++) /* printable first */
    if (gram__set_has(set, c)) return (int)c;
  for (unsigned c = 0; c < 256; c++)
    if (gram__set_has(set, c)) return (int)c;
  return -1;
}
