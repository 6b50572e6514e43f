/* tests/unit/oai_tool_testutil.h — what the tool-call parser's tests
 * (test_oai_tool_parse.c, test_oai_tool_harmony.c) check a parse with. */
#ifndef TRAM_TESTS_OAI_TOOL_TESTUTIL_H
#define TRAM_TESTS_OAI_TOOL_TESTUTIL_H

#include <string.h>

#include "api/oai_tool_parse.h"

/* p's content is want (NULL: none). */
static inline void content_is(const oai_tool_parse_t *p, const char *want) {
  if (!want) {
    assert_null(p->content);
    return;
  }
  assert_non_null(p->content);
  assert_int_equal(p->content_len, strlen(want));
  assert_memory_equal(p->content, want, strlen(want));
}

#endif
