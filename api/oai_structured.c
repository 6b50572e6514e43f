/* api/oai_structured.c — the structured-output forms of a request, read
 * into one oai_grammar_t (the kind and its source text): OpenAI's
 * response_format, vLLM's structured_outputs and older guided_* fields, and
 * llama.cpp's grammar and json_schema; and the Responses API's
 * text.format. At most one form per request: two
 * give a 400 naming both. Only shapes are checked here; compiling (and the
 * 400 for a bad schema, pattern or grammar, with its position) is the
 * server's, on a worker thread (srv_grammar.c). docs/structured-output.md
 * lists the forms. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/oai_fields.h"

/* The form found so far, for the "two forms" error. */
typedef struct found {
  oai_grammar_t *out;
  const char *field; /* the first form's field, or NULL */
} found_t;

static int take(oai__ctx_t *c, found_t *f, const char *field, oai_grammar_kind_t kind, const cJSON *src) {
  if (f->field)
    return oai__fail(c, "invalid_value", field, "%s and %s both ask for structured output: give at most one",
                     f->field, field);
  f->field = field;
  oai_grammar_t *g = f->out;
  g->kind = kind;
  g->field = field;
  if (!src) {
    g->src = "";
    g->src_len = 0;
  } else if (cJSON_IsString(src)) {
    g->src_len = strlen(src->valuestring);
    OAI_NEED(c, g->src = arena_strndup(c->arena, src->valuestring, g->src_len));
  } else { /* a schema or a choice list: its JSON text, compact (also the cache key) */
    char *txt = cJSON_PrintUnformatted(src);
    if (!txt) return oai__fail(c, "invalid_value", field, "%s: out of memory", field);
    g->src_len = strlen(txt);
    g->src = arena_strndup(c->arena, txt, g->src_len);
    cJSON_free(txt);
    OAI_NEED(c, g->src);
  }
  return 0;
}

/* A JSON Schema given as an object, or (vLLM) as a string holding one. */
static int schema_value(oai__ctx_t *c, const char *field, const cJSON *x, const cJSON **out, cJSON **parsed) {
  *parsed = NULL;
  if (cJSON_IsString(x)) {
    *parsed = cJSON_Parse(x->valuestring);
    if (!*parsed || !(cJSON_IsObject(*parsed) || cJSON_IsBool(*parsed)))
      return oai__fail(c, "invalid_value", field, "%s: a string given for a schema must hold a JSON object", field);
    *out = *parsed;
    return 0;
  }
  if (!cJSON_IsObject(x) && !cJSON_IsBool(x))
    return oai__fail(c, "invalid_type", field, "%s must be a JSON Schema (an object), got %s", field,
                     oai__type_name(x));
  *out = x;
  return 0;
}

static int take_schema(oai__ctx_t *c, found_t *f, const char *field, const cJSON *x) {
  const cJSON *schema = NULL;
  cJSON *parsed = NULL;
  if (schema_value(c, field, x, &schema, &parsed)) return -EINVAL;
  const int rc = take(c, f, field, OAI_GRAMMAR_JSON_SCHEMA, schema);
  cJSON_Delete(parsed);
  return rc;
}

static int take_string(oai__ctx_t *c, found_t *f, const char *field, oai_grammar_kind_t kind, const cJSON *x) {
  if (!cJSON_IsString(x))
    return oai__fail(c, "invalid_type", field, "%s must be a string, got %s", field, oai__type_name(x));
  if (!x->valuestring[0]) return oai__fail(c, "invalid_value", field, "%s must not be empty", field);
  return take(c, f, field, kind, x);
}

static int take_choice(oai__ctx_t *c, found_t *f, const char *field, const cJSON *x) {
  if (!cJSON_IsArray(x) || cJSON_GetArraySize(x) == 0)
    return oai__fail(c, "invalid_value", field, "%s must be a non-empty array of strings", field);
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, x) {
    if (!cJSON_IsString(e))
      return oai__fail(c, "invalid_type", field, "%s[%d] must be a string, got %s", field, i, oai__type_name(e));
    i++;
  }
  return take(c, f, field, OAI_GRAMMAR_CHOICE, x);
}

