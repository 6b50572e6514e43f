/* grammar/gram_lower.c — lowers the builder's expressions into the flat
 * grammar (gram_t): alternatives laid end to end, groups with alternatives
 * and repetitions turned into rules (x* is S ::= x S | ε, x{m,n} is m copies
 * then a chain of n-m optional ones, all right-recursive so the matcher's
 * tail calls keep stacks flat), byte sets deduplicated. Then the checks: every
 * rule defined, no left recursion (the matcher is top-down), and the shortest
 * sentence lengths the matcher's shortest_byte needs.
 *
 * Before lowering, gram_rewrite.c merges alternatives that start alike and
 * finds which expressions derive the empty string. A repetition whose body
 * may be empty then repeats the body's non-empty sentences
 * (GX_RULE_NONEMPTY rules, made from the lowered body): x{m,n} is x'{0,n},
 * x* is x'*, the same language without left recursion and without the ways
 * of placing empty copies.
 * Every walk is iterative (explicit stacks): nothing recurses on the
 * input's size. */
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_int.h"

typedef struct lower {
  gx_build_t *b;
  int32_t *elems;
  int32_t n_elems, cap_elems;
  int32_t *alt_start;
  int32_t n_alts, cap_alts;
  int32_t *memo; /* node -> [2 * node]: the rule whose body it is, [2 * node + 1]: a star rule repeating it; -1 */
  int32_t cap_memo;
  uint8_t *nul;  /* [n_nul] node -> derives the empty string (nodes made before lowering) */
  int32_t n_nul;
  gram_ivec_t stk; /* lower_expr's work list */
  int32_t *rule_alt; /* [cap_rule_alt] rule r's alternatives start at alt_start[rule_alt[r]] */
  int32_t cap_rule_alt;
} lower_t;

static int push(lower_t *L, int32_t e) {
  if (L->n_elems >= L->b->lim.max_size)
    return gx_fail(L->b, -1, GRAM_ELIMIT, "grammar too large: more than %d elements (bound: max_size)",
                   L->b->lim.max_size);
  if (L->n_elems == L->cap_elems) {
    int32_t nc = L->cap_elems ? L->cap_elems * 2 : 1024;
    int32_t *p = realloc(L->elems, sizeof *p * (size_t)nc);
    if (!p) return gx_fail(L->b, -1, GRAM_ENOMEM, "out of memory");
    L->elems = p, L->cap_elems = nc;
  }
  L->elems[L->n_elems++] = e;
  return gx_tick(L->b, 1);
}

/* The memo of node's rules: which 0, the rule whose body node is (a group,
 * an alternation); which 1, the star rule of a REPEAT node. (Two slots: a
 * repetition may be both, x** makes the group of x* and x*'s star.) */
static int32_t *memo_at(lower_t *L, int32_t node, int which) {
  const int32_t i = 2 * node + which;
  if (i >= L->cap_memo) {
    int32_t nc = L->cap_memo ? L->cap_memo : 1024;
    while (nc <= i) nc *= 2;
    int32_t *p = realloc(L->memo, sizeof *p * (size_t)nc);
    if (!p) return NULL;
    for (int32_t k = L->cap_memo; k < nc; k++) p[k] = -1;
    L->memo = p, L->cap_memo = nc;
  }
  return &L->memo[i];
}

/* ---- lowering -------------------------------------------------------------------- */

/* Whether node x derives ε (nodes made while lowering: the rules they refer
 * to say). */
static int node_nullable(const lower_t *L, int32_t x) {
  if (x < L->n_nul) return L->nul[x];
  const gx_node_t *n = &L->b->nodes[x];
  if (n->kind == GX_REF) return L->b->rules[n->a].nullable > 0;
  return n->kind == GX_EMPTY;
}

/* A new rule of the lowering: its nullable said now. */
static int32_t new_rule(lower_t *L, const char *prefix, int nullable) {
  int32_t r = gx_rule_new(L->b, prefix);
  if (r >= 0) L->b->rules[r].nullable = (int8_t)nullable;
  return r;
}

