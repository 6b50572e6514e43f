/* grammar/gram_run.c — the parser's core: a pool of hash-consed stack frames
 * and the closure that, from frames that may sit at rule references or at the
 * end of an alternative, finds every frame waiting on a byte set. A step on a
 * byte is "advance the frames whose set holds it, then close". Calls in tail
 * position push no frame, so repetition (right recursion) keeps stacks flat.
 * Every loop is bounded (the grammar's max_closure and max_frames, and when
 * a mask is computed its mask_fuel and max_stacks): an ambiguous grammar
 * fails with GRAM_ELIMIT, never hangs. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_int.h"

int gram__ivec_reserve(gram_ivec_t *a, int32_t extra) {
  if (a->n + extra <= a->cap) return 0;
  int32_t nc = a->cap ? a->cap : 64;
  while (nc < a->n + extra) nc *= 2;
  int32_t *p = realloc(a->v, sizeof *p * (size_t)nc);
  if (!p) return GRAM_ENOMEM;
  a->v = p, a->cap = nc;
  return 0;
}

int gram__resize(void *pp, size_t elem, int32_t n) {
  void **p = pp;
  void *q = realloc(*p, elem * (size_t)n);
  if (!q) return -1;
  *p = q;
  return 0;
}

int gram__run_fail(gram_run_t *r, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->why, sizeof r->why, fmt, ap);
  va_end(ap);
  return r->err = code;
}

static int oom(gram_run_t *r) { return gram__run_fail(r, GRAM_ENOMEM, "out of memory in the grammar's parser"); }

int gram__run_init(gram_run_t *r, const gram_t *g) {
  memset(r, 0, sizeof *r);
  r->g = g;
  r->fuel = -1;
  r->tab_mask = 1023;
  r->tab = malloc(sizeof *r->tab * (r->tab_mask + 1));
  if (!r->tab) return GRAM_ENOMEM;
  memset(r->tab, 0xff, sizeof *r->tab * (r->tab_mask + 1));
  return 0;
}

void gram__run_free(gram_run_t *r) {
  free(r->fr), free(r->tab), free(r->slot), free(r->seen), free(r->work.v), free(r->seeds.v);
  memset(r, 0, sizeof *r);
}

static uint32_t frame_hash(int32_t pos, int32_t below) {
  uint64_t h = ((uint64_t)(uint32_t)pos << 32 | (uint32_t)below) * 0x9E3779B97F4A7C15ull;
  return (uint32_t)(h >> 32);
}

void gram__run_truncate(gram_run_t *r, int32_t n) {
  /* newest first: linear probing stays consistent when removing in reverse
   * order of insertion */
  while (r->n_fr > n) {
    r->n_fr--;
    r->tab[r->slot[r->n_fr]] = -1;
  }
}

static int rehash(gram_run_t *r) {
  uint32_t nm = r->tab_mask * 2 + 1;
  int32_t *t = malloc(sizeof *t * (nm + 1));
  if (!t) return GRAM_ENOMEM;
  memset(t, 0xff, sizeof *t * (nm + 1));
  for (int32_t i = 0; i < r->n_fr; i++) {
    uint32_t h = frame_hash(r->fr[i].pos, r->fr[i].below) & nm;
    while (t[h] >= 0) h = (h + 1) & nm;
    t[h] = i;
    r->slot[i] = (int32_t)h;
  }
  free(r->tab);
  r->tab = t, r->tab_mask = nm;
  return 0;
}

int32_t gram__run_frame(gram_run_t *r, int32_t pos, int32_t below) {
  uint32_t h = frame_hash(pos, below) & r->tab_mask;
  for (int32_t id; (id = r->tab[h]) >= 0; h = (h + 1) & r->tab_mask)
    if (r->fr[id].pos == pos && r->fr[id].below == below) return id;
  if (r->n_fr >= r->g->lim.max_frames) {
    gram__run_fail(r, GRAM_ELIMIT, "the parser needs more than %d stack frames (bound: max_frames)",
                   r->g->lim.max_frames);
    return -1;
  }
  if (r->n_fr == r->cap_fr) {
    int32_t nc = r->cap_fr ? r->cap_fr * 2 : 1024;
    if (gram__resize(&r->fr, sizeof *r->fr, nc) || gram__resize(&r->slot, sizeof *r->slot, nc) ||
        gram__resize(&r->seen, sizeof *r->seen, nc)) {
      oom(r);
      return -1;
    }
    memset(r->seen + r->cap_fr, 0, sizeof *r->seen * (size_t)(nc - r->cap_fr));
    r->cap_fr = nc;
  }
  int32_t id = r->n_fr++;
  r->fr[id] = (gram_frame_t){pos, below};
  r->tab[h] = id;
  r->slot[id] = (int32_t)h;
  r->seen[id] = 0;
  if ((uint32_t)r->n_fr * 2 > r->tab_mask && rehash(r)) {
    oom(r);
    return -1;
  }
  return id;
}

