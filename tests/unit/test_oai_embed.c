/* tests/unit/test_oai_embed.c — POST /v1/embeddings' parser and writer
 * (api/oai_embed.h): every input form and field, accepted and refused,
 * with the field named; the arena running out at every size gives a 503,
 * never a crash or a half-parsed success; base64 against RFC 4648's test
 * vectors; the response's floats read back to the same float32 and its
 * base64 to the same little-endian bytes (cJSON reads the JSON back). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api/oai_embed.h"

static int parse(const char *body, arena_t *a, oai_embed_req_t *out, oai_error_t *err) {
  oai_limits_t lim = oai_limits_default();
  lim.vocab_size = 1000;
  return oai_parse_embeddings(body, strlen(body), &lim, a, out, err);
}

static void accepted(void **state) {
  (void)state;
  arena_t a;
  arena_init(&a, 0, 0);
  oai_embed_req_t q;
  oai_error_t e;
  assert_int_equal(parse("{\"input\":\"hi\"}", &a, &q, &e), 0);
  assert_int_equal(q.n_inputs, 1);
  assert_string_equal(q.inputs[0].text, "hi");
  assert_false(q.base64);
  assert_int_equal(q.dimensions, 0);
  assert_true(q.add_special_tokens);
  assert_int_equal(q.normalize, -1);
  assert_int_equal(q.truncate_prompt_tokens, 0);
  assert_null(q.model);
  assert_null(q.user);

  assert_int_equal(parse("{\"input\":[\"a\",\"bc\"],\"model\":\"m\",\"encoding_format\":\"base64\",\"dimensions\":64,"
                         "\"user\":\"u\",\"truncate_prompt_tokens\":-1,\"add_special_tokens\":false,\"normalize\":false}",
                         &a, &q, &e),
                   0);
  assert_int_equal(q.n_inputs, 2);
  assert_string_equal(q.inputs[1].text, "bc");
  assert_string_equal(q.model, "m");
  assert_string_equal(q.user, "u");
  assert_true(q.base64);
  assert_int_equal(q.dimensions, 64);
  assert_int_equal(q.truncate_prompt_tokens, -1);
  assert_false(q.add_special_tokens);
  assert_int_equal(q.normalize, 0);

  assert_int_equal(parse("{\"input\":[3,4,5],\"encoding_format\":\"float\",\"normalize\":true}", &a, &q, &e), 0);
  assert_int_equal(q.n_inputs, 1);
  assert_int_equal(q.inputs[0].n_tokens, 3);
  assert_int_equal(q.inputs[0].tokens[2], 5);
  assert_null(q.inputs[0].text);
  assert_int_equal(q.normalize, 1);

  assert_int_equal(parse("{\"input\":[[1],[2,999]],\"truncate_prompt_tokens\":7,\"user\":null}", &a, &q, &e), 0);
  assert_int_equal(q.n_inputs, 2);
  assert_int_equal(q.inputs[1].n_tokens, 2);
  assert_int_equal(q.inputs[1].tokens[1], 999);
  assert_int_equal(q.truncate_prompt_tokens, 7);
  arena_free(&a);
}

typedef struct {
  const char *body;
  const char *param; /* the field the 400 names */
} refusal_t;

static const refusal_t refusals[] = {
    {"", ""},
    {"[1]", ""},
    {"{}", "input"},
    {"{\"input\":null}", "input"},
    {"{\"input\":\"\"}", "input"},
    {"{\"input\":[]}", "input"},
    {"{\"input\":5}", "input"},
    {"{\"input\":{}}", "input"},
    {"{\"input\":[\"a\",\"\"]}", "input[1]"},
    {"{\"input\":[\"a\",1]}", "input[1]"},
    {"{\"input\":[[1],\"a\"]}", "input[1]"},
    {"{\"input\":[[1],[]]}", "input[1]"},
    {"{\"input\":[[1],[2,1000]]}", "input[1][1]"},
    {"{\"input\":[1,-1]}", "input[1]"},
    {"{\"input\":[1.5]}", "input[0]"},
    {"{\"input\":[true]}", "input[0]"},
    {"{\"input\":[null]}", "input[0]"},
    {"{\"input\":\"a\",\"encoding_format\":\"int8\"}", "encoding_format"},
    {"{\"input\":\"a\",\"encoding_format\":1}", "encoding_format"},
    {"{\"input\":\"a\",\"dimensions\":0}", "dimensions"},
    {"{\"input\":\"a\",\"dimensions\":\"8\"}", "dimensions"},
    {"{\"input\":\"a\",\"dimensions\":1.5}", "dimensions"},
    {"{\"input\":\"a\",\"user\":3}", "user"},
    {"{\"input\":\"a\",\"model\":[]}", "model"},
    {"{\"input\":\"a\",\"truncate_prompt_tokens\":0}", "truncate_prompt_tokens"},
    {"{\"input\":\"a\",\"truncate_prompt_tokens\":-2}", "truncate_prompt_tokens"},
    {"{\"input\":\"a\",\"add_special_tokens\":1}", "add_special_tokens"},
    {"{\"input\":\"a\",\"normalize\":\"no\"}", "normalize"},
    {"{\"input\":\"a\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "messages"},
    {"{\"input\":\"a\",\"input\":\"b\"}", ""}, /* a duplicate key: the strict gate */
};

static void refused(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof refusals / sizeof *refusals; i++) {
    arena_t a;
    arena_init(&a, 0, 0);
    oai_embed_req_t q;
    oai_error_t e;
    const int rc = parse(refusals[i].body, &a, &q, &e);
    if (rc != -EINVAL || e.status != 400) fail_msg("%s: rc %d status %d", refusals[i].body, rc, e.status);
    if (strcmp(e.param, refusals[i].param) != 0)
      fail_msg("%s: the error names \"%s\", want \"%s\" (%s)", refusals[i].body, e.param, refusals[i].param,
               e.message);
    arena_free(&a);
  }
}

