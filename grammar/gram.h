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
 * Hostile input: every compiler and the matcher work within fixed bounds
 * (GRAM_MAX_*); exceeding one is an error (GRAM_ELIMIT), never a hang. */
#ifndef TRAM_GRAMMAR_GRAM_H
#define TRAM_GRAMMAR_GRAM_H

#include <stddef.h>
#include <stdint.h>

/* ---- errors and bounds ---------------------------------------------------- */

enum {
  GRAM_EINVAL = -1,  /* bad input: syntax, unknown rule, unsupported feature */
  GRAM_ELIMIT = -2,  /* a bound below was exceeded */
  GRAM_ENOMEM = -3,
  GRAM_EREJECT = -4, /* the matcher: these bytes/token are not allowed here */
};

#define GRAM_MAX_INPUT (1 << 20)      /* source text bytes */
#define GRAM_MAX_NODES 400000         /* expression nodes while compiling */
#define GRAM_MAX_ELEMS 1000000        /* elements of the lowered grammar */
#define GRAM_MAX_RULES 100000         /* rules of the lowered grammar */
#define GRAM_MAX_DEPTH 128            /* nesting of groups / schemas */
#define GRAM_MAX_REPEAT 10000         /* the m and n of {m,n} */
#define GRAM_MAX_STACKS 4096          /* live parser stacks at once */
#define GRAM_MAX_CLOSURE_STEPS 200000 /* work for one byte */
#define GRAM_MAX_POOL (8 << 20)       /* stack frames one matcher may hold */

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
gram_t *gram_compile_gbnf(const char *src, size_t len, gram_err_t *err);

/* A regular expression (the ECMAScript/Python common subset) matched against
 * the whole output: literals, escapes, classes, \d \w \s \D \W \S, `.`, groups
 * (capturing, (?:), named), |, * + ? {m} {m,} {m,n} (lazy forms too), ^ and $
 * at the ends. Backreferences, lookaround, \b, flags and \p{..} are errors
 * naming the construct. */
gram_t *gram_compile_regex(const char *re, size_t len, gram_err_t *err);

/* Exactly one of n strings (bytes; n >= 1). */
gram_t *gram_compile_choice(const char *const *choices, const size_t *lens, size_t n, gram_err_t *err);

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
                                 gram_err_t *err);
/* Any JSON object (response_format json_object). */
gram_t *gram_compile_json_object(const gram_json_opts_t *opts, gram_err_t *err);

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
 * need it. NULL on no memory. */
gram_cache_t *gram_cache_create(const gram_t *g, const gram_vocab_t *v);
void gram_cache_destroy(gram_cache_t *c);
/* The vocabulary it was made for. */
const gram_vocab_t *gram_cache_vocab(const gram_cache_t *c);
/* Entries computed so far. */
int32_t gram_cache_entries(const gram_cache_t *c);
/* Bytes the cache holds now. */
size_t gram_cache_bytes(const gram_cache_t *c);

/* ---- the parser state ------------------------------------------------------ */

typedef struct gram_matcher gram_matcher_t;

/* A parser at the start of the grammar. c must outlive it. */
gram_matcher_t *gram_matcher_create(const gram_cache_t *c);
void gram_matcher_destroy(gram_matcher_t *m);
/* Back to the start. */
void gram_matcher_reset(gram_matcher_t *m);

/* Fills mask (gram_mask_words words) with the tokens allowed next. Returns
 * the number of allowed tokens, or a negative code (the mask is then all
 * zero). */
int32_t gram_matcher_fill_mask(gram_matcher_t *m, uint32_t *mask);
/* Advances by one token: 0, GRAM_EREJECT (state unchanged) or a bound's
 * error. An end-of-generation id is accepted only where the grammar accepts,
 * and ends the matcher (gram_matcher_is_ended). */
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
/* A byte that starts a shortest way to a complete sentence, or -1 when the
 * matcher accepts now (or nothing can complete). For finishing an output
 * (tests, forced completion). */
int gram_matcher_shortest_byte(const gram_matcher_t *m);

#endif
