/* grammar/gram.h — the structured-output engine: compilers from GBNF, regular
 * expressions, choice lists and JSON Schema into one grammar form, a parser
 * state per sequence that advances on bytes, and token masks over a
 * vocabulary. Standalone: libc and pthreads only (the JSON Schema entry point,
 * gram_schema.c, takes a parsed cJSON document).
 *
 * The grammar form (gram_t) is a context-free grammar over bytes: rules, each
 * a list of alternatives, each a sequence of elements that are either a byte
 * set (256-bit) or a reference to a rule. Repetition, optional parts, groups
 * and Unicode character classes are lowered into that form when compiling
 * (a class of code points becomes alternatives of UTF-8 byte sequences).
 *
 * The parser (gram_matcher_t) is a pushdown recognizer with a set of stacks
 * (a generalized LL parse, as llama.cpp's grammar engine does): each stack is
 * the chain of return positions, hash-consed into a per-matcher pool so equal
 * stacks are one id and the set of live stacks is deduplicated for free.
 * Calls in tail position push nothing, so right recursion (every repetition)
 * runs in constant stack depth. Left recursion cannot be parsed top-down: the
 * compilers reject it with an error naming the rule. Chosen over Earley
 * because a stack's top position is a stable key for the per-position token
 * cache (XGrammar's adaptive token mask cache idea), which makes masks cheap.
 *
 * Token masks (gram_cache_t): a vocabulary (gram_vocab_t) is a byte trie of
 * the token strings. For each stack top met (the position waiting on a byte
 * and the return position below it) the cache holds, computed once by walking
 * the trie from there with nothing known further below, the
 * tokens accepted whatever the stack below ("context-independent"), and the
 * few tokens that run past the end of the position's rule ("uncertain");
 * everything else is rejected. A mask is the union of the accepted sets of the
 * live stacks' tops plus a trie walk, with the real stacks, over only the
 * uncertain tokens. End-of-generation tokens are allowed exactly when the
 * grammar accepts the bytes so far.
 *
 * Threads: a gram_t and a gram_vocab_t are immutable and may be shared; a
 * gram_cache_t may be shared (it fills lazily under its own lock); a
 * gram_matcher_t belongs to one thread at a time.
 *
 * Hostile input: every compiler and the matcher work within the bounds of a
 * gram_limits_t; exceeding one is an error (GRAM_ELIMIT) naming it, never a
 * hang, a crash or an abort. Nothing recurses on the input's size: walks
 * are iterative or bounded by max_depth. */
#ifndef TRAM_GRAMMAR_GRAM_H
#define TRAM_GRAMMAR_GRAM_H

#include <stddef.h>
#include <stdint.h>

/* ---- errors and bounds ---------------------------------------------------- */

enum {
  GRAM_EINVAL = -1,  /* bad input: syntax, unknown rule, unsupported feature */
  GRAM_ELIMIT = -2,  /* a bound of gram_limits_t was exceeded */
  GRAM_ENOMEM = -3,
  GRAM_EREJECT = -4, /* the matcher: these bytes/token are not allowed here */
};

#define GRAM_MAX_INPUT (1 << 20) /* source text bytes */

/* The bounds a request's grammar works within (the server's grammar_*
 * settings; docs/structured-output.md, "Hostile grammars"). Compiling checks
 * the first group while it builds, before memory is committed; the others
 * travel with the compiled grammar to its matchers and token cache. A bound
 * hit is GRAM_ELIMIT with a message naming the bound and where. A field 0
 * takes its default (gram_limits_default). */
typedef struct gram_limits {
  /* compiling */
  int32_t max_size;    /* expression nodes, lowered elements, and rules (each): the expanded size */
  int32_t max_repeat;  /* the m and n of one {m,n}, and the copies nested repetitions multiply to */
  int32_t max_depth;   /* nesting of groups, schemas, expressions */
  int32_t max_literal; /* bytes of one literal: a const or enum value, a choice, a property name */
  int64_t compile_ns;  /* time one compile may take (0: the default; < 0: no limit) */
  /* parsing */
  int32_t max_stacks;  /* live parser stacks at once; also alternatives one rule may offer */
  int32_t max_closure; /* frames one byte's step may visit */
  int32_t max_frames;  /* stack frames one matcher may hold (memory: 24 bytes each) */
  int64_t mask_fuel;   /* work one token mask may take (trie steps plus closure steps) */
  int64_t cache_bytes; /* the token cache of one grammar */
} gram_limits_t;