/* OpenAI's response_format (llama.cpp also reads a "schema" in json_object). */
static int parse_response_format(oai__ctx_t *c, const cJSON *rf, found_t *f) {
  const cJSON *t = cJSON_IsObject(rf) ? oai__get(rf, "type") : NULL;
  if (!t || !cJSON_IsString(t))
    return oai__fail(c, "invalid_value", "response_format",
                     "response_format must be an object with a type: \"text\", \"json_object\" or \"json_schema\"");
  if (!strcmp(t->valuestring, "text")) return 0;
  if (!strcmp(t->valuestring, "json_object")) {
    const cJSON *s = oai__get(rf, "schema");
    return s ? take_schema(c, f, "response_format.schema", s)
             : take(c, f, "response_format", OAI_GRAMMAR_JSON_OBJECT, NULL);
  }
  if (strcmp(t->valuestring, "json_schema") != 0)
    return oai__fail(c, "invalid_value", "response_format.type",
                     "response_format.type must be \"text\", \"json_object\" or \"json_schema\", got \"%s\"",
                     t->valuestring);
  const cJSON *js = oai__get(rf, "json_schema");
  if (!js || !cJSON_IsObject(js))
    return oai__fail(c, "missing_required_parameter", "response_format.json_schema",
                     "response_format.json_schema is required (an object with name and schema)");
  const cJSON *name = oai__get(js, "name");
  if (name && !cJSON_IsString(name))
    return oai__fail(c, "invalid_type", "response_format.json_schema.name", "response_format.json_schema.name "
                     "must be a string, got %s", oai__type_name(name));
  const cJSON *strict = oai__get(js, "strict");
  if (strict && !cJSON_IsBool(strict))
    return oai__fail(c, "invalid_type", "response_format.json_schema.strict", "response_format.json_schema.strict "
                     "must be a boolean, got %s", oai__type_name(strict));
  const cJSON *s = oai__get(js, "schema");
  if (!s)
    return oai__fail(c, "missing_required_parameter", "response_format.json_schema.schema",
                     "response_format.json_schema.schema is required");
  return take_schema(c, f, "response_format.json_schema.schema", s);
}

/* vLLM's structured_outputs: one form and the options tram honours. */
static int parse_structured_outputs(oai__ctx_t *c, const cJSON *so, found_t *f, oai_grammar_t *g) {
  if (!cJSON_IsObject(so))
    return oai__fail(c, "invalid_type", "structured_outputs", "structured_outputs must be an object, got %s",
                     oai__type_name(so));
  const cJSON *x;
  cJSON_ArrayForEach(x, so) {
    const char *k = x->string;
    char field[96];
    snprintf(field, sizeof field, "structured_outputs.%.60s", k);
    const char *fld = arena_strndup(c->arena, field, strlen(field));
    OAI_NEED(c, fld);
    int rc = 0;
    if (cJSON_IsNull(x)) continue;
    if (!strcmp(k, "json")) rc = take_schema(c, f, fld, x);
    else if (!strcmp(k, "regex")) rc = take_string(c, f, fld, OAI_GRAMMAR_REGEX, x);
    else if (!strcmp(k, "choice")) rc = take_choice(c, f, fld, x);
    else if (!strcmp(k, "grammar")) rc = take_string(c, f, fld, OAI_GRAMMAR_GBNF, x);
    else if (!strcmp(k, "json_object")) {
      if (!cJSON_IsBool(x))
        return oai__fail(c, "invalid_type", fld, "%s must be a boolean, got %s", fld, oai__type_name(x));
      if (cJSON_IsTrue(x)) rc = take(c, f, fld, OAI_GRAMMAR_JSON_OBJECT, NULL);
    } else if (!strcmp(k, "disable_any_whitespace") || !strcmp(k, "disable_additional_properties") ||
               !strcmp(k, "disable_fallback")) {
      if (!cJSON_IsBool(x))
        return oai__fail(c, "invalid_type", fld, "%s must be a boolean, got %s", fld, oai__type_name(x));
      if (!strcmp(k, "disable_any_whitespace")) g->flexible_ws = cJSON_IsFalse(x);
      else if (!strcmp(k, "disable_additional_properties")) g->additional = cJSON_IsFalse(x);
      /* disable_fallback: there is one engine and never a fallback */
    } else {
      return oai__fail(c, "unsupported_parameter", fld,
                       "%s is not supported (structured_outputs takes json, regex, choice, grammar, json_object, "
                       "disable_any_whitespace, disable_additional_properties, disable_fallback)",
                       fld);
    }
    if (rc) return rc;
  }
  return 0;
}

