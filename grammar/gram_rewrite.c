/* grammar/gram_rewrite.c — what the lowering (gram_lower.c) does to the
 * builder's expressions before it lays them out: alternatives that start
 * with the same byte set merged (a trie of literals: an enum of thousands
 * of values opens one parser stack, not thousands), and which rules and
 * nodes derive the empty string (a fixed point over the rules, for the
 * repetitions of nullable bodies). Iterative throughout. */
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_int.h"

/* ---- which expressions derive the empty string ---------------------------------- */

/* Appends the nodes of the trees under the roots (rule bodies) to order,
 * children before parents. */
/* Appends the nodes of each rule's body tree to order, children before
 * parents, rule by rule: rule r's are order[seg[r] .. seg[r + 1]). */
static int post_order(gx_build_t *b, gram_ivec_t *order, int32_t *seg) {
  gram_ivec_t stk = {0};
  int rc = 0;
  for (int32_t r = 0; r < b->n_rules && !rc; r++) {
    seg[r] = order->n;
    if (b->rules[r].body < 0) continue;
    /* entries: node, then ~node once its children are pushed */
    if ((rc = gram__ivec_reserve(&stk, 1))) break;
    stk.v[stk.n++] = b->rules[r].body;
    while (stk.n && !rc) {
      int32_t x = stk.v[--stk.n];
      if (x < 0) {
        if ((rc = gram__ivec_reserve(order, 1))) break;
        order->v[order->n++] = ~x;
        continue;
      }
      const gx_node_t *n = &b->nodes[x];
      if ((rc = gram__ivec_reserve(&stk, 1 + n->n_kids + 1))) break;
      stk.v[stk.n++] = ~x;
      if (n->kind == GX_SEQ || n->kind == GX_ALT)
        for (int32_t c = n->first; c >= 0; c = b->nodes[c].next) stk.v[stk.n++] = c;
      else if (n->kind == GX_REPEAT)
        stk.v[stk.n++] = n->a;
    }
  }
  seg[b->n_rules] = order->n;
  free(stk.v);
  return rc ? gx_fail(b, -1, GRAM_ENOMEM, "out of memory") : 0;
}

/* Whether node x derives ε, from its children's answers in v (and the
 * rules' for references: not known yet counts as no). */
static uint8_t eval_nullable(const gx_build_t *b, const uint8_t *v, int32_t x) {
  const gx_node_t *n = &b->nodes[x];
  switch (n->kind) {
  case GX_EMPTY: return 1;
  case GX_SET: case GX_NOTHING: return 0;
  case GX_REF: return b->rules[n->a].nullable > 0;
  case GX_REPEAT: return n->min == 0 || v[n->a];
  case GX_SEQ:
    for (int32_t c = n->first; c >= 0; c = b->nodes[c].next)
      if (!v[c]) return 0;
    return 1;
  case GX_ALT:
    for (int32_t c = n->first; c >= 0; c = b->nodes[c].next)
      if (v[c]) return 1;
    return 0;
  }
  return 0;
}

int gram__nullability(gx_build_t *b, uint8_t **nul, int32_t *n_nul) {
  gram_ivec_t order = {0};
  int32_t *seg = malloc(sizeof *seg * ((size_t)b->n_rules + 1));
  if (!seg || post_order(b, &order, seg)) {
    free(seg), free(order.v);
    return b->failed ? -1 : gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
  }
  *n_nul = b->n_nodes;
  uint8_t *v = *nul = calloc((size_t)b->n_nodes + 1, 1);
  if (!v) {
    free(seg), free(order.v);
    return gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
  }
  for (int32_t r = 0; r < b->n_rules; r++) b->rules[r].nullable = 0;
  /* each pass turns at least one rule nullable; a rule's answer is used at
   * once, and the passes alternate direction, so chains settle fast */
  for (int changed = 1, pass = 0; changed && !b->failed; pass++) {
    changed = 0;
    for (int32_t k = 0; k < b->n_rules; k++) {
      const int32_t r = pass & 1 ? k : b->n_rules - 1 - k;
      for (int32_t i = seg[r]; i < seg[r + 1]; i++) v[order.v[i]] = eval_nullable(b, v, order.v[i]);
      if (b->rules[r].body >= 0 && !b->rules[r].nullable && v[b->rules[r].body])
        b->rules[r].nullable = 1, changed = 1;
    }
    gx_tick(b, order.n);
  }
  free(seg), free(order.v);
  return b->failed ? -1 : 0;
}

/* ---- merging alternatives that start alike ---------------------------------------- */

/* Whether node x is a sequence of nothing (the empty string, as written). */
static int is_blank(const gx_build_t *b, int32_t x) {
  return b->nodes[x].kind == GX_EMPTY || (b->nodes[x].kind == GX_SEQ && b->nodes[x].first < 0);
}

