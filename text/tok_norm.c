/* text/tok_norm.c — Unicode normalization before tokenizing:
 * tokenizer.json's NFC normalizer (Qwen 2, 2.5 and 3), which Hugging Face's
 * `tokenizers` applies to each piece of text between added tokens. ICU
 * (libicu) does the normalization; the GPU test build, which links no
 * Debian library but PCRE2 (TRAM_NO_HF), has none and refuses such a
 * vocabulary at creation (tok_vocab.c). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "text/tok_internal.h"

#ifndef TRAM_NO_HF
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

int tok__nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *out_n) {
  *out = NULL;
  size_t i = 0;
  while (i < n && s[i] < 0x80) i++;
  if (i == n) return 0; /* ASCII is NFC */
  if (n > INT32_MAX / 4) return -E2BIG;
  UErrorCode st = U_ZERO_ERROR;
  const UNormalizer2 *nfc = unorm2_getNFCInstance(&st);
  if (U_FAILURE(st)) return -EINVAL;
  int32_t n16 = 0;
  u_strFromUTF8(NULL, 0, &n16, (const char *)s, (int32_t)n, &st); /* preflight */
  st = U_ZERO_ERROR;
  UChar *src = xmalloc(((size_t)n16 + 1) * sizeof *src);
  u_strFromUTF8(src, n16 + 1, &n16, (const char *)s, (int32_t)n, &st);
  int rc = U_FAILURE(st) ? -EILSEQ : 0;
  if (rc == 0 && unorm2_quickCheck(nfc, src, n16, &st) == UNORM_YES && U_SUCCESS(st)) {
    free(src);
    return 0; /* already NFC */
  }
  st = U_ZERO_ERROR;
  /* NFC of a string is at most 3 times its length (UAX #15); one retry at
   * the size ICU asks for, should that ever fall short */
  int32_t cap16 = 3 * n16 + 1, m16 = 0;
  UChar *dst = NULL;
  for (int attempt = 0; rc == 0 && attempt < 2; attempt++) {
    dst = xreallocarray(dst, (size_t)cap16, sizeof *dst);
    st = U_ZERO_ERROR;
    m16 = unorm2_normalize(nfc, src, n16, dst, cap16, &st);
    if (st != U_BUFFER_OVERFLOW_ERROR) break;
    cap16 = m16 + 1;
  }
  if (rc == 0 && U_FAILURE(st)) rc = -EINVAL;
  int32_t m8 = 0;
  if (rc == 0) {
    u_strToUTF8(NULL, 0, &m8, dst, m16, &st); /* preflight */
    st = U_ZERO_ERROR;
    *out = xmalloc((size_t)m8 + 1);
    u_strToUTF8((char *)*out, m8 + 1, &m8, dst, m16, &st);
    if (U_FAILURE(st)) {
      free(*out);
      *out = NULL;
      rc = -EINVAL;
    }
  }
  *out_n = (size_t)m8;
  free(src);
  free(dst);
  return rc;
}

int tok__nfc_available(void) { return 1; }

#else

int tok__nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *out_n) {
  (void)s, (void)n, (void)out_n;
  *out = NULL;
  return -ENOTSUP;
}

int tok__nfc_available(void) { return 0; }

#endif
