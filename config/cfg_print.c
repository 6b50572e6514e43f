/* config/cfg_print.c — what the settings table prints: `tram --help`, the
 * Markdown reference in docs/configuration.md (`tram --help-markdown`) and
 * the resolved configuration as JSON (`tram serve --check-config`). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_internal.h"

char *cfg__type_text(cfg_key_t k, char *buf, size_t len) {
  const cfg_setting_t *s = &cfg_settings[k];
  char lo[32], hi[32];
  switch (s->type) {
  case CFG_T_INT:
    snprintf(buf, len, "%s %lld..%lld", (s->flags & CFG_F_POW2) ? "power of two" : "integer",
             (long long)s->min, (long long)s->max);
    break;
  case CFG_T_SIZE:
    snprintf(buf, len, "size %s..%s", cfg_format_size(s->min, lo, sizeof lo),
             cfg_format_size(s->max, hi, sizeof hi));
    break;
  case CFG_T_DURATION:
    snprintf(buf, len, "duration %s..%s", cfg_format_duration(s->min, lo, sizeof lo),
             cfg_format_duration(s->max, hi, sizeof hi));
    break;
  case CFG_T_BOOL: snprintf(buf, len, "bool"); break;
  case CFG_T_ENUM: {
    size_t n = (size_t)snprintf(buf, len, "one of ");
    for (int i = 0; s->choices[i] && n < len; i++)
      n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", s->choices[i]);
    break;
  }
  case CFG_T_LIST: snprintf(buf, len, "list of strings"); break;
  case CFG_T_PATH: snprintf(buf, len, "path"); break;
  default: snprintf(buf, len, "string"); break;
  }
  return buf;
}

static const char *default_text(cfg_key_t k) {
  return cfg_settings[k].def[0] ? cfg_settings[k].def : "none";
}

/* Writes text wrapped at 79 columns, each line indented by `indent`. */
static void wrap(FILE *out, const char *text, int indent) {
  const int width = 79;
  int col = 0;
  const char *p = text;
  while (*p) {
    while (*p == ' ') p++;
    size_t w = strcspn(p, " ");
    if (w == 0) break;
    if (col > indent && col + 1 + (int)w > width) {
      fputc('\n', out);
      col = 0;
    }
    if (col == 0) col = fprintf(out, "%*s", indent, "");
    else col += fprintf(out, " ");
    col += fprintf(out, "%.*s", (int)w, p);
    p += w;
  }
  fputc('\n', out);
}

void cfg_print_help(FILE *out, const char *prog) {
  fprintf(out,
          "Usage: %1$s [serve] [SETTINGS]        serve the model (serve is the default command)\n"
          "       %1$s serve --check-config [SETTINGS]\n"
          "                                      validate the settings, print them as JSON with\n"
          "                                      where each came from, and exit\n"
          "       %1$s generate -p PROMPT | --prompts FILE [OPTIONS] [SETTINGS]\n"
          "                                      run prompts through the engine, print the\n"
          "                                      outputs and the throughput (%1$s generate --help)\n"
          "       %1$s --help | --help-markdown | --version\n\n",
          prog);
  wrap(out,
       "Every setting is a flag, an environment variable and a key of the JSON config file; in "
       "rising precedence: default < config file < environment < flag. Sizes are bytes, or a "
       "number with a suffix K, M, G or T (powers of 1024). Durations are seconds, or a number "
       "with a unit ms, s, m or h. Booleans: true/false (a bare --NAME means true, --no-NAME "
       "false). Lists: comma-separated (a list flag may also repeat). "
       "Reference: docs/configuration.md.",
       0);
  const char *group = NULL;
  for (int k = 0; k < CFG_N_SETTINGS; k++) {
    const cfg_setting_t *s = &cfg_settings[k];
    if (!group || strcmp(group, s->group) != 0) {
      group = s->group;
      fprintf(out, "\n%s:\n", group);
    }
    char fl[64], env[64], type[160];
    cfg_flag_name((cfg_key_t)k, fl, sizeof fl);
    if (s->short_flag) fprintf(out, "  -%c, ", s->short_flag);
    else fprintf(out, "  ");
    if (s->type == CFG_T_BOOL) fprintf(out, "%s, --no-%s\n", fl, fl + 2);
    else fprintf(out, "%s %s\n", fl, s->meta);
    wrap(out, s->help, 6);
    fprintf(out, "      default %s; %s\n", default_text((cfg_key_t)k), cfg__type_text(k, type, sizeof type));
    if (s->flags & CFG_F_NOFILE)
      fprintf(out, "      env %s; not a config file key\n", cfg_env_name((cfg_key_t)k, env, sizeof env));
    else
      fprintf(out, "      env %s; key \"%s\"\n", cfg_env_name((cfg_key_t)k, env, sizeof env), s->name);
  }
}

