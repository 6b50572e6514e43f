/* gguf/gguf_parse.c — parses and validates a GGUF image (the format is
 * described at the top of gguf.h).
 *
 * Every read goes through a cursor that checks it against the image size
 * first; every count is checked against the bytes left in the file before
 * anything is allocated for it, and every size is computed without overflow.
 * The first problem found ends the parse with one line naming where it is
 * (the header, the key or the tensor, and the byte offset in the file). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "kernels/kern_types.h"
#include "gguf/gguf_internal.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the GGUF reader assumes a little-endian host");

enum {
  MAX_KEY_LEN = 65535, /* the GGUF spec's limit on key length */
  MAX_NAME_LEN = 64,   /* the GGUF spec's limit on tensor name length */
  MAX_DIMS = 4,
  /* The fewest bytes a key/value pair can take: key length, a 1-byte key,
   * the type, a 1-byte value. */
  MIN_KV_BYTES = 8 + 1 + 4 + 1,
  /* The fewest bytes a tensor info can take: name length, a 1-byte name,
   * n_dims, one dimension, type, offset. */
  MIN_TENSOR_BYTES = 8 + 1 + 4 + 8 + 4 + 8,
};

/* A tensor holds at most 2^48 elements: far above any real weight, and low
 * enough that users may multiply element counts by small factors in int64. */
#define MAX_ELEMS (UINT64_C(1) << 48)

typedef struct cursor {
  gguf_ctx_t *ctx;
  const uint8_t *p; /* the image */
  uint64_t size;
  uint64_t off;     /* the next byte to read */
  char where[400];  /* what is being parsed: "header", "key 'x' (#3 at byte 40)" */
  char *err;
  size_t err_len;
} cursor_t;