int oai__parse_text_format(oai__ctx_t *c, const cJSON *fmt, oai_params_t *p) {
  oai_grammar_t *g = &p->grammar;
  memset(g, 0, sizeof *g);
  found_t f = {.out = g};
  const cJSON *t = cJSON_IsObject(fmt) ? oai__get(fmt, "type") : NULL;
  if (!t || !cJSON_IsString(t))
    return oai__fail(c, "invalid_value", "text.format",
                     "text.format must be an object with a type: \"text\", \"json_object\" or \"json_schema\"");
  if (!strcmp(t->valuestring, "text")) return 0;
  if (!strcmp(t->valuestring, "json_object")) return take(c, &f, "text.format", OAI_GRAMMAR_JSON_OBJECT, NULL);
  if (strcmp(t->valuestring, "json_schema") != 0)
    return oai__fail(c, "invalid_value", "text.format.type",
                     "text.format.type must be \"text\", \"json_object\" or \"json_schema\", got \"%s\"", t->valuestring);
  const cJSON *s = oai__get(fmt, "schema");
  if (!s) return oai__fail(c, "missing_required_parameter", "text.format.schema", "text.format.schema is required");
  const cJSON *strict = oai__get(fmt, "strict");
  if (strict && !cJSON_IsBool(strict))
    return oai__fail(c, "invalid_type", "text.format.strict", "text.format.strict must be a boolean, got %s",
                     oai__type_name(strict));
  return take_schema(c, &f, "text.format.schema", s);
}

int oai__parse_structured(oai__ctx_t *c, const cJSON *root, oai_params_t *p) {
  oai_grammar_t *g = &p->grammar;
  memset(g, 0, sizeof *g);
  found_t f = {.out = g};
  const cJSON *x;
  if ((x = oai__get(root, "response_format")) && parse_response_format(c, x, &f)) return -EINVAL;
  if ((x = oai__get(root, "structured_outputs")) && parse_structured_outputs(c, x, &f, g)) return -EINVAL;
  if ((x = oai__get(root, "guided_json")) && take_schema(c, &f, "guided_json", x)) return -EINVAL;
  if ((x = oai__get(root, "guided_regex")) && take_string(c, &f, "guided_regex", OAI_GRAMMAR_REGEX, x))
    return -EINVAL;
  if ((x = oai__get(root, "guided_choice")) && take_choice(c, &f, "guided_choice", x)) return -EINVAL;
  if ((x = oai__get(root, "guided_grammar")) && take_string(c, &f, "guided_grammar", OAI_GRAMMAR_GBNF, x))
    return -EINVAL;
  if ((x = oai__get(root, "grammar")) && take_string(c, &f, "grammar", OAI_GRAMMAR_GBNF, x)) return -EINVAL;
  if ((x = oai__get(root, "json_schema")) && take_schema(c, &f, "json_schema", x)) return -EINVAL;
  if ((x = oai__get(root, "guided_whitespace_pattern")))
    return oai__fail(c, "unsupported_parameter", "guided_whitespace_pattern",
                     "guided_whitespace_pattern is not supported: JSON whitespace is compact, or bounded with "
                     "structured_outputs.disable_any_whitespace false");
  if ((x = oai__get(root, "guided_decoding_backend")))
    return oai__fail(c, "unsupported_parameter", "guided_decoding_backend",
                     "guided_decoding_backend is not supported: tram has one grammar engine");
  return 0;
}
