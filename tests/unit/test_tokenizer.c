/* tests/unit/test_tokenizer.c — the tokenizer engine (text/tokenizer.h) on
 * small hand-built vocabularies: BPE merges by rank (and against a naive
 * quadratic reference on random vocabularies), pre-tokenizer regexes,
 * special tokens, BOS/EOS, SentencePiece merges by score with byte fallback
 * (and its naive reference), the streaming detokenizer's hold-back of split
 * characters, and invalid UTF-8. The parity with Hugging Face and
 * SentencePiece on real vocabularies is tests/integration/test_tokenizer.py. */
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

/* ---- building vocabularies -------------------------------------------------------- */

enum { MAXT = 1024, MAXM = 1024 };

typedef struct vb {
  char *text[MAXT];
  int32_t type[MAXT];
  float score[MAXT];
  int n;
  char *merge[MAXM];
  int nm;
} vb_t;

static int vb_add(vb_t *v, const char *text, int type, float score) {
  assert_true(v->n < MAXT);
  v->text[v->n] = strdup(text);
  v->type[v->n] = type;
  v->score[v->n] = score;
  return v->n++;
}

static int vb_find(const vb_t *v, const char *text) {
  for (int i = 0; i < v->n; i++) {
    if (strcmp(v->text[i], text) == 0) return i;
  }
  return -1;
}

static void vb_merge(vb_t *v, const char *l, const char *r) {
  assert_true(v->nm < MAXM);
  char *m = malloc(strlen(l) + strlen(r) + 2);
  sprintf(m, "%s %s", l, r);
  v->merge[v->nm++] = m;
  char *joined = malloc(strlen(l) + strlen(r) + 1);
  sprintf(joined, "%s%s", l, r);
  if (vb_find(v, joined) < 0) vb_add(v, joined, 1, 0);
  free(joined);
}

static void vb_free(vb_t *v) {
  for (int i = 0; i < v->n; i++) free(v->text[i]);
  for (int i = 0; i < v->nm; i++) free(v->merge[i]);
  memset(v, 0, sizeof *v);
}

/* GPT-2's bytes_to_unicode, written out the way the Python original builds
 * it: printable bytes keep their code point, the rest get 256, 257, ... */
static uint32_t gpt2_cp(int b) {
  int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  if (printable) return (uint32_t)b;
  uint32_t n = 0;
  for (int i = 0; i < b; i++) {
    int p = (i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE && i <= 0xFF);
    n += !p;
  }
  return 256 + n;
}