/* The rule whose body is node x (made once per node). */
static int32_t rule_for(lower_t *L, int32_t x, const char *prefix) {
  int32_t *m = memo_at(L, x, 0);
  if (!m) return gx_fail(L->b, -1, GRAM_ENOMEM, "out of memory");
  if (*m >= 0) return *m;
  int32_t r = new_rule(L, prefix, node_nullable(L, x));
  if (r < 0) return -1;
  L->b->rules[r].body = x;
  *memo_at(L, x, 0) = r; /* (allocated above) */
  return r;
}

/* The rule of rule u's non-empty sentences (made once per rule). */
static int32_t nonempty_rule(lower_t *L, int32_t u) {
  gx_build_t *b = L->b;
  if (b->rules[u].nonempty >= 0) return b->rules[u].nonempty;
  int32_t r = new_rule(L, "nonempty", 0);
  if (r < 0) return -1;
  b->rules[r].kind = GX_RULE_NONEMPTY;
  b->rules[r].of = u;
  b->rules[u].nonempty = r;
  return r;
}

/* Element e's non-empty version: itself, unless it refers to a nullable rule. */
static int32_t nonempty_elem(lower_t *L, int32_t e) {
  if (e >= 0 || L->b->rules[GRAM_REF_ID(e)].nullable <= 0) return e;
  int32_t r = nonempty_rule(L, GRAM_REF_ID(e));
  return r < 0 ? 0 : GRAM_REF(r);
}

static int elem_nullable(const lower_t *L, int32_t e) { return e < 0 && L->b->rules[GRAM_REF_ID(e)].nullable > 0; }

/* The element standing for one occurrence of expression x. */
static int32_t elem_of(lower_t *L, int32_t x) {
  const gx_node_t *n = &L->b->nodes[x];
  if (n->kind == GX_SET) return n->a;
  if (n->kind == GX_REF) return GRAM_REF(n->a);
  int32_t r = rule_for(L, x, "group");
  return r < 0 ? 0 : GRAM_REF(r);
}

/* A fresh node for element e (nodes have one sibling link, so never reuse). */
static int32_t node_of(lower_t *L, int32_t e) {
  if (e >= 0) {
    gram_set_t copy = L->b->sets[e]; /* gx_set may move the array */
    return gx_set(L->b, &copy);
  }
  return gx_ref(L->b, GRAM_REF_ID(e));
}

/* REPEAT node x (a copy in n): its elements. */
static int lower_repeat(lower_t *L, int32_t x, gx_node_t n) {
  gx_build_t *b = L->b;
  int32_t e = elem_of(L, n.a);
  if (b->failed) return -1;
  if (elem_nullable(L, e)) { /* x{m,n} with x nullable is x'{0,n} */
    e = nonempty_elem(L, e);
    n.min = 0;
    if (b->failed) return -1;
  }
  for (int32_t i = 0; i < n.min; i++)
    if (push(L, e)) return -1;
  if (n.max < 0) { /* S ::= e S | ε */
    int32_t *m = memo_at(L, x, 1);
    if (!m) return gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
    int32_t s = *m;
    if (s < 0) {
      s = new_rule(L, "star", 1);
      if (s < 0) return -1;
      int32_t body = gx_alt2(b, gx_seq2(b, node_of(L, e), gx_ref(b, s)), gx_empty(b));
      if (body < 0) return -1;
      b->rules[s].body = body;
      *memo_at(L, x, 1) = s; /* (allocated above) */
    }
    return push(L, GRAM_REF(s));
  }
  int32_t prev = -1; /* O_k ::= e O_{k-1} | ε */
  for (int32_t k = 1; k <= n.max - n.min; k++) {
    int32_t o = new_rule(L, "opt", 1);
    int32_t body = prev < 0 ? gx_alt2(b, node_of(L, e), gx_empty(b))
                            : gx_alt2(b, gx_seq2(b, node_of(L, e), gx_ref(b, prev)), gx_empty(b));
    if (o < 0 || body < 0) return -1;
    b->rules[o].body = body;
    prev = o;
  }
  return prev < 0 ? 0 : push(L, GRAM_REF(prev));
}

