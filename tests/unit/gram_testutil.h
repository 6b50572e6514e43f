/* tests/unit/gram_testutil.h — shared by the grammar unit tests: a small
 * vocabulary and a "does the grammar take this text" check. */
#ifndef TRAM_TESTS_GRAM_TESTUTIL_H
#define TRAM_TESTS_GRAM_TESTUTIL_H

#include <stdint.h>

#include "grammar/gram.h"

/* ASCII pieces, multi-byte UTF-8, partial UTF-8 bytes, two end-of-generation
 * ids (GRAM_TEST_NV - 3 and - 2) and one excluded empty token (- 1). */
extern const char *const gram_test_vocab_text[];
#define GRAM_TEST_NV 56

/* That vocabulary (the caller destroys it). */
gram_vocab_t *gram_test_vocab(void);
/* g compiled from GBNF src / regex re under lim (NULL: the defaults); a
 * failed compile fails the test with the compiler's message. */
gram_t *gram_test_gbnf(const char *src);
gram_t *gram_test_regex(const char *re, const gram_limits_t *lim);
/* 1: s is a sentence of g; 0: a proper prefix of one; -1: neither. */
int gram_test_judge(const gram_t *g, const char *s);


/* Expected verdicts of gram_test_judge, checked in a row: each case fails the
 * test with its text when the verdict differs. */
typedef struct gram_case {
  const char *text;
  int want;
} gram_case_t;
void gram_test_expect(const gram_t *g, const gram_case_t *cases, int n);
#define GRAM_TEST_EXPECT(g, ...)                                                                         \
  gram_test_expect((g), (const gram_case_t[]){__VA_ARGS__},                                           \
                   (int)(sizeof((const gram_case_t[]){__VA_ARGS__}) / sizeof(gram_case_t)))

#endif
