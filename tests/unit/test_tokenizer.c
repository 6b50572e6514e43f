/* tests/unit/test_tokenizer.c — the tokenizer engine (text/tokenizer.h) on
 * small hand-built vocabularies: byte-level BPE merges by rank (and against
 * a naive quadratic reference on random vocabularies), the word cache,
 * pre-tokenizer regexes, special tokens, BOS/EOS, and building from GGUF
 * metadata. SentencePiece is test_tok_spm.c, decoding test_tok_stream.c;
 * the parity with Hugging Face and SentencePiece on real vocabularies is
 * tests/integration/test_tokenizer.py. */
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
  vb_expect_ids(tok, "abc", 3, 0, IDS(a, bc));       /* "b c" outranks "a b" */
  vb_expect_ids(tok, "aaa", 3, 0, IDS(aa, a));       /* leftmost first among equal ranks */
  vb_expect_ids(tok, "aaaa", 4, 0, IDS(aaaa));       /* merged pairs merge again */
  vb_expect_ids(tok, "aaaaa", 5, 0, IDS(aaaa, a));
  vb_expect_ids(tok, "", 0, 0, NOIDS);
  tok_destroy(tok);

  vb_t w = {0};
  vb_bytes(&w);
  vb_merge(&w, "a", "b"); /* now rank 0 */
  vb_merge(&w, "b", "c");
  tok = vb_build(&w, TOK_MODEL_BPE, "gpt2", NULL);
  vb_expect_ids(tok, "abc", 3, 0, IDS(vb_find(&w, "ab"), c));
  tok_destroy(tok);
  vb_free(&v);
  vb_free(&w);
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
      vb_pair_text(m, sizeof m, sym[i], " ", sym[i + 1]);
      for (int r = 0; r < v->nm && r < best_rank; r++) {
        if (strcmp(v->merge[r], m) == 0) {
          best_rank = r;
          best = i;
          break;
        }
      }
    }
    if (best < 0) break;
    vb_join(sym[best], sym[best + 1], sizeof sym[best]);
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
      vb_expect_ids(tok, word, (size_t)n, 0, want);
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
  const char *pairs[][2] = {{"a", "b"}, {vb_bl(" "), "a"}, {"ab", "c"}, {vb_bl(" a"), "b"},
                            {"c", "c"}, {vb_bl(" ab"), "c"}, {"cc", "a"}};
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
  vb_merge(&v, vb_bl(" "), "1");
  vb_merge(&v, vb_bl(" 1"), "2");
  vb_merge(&v, "1", "2");
  vb_merge(&v, "12", "3");
  int ab = vb_find(&v, "ab"), sp = ' ', one = '1', two = '2', three = '3';
  int sp12 = vb_find(&v, vb_bl(" 12")), n123 = vb_find(&v, "123");

  /* GPT-2: " 12" is one word */
  tok_t *tok = vb_build(&v, TOK_MODEL_BPE, "gpt2", NULL);
  vb_expect_ids(tok, "ab 12", 5, 0, IDS(ab, sp12));
  tok_destroy(tok);

  /* SmolLM2: each digit is its own word, the space before them too */
  tok = vb_build(&v, TOK_MODEL_BPE, "smollm", NULL);
  vb_expect_ids(tok, "ab 12", 5, 0, IDS(ab, sp, one, two));
  tok_destroy(tok);

  /* Llama 3: digits in groups of up to three, the space apart */
  tok = vb_build(&v, TOK_MODEL_BPE, "llama3", NULL);
  vb_expect_ids(tok, "ab 1231", 7, 0, IDS(ab, sp, n123, one));
  tok_destroy(tok);

  /* Qwen2: single digits */
  tok = vb_build(&v, TOK_MODEL_BPE, "qwen2", NULL);
  vb_expect_ids(tok, "123", 3, 0, IDS(one, two, three));
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
  vb_expect_ids(tok, "abc", 3, 0, IDS(abc));
  tok_destroy(tok);
  tok = vb_build(&v, TOK_MODEL_BPE, "gpt2", NULL);
  vb_expect_ids(tok, "abc", 3, 0, IDS(vb_find(&v, "ab"), 'c'));
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
  vb_expect_ids(tok, "!\x04?", 3, 0, IDS(vb_find(&v, "!?")));
  vb_expect_ids(tok, "a\x04" "b", 3, 0, IDS('a', 'b'));
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
  vb_expect_ids(tok, s, strlen(s), TOK_ENC_PARSE_SPECIAL, IDS('a', im, 'b', tool, imx));
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