static size_t put_utf8(uint32_t cp, char *out) {
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
static const char *bl(const char *s) {
  static char buf[4][256];
  static int k;
  char *out = buf[k++ & 3];
  size_t o = 0;
  for (const uint8_t *p = (const uint8_t *)s; *p; p++) o += put_utf8(gpt2_cp(*p), out + o);
  out[o] = 0;
  return out;
}

/* A byte-level vocabulary whose first 256 tokens are the bytes, in order. */
static void vb_bytes(vb_t *v) {
  for (int b = 0; b < 256; b++) {
    char t[8];
    t[put_utf8(gpt2_cp(b), t)] = 0;
    vb_add(v, t, 1, 0);
  }
}

static tok_t *vb_build(const vb_t *v, tok_model_t model, const char *pre, const tok_spec_t *base) {
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
static void expect_ids(const tok_t *tok, const char *s, size_t len, int flags, const int *want) {
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

#define IDS(...) ((const int[]){__VA_ARGS__, -1})
#define NOIDS ((const int[]){-1})

/* ---- byte-level BPE ---------------------------------------------------------------- */

static void bpe_merges_by_rank(void **state) {
  (void)state;
  vb_t v = {0};
  vb_bytes(&v);
  vb_merge(&v, "b", "c"); /* rank 0 */
  vb_merge(&v, "a", "b"); /* rank 1 */
  vb_merge(&v, "a", "a"); /* rank 2 */
  vb_merge(&v, "aa", "aa");
  tok_t *tok = vb_build(&v, TOK_MODEL_BPE, "gpt2", NULL);
  int a = 'a', c = 'c', bc = vb_find(&v, "bc"), aa = vb_find(&v, "aa"),
      aaaa = vb_find(&v, "aaaa");
  expect_ids(tok, "abc", 3, 0, IDS(a, bc));       /* "b c" outranks "a b" */
  expect_ids(tok, "aaa", 3, 0, IDS(aa, a));       /* leftmost first among equal ranks */
  expect_ids(tok, "aaaa", 4, 0, IDS(aaaa));       /* merged pairs merge again */
  expect_ids(tok, "aaaaa", 5, 0, IDS(aaaa, a));
  expect_ids(tok, "", 0, 0, NOIDS);
  tok_destroy(tok);

  vb_t w = {0};
  vb_bytes(&w);
  vb_merge(&w, "a", "b"); /* now rank 0 */
  vb_merge(&w, "b", "c");
  tok = vb_build(&w, TOK_MODEL_BPE, "gpt2", NULL);
  expect_ids(tok, "abc", 3, 0, IDS(vb_find(&w, "ab"), c));
  tok_destroy(tok);
  vb_free(&v);
  vb_free(&w);
}

/* a ← a + b, for the naive references' fixed symbol buffers */
static void join(char *a, const char *b, size_t cap) {
  size_t la = strlen(a), lb = strlen(b);
  assert_true(la + lb < cap);
  memmove(a + la, b, lb + 1);
}

/* "l r" or "lr" into m[cap] */
static void pair_text(char *m, size_t cap, const char *l, const char *sep, const char *r) {
  m[0] = 0;
  join(m, l, cap);
  join(m, sep, cap);
  join(m, r, cap);
}

/* The naive definition: repeatedly merge the adjacent pair of lowest rank,
 * leftmost among equals, rescanning the whole word each time. */
static int naive_bpe(const vb_t *v, const char *word, int *out) {
  char sym[64][64];
  int n = 0;
  for (const char *p = word; *p; p++) {
    sym[n][0] = *p;
    sym[n][1] = 0;
    n++;
  }
  for (;;) {
    int best = -1, best_rank = MAXM;
    for (int i = 0; i + 1 < n; i++) {
      char m[160];
      pair_text(m, sizeof m, sym[i], " ", sym[i + 1]);
      for (int r = 0; r < v->nm && r < best_rank; r++) {
        if (strcmp(v->merge[r], m) == 0) {
          best_rank = r;
          best = i;
          break;
        }
      }
    }
    if (best < 0) break;
    join(sym[best], sym[best + 1], sizeof sym[best]);
    memmove(&sym[best + 1], &sym[best + 2], (size_t)(n - best - 2) * sizeof sym[0]);
    n--;
  }
  for (int i = 0; i < n; i++) out[i] = vb_find(v, sym[i]);
  return n;
}

static void bpe_matches_naive_reference(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed());
  const char alpha[] = "abcd";
  for (int round = 0; round < 20; round++) {
    vb_t v = {0};
    vb_bytes(&v);
    /* random merges between the letters' byte tokens and the merged tokens */
    while (v.nm < 60) {
      uint64_t cands = (uint64_t)(v.n - 256 + 4);
      int l = (int)tu_below(&r, cands), rr = (int)tu_below(&r, cands);
      const char *ls = l < 4 ? v.text[(uint8_t)alpha[l]] : v.text[256 + l - 4];
      const char *rs = rr < 4 ? v.text[(uint8_t)alpha[rr]] : v.text[256 + rr - 4];
      if (strlen(ls) + strlen(rs) > 8) continue;
      char m[32];
      snprintf(m, sizeof m, "%s %s", ls, rs);
      int dup = 0;
      for (int k = 0; k < v.nm; k++) dup |= strcmp(v.merge[k], m) == 0;
      if (!dup) vb_merge(&v, ls, rs);
    }
    tok_t *tok = vb_build(&v, TOK_MODEL_BPE, "gpt2", NULL);
    for (int t = 0; t < 50; t++) {
      char word[40];
      int n = 1 + (int)tu_below(&r, 30);
      for (int i = 0; i < n; i++) word[i] = alpha[tu_below(&r, 4)];
      word[n] = 0;
      int want[64];
      int nw = naive_bpe(&v, word, want);
      want[nw] = -1;
      expect_ids(tok, word, (size_t)n, 0, want);
    }
    tok_destroy(tok);
    vb_free(&v);
  }
}

/* Long texts go through a cache of words already encoded in the call: the
 * result must equal encoding each word on its own. */
static void word_cache_is_exact(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 4);
  vb_t v = {0};
  vb_bytes(&v);
  const char *pairs[][2] = {{"a", "b"}, {bl(" "), "a"}, {"ab", "c"}, {bl(" a"), "b"},
                            {"c", "c"}, {bl(" ab"), "c"}, {"cc", "a"}};
  for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
    char l[16], rr[16];
    snprintf(l, sizeof l, "%s", pairs[i][0]);
    snprintf(rr, sizeof rr, "%s", pairs[i][1]);
    vb_merge(&v, l, rr);
  }
  tok_t *tok = vb_build(&v, TOK_MODEL_BPE, "gpt2", NULL);
  for (int round = 0; round < 20; round++) {
    char text[4096];
    size_t n = 0;
    int32_t want[4096];
    int64_t nw = 0;
    while (n < 3000) { /* " word" pieces: each is one pre-token */
      char w[40];
      size_t k = 0;
      w[k++] = ' ';
      size_t len = 1 + tu_below(&r, 30);
      for (size_t i = 0; i < len; i++) w[k++] = "abc"[tu_below(&r, 3)];
      int64_t m = tok_encode(tok, w, k, 0, want + nw, 4096 - (size_t)nw);
      assert_true(m > 0);
      nw += m;
      memcpy(text + n, w, k);
      n += k;
    }
    int32_t got[4096];
    assert_int_equal(tok_encode(tok, text, n, 0, got, 4096), nw);
    assert_memory_equal(got, want, (size_t)nw * sizeof(int32_t));
  }
  tok_destroy(tok);
  vb_free(&v);
}

