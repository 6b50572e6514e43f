/* base/utf8.h — UTF-8 well-formedness, decoding and encoding, written once
 * for every room (JSON checks, the log's JSON lines, stop strings, the
 * tokenizer, the Jinja interpreter, the grammar compilers).
 *
 * Well-formed sequences (Unicode, Table 3-7; RFC 3629: no overlong forms,
 * no surrogates, nothing past U+10FFFF):
 *   00..7F
 *   C2..DF 80..BF
 *   E0 A0..BF 80..BF | E1..EC 80..BF 80..BF | ED 80..9F 80..BF | EE..EF 80..BF 80..BF
 *   F0 90..BF 80..BF 80..BF | F1..F3 80..BF 80..BF 80..BF | F4 80..8F 80..BF 80..BF
 * What to do with ill-formed bytes (refuse them, or replace them by U+FFFD
 * one byte or one maximal subpart at a time) is each caller's policy. */
#ifndef TRAM_BASE_UTF8_H
#define TRAM_BASE_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The length (1..4) of the well-formed character at s[0..n), n >= 1; 0 when
 * s[0] starts none or a later byte breaks it; -k when s[0..n) (k = n bytes)
 * is a well-formed character's beginning cut off by the end. */
int utf8_char(const void *s, size_t n);

/* Whether s[0..n) is well-formed UTF-8 (a cut-off last character is not). */
bool utf8_valid(const void *s, size_t n);

/* The character at s[0..n): its length (1..4) with its code point in *cp,
 * or 0 when no well-formed character starts there (n == 0 included; *cp
 * untouched). */
int utf8_decode(const void *s, size_t n, uint32_t *cp);

/* Writes code point cp (<= 0x10FFFF) as UTF-8 into out; returns its length
 * (1..4). Surrogates are written as they come (CESU-style); callers that
 * must not produce them check first. */
int utf8_encode(uint32_t cp, char out[4]);

#endif