/* A harmony vocabulary (gpt-oss's o200k_harmony): <|return|> and <|call|>
 * end a generation, <|end|> (which closes the analysis message before the
 * final one) does not, even named as the file's eot; the same <|end|>
 * without <|return|> and <|call|> (Phi-3's) still does. */
static void harmony_end_of_generation(void **state) {
  (void)state;
  vb_t v = {0};
  vb_bytes(&v);
  const int start = vb_add(&v, "<|start|>", 3, 0);
  const int end = vb_add(&v, "<|end|>", 3, 0);
  const int ret = vb_add(&v, "<|return|>", 3, 0);
  const int call = vb_add(&v, "<|call|>", 3, 0);
  const int text_end = vb_add(&v, "<|endoftext|>", 3, 0);
  tok_spec_t spec = tok_spec_default();
  spec.eos_id = ret;
  spec.eot_id = end;
  tok_t *tok = vb_build(&v, TOK_MODEL_BPE, "gpt2", &spec);
  assert_true(tok_is_eog(tok, ret));
  assert_true(tok_is_eog(tok, call));
  assert_true(tok_is_eog(tok, text_end));
  assert_false(tok_is_eog(tok, end));
  assert_false(tok_is_eog(tok, start));
  const int32_t *eog;
  assert_int_equal(tok_eog_ids(tok, &eog), 3);
  assert_int_equal(eog[0], ret);
  assert_int_equal(eog[1], call);
  assert_int_equal(eog[2], text_end);
  tok_destroy(tok);
  vb_free(&v);

  vb_t p = {0}; /* Phi-3: <|end|> ends its turns */
  vb_bytes(&p);
  const int phi_end = vb_add(&p, "<|end|>", 3, 0);
  tok = vb_build(&p, TOK_MODEL_BPE, "gpt2", NULL);
  assert_true(tok_is_eog(tok, phi_end));
  tok_destroy(tok);
  vb_free(&p);
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
  vb_expect_ids(tok, "a", 1, TOK_ENC_ADD_SPECIAL, IDS(bos, 'a', eos));
  vb_expect_ids(tok, "a", 1, 0, IDS('a'));
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
  vb_expect_ids(tok, "a", 1, TOK_ENC_ADD_SPECIAL, IDS(bos, 'a'));
  tok_destroy(tok);
  tok = vb_build(&v, TOK_MODEL_BPE, "smollm", &base);
  vb_expect_ids(tok, "a", 1, TOK_ENC_ADD_SPECIAL, IDS('a'));
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
  vb_expect_ids(tok, "ab", 2, 0, IDS('a', 'b'));
  tok_destroy(tok);
  tok_destroy(NULL);
  assert_true(tok_pre_supported("smollm"));
  assert_true(tok_pre_supported("llama-bpe"));
  assert_false(tok_pre_supported("nope"));
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
    else storage[i][vb_put_utf8(vb_gpt2_cp(i), storage[i])] = 0;
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
  vb_expect_ids(tok, "ab c", 4, TOK_ENC_ADD_SPECIAL, IDS(256, 258, ' ', 'c'));
  assert_true(tok_is_eog(tok, 257));
  tok_destroy(tok);

  tok = from_gguf(OK_SPM, err, sizeof err);
  assert_non_null(tok);
  assert_int_equal(tok_model(tok), TOK_MODEL_SPM);
  /* "▁" then bytes: the prefix space is a piece, "a" falls back to <0x61> */
  vb_expect_ids(tok, "a", 1, TOK_ENC_ADD_SPECIAL, IDS(256, 258, 'a'));
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
      cmocka_unit_test(harmony_end_of_generation),
      cmocka_unit_test(create_rejects_bad_specs),
      cmocka_unit_test(creates_from_gguf_metadata),
  };
  return cmocka_run_group_tests_name("tokenizer", tests, NULL, NULL);
}