void cfg_print_markdown(FILE *out) {
  const char *group = NULL;
  for (int k = 0; k < CFG_N_SETTINGS; k++) {
    const cfg_setting_t *s = &cfg_settings[k];
    if (!group || strcmp(group, s->group) != 0) {
      group = s->group;
      fprintf(out, "%s### %s\n\n", k ? "\n" : "", group);
      fprintf(out, "| key | flag | environment | type | default | meaning |\n");
      fprintf(out, "| --- | --- | --- | --- | --- | --- |\n");
    }
    char fl[64], env[64], type[160], key[80];
    cfg_flag_name((cfg_key_t)k, fl, sizeof fl);
    if (s->flags & CFG_F_NOFILE) snprintf(key, sizeof key, "(none)");
    else snprintf(key, sizeof key, "`%s`", s->name);
    if (s->type == CFG_T_BOOL) fprintf(out, "| %s | `%s`, `--no-%s`", key, fl, fl + 2);
    else fprintf(out, "| %s | `%s %s`", key, fl, s->meta);
    if (s->short_flag) fprintf(out, ", `-%c`", s->short_flag);
    fprintf(out, " | `%s` | %s | %s%s%s | %s |\n", cfg_env_name((cfg_key_t)k, env, sizeof env),
            cfg__type_text((cfg_key_t)k, type, sizeof type), s->def[0] ? "`" : "", default_text((cfg_key_t)k),
            s->def[0] ? "`" : "", s->help);
  }
}

static cJSON *value_json(const cfg_t *cfg, cfg_key_t k) {
  const cfg_setting_t *s = &cfg_settings[k];
  switch (s->type) {
  case CFG_T_INT: return cJSON_CreateNumber(*CFG__FIELD(cfg, k, int));
  case CFG_T_SIZE: return cJSON_CreateNumber((double)*CFG__FIELD(cfg, k, int64_t));
  case CFG_T_DURATION: return cJSON_CreateNumber((double)*CFG__FIELD(cfg, k, int64_t) / 1000.0);
  case CFG_T_BOOL: return cJSON_CreateBool(*CFG__FIELD(cfg, k, bool));
  case CFG_T_ENUM: return cJSON_CreateString(s->choices[*CFG__FIELD(cfg, k, int)]);
  case CFG_T_LIST: {
    const cfg_list_t *l = CFG__FIELD(cfg, k, cfg_list_t);
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < l->n; i++)
      cJSON_AddItemToArray(a, cJSON_CreateString((s->flags & CFG_F_SECRET) ? "***" : l->items[i]));
    return a;
  }
  default: {
    const char *v = *CFG__FIELD(cfg, k, char *);
    return v ? cJSON_CreateString(v) : cJSON_CreateNull();
  }
  }
}

char *cfg_to_json(const cfg_t *cfg) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  for (int k = 0; k < CFG_N_SETTINGS; k++) {
    char src[600];
    cJSON *o = cJSON_AddObjectToObject(root, cfg_settings[k].name);
    if (!o) break;
    cJSON_AddItemToObject(o, "value", value_json(cfg, (cfg_key_t)k));
    cJSON_AddStringToObject(o, "source", cfg_source_describe(cfg, (cfg_key_t)k, src, sizeof src));
  }
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  return text;
}