static void pre_tokenizers_split_as_named(void **state) {
  (void)state;
  vb_t v = {0};
  vb_bytes(&v);
  vb_merge(&v, "a", "b");
  vb_merge(&v, bl(" "), "1");
  vb_merge(&v, bl(" 1"), "2");
  vb_merge(&v, "1", "2");
  vb_merge(&v, "12", "3");
  int ab = vb_find(&v, "ab"), sp = ' ', one = '1', two = '2', three = '3';
  int sp12 = vb_find(&v, bl(" 12")), n123 = vb_find(&v, "123");

  /* GPT-2: " 12" is one word */
  tok_t *tok = vb_build(&v, TOK_MODEL_BPE, "gpt2", NULL);
  expect_ids(tok, "ab 12", 5, 0, IDS(ab, sp12));
  tok_destroy(tok);

  /* SmolLM2: each digit is its own word, the space before them too */
  tok = vb_build(&v, TOK_MODEL_BPE, "smollm", NULL);
  expect_ids(tok, "ab 12", 5, 0, IDS(ab, sp, one, two));
  tok_destroy(tok);

  /* Llama 3: digits in groups of up to three, the space apart */
  tok = vb_build(&v, TOK_MODEL_BPE, "llama3", NULL);
  expect_ids(tok, "ab 1231", 7, 0, IDS(ab, sp, n123, one));
  tok_destroy(tok);

  /* Qwen2: single digits */
  tok = vb_build(&v, TOK_MODEL_BPE, "qwen2", NULL);
  expect_ids(tok, "123", 3, 0, IDS(one, two, three));
  tok_destroy(tok);
  vb_free(&v);
}

static void llama3_ignores_merges_for_whole_words(void **state) {
  (void)state;
  vb_t v = {0};
  vb_bytes(&v);
  vb_merge(&v, "a", "b");
  int abc = vb_add(&v, "abc", 1, 0); /* a token no merge builds */
  tok_t *tok = vb_build(&v, TOK_MODEL_BPE, "llama3", NULL);
  expect_ids(tok, "abc", 3, 0, IDS(abc));
  tok_destroy(tok);
  tok = vb_build(&v, TOK_MODEL_BPE, "gpt2", NULL);
  expect_ids(tok, "abc", 3, 0, IDS(vb_find(&v, "ab"), 'c'));
  tok_destroy(tok);
  vb_free(&v);
}

static void bytes_without_tokens_are_dropped(void **state) {
  (void)state;
  vb_t v = {0};
  vb_bytes(&v);
  vb_merge(&v, "!", "?");
  free(v.text[0x04]);
  v.text[0x04] = strdup("<unused-4>"); /* byte 0x04 has no token now */
  v.type[0x04] = 5;
  tok_t *tok = vb_build(&v, TOK_MODEL_BPE, "gpt2", NULL);
  /* as in HF tokenizers: the byte vanishes and its neighbours in the same
   * word become adjacent and merge */
  expect_ids(tok, "!\x04?", 3, 0, IDS(vb_find(&v, "!?")));
  expect_ids(tok, "a\x04" "b", 3, 0, IDS('a', 'b'));
  tok_destroy(tok);
  vb_free(&v);
}

/* ---- special tokens, BOS/EOS, end of generation ----------------------------------- */

