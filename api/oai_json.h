/* api/oai_json.h — internal: the JSON helpers oai_response.c writes
 * with, for the other writers of server/ (oai_responses.c). Allocation
 * failure aborts, as in oai_response.h. */
#ifndef TRAM_OAI_JSON_H
#define TRAM_OAI_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "api/oai_response.h"

/* x, or abort when it is NULL (cJSON could not allocate). */
cJSON *oai__must(cJSON *x);
/* s[n] as a JSON string, invalid UTF-8 and NUL made U+FFFD. */
cJSON *oai__text(const char *s, size_t n);
/* root printed compactly (malloc'd) and deleted. */
char *oai__print(cJSON *root);

/* lp[n] as OpenAI's list of {token, logprob, bytes, top_logprobs} (chat's
 * logprobs.content, the Responses API's output_text logprobs). */
cJSON *oai__logprob_list(const oai_token_logprob_t *lp, int32_t n);

#endif
