/* api/oai_gen_fields.c — the generation fields both request readers
 * take (see oai_request.h: oai_parse_gen_fields), from one table: the
 * OpenAI parsers (oai_request.c's parse_gen) and `tram generate`'s JSON
 * lines (gen_input.c) read each of them here, with one range, one limit and
 * one message. The sampling fields are a table of their own
 * (sample/samp_params.h: samp_fields), read first. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/oai_fields.h"

typedef enum gen_kind {
  GEN_SEED,     /* samp.seed (and has_seed): any 64-bit integer */
  GEN_INT,      /* an int32_t in [lo, hi] */
  GEN_BOOL,     /* a bool */
  GEN_STOP,     /* stop, stop_token_ids: their own readers below */
  GEN_STOP_IDS,
} gen_kind_t;

typedef struct gen_field {
  const char *name;
  gen_kind_t kind;
  size_t off;      /* GEN_INT, GEN_BOOL: of the value in oai_params_t */
  int32_t lo;      /* GEN_INT: the least value (completions, generate) */
  int32_t lo_chat; /* ... for chat */
  size_t hi_lim;   /* GEN_INT: offset of the greatest value in oai_limits_t; 0: INT32_MAX */
} gen_field_t;

static const gen_field_t GEN_FIELDS[] = {
    {"seed", GEN_SEED, 0, 0, 0, 0},
    {"max_tokens", GEN_INT, offsetof(oai_params_t, max_tokens), 0, 1, 0}, /* 0: completions with echo */
    {"n", GEN_INT, offsetof(oai_params_t, n), 1, 1, offsetof(oai_limits_t, max_n)},
    {"stop", GEN_STOP, 0, 0, 0, 0},
    {"stop_token_ids", GEN_STOP_IDS, 0, 0, 0, 0},
    {"ignore_eos", GEN_BOOL, offsetof(oai_params_t, ignore_eos), 0, 0, 0},
};

static int parse_stop(oai__ctx_t *c, const cJSON *root, oai_params_t *g) {
  const cJSON *x = oai__get(root, "stop");
  if (!x) return 0;
  int count = cJSON_IsString(x) ? 1 : cJSON_IsArray(x) ? cJSON_GetArraySize(x) : -1;
  if (count < 0)
    return oai__fail(c, "invalid_type", "stop", "stop must be a string or an array of strings, got %s",
                     oai__type_name(x));
  if (count > c->lim->max_stop)
    return oai__fail(c, "invalid_value", "stop", "stop has %d strings; at most %d are accepted", count,
                     c->lim->max_stop);
  const char **stop = arena_array(c->arena, (size_t)(count ? count : 1), sizeof *stop);
  OAI_NEED(c, stop);
  const cJSON *s = cJSON_IsString(x) ? x : x->child;
  for (int i = 0; i < count; i++, s = s->next) {
    char param[32];
    if (cJSON_IsString(x)) snprintf(param, sizeof param, "stop");
    else snprintf(param, sizeof param, "stop[%d]", i);
    if (!cJSON_IsString(s))
      return oai__fail(c, "invalid_type", param, "%s must be a string, got %s", param, oai__type_name(s));
    size_t n = strlen(s->valuestring);
    if (n == 0) return oai__fail(c, "invalid_value", param, "%s must not be empty", param);
    if (n > (size_t)c->lim->max_stop_len)
      return oai__fail(c, "invalid_value", param, "%s is %zu bytes long; at most %d are accepted", param,
                       n, c->lim->max_stop_len);
    stop[i] = arena_strndup(c->arena, s->valuestring, n);
    OAI_NEED(c, stop[i]);
  }
  g->stop = stop;
  g->n_stop = count;
  return 0;
}

static int parse_stop_token_ids(oai__ctx_t *c, const cJSON *root, oai_params_t *g) {
  const cJSON *x = oai__get(root, "stop_token_ids");
  if (!x) return 0;
  if (cJSON_IsArray(x) && cJSON_GetArraySize(x) == 0) return 0;
  if (cJSON_IsArray(x) && cJSON_GetArraySize(x) > c->lim->max_stop_token_ids)
    return oai__fail(c, "invalid_value", "stop_token_ids", "stop_token_ids has %d ids; at most %d are accepted",
                     cJSON_GetArraySize(x), c->lim->max_stop_token_ids);
  int32_t *ids;
  if (oai__token_array(c, x, "stop_token_ids", &ids, &g->n_stop_token_ids)) return -EINVAL;
  g->stop_token_ids = ids;
  return 0;
}

