/* config/cfg_load.c — resolves the configuration from its four sources
 * (see cfg.h): reads the flags and the environment, reads the JSON config
 * file, then applies defaults, file, environment and flags in that order,
 * each value parsed and range-checked as it is stored. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_internal.h"
#include "base/alloc.h"
#include "base/file.h"
#include "base/log.h"


/* --- small helpers ----------------------------------------------------------- */

int cfg__fail(cfg__err_t *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->buf, e->len, fmt, ap);
  va_end(ap);
  return -EINVAL;
}

void cfg__list_push(cfg_list_t *l, const char *s) {
  l->items = xreallocarray(l->items, (size_t)l->n + 1, sizeof *l->items);
  l->items[l->n++] = xstrdup(s);
}

void cfg__list_clear(cfg_list_t *l) {
  for (int i = 0; i < l->n; i++) free(l->items[i]);
  free(l->items);
  l->items = NULL;
  l->n = 0;
}

char *cfg__where(const cfg_t *cfg, cfg_key_t k, char *buf, size_t len) {
  char name[64];
  switch (cfg->source[k]) {
  case CFG_SRC_FILE:
    snprintf(buf, len, "config file %s: key \"%s\"", cfg->config, cfg_settings[k].name);
    break;
  case CFG_SRC_ENV: snprintf(buf, len, "environment %s", cfg_env_name(k, name, sizeof name)); break;
  case CFG_SRC_FLAG: snprintf(buf, len, "flag %s", cfg_flag_name(k, name, sizeof name)); break;
  default: snprintf(buf, len, "default %s", cfg_settings[k].name); break;
  }
  return buf;
}

char *cfg_source_describe(const cfg_t *cfg, cfg_key_t k, char *buf, size_t len) {
  char name[64];
  switch (cfg->source[k]) {
  case CFG_SRC_FILE: snprintf(buf, len, "config file %s", cfg->config); break;
  case CFG_SRC_ENV: snprintf(buf, len, "environment %s", cfg_env_name(k, name, sizeof name)); break;
  case CFG_SRC_FLAG: snprintf(buf, len, "flag %s", cfg_flag_name(k, name, sizeof name)); break;
  default: snprintf(buf, len, "default"); break;
  }
  return buf;
}

char *cfg__expected(cfg_key_t k, char *buf, size_t len) {
  const cfg_setting_t *s = &cfg_settings[k];
  char t[160];
  cfg__type_text(k, t, sizeof t);
  switch (s->type) {
  case CFG_T_BOOL: snprintf(buf, len, "true or false"); break;
  case CFG_T_ENUM: snprintf(buf, len, "%s", t); break;
  case CFG_T_INT: snprintf(buf, len, "%s %s", (s->flags & CFG_F_POW2) ? "a" : "an", t); break;
  case CFG_T_SIZE:
    snprintf(buf, len, "a %s (bytes, or a number with a suffix K, M, G or T, e.g. 512M)", t);
    break;
  case CFG_T_DURATION:
    snprintf(buf, len, "a %s (seconds, or a number with a unit ms, s, m or h, e.g. 30s)", t);
    break;
  case CFG_T_PATH: snprintf(buf, len, "a path (a string)"); break;
  default: snprintf(buf, len, "a %s", t); break;
  }
  return buf;
}

/* `got` for messages: the value quoted (cut at 80 bytes), or as JSON. */
static void quote(char *buf, size_t len, const char *v) {
  snprintf(buf, len, "\"%.80s%s\"", v, strlen(v) > 80 ? "..." : "");
}

static int bad_value(cfg__err_t *e, cfg_key_t k, const char *where, const char *got) {
  char exp[192];
  return cfg__fail(e, "%s: expected %s, got %s", where, cfg__expected(k, exp, sizeof exp), got);
}

/* --- storing one value --------------------------------------------------------- */

/* Stores a number already parsed for an int, size or duration setting. */
static int store_number(cfg_t *cfg, cfg_key_t k, int64_t v, const char *where, const char *got,
                        cfg__err_t *e) {
  const cfg_setting_t *s = &cfg_settings[k];
  if (v < s->min || v > s->max) return bad_value(e, k, where, got);
  if ((s->flags & CFG_F_POW2) && (v & (v - 1)) != 0) return bad_value(e, k, where, got);
  if (s->type == CFG_T_INT) *CFG__FIELD(cfg, k, int) = (int)v;
  else *CFG__FIELD(cfg, k, int64_t) = v;
  return 0;
}

static void store_string(cfg_t *cfg, cfg_key_t k, const char *v) {
  char **f = CFG__FIELD(cfg, k, char *);
  free(*f);
  *f = *v ? xstrdup(v) : NULL; /* "" means not set */
}

