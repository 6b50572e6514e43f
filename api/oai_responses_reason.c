/* api/oai_responses_reason.c — a thinking model's reasoning in the
 * Responses API, as OpenAI returns it for its open-weight models: a
 * `reasoning` output item before the message ({"type": "reasoning",
 * "summary": [], "content": [{"type": "reasoning_text", "text"}]}) and its
 * stream events (output_item.added, content_part.added,
 * response.reasoning_text.delta ..., response.reasoning_text.done,
 * content_part.done, output_item.done), output_index 0. */
#include <string.h>

#include "api/oai_fields.h"
#include "api/oai_json.h"
#include "api/oai_responses.h"

static cJSON *part_json(const char *text, size_t len) {
  cJSON *p = oai__must(cJSON_CreateObject());
  oai__must(cJSON_AddStringToObject(p, "type", "reasoning_text"));
  cJSON_AddItemToObject(p, "text", oai__text(text ? text : "", text ? len : 0));
  return p;
}

cJSON *oai__resp_reasoning_json(const oai_resp_info_t *r, bool done) {
  cJSON *m = oai__must(cJSON_CreateObject());
  cJSON_AddItemToObject(m, "id", oai__text(r->reasoning_id ? r->reasoning_id : "", r->reasoning_id ? strlen(r->reasoning_id) : 0));
  oai__must(cJSON_AddStringToObject(m, "type", "reasoning"));
  oai__must(cJSON_AddArrayToObject(m, "summary"));
  cJSON *content = oai__must(cJSON_AddArrayToObject(m, "content"));
  if (done) cJSON_AddItemToArray(content, part_json(r->reasoning, r->reasoning_len));
  oai__must(cJSON_AddStringToObject(m, "status", done ? "completed" : "in_progress"));
  return m;
}

char *oai_write_response_reasoning_event(const char *type, int64_t seq, const oai_resp_info_t *r, const char *text,
                                         size_t len) {
  cJSON *e = oai__must(cJSON_CreateObject());
  oai__must(cJSON_AddStringToObject(e, "type", type));
  oai__must(cJSON_AddNumberToObject(e, "sequence_number", (double)seq));
  oai__must(cJSON_AddNumberToObject(e, "output_index", 0));
  const char *kind = type + strlen("response.");
  if (!strncmp(kind, "output_item.", 12)) {
    cJSON_AddItemToObject(e, "item", oai__resp_reasoning_json(r, !strcmp(kind, "output_item.done")));
    return oai__print(e);
  }
  cJSON_AddItemToObject(e, "item_id", oai__text(r->reasoning_id, strlen(r->reasoning_id)));
  oai__must(cJSON_AddNumberToObject(e, "content_index", 0));
  if (!strncmp(kind, "content_part.", 13)) {
    const bool done = !strcmp(kind, "content_part.done");
    cJSON_AddItemToObject(e, "part", part_json(done ? r->reasoning : "", done ? r->reasoning_len : 0));
  } else if (!strcmp(kind, "reasoning_text.delta")) {
    cJSON_AddItemToObject(e, "delta", oai__text(text, len));
  } else { /* reasoning_text.done */
    cJSON_AddItemToObject(e, "text", oai__text(r->reasoning ? r->reasoning : "", r->reasoning ? r->reasoning_len : 0));
  }
  return oai__print(e);
}
