/* tests/unit/test_tok_spm.c — SentencePiece-style BPE (text/tok_spm.c) on
 * hand-built vocabularies: merges by score, the space prefix, byte
 * fallback, and a naive quadratic reference on random vocabularies. */
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

/* ---- SentencePiece ------------------------------------------------------------------ */

/* <unk> <s> </s>, the 256 byte tokens, then pieces. */
static void vb_spm_base(vb_t *v) {
  vb_add(v, "<unk>", 2, 0);
  vb_add(v, "<s>", 3, 0);
  vb_add(v, "</s>", 3, 0);
  for (int b = 0; b < 256; b++) {
    char t[8];
    snprintf(t, sizeof t, "<0x%02X>", b);
    vb_add(v, t, 6, 0);
  }
}

#define SP "\xE2\x96\x81" /* ▁ */

static void spm_prefix_scores_and_byte_fallback(void **state) {
  (void)state;
  vb_t v = {0};
  vb_spm_base(&v);
  int sp = vb_add(&v, SP, 1, -1);
  int a = vb_add(&v, "a", 1, -2);
  int b = vb_add(&v, "b", 1, -3);
  int spa = vb_add(&v, SP "a", 1, -4);
  int ab = vb_add(&v, "ab", 1, -5);
  int spab = vb_add(&v, SP "ab", 1, -6);
  tok_spec_t base = tok_spec_default();
  base.bos_id = 1;
  base.eos_id = 2;
  base.unk_id = 0;
  tok_t *tok = vb_build(&v, TOK_MODEL_SPM, NULL, &base);
  /* "▁a" (-4) merges before "ab" (-5); then "▁a"+"b" = "▁ab" */
  vb_expect_ids(tok, "ab", 2, 0, IDS(spab));
  vb_expect_ids(tok, "ab", 2, TOK_ENC_ADD_SPECIAL, IDS(1, spab)); /* SPM adds BOS by default */
  /* é (C3 A9) has no piece: its bytes */
  vb_expect_ids(tok, "ba é", strlen("ba é"), 0, IDS(sp, b, a, sp, 3 + 0xC3, 3 + 0xA9));
  int32_t ids[16];
  int64_t n = tok_encode(tok, "ba é", strlen("ba é"), 0, ids, 16);
  char out[32];
  assert_int_equal(tok_decode(tok, ids, (size_t)n, TOK_DEC_STRIP_PREFIX, out, sizeof out),
                   (int64_t)strlen("ba é"));
  assert_string_equal(out, "ba é");
  assert_int_equal(tok_decode(tok, ids, (size_t)n, 0, out, sizeof out), (int64_t)strlen(" ba é"));
  (void)ab;
  (void)spa;
  tok_destroy(tok);

  base.add_space_prefix = 0;
  tok = vb_build(&v, TOK_MODEL_SPM, NULL, &base);
  vb_expect_ids(tok, "ab", 2, 0, IDS(ab));
  tok_destroy(tok);
  vb_free(&v);
}

/* The naive definition for SentencePiece BPE over ASCII text: repeatedly
 * merge the adjacent pair whose concatenation is the best-scoring normal
 * piece, leftmost among equals. */
static int naive_spm(const vb_t *v, const char *esc, int *out) {
  char sym[128][64];
  int n = 0;
  for (const char *p = esc; *p;) {
    int k = ((uint8_t)*p == 0xE2) ? 3 : 1;
    memcpy(sym[n], p, (size_t)k);
    sym[n][k] = 0;
    n++;
    p += k;
  }
  for (;;) {
    int best = -1;
    float best_score = 0;
    for (int i = 0; i + 1 < n; i++) {
      char m[160];
      vb_pair_text(m, sizeof m, sym[i], "", sym[i + 1]);
      int id = vb_find(v, m);
      if (id < 0 || v->type[id] != 1) continue;
      if (best < 0 || v->score[id] > best_score) {
        best = i;
        best_score = v->score[id];
      }
    }
    if (best < 0) break;
    vb_join(sym[best], sym[best + 1], sizeof sym[best]);
    memmove(&sym[best + 1], &sym[best + 2], (size_t)(n - best - 2) * sizeof sym[0]);
    n--;
  }
  int k = 0;
  for (int i = 0; i < n; i++) {
    int id = vb_find(v, sym[i]);
    if (id >= 0) {
      out[k++] = id;
    } else {
      for (const char *p = sym[i]; *p; p++) out[k++] = 3 + (uint8_t)*p;
    }
  }
  return k;
}

static void spm_matches_naive_reference(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 1);
  const char *alpha[] = {"a", "b", "c", SP}; /* "d" and "e" have no piece: bytes */
  for (int round = 0; round < 20; round++) {
    vb_t v = {0};
    vb_spm_base(&v);
    for (int i = 0; i < 4; i++) vb_add(&v, alpha[i], 1, -(float)tu_below(&r, 1000));
    while (v.n < 259 + 60) {
      int l = 259 + (int)tu_below(&r, (uint64_t)(v.n - 259));
      int rr = 259 + (int)tu_below(&r, (uint64_t)(v.n - 259));
      char m[64];
      if (strlen(v.text[l]) + strlen(v.text[rr]) > 12) continue;
      snprintf(m, sizeof m, "%s%s", v.text[l], v.text[rr]);
      if (vb_find(&v, m) < 0) vb_add(&v, m, 1, -(float)tu_below(&r, 1000));
    }
    tok_spec_t base = tok_spec_default();
    base.add_space_prefix = 0;
    tok_t *tok = vb_build(&v, TOK_MODEL_SPM, NULL, &base);
    const char raw[] = "abc de";
    for (int t = 0; t < 50; t++) {
      char text[40], esc[160];
      int n = 1 + (int)tu_below(&r, 30);
      size_t e = 0;
      for (int i = 0; i < n; i++) {
        text[i] = raw[tu_below(&r, sizeof raw - 1)];
        if (text[i] == ' ') {
          memcpy(esc + e, SP, 3);
          e += 3;
        } else {
          esc[e++] = text[i];
        }
      }
      text[n] = 0;
      esc[e] = 0;
      int want[128];
      int nw = naive_spm(&v, esc, want);
      want[nw] = -1;
      vb_expect_ids(tok, text, (size_t)n, 0, want);
    }
    tok_destroy(tok);
    vb_free(&v);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(spm_prefix_scores_and_byte_fallback),
      cmocka_unit_test(spm_matches_naive_reference),
  };
  return cmocka_run_group_tests_name("tok_spm", tests, NULL, NULL);
}