/* Splits a comma-separated list into l (appending). */
static int split_list(cfg_list_t *l, const char *v, cfg_key_t k, const char *where, cfg__err_t *e) {
  if (!*v) return 0;
  const char *p = v;
  for (;;) {
    const char *c = strchr(p, ',');
    size_t n = c ? (size_t)(c - p) : strlen(p);
    while (n > 0 && (*p == ' ' || *p == '\t')) p++, n--;
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
    if (n == 0) return cfg__fail(e, "%s: empty item in the list", where);
    char *item = xstrndup(p, n);
    cfg__list_push(l, item);
    free(item);
    if (!c) return 0;
    p = c + 1;
  }
}

/* Stores a value written as text (a default, a flag or an environment
 * variable). A list value replaces the list unless `append`. */
static int store_text(cfg_t *cfg, cfg_key_t k, const char *v, bool append, const char *where,
                      cfg__err_t *e) {
  const cfg_setting_t *s = &cfg_settings[k];
  char got[96];
  quote(got, sizeof got, v);
  int64_t n = 0;
  int rc = 0;
  switch (s->type) {
  case CFG_T_INT: rc = cfg_parse_int(v, &n); break;
  case CFG_T_SIZE: rc = cfg_parse_size(v, &n); break;
  case CFG_T_DURATION: rc = cfg_parse_duration_ms(v, &n); break;
  case CFG_T_BOOL: {
    bool b;
    if (cfg_parse_bool(v, &b)) return bad_value(e, k, where, got);
    *CFG__FIELD(cfg, k, bool) = b;
    return 0;
  }
  case CFG_T_ENUM: {
    int i = cfg_parse_enum(v, s->choices);
    if (i < 0) return bad_value(e, k, where, got);
    *CFG__FIELD(cfg, k, int) = i;
    return 0;
  }
  case CFG_T_LIST: {
    cfg_list_t *l = CFG__FIELD(cfg, k, cfg_list_t);
    if (!append) cfg__list_clear(l);
    return split_list(l, v, k, where, e);
  }
  default: store_string(cfg, k, v); return 0;
  }
  if (rc) return bad_value(e, k, where, got);
  return store_number(cfg, k, n, where, got, e);
}

/* Stores a value from the config file. */
static int store_json(cfg_t *cfg, cfg_key_t k, const cJSON *item, const char *where, cfg__err_t *e) {
  const cfg_setting_t *s = &cfg_settings[k];
  char *printed = cJSON_PrintUnformatted(item);
  if (!printed) abort();
  char got[96];
  snprintf(got, sizeof got, "%.80s%s", printed, strlen(printed) > 80 ? "..." : "");
  free(printed);
  int rc;
  switch (s->type) {
  case CFG_T_INT:
  case CFG_T_SIZE:
  case CFG_T_DURATION:
    if (cJSON_IsNumber(item)) {
      double d = item->valuedouble;
      if (d != floor(d) || fabs(d) > 9007199254740992.0) return bad_value(e, k, where, got);
      int64_t v = (int64_t)d;
      if (s->type == CFG_T_DURATION) {
        if (v < 0 || v > INT64_MAX / 1000) return bad_value(e, k, where, got);
        v *= 1000; /* a JSON number of a duration is seconds */
      }
      return store_number(cfg, k, v, where, got, e);
    }
    if (s->type != CFG_T_INT && cJSON_IsString(item)) {
      int64_t v;
      rc = s->type == CFG_T_SIZE ? cfg_parse_size(item->valuestring, &v)
                                 : cfg_parse_duration_ms(item->valuestring, &v);
      if (rc) return bad_value(e, k, where, got);
      return store_number(cfg, k, v, where, got, e);
    }
    return bad_value(e, k, where, got);
  case CFG_T_BOOL:
    if (!cJSON_IsBool(item)) return bad_value(e, k, where, got);
    *CFG__FIELD(cfg, k, bool) = cJSON_IsTrue(item);
    return 0;
  case CFG_T_LIST: {
    if (!cJSON_IsArray(item)) return bad_value(e, k, where, got);
    const cJSON *el;
    cJSON_ArrayForEach(el, item) {
      if (!cJSON_IsString(el)) return bad_value(e, k, where, got);
    }
    cfg_list_t *l = CFG__FIELD(cfg, k, cfg_list_t);
    cfg__list_clear(l);
    cJSON_ArrayForEach(el, item) {
      if (!*el->valuestring) return cfg__fail(e, "%s: empty item in the list", where);
      cfg__list_push(l, el->valuestring);
    }
    return 0;
  }
  default:
    if (!cJSON_IsString(item)) return bad_value(e, k, where, got);
    return store_text(cfg, k, item->valuestring, false, where, e);
  }
}

