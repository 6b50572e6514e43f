/* config/cfg_check.c — the checks that span settings or look at the files
 * they name, run once every source is applied (see cfg.h): the model file,
 * exclusive settings, budget relations, the API keys and their file, the log
 * file. Each error names the setting and where its value came from. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/alloc.h"
#include "config/cfg_internal.h"

/* A regular file we can open for reading; else an error naming `what`. */
static int check_readable(const cfg_t *cfg, cfg_key_t k, const char *path, const char *what,
                          cfg__err_t *e) {
  char where[600];
  cfg__where(cfg, k, where, sizeof where);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return cfg__fail(e, "%s: cannot open %s \"%s\": %s", where, what, path, strerror(errno));
  struct stat st;
  int rc = fstat(fd, &st);
  close(fd);
  if (rc != 0 || !S_ISREG(st.st_mode))
    return cfg__fail(e, "%s: %s \"%s\" is not a regular file", where, what, path);
  return 0;
}

/* An API key: printable ASCII without spaces (the token of a Bearer header). */
static bool key_ok(const char *key) {
  if (!*key) return false;
  for (const unsigned char *p = (const unsigned char *)key; *p; p++)
    if (*p <= 0x20 || *p >= 0x7f) return false;
  return true;
}

/* Appends the keys of api_key_file to cfg->api_keys. */
static int read_key_file(cfg_t *cfg, cfg__err_t *e) {
  char where[600], what[700];
  cfg__where(cfg, CFG_API_KEY_FILE, where, sizeof where);
  snprintf(what, sizeof what, "%s: API key file \"%s\"", where, cfg->api_key_file);
  char *text;
  size_t len;
  int rc = cfg__read_file(cfg->api_key_file, &text, &len, e, what);
  if (rc) return rc;
  if (strlen(text) != len) {
    free(text);
    return cfg__fail(e, "%s: contains a NUL byte", what);
  }
  int line = 0, found = 0;
  char *save = NULL;
  for (char *p = text; rc == 0 && p; p = save) {
    line++;
    save = strchr(p, '\n');
    if (save) *save++ = '\0';
    while (*p == ' ' || *p == '\t') p++;
    size_t n = strlen(p);
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r')) p[--n] = '\0';
    if (n == 0 || p[0] == '#') continue;
    if (!key_ok(p)) {
      rc = cfg__fail(e, "%s: line %d: an API key must be printable ASCII without spaces", what, line);
    } else {
      cfg__list_push(&cfg->api_keys, p);
      found++;
    }
  }
  free(text);
  if (rc == 0 && found == 0)
    rc = cfg__fail(e, "%s: holds no API key (an empty file would turn authentication off)", what);
  return rc;
}

/* The model file's (or checkpoint folder's) name without folders and ".gguf". */
static char *model_name(const char *path) {
  size_t len = strlen(path);
  while (len > 1 && path[len - 1] == '/') len--; /* a checkpoint folder "dir/" */
  const char *base = memrchr(path, '/', len);
  base = base ? base + 1 : path;
  size_t n = len - (size_t)(base - path);
  if (n > 5 && strcmp(base + n - 5, ".gguf") == 0) n -= 5;
  return xstrndup(base, n);
}

static int check_log_file(const cfg_t *cfg, cfg__err_t *e) {
  const char *path = cfg->log_file;
  char where[600];
  cfg__where(cfg, CFG_LOG_FILE, where, sizeof where);
  struct stat st;
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode)) return cfg__fail(e, "%s: log file \"%s\" is a directory", where, path);
    if (access(path, W_OK) != 0)
      return cfg__fail(e, "%s: cannot write log file \"%s\": %s", where, path, strerror(errno));
    return 0;
  }
  char *copy = xstrdup(path);
  const char *dir = dirname(copy);
  int rc = 0;
  if (access(dir, W_OK) != 0)
    rc = cfg__fail(e, "%s: cannot create log file \"%s\": %s", where, path, strerror(errno));
  free(copy);
  return rc;
}

/* served_model_name "a, b,c": the first name stays, the others become
 * served_model_aliases (spaces around names dropped). Every name must be
 * non-empty. */
static int split_names(cfg_t *cfg, cfg__err_t *e) {
  char where[600];
  char *name = cfg->served_model_name;
  if (!strchr(name, ',')) return 0;
  for (int first = 1; name;) {
    char *end = strchr(name, ',');
    if (end) *end = '\0';
    while (*name == ' ') name++;
    size_t n = strlen(name);
    while (n && name[n - 1] == ' ') name[--n] = '\0';
    if (n == 0)
      return cfg__fail(e, "%s: a name is empty", cfg__where(cfg, CFG_SERVED_MODEL_NAME, where, sizeof where));
    if (!first && cfg->served_model_aliases.n == CFG_MAX_ALIASES)
      return cfg__fail(e, "%s: at most %d names after the first",
                       cfg__where(cfg, CFG_SERVED_MODEL_NAME, where, sizeof where), CFG_MAX_ALIASES);
    if (first) memmove(cfg->served_model_name, name, n + 1);
    else cfg__list_push(&cfg->served_model_aliases, name);
    first = 0;
    name = end ? end + 1 : NULL;
  }
  return 0;
}

