/* st/st_open.c — opening safetensors checkpoints: one file mapped, or the
 * shards a model.safetensors.index.json names (see safetensors.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "base/alloc.h"
#include "base/file.h"
#include "st/st_internal.h"

#define ST_MAX_INDEX (64u << 20) /* bytes of index JSON */

void st_close(st_ctx_t *ctx) {
  if (!ctx) return;
  for (size_t i = 0; i < ctx->n; i++) free((char *)ctx->t[i].name);
  free(ctx->t);
  for (size_t i = 0; i < ctx->n_maps; i++) file_unmap(ctx->maps[i].addr, ctx->maps[i].len);
  free(ctx->maps);
  strmap_free(&ctx->index);
  free(ctx);
}

size_t st_tensor_count(const st_ctx_t *ctx) { return ctx->n; }
const st_tensor_t *st_tensor_at(const st_ctx_t *ctx, size_t i) { return i < ctx->n ? &ctx->t[i] : NULL; }

const st_tensor_t *st_find(const st_ctx_t *ctx, const char *name) {
  const int32_t i = strmap_find(&ctx->index, name, strlen(name));
  return i >= 0 ? &ctx->t[i] : NULL;
}

st_ctx_t *st_open_buffer(const void *data, size_t size, char *err, size_t err_len) {
  if (err && err_len) err[0] = 0;
  st_ctx_t *ctx = xcalloc(1, sizeof *ctx);
  if (st__parse(ctx, data ? data : "", data ? size : 0, 0, "safetensors", err, err_len) != 0 ||
      st__index(ctx, err, err_len) != 0) {
    st_close(ctx);
    return NULL;
  }
  return ctx;
}

/* Maps the regular file at path (read-only) into a new entry of ctx->maps.
 * 0, or a negative errno with err written. */
static int map_file(st_ctx_t *ctx, const char *path, const uint8_t **base, size_t *size, char *err, size_t err_len) {
  const void *addr;
  char why[160];
  const int rc = file_map(path, &addr, size, why, sizeof why);
  if (rc != 0) {
    snprintf(err, err_len, "%s: %s", path, why);
    return rc;
  }
  xgrow(&ctx->maps, &ctx->maps_cap, ctx->n_maps + 1, sizeof *ctx->maps, 4);
  ctx->maps[ctx->n_maps++] = (st_map_t){addr, *size};
  *base = addr ? addr : (const uint8_t *)"";
  return 0;
}

/* dir + "/" + name, malloc'd. */
static char *join(const char *dir, const char *name) {
  const size_t a = strlen(dir), b = strlen(name);
  char *p = xmalloc(a + b + 2);
  memcpy(p, dir, a);
  p[a] = '/';
  memcpy(p + a + 1, name, b + 1);
  return p;
}

static int open_one(st_ctx_t *ctx, const char *path, int shard, char *err, size_t err_len) {
  const uint8_t *base;
  size_t size;
  int rc = map_file(ctx, path, &base, &size, err, err_len);
  return rc != 0 ? rc : st__parse(ctx, base, size, shard, path, err, err_len);
}

/* A shard file name as the index gives it: a plain name in the index's folder. */
static int plain_name(const char *s) {
  return s[0] && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/* Opens the shards an index names and checks the weight map against them. */
static int open_index(st_ctx_t *ctx, const char *path, char *err, size_t err_len) {
  const uint8_t *base;
  size_t size;
  int rc = map_file(ctx, path, &base, &size, err, err_len);
  if (rc != 0) return rc;
  if (size > ST_MAX_INDEX) {
    snprintf(err, err_len, "%s: %zu bytes, larger than an index can be", path, size);
    return -EINVAL;
  }
  cJSON *root = cJSON_ParseWithLength((const char *)base, size);
  const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
  char *dir = xmalloc(strlen(path) + 2);
  strcpy(dir, path);
  char *slash = strrchr(dir, '/');
  if (slash)
    *slash = 0;
  else
    strcpy(dir, ".");
  const char **files = NULL;
  size_t n_files = 0, cap = 0;
  rc = -EINVAL;
  if (!cJSON_IsObject(map) || !map->child) {
    snprintf(err, err_len, "%s: no \"weight_map\" object of tensor names to file names", path);
    goto out;
  }
  for (const cJSON *e = map->child; e; e = e->next) { /* the distinct files, first seen first */
    if (!cJSON_IsString(e) || !plain_name(e->valuestring)) {
      snprintf(err, err_len, "%s: weight_map['%.80s'] is not a file name in the index's folder", path,
               e->string ? e->string : "");
      goto out;
    }
    size_t f = 0;
    while (f < n_files && strcmp(files[f], e->valuestring) != 0) f++;
    if (f == n_files) {
      xgrow(&files, &cap, n_files + 1, sizeof *files, 4);
      files[n_files++] = e->valuestring;
    }
  }
  for (size_t f = 0; f < n_files; f++) {
    char *p = join(dir, files[f]);
    int r = open_one(ctx, p, (int)f, err, err_len);
    free(p);
    if (r != 0) goto out;
  }
  if (st__index(ctx, err, err_len) != 0) goto out;
  size_t listed = 0;
  for (const cJSON *e = map->child; e; e = e->next, listed++) {
    const st_tensor_t *t = st_find(ctx, e->string);
    if (!t || strcmp(files[t->shard], e->valuestring) != 0) {
      snprintf(err, err_len, "%s: tensor '%.80s' is not in %.80s, where the weight_map puts it", path, e->string,
               e->valuestring);
      goto out;
    }
  }
  if (listed != ctx->n) {
    snprintf(err, err_len, "%s: the shards hold %zu tensors, the weight_map lists %zu", path, ctx->n, listed);
    goto out;
  }
  rc = 0;
out:
  free(files);
  free(dir);
  cJSON_Delete(root);
  return rc;
}

static int ends_with(const char *s, const char *suffix) {
  const size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

st_ctx_t *st_open(const char *path, char *err, size_t err_len) {
  if (err && err_len) err[0] = 0;
  st_ctx_t *ctx = xcalloc(1, sizeof *ctx);
  struct stat sb;
  int rc;
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    char *index = join(path, "model.safetensors.index.json");
    if (access(index, F_OK) == 0) {
      rc = open_index(ctx, index, err, err_len);
    } else {
      char *one = join(path, "model.safetensors");
      rc = open_one(ctx, one, 0, err, err_len);
      if (rc == 0) rc = st__index(ctx, err, err_len);
      free(one);
    }
    free(index);
  } else if (ends_with(path, ".json")) {
    rc = open_index(ctx, path, err, err_len);
  } else {
    rc = open_one(ctx, path, 0, err, err_len);
    if (rc == 0) rc = st__index(ctx, err, err_len);
  }
  if (rc != 0) {
    st_close(ctx);
    return NULL;
  }
  return ctx;
}
