/* tests/fuzz/fuzz_http.c — libFuzzer target for the HTTP request parser and
 * the OpenAI request validation, as the server runs them.
 *
 * Input: byte 0 picks how the rest is cut into reads (0: one read; else
 * pieces of 1..byte0 bytes, like a client whose data arrives in bits); bytes
 * 1.. are what the client sends. They go through http__parse_feed with the
 * server's limits shrunk (so the 413/431 paths are reached), and every
 * complete request is taken into an arena the way a connection does; its
 * header values through the JSON routes' media-type check, its body through
 * all four OpenAI validators, and the error or the
 * parsed text through the JSON writers. The raw bytes are also validated as a
 * JSON body directly, so the validators see inputs that were never HTTP.
 * Must not crash, hang or leak under ASan + UBSan. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/arena.h"
#include "http/http_internal.h"
#include "http/http_parse.h"
#include "api/oai_request.h"
#include "api/oai_responses.h"
#include "api/oai_response.h"

/* The validators on one body, then the writers on what they produced. */
static void validate(const char *body, size_t len) {
  oai_limits_t lim = oai_limits_default();
  lim.vocab_size = 49152;
  arena_t a;
  arena_init(&a, 0, 0);
  oai_error_t err;
  oai_completion_req_t c;
  if (oai_parse_completion(body, len, &lim, &a, &c, &err) == 0) {
    for (int32_t i = 0; i < c.n_prompts; i++) {
      if (!c.prompts[i].text) continue;
      oai_choice_t ch = {.text = c.prompts[i].text, .text_len = c.prompts[i].text_len, .stop_token = -1};
      oai_meta_t m = {.id = "cmpl-x", .model = c.model, .created = 1};
      oai_usage_t u = {0};
      free(oai_write_completion(&m, &ch, 1, &u));
    }
  } else {
    free(oai_write_error(err.type, err.message, err.param[0] ? err.param : NULL, err.code));
  }
  oai_chat_req_t h;
  if (oai_parse_chat(body, len, &lim, &a, &h, &err) == 0) {
    for (int32_t i = 0; i < h.n_messages; i++) {
      oai_choice_t ch = {.text = h.messages[i].content, .text_len = h.messages[i].content_len, .stop_token = -1};
      oai_meta_t m = {.id = "chatcmpl-x", .model = h.model, .created = 1};
      free(oai_write_chat_chunk(&m, &ch, i == 0, h.params.include_usage));
    }
  } else {
    free(oai_write_error(err.type, err.message, err.param[0] ? err.param : NULL, err.code));
  }
  oai_tokenize_req_t t;
  if (oai_parse_tokenize(body, len, &lim, &a, &t, &err) == 0 && t.prompt)
    free(oai_write_detokenize(t.prompt, t.prompt_len));
  oai_responses_req_t rr;
  if (oai_parse_responses(body, len, &lim, &a, &rr, &err) == 0) {
    const oai_message_t *last = &rr.chat.messages[rr.chat.n_messages - 1];
    const oai_resp_info_t info = {.id = "resp-x", .item_id = "msg-x", .model = rr.chat.model, .status = "completed",
                                  .instructions = rr.instructions, .max_output_tokens = rr.max_output_tokens,
                                  .text = last->content, .text_len = last->content_len, .has_usage = true};
    free(oai_write_response(&info));
    free(oai_write_response_event("response.output_text.delta", 1, &info, last->content, last->content_len));
  }
  oai_detokenize_req_t d;
  if (oai_parse_detokenize(body, len, &lim, &a, &d, &err) == 0)
    free(oai_write_tokenize(d.tokens, d.n_tokens, 2048, NULL));
  arena_free(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int quiet;
  if (!quiet) {
    log_set_level(LOG_LEVEL_ERROR);
    quiet = 1;
  }
  if (size < 1) return 0;
  size_t piece = data[0];
  const char *in = (const char *)data + 1;
  size_t n = size - 1;

  http_limits_t lim = http_limits_default();
  lim.max_header_bytes = 1024;
  lim.max_headers = 16;
  lim.max_body_bytes = 4096;
  http__parser_t p;
  http__parse_init(&p, &lim);
  size_t off = 0, k = 0;
  int requests = 0;
  bool closed = false; /* the server stops reading after a closing request */
  while (off < n && requests < 64 && !closed) {
    size_t len = piece ? 1 + (size_t)data[1 + (k++ % n)] % piece : n - off;
    if (len > n - off) len = n - off;
    /* a read buffer of its own, so ASan sees any read past the piece */
    char *buf = malloc(len);
    memcpy(buf, in + off, len);
    size_t at = 0;
    http__parse_result_t r = HTTP__PARSE_MORE;
    while (at < len) {
      size_t used = 0;
      r = http__parse_feed(&p, buf + at, len - at, &used);
      if (r == HTTP__PARSE_ERROR) break;
      at += used;
      if (r == HTTP__PARSE_MORE) break;
      /* a complete request: take it as a connection does */
      arena_t a;
      arena_init(&a, 0, 0);
      http_req_t req;
      char *body = NULL;
      bool keep_alive;
      if (http__parse_take(&p, &a, &req, &body, &keep_alive) != 0) abort(); /* no allocation fails here */
      for (int i = 0; i < req.n_headers; i++) {
        if (strlen(req.headers[i].name) != req.headers[i].name_len) abort();
        (void)http__json_media_type(req.headers[i].value); /* the JSON routes' Content-Type check */
      }
      if (req.body[req.body_len] != '\0' || strlen(req.path) != req.path_len) abort();
      validate(req.body, req.body_len);
      free(body);
      arena_free(&a);
      requests++;
      if (!keep_alive) {
        closed = true;
        break;
      }
    }
    free(buf);
    off += len;
    if (r == HTTP__PARSE_ERROR) {
      if (p.error_status != 400 && p.error_status != 413 && p.error_status != 431 && p.error_status != 501 &&
          p.error_status != 505)
        abort();
      break;
    }
  }
  http__parse_free(&p);
  validate(in, n);
  return 0;
}
