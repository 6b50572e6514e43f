/* grammar/gram_schema_int.h — what the JSON Schema compiler's two files
 * share (gram_schema.c: the walk; gram_schema_scalar.c: numbers and
 * strings): the compile context and a few builder helpers. Not for use
 * outside grammar/gram_schema*.c. */
#ifndef TRAM_GRAM_SCHEMA_INT_H
#define TRAM_GRAM_SCHEMA_INT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "grammar/gram_int.h"

typedef struct sc {
  gx_build_t *b;
  const cJSON *root;
  gram_json_opts_t o;
  char path[512];
  size_t plen;
  const cJSON **ref_node; /* $ref targets compiled so far, and their rules */
  int32_t *ref_rule;
  int n_refs;
  int depth;
  int32_t r_ws, r_char, r_string, r_int, r_number, r_value, r_object, r_array, r_key_rest;
                           /* r_int: made when first needed (the int64 range is ~1,000 nodes); -1: not yet */
  int32_t r_nonascii;      /* one non-ASCII code point (UTF-8), made once when a key trie needs it; 0: not yet */
} sc_t;

/* A literal. */
static inline int32_t gram__sc_lit(sc_t *c, const char *s) { return gx_lit(c->b, s, strlen(s)); }

/* Records an error naming what (a keyword) at the current JSON pointer;
 * returns -1. */
int gram__sc_fail(sc_t *c, const char *fmt, const char *what);
/* Appends /seg to the JSON pointer; returns the old length for _pop. */
size_t gram__sc_path_push(sc_t *c, const char *seg);
void gram__sc_path_pop(sc_t *c, size_t old);
/* A byte set: the characters of chars plus the range lo..hi (none if lo > hi). */
int32_t gram__sc_set_of(sc_t *c, const char *chars, unsigned lo, unsigned hi);
/* An ECMAScript regex as an expression (pattern, format). */
int32_t gram__sc_regex_js(sc_t *c, const char *re);

/* gram_schema_scalar.c: an integer or number schema (with its bounds), a
 * string schema (lengths, pattern, format), and a non-negative count keyword
 * (minItems, maxLength, ...: 0 absent, 1 read into *out, -1 error). */
int32_t gram__sc_number(sc_t *c, const cJSON *s, int integer);
/* Every integer of the int64 range, [-2^63, 2^63 - 1], in decimal: what an
 * integer schema without bounds allows. */
int32_t gram__sc_int64(sc_t *c);
int32_t gram__sc_string(sc_t *c, const cJSON *s);
int gram__sc_count(sc_t *c, const cJSON *s, const char *key, int32_t *out);

#endif