/* --- the sources ----------------------------------------------------------------- */

/* One flag as given: the setting, its value (NULL for a bare boolean flag)
 * and whether it was the --no-x form. */
typedef struct {
  cfg_key_t key;
  const char *value;
  bool negated;
} flag_t;

static int find_by_flag(const char *name, size_t n) {
  for (int k = 0; k < CFG_N_SETTINGS; k++) {
    const char *s = cfg_settings[k].name;
    if (strlen(s) != n) continue;
    size_t i = 0;
    while (i < n && (s[i] == name[i] || (s[i] == '_' && name[i] == '-'))) i++;
    if (i == n) return k;
  }
  return -1;
}

/* Reads argv into flags[] (room for argc entries); returns its count or -EINVAL. */
static int read_flags(int argc, char *const argv[], flag_t *flags, cfg__err_t *e) {
  int n = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    int k = -1;
    const char *value = NULL;
    bool negated = false, has_value = false;
    if (a[0] == '-' && a[1] == '-' && a[2]) {
      const char *name = a + 2;
      const char *eq = strchr(name, '=');
      size_t len = eq ? (size_t)(eq - name) : strlen(name);
      k = find_by_flag(name, len);
      if (k < 0 && len > 3 && strncmp(name, "no-", 3) == 0) {
        k = find_by_flag(name + 3, len - 3);
        if (k >= 0 && cfg_settings[k].type != CFG_T_BOOL) k = -1;
        negated = k >= 0;
      }
      if (k < 0) return cfg__fail(e, "flag --%.*s: unknown flag (see tram --help)", (int)len, name);
      if (eq) value = eq + 1, has_value = true;
      if (negated && has_value) return cfg__fail(e, "flag %.*s: takes no value", (int)(eq - a), a);
    } else if (a[0] == '-' && a[1] && !a[2]) {
      for (int j = 0; j < CFG_N_SETTINGS && k < 0; j++)
        if (cfg_settings[j].short_flag == a[1]) k = j;
      if (k < 0) return cfg__fail(e, "flag %s: unknown flag (see tram --help)", a);
    } else {
      return cfg__fail(e, "unexpected argument \"%.80s\" (settings are given as --name VALUE; "
                       "see tram --help)", a);
    }
    if (!has_value && !negated && cfg_settings[k].type != CFG_T_BOOL) {
      char fl[64];
      if (i + 1 >= argc) return cfg__fail(e, "flag %s: missing value", cfg_flag_name(k, fl, sizeof fl));
      value = argv[++i];
    }
    flags[n++] = (flag_t){(cfg_key_t)k, value, negated};
  }
  return n;
}

/* The value of environment variable `name` in envp, or NULL. */
static const char *env_get(char *const envp[], const char *name) {
  size_t n = strlen(name);
  const char *found = NULL;
  for (int i = 0; envp && envp[i]; i++)
    if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=') found = envp[i] + n + 1;
  return found;
}

static int apply_env(cfg_t *cfg, char *const envp[], cfg__err_t *e) {
  for (int i = 0; envp && envp[i]; i++) {
    const char *v = envp[i];
    if (strncmp(v, "TRAM_", 5) != 0) continue;
    const char *eq = strchr(v, '=');
    if (!eq) continue;
    size_t len = (size_t)(eq - v);
    int k = -1;
    char name[64];
    for (int j = 0; j < CFG_N_SETTINGS && k < 0; j++) {
      cfg_env_name((cfg_key_t)j, name, sizeof name);
      if (strlen(name) == len && strncmp(name, v, len) == 0) k = j;
    }
    if (k < 0) {
      log_warn("environment %.*s: not a tram setting, ignored (see tram --help)", (int)len, v);
      continue;
    }
    if (k == CFG_CONFIG) continue; /* read before the file */
    char where[80];
    snprintf(where, sizeof where, "environment %s", name);
    int rc = store_text(cfg, (cfg_key_t)k, eq + 1, false, where, e);
    if (rc) return rc;
    cfg->source[k] = CFG_SRC_ENV;
  }
  return 0;
}

/* Line and column of byte `at` in text, for JSON syntax errors. */
static void line_col(const char *text, const char *at, int *line, int *col) {
  *line = 1, *col = 1;
  for (const char *p = text; p < at && *p; p++) {
    if (*p == '\n') (*line)++, *col = 1;
    else (*col)++;
  }
}

int cfg__read_file(const char *path, char **out, size_t *len, cfg__err_t *e, const char *what) {
  char why[160];
  if (file_read(path, CFG__FILE_MAX, out, len, why, sizeof why) != 0) return cfg__fail(e, "%s: %s", what, why);
  return 0;
}

