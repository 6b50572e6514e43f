/* tests/unit/test_safetensors.c — the safetensors reader (st/): well-formed
 * images read back exactly (F32, F16, BF16, an empty tensor, metadata,
 * header padding), a malformed-file set where each case must fail with a
 * line naming what is wrong, and sharded checkpoints through an index
 * (files written to a temporary folder). Parity with the `safetensors`
 * package is in tests/integration/test_safetensors.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "st/safetensors.h"

/* An image: the 8-byte length, the header, then `data` (len bytes). */
static uint8_t *image(const char *header, const void *data, size_t len, size_t *size) {
  const size_t h = strlen(header);
  *size = 8 + h + len;
  uint8_t *p = malloc(*size + 1);
  assert_non_null(p);
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)((uint64_t)h >> (8 * i));
  memcpy(p + 8, header, h);
  if (len) memcpy(p + 8 + h, data, len);
  return p;
}

static void well_formed(void **state) {
  (void)state;
  float f[6] = {1, 2, 3, 4, 5, 6};
  uint8_t data[24 + 4 + 2];
  memcpy(data, f, 24);
  const uint16_t h16[2] = {0x3c00, 0xc000}; /* F16 1, -2 */
  memcpy(data + 24, h16, 4);
  const uint16_t b16 = 0x3f80; /* BF16 1 */
  memcpy(data + 28, &b16, 2);
  size_t size;
  uint8_t *img = image("{\"__metadata__\":{\"format\":\"pt\"},"
                       "\"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[24,28]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                       "\"e\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[28,28]},"
                       "\"c\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[28,30]}}    ",
                       data, sizeof data, &size);
  char err[256];
  st_ctx_t *st = st_open_buffer(img, size, err, sizeof err);
  if (!st) fail_msg("%s", err);
  assert_int_equal(st_tensor_count(st), 4);
  const st_tensor_t *a = st_find(st, "a"), *b = st_find(st, "b"), *c = st_find(st, "c"), *e = st_find(st, "e");
  assert_non_null(a);
  assert_int_equal(a->type, KERN_F32);
  assert_int_equal(a->n_dims, 2);
  assert_int_equal(a->shape[0], 2);
  assert_int_equal(a->shape[1], 3);
  assert_int_equal(a->n_elems, 6);
  assert_memory_equal(a->data, f, 24);
  assert_int_equal(b->type, KERN_F16);
  assert_memory_equal(b->data, h16, 4);
  assert_int_equal(c->type, KERN_BF16);
  assert_int_equal(c->n_dims, 0);
  assert_int_equal(c->n_elems, 1);
  assert_int_equal(e->n_elems, 0);
  assert_int_equal(e->nbytes, 0);
  assert_null(st_find(st, "missing"));
  assert_null(st_find(st, "__metadata__"));
  st_close(st);
  st_close(NULL);
  free(img);
}

static void expect_bad(const char *header, size_t data_len, const char *want) {
  uint8_t data[64] = {0};
  size_t size;
  uint8_t *img = image(header, data, data_len, &size);
  char err[256] = "";
  st_ctx_t *st = st_open_buffer(img, size, err, sizeof err);
  if (st) fail_msg("accepted: %s", header);
  if (!strstr(err, want)) fail_msg("want an error containing \"%s\", got \"%s\"", want, err);
  free(img);
}

#define T1(extra) "{\"t\":{\"dtype\":\"F32\",\"shape\":[2]," extra "}}"

static void malformed_set(void **state) {
  (void)state;
  char err[256];
  assert_null(st_open_buffer("abc", 3, err, sizeof err));
  assert_non_null(strstr(err, "shorter than the 8-byte header length"));
  const uint8_t huge[16] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, '{', '}'};
  assert_null(st_open_buffer(huge, sizeof huge, err, sizeof err));
  assert_non_null(strstr(err, "does not fit the file"));
  expect_bad("[1, 2]", 0, "the header is not a JSON object");
  expect_bad("{\"t\": ", 0, "the header is not a JSON object");
  expect_bad("{} x", 0, "bytes after the header's JSON object");
  expect_bad("{\"t\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, "tensor 't' has dtype I64");
  expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8, "tensor 't': want an object");
  expect_bad("{\"t\":[1]}", 0, "tensor 't': want an object");
  expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "shape dimension 0");
  expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,8]}}", 8, "shape dimension 0");
  expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "5 dimensions");
  expect_bad("{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
             "not a size tram can hold");
  expect_bad(T1("\"data_offsets\":[8,0]"), 8, "are not inside the 8-byte data section");
  expect_bad(T1("\"data_offsets\":[0,16]"), 8, "are not inside the 8-byte data section");
  expect_bad(T1("\"data_offsets\":[0]"), 8, "want an object");
  expect_bad(T1("\"data_offsets\":[0,4]"), 8, "span 4 bytes, its shape and dtype need 8");
  expect_bad(T1("\"data_offsets\":[4,12]"), 12, "tensor 't' starts at byte 4 of the data section, where a gap");
  expect_bad(T1("\"data_offsets\":[0,8]"), 12, "4 bytes after the last tensor");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
             8, "where the previous tensor still runs (overlap)");
  expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
             8, "tensor 'a' appears twice");
  expect_bad("{\"__metadata__\":3}", 0, "__metadata__ is not an object");
}

