/* grammar/gram_vocab.c — a vocabulary for token masks: every token's bytes,
 * the end-of-generation ids, and the byte trie in sorted-array form (token
 * ids in lexicographic order of their bytes with each one's common prefix
 * with the previous: walking that order is a depth-first walk of the trie,
 * each trie edge stepped once, a dead prefix skipping its whole subtree). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_vocab.h"

#define VOCAB_MAX_TOKEN 1024 /* bytes in one token */

static const gram_vocab_t *sort_v; /* qsort has no context argument; guarded by sort_mu */
static pthread_mutex_t sort_mu = PTHREAD_MUTEX_INITIALIZER;

static int cmp_tok(const void *x, const void *y) {
  int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
  const gram_vocab_t *v = sort_v;
  size_t la = (size_t)(v->off[a + 1] - v->off[a]), lb = (size_t)(v->off[b + 1] - v->off[b]);
  int c = memcmp(v->blob + v->off[a], v->blob + v->off[b], la < lb ? la : lb);
  if (c) return c;
  if (la != lb) return la < lb ? -1 : 1;
  return a < b ? -1 : a > b;
}

static void set_err(gram_err_t *err, const char *msg) {
  if (!err) return;
  err->pos = -1;
  snprintf(err->msg, sizeof err->msg, "%s", msg);
}

gram_vocab_t *gram_vocab_create(int32_t n, const char *const *tokens, const size_t *lens,
                                const int32_t *eog, int32_t n_eog, gram_err_t *err) {
  if (n <= 0 || n > (1 << 24) || n_eog < 0) {
    set_err(err, "vocabulary size out of range");
    return NULL;
  }
  gram_vocab_t *v = calloc(1, sizeof *v);
  if (!v) goto oom;
  v->n = n;
  v->off = malloc(sizeof *v->off * ((size_t)n + 1));
  v->is_eog = calloc((size_t)n, 1);
  v->sorted = malloc(sizeof *v->sorted * (size_t)n);
  v->lcp = malloc(sizeof *v->lcp * (size_t)n);
  v->eog = malloc(sizeof *v->eog * (size_t)(n_eog + 1));
  if (!v->off || !v->is_eog || !v->sorted || !v->lcp || !v->eog) goto oom;
  for (int32_t i = 0; i < n_eog; i++) {
    if (eog[i] < 0 || eog[i] >= n) {
      set_err(err, "end-of-generation id out of range");
      gram_vocab_destroy(v);
      return NULL;
    }
    if (!v->is_eog[eog[i]]) v->eog[v->n_eog++] = eog[i];
    v->is_eog[eog[i]] = 1;
  }
  int64_t total = 0;
  for (int32_t i = 0; i < n; i++) {
    if (lens[i] > VOCAB_MAX_TOKEN) {
      set_err(err, "a token is longer than 1024 bytes");
      gram_vocab_destroy(v);
      return NULL;
    }
    total += (int64_t)lens[i];
  }
  v->blob = malloc((size_t)total + 1);
  if (!v->blob) goto oom;
  int64_t o = 0;
  for (int32_t i = 0; i < n; i++) {
    v->off[i] = o;
    if (lens[i]) memcpy(v->blob + o, tokens[i], lens[i]);
    o += (int64_t)lens[i];
    if (lens[i] && !v->is_eog[i]) v->sorted[v->n_sorted++] = i;
    if ((int32_t)lens[i] > v->max_len) v->max_len = (int32_t)lens[i];
  }
  v->off[n] = o;
  pthread_mutex_lock(&sort_mu);
  sort_v = v;
  qsort(v->sorted, (size_t)v->n_sorted, sizeof *v->sorted, cmp_tok);
  sort_v = NULL;
  pthread_mutex_unlock(&sort_mu);
  for (int32_t k = 0; k < v->n_sorted; k++) {
    size_t la = 0, lb;
    const char *a = NULL, *b = gram__vocab_token(v, v->sorted[k], &lb, NULL);
    if (k) a = gram__vocab_token(v, v->sorted[k - 1], &la, NULL);
    size_t l = 0;
    while (l < la && l < lb && a[l] == b[l]) l++;
    v->lcp[k] = (uint16_t)l;
  }
  return v;
oom:
  set_err(err, "out of memory");
  gram_vocab_destroy(v);
  return NULL;
}

void gram_vocab_destroy(gram_vocab_t *v) {
  if (!v) return;
  free(v->off), free(v->is_eog), free(v->sorted), free(v->lcp), free(v->eog), free(v->blob);
  free(v);
}

int32_t gram_vocab_size(const gram_vocab_t *v) { return v->n; }
size_t gram_mask_words(const gram_vocab_t *v) { return ((size_t)v->n + 31) / 32; }

const char *gram__vocab_token(const gram_vocab_t *v, int32_t id, size_t *len, int *is_eog) {
  if (id < 0 || id >= v->n) {
    *len = 0;
    if (is_eog) *is_eog = 0;
    return NULL;
  }
  *len = (size_t)(v->off[id + 1] - v->off[id]);
  if (is_eog) *is_eog = v->is_eog[id];
  return v->blob + v->off[id];
}
