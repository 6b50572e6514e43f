/* tests/tools/tokenize.c — tram's tokenizer on the command line, for the
 * parity tests (tests/integration/test_tokenizer.py) and by hand.
 *
 *   tokenize -m MODEL.gguf [options] [FILE|-]
 *
 * Encodes the text read from FILE (default stdin) and prints its ids as one
 * JSON array. With --hex-lines each input line is the hex of one text and
 * each output line that text's ids, so one process serves a whole corpus.
 *
 *   --special       parse control tokens in the text (TOK_ENC_PARSE_SPECIAL)
 *   --add-special   BOS/EOS as the model says (TOK_ENC_ADD_SPECIAL)
 *   --strict        invalid UTF-8 is an error (exit 3) instead of U+FFFD
 *   --decode        input lines are JSON arrays of ids; prints each decoded
 *                   text as hex (or raw bytes without --hex-lines)
 *   --stream        like --decode, through the streaming detokenizer, one
 *                   token at a time, then flushed
 *   --render-special, --strip-prefix, --valid-utf8   decode flags
 *   --info          prints the special ids as JSON
 *
 * Only the GGUF's tokenizer.ggml.* keys are read (a file without tensors
 * will do). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf/hf.h"
#include "text/tokenizer.h"

static char *read_all(FILE *f, size_t *len) {
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  size_t k;
  while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
    n += k;
    if (n == cap) buf = realloc(buf, cap *= 2);
  }
  if (!buf) abort();
  *len = n;
  return buf;
}

static int hexval(int c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void print_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) printf("%02x", (unsigned char)s[i]);
  putchar('\n');
}

/* ---- the modes ----------------------------------------------------------------------- */

static int encode_one(const tok_t *tok, const char *s, size_t n, int flags) {
  size_t cap = n + 16;
  int32_t *ids = malloc(cap * sizeof *ids);
  int64_t k = tok_encode(tok, s, n, flags, ids, cap);
  if (k > (int64_t)cap) {
    ids = realloc(ids, (size_t)k * sizeof *ids);
    k = tok_encode(tok, s, n, flags, ids, (size_t)k);
  }
  if (k < 0) {
    fprintf(stderr, "tokenize: encode failed: %s\n", strerror((int)-k));
    free(ids);
    return 3;
  }
  putchar('[');
  for (int64_t i = 0; i < k; i++) printf(i ? ", %d" : "%d", ids[i]);
  printf("]\n");
  free(ids);
  return 0;
}

static int decode_one(const tok_t *tok, const char *line, int flags, int stream, int hex) {
  cJSON *arr = cJSON_Parse(line);
  if (!cJSON_IsArray(arr)) {
    fprintf(stderr, "tokenize: not a JSON array of ids: %.60s\n", line);
    cJSON_Delete(arr);
    return 2;
  }
  int n = cJSON_GetArraySize(arr);
  int32_t *ids = calloc((size_t)n + 1, sizeof *ids);
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, arr) ids[i++] = (int32_t)e->valuedouble;
  cJSON_Delete(arr);
  char *out = NULL;
  int64_t len = 0;
  int rc = 0;
  if (stream) {
    tok_stream_t st;
    tok_stream_init(&st, tok, flags);
    size_t step = tok_stream_max_out(tok);
    out = malloc(step * ((size_t)n + 1));
    for (i = 0; i < n && rc == 0; i++) {
      int w = tok_stream_push(&st, ids[i], out + len, step);
      if (w < 0) rc = 3;
      else len += w;
    }
    if (rc == 0) len += tok_stream_flush(&st, out + len, step);
  } else {
    len = tok_decode(tok, ids, (size_t)n, flags, NULL, 0);
    if (len < 0) {
      rc = 3;
    } else {
      out = malloc((size_t)len + 1);
      tok_decode(tok, ids, (size_t)n, flags, out, (size_t)len + 1);
    }
  }
  if (rc) {
    fprintf(stderr, "tokenize: decode failed (bad id?)\n");
  } else if (hex) {
    print_hex(out, (size_t)len);
  } else {
    fwrite(out, 1, (size_t)len, stdout);
  }
  free(out);
  free(ids);
  return rc;
}

