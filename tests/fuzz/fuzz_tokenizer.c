/* tests/fuzz/fuzz_tokenizer.c — libFuzzer target for the tokenizer
 * (text/tokenizer.h) with the default model's vocabulary.
 *
 * The first input byte picks the mode and flags, the rest is the payload:
 *
 *   bit 3 clear: the payload is text. It is encoded (bit 0: parse special
 *     tokens, bit 1: add BOS/EOS, bit 2: strict UTF-8). Promises checked:
 *     encoding succeeds (or fails with -EILSEQ in strict mode, exactly when
 *     the text is not valid UTF-8), every id is in the vocabulary, a second
 *     encoding gives the same ids, and valid text without the bytes the
 *     vocabulary cannot represent decodes back to itself.
 *   bit 3 set: the payload is token ids (2 bytes each, modulo the vocabulary
 *     size). The streaming detokenizer fed one id at a time (bit 0: render
 *     special tokens) must give exactly tok_decode with replacement of
 *     ill-formed UTF-8, always valid UTF-8, and never more than
 *     tok_stream_max_out per call.
 *
 * The model comes from $TRAM_FUZZ_MODEL, else the default model's path
 * (run from the repository root, as scripts/run-fuzz-smoke.sh does).
 *
 *   make fuzz
 *   build/fuzz/fuzz_tokenizer -max_total_time=180 tests/fuzz/corpus/fuzz_tokenizer */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "text/tok_internal.h"
#include "text/tokenizer.h"

#define CHECK(cond) \
  do {              \
    if (!(cond)) __builtin_trap(); \
  } while (0)

static tok_t *tok;
static uint8_t lossy[256]; /* bytes some character containing them does not round-trip through */

/* One valid character that contains byte b (as lead or continuation byte);
 * returns its length, 0 for bytes that never occur in UTF-8. */
static int char_with(uint8_t b, uint8_t out[4]) {
  if (b < 0x80) return out[0] = b, 1;
  if (b <= 0xBF) return out[0] = 0xF0, out[1] = 0x90, out[2] = b, out[3] = 0x80, 4;
  if (b >= 0xC2 && b <= 0xDF) return out[0] = b, out[1] = 0x80, 2;
  if (b == 0xE0) return out[0] = b, out[1] = 0xA0, out[2] = 0x80, 3;
  if (b >= 0xE1 && b <= 0xEF) return out[0] = b, out[1] = 0x80, out[2] = 0x80, 3;
  if (b == 0xF0) return out[0] = b, out[1] = 0x90, out[2] = 0x80, out[3] = 0x80, 4;
  if (b >= 0xF1 && b <= 0xF4) return out[0] = b, out[1] = 0x80, out[2] = 0x80, out[3] = 0x80, 4;
  return 0;
}

/* Encodes text and returns the ids in a malloc'd array (*n of them). */
static int32_t *encode(const uint8_t *text, size_t len, int flags, int64_t *n) {
  int32_t first[8];
  *n = tok_encode(tok, (const char *)text, len, flags, first, 8);
  if (*n < 0) return NULL;
  int32_t *ids = malloc(((size_t)*n + 1) * sizeof *ids);
  CHECK(ids);
  if (*n <= 8) {
    memcpy(ids, first, (size_t)*n * sizeof *ids);
  } else {
    CHECK(tok_encode(tok, (const char *)text, len, flags, ids, (size_t)*n) == *n);
    CHECK(memcmp(ids, first, sizeof first) == 0);
  }
  return ids;
}

/* Decodes ids into a malloc'd string; *len is its length. */
static char *decode(const int32_t *ids, size_t n, int flags, int64_t *len) {
  *len = tok_decode(tok, ids, n, flags, NULL, 0);
  CHECK(*len >= 0);
  char *out = malloc((size_t)*len + 1);
  CHECK(out);
  CHECK(tok_decode(tok, ids, n, flags, out, (size_t)*len + 1) == *len);
  CHECK(out[*len] == 0);
  return out;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  const char *path = getenv("TRAM_FUZZ_MODEL");
  if (!path) path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  char err[256] = "";
  gguf_ctx_t *g = gguf_open(path, err, sizeof err);
  if (!g) {
    fprintf(stderr, "fuzz_tokenizer: %s: %s (set TRAM_FUZZ_MODEL, or run from the repository root after make model)\n",
            path, err);
    exit(1);
  }
  tok = tok_create_from_gguf(g, err, sizeof err);
  gguf_close(g);
  if (!tok) {
    fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, err);
    exit(1);
  }
  for (int b = 0; b < 256; b++) {
    uint8_t c[4];
    int k = char_with((uint8_t)b, c);
    if (!k) continue;
    int64_t n, len;
    int32_t *ids = encode(c, (size_t)k, 0, &n);
    CHECK(ids);
    char *back = decode(ids, (size_t)n, 0, &len);
    lossy[b] = len != k || memcmp(back, c, (size_t)k) != 0;
    free(back);
    free(ids);
  }
  return 0;
}