static void special_tokens_parsed_or_plain(void **state) {
  (void)state;
  vb_t v = {0};
  vb_bytes(&v);
  int im = vb_add(&v, "<|im_start|>", 3, 0);
  int imx = vb_add(&v, "<|im_start|>x", 3, 0);
  int tool = vb_add(&v, "<tool>", 4, 0);
  int end = vb_add(&v, "<|im_end|>", 3, 0);
  tok_t *tok = vb_build(&v, TOK_MODEL_BPE, "gpt2", NULL);
  const char *s = "a<|im_start|>b<tool><|im_start|>x";
  expect_ids(tok, s, strlen(s), TOK_ENC_PARSE_SPECIAL, IDS('a', im, 'b', tool, imx));
  /* parsing off: control tokens are text, user-defined ones still match */
  int32_t ids[64];
  int64_t n = tok_encode(tok, s, strlen(s), 0, ids, 64);
  assert_true(n > 5);
  int saw_tool = 0;
  for (int64_t i = 0; i < n; i++) {
    assert_int_not_equal(ids[i], im);
    assert_int_not_equal(ids[i], imx);
    saw_tool |= ids[i] == tool;
  }
  assert_true(saw_tool);
  char out[64];
  assert_int_equal(tok_decode(tok, ids, (size_t)n, 0, out, sizeof out), (int64_t)strlen(s));
  assert_string_equal(out, s);
  /* decoding skips control tokens unless asked */
  int32_t seq[] = {'a', im, 'b', end};
  assert_int_equal(tok_decode(tok, seq, 4, 0, out, sizeof out), 2);
  assert_string_equal(out, "ab");
  assert_int_equal(tok_decode(tok, seq, 4, TOK_DEC_SPECIAL, out, sizeof out), 24);
  assert_string_equal(out, "a<|im_start|>b<|im_end|>");
  tok_destroy(tok);
  vb_free(&v);
}

static void bos_eos_and_end_of_generation(void **state) {
  (void)state;
  vb_t v = {0};
  vb_bytes(&v);
  int eot = vb_add(&v, "<|endoftext|>", 3, 0);
  int bos = vb_add(&v, "<|im_start|>", 3, 0);
  int eos = vb_add(&v, "<|im_end|>", 3, 0);
  int other = vb_add(&v, "<repo_name>", 3, 0);
  tok_spec_t base = tok_spec_default();
  base.bos_id = bos;
  base.eos_id = eos;
  base.add_bos = 1;
  base.add_eos = 1;
  tok_t *tok = vb_build(&v, TOK_MODEL_BPE, "smollm", &base);
  expect_ids(tok, "a", 1, TOK_ENC_ADD_SPECIAL, IDS(bos, 'a', eos));
  expect_ids(tok, "a", 1, 0, IDS('a'));
  assert_int_equal(tok_bos(tok), bos);
  assert_int_equal(tok_eos(tok), eos);
  assert_true(tok_adds_bos(tok));
  assert_true(tok_is_eog(tok, eos));
  assert_true(tok_is_eog(tok, eot));
  assert_false(tok_is_eog(tok, other));
  assert_false(tok_is_eog(tok, bos));
  assert_false(tok_is_eog(tok, 'a'));
  const int32_t *eog;
  assert_int_equal(tok_eog_ids(tok, &eog), 2);
  assert_int_equal(eog[0], eot);
  assert_int_equal(eog[1], eos);
  assert_int_equal(tok_eot(tok), eos); /* <|im_end|> ends a turn */
  tok_destroy(tok);

  base.add_bos = -1; /* the pre-tokenizer's default: llama3 adds BOS, smollm does not */
  base.add_eos = -1;
  tok = vb_build(&v, TOK_MODEL_BPE, "llama3", &base);
  expect_ids(tok, "a", 1, TOK_ENC_ADD_SPECIAL, IDS(bos, 'a'));
  tok_destroy(tok);
  tok = vb_build(&v, TOK_MODEL_BPE, "smollm", &base);
  expect_ids(tok, "a", 1, TOK_ENC_ADD_SPECIAL, IDS('a'));
  tok_destroy(tok);
  vb_free(&v);
}