/* Appends expression x's elements. Iterative: the work list holds node ids,
 * ~id for "this node, then its later siblings" (a sequence's children). */
static int lower_expr(lower_t *L, int32_t x) {
  gx_build_t *b = L->b;
  if (b->failed) return -1;
  L->stk.n = 0;
  if (gram__ivec_reserve(&L->stk, 1)) return gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
  L->stk.v[L->stk.n++] = x;
  while (L->stk.n && !b->failed) {
    int32_t y = L->stk.v[--L->stk.n];
    if (y < 0) { /* a sibling chain */
      y = ~y;
      if (b->nodes[y].next >= 0) L->stk.v[L->stk.n++] = ~b->nodes[y].next; /* (room: just popped) */
    }
    gx_node_t n = b->nodes[y]; /* a copy: the array may move below */
    int rc = 0;
    switch (n.kind) {
    case GX_EMPTY: break;
    case GX_NOTHING: {
      gram_set_t none = {{0}};
      int32_t s = gx_set(b, &none);
      rc = s < 0 ? -1 : push(L, b->nodes[s].a);
      break;
    }
    case GX_SET: rc = push(L, n.a); break;
    case GX_REF: rc = push(L, GRAM_REF(n.a)); break;
    case GX_SEQ:
      if (n.first >= 0) {
        if (gram__ivec_reserve(&L->stk, 1)) return gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
        L->stk.v[L->stk.n++] = ~n.first;
      }
      break;
    case GX_ALT:
      if (n.first < 0) {
        gram_set_t none = {{0}};
        int32_t s = gx_set(b, &none);
        rc = s < 0 ? -1 : push(L, b->nodes[s].a);
      } else if (b->nodes[n.first].next < 0) {
        if (gram__ivec_reserve(&L->stk, 1)) return gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
        L->stk.v[L->stk.n++] = n.first; /* alone: not a chain */
      } else {
        int32_t r = rule_for(L, y, "alt");
        rc = r < 0 ? -1 : push(L, GRAM_REF(r));
      }
      break;
    case GX_REPEAT: rc = lower_repeat(L, y, n); break;
    default: rc = gx_fail(b, -1, GRAM_EINVAL, "internal: bad node");
    }
    if (rc) return -1;
  }
  return b->failed ? -1 : 0;
}

static int open_alt(lower_t *L) {
  if (L->n_alts == L->cap_alts) {
    int32_t nc = L->cap_alts ? L->cap_alts * 2 : 256;
    int32_t *p = realloc(L->alt_start, sizeof *p * (size_t)nc);
    if (!p) return gx_fail(L->b, -1, GRAM_ENOMEM, "out of memory");
    L->alt_start = p, L->cap_alts = nc;
  }
  L->alt_start[L->n_alts++] = L->n_elems;
  return 0;
}

static int add_alt(lower_t *L, int32_t x) {
  if (open_alt(L) || lower_expr(L, x)) return -1;
  return push(L, GRAM_END);
}

/* Suffixes longer than this become a chain of rules in a non-empty rule
 * (S_j ::= X_j S_j+1), so a long alternative of nullable elements costs
 * linear, not quadratic, size. */
#define INLINE_SUFFIX 16

/* The rule of the elements elems[from .. end) of one lowered alternative,
 * as a chain of rules (made from the back). */
static int32_t suffix_rule(lower_t *L, int32_t from, int32_t end) {
  gx_build_t *b = L->b;
  /* ids front to back (a rule's successor has the next id: the analyses,
   * which pass over the rules from the last, settle in one pass), bodies
   * back to front (each one's nullable from its successor's) */
  const int32_t first = b->n_rules;
  for (int32_t j = from; j < end; j++)
    if (new_rule(L, "suffix", 0) < 0) return -1;
  for (int32_t j = end - 1; j >= from && !b->failed; j--) {
    const int32_t e = L->elems[j], r = first + (j - from), next = j + 1 < end ? r + 1 : -1;
    b->rules[r].nullable = (int8_t)(elem_nullable(L, e) && (next < 0 || b->rules[next].nullable > 0));
    int32_t body = next < 0 ? node_of(L, e) : gx_seq2(b, node_of(L, e), gx_ref(b, next));
    if (body < 0) return -1;
    b->rules[r].body = body;
  }
  return b->failed ? -1 : first;
}