/* The defaults: max_size 500,000, max_repeat 10,000, max_depth 128,
 * max_literal 16,384, compile 10 s, max_stacks 4,096, max_closure 200,000,
 * max_frames 1,048,576, mask_fuel 20,000,000, cache_bytes 64 MiB. */
gram_limits_t gram_limits_default(void);
/* l with every field 0 replaced by its default (l NULL: the defaults). */
gram_limits_t gram_limits_or_default(const gram_limits_t *l);

/* An error: a message and, where it has one, the byte offset in the source
 * (pattern, GBNF text) or -1. The JSON Schema compiler puts the JSON pointer of
 * the offending keyword in the message. */
typedef struct gram_err {
  int64_t pos;
  char msg[256];
} gram_err_t;

const char *gram_strerror(int code);

/* ---- compiling ------------------------------------------------------------ */

typedef struct gram gram_t;

/* GBNF as llama.cpp documents it (grammars/README.md): `name ::= ...` rules,
 * the start rule is `root`; "literals", [classes] with ranges, ^ negation and
 * escapes, `.`, ( ), |, *, +, ?, {m}, {m,}, {m,n}, {,n}, # comments. Returns
 * NULL with *err filled on failure. The caller owns the result. */
gram_t *gram_compile_gbnf(const char *src, size_t len, const gram_limits_t *lim, gram_err_t *err);

/* A regular expression (the ECMAScript/Python common subset) matched against
 * the whole output: literals, escapes, classes, \d \w \s \D \W \S, `.`, groups
 * (capturing, (?:), named), |, * + ? {m} {m,} {m,n} (lazy forms too), ^ and $
 * at the ends. Backreferences, lookaround, \b, flags and \p{..} are errors
 * naming the construct. */
gram_t *gram_compile_regex(const char *re, size_t len, const gram_limits_t *lim, gram_err_t *err);

/* Exactly one of n strings (bytes; n >= 1). */
gram_t *gram_compile_choice(const char *const *choices, const size_t *lens, size_t n, const gram_limits_t *lim,
                            gram_err_t *err);

/* JSON output options. */
typedef struct gram_json_opts {
  int flexible_ws;    /* 0: compact ({"a":1,"b":[2,3]}); 1: up to ws_max of [ \t\n\r] where JSON allows */
  int ws_max;         /* bound on each whitespace run when flexible (0 -> 8) */
  int additional_default; /* 0: objects with "properties" and no "additionalProperties" take no other keys
                           * (as vLLM/XGrammar's strict mode); 1: the JSON Schema default (any other keys) */
} gram_json_opts_t;

struct cJSON;
/* A JSON Schema (Draft 2020-12, the keywords docs/structured-output.md lists),
 * given as a parsed cJSON document. A keyword outside the supported set is an
 * error naming it and its JSON pointer. opts may be NULL (defaults). */
gram_t *gram_compile_json_schema(const struct cJSON *schema, const gram_json_opts_t *opts,
                                 const gram_limits_t *lim, gram_err_t *err);
/* Any JSON object (response_format json_object). */
gram_t *gram_compile_json_object(const gram_json_opts_t *opts, const gram_limits_t *lim, gram_err_t *err);

void gram_destroy(gram_t *g);

/* Counts for logs and limits. */
int32_t gram_n_rules(const gram_t *g);
int32_t gram_n_elems(const gram_t *g);

/* ---- vocabulary and token cache ------------------------------------------- */

typedef struct gram_vocab gram_vocab_t;

/* A vocabulary of n tokens: tokens[i] (lens[i] bytes) is what token i decodes
 * to. Tokens of length 0 (control tokens the caller excludes) are never
 * allowed, except the end-of-generation ids eog[0..n_eog), which are allowed
 * exactly where the grammar accepts. The bytes are copied. NULL on failure. */
