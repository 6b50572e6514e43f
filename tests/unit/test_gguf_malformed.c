/* tests/unit/test_gguf_malformed.c — the GGUF reader on bad files: open
 * errors name the path, truncation at every byte, and a set of malformed
 * files, each of which must give its own clear one-line error. Images are
 * parsed from buffers of exactly their size, so ASan sees any read past the
 * end. GGUF_TEST_SHOW=1 prints every malformed case's message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tests/unit/gguf_writer.h"
#include "tests/unit/testutil.h"

/* Finishes and frees w, and opens its image, which must be valid, from an
 * exactly sized buffer *img (*size bytes; the caller frees it after
 * gguf_close). */
static gguf_ctx_t *open_written(gw_t *w, uint8_t **img, size_t *size) {
  char err[512];
  gguf_ctx_t *ctx = gw_open_written(w, img, size, err, sizeof err);
  if (!ctx) fail_msg("a valid file did not open: %s", err);
  return ctx;
}

static void assert_one_line(const char *err) {
  assert_true(err[0] != '\0');
  assert_null(strchr(err, '\n'));
}

/* ---- gguf_open errors ------------------------------------------------- */

static void open_errors_name_the_path(void **state) {
  (void)state;
  char err[512];
  assert_null(gguf_open("/nonexistent/model.gguf", err, sizeof err));
  assert_non_null(strstr(err, "/nonexistent/model.gguf: cannot open: No such file or directory"));
  assert_null(gguf_open("/tmp", err, sizeof err));
  assert_non_null(strstr(err, "/tmp: not a regular file"));

  char path[] = "/tmp/tram_test_gguf_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_null(gguf_open(path, err, sizeof err)); /* empty */
  assert_non_null(strstr(err, path));
  assert_non_null(strstr(err, "header: magic (4 bytes at byte 0) runs past the end of the file (0 bytes)"));

  gw_t *w = gw_new();
  gw_kv_str(w, "general.architecture", "llama");
  gw_set_version(w, 1);
  assert_int_equal(gw_write_file(w, path), 0);
  assert_null(gguf_open(path, err, sizeof err));
  assert_one_line(err);
  assert_non_null(strstr(err, "version 1 is not supported"));
  gw_set_version(w, 3);
  assert_int_equal(gw_write_file(w, path), 0);
  gguf_ctx_t *ctx = gguf_open(path, err, sizeof err);
  assert_non_null(ctx);
  assert_int_equal(gguf_kv_count(ctx), 1);
  gguf_close(ctx);
  gguf_close(NULL);
  gw_free(w);
  unlink(path);

  /* A tiny err buffer is still terminated. */
  char tiny[8];
  assert_null(gguf_open_buffer("GGUX", 4, tiny, sizeof tiny));
  assert_int_equal(strlen(tiny), 7);
  assert_null(gguf_open_buffer(NULL, 0, NULL, 0));
}

/* ---- truncation at every byte ----------------------------------------- */

static void truncated_at_every_offset(void **state) {
  (void)state;
  tu_rng_t r;
  tu_rng_init(&r, tu_seed() + 77);
  gw_t *w = gw_new();
  gw_kv_str(w, "general.architecture", "llama");
  gw_kv_u32(w, "general.alignment", 16);
  gw_set_align(w, 16);
  gw_kv_f32(w, "x.f32", 0.5f);
  gw_kv_bool(w, "x.bool", 1);
  int16_t i16s[3] = {-1, 2, -3};
  gw_kv_arr(w, "x.i16s", GGUF_TYPE_INT16, 3, i16s);
  const char *strs[3] = {"a", "bc", "def"};
  gw_kv_arr_str(w, "x.strs", 3, strs);
  uint8_t data[40];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)tu_next(&r);
  int64_t ne2[2] = {2, 3};
  gw_tensor(w, "a", 0, 2, ne2, data, 24);
  int64_t ne1 = 32;
  gw_tensor(w, "b", 8, 1, &ne1, data, 34);
  size_t size;
  uint8_t *img;
  gguf_ctx_t *ctx = open_written(w, &img, &size);
  gguf_close(ctx);
  char err[512];
  uint8_t *copy;
  for (size_t len = 0; len < size; len++) {
    ctx = gw_open_exact(img, len, err, sizeof err, &copy);
    if (ctx) fail_msg("truncated to %zu of %zu bytes, it still opened", len, size);
    assert_one_line(err);
    if (!strstr(err, "past the end of the file") && !strstr(err, "cannot fit"))
      fail_msg("truncated to %zu bytes: unexpected message: %s", len, err);
    free(copy);
  }
  free(img);
}