/* Writes bytes to dir/name. */
static void put(const char *dir, const char *name, const void *p, size_t n) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(p, 1, n, f), n);
  fclose(f);
}

static void sharded(void **state) {
  (void)state;
  char dir[] = "/tmp/tram_test_st_XXXXXX";
  assert_non_null(mkdtemp(dir));
  float x[2] = {1.5f, -2.5f}, y[1] = {7.0f};
  size_t n1, n2;
  uint8_t *s1 = image("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", x, 8, &n1);
  uint8_t *s2 = image("{\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", y, 4, &n2);
  put(dir, "m-1.safetensors", s1, n1);
  put(dir, "m-2.safetensors", s2, n2);
  float xy[3] = {1, 2, 3};
  size_t n3;
  uint8_t *s3 = image("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", xy, 12, &n3);
  put(dir, "m-3.safetensors", s3, n3);
  const char *good = "{\"metadata\":{},\"weight_map\":{\"x\":\"m-1.safetensors\",\"y\":\"m-2.safetensors\"}}";
  put(dir, "model.safetensors.index.json", good, strlen(good));
  char err[512];
  st_ctx_t *st = st_open(dir, err, sizeof err); /* the folder: its index */
  if (!st) fail_msg("%s", err);
  assert_int_equal(st_tensor_count(st), 2);
  assert_memory_equal(st_find(st, "x")->data, x, 8);
  assert_memory_equal(st_find(st, "y")->data, y, 4);
  assert_int_equal(st_find(st, "y")->shard, 1);
  st_close(st);

  struct {
    const char *index, *want;
  } bad[] = {
      {"{\"weight_map\":{\"x\":\"m-3.safetensors\"}}", "the shards hold 2 tensors, the weight_map lists 1"},
      {"{\"weight_map\":{\"x\":\"m-1.safetensors\",\"y\":\"m-3.safetensors\"}}", "tensor 'x' appears twice"},
      {"{\"weight_map\":{\"x\":\"m-2.safetensors\",\"y\":\"m-2.safetensors\"}}", "tensor 'x' is not in m-2"},
      {"{\"weight_map\":{\"x\":\"../m-1.safetensors\"}}", "is not a file name in the index's folder"},
      {"{\"weight_map\":{\"x\":\"m-4.safetensors\"}}", "m-4.safetensors: cannot open"},
      {"{\"weight_map\":{}}", "no \"weight_map\" object"},
      {"[]", "no \"weight_map\" object"},
  };
  char path[256];
  snprintf(path, sizeof path, "%s/bad.index.json", dir);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    put(dir, "bad.index.json", bad[i].index, strlen(bad[i].index));
    st = st_open(path, err, sizeof err);
    if (st) fail_msg("accepted index %s", bad[i].index);
    if (!strstr(err, bad[i].want)) fail_msg("index %s: want \"%s\", got \"%s\"", bad[i].index, bad[i].want, err);
  }
  /* one file, by path and as a folder's model.safetensors */
  snprintf(path, sizeof path, "%s/m-1.safetensors", dir);
  st = st_open(path, err, sizeof err);
  if (!st) fail_msg("%s", err);
  st_close(st);
  assert_null(st_open("/nonexistent/x.safetensors", err, sizeof err));
  assert_non_null(strstr(err, "cannot open"));
  const char *files[] = {"m-1.safetensors", "m-2.safetensors", "m-3.safetensors", "model.safetensors.index.json",
                         "bad.index.json"};
  for (size_t i = 0; i < 5; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    unlink(path);
  }
  rmdir(dir);
  free(s1);
  free(s2);
  free(s3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(well_formed),
      cmocka_unit_test(malformed_set),
      cmocka_unit_test(sharded),
  };
  return cmocka_run_group_tests_name("safetensors", tests, NULL, NULL);
}