/* The byte set node an alternative starts with (through nested sequences,
 * past empty ones), or -1; *parent gets the sequence holding it (-1: x is
 * the set itself). */
static int32_t lead_set(const gx_build_t *b, int32_t x, int32_t *parent) {
  *parent = -1;
  while (b->nodes[x].kind == GX_SEQ) {
    int32_t c = b->nodes[x].first;
    while (c >= 0 && is_blank(b, c)) c = b->nodes[c].next;
    if (c < 0) break;
    *parent = x, x = c;
  }
  return b->nodes[x].kind == GX_SET ? x : -1;
}

typedef struct lead {
  int32_t t, set; /* the alternative's place among x's children and its leading set node */
} lead_t;

static _Thread_local const gx_build_t *cmp_b; /* for cmp_lead: qsort takes no context */

static int cmp_lead(const void *x, const void *y) {
  const lead_t *a = x, *c = y;
  int d = memcmp(&cmp_b->sets[cmp_b->nodes[a->set].a], &cmp_b->sets[cmp_b->nodes[c->set].a], sizeof(gram_set_t));
  return d ? d : (a->t > c->t) - (a->t < c->t);
}

/* Merges the alternatives of ALT node x that start with equal byte sets:
 * each such group becomes one alternative `set R`, R a new rule whose
 * alternatives are the group's rests (merged in turn when R's body comes up
 * in merge_alts). The group takes its first member's place. */
static int merge_alt(gx_build_t *b, int32_t x) {
  const int32_t k = b->nodes[x].n_kids;
  lead_t *ld = malloc(sizeof *ld * (size_t)(k + 1));
  int32_t *kids = malloc(sizeof *kids * (size_t)(k + 1));
  if (!ld || !kids) {
    free(ld), free(kids);
    return gx_fail(b, -1, GRAM_ENOMEM, "out of memory");
  }
  int32_t nl = 0, t = 0;
  for (int32_t c = b->nodes[x].first; c >= 0 && t < k; c = b->nodes[c].next, t++) {
    int32_t par, s = lead_set(b, c, &par);
    kids[t] = c;
    if (s >= 0) ld[nl++] = (lead_t){t, s};
  }
  cmp_b = b;
  qsort(ld, (size_t)nl, sizeof *ld, cmp_lead);
  int merged = 0;
  for (int32_t i = 0; i < nl && !b->failed;) {
    int32_t j = i + 1;
    const gram_set_t *si = &b->sets[b->nodes[ld[i].set].a];
    while (j < nl && !memcmp(si, &b->sets[b->nodes[ld[j].set].a], sizeof *si)) j++;
    if (j - i >= 2) { /* ld[i] is the group's first member (sorted by place within equal sets) */
      merged = 1;
      int32_t r = gx_rule_new(b, "trie"), rest = gx_alt(b);
      const int32_t set = ld[i].set;
      for (int32_t g = i; g < j && !b->failed; g++) {
        int32_t kid = kids[ld[g].t], par, s = lead_set(b, kid, &par);
        int32_t tail = kid;
        if (par < 0) tail = gx_empty(b); /* the alternative was the set alone */
        else { /* detach the set from its sequence (and the empty ones before it) */
          gx_node_t *q = &b->nodes[par];
          int32_t dropped = 1;
          for (int32_t e = q->first; e != s; e = b->nodes[e].next) dropped++;
          q->first = b->nodes[s].next;
          if (q->first < 0) q->last = -1;
          q->n_kids -= dropped;
        }
        b->nodes[s].next = -1;
        if (tail >= 0) b->nodes[tail].next = -1;
        gx_add(b, rest, tail);
        kids[ld[g].t] = -1;
      }
      if (r >= 0 && rest >= 0) b->rules[r].body = rest;
      kids[ld[i].t] = gx_seq2(b, set, gx_ref(b, r));
    }
    i = j;
  }
  if (merged && !b->failed) { /* relink x's children */
    gx_node_t *p = &b->nodes[x];
    p->first = p->last = -1;
    p->n_kids = 0;
    for (t = 0; t < k; t++)
      if (kids[t] >= 0) {
        b->nodes[kids[t]].next = -1;
        gx_add(b, x, kids[t]);
      }
  }
  free(ld), free(kids);
  if (!b->failed && b->nodes[x].n_kids > b->lim.max_stacks)
    return gx_fail(b, -1, GRAM_ELIMIT,
                   "an alternation of %d alternatives that start differently (more than %d; bound: max_stacks)",
                   b->nodes[x].n_kids, b->lim.max_stacks);
  return b->failed ? -1 : 0;
}

int gram__merge_alts(gx_build_t *b) {
  for (int32_t x = 0; x < b->n_nodes && !b->failed; x++)
    if (b->nodes[x].kind == GX_ALT && b->nodes[x].n_kids >= 2 && merge_alt(b, x)) return -1;
  return b->failed ? -1 : 0;
}