static void print_info(const tok_t *tok) {
  const int32_t *eog;
  int32_t n = tok_eog_ids(tok, &eog);
  printf("{\"n_vocab\": %d, \"bos\": %d, \"eos\": %d, \"eot\": %d, \"add_bos\": %d, \"eog\": [",
         tok_n_vocab(tok), tok_bos(tok), tok_eos(tok), tok_eot(tok), tok_adds_bos(tok));
  for (int32_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", eog[i]);
  printf("]}\n");
}

static void usage(void) {
  fprintf(stderr, "usage: tokenize -m MODEL.gguf [--special] [--add-special] "
                  "[--strict] [--hex-lines] [--decode|--stream] [--render-special] "
                  "[--strip-prefix] [--valid-utf8] [--info] [FILE|-]\n");
}

int main(int argc, char **argv) {
  const char *model = NULL, *input = "-";
  int enc = 0, dec = 0, hex = 0, decode = 0, stream = 0, info = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-m") == 0 && i + 1 < argc) model = argv[++i];
    else if (strcmp(a, "--special") == 0) enc |= TOK_ENC_PARSE_SPECIAL;
    else if (strcmp(a, "--add-special") == 0) enc |= TOK_ENC_ADD_SPECIAL;
    else if (strcmp(a, "--strict") == 0) enc |= TOK_ENC_STRICT;
    else if (strcmp(a, "--render-special") == 0) dec |= TOK_DEC_SPECIAL;
    else if (strcmp(a, "--strip-prefix") == 0) dec |= TOK_DEC_STRIP_PREFIX;
    else if (strcmp(a, "--valid-utf8") == 0) dec |= TOK_DEC_VALID_UTF8;
    else if (strcmp(a, "--hex-lines") == 0) hex = 1;
    else if (strcmp(a, "--decode") == 0) decode = 1;
    else if (strcmp(a, "--stream") == 0) stream = 1;
    else if (strcmp(a, "--info") == 0) info = 1;
    else if (a[0] != '-' || strcmp(a, "-") == 0) input = a;
    else {
      usage();
      return 2;
    }
  }
  if (!model) {
    usage();
    return 2;
  }
  char err[512];
  tok_t *tok;
  gguf_ctx_t *g = hf_is_checkpoint(model) ? hf_open(model, err, sizeof err) : gguf_open(model, err, sizeof err);
  tok = g ? tok_create_from_gguf(g, err, sizeof err) : NULL;
  gguf_close(g); /* the tokenizer keeps copies */
  if (!tok) {
    fprintf(stderr, "tokenize: %s\n", err);
    return 1;
  }
  if (info) {
    print_info(tok);
    tok_destroy(tok);
    return 0;
  }
  FILE *f = strcmp(input, "-") == 0 ? stdin : fopen(input, "rb");
  if (!f) {
    fprintf(stderr, "tokenize: %s: %s\n", input, strerror(errno));
    tok_destroy(tok);
    return 1;
  }
  size_t len;
  char *text = read_all(f, &len);
  if (f != stdin) fclose(f);
  int rc = 0;
  if (!hex && !decode && !stream) {
    rc = encode_one(tok, text, len, enc);
  } else {
    /* one item per line */
    char *p = text, *end = text + len;
    char *buf = malloc(len + 1);
    while (p < end && rc == 0) {
      char *nl = memchr(p, '\n', (size_t)(end - p));
      size_t n = (size_t)((nl ? nl : end) - p);
      if (decode || stream) {
        memcpy(buf, p, n);
        buf[n] = 0;
        rc = decode_one(tok, buf, dec, stream, hex);
      } else {
        size_t k = 0;
        for (size_t i = 0; i + 1 < n; i += 2) {
          int hi = hexval(p[i]), lo = hexval(p[i + 1]);
          if (hi < 0 || lo < 0) {
            fprintf(stderr, "tokenize: bad hex line\n");
            rc = 2;
            break;
          }
          buf[k++] = (char)(hi * 16 + lo);
        }
        if (rc == 0) rc = encode_one(tok, buf, k, enc);
      }
      p += n + 1;
    }
    free(buf);
  }
  free(text);
  tok_destroy(tok);
  return rc;
}
