/* api/oai_chat_val.h — chat template inputs (text/chat_template.h's
 * chat_val_t) built at the server's JSON edge: from a request's parsed
 * messages, or from any cJSON value (tools, extra template variables, the
 * test tools' JSON). text/ never sees a JSON library.
 *
 * Everything is allocated in the caller's arena (one without a cap: these
 * never fail) and borrows strings from the messages or the cJSON tree, which
 * must outlive the values. */
#ifndef TRAM_OAI_CHAT_VAL_H
#define TRAM_OAI_CHAT_VAL_H

#include <stdint.h>

#include "base/arena.h"
#include "api/oai_request.h"
#include "text/chat_template.h"

struct cJSON;

/* The JSON value j as a chat_val_t: null, booleans, strings, arrays and
 * objects as themselves; numbers that are integral with |x| < 2^53 as ints
 * (what Python's json.loads gives), others as floats (cJSON does not keep
 * "1.0" apart from "1"). */
const chat_val_t *oai_chat_val(arena_t *a, const struct cJSON *j);

/* msgs[n] as the template's `messages`: a list of {role, content[, name]
 * [, tool_calls][, tool_call_id]}; tool calls' arguments holding a JSON
 * object become that object. */
const chat_val_t *oai_chat_messages(arena_t *a, const oai_message_t *msgs, int32_t n);

/* The extra template variables {"tools": [...]} for a request's tools
 * (JSON text); NULL for none. */
const chat_val_t *oai_chat_tools(arena_t *a, const char *tools_json);

/* The extra template variables of a chat request: {"tools": [...]} (JSON
 * text, or NULL), the variables of chat_template_kwargs (a JSON object's
 * text, or NULL) and "reasoning_effort" (or NULL); NULL when there are
 * none. */
const chat_val_t *oai_chat_extra(arena_t *a, const char *tools_json, const char *kwargs_json, const char *effort);

/* Rewrites text: writes s[n] transformed to out (at least cap(n) bytes) and
 * returns the length written. */
typedef struct oai_text_map {
  size_t (*cap)(size_t n);
  size_t (*fn)(const void *ctx, const char *s, size_t n, char *out);
  const void *ctx;
} oai_text_map_t;

/* A copy of v (in a) with every string, dict keys included, at any depth,
 * rewritten by m (and NUL-terminated); other values as they are. The
 * server marks the texts a client gave with it (tok_mark_specials). */
const chat_val_t *oai_chat_val_map(arena_t *a, const chat_val_t *v, const oai_text_map_t *m);

/* dict[key] (the first entry under it), or NULL when dict is not a dict or
 * has no such key. */
const chat_val_t *oai_chat_val_get(const chat_val_t *dict, const char *key);

#endif