int cfg__check(cfg_t *cfg, cfg__err_t *e) {
  char where[600], other[600];

  /* model: required, readable */
  if (!cfg->model)
    return cfg__fail(e, "model: no model file given (use --model PATH, TRAM_MODEL or the "
                        "\"model\" key of the config file)");
  struct stat mst; /* a Hugging Face checkpoint folder: its config.json (docs/models.md) */
  int dir = stat(cfg->model, &mst) == 0 && S_ISDIR(mst.st_mode);
  char *cfg_json = NULL;
  if (dir) {
    cfg_json = xmalloc(strlen(cfg->model) + sizeof "/config.json");
    strcpy(cfg_json, cfg->model);
    strcat(cfg_json, "/config.json");
    if (access(cfg_json, R_OK) != 0) {
      free(cfg_json);
      return cfg__fail(e, "%s: model file \"%s\" is not a regular file (a folder, but no Hugging Face checkpoint: "
                          "no readable config.json)",
                       cfg__where(cfg, CFG_MODEL, where, sizeof where), cfg->model);
    }
  }
  int rc = check_readable(cfg, CFG_MODEL, dir ? cfg_json : cfg->model,
                          dir ? "model folder's config.json" : "model file", e);
  free(cfg_json);
  if (rc) return rc;
  if (!cfg->served_model_name) cfg->served_model_name = model_name(cfg->model);
  rc = split_names(cfg, e);
  if (rc) return rc;

#ifndef TRAM_CUDA
  if (cfg->device == CFG_DEVICE_CUDA)
    return cfg__fail(e, "%s: this tram was built without CUDA; use cpu (or rebuild with CUDA=1)",
                     cfg__where(cfg, CFG_DEVICE, where, sizeof where));
#endif

  /* listening */
  if (!cfg->host)
    return cfg__fail(e, "%s: must not be empty", cfg__where(cfg, CFG_HOST, where, sizeof where));
  for (const char *p = cfg->host; *p; p++) {
    if (!(strchr("0123456789.:-_%", *p) || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
      return cfg__fail(e, "%s: expected an IPv4 or IPv6 address or a host name, got \"%.80s\"",
                       cfg__where(cfg, CFG_HOST, where, sizeof where), cfg->host);
  }
  if (cfg->unix_socket && strlen(cfg->unix_socket) >= sizeof(((struct sockaddr_un *)0)->sun_path))
    return cfg__fail(e, "%s: a Unix socket path has at most %zu bytes",
                     cfg__where(cfg, CFG_UNIX_SOCKET, where, sizeof where),
                     sizeof(((struct sockaddr_un *)0)->sun_path) - 1);

  /* engine */
  if (cfg->kv_cache_blocks != 0) {
    if (cfg->source[CFG_KV_CACHE_BYTES] != CFG_SRC_DEFAULT)
      return cfg__fail(e, "kv_cache_bytes (%s) and kv_cache_blocks (%s) are exclusive: set only one",
                       cfg__where(cfg, CFG_KV_CACHE_BYTES, where, sizeof where),
                       cfg__where(cfg, CFG_KV_CACHE_BLOCKS, other, sizeof other));
    cfg->kv_cache_bytes = 0;
  }
  if (cfg->max_batch_tokens < cfg->max_seqs) {
    cfg_key_t blame = cfg->source[CFG_MAX_BATCH_TOKENS] != CFG_SRC_DEFAULT ? CFG_MAX_BATCH_TOKENS
                                                                           : CFG_MAX_SEQS;
    char src_b[600], src_s[600];
    return cfg__fail(e, "%s: max_batch_tokens (%d, %s) must be at least max_seqs (%d, %s): each "
                        "step gives every running sequence a token",
                     cfg__where(cfg, blame, where, sizeof where), cfg->max_batch_tokens,
                     cfg_source_describe(cfg, CFG_MAX_BATCH_TOKENS, src_b, sizeof src_b),
                     cfg->max_seqs, cfg_source_describe(cfg, CFG_MAX_SEQS, src_s, sizeof src_s));
  }
  if (cfg->prompt_lookup_min > cfg->prompt_lookup_max)
    return cfg__fail(e, "%s: prompt_lookup_min (%d) must be at most prompt_lookup_max (%d)",
                     cfg__where(cfg, CFG_PROMPT_LOOKUP_MIN, where, sizeof where), cfg->prompt_lookup_min,
                     cfg->prompt_lookup_max);
  if (cfg->speculative == 2 && !cfg->draft_model)
    return cfg__fail(e, "%s: speculative draft needs a draft model (draft_model, --draft-model PATH)",
                     cfg__where(cfg, CFG_SPECULATIVE, where, sizeof where));
  if (cfg->speculative != 2 && cfg->draft_model)
    return cfg__fail(e, "%s: a draft model is used only with speculative draft (speculative is %s)",
                     cfg__where(cfg, CFG_DRAFT_MODEL, where, sizeof where),
                     cfg_settings[CFG_SPECULATIVE].choices[cfg->speculative]);
  if (cfg->draft_model && (rc = check_readable(cfg, CFG_DRAFT_MODEL, cfg->draft_model, "draft model file", e)))
    return rc;

  /* auth */
  for (int i = 0; i < cfg->api_keys.n; i++) {
    if (!key_ok(cfg->api_keys.items[i]))
      return cfg__fail(e, "%s: API key %d of %d must be printable ASCII without spaces",
                       cfg__where(cfg, CFG_API_KEYS, where, sizeof where), i + 1, cfg->api_keys.n);
  }
  if (cfg->api_key_file && (rc = read_key_file(cfg, e))) return rc;

  if (cfg->log_file && (rc = check_log_file(cfg, e))) return rc;
  return 0;
}