/* Rule r, GX_RULE_NONEMPTY of rule u (lowered already: u < r): for each
 * alternative X1..Xk of u and each i whose X1..Xi-1 may all be empty, the
 * alternative Xi' Xi+1..Xk (Xi' the non-empty version of Xi). */
static int lower_nonempty(lower_t *L, int32_t u) {
  for (int32_t a = L->rule_alt[u]; a < L->rule_alt[u + 1]; a++) {
    const int32_t st = L->alt_start[a];
    int32_t end = st, lead = 0; /* lead: the elements that may be empty before the first that may not */
    while (L->elems[end] != GRAM_END) end++;
    while (st + lead < end && elem_nullable(L, L->elems[st + lead])) lead++;
    for (int32_t i = st; i < end; i++) {
      const int32_t x = L->elems[i];
      const int32_t xe = nonempty_elem(L, x);
      if (L->b->failed || open_alt(L) || push(L, xe)) return -1;
      if (lead > 0 && end - (i + 1) > INLINE_SUFFIX) { /* suffixes shared by several alternatives */
        int32_t r = suffix_rule(L, i + 1, end);
        if (r < 0 || push(L, GRAM_REF(r))) return -1;
      } else {
        for (int32_t j = i + 1; j < end; j++)
          if (push(L, L->elems[j])) return -1; /* (index reads: push may move elems) */
      }
      if (push(L, GRAM_END)) return -1;
      if (!elem_nullable(L, x)) break; /* later elements can lead only after x was empty */
    }
  }
  return L->b->failed ? -1 : 0;
}

void gram_destroy(gram_t *g) {
  if (!g) return;
  if (g->rule_name)
    for (int32_t i = 0; i < g->n_rules; i++) free(g->rule_name[i]);
  free(g->rule_name);
  free(g->elems), free(g->alt_start), free(g->rule_alt), free(g->sets);
  free(g->suffix_min), free(g->rule_min), free(g->elem_rule), free(g->follow);
  free(g);
}

int32_t gram_n_rules(const gram_t *g) { return g->n_rules; }
int32_t gram_n_elems(const gram_t *g) { return g->n_elems; }

static uint64_t set_hash(const gram_set_t *s) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < 8; i++) h = (h ^ s->w[i]) * 1099511628211ull;
  return h ^ (h >> 29);
}

/* Deduplicates the byte sets the elements use; rewrites the elements. */
static int dedup_sets(lower_t *L, gram_t *g) {
  int32_t n = L->b->n_sets;
  int32_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  int32_t *tab = malloc(sizeof *tab * (size_t)cap), *map = malloc(sizeof *map * (size_t)(n + 1));
  g->sets = malloc(sizeof *g->sets * (size_t)(n + 1));
  if (!tab || !map || !g->sets) {
    free(tab), free(map);
    return gx_fail(L->b, -1, GRAM_ENOMEM, "out of memory");
  }
  for (int32_t i = 0; i < cap; i++) tab[i] = -1;
  for (int32_t i = 0; i < n; i++) {
    const gram_set_t *s = &L->b->sets[i];
    uint32_t h = (uint32_t)set_hash(s) & (uint32_t)(cap - 1);
    while (tab[h] >= 0 && memcmp(&g->sets[tab[h]], s, sizeof *s)) h = (h + 1) & (uint32_t)(cap - 1);
    if (tab[h] < 0) {
      g->sets[g->n_sets] = *s;
      tab[h] = g->n_sets++;
    }
    map[i] = tab[h];
  }
  for (int32_t i = 0; i < g->n_elems; i++)
    if (g->elems[i] >= 0) g->elems[i] = map[g->elems[i]];
  free(tab), free(map);
  return 0;
}