gram_vocab_t *gram_vocab_create(int32_t n, const char *const *tokens, const size_t *lens,
                                const int32_t *eog, int32_t n_eog, gram_err_t *err);
void gram_vocab_destroy(gram_vocab_t *v);
int32_t gram_vocab_size(const gram_vocab_t *v);
/* Words of a mask: (n + 31) / 32 uint32_t, bit i of word i/32 is token i. */
size_t gram_mask_words(const gram_vocab_t *v);

typedef struct gram_cache gram_cache_t;

/* The token cache of grammar g over vocabulary v (both must outlive it).
 * Empty at first; filled entry by entry (one per stack top met) as matchers
 * need it, up to the grammar's cache_bytes (a mask that needs more fails
 * with GRAM_ELIMIT). NULL on no memory. */
gram_cache_t *gram_cache_create(const gram_t *g, const gram_vocab_t *v);
void gram_cache_destroy(gram_cache_t *c);
/* The vocabulary it was made for. */
const gram_vocab_t *gram_cache_vocab(const gram_cache_t *c);
/* Entries computed so far. */
int32_t gram_cache_entries(const gram_cache_t *c);
/* Bytes the cache holds now (no lock taken). */
size_t gram_cache_bytes(const gram_cache_t *c);

/* ---- the parser state ------------------------------------------------------ */

typedef struct gram_matcher gram_matcher_t;

/* A parser at the start of the grammar. c must outlive it. NULL when memory
 * runs out or the start already exceeds a bound (more than max_stacks
 * stacks); *rc (may be NULL) gets GRAM_ENOMEM or GRAM_ELIMIT. */
gram_matcher_t *gram_matcher_create(const gram_cache_t *c, int *rc);
void gram_matcher_destroy(gram_matcher_t *m);
/* Back to the start. */
void gram_matcher_reset(gram_matcher_t *m);

/* Fills mask (gram_mask_words words) with the tokens allowed next. Returns
 * the number of allowed tokens, or a negative code (the mask is then all
 * zero): GRAM_ELIMIT when the live stacks are more than max_stacks, the
 * mask needs more than mask_fuel work or its token cache more than
 * cache_bytes (gram_matcher_error says which). */
int32_t gram_matcher_fill_mask(gram_matcher_t *m, uint32_t *mask);
/* Advances by one token: 0, or GRAM_EREJECT (state unchanged) when the
 * grammar refuses it, which it never does for a token the last mask
 * allowed; or GRAM_ELIMIT / GRAM_ENOMEM (state unchanged) when the step
 * itself exceeds max_closure or max_frames, or memory runs out
 * (gram_matcher_error says which). An end-of-generation id is accepted only
 * where the grammar accepts, and ends the matcher (gram_matcher_is_ended). */
int gram_matcher_accept_token(gram_matcher_t *m, int32_t id);
/* Advances by raw bytes as one step (rollback undoes it at once): 0 or a
 * negative code (state unchanged). */
int gram_matcher_accept_bytes(gram_matcher_t *m, const void *bytes, size_t len);
/* Undoes the last n accepted steps (tokens or byte runs); returns how many
 * were undone. */
int gram_matcher_rollback(gram_matcher_t *m, int n);
/* 1 if the bytes so far are a complete sentence of the grammar. */
int gram_matcher_is_accepting(const gram_matcher_t *m);
/* 1 if nothing but end of generation can follow (accepting, no continuation)
 * or an end-of-generation token was accepted. */
int gram_matcher_is_ended(const gram_matcher_t *m);
/* What the last GRAM_ELIMIT or GRAM_ENOMEM of m was ("" if none): a
 * static string naming the bound. */
const char *gram_matcher_error(const gram_matcher_t *m);
/* A byte that starts a shortest way to a complete sentence, or -1 when the
 * matcher accepts now (or nothing can complete). For finishing an output
 * (tests, forced completion). */
int gram_matcher_shortest_byte(const gram_matcher_t *m);

#endif
