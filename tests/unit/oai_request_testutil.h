/* tests/unit/oai_request_testutil.h — what the test_openai_request*.c
 * binaries share: parse() of a body for one endpoint (completions, chat,
 * tokenize, detokenize) into any_req_t, the case_t of a field table, and
 * the bodies' common pieces P (a prompt), M (messages) and N64 (64
 * characters). Header-only (static inline) so each binary gets its own copy. */
#ifndef TRAM_TEST_OAI_REQUEST_TESTUTIL_H
#define TRAM_TEST_OAI_REQUEST_TESTUTIL_H

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api/oai_request.h"

enum { COMPL, CHAT, TOKENIZE, DETOKENIZE };

/* Parses body for endpoint `ep` under lim (NULL: defaults). */
static inline int parse(int ep, const char *body, const oai_limits_t *lim, arena_t *a, void *out,
                 oai_error_t *err) {
  size_t n = strlen(body);
  switch (ep) {
  case COMPL: return oai_parse_completion(body, n, lim, a, out, err);
  case CHAT: return oai_parse_chat(body, n, lim, a, out, err);
  case TOKENIZE: return oai_parse_tokenize(body, n, lim, a, out, err);
  default: return oai_parse_detokenize(body, n, lim, a, out, err);
  }
}

typedef union {
  oai_completion_req_t c;
  oai_chat_req_t h;
  oai_tokenize_req_t t;
  oai_detokenize_req_t d;
} any_req_t;

typedef struct {
  int ep;
  const char *body;
  const char *param; /* NULL: must parse; else the field the error names ("" = none) */
  const char *code;  /* NULL: any */
} case_t;

#define P "\"prompt\":\"hi\""
#define M "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
#define N64 "a123456789b123456789c123456789d123456789e123456789f123456789_-AZ" /* 64 characters */

#endif
