/* api/oai_fields.h — internal: typed, range-checked access to the fields
 * of a request's JSON object, for oai_request.c. Each getter returns 0 when
 * the field is absent or null (leaving *out alone, *given false), 0 with *out
 * set when it is valid, or -EINVAL after writing an error that names the
 * field and says what was expected and what came. */
#ifndef TRAM_OAI_FIELDS_H
#define TRAM_OAI_FIELDS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/arena.h"
#include "api/oai_request.h"
#include "api/oai_responses.h"

typedef struct oai__ctx {
  arena_t *arena;
  const oai_limits_t *lim;
  oai_error_t *err;
  const char *prefix; /* getters name fields "<prefix>.<key>" when set */
  const char *body;   /* the request's JSON text (oai__parse_object sets it), for oai__get_u64 */
  size_t body_len;
} oai__ctx_t;

/* Fills the error (400, invalid_request_error) and returns -EINVAL. param is
 * printed as is; the message is formatted. */
int oai__fail(oai__ctx_t *c, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Memory ran out in the parse (an allocation returned NULL; the parsers
 * run with their arena fallible, base/arena.h): fills the error (503
 * server_error, out_of_memory) and returns -ENOMEM. */
int oai__oom(oai__ctx_t *c);
/* In a parser: returns oai__oom(c) when p is NULL. */
#define OAI_NEED(c, p)                  \
  do {                                  \
    if (!(p)) return oai__oom(c);       \
  } while (0)

/* An entry point's context: limits lim (NULL: *dflt, filled with
 * oai_limits_default()), err cleared, and oai__begin. */
void oai__ctx_init(oai__ctx_t *c, const oai_limits_t *lim, oai_limits_t *dflt, arena_t *arena, oai_error_t *err);

/* The entry points' bracket: oai__begin makes the arena fallible;
 * oai__end(c, r) ends that and returns r, or oai__oom(c) when any
 * allocation of the parse failed (whatever r says). */
void oai__begin(oai__ctx_t *c);
int oai__end(oai__ctx_t *c, int r);

/* "a string", "an array", ... for messages. */
const char *oai__type_name(const cJSON *x);

/* The field, or NULL when it is absent or JSON null. */
const cJSON *oai__get(const cJSON *obj, const char *key);

int oai__get_bool(oai__ctx_t *c, const cJSON *obj, const char *key, bool *out, bool *given);

/* A finite number in [lo, hi]; lo_open/hi_open exclude the bound. */
int oai__get_float(oai__ctx_t *c, const cJSON *obj, const char *key, double lo, double hi,
                   bool lo_open, bool hi_open, float *out, bool *given);

/* An integral number in [lo, hi] (1.0 counts as 1). */
int oai__get_int(oai__ctx_t *c, const cJSON *obj, const char *key, int64_t lo, int64_t hi,
                 int64_t *out, bool *given);

/* A top-level integer field of the body that may need all 64 bits (a
 * seed): any integer in [-2^63, 2^64 - 1], read from the JSON text itself
 * (a double holds only 53 bits), negative ones taken modulo 2^64. */
int oai__get_u64(oai__ctx_t *c, const cJSON *root, const char *key, uint64_t *out, bool *given);

/* A string, copied into the arena. */
int oai__get_string(oai__ctx_t *c, const cJSON *obj, const char *key, const char **out,
                    size_t *len, bool *given);

/* x as a token id (integral, >= 0, < vocab_size when known); param names it. */
int oai__token_id(oai__ctx_t *c, const cJSON *x, const char *param, int32_t *out);

/* A non-empty array of token ids, copied into the arena. */
int oai__token_array(oai__ctx_t *c, const cJSON *arr, const char *param, int32_t **out,
                     int32_t *n);

/* A prompt-like field `key` of root (completions' prompt, embeddings'
 * input): a string, an array of token ids (one item each), or an array of
 * at most `max` strings or token-id arrays, all of one kind; none empty.
 * The items go into the arena as (*items)[*n]. Errors name key, key[i] or
 * key[i][j]. */
int oai__prompts(oai__ctx_t *c, const cJSON *root, const char *key, int max, oai_prompt_t **items,
                 int32_t *n);

/* oai_gen_fields.c: the fields `tram generate` reads too (sampling, seed,
 * max_tokens, n, stop, stop_token_ids, ignore_eos), from one table, into
 * g (absent ones leave g alone); bit i of *samp_given: samp_fields[i] was
 * given. chat: max_tokens starts at 1. */
int oai__read_gen_fields(oai__ctx_t *c, const cJSON *root, bool chat, oai_params_t *g, unsigned *samp_given);

/* vLLM's extension fields and the table of fields tram refuses
 * (oai_extras.c), for parse_gen; g's OpenAI fields are already parsed. */
/* chat_template_kwargs, reasoning_effort, thinking_token_budget (oai_reasoning.c); the first two
 * alone (/tokenize's): *kwargs the object's JSON text, *effort a static string (each NULL: none). */
int oai__parse_reasoning(oai__ctx_t *c, const cJSON *root, oai_chat_req_t *out);
int oai__parse_template_vars(oai__ctx_t *c, const cJSON *root, const char **kwargs, const char **effort);
/* The Responses API's reasoning {"effort"} as out->reasoning_effort; summaries refused. */
int oai__resp_reasoning(oai__ctx_t *c, const cJSON *root, oai_chat_req_t *out);
/* x printed compactly into the arena (NULL when memory ran out). */
const char *oai__json_text(oai__ctx_t *c, const cJSON *x);
int oai__parse_extras(oai__ctx_t *c, const cJSON *root, bool chat, oai_params_t *g);

/* oai_structured.c: the structured-output forms into p->grammar (at most
 * one; shapes only, the server compiles). */
int oai__parse_structured(oai__ctx_t *c, const cJSON *root, oai_params_t *p);
/* The Responses API's text.format ({"type": "text" | "json_object" |
 * "json_schema", "name", "schema", "strict"}) into p->grammar. */
int oai__parse_text_format(oai__ctx_t *c, const cJSON *fmt, oai_params_t *p);

/* oai_tools.c: tools, tool_choice, parallel_tool_calls into out; an
 * assistant message's tool_calls and a tool message's tool_call_id (m is
 * messages[i]). */
int oai__parse_tools(oai__ctx_t *c, const cJSON *root, oai_chat_req_t *out);
int oai__parse_message_tools(oai__ctx_t *c, const cJSON *m, int i, oai_message_t *out);
/* oai_tools.c: obj[key] as a function name, OpenAI's ^[a-zA-Z0-9_-]{1,64}$;
 * param names it in the error. */
int oai__tool_name(oai__ctx_t *c, const cJSON *obj, const char *key, const char *param);
/* oai_tools.c: checks a tools array (tools[i]...): function tools only, each
 * function object (the chat form: tool.function; flat, the Responses form:
 * the tool itself) with a valid name, unique among them, and parameters an
 * object when given. */
int oai__function_tools(oai__ctx_t *c, const cJSON *tools, bool flat);
/* oai_tools.c: tool_choice "required" or named, once everything else is
 * parsed: the JSON Schema that forces a call of tools (the chat form,
 * checked), as out->params.grammar (a 400 when the request has a
 * structured-output form too). */
int oai__tool_grammar(oai__ctx_t *c, const cJSON *tools, oai_chat_req_t *out);

/* oai_responses_tools.c: the Responses request's function tools and
 * tool_choice into out->chat (and its grammar for required/named); an
 * input item of type "function_call" or "function_call_output" as a
 * message; a function_call output item (arguments "" until done). */
int oai__resp_tools(oai__ctx_t *c, const cJSON *root, oai_responses_req_t *out);
int oai__resp_call_item(oai__ctx_t *c, const cJSON *item, const char *type, const char *param, oai_message_t *m);
cJSON *oai__resp_call_json(const oai_tool_call_t *t, bool done);
/* oai_responses_reason.c: the reasoning output item of r. */
cJSON *oai__resp_reasoning_json(const oai_resp_info_t *r, bool done);

/* Parses body into an object; on failure fills the error (invalid_json or a
 * body that is not an object). */
int oai__parse_object(oai__ctx_t *c, const char *body, size_t len, cJSON **root);

#endif