__attribute__((format(printf, 2, 3))) static int fail(cursor_t *c, const char *fmt, ...) {
  if (c->err && c->err_len > 0) {
    int n = snprintf(c->err, c->err_len, "%s: ", c->where);
    if (n >= 0 && (size_t)n < c->err_len) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(c->err + n, c->err_len - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return -EINVAL;
}

static int fail_nomem(cursor_t *c, const char *what) {
  fail(c, "out of memory allocating %s", what);
  return -ENOMEM;
}

/* Writes a printable, single-line rendering of a name from the file into
 * out: at most 64 bytes of it, other bytes as \xNN, "..." when cut. */
static void quote(char *out, size_t cap, const char *s, uint64_t len) {
  size_t o = 0;
  uint64_t shown = len < 64 ? len : 64;
  for (uint64_t i = 0; i < shown && o + 5 < cap; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch >= 0x20 && ch < 0x7f && ch != '\\' && ch != '\'')
      out[o++] = (char)ch;
    else
      o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
  }
  if (shown < len && o + 4 < cap) {
    memcpy(out + o, "...", 3);
    o += 3;
  }
  out[o] = '\0';
}

/* Checks that n more bytes can be read at the cursor. */
static int need(cursor_t *c, uint64_t n, const char *what) {
  if (n > c->size - c->off)
    return fail(c, "%s (%" PRIu64 " bytes at byte %" PRIu64 ") runs past the end of the file (%" PRIu64 " bytes)",
                what, n, c->off, c->size);
  return 0;
}

static int read_u32(cursor_t *c, uint32_t *v, const char *what) {
  int rc = need(c, 4, what);
  if (rc < 0) return rc;
  memcpy(v, c->p + c->off, 4);
  c->off += 4;
  return 0;
}

static int read_u64(cursor_t *c, uint64_t *v, const char *what) {
  int rc = need(c, 8, what);
  if (rc < 0) return rc;
  memcpy(v, c->p + c->off, 8);
  c->off += 8;
  return 0;
}

/* Reads a string (u64 length, bytes) of at most max_len bytes as a view. */
static int read_str(cursor_t *c, gguf_str_t *s, uint64_t max_len, const char *what) {
  char msg[96];
  snprintf(msg, sizeof msg, "%s length", what);
  uint64_t len;
  int rc = read_u64(c, &len, msg);
  if (rc < 0) return rc;
  if (len > max_len)
    return fail(c, "%s of %" PRIu64 " bytes at byte %" PRIu64 " is longer than the %" PRIu64 " bytes allowed", what,
                len, c->off - 8, max_len);
  rc = need(c, len, what);
  if (rc < 0) return rc;
  s->ptr = (const char *)c->p + c->off;
  s->len = len;
  c->off += len;
  return 0;
}

/* Reads the name of entry i, a key or a tensor info starting at the cursor
 * (`kind` names the entry, `label` the name: "tensor", "tensor name"), makes
 * it the subject of later messages, and adds it to the index: names are
 * non-empty, at most max_len bytes, and unique. */
static int read_name(cursor_t *c, const char *kind, const char *label, uint64_t i, gguf_str_t *name,
                     uint64_t max_len, strmap_t *ix) {
  uint64_t at = c->off;
  snprintf(c->where, sizeof c->where, "%s #%" PRIu64 " (at byte %" PRIu64 ")", kind, i, at);
  int rc = read_str(c, name, max_len, label);
  if (rc < 0) return rc;
  if (name->len == 0) return fail(c, "empty %s", label);
  char quoted[280];
  quote(quoted, sizeof quoted, name->ptr, name->len);
  snprintf(c->where, sizeof c->where, "%s '%s' (#%" PRIu64 " at byte %" PRIu64 ")", kind, quoted, i, at);
  int64_t first = strmap_add(ix, (int32_t)i);
  if (first >= 0) return fail(c, "duplicate %s (first used by %s #%" PRId64 ")", label, kind, first);
  return 0;
}

static int parse_header(cursor_t *c, uint64_t *n_tensors, uint64_t *n_kv) {
  snprintf(c->where, sizeof c->where, "header");
  int rc = need(c, 4, "magic");
  if (rc < 0) return rc;
  if (memcmp(c->p, "GGUF", 4) != 0) {
    /* the file's bytes are not quoted: --model /etc/shadow must not print them */
    return fail(c, "no 'GGUF' magic at byte 0: not a GGUF file");
  }
  c->off = 4;
  uint32_t version;
  if ((rc = read_u32(c, &version, "version")) < 0) return rc;
  if (version == 1)
    return fail(c, "GGUF version 1 is not supported (it has 32-bit counts; convert the model again with a current "
                   "llama.cpp)");
  if (version != 0 && (version & 0xffff) == 0)
    return fail(c, "version field 0x%08" PRIx32 " looks byte-swapped: a big-endian GGUF file, which tram does not read",
                version);
  if (version != 2 && version != 3)
    return fail(c, "GGUF version %" PRIu32 " is not supported (tram reads versions 2 and 3)", version);
  c->ctx->version = version;
  if ((rc = read_u64(c, n_tensors, "tensor count")) < 0) return rc;
  if ((rc = read_u64(c, n_kv, "key/value count")) < 0) return rc;
  /* Reject counts the rest of the file cannot hold before allocating. */
  uint64_t rest = c->size - c->off;
  if (*n_kv > rest / MIN_KV_BYTES)
    return fail(c, "key/value count %" PRIu64 " at byte 16 cannot fit in the %" PRIu64
                   " bytes after the header (a pair takes at least %d bytes)",
                *n_kv, rest, MIN_KV_BYTES);
  rest -= *n_kv * MIN_KV_BYTES;
  if (*n_tensors > rest / MIN_TENSOR_BYTES)
    return fail(c, "tensor count %" PRIu64 " at byte 8 cannot fit in the %" PRIu64
                   " bytes left after the header and %" PRIu64 " key/value pairs (a tensor info takes at least %d bytes)",
                *n_tensors, rest, *n_kv, MIN_TENSOR_BYTES);
  return 0;
}

/* Reads n numeric values of `type` (not string or array) as a view. */
static int parse_numbers(cursor_t *c, gguf_kv_t *kv, uint32_t type, uint64_t n) {
  uint64_t esz = gguf_type_size(type);
  if (n > (c->size - c->off) / esz)
    return fail(c, "%" PRIu64 " %s value(s) of %" PRIu64 " bytes at byte %" PRIu64
                   " run past the end of the file (%" PRIu64 " bytes)",
                n, gguf_type_name(type), esz, c->off, c->size);
  kv->data = c->p + c->off;
  if (type == GGUF_TYPE_BOOL) {
    for (uint64_t j = 0; j < n; j++) {
      if (c->p[c->off + j] > 1)
        return fail(c, "bool value %u at byte %" PRIu64 " is not 0 or 1", c->p[c->off + j], c->off + j);
    }
  }
  c->off += n * esz;
  return 0;
}

static int parse_array(cursor_t *c, gguf_kv_t *kv) {
  uint32_t et;
  int rc = read_u32(c, &et, "array element type");
  if (rc < 0) return rc;
  if (et == GGUF_TYPE_ARRAY)
    return fail(c, "array of arrays at byte %" PRIu64 ": nested arrays are not supported", c->off - 4);
  if (et >= GGUF_TYPE_COUNT)
    return fail(c, "array of unknown value type %" PRIu32 " at byte %" PRIu64, et, c->off - 4);
  kv->arr_type = (gguf_type_t)et;
  uint64_t n;
  if ((rc = read_u64(c, &n, "array length")) < 0) return rc;
  kv->n = n;
  if (et != GGUF_TYPE_STRING) return parse_numbers(c, kv, et, n);

  /* Each string takes at least its 8-byte length: check before allocating. */
  if (n > (c->size - c->off) / 8)
    return fail(c, "array of %" PRIu64 " strings at byte %" PRIu64 " cannot fit in the %" PRIu64
                   " bytes left in the file",
                n, c->off - 8, c->size - c->off);
  if (n == 0) return 0;
  gguf_str_t *strs = xcalloc(n, sizeof *strs);
  kv->strs = strs; /* owned by the context from here: gguf__free_parsed frees it */
  for (uint64_t j = 0; j < n; j++) {
    char what[64];
    snprintf(what, sizeof what, "string %" PRIu64 " of the array", j);
    if ((rc = read_str(c, &strs[j], UINT64_MAX, what)) < 0) return rc;
  }
  return 0;
}

static int parse_kv(cursor_t *c, uint64_t i) {
  gguf_ctx_t *ctx = c->ctx;
  gguf_kv_t *kv = &ctx->kv[i];
  int rc = read_name(c, "key", "key", i, &kv->key, MAX_KEY_LEN, &ctx->kv_index);
  if (rc < 0) return rc;

  uint32_t type;
  if ((rc = read_u32(c, &type, "value type")) < 0) return rc;
  if (type >= GGUF_TYPE_COUNT) return fail(c, "unknown value type %" PRIu32 " at byte %" PRIu64, type, c->off - 4);
  kv->type = (gguf_type_t)type;
  kv->n = 1;
  if (type == GGUF_TYPE_ARRAY) return parse_array(c, kv);
  if (type == GGUF_TYPE_STRING) {
    kv->strs = &ctx->kv_str[i];
    return read_str(c, &ctx->kv_str[i], UINT64_MAX, "string value");
  }
  return parse_numbers(c, kv, type, 1);
}

/* general.alignment: absent (32), or a u32 power of two. */
static int parse_alignment(cursor_t *c) {
  gguf_ctx_t *ctx = c->ctx;
  static const char key[] = "general.alignment";
  ctx->alignment = 32;
  int64_t i = strmap_find(&ctx->kv_index, key, sizeof key - 1);
  if (i < 0) return 0;
  const gguf_kv_t *kv = &ctx->kv[i];
  snprintf(c->where, sizeof c->where, "key '%s' (#%" PRId64 ")", key, i);
  if (kv->type != GGUF_TYPE_UINT32)
    return fail(c, "has type %s%s%s; the alignment must be a uint32", gguf_type_name(kv->type),
                kv->type == GGUF_TYPE_ARRAY ? " of " : "", kv->type == GGUF_TYPE_ARRAY ? gguf_type_name(kv->arr_type) : "");
  uint32_t a;
  memcpy(&a, kv->data, 4);
  if (a == 0 || (a & (a - 1)) != 0)
    return fail(c, "alignment %" PRIu32 " at byte %" PRIu64 " is not a power of two", a,
                (uint64_t)((const uint8_t *)kv->data - c->p));
  ctx->alignment = a;
  return 0;
}

static const char *ggml_type_name(uint32_t type) {
  /* GGML's ids, for naming types tram does not read (kern_type_name knows the rest). */
  static const char *const names[] = {
      [4] = "Q4_2 (removed from GGML)", [5] = "Q4_3 (removed from GGML)", [9] = "Q8_1", [10] = "Q2_K",
      [11] = "Q3_K", [15] = "Q8_K", [16] = "IQ2_XXS", [17] = "IQ2_XS", [18] = "IQ3_XXS", [19] = "IQ1_S",
      [20] = "IQ4_NL", [21] = "IQ3_S", [22] = "IQ2_S", [23] = "IQ4_XS", [24] = "I8", [25] = "I16",
      [26] = "I32", [27] = "I64", [28] = "F64", [29] = "IQ1_M", [34] = "TQ1_0", [35] = "TQ2_0",
  };
  const char *name = type < sizeof names / sizeof *names ? names[type] : NULL;
  return name ? name : "unknown to tram";
}

static int parse_tensor_info(cursor_t *c, uint64_t i) {
  gguf_ctx_t *ctx = c->ctx;
  gguf_tensor_t *t = &ctx->tensors[i];
  int rc = read_name(c, "tensor", "tensor name", i, &t->name, MAX_NAME_LEN, &ctx->tensor_index);
  if (rc < 0) return rc;

  if ((rc = read_u32(c, &t->n_dims, "n_dims")) < 0) return rc;
  if (t->n_dims < 1 || t->n_dims > MAX_DIMS)
    return fail(c, "n_dims %" PRIu32 " at byte %" PRIu64 " is not in 1..%d", t->n_dims, c->off - 4, MAX_DIMS);
  uint64_t n_elems = 1;
  for (uint32_t d = 0; d < MAX_DIMS; d++) t->ne[d] = 1;
  for (uint32_t d = 0; d < t->n_dims; d++) {
    uint64_t ne;
    if ((rc = read_u64(c, &ne, "dimension")) < 0) return rc;
    if (ne == 0) return fail(c, "dimension %" PRIu32 " at byte %" PRIu64 " is 0", d, c->off - 8);
    if (ne > MAX_ELEMS / n_elems)
      return fail(c, "dimension %" PRIu32 " = %" PRIu64 " at byte %" PRIu64 " makes more than 2^48 elements", d, ne,
                  c->off - 8);
    n_elems *= ne;
    t->ne[d] = (int64_t)ne;
  }

  if ((rc = read_u32(c, &t->type, "tensor type")) < 0) return rc;
  if (!kern_type_is_weight(t->type))
    return fail(c, "type %" PRIu32 " (%s) at byte %" PRIu64
                   " is not supported (tram reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, MXFP4)",
                t->type, ggml_type_name(t->type), c->off - 4);
  int64_t row_bytes = kern_type_row_bytes(t->type, t->ne[0]);
  if (row_bytes < 0)
    return fail(c, "a row of %" PRId64 " elements is not a whole number of %s blocks (%" PRId64 " elements each)",
                t->ne[0], kern_type_name(t->type), kern_type_block_elems(t->type));
  uint64_t n_rows = n_elems / (uint64_t)t->ne[0];
  if (n_rows > (uint64_t)INT64_MAX / (uint64_t)row_bytes)
    return fail(c, "%" PRIu64 " rows of %" PRId64 " bytes overflow the byte size", n_rows, row_bytes);
  t->nbytes = n_rows * (uint64_t)row_bytes;

  if ((rc = read_u64(c, &t->offset, "tensor data offset")) < 0) return rc;
  if (t->offset % ctx->alignment != 0)
    return fail(c, "data offset %" PRIu64 " at byte %" PRIu64 " is not a multiple of the alignment %" PRIu32, t->offset,
                c->off - 8, ctx->alignment);
  return 0;
}

/* Places the data section after the tensor infos and checks that every
 * tensor's data lies inside the file. */
static int place_data(cursor_t *c) {
  gguf_ctx_t *ctx = c->ctx;
  uint64_t end = c->off;
  uint64_t pad = (ctx->alignment - end % ctx->alignment) % ctx->alignment;
  if (pad > c->size - end) {
    if (ctx->n_tensors > 0) {
      snprintf(c->where, sizeof c->where, "data section");
      return fail(c, "the tensor infos end at byte %" PRIu64 "; padded to the alignment %" PRIu32
                     " the data starts past the end of the file (%" PRIu64 " bytes)",
                  end, ctx->alignment, c->size);
    }
    pad = c->size - end; /* no tensors: the padding may be missing */
  }
  ctx->data_offset = end + pad;
  uint64_t avail = c->size - ctx->data_offset;
  for (uint64_t i = 0; i < ctx->n_tensors; i++) {
    gguf_tensor_t *t = &ctx->tensors[i];
    if (t->offset > avail || t->nbytes > avail - t->offset) {
      char name[280];
      quote(name, sizeof name, t->name.ptr, t->name.len);
      snprintf(c->where, sizeof c->where, "tensor '%s' (#%" PRIu64 ")", name, i);
      return fail(c, "data of %" PRIu64 " bytes at offset %" PRIu64 " of the data section (which starts at byte %" PRIu64
                     ") runs past the end of the file (%" PRIu64 " bytes)",
                  t->nbytes, t->offset, ctx->data_offset, c->size);
    }
    t->data = c->p + ctx->data_offset + t->offset;
  }
  return 0;
}

int gguf__parse(gguf_ctx_t *ctx, char *err, size_t err_len) {
  cursor_t c = {.ctx = ctx, .p = ctx->base, .size = ctx->size, .err = err, .err_len = err_len};
  uint64_t n_tensors, n_kv;
  int rc = parse_header(&c, &n_tensors, &n_kv);
  if (rc < 0) return rc;

  /* The counts are bounded by the file size: these allocations are too. */
  ctx->kv = xcalloc(n_kv, sizeof *ctx->kv);
  ctx->kv_str = xcalloc(n_kv, sizeof *ctx->kv_str);
  ctx->tensors = xcalloc(n_tensors, sizeof *ctx->tensors);
  if (n_kv > INT32_MAX || n_tensors > INT32_MAX)
    return fail(&c, "%" PRIu64 " keys and %" PRIu64 " tensors: more than a name index holds", n_kv, n_tensors);
  if (strmap_init(&ctx->kv_index, n_kv, gguf__kv_key, ctx) < 0 ||
      strmap_init(&ctx->tensor_index, n_tensors, gguf__tensor_name, ctx) < 0)
    return fail_nomem(&c, "the name indexes");

  for (uint64_t i = 0; i < n_kv; i++) {
    ctx->n_kv = i + 1; /* so that a failure frees what this pair allocated */
    if ((rc = parse_kv(&c, i)) < 0) return rc;
  }
  if ((rc = parse_alignment(&c)) < 0) return rc;
  for (uint64_t i = 0; i < n_tensors; i++) {
    ctx->n_tensors = i + 1;
    if ((rc = parse_tensor_info(&c, i)) < 0) return rc;
  }
  return place_data(&c);
}

void gguf__free_parsed(gguf_ctx_t *ctx) {
  for (uint64_t i = 0; ctx->kv && i < ctx->n_kv; i++) {
    gguf_kv_t *kv = &ctx->kv[i];
    if (kv->type == GGUF_TYPE_ARRAY && kv->arr_type == GGUF_TYPE_STRING) free((void *)kv->strs);
  }
  free(ctx->kv);
  free(ctx->kv_str);
  free(ctx->tensors);
  strmap_free(&ctx->kv_index);
  strmap_free(&ctx->tensor_index);
}