static void next_epoch(gram_run_t *r) {
  if (++r->epoch == 0) {
    memset(r->seen, 0, sizeof *r->seen * (size_t)r->cap_fr);
    r->epoch = 1;
  }
}

static inline int visit(gram_run_t *r, int32_t id) {
  if (id < 0) return r->err ? r->err : oom(r);
  if (r->seen[id] == r->epoch) return 0;
  r->seen[id] = r->epoch;
  if (gram__ivec_reserve(&r->work, 1)) return oom(r);
  r->work.v[r->work.n++] = id;
  return 0;
}

/* The closure in the current epoch (the caller started it). */
static int closure(gram_run_t *r, gram_ivec_t *out) {
  const gram_t *g = r->g;
  int flags = 0;
  int64_t steps = 0;
  int32_t n_out0 = out->n;
  while (r->work.n) {
    if (++steps > g->lim.max_closure)
      return gram__run_fail(r, GRAM_ELIMIT, "one byte's step visits more than %d parser states (bound: max_closure)",
                            g->lim.max_closure);
    if (r->fuel >= 0 && --r->fuel < 0)
      return gram__run_fail(r, GRAM_ELIMIT, "one token mask needs more than %lld steps of work (bound: mask_fuel)",
                            (long long)g->lim.mask_fuel);
    int32_t id = r->work.v[--r->work.n];
    int32_t pos = r->fr[id].pos, below = r->fr[id].below;
    int32_t e = g->elems[pos];
    int rc = 0;
    if (e >= 0) {
      if (r->max_out && out->n - n_out0 >= r->max_out)
        return gram__run_fail(r, GRAM_ELIMIT, "more than %d parser stacks at once (bound: max_stacks)", r->max_out);
      if (gram__ivec_reserve(out, 1)) return oom(r);
      out->v[out->n++] = id;
    } else if (e == GRAM_END) {
      if (below == GRAM_ROOT) flags |= GRAM_HIT_ROOT;
      else if (below == GRAM_LOCAL) flags |= GRAM_HIT_LOCAL;
      else rc = visit(r, below);
    } else {
      int32_t rule = GRAM_REF_ID(e);
      int32_t ret = g->elems[pos + 1] == GRAM_END ? below : gram__run_frame(r, pos + 1, below);
      if (ret == -1 && g->elems[pos + 1] != GRAM_END) return r->err ? r->err : oom(r);
      for (int32_t a = g->rule_alt[rule]; a < g->rule_alt[rule + 1] && !rc; a++)
        rc = visit(r, gram__run_frame(r, g->alt_start[a], ret));
    }
    if (rc) return r->err = rc;
  }
  return flags;
}

int gram__run_closure(gram_run_t *r, const int32_t *seeds, int32_t n, gram_ivec_t *out) {
  if (r->err) return r->err;
  next_epoch(r);
  r->work.n = 0;
  for (int32_t i = 0; i < n; i++) {
    int rc = visit(r, seeds[i]);
    if (rc) return r->err = rc;
  }
  return closure(r, out);
}

int gram__run_step(gram_run_t *r, const int32_t *front, int32_t n, unsigned c, gram_ivec_t *out) {
  if (r->err) return r->err;
  const gram_t *g = r->g;
  next_epoch(r);
  r->work.n = 0;
  for (int32_t i = 0; i < n; i++) {
    const gram_frame_t f = r->fr[front[i]];
    if (!gram__set_has(&g->sets[g->elems[f.pos]], c)) continue;
    int rc = visit(r, gram__run_frame(r, f.pos + 1, f.below));
    if (rc) return r->err = rc;
  }
  return closure(r, out);
}