static void create_rejects_bad_specs(void **state) {
  (void)state;
  vb_t v = {0};
  vb_bytes(&v);
  static gguf_str_t toks[256];
  for (int i = 0; i < 256; i++) toks[i] = (gguf_str_t){v.text[i], strlen(v.text[i])};
  tok_spec_t s = tok_spec_default();
  s.model = TOK_MODEL_BPE;
  s.n_tokens = 256;
  s.tokens = toks;
  char err[256];
  s.pre = "no-such-pre";
  assert_null(tok_create(&s, err, sizeof err));
  assert_non_null(strstr(err, "no-such-pre"));
  s.pre = "gpt2";
  s.bos_id = 256;
  assert_null(tok_create(&s, err, sizeof err));
  assert_non_null(strstr(err, "bos_token_id"));
  s.bos_id = -1;
  s.n_tokens = 0;
  assert_null(tok_create(&s, err, sizeof err));
  /* a merge that is not two tokens is skipped, not fatal */
  s.n_tokens = 256;
  gguf_str_t bad[] = {{"zz qq", 5}, {"nospace", 7}, {"a b", 3}};
  s.merges = bad;
  s.n_merges = 3;
  tok_t *tok = tok_create(&s, err, sizeof err);
  assert_non_null(tok); /* "a b" → "ab" is not a token either: all three skipped */
  expect_ids(tok, "ab", 2, 0, IDS('a', 'b'));
  tok_destroy(tok);
  tok_destroy(NULL);
  assert_true(tok_pre_supported("smollm"));
  assert_true(tok_pre_supported("llama-bpe"));
  assert_false(tok_pre_supported("nope"));
  vb_free(&v);
}

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
  expect_ids(tok, "ab", 2, 0, IDS(spab));
  expect_ids(tok, "ab", 2, TOK_ENC_ADD_SPECIAL, IDS(1, spab)); /* SPM adds BOS by default */
  /* é (C3 A9) has no piece: its bytes */
  expect_ids(tok, "ba é", strlen("ba é"), 0, IDS(sp, b, a, sp, 3 + 0xC3, 3 + 0xA9));
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
  expect_ids(tok, "ab", 2, 0, IDS(ab));
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
      pair_text(m, sizeof m, sym[i], "", sym[i + 1]);
      int id = vb_find(v, m);
      if (id < 0 || v->type[id] != 1) continue;
      if (best < 0 || v->score[id] > best_score) {
        best = i;
        best_score = v->score[id];
      }
    }
    if (best < 0) break;
    join(sym[best], sym[best + 1], sizeof sym[best]);
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
      expect_ids(tok, text, (size_t)n, 0, want);
    }
    tok_destroy(tok);
    vb_free(&v);
  }
}

/* ---- streaming and UTF-8 ------------------------------------------------------------ */

/* An independent check that s[n] is well-formed UTF-8: decode, then reject
 * overlong forms, surrogates and code points past U+10FFFF. */
