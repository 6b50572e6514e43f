/* tests/fuzz/fuzz_hf_tokenizer.c — libFuzzer target for the tokenizer.json
 * reader (hf/hf_tokenizer.c) and the tokenizer it feeds.
 *
 * Parses the input as tokenizer.json, translates it into tokenizer.ggml.*
 * keys for a vocabulary of 64 ids, builds text/'s tokenizer from them and,
 * when that succeeds, encodes and decodes a fixed multilingual string. It
 * traps when a failure comes without a message.
 *
 *   make fuzz
 *   build/fuzz/fuzz_hf_tokenizer -max_total_time=180 tests/fuzz/corpus/fuzz_hf_tokenizer */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "text/tokenizer.h"
#include "tests/fuzz/fuzz_hf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cJSON *tok = cJSON_ParseWithLength((const char *)data, size);
  if (!tok) return 0;
  char err[256] = "";
  gguf_build_t *b = gguf_build_new();
  int rc = hf__tokenizer(b, tok, NULL, NULL, 64, err, sizeof err);
  cJSON_Delete(tok);
  gguf_ctx_t *g = fuzz_hf_finish(b, rc, err, sizeof err);
  if (!g) return 0;
  tok_t *t = tok_create_from_gguf(g, err, sizeof err);
  gguf_close(g);
  if (!t) {
    CHECK(err[0] != 0);
    return 0;
  }
  static const char text[] = "Hello, wörld! 12345 \xe4\xbd\xa0\xe5\xa5\xbd <|im_end|> \xf0\x9f\x98\x80";
  int32_t ids[256];
  const int64_t n = tok_encode(t, text, sizeof text - 1, TOK_ENC_ADD_SPECIAL | TOK_ENC_PARSE_SPECIAL, ids, 256);
  if (n > 0) {
    char out[1024];
    tok_decode(t, ids, (size_t)(n > 256 ? 256 : n), TOK_DEC_SPECIAL, out, sizeof out);
  }
  tok_destroy(t);
  return 0;
}