static void too_many_inputs(void **state) {
  (void)state;
  char *body = malloc(16 + 4 * (OAI_EMBED_MAX_INPUTS + 1));
  size_t n = (size_t)sprintf(body, "{\"input\":[");
  for (int i = 0; i <= OAI_EMBED_MAX_INPUTS; i++) n += (size_t)sprintf(body + n, "%s\"a\"", i ? "," : "");
  strcpy(body + n, "]}");
  arena_t a;
  arena_init(&a, 0, 0);
  oai_embed_req_t q;
  oai_error_t e;
  assert_int_equal(parse(body, &a, &q, &e), -EINVAL);
  assert_string_equal(e.param, "input");
  arena_free(&a);
  free(body);
}

/* input is read by the parser completions' prompt uses (oai__prompts), with
 * the embeddings' own cap (OAI_EMBED_MAX_INPUTS, not oai_limits_t's
 * max_prompts) and the messages naming input: each refusal's whole text. */
static void own_cap_and_messages(void **state) {
  (void)state;
  oai_limits_t lim = oai_limits_default();
  lim.max_prompts = 1;
  arena_t a;
  arena_init(&a, 0, 0);
  oai_embed_req_t q;
  oai_error_t e;
  const char *three = "{\"input\":[\"a\",\"b\",\"c\"]}";
  assert_int_equal(oai_parse_embeddings(three, strlen(three), &lim, &a, &q, &e), 0);
  assert_int_equal(q.n_inputs, 3);
  static const struct {
    const char *body, *message;
  } said[] = {
      {"{\"input\":[\"a\",1]}", "input[1] must be a string like input[0], got a number"},
      {"{\"input\":[[1],\"a\"]}", "input[1] must be an array of token ids like input[0], got a string"},
      {"{\"input\":[true]}", "input[0] must be a string, a token id or an array of token ids, got a boolean"},
      {"{\"input\":[\"a\",\"\"]}", "input[1] must not be empty"},
      {"{\"input\":{}}", "input must be a string, an array of strings, an array of token ids or an array of "
                          "token-id arrays; got an object"},
  };
  for (size_t i = 0; i < sizeof said / sizeof *said; i++) {
    assert_int_equal(parse(said[i].body, &a, &q, &e), -EINVAL);
    assert_string_equal(e.message, said[i].message);
  }
  char *body = malloc(16 + 4 * (OAI_EMBED_MAX_INPUTS + 1));
  size_t n = (size_t)sprintf(body, "{\"input\":[");
  for (int i = 0; i <= OAI_EMBED_MAX_INPUTS; i++) n += (size_t)sprintf(body + n, "%s\"a\"", i ? "," : "");
  strcpy(body + n, "]}");
  assert_int_equal(parse(body, &a, &q, &e), -EINVAL);
  assert_string_equal(e.message, "input has 2049 inputs; at most 2048 are accepted");
  body[n - 4] = ']'; /* one fewer: the cap itself is accepted */
  body[n - 3] = '}';
  body[n - 2] = 0;
  assert_int_equal(parse(body, &a, &q, &e), 0);
  assert_int_equal(q.n_inputs, OAI_EMBED_MAX_INPUTS);
  free(body);
  arena_free(&a);
}

