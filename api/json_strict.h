/* api/json_strict.h — what cJSON lets through and RFC 8259 does not:
 * the strict gate in front of every request body (api/oai_fields.c).
 *
 * cJSON accepts numbers with leading zeros ("01") or a trailing dot ("1."),
 * stops at a NUL byte (whatever follows is never seen), skips nothing of a
 * byte-order mark but reports it oddly, takes raw control characters inside
 * strings, takes any bytes as UTF-8, and keeps one value of a duplicated key. A proxy that reads the
 * same bytes strictly would see another request: how requests get smuggled
 * past a filter. json_strict_check accepts exactly RFC 8259's grammar (one
 * value, whitespace around it); json_strict_dup_key finds a repeated key in
 * any object of a tree cJSON built from bytes that passed it. */
#ifndef TRAM_JSON_STRICT_H
#define TRAM_JSON_STRICT_H

#include <stddef.h>

struct cJSON;

/* Nesting deeper than this is refused (cJSON's own limit is 1000). */
#define JSON_STRICT_MAX_DEPTH 512

/* Returns 0 if s[0..n) is one JSON text per RFC 8259, in UTF-8 (§8.1;
 * strings must be well-formed UTF-8, escapes must not leave a surrogate
 * alone), else -EINVAL and, in err, what is wrong and at
 * which byte. Linear time, no allocation. */
int json_strict_check(const char *s, size_t n, char *err, size_t err_len);

/* The first key that appears twice in one object anywhere in the tree, or
 * NULL (cJSON's keys are C strings: keys that differ only after a \u0000
 * count as the same). Allocates a scratch array per object; aborts on out
 * of memory like the rest of the server. */
const char *json_strict_dup_key(const struct cJSON *root);

#endif