static int well_formed(const uint8_t *s, size_t n) {
  for (size_t i = 0; i < n;) {
    uint32_t c = s[i], cp;
    int k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!k || i + (size_t)k > n) return 0;
    cp = k == 1 ? c : c & (0x7F >> k);
    for (int j = 1; j < k; j++) {
      if ((s[i + (size_t)j] & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (s[i + (size_t)j] & 0x3F);
    }
    uint32_t min = k == 1 ? 0 : k == 2 ? 0x80 : k == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    i += (size_t)k;
  }
  return 1;
}

static void stream_holds_back_split_emoji(void **state) {
  (void)state;
  vb_t v = {0};
  vb_bytes(&v);
  int end = vb_add(&v, "<|im_end|>", 3, 0);
  tok_t *tok = vb_build(&v, TOK_MODEL_BPE, "gpt2", NULL);
  const char *s = "x\xF0\x9F\x98\x80y"; /* x 😀 y, one token per byte */
  int32_t ids[16];
  int64_t n = tok_encode(tok, s, strlen(s), 0, ids, 16);
  assert_int_equal(n, 6);
  tok_stream_t st;
  tok_stream_init(&st, tok, 0);
  size_t cap = tok_stream_max_out(tok);
  char *out = malloc(cap);
  const int want_len[] = {1, 0, 0, 0, 4, 1};
  char all[32];
  size_t k = 0;
  for (int i = 0; i < 6; i++) {
    int w = tok_stream_push(&st, ids[i], out, cap);
    assert_int_equal(w, want_len[i]);
    memcpy(all + k, out, (size_t)w);
    k += (size_t)w;
    if (i == 3) { /* a control token in the middle is skipped and breaks nothing */
      assert_int_equal(tok_stream_push(&st, end, out, cap), 0);
    }
  }
  assert_int_equal(tok_stream_flush(&st, out, cap), 0);
  assert_int_equal(k, strlen(s));
  assert_memory_equal(all, s, k);
  /* too small an output buffer: refused, and the stream is unchanged */
  tok_stream_init(&st, tok, 0);
  assert_int_equal(tok_stream_push(&st, ids[1], out, cap), 0);
  assert_int_equal(tok_stream_push(&st, ids[2], out, cap), 0);
  assert_int_equal(tok_stream_push(&st, ids[3], out, cap), 0);
  assert_int_equal(tok_stream_push(&st, ids[4], out, 3), -ENOSPC);
  assert_int_equal(tok_stream_push(&st, ids[4], out, 4), 4);
  assert_memory_equal(out, "\xF0\x9F\x98\x80", 4);
  assert_int_equal(tok_stream_push(&st, -1, out, cap), -EINVAL);
  /* rendering specials */
  tok_stream_init(&st, tok, TOK_DEC_SPECIAL);
  assert_int_equal(tok_stream_push(&st, end, out, cap), 10);
  assert_memory_equal(out, "<|im_end|>", 10);
  free(out);
  tok_destroy(tok);
  vb_free(&v);
}

static void stream_replaces_what_cannot_complete(void **state) {
  (void)state;
  vb_t v = {0};
  vb_bytes(&v);
  tok_t *tok = vb_build(&v, TOK_MODEL_BPE, "gpt2", NULL);
  size_t cap = tok_stream_max_out(tok);
  char *out = malloc(cap);
  tok_stream_t st;
  /* F0 9F then 'A': the held bytes can never complete → one U+FFFD */
  tok_stream_init(&st, tok, 0);
  assert_int_equal(tok_stream_push(&st, 0xF0, out, cap), 0);
  assert_int_equal(tok_stream_push(&st, 0x9F, out, cap), 0);
  assert_int_equal(tok_stream_push(&st, 'A', out, cap), 4);
  assert_memory_equal(out, "\xEF\xBF\xBD" "A", 4);
  /* a lone continuation byte: U+FFFD at once */
  assert_int_equal(tok_stream_push(&st, 0x80, out, cap), 3);
  /* an incomplete character at the end: flushed as U+FFFD */
  assert_int_equal(tok_stream_push(&st, 0xE2, out, cap), 0);
  assert_int_equal(tok_stream_flush(&st, out, cap), 3);
  assert_memory_equal(out, "\xEF\xBF\xBD", 3);
  assert_int_equal(tok_stream_flush(&st, out, cap), 0);

  /* random byte sequences: whatever the chunking, the output is well-formed
   * and equals the whole sequence decoded with replacement */
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 2);
  const uint8_t pool[] = {'a', 0x80, 0x9F, 0xBF, 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x90, 0xF4, 0xED, 0xA0, 0xFF};
  for (int t = 0; t < 300; t++) {
    int32_t ids[24];
    int n = 1 + (int)tu_below(&r, 24);
    for (int i = 0; i < n; i++) ids[i] = pool[tu_below(&r, sizeof pool)];
    char got[128], want[128];
    size_t k = 0;
    tok_stream_init(&st, tok, 0);
    for (int i = 0; i < n; i++) {
      int w = tok_stream_push(&st, ids[i], out, cap);
      assert_true(w >= 0);
      memcpy(got + k, out, (size_t)w);
      k += (size_t)w;
    }
    int w = tok_stream_flush(&st, out, cap);
    memcpy(got + k, out, (size_t)w);
    k += (size_t)w;
    int64_t wl = tok_decode(tok, ids, (size_t)n, TOK_DEC_VALID_UTF8, want, sizeof want);
    assert_true(well_formed((const uint8_t *)got, k));
    assert_int_equal(k, wl);
    assert_memory_equal(got, want, k);
  }
  free(out);
  tok_destroy(tok);
  vb_free(&v);
}

static void invalid_utf8_is_replaced_or_refused(void **state) {
  (void)state;
  vb_t v = {0};
  vb_bytes(&v);
  tok_t *tok = vb_build(&v, TOK_MODEL_BPE, "smollm", NULL);
  /* maximal ill-formed subsequences, as Python's decode("utf-8", "replace") */
  static const struct {
    const char *in, *want;
  } cases[] = {
      {"\xE0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xE1\x80" "A", "\xEF\xBF\xBD" "A"},
      {"\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xF0\x9F\x98", "\xEF\xBF\xBD"},
      {"a\xF0\x9F\x98\x80\x80" "b", "a\xF0\x9F\x98\x80\xEF\xBF\xBD" "b"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    int32_t got[64], want[64];
    int64_t ng = tok_encode(tok, cases[c].in, strlen(cases[c].in), 0, got, 64);
    int64_t nw = tok_encode(tok, cases[c].want, strlen(cases[c].want), 0, want, 64);
    assert_true(ng > 0);
    assert_int_equal(ng, nw);
    assert_memory_equal(got, want, (size_t)ng * sizeof(int32_t));
    assert_int_equal(tok_encode(tok, cases[c].in, strlen(cases[c].in), TOK_ENC_STRICT, got, 64),
                     -EILSEQ);
    char out[64];
    assert_int_equal(tok_decode(tok, got, (size_t)ng, 0, out, sizeof out),
                     (int64_t)strlen(cases[c].want));
    assert_string_equal(out, cases[c].want);
  }
  assert_int_equal(tok_encode(tok, NULL, 3, 0, NULL, 0), -EINVAL);
  assert_int_equal(tok_encode(tok, NULL, 0, 0, NULL, 0), 0);

  /* random bytes never crash; what they decode to is well-formed and encodes
   * to the same ids */
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 3);
  for (int t = 0; t < 300; t++) {
    uint8_t text[64];
    size_t n = tu_below(&r, sizeof text);
    for (size_t i = 0; i < n; i++) text[i] = (uint8_t)tu_next(&r);
    int32_t ids[256];
    int64_t k = tok_encode(tok, (const char *)text, n, 0, ids, 256);
    assert_true(k >= 0 && k <= 256);
    char out[256];
    int64_t m = tok_decode(tok, ids, (size_t)k, 0, out, sizeof out);
    assert_true(m >= 0 && m < (int64_t)sizeof out);
    assert_true(well_formed((const uint8_t *)out, (size_t)m));
    int32_t again[256];
    assert_int_equal(tok_encode(tok, out, (size_t)m, TOK_ENC_STRICT, again, 256), k);
    assert_memory_equal(again, ids, (size_t)k * sizeof(int32_t));
  }
  tok_destroy(tok);
  vb_free(&v);
}