/* The sampling fields (samp_fields), with their limits; bit i of *given
 * for samp_fields[i]. */
static int read_samp(oai__ctx_t *c, const cJSON *root, samp_params_t *sp, unsigned *given_bits) {
  for (int i = 0; i < samp_n_fields; i++) {
    const samp_field_t *f = &samp_fields[i];
    float x = 0;
    int64_t v;
    bool given;
    if (f->integral ? oai__get_int(c, root, f->name, (int64_t)f->lo, (int64_t)f->hi, &v, &given)
                    : oai__get_float(c, root, f->name, f->lo, f->hi, f->lo_open, false, &x, &given))
      return -EINVAL;
    if (!given) continue;
    *given_bits |= 1u << i;
    char range[64];
    if (!f->integral && !samp_field_accepts(f, x)) /* in range, but not once a float */
      return oai__fail(c, "invalid_value", f->name, "%s must be in %s, got %g", f->name,
                       samp_field_range(f, range, sizeof range), (double)x);
    samp_field_set(sp, f, f->integral ? (double)v : x);
  }
  return 0;
}

static int read_field(oai__ctx_t *c, const cJSON *root, bool chat, const gen_field_t *f, oai_params_t *g) {
  bool given;
  switch (f->kind) {
  case GEN_SEED: {
    uint64_t seed;
    const cJSON *x = oai__get(root, f->name);
    if (c->lim->seed_string && cJSON_IsString(x)) {
      char *end;
      errno = 0;
      seed = strtoull(x->valuestring, &end, 10);
      if (errno || end == x->valuestring || *end || x->valuestring[0] == '-')
        return oai__fail(c, "invalid_value", f->name, "%s must be an integer or a decimal string of 0..2^64-1",
                         f->name);
      given = true;
    } else if (oai__get_u64(c, root, f->name, &seed, &given)) {
      return -EINVAL;
    }
    if (given) g->samp.seed = seed, g->samp.has_seed = 1;
    return 0;
  }
  case GEN_INT: {
    const int64_t hi = f->hi_lim ? *(const int32_t *)((const char *)c->lim + f->hi_lim) : INT32_MAX;
    int64_t v;
    if (oai__get_int(c, root, f->name, chat ? f->lo_chat : f->lo, hi, &v, &given)) return -EINVAL;
    if (given) *(int32_t *)((char *)g + f->off) = (int32_t)v;
    return 0;
  }
  case GEN_BOOL: return oai__get_bool(c, root, f->name, (bool *)((char *)g + f->off), NULL);
  case GEN_STOP: return parse_stop(c, root, g);
  case GEN_STOP_IDS: return parse_stop_token_ids(c, root, g);
  }
  return -EINVAL;
}

int oai__read_gen_fields(oai__ctx_t *c, const cJSON *root, bool chat, oai_params_t *g, unsigned *samp_given) {
  *samp_given = 0;
  if (read_samp(c, root, &g->samp, samp_given)) return -EINVAL;
  for (size_t i = 0; i < sizeof GEN_FIELDS / sizeof GEN_FIELDS[0]; i++)
    if (read_field(c, root, chat, &GEN_FIELDS[i], g)) return -EINVAL;
  return 0;
}

int oai_parse_gen_fields(const char *body, size_t len, const oai_limits_t *lim, arena_t *arena, oai_params_t *g,
                         cJSON **root, oai_error_t *err) {
  oai__ctx_t c;
  oai_limits_t dflt;
  oai__ctx_init(&c, lim, &dflt, arena, err);
  *root = NULL;
  unsigned given;
  int r = oai__parse_object(&c, body, len, root) || oai__read_gen_fields(&c, *root, false, g, &given) ? -EINVAL : 0;
  r = oai__end(&c, r);
  if (r && *root) {
    cJSON_Delete(*root);
    *root = NULL;
  }
  return r;
}
