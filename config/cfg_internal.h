/* config/cfg_internal.h — helpers shared by the config module's files
 * (cfg_load.c reads the sources, cfg_check.c validates across settings,
 * cfg_print.c writes help and JSON). Not for other modules. */
#ifndef TRAM_CFG_INTERNAL_H
#define TRAM_CFG_INTERNAL_H

#include <stdarg.h>

#include "config/cfg.h"

/* The field of setting k in cfg, as a T. */
#define CFG__FIELD(cfg, k, T) ((T *)((char *)(cfg) + cfg_settings[k].offset))

/* An error message buffer. */
typedef struct cfg__err {
  char *buf;
  size_t len;
} cfg__err_t;

/* Writes a message into e and returns -EINVAL. */
int cfg__fail(cfg__err_t *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Where setting k's value came from, with the key for the file:
 * "config file F: key \"port\"", "environment TRAM_PORT", "flag --port" or
 * "default port". Writes into buf (256 bytes is plenty) and returns it. */
char *cfg__where(const cfg_t *cfg, cfg_key_t k, char *buf, size_t len);

/* The type and range of setting k, as --help shows it: "integer 0..65535",
 * "size 1M..64T", "duration 0..168h", "one of cpu, cuda", "bool", ... */
char *cfg__type_text(cfg_key_t k, char *buf, size_t len);

/* What a valid value of setting k looks like, for messages:
 * "an integer 0..65535", "one of cpu, cuda", ... Writes into buf. */
char *cfg__expected(cfg_key_t k, char *buf, size_t len);

/* The cross-setting checks and the files the settings name (model, API key
 * file, log file), run after every source is applied. Fills derived values
 * (served_model_name, the API keys of the file). Returns 0 or -EINVAL. */
int cfg__check(cfg_t *cfg, cfg__err_t *e);

/* Appends a copy of s to the list. */
void cfg__list_push(cfg_list_t *l, const char *s);
void cfg__list_clear(cfg_list_t *l);

/* Reads a whole regular file of at most CFG__FILE_MAX bytes into a
 * malloc'ed, NUL-terminated buffer (*out, *len without the NUL). On failure
 * the message starts with `what` (e.g. "config file /x.json"). */
#define CFG__FILE_MAX (1 << 20)
int cfg__read_file(const char *path, char **out, size_t *len, cfg__err_t *e, const char *what);

#endif