static int32_t sat_add(int32_t a, int32_t b) {
  int64_t s = (int64_t)a + b;
  return s >= GRAM_INF_LEN ? GRAM_INF_LEN : (int32_t)s;
}

/* Shortest sentence length of each rule (GRAM_INF_LEN: none), then of each
 * alternative's suffix. Passes over the rules until nothing changes, with a
 * work bound. */
static int set_empty(const gram_set_t *s) {
  for (int i = 0; i < 8; i++)
    if (s->w[i]) return 0;
  return 1;
}

/* The fewest bytes element e takes (an empty byte set: none can). */
static int32_t elem_min(const gram_t *g, int32_t e) {
  if (e >= 0) return set_empty(&g->sets[e]) ? GRAM_INF_LEN : 1;
  return g->rule_min[GRAM_REF_ID(e)];
}

static int shortest(lower_t *L, gram_t *g) {
  g->rule_min = malloc(sizeof *g->rule_min * (size_t)g->n_rules);
  g->suffix_min = malloc(sizeof *g->suffix_min * (size_t)g->n_elems);
  if (!g->rule_min || !g->suffix_min) return gx_fail(L->b, -1, GRAM_ENOMEM, "out of memory");
  for (int32_t r = 0; r < g->n_rules; r++) g->rule_min[r] = GRAM_INF_LEN;
  int64_t work = 0;
  /* passes alternate in direction, so a chain of rules settles in one pass
   * whichever way its ids run (a schema's property chain, a key trie) */
  for (int changed = 1, pass = 0; changed; pass++) {
    changed = 0;
    for (int32_t i = 0; i < g->n_rules; i++) {
      const int32_t r = pass & 1 ? i : g->n_rules - 1 - i;
      int32_t best = g->rule_min[r];
      for (int32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++) {
        int32_t len = 0;
        for (int32_t p = g->alt_start[a]; g->elems[p] != GRAM_END; p++, work++) {
          len = sat_add(len, elem_min(g, g->elems[p]));
        }
        if (len < best) best = len;
      }
      if (best < g->rule_min[r]) g->rule_min[r] = best, changed = 1;
    }
    if (gx_tick(L->b, g->n_elems)) return -1;
    if (work > 50 * 1000 * 1000)
      return gx_fail(L->b, -1, GRAM_ELIMIT, "grammar too complex to analyse (bound: 50,000,000 steps of analysis)");
  }
  for (int32_t a = 0; a < g->n_alts; a++) {
    int32_t p = g->alt_start[a], end = p;
    while (g->elems[end] != GRAM_END) end++;
    g->suffix_min[end] = 0;
    for (int32_t q = end - 1; q >= p; q--) {
      g->suffix_min[q] = sat_add(g->suffix_min[q + 1], elem_min(g, g->elems[q]));
    }
  }
  return 0;
}

/* Drops the alternatives that have no sentence (an element that matches
 * nothing: an empty byte set, a rule without sentences), so no parser stack
 * ever enters a dead end: a token a mask allows always leads somewhere a
 * sentence can still be completed. Their elements stay, unreferenced. */
static void prune(gram_t *g) {
  int32_t k = 0;
  for (int32_t r = 0; r < g->n_rules; r++) {
    const int32_t a0 = g->rule_alt[r], a1 = g->rule_alt[r + 1];
    g->rule_alt[r] = k;
    for (int32_t a = a0; a < a1; a++)
      if (g->suffix_min[g->alt_start[a]] < GRAM_INF_LEN) g->alt_start[k++] = g->alt_start[a];
  }
  g->rule_alt[g->n_rules] = g->n_alts = k;
}

static int set_or(gram_set_t *d, const gram_set_t *x) {
  int ch = 0;
  for (int i = 0; i < 8; i++) {
    uint32_t w = d->w[i] | x->w[i];
    ch |= w != d->w[i];
    d->w[i] = w;
  }
  return ch;
}

/* FIRST (bytes a rule's sentences start with) and FOLLOW (bytes that may come
 * right after a rule) by passes to a fixed point, and each element's rule.
 * The token cache uses FOLLOW to tell which tokens running past a rule's end
 * may still fit. If the passes do not settle within a work bound, FOLLOW is
 * every byte (always safe: only less precise). */