static void decode_is_snprintf_like(void **state) {
  (void)state;
  vb_t v = {0};
  vb_bytes(&v);
  vb_merge(&v, "a", "b");
  tok_t *tok = vb_build(&v, TOK_MODEL_BPE, "gpt2", NULL);
  int32_t ids[] = {vb_find(&v, "ab"), 'c', vb_find(&v, "ab")};
  char out[8];
  memset(out, 'Z', sizeof out);
  assert_int_equal(tok_decode(tok, ids, 3, 0, out, 4), 5);
  assert_string_equal(out, "abc");
  assert_int_equal(tok_decode(tok, ids, 3, 0, NULL, 0), 5);
  int32_t bad[] = {'a', 99999};
  assert_int_equal(tok_decode(tok, bad, 2, 0, out, sizeof out), -EINVAL);
  /* encode returns the full count even when the array is short */
  int32_t few[2];
  assert_int_equal(tok_encode(tok, "ab ab ab", 8, 0, few, 2), 5); /* ab Ġ ab Ġ ab */
  assert_int_equal(few[0], ids[0]);
  size_t len;
  assert_non_null(tok_piece(tok, ' ', &len));
  assert_int_equal(len, 1);
  assert_null(tok_piece(tok, -1, &len));
  assert_int_equal(tok_find(tok, bl(" "), strlen(bl(" "))), ' ');
  assert_int_equal(tok_find(tok, "zzz", 3), -1);
  assert_int_equal(tok_type(tok, 'a'), TOK_TYPE_NORMAL);
  assert_int_equal(tok_type(tok, 1 << 20), -EINVAL);
  tok_destroy(tok);
  vb_free(&v);
}

/* ---- from GGUF metadata ------------------------------------------------------------- */

typedef enum breakage {
  OK_BPE, OK_SPM, NO_MODEL, BERT_MODEL, UNKNOWN_PRE, TOKENS_NOT_STRINGS, TYPES_SHORT,
  SCORES_NOT_NUMBERS, BOS_NOT_INT, BOS_OUT_OF_RANGE, ADD_BOS_NOT_BOOL, MERGES_NOT_STRINGS,
} breakage_t;

/* A GGUF image with only tokenizer keys: the 256 byte tokens (byte-level or
 * <0xXX>), "ab", and control <s> </s>; broken as asked. */