/* ---- malformed files --------------------------------------------------- */

typedef struct {
  char want[2][200]; /* substrings the message must contain */
} expect_t;

typedef struct {
  const char *name;
  void (*build)(gw_t *w, expect_t *e);
  void (*patch)(uint8_t *img, size_t *size); /* optional, after gw_finish */
} bad_case_t;

static void want(expect_t *e, int i, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void want(expect_t *e, int i, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->want[i], sizeof e->want[i], fmt, ap);
  va_end(ap);
}

static void put_u64le(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static void base_kvs(gw_t *w) {
  gw_kv_str(w, "general.architecture", "llama");
  gw_kv_u32(w, "llama.block_count", 1);
}

/* A 4-float tensor. */
static void one_tensor_named(gw_t *w, const char *name) {
  float v[4] = {1, 2, 3, 4};
  int64_t ne = 4;
  gw_tensor(w, name, 0, 1, &ne, v, sizeof v);
}
static void one_tensor(gw_t *w) { one_tensor_named(w, "w"); }

static void b_magic(gw_t *w, expect_t *e) {
  base_kvs(w);
  want(e, 0, "header: no 'GGUF' magic at byte 0: not a GGUF file");
}
static void p_magic(uint8_t *img, size_t *size) { img[3] = 0; (void)size; }

static void version_case(gw_t *w, expect_t *e, uint32_t version, const char *msg) {
  base_kvs(w);
  gw_set_version(w, version);
  want(e, 0, "header: %s", msg);
}
static void b_v1(gw_t *w, expect_t *e) { version_case(w, e, 1, "GGUF version 1 is not supported"); }
static void b_v4(gw_t *w, expect_t *e) {
  version_case(w, e, 4, "GGUF version 4 is not supported (tram reads versions 2 and 3)");
}
static void b_big_endian(gw_t *w, expect_t *e) {
  version_case(w, e, 0x03000000, "version field 0x03000000 looks byte-swapped: a big-endian GGUF file");
}
static void b_kv_count_huge(gw_t *w, expect_t *e) {
  base_kvs(w);
  gw_set_counts(w, 0, UINT64_C(1) << 60);
  want(e, 0, "header: key/value count 1152921504606846976 at byte 16 cannot fit");
}
static void b_kv_count_lie(gw_t *w, expect_t *e) {
  base_kvs(w);
  gw_set_counts(w, 0, 3);
  want(e, 0, "key #2 (at byte %llu): key length (8 bytes at byte %llu) runs past the end of the file",
       (unsigned long long)gw_kv_end(w), (unsigned long long)gw_kv_end(w));
}
static void b_tensor_count_huge(gw_t *w, expect_t *e) {
  base_kvs(w);
  one_tensor(w);
  gw_set_counts(w, UINT64_C(1) << 40, 2);
  want(e, 0, "header: tensor count 1099511627776 at byte 8 cannot fit");
}
static void b_tensor_count_lie(gw_t *w, expect_t *e) {
  base_kvs(w);
  gw_kv_str(w, "general.description", "a description long enough for one more tensor info");
  gw_set_counts(w, 1, 3);
  want(e, 0, "tensor #0 (at byte %llu): tensor name length (8 bytes at byte %llu) runs past the end of the file",
       (unsigned long long)gw_kv_end(w), (unsigned long long)gw_kv_end(w));
}
/* A string value whose length field says len, followed by 3 bytes and the
 * end of the file. */
static void str_len_case(gw_t *w, expect_t *e, uint64_t len) {
  base_kvs(w);
  uint8_t v[11];
  put_u64le(v, len);
  memcpy(v + 8, "abc", 3);
  gw_kv_raw(w, "general.name", GGUF_TYPE_STRING, v, sizeof v);
  want(e, 0, "key 'general.name' (#2 at byte 102)");
  want(e, 1, "string value (%llu bytes at byte %llu) runs past the end of the file (%llu bytes)",
       (unsigned long long)len, (unsigned long long)gw_kv_end(w) - 3, (unsigned long long)gw_kv_end(w));
}
static void b_str_past_end(gw_t *w, expect_t *e) { str_len_case(w, e, 1000); }
static void b_str_huge(gw_t *w, expect_t *e) { str_len_case(w, e, UINT64_C(1) << 63); }
static void b_key_huge(gw_t *w, expect_t *e) {
  base_kvs(w);
  uint8_t v[8 + 4 + 4];
  put_u64le(v, UINT64_C(1) << 63);
  memcpy(v + 8, "abcdefgh", 8);
  gw_raw_kv_bytes(w, v, sizeof v);
  gw_set_counts(w, 0, 3);
  want(e, 0, "key #2 (at byte %llu): key of 9223372036854775808 bytes at byte %llu is longer than the 65535 bytes "
             "allowed", (unsigned long long)gw_kv_end(w) - 16, (unsigned long long)gw_kv_end(w) - 16);
}
static void b_key_empty(gw_t *w, expect_t *e) {
  base_kvs(w);
  gw_kv_strn(w, "", 0, "x", 1);
  want(e, 0, "key #2 (at byte");
  want(e, 1, "empty key");
}
/* An array of 2^62 elements of elem_type with one 4-byte element present. */
static void array_huge_case(gw_t *w, expect_t *e, const char *key, uint32_t elem_type) {
  base_kvs(w);
  uint8_t v[4 + 8 + 4] = {0};
  memcpy(v, &elem_type, 4);
  put_u64le(v + 4, UINT64_C(1) << 62);
  gw_kv_raw(w, key, GGUF_TYPE_ARRAY, v, sizeof v);
  want(e, 0, "key '%s' (#2 at byte 102)", key);
}
static void b_str_array_huge(gw_t *w, expect_t *e) {
  array_huge_case(w, e, "tokenizer.ggml.tokens", GGUF_TYPE_STRING);
  want(e, 1, "array of 4611686018427387904 strings at byte %llu cannot fit in the 4 bytes left",
       (unsigned long long)gw_kv_end(w) - 12);
}
static void b_num_array_huge(gw_t *w, expect_t *e) {
  array_huge_case(w, e, "tokenizer.ggml.token_type", GGUF_TYPE_INT32);
  want(e, 1, "4611686018427387904 int32 value(s) of 4 bytes at byte %llu run past the end of the file",
       (unsigned long long)gw_kv_end(w) - 4);
}
static void b_bool2(gw_t *w, expect_t *e) {
  base_kvs(w);
  uint8_t two = 2;
  gw_kv_raw(w, "x.flag", GGUF_TYPE_BOOL, &two, 1);
  want(e, 0, "key 'x.flag' (#2 at byte");
  want(e, 1, "bool value 2 at byte %llu is not 0 or 1", (unsigned long long)gw_kv_end(w) - 1);
}
static void b_bool_array2(gw_t *w, expect_t *e) {
  base_kvs(w);
  uint8_t bools[3] = {0, 1, 7};
  gw_kv_arr(w, "x.flags", GGUF_TYPE_BOOL, 3, bools);
  want(e, 0, "key 'x.flags'");
  want(e, 1, "bool value 7 at byte %llu is not 0 or 1", (unsigned long long)gw_kv_end(w) - 1);
}
static void b_unknown_type(gw_t *w, expect_t *e) {
  base_kvs(w);
  uint32_t v = 5;
  gw_kv_raw(w, "x.what", 13, &v, 4);
  want(e, 0, "key 'x.what'");
  want(e, 1, "unknown value type 13 at byte %llu", (unsigned long long)gw_kv_end(w) - 8);
}
static void b_unknown_elem_type(gw_t *w, expect_t *e) {
  base_kvs(w);
  uint8_t v[12] = {0};
  uint32_t et = 1000;
  memcpy(v, &et, 4);
  gw_kv_raw(w, "x.arr", GGUF_TYPE_ARRAY, v, sizeof v);
  want(e, 0, "key 'x.arr'");
  want(e, 1, "array of unknown value type 1000 at byte %llu", (unsigned long long)gw_kv_end(w) - 12);
}
static void b_nested(gw_t *w, expect_t *e) {
  base_kvs(w);
  uint8_t v[4 + 8 + 4 + 8 + 1];
  uint32_t et = GGUF_TYPE_ARRAY, inner = GGUF_TYPE_UINT8;
  memcpy(v, &et, 4);
  put_u64le(v + 4, 1);
  memcpy(v + 12, &inner, 4);
  put_u64le(v + 16, 1);
  v[24] = 9;
  gw_kv_raw(w, "x.nested", GGUF_TYPE_ARRAY, v, sizeof v);
  want(e, 0, "key 'x.nested'");
  want(e, 1, "array of arrays at byte %llu: nested arrays are not supported", (unsigned long long)gw_kv_end(w) - 25);
}
static void b_dup_key(gw_t *w, expect_t *e) {
  base_kvs(w);
  gw_kv_str(w, "general.architecture", "qwen2");
  want(e, 0, "key 'general.architecture' (#2 at byte");
  want(e, 1, "duplicate key (first used by key #0)");
}
static void b_dup_key_escaped(gw_t *w, expect_t *e) {
  gw_kv_u8(w, "a\nb'", 1);
  gw_kv_u8(w, "a\nb'", 2);
  want(e, 0, "key 'a\\x0ab\\x27' (#1 at byte");
  want(e, 1, "duplicate key");
}
static void align_case(gw_t *w, expect_t *e, uint32_t a) {
  base_kvs(w);
  gw_kv_u32(w, "general.alignment", a);
  one_tensor(w);
  want(e, 0, "key 'general.alignment' (#2): alignment %u at byte %llu is not a power of two", a,
       (unsigned long long)gw_kv_end(w) - 4);
}
static void b_align0(gw_t *w, expect_t *e) { align_case(w, e, 0); }
static void b_align3(gw_t *w, expect_t *e) { align_case(w, e, 3); }
static void b_align48(gw_t *w, expect_t *e) { align_case(w, e, 48); }
static void b_align_u64(gw_t *w, expect_t *e) {
  base_kvs(w);
  gw_kv_u64(w, "general.alignment", 32);
  want(e, 0, "key 'general.alignment' (#2): has type uint64; the alignment must be a uint32");
}
static void b_align_arr(gw_t *w, expect_t *e) {
  base_kvs(w);
  uint32_t a[1] = {32};
  gw_kv_arr(w, "general.alignment", GGUF_TYPE_UINT32, 1, a);
  want(e, 0, "key 'general.alignment' (#2): has type array of uint32; the alignment must be a uint32");
}
static void tensor_case(gw_t *w, expect_t *e, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off) {
  base_kvs(w);
  one_tensor(w);
  want(e, 0, "tensor 'bad' (#1 at byte %llu)", (unsigned long long)gw_info_end(w));
  gw_tensor_info(w, "bad", n_dims, ne, type, off);
}
static void b_ndims0(gw_t *w, expect_t *e) {
  tensor_case(w, e, 0, NULL, 0, 0);
  want(e, 1, "n_dims 0 at byte %llu is not in 1..4", (unsigned long long)gw_info_end(w) - 16);
}
static void b_ndims5(gw_t *w, expect_t *e) {
  uint64_t ne[5] = {1, 1, 1, 1, 1};
  tensor_case(w, e, 5, ne, 0, 0);
  want(e, 1, "n_dims 5 at byte %llu is not in 1..4", (unsigned long long)gw_info_end(w) - 16 - 40);
}
static void b_dim0(gw_t *w, expect_t *e) {
  uint64_t ne[3] = {32, 0, 2};
  tensor_case(w, e, 3, ne, 0, 32);
  want(e, 1, "dimension 1 at byte %llu is 0", (unsigned long long)gw_info_end(w) - 12 - 16);
}
static void b_dims_overflow(gw_t *w, expect_t *e) {
  uint64_t ne[4] = {UINT64_C(1) << 32, UINT64_C(1) << 32, UINT64_C(1) << 32, 2};
  tensor_case(w, e, 4, ne, 0, 32);
  want(e, 1, "dimension 1 = 4294967296 at byte %llu makes more than 2^48 elements",
       (unsigned long long)gw_info_end(w) - 12 - 24);
}
static void b_dim_huge(gw_t *w, expect_t *e) {
  uint64_t ne[1] = {UINT64_MAX};
  tensor_case(w, e, 1, ne, 0, 32);
  want(e, 1, "dimension 0 = 18446744073709551615 at byte");
}
static void b_bytes_huge(gw_t *w, expect_t *e) {
  uint64_t ne[2] = {UINT64_C(1) << 24, UINT64_C(1) << 24}; /* 2^48 F32 elements: 4 PiB */
  tensor_case(w, e, 2, ne, 0, 32);
  want(e, 0, "tensor 'bad' (#1): data of 1125899906842624 bytes at offset 32 of the data section");
  want(e, 1, "runs past the end of the file");
}
static void type_case(gw_t *w, expect_t *e, uint32_t type, const char *ggml_name) {
  uint64_t ne[1] = {256};
  tensor_case(w, e, 1, ne, type, 32);
  want(e, 1, "type %u (%s) at byte %llu is not supported", type, ggml_name, (unsigned long long)gw_info_end(w) - 12);
}
static void b_type_q2k(gw_t *w, expect_t *e) { type_case(w, e, 10, "Q2_K"); }
static void b_type16(gw_t *w, expect_t *e) { type_case(w, e, 16, "IQ2_XXS"); }
static void b_type1000(gw_t *w, expect_t *e) { type_case(w, e, 1000, "unknown to tram"); }
static void b_type_q8_1(gw_t *w, expect_t *e) { type_case(w, e, 9, "Q8_1"); }
static void b_partial_block(gw_t *w, expect_t *e) {
  uint64_t ne[2] = {33, 2};
  tensor_case(w, e, 2, ne, 2, 32);
  want(e, 1, "a row of 33 elements is not a whole number of Q4_0 blocks (32 elements each)");
}
static void b_offset_past_end(gw_t *w, expect_t *e) {
  uint64_t ne[1] = {4};
  tensor_case(w, e, 1, ne, 0, UINT64_C(1) << 40);
  want(e, 0, "tensor 'bad' (#1): data of 16 bytes at offset 1099511627776 of the data section");
  want(e, 1, "runs past the end of the file");
}
static void b_offset_unaligned(gw_t *w, expect_t *e) {
  uint64_t ne[1] = {4};
  tensor_case(w, e, 1, ne, 0, 40);
  want(e, 1, "data offset 40 at byte %llu is not a multiple of the alignment 32", (unsigned long long)gw_info_end(w) - 8);
}
static void b_data_past_end(gw_t *w, expect_t *e) {
  base_kvs(w);
  one_tensor(w);
  want(e, 0, "tensor 'w' (#0): data of 16 bytes at offset 0 of the data section (which starts at byte");
  want(e, 1, "runs past the end of the file");
}
static void p_drop_last_byte(uint8_t *img, size_t *size) { (void)img; (*size)--; }
static size_t cut_to; /* where p_cut cuts the image */
static void p_cut(uint8_t *img, size_t *size) {
  (void)img;
  *size = cut_to;
}
static void b_data_section_past_end(gw_t *w, expect_t *e) {
  base_kvs(w);
  uint64_t ne[1] = {1};
  gw_tensor_info(w, "w", 1, ne, 0, 0); /* no data */
  cut_to = gw_info_end(w);            /* and no padding */
  assert_true(cut_to % 32 != 0);
  want(e, 0, "data section: the tensor infos end at byte %llu; padded to the alignment 32 the data starts past the end",
       (unsigned long long)cut_to);
}
static void b_dup_tensor(gw_t *w, expect_t *e) {
  base_kvs(w);
  one_tensor(w);
  want(e, 0, "tensor 'w' (#1 at byte %llu): duplicate tensor name (first used by tensor #0)",
       (unsigned long long)gw_info_end(w));
  one_tensor(w);
}
static void b_tensor_name_long(gw_t *w, expect_t *e) {
  base_kvs(w);
  one_tensor_named(w, "blk.0.a_name_that_is_longer_than_the_sixty_four_bytes_gguf_allows.weight");
  want(e, 0, "tensor #0 (at byte");
  want(e, 1, "tensor name of 72 bytes at byte");
}
static void b_tensor_name_empty(gw_t *w, expect_t *e) {
  base_kvs(w);
  one_tensor_named(w, "");
  want(e, 0, "tensor #0 (at byte");
  want(e, 1, "empty tensor name");
}

static const bad_case_t bad_cases[] = {
    {"bad magic", b_magic, p_magic},
    {"version 1", b_v1, NULL},
    {"version 4", b_v4, NULL},
    {"big-endian version", b_big_endian, NULL},
    {"huge kv count", b_kv_count_huge, NULL},
    {"kv count one too many", b_kv_count_lie, NULL},
    {"huge tensor count", b_tensor_count_huge, NULL},
    {"tensor count one too many", b_tensor_count_lie, NULL},
    {"string past the end", b_str_past_end, NULL},
    {"string length 2^63", b_str_huge, NULL},
    {"key length 2^63", b_key_huge, NULL},
    {"empty key", b_key_empty, NULL},
    {"string array count 2^62", b_str_array_huge, NULL},
    {"number array count 2^62", b_num_array_huge, NULL},
    {"bool 2", b_bool2, NULL},
    {"bool array with 7", b_bool_array2, NULL},
    {"unknown value type", b_unknown_type, NULL},
    {"unknown array element type", b_unknown_elem_type, NULL},
    {"nested arrays", b_nested, NULL},
    {"duplicate key", b_dup_key, NULL},
    {"duplicate key with odd bytes", b_dup_key_escaped, NULL},
    {"alignment 0", b_align0, NULL},
    {"alignment 3", b_align3, NULL},
    {"alignment 48", b_align48, NULL},
    {"alignment as u64", b_align_u64, NULL},
    {"alignment as array", b_align_arr, NULL},
    {"n_dims 0", b_ndims0, NULL},
    {"n_dims 5", b_ndims5, NULL},
    {"dimension 0", b_dim0, NULL},
    {"element count overflow", b_dims_overflow, NULL},
    {"dimension 2^64-1", b_dim_huge, NULL},
    {"byte size of 2^48 floats", b_bytes_huge, NULL},
    {"type Q2_K", b_type_q2k, NULL},
    {"type 16", b_type16, NULL},
    {"type 1000", b_type1000, NULL},
    {"activation type Q8_1", b_type_q8_1, NULL},
    {"row not whole blocks", b_partial_block, NULL},
    {"offset past the end", b_offset_past_end, NULL},
    {"offset not aligned", b_offset_unaligned, NULL},
    {"data past the end", b_data_past_end, p_drop_last_byte},
    {"data section past the end", b_data_section_past_end, p_cut},
    {"duplicate tensor name", b_dup_tensor, NULL},
    {"tensor name of 72 bytes", b_tensor_name_long, NULL},
    {"empty tensor name", b_tensor_name_empty, NULL},
};

static void malformed_files_say_what_is_wrong(void **state) {
  (void)state;
  for (size_t k = 0; k < sizeof bad_cases / sizeof *bad_cases; k++) {
    const bad_case_t *c = &bad_cases[k];
    expect_t e;
    memset(&e, 0, sizeof e);
    gw_t *w = gw_new();
    c->build(w, &e);
    size_t size;
    uint8_t *img = gw_finish_free(w, &size);
    if (c->patch) c->patch(img, &size);
    char err[1024];
    uint8_t *copy;
    gguf_ctx_t *ctx = gw_open_exact(img, size, err, sizeof err, &copy);
    if (ctx) fail_msg("case '%s': the file opened", c->name);
    if (getenv("GGUF_TEST_SHOW")) fprintf(stderr, "%-28s %s\n", c->name, err);
    if (err[0] == '\0' || strchr(err, '\n')) fail_msg("case '%s': not one line: '%s'", c->name, err);
    for (int i = 0; i < 2; i++) {
      if (e.want[i][0] && !strstr(err, e.want[i]))
        fail_msg("case '%s':\n  got:  %s\n  want: ...%s...", c->name, err, e.want[i]);
    }
    free(copy);
    free(img);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(open_errors_name_the_path),
      cmocka_unit_test(truncated_at_every_offset),
      cmocka_unit_test(malformed_files_say_what_is_wrong),
  };
  return cmocka_run_group_tests_name("gguf_malformed", tests, NULL, NULL);
}
