/* grammar/gram_int.h — inside the grammar module: the expression builder the
 * compilers share (gram_build.c), its lowering into the flat grammar
 * (gram_lower.c), the flat grammar's layout, and helpers shared between the
 * compilers (UTF-8 classes, error formatting). Not for use outside grammar/. */
#ifndef TRAM_GRAMMAR_GRAM_INT_H
#define TRAM_GRAMMAR_GRAM_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/utf8.h"
#include "grammar/gram.h"

/* ---- the flat grammar ------------------------------------------------------ */

/* An element: >= 0 a byte set index, GRAM_END the end of an alternative,
 * <= GRAM_REF(0) a rule reference. */
#define GRAM_END (-1)
#define GRAM_REF(r) (-2 - (r))
#define GRAM_REF_ID(e) (-2 - (e))

typedef struct gram_set {
  uint32_t w[8];
} gram_set_t;

static inline bool gram__set_has(const gram_set_t *s, unsigned c) { return (s->w[c >> 5] >> (c & 31)) & 1u; }
static inline void gram__set_add(gram_set_t *s, unsigned c) { s->w[c >> 5] |= 1u << (c & 31); }
void gram__set_range(gram_set_t *s, unsigned lo, unsigned hi);

struct gram {
  int32_t n_rules, n_elems, n_sets, n_alts;
  int32_t root;          /* the start rule */
  int32_t *elems;        /* [n_elems] alternatives laid end to end, each ending in GRAM_END */
  int32_t *alt_start;    /* [n_alts] first element of each alternative */
  int32_t *rule_alt;     /* [n_rules + 1] rule r's alternatives: alt_start[rule_alt[r] .. rule_alt[r+1]) */
  gram_set_t *sets;      /* [n_sets] byte sets (deduplicated) */
  int32_t *suffix_min;   /* [n_elems] fewest bytes from this element to its alternative's end */
  int32_t *rule_min;     /* [n_rules] fewest bytes of a sentence of the rule (INT32_MAX/4: none) */
  int32_t *elem_rule;    /* [n_elems] the rule each element belongs to */
  gram_set_t *follow;    /* [n_rules] bytes that may come right after a sentence of the rule */
  char **rule_name;      /* [n_rules] for messages */
};

#define GRAM_INF_LEN (INT32_MAX / 4)

/* ---- the expression builder ----------------------------------------------- */

typedef enum { GX_EMPTY, GX_SET, GX_SEQ, GX_ALT, GX_REPEAT, GX_REF, GX_NOTHING } gx_kind_t;

typedef struct gx_node {
  uint8_t kind;
  int32_t a;          /* SET: set index; REF: rule id; REPEAT: child node */
  int32_t first, last; /* SEQ/ALT: children (linked by next) */
  int32_t next;       /* next sibling */
  int32_t min, max;   /* REPEAT: counts (max -1: unbounded) */
} gx_node_t;

typedef struct gx_rule {
  char *name;
  int32_t body;       /* expression node, -1 until defined */
  int64_t def_pos;    /* first use (for "undefined rule" messages) */
} gx_rule_t;

typedef struct gx_build {
  gx_node_t *nodes;
  int32_t n_nodes, cap_nodes;
  gram_set_t *sets;
  int32_t n_sets, cap_sets;
  gx_rule_t *rules;
  int32_t n_rules, cap_rules;
  gram_err_t *err;
  int failed;         /* set once an error is recorded; constructors then return -1 */
} gx_build_t;

