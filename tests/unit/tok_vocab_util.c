/* tests/unit/tok_vocab_util.c — vocabularies for the tokenizer tests (see
 * tok_vocab_util.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"
#include "tests/unit/gguf_writer.h"
#include "tests/unit/testutil.h"
#include "tests/unit/tok_vocab_util.h"
/* ---- building vocabularies -------------------------------------------------------- */



int vb_add(vb_t *v, const char *text, int type, float score) {
  assert_true(v->n < MAXT);
  v->text[v->n] = strdup(text);
  v->type[v->n] = type;
  v->score[v->n] = score;
  return v->n++;
}

int vb_find(const vb_t *v, const char *text) {
  for (int i = 0; i < v->n; i++) {
    if (strcmp(v->text[i], text) == 0) return i;
  }
  return -1;
}

void vb_merge(vb_t *v, const char *l, const char *r) {
  assert_true(v->nm < MAXM);
  char *m = malloc(strlen(l) + strlen(r) + 2);
  sprintf(m, "%s %s", l, r);
  v->merge[v->nm++] = m;
  char *joined = malloc(strlen(l) + strlen(r) + 1);
  sprintf(joined, "%s%s", l, r);
  if (vb_find(v, joined) < 0) vb_add(v, joined, 1, 0);
  free(joined);
}

void vb_free(vb_t *v) {
  for (int i = 0; i < v->n; i++) free(v->text[i]);
  for (int i = 0; i < v->nm; i++) free(v->merge[i]);
  memset(v, 0, sizeof *v);
}

/* GPT-2's bytes_to_unicode, written out the way the Python original builds
 * it: printable bytes keep their code point, the rest get 256, 257, ... */
uint32_t vb_gpt2_cp(int b) {
  int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  if (printable) return (uint32_t)b;
  uint32_t n = 0;
  for (int i = 0; i < b; i++) {
    int p = (i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE && i <= 0xFF);
    n += !p;
  }
  return 256 + n;
}

size_t vb_put_utf8(uint32_t cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* The byte-level form of raw text s ("a b" → "aĠb"). Static buffer. */
const char *vb_bl(const char *s) {
  static char buf[4][256];
  static int k;
  char *out = buf[k++ & 3];
  size_t o = 0;
  for (const uint8_t *p = (const uint8_t *)s; *p; p++) o += vb_put_utf8(vb_gpt2_cp(*p), out + o);
  out[o] = 0;
  return out;
}

/* A byte-level vocabulary whose first 256 tokens are the bytes, in order. */
void vb_bytes(vb_t *v) {
  for (int b = 0; b < 256; b++) {
    char t[8];
    t[vb_put_utf8(vb_gpt2_cp(b), t)] = 0;
    vb_add(v, t, 1, 0);
  }
}

tok_t *vb_build(const vb_t *v, tok_model_t model, const char *pre, const tok_spec_t *base) {
  static gguf_str_t toks[MAXT], merges[MAXM];
  for (int i = 0; i < v->n; i++) toks[i] = (gguf_str_t){v->text[i], strlen(v->text[i])};
  for (int i = 0; i < v->nm; i++) merges[i] = (gguf_str_t){v->merge[i], strlen(v->merge[i])};
  tok_spec_t s = base ? *base : tok_spec_default();
  s.model = model;
  s.pre = pre;
  s.n_tokens = v->n;
  s.tokens = toks;
  s.types = v->type;
  s.scores = v->score;
  s.n_merges = v->nm;
  s.merges = merges;
  char err[256];
  tok_t *tok = tok_create(&s, err, sizeof err);
  if (!tok) fprintf(stderr, "tok_create: %s\n", err);
  assert_non_null(tok);
  return tok;
}

/* Encodes s and checks the ids against want[nwant] (-1 terminated list). */
void vb_expect_ids(const tok_t *tok, const char *s, size_t len, int flags, const int *want) {
  int32_t ids[256];
  for (int i = 0; i < 256; i++) ids[i] = -7;
  int64_t n = tok_encode(tok, s, len, flags, ids, 256);
  int nwant = 0;
  while (want[nwant] >= 0) nwant++;
  if (n != nwant) {
    fprintf(stderr, "encode(\"%.*s\"): %lld ids:", (int)len, s, (long long)n);
    for (int64_t i = 0; i < n && i < 256; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
  }
  assert_int_equal(n, nwant);
  for (int i = 0; i < nwant; i++) assert_int_equal(ids[i], want[i]);
}



/* a ← a + b, for the naive references' fixed symbol buffers */
void vb_join(char *a, const char *b, size_t cap) {
  size_t la = strlen(a), lb = strlen(b);
  assert_true(la + lb < cap);
  memmove(a + la, b, lb + 1);
}

/* "l r" or "lr" into m[cap] */
void vb_pair_text(char *m, size_t cap, const char *l, const char *sep, const char *r) {
  m[0] = 0;
  vb_join(m, l, cap);
  vb_join(m, sep, cap);
  vb_join(m, r, cap);
}