/* The arena capped at every size: a 503 out_of_memory until the parse fits. */
static void out_of_memory(void **state) {
  (void)state;
  const char *b = "{\"model\":\"m\",\"input\":[[1,2,3],[4,5],[6]],\"user\":\"someone\",\"encoding_format\":\"base64\"}";
  const char *s = "{\"input\":[\"hello there\",\"general kenobi\"]}";
  const char *bodies[] = {b, s};
  for (size_t i = 0; i < 2; i++) {
    for (size_t cap = 16;; cap += 16) {
      arena_t a;
      arena_init(&a, 0, cap);
      oai_embed_req_t q;
      oai_error_t e;
      const int r = oai_parse_embeddings(bodies[i], strlen(bodies[i]), NULL, &a, &q, &e);
      arena_free(&a);
      if (r == 0) break;
      if (e.status != 503 || strcmp(e.code, "out_of_memory") != 0)
        fail_msg("cap %zu: %d %s: %s", cap, e.status, e.code, e.message);
      if (cap > 65536) fail_msg("never parsed");
    }
  }
}

static void base64_vectors(void **state) { /* RFC 4648 section 10 */
  (void)state;
  const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
  const char *want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
  for (int i = 0; i < 7; i++) {
    char out[16];
    assert_int_equal(oai_base64(in[i], strlen(in[i]), out), strlen(want[i]));
    assert_string_equal(out, want[i]);
  }
}

static int b64_value(char c) {
  const char *A = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  return (int)(strchr(A, c) - A);
}

static void writer(void **state) {
  (void)state;
  const float v0[3] = {1.0f / 3.0f, -2.5e-8f, 123456.789f};
  const float v1[3] = {0.0f, -0.0f, 1e30f};
  const float *vecs[2] = {v0, v1};
  for (int b64 = 0; b64 < 2; b64++) {
    char *json = oai_write_embeddings("served", vecs, 2, 3, b64, 42);
    assert_non_null(json);
    cJSON *root = cJSON_Parse(json);
    assert_non_null(root);
    assert_string_equal(cJSON_GetObjectItem(root, "object")->valuestring, "list");
    assert_string_equal(cJSON_GetObjectItem(root, "model")->valuestring, "served");
    const cJSON *u = cJSON_GetObjectItem(root, "usage");
    assert_int_equal(cJSON_GetObjectItem(u, "prompt_tokens")->valueint, 42);
    assert_int_equal(cJSON_GetObjectItem(u, "total_tokens")->valueint, 42);
    const cJSON *data = cJSON_GetObjectItem(root, "data");
    assert_int_equal(cJSON_GetArraySize(data), 2);
    for (int i = 0; i < 2; i++) {
      const cJSON *d = cJSON_GetArrayItem(data, i);
      assert_string_equal(cJSON_GetObjectItem(d, "object")->valuestring, "embedding");
      assert_int_equal(cJSON_GetObjectItem(d, "index")->valueint, i);
      const cJSON *emb = cJSON_GetObjectItem(d, "embedding");
      if (!b64) {
        assert_int_equal(cJSON_GetArraySize(emb), 3);
        for (int k = 0; k < 3; k++) /* 9 significant digits: the same float32 */
          assert_true((float)cJSON_GetArrayItem(emb, k)->valuedouble == vecs[i][k]);
      } else {
        const char *t = emb->valuestring;
        assert_int_equal(strlen(t), 16); /* 12 bytes */
        unsigned char bytes[12];
        for (int g = 0; g < 4; g++) {
          const uint32_t x = (uint32_t)b64_value(t[4 * g]) << 18 | (uint32_t)b64_value(t[4 * g + 1]) << 12 |
                             (uint32_t)b64_value(t[4 * g + 2]) << 6 | (uint32_t)b64_value(t[4 * g + 3]);
          bytes[3 * g] = (unsigned char)(x >> 16);
          bytes[3 * g + 1] = (unsigned char)(x >> 8);
          bytes[3 * g + 2] = (unsigned char)x;
        }
        for (int k = 0; k < 3; k++) { /* little-endian float32 */
          const uint32_t le = (uint32_t)bytes[4 * k] | (uint32_t)bytes[4 * k + 1] << 8 |
                              (uint32_t)bytes[4 * k + 2] << 16 | (uint32_t)bytes[4 * k + 3] << 24;
          uint32_t want;
          memcpy(&want, &vecs[i][k], 4);
          assert_int_equal(le, want);
        }
      }
    }
    cJSON_Delete(root);
    free(json);
  }
  const float bad[1] = {0.0f / 0.0f};
  const float *bv[1] = {bad};
  assert_null(oai_write_embeddings("m", bv, 1, 1, false, 1));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(accepted),       cmocka_unit_test(refused), cmocka_unit_test(too_many_inputs),
      cmocka_unit_test(own_cap_and_messages),
      cmocka_unit_test(out_of_memory),  cmocka_unit_test(base64_vectors),
      cmocka_unit_test(writer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