static int apply_file(cfg_t *cfg, cfg__err_t *e) {
  char what[512];
  snprintf(what, sizeof what, "config file %s", cfg->config);
  char *text;
  size_t len;
  int rc = cfg__read_file(cfg->config, &text, &len, e, what);
  if (rc) return rc;
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
  if (!root) {
    int line, col;
    line_col(text, end ? end : text + len, &line, &col);
    free(text);
    return cfg__fail(e, "%s: invalid JSON at line %d, column %d", what, line, col);
  }
  free(text);
  rc = 0;
  if (!cJSON_IsObject(root)) rc = cfg__fail(e, "%s: expected a JSON object of settings", what);
  bool seen[CFG_N_SETTINGS] = {0};
  const cJSON *item;
  cJSON_ArrayForEach(item, root) {
    if (rc) break;
    int k = -1;
    for (int j = 0; j < CFG_N_SETTINGS && k < 0; j++)
      if (strcmp(item->string, cfg_settings[j].name) == 0) k = j;
    if (k < 0) {
      rc = cfg__fail(e, "%s: unknown key \"%.80s\" (see tram --help)", what, item->string);
    } else if (cfg_settings[k].flags & CFG_F_NOFILE) {
      rc = cfg__fail(e, "%s: key \"%s\" cannot be set in a config file", what, item->string);
    } else if (seen[k]) {
      rc = cfg__fail(e, "%s: key \"%s\" appears twice", what, item->string);
    } else {
      seen[k] = true;
      char where[600];
      snprintf(where, sizeof where, "%s: key \"%s\"", what, item->string);
      rc = store_json(cfg, (cfg_key_t)k, item, where, e);
      cfg->source[k] = CFG_SRC_FILE;
    }
  }
  cJSON_Delete(root);
  return rc;
}

static int apply_flags(cfg_t *cfg, const flag_t *flags, int n, cfg__err_t *e) {
  bool list_started[CFG_N_SETTINGS] = {0};
  for (int i = 0; i < n; i++) {
    cfg_key_t k = flags[i].key;
    char fl[64], where[80];
    snprintf(where, sizeof where, "flag %s", cfg_flag_name(k, fl, sizeof fl));
    const char *v = flags[i].negated ? "false" : flags[i].value ? flags[i].value : "true";
    int rc = store_text(cfg, k, v, list_started[k], where, e);
    if (rc) return rc;
    list_started[k] = true;
    cfg->source[k] = CFG_SRC_FLAG;
  }
  return 0;
}

int cfg_load(cfg_t *cfg, int argc, char *const argv[], char *const envp[], char *err,
             size_t errlen) {
  memset(cfg, 0, sizeof *cfg);
  cfg__err_t e = {err, errlen};
  if (errlen) err[0] = '\0';
  flag_t *flags = xcalloc((size_t)argc + 1, sizeof *flags);
  int rc = 0;
  int n_flags = read_flags(argc, argv, flags, &e);
  if (n_flags < 0) rc = n_flags;
  for (int k = 0; k < CFG_N_SETTINGS && !rc; k++) {
    char where[80];
    snprintf(where, sizeof where, "default %s", cfg_settings[k].name);
    rc = store_text(cfg, (cfg_key_t)k, cfg_settings[k].def, false, where, &e);
  }
  /* The config file's path: flag, else environment. */
  if (!rc) {
    char name[64];
    const char *path = env_get(envp, cfg_env_name(CFG_CONFIG, name, sizeof name));
    cfg_source_t src = CFG_SRC_ENV;
    for (int i = 0; i < n_flags; i++)
      if (flags[i].key == CFG_CONFIG) path = flags[i].value, src = CFG_SRC_FLAG;
    if (path && *path) {
      cfg->config = xstrdup(path);
      cfg->source[CFG_CONFIG] = src;
      rc = apply_file(cfg, &e);
    }
  }
  if (!rc) rc = apply_env(cfg, envp, &e);
  if (!rc) rc = apply_flags(cfg, flags, n_flags, &e);
  if (!rc) rc = cfg__check(cfg, &e);
  free(flags);
  if (rc) cfg_free(cfg);
  return rc;
}

void cfg_free(cfg_t *cfg) {
  for (int k = 0; k < CFG_N_SETTINGS; k++) {
    cfg_type_t t = cfg_settings[k].type;
    if (t == CFG_T_STRING || t == CFG_T_PATH) free(*CFG__FIELD(cfg, k, char *));
    else if (t == CFG_T_LIST) cfg__list_clear(CFG__FIELD(cfg, k, cfg_list_t));
  }
  cfg__list_clear(&cfg->served_model_aliases);
  memset(cfg, 0, sizeof *cfg);
}