static int first_follow(lower_t *L, gram_t *g) {
  int32_t n = g->n_rules;
  gram_set_t *first = calloc((size_t)n, sizeof *first);
  g->follow = calloc((size_t)n, sizeof *g->follow);
  g->elem_rule = malloc(sizeof *g->elem_rule * (size_t)g->n_elems);
  if (!first || !g->follow || !g->elem_rule) {
    free(first);
    return gx_fail(L->b, -1, GRAM_ENOMEM, "out of memory");
  }
  for (int32_t r = 0; r < n; r++)
    for (int32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++)
      for (int32_t p = g->alt_start[a];; p++) {
        g->elem_rule[p] = r;
        if (g->elems[p] == GRAM_END) break;
      }
  int64_t work = 0, limit = 20 * 1000 * 1000;
  for (int changed = 1, pass = 0; changed && work < limit; pass++) {
    changed = 0;
    if (gx_tick(L->b, g->n_elems)) {
      free(first);
      return -1;
    }
    for (int32_t i = 0; i < n; i++)
      for (int32_t r = pass & 1 ? i : n - 1 - i, a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++)
        for (int32_t p = g->alt_start[a]; g->elems[p] != GRAM_END; p++, work++) {
          int32_t e = g->elems[p];
          if (e >= 0) {
            changed |= set_or(&first[r], &g->sets[e]);
            break;
          }
          changed |= set_or(&first[r], &first[GRAM_REF_ID(e)]);
          if (g->rule_min[GRAM_REF_ID(e)] != 0) break;
        }
  }
  for (int changed = 1, pass = 0; changed && work < limit; pass++) {
    changed = 0;
    if (gx_tick(L->b, g->n_elems)) {
      free(first);
      return -1;
    }
    for (int32_t i = 0; i < g->n_alts; i++) { /* (alternating, as above) */
      const int32_t a = pass & 1 ? i : g->n_alts - 1 - i;
      int32_t st = g->alt_start[a], end = st;
      while (g->elems[end] != GRAM_END) end++;
      gram_set_t acc = g->follow[g->elem_rule[st]];
      for (int32_t q = end - 1; q >= st; q--, work++) {
        int32_t e = g->elems[q];
        if (e >= 0) {
          acc = g->sets[e];
          continue;
        }
        int32_t u = GRAM_REF_ID(e);
        changed |= set_or(&g->follow[u], &acc);
        if (g->rule_min[u] != 0) acc = first[u];
        else set_or(&acc, &first[u]);
      }
    }
  }
  if (work >= limit)
    for (int32_t r = 0; r < n; r++) memset(&g->follow[r], 0xff, sizeof g->follow[r]);
  free(first);
  return 0;
}

/* Left recursion: a rule reachable from itself through leading elements that
 * can be empty. The "leading reference" edges in CSR form, then an iterative
 * depth-first search for a cycle. */
static int left_recursion(lower_t *L, gram_t *g) {
  int32_t n = g->n_rules;
  int32_t *off = calloc((size_t)n + 1, sizeof *off), *to = NULL, *stk = NULL;
  uint8_t *color = calloc((size_t)n, 1);
  int rc = 0;
  if (!off || !color) goto oom;
  for (int pass = 0; pass < 2; pass++) {
    int32_t k = 0;
    for (int32_t r = 0; r < n; r++) {
      if (pass) off[r] = k;
      for (int32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++)
        for (int32_t p = g->alt_start[a]; g->elems[p] <= GRAM_REF(0); p++) {
          int32_t s = GRAM_REF_ID(g->elems[p]);
          if (pass) to[k] = s;
          k++;
          if (g->rule_min[s] != 0) break;
        }
    }
    if (pass) off[n] = k;
    else if (!(to = malloc(sizeof *to * (size_t)(k + 1)))) goto oom;
  }
  if (!(stk = malloc(sizeof *stk * (size_t)n * 2))) goto oom;
  for (int32_t s = 0; s < n && !rc; s++) {
    if (color[s]) continue;
    int32_t sp = 0;
    stk[sp++] = s, stk[sp++] = off[s];
    color[s] = 1;
    while (sp && !rc) {
      int32_t r = stk[sp - 2];
      if (stk[sp - 1] == off[r + 1]) {
        color[r] = 2;
        sp -= 2;
        continue;
      }
      int32_t t = to[stk[sp - 1]++];
      if (color[t] == 1)
        rc = gx_fail(L->b, -1, GRAM_EINVAL, "left recursion in rule '%s' (rewrite it right-recursive)",
                     g->rule_name[t]);
      else if (!color[t]) {
        color[t] = 1;
        stk[sp++] = t, stk[sp++] = off[t];
      }
    }
  }
  free(off), free(to), free(stk), free(color);
  return rc;
oom:
  free(off), free(to), free(stk), free(color);
  return gx_fail(L->b, -1, GRAM_ENOMEM, "out of memory");
}