/* Marked text (tok_mark_specials) encoded with TOK_ENC_MARKED gives what
 * the text gives with its control tokens' texts as plain text. */
static void fuzz_marked(const uint8_t *text, size_t len, int flags) {
  char *marked = malloc(tok_mark_cap(len));
  CHECK(marked);
  size_t m = tok_mark_specials(tok, (const char *)text, len, marked);
  int64_t n_plain, n_marked;
  int32_t *plain = encode(text, len, flags & ~TOK_ENC_PARSE_SPECIAL, &n_plain);
  int32_t *ids = encode((const uint8_t *)marked, m, flags | TOK_ENC_MARKED, &n_marked);
  if (utf8_valid(text, len)) {
    CHECK(plain && ids && n_plain == n_marked);
    CHECK(memcmp(plain, ids, (size_t)n_plain * sizeof *ids) == 0);
  }
  free(plain);
  free(ids);
  free(marked);
}

static void fuzz_text(int mode, const uint8_t *text, size_t len) {
  int flags = (mode & 1 ? TOK_ENC_PARSE_SPECIAL : 0) | (mode & 2 ? TOK_ENC_ADD_SPECIAL : 0) |
              (mode & 4 ? TOK_ENC_STRICT : 0);
  int valid = utf8_valid(text, len);
  int64_t n, n2;
  int32_t *ids = encode(text, len, flags, &n);
  if (!ids) {
    CHECK(n == -EILSEQ && (flags & TOK_ENC_STRICT) && !valid);
    return;
  }
  CHECK(valid || !(flags & TOK_ENC_STRICT));
  for (int64_t i = 0; i < n; i++) CHECK(ids[i] >= 0 && ids[i] < tok_n_vocab(tok));
  int32_t *again = encode(text, len, flags, &n2);
  CHECK(again && n2 == n && memcmp(again, ids, (size_t)n * sizeof *ids) == 0);
  free(again);

  int round_trip = valid && !(flags & TOK_ENC_ADD_SPECIAL);
  for (size_t i = 0; i < len && round_trip; i++) round_trip = !lossy[text[i]];
  if (round_trip) {
    int64_t blen;
    char *back = decode(ids, (size_t)n, flags & TOK_ENC_PARSE_SPECIAL ? TOK_DEC_SPECIAL : 0, &blen);
    CHECK((size_t)blen == len && memcmp(back, text, len) == 0);
    free(back);
  }
  free(ids);
  if (flags & TOK_ENC_PARSE_SPECIAL) fuzz_marked(text, len, flags);
}

static void fuzz_ids(int mode, const uint8_t *data, size_t size) {
  size_t n = size / 2;
  int32_t *ids = malloc((n + 1) * sizeof *ids);
  CHECK(ids);
  for (size_t i = 0; i < n; i++) ids[i] = (int32_t)((data[2 * i] | data[2 * i + 1] << 8) % tok_n_vocab(tok));
  int flags = mode & 1 ? TOK_DEC_SPECIAL : 0;
  int64_t wlen;
  char *want = decode(ids, n, flags | TOK_DEC_VALID_UTF8, &wlen);
  CHECK(utf8_valid((const uint8_t *)want, (size_t)wlen));

  size_t cap = tok_stream_max_out(tok), k = 0;
  char *out = malloc(cap), *got = malloc((size_t)wlen + 1);
  CHECK(out && got);
  tok_stream_t st;
  tok_stream_init(&st, tok, flags);
  for (size_t i = 0; i <= n; i++) {
    int w = i < n ? tok_stream_push(&st, ids[i], out, cap) : tok_stream_flush(&st, out, cap);
    CHECK(w >= 0 && (size_t)w <= cap && k + (size_t)w <= (size_t)wlen);
    memcpy(got + k, out, (size_t)w);
    k += (size_t)w;
  }
  CHECK(k == (size_t)wlen && memcmp(got, want, k) == 0);
  free(got);
  free(out);
  free(want);
  free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  int mode = data[0];
  if (mode & 8)
    fuzz_ids(mode, data + 1, size - 1);
  else
    fuzz_text(mode, data + 1, size - 1);
  return 0;
}