static tok_t *from_gguf(breakage_t b, char *err, size_t err_len) {
  int spm = b == OK_SPM;
  const char *toks[259];
  char storage[256][8];
  int32_t types[259];
  float scores[259];
  for (int i = 0; i < 256; i++) {
    if (spm) snprintf(storage[i], sizeof storage[i], "<0x%02X>", i);
    else storage[i][put_utf8(gpt2_cp(i), storage[i])] = 0;
    toks[i] = storage[i];
    types[i] = spm ? 6 : 1;
    scores[i] = 0;
  }
  toks[256] = "<s>";
  toks[257] = "</s>";
  toks[258] = spm ? "\xE2\x96\x81" : "ab";
  types[256] = types[257] = 3;
  types[258] = 1;
  scores[256] = scores[257] = 0;
  scores[258] = -1;
  gw_t *w = gw_new();
  if (b != NO_MODEL) gw_kv_str(w, "tokenizer.ggml.model", b == BERT_MODEL ? "bert" : spm ? "llama" : "gpt2");
  if (!spm) gw_kv_str(w, "tokenizer.ggml.pre", b == UNKNOWN_PRE ? "klingon" : "smollm");
  if (b == TOKENS_NOT_STRINGS) gw_kv_arr(w, "tokenizer.ggml.tokens", GGUF_TYPE_INT32, 259, types);
  else gw_kv_arr_str(w, "tokenizer.ggml.tokens", 259, toks);
  gw_kv_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, b == TYPES_SHORT ? 258 : 259, types);
  if (spm) gw_kv_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, 259, scores);
  if (b == SCORES_NOT_NUMBERS) gw_kv_arr_str(w, "tokenizer.ggml.scores", 259, toks);
  const char *merges[] = {"a b"};
  if (!spm) {
    if (b == MERGES_NOT_STRINGS) gw_kv_arr(w, "tokenizer.ggml.merges", GGUF_TYPE_INT32, 1, types);
    else gw_kv_arr_str(w, "tokenizer.ggml.merges", 1, merges);
  }
  if (b == BOS_NOT_INT) gw_kv_str(w, "tokenizer.ggml.bos_token_id", "256");
  else gw_kv_u32(w, "tokenizer.ggml.bos_token_id", b == BOS_OUT_OF_RANGE ? 259 : 256);
  gw_kv_u32(w, "tokenizer.ggml.eos_token_id", 257);
  if (b == ADD_BOS_NOT_BOOL) gw_kv_u32(w, "tokenizer.ggml.add_bos_token", 1);
  else gw_kv_bool(w, "tokenizer.ggml.add_bos_token", 1);
  size_t size;
  uint8_t *img = gw_finish(w, &size);
  gw_free(w);
  gguf_ctx_t *g = gguf_open_buffer(img, size, err, err_len);
  assert_non_null(g);
  tok_t *tok = tok_create_from_gguf(g, err, err_len);
  gguf_close(g); /* the tokenizer keeps nothing of the file */
  free(img);
  return tok;
}

static void creates_from_gguf_metadata(void **state) {
  (void)state;
  char err[256];
  tok_t *tok = from_gguf(OK_BPE, err, sizeof err);
  assert_non_null(tok);
  assert_int_equal(tok_model(tok), TOK_MODEL_BPE);
  assert_int_equal(tok_n_vocab(tok), 259);
  expect_ids(tok, "ab c", 4, TOK_ENC_ADD_SPECIAL, IDS(256, 258, ' ', 'c'));
  assert_true(tok_is_eog(tok, 257));
  tok_destroy(tok);

  tok = from_gguf(OK_SPM, err, sizeof err);
  assert_non_null(tok);
  assert_int_equal(tok_model(tok), TOK_MODEL_SPM);
  /* "▁" then bytes: the prefix space is a piece, "a" falls back to <0x61> */
  expect_ids(tok, "a", 1, TOK_ENC_ADD_SPECIAL, IDS(256, 258, 'a'));
  tok_destroy(tok);

  static const struct {
    breakage_t b;
    const char *says;
  } bad[] = {
      {NO_MODEL, "tokenizer.ggml.model"},     {BERT_MODEL, "bert"},
      {UNKNOWN_PRE, "klingon"},               {TOKENS_NOT_STRINGS, "tokenizer.ggml.tokens"},
      {TYPES_SHORT, "token_type"},            {SCORES_NOT_NUMBERS, "scores"},
      {BOS_NOT_INT, "bos_token_id"},          {BOS_OUT_OF_RANGE, "bos_token_id"},
      {ADD_BOS_NOT_BOOL, "add_bos_token"},    {MERGES_NOT_STRINGS, "merges"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    err[0] = 0;
    assert_null(from_gguf(bad[i].b, err, sizeof err));
    if (!strstr(err, bad[i].says)) fprintf(stderr, "case %zu: \"%s\"\n", i, err);
    assert_non_null(strstr(err, bad[i].says));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bpe_merges_by_rank),
      cmocka_unit_test(bpe_matches_naive_reference),
      cmocka_unit_test(word_cache_is_exact),
      cmocka_unit_test(pre_tokenizers_split_as_named),
      cmocka_unit_test(llama3_ignores_merges_for_whole_words),
      cmocka_unit_test(bytes_without_tokens_are_dropped),
      cmocka_unit_test(special_tokens_parsed_or_plain),
      cmocka_unit_test(bos_eos_and_end_of_generation),
      cmocka_unit_test(create_rejects_bad_specs),
      cmocka_unit_test(spm_prefix_scores_and_byte_fallback),
      cmocka_unit_test(spm_matches_naive_reference),
      cmocka_unit_test(stream_holds_back_split_emoji),
      cmocka_unit_test(stream_replaces_what_cannot_complete),
      cmocka_unit_test(invalid_utf8_is_replaced_or_refused),
      cmocka_unit_test(decode_is_snprintf_like),
      cmocka_unit_test(creates_from_gguf_metadata),
  };
  return cmocka_run_group_tests_name("tokenizer", tests, NULL, NULL);
}