gram_t *gx_finish(gx_build_t *b, int32_t root) {
  if (b->failed || root < 0) return NULL;
  lower_t L = {.b = b};
  gram_t *g = calloc(1, sizeof *g);
  if (!g) {
    gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
    return NULL;
  }
  for (int32_t r = 0; r < b->n_rules; r++)
    if (b->rules[r].body < 0) {
      gx_fail(b, b->rules[r].def_pos, GRAM_EINVAL, "undefined rule '%s'", b->rules[r].name);
      break;
    }
  if (!b->failed) gram__merge_alts(b);
  if (!b->failed) gram__nullability(b, &L.nul, &L.n_nul);
  for (int32_t r = 0; r < b->n_rules && !b->failed; r++) {
    if (r + 2 > L.cap_rule_alt) {
      int32_t nc = L.cap_rule_alt ? L.cap_rule_alt * 2 : 256;
      while (nc < r + 2) nc *= 2;
      if (gram__resize(&L.rule_alt, sizeof *L.rule_alt, nc)) {
        gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
        break;
      }
      L.cap_rule_alt = nc;
    }
    L.rule_alt[r] = L.n_alts; /* (and where rule r - 1's alternatives end) */
    if (b->rules[r].kind == GX_RULE_NONEMPTY) { /* u < r: u's alternatives are lowered, their end known */
      lower_nonempty(&L, b->rules[r].of);
      continue;
    }
    const gx_node_t *body = &b->nodes[b->rules[r].body];
    if (body->kind == GX_ALT && body->first >= 0) {
      for (int32_t c = body->first; c >= 0 && !b->failed; c = b->nodes[c].next) add_alt(&L, c);
    } else {
      add_alt(&L, b->rules[r].body);
    }
  }
  g->elems = L.elems, g->n_elems = L.n_elems;
  g->alt_start = L.alt_start, g->n_alts = L.n_alts;
  g->rule_alt = L.rule_alt;
  g->n_rules = b->failed ? 0 : b->n_rules;
  g->lim = b->lim;
  free(L.memo), free(L.nul), free(L.stk.v);
  if (b->failed) goto fail;
  g->rule_alt[g->n_rules] = g->n_alts;
  g->root = root;
  g->rule_name = calloc((size_t)g->n_rules, sizeof *g->rule_name);
  if (!g->rule_name) {
    gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
    goto fail;
  }
  for (int32_t r = 0; r < g->n_rules; r++) {
    g->rule_name[r] = b->rules[r].name; /* moved */
    b->rules[r].name = NULL;
  }
  if (dedup_sets(&L, g) || shortest(&L, g)) goto fail;
  prune(g);
  if (left_recursion(&L, g) || first_follow(&L, g)) goto fail;
  if (g->rule_min[root] >= GRAM_INF_LEN) {
    gx_fail(b, -1, GRAM_EINVAL, "the grammar has no sentence, or its shortest sentence is over %d bytes (rule %s)",
            GRAM_INF_LEN - 1, g->rule_name[root]);
    goto fail;
  }
  return g;
fail:
  gram_destroy(g);
  return NULL;
}