void gx_init(gx_build_t *b, gram_err_t *err);
void gx_free(gx_build_t *b);
/* Records an error (the first one wins); returns -1 for chaining. */
int gx_fail(gx_build_t *b, int64_t pos, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

int32_t gx_empty(gx_build_t *b);
int32_t gx_nothing(gx_build_t *b);          /* matches no sentence */
int32_t gx_set(gx_build_t *b, const gram_set_t *s);
int32_t gx_byte(gx_build_t *b, unsigned c);
int32_t gx_lit(gx_build_t *b, const char *s, size_t n);
int32_t gx_seq(gx_build_t *b);
int32_t gx_alt(gx_build_t *b);
/* Appends child to a SEQ or ALT; returns parent (or -1). */
int32_t gx_add(gx_build_t *b, int32_t parent, int32_t child);
int32_t gx_seq2(gx_build_t *b, int32_t x, int32_t y);
int32_t gx_seq3(gx_build_t *b, int32_t x, int32_t y, int32_t z);
int32_t gx_alt2(gx_build_t *b, int32_t x, int32_t y);
int32_t gx_repeat(gx_build_t *b, int32_t child, int32_t min, int32_t max);
int32_t gx_opt(gx_build_t *b, int32_t child);
int32_t gx_ref(gx_build_t *b, int32_t rule);
/* The rule of that name, created undefined if new (pos: where it is used). */
int32_t gx_rule_named(gx_build_t *b, const char *name, size_t len, int64_t pos);
/* A fresh rule named prefix-N. */
int32_t gx_rule_new(gx_build_t *b, const char *prefix);
/* Defines rule r as expression body; an error if it is defined already. */
int gx_define(gx_build_t *b, int32_t r, int32_t body, int64_t pos);

/* Code points: an expression matching one UTF-8 encoded code point in the
 * union of ranges [lo[i], hi[i]] (negated: outside all of them). Surrogates
 * never match. */
int32_t gx_codepoints(gx_build_t *b, const uint32_t *lo, const uint32_t *hi, int n, bool negate);
/* Sorts and merges the ranges [lo[i], hi[i]] (complemented over
 * 0..0x10FFFF if negate) into L, H (room for n + 2); returns their count or
 * -1 (no memory). */
int gram__cp_normalize(const uint32_t *lo, const uint32_t *hi, int n, bool negate, uint32_t *L, uint32_t *H);
/* One code point c, UTF-8 encoded, as a literal. */
int32_t gx_codepoint(gx_build_t *b, uint32_t c);

/* Lowers the builder's rules into a grammar starting at rule root; checks
 * that every rule is defined and none is left-recursive. NULL on error. */
gram_t *gx_finish(gx_build_t *b, int32_t root);

/* ---- the regex compiler, for the schema compiler too ------------------------ */

/* Compiles a regex into an expression in b. json_string: the expression
 * produces the body of a JSON string (characters that must be escaped in JSON
 * are produced escaped, control bytes never). anchored: 1 for whole-match
 * semantics; 0 for search semantics (JSON Schema "pattern": anything may
 * precede and follow unless ^ / $ anchor it). Returns the node or -1. */
int32_t gram__regex_expr(gx_build_t *b, const char *re, size_t len, bool json_string, bool anchored);

/* ---- the stack pool and one byte step (gram_run.c) -------------------------- */

/* A growable vector of int32. */
typedef struct gram_ivec {
  int32_t *v;
  int32_t n, cap;
} gram_ivec_t;
int gram__ivec_reserve(gram_ivec_t *a, int32_t extra);
/* Reallocates *p to n elements of elem bytes; on failure *p is kept. 0 or -1. */
int gram__resize(void *p, size_t elem, int32_t n);

/* A stack frame: the position to continue at and the frame below it. The
 * frame below the bottom is GRAM_ROOT (the grammar's end) or, when computing
 * the token cache, GRAM_LOCAL (the unknown rest of the stack). */
#define GRAM_ROOT (-1)
#define GRAM_LOCAL (-2)

typedef struct gram_frame {
  int32_t pos, below;
} gram_frame_t;

/* Frames are hash-consed: one id per (pos, below), so equal stacks are equal
 * ids. Frames are only ever added; truncating to an earlier count removes the
 * newest ones (the undo of a step or a walk). */
typedef struct gram_run {
  const gram_t *g;
  gram_frame_t *fr;
  int32_t n_fr, cap_fr;
  int32_t *tab;        /* open addressing over frame ids, -1 empty */
  uint32_t tab_mask;
  int32_t *slot;       /* [cap_fr] each frame's slot in tab */
  uint32_t *seen;      /* [cap_fr] closure visit stamps */
  uint32_t epoch;
  gram_ivec_t work, seeds;
  int err;             /* sticky: a bound was exceeded (GRAM_ELIMIT) or no memory */
} gram_run_t;

int gram__run_init(gram_run_t *r, const gram_t *g);
void gram__run_free(gram_run_t *r);
void gram__run_truncate(gram_run_t *r, int32_t n_fr);
/* The frame id of (pos, below), made if new; -1 on a bound or no memory. */
int32_t gram__run_frame(gram_run_t *r, int32_t pos, int32_t below);
/* Flags a step reports. */
#define GRAM_HIT_ROOT 1  /* some stack completed the grammar */
#define GRAM_HIT_LOCAL 2 /* some stack completed the local rule (cache mode) */
/* Expands seeds[0..n) (frames whose position may be a rule reference or an
 * end) into the frames whose position is a byte set, appended to out (each
 * once). Returns GRAM_HIT_* flags, or a negative code. */
int gram__run_closure(gram_run_t *r, const int32_t *seeds, int32_t n, gram_ivec_t *out);
/* Consumes byte c from the frames front[0..n) (all at byte sets): appends the
 * next frames to out; returns GRAM_HIT_* flags or a negative code. */
int gram__run_step(gram_run_t *r, const int32_t *front, int32_t n, unsigned c, gram_ivec_t *out);

/* ---- token masks (gram_mask.c) ---------------------------------------------- */

/* Scratch for walking the vocabulary trie. The frontiers met are interned as
 * states and their byte transitions memoized for the walk (a lazily built
 * automaton: inside a JSON string every character leads back to the same
 * state, so most trie edges cost one table lookup instead of a closure). */
typedef struct gram_walk {
  int32_t *st;              /* [cap] per depth: the frontier's state (-1: empty) */
  uint8_t *unc, *endok;     /* [cap] per depth: the local rule ended right here; a token may end here */
  int32_t cap;
  gram_ivec_t sfr, soff;    /* state i's frames: sfr.v[soff.v[i] .. soff.v[i+1]), sorted */
  int32_t *sid;             /* state table: ids by content hash (valid where sstamp == epoch) */
  uint32_t *sstamp, smask;
  uint32_t *tkey, *tstamp, tmask; /* transitions: (state << 8 | byte) -> tnext, tflag */
  int32_t *tnext, n_trans;
  uint8_t *tflag;
  uint32_t epoch;
  gram_ivec_t tmp;
} gram_walk_t;
void gram__walk_free(gram_walk_t *w);

/* The mask for the live frames front[0..n) of run (which uses c's grammar):
 * cached accepted sets plus a walk over the uncertain tokens; EOG ids when
 * accepting. Frames the walk makes are removed again. Returns the count of
 * allowed tokens or a negative code. */
int32_t gram__cache_fill(const gram_cache_t *c, gram_run_t *run, gram_walk_t *w, const int32_t *front,
                         int32_t n, int accepting, uint32_t *mask);
const gram_vocab_t *gram__cache_vocab(const gram_cache_t *c);
const gram_t *gram__cache_grammar(const gram_cache_t *c);
/* The bytes of token id (NULL, 0 for an id out of range); 1 if it ends
 * generation. */
const char *gram__vocab_token(const gram_vocab_t *v, int32_t id, size_t *len, int *is_eog);

#endif
