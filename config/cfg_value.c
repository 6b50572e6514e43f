/* config/cfg_value.c — parsing and formatting of setting values: integers,
 * sizes with suffixes, durations with units, booleans, enum choices (the
 * syntax is in cfg.h). Pure functions, no state. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "config/cfg.h"

/* Parses an optional '-' and decimal digits at *s, advancing *s past them.
 * Returns 0, -EINVAL (no digits) or -ERANGE. */
static int parse_digits(const char **s, int64_t *out) {
  const char *p = *s;
  bool neg = false;
  if (*p == '-' || *p == '+') neg = *p++ == '-';
  if (!isdigit((unsigned char)*p)) return -EINVAL;
  uint64_t v = 0;
  for (; isdigit((unsigned char)*p); p++) {
    unsigned d = (unsigned)(*p - '0');
    if (v > ((uint64_t)INT64_MAX + (neg ? 1u : 0u) - d) / 10) return -ERANGE;
    v = v * 10 + d;
  }
  *s = p;
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return 0;
}

int cfg_parse_int(const char *s, int64_t *out) {
  int64_t v;
  int rc = parse_digits(&s, &v);
  if (rc) return rc;
  if (*s) return -EINVAL;
  *out = v;
  return 0;
}

static int mul_checked(int64_t v, int64_t unit, int64_t *out) {
  if (v < 0 || (v > 0 && unit > INT64_MAX / v)) return v < 0 ? -EINVAL : -ERANGE;
  *out = v * unit;
  return 0;
}

int cfg_parse_size(const char *s, int64_t *out) {
  int64_t v;
  if (*s == '-') return -EINVAL;
  int rc = parse_digits(&s, &v);
  if (rc) return rc;
  int shift = 0;
  switch (*s) {
  case '\0': case 'b': case 'B': shift = 0; break;
  case 'k': case 'K': shift = 10; break;
  case 'm': case 'M': shift = 20; break;
  case 'g': case 'G': shift = 30; break;
  case 't': case 'T': shift = 40; break;
  default: return -EINVAL;
  }
  if (*s) {
    const char *rest = s + 1;
    bool bytes_only = *s == 'b' || *s == 'B';
    /* "B" alone; after a multiplier: "", "B", "iB" (any case) */
    if (!(bytes_only ? *rest == '\0'
                     : (*rest == '\0' || strcasecmp(rest, "b") == 0 || strcasecmp(rest, "ib") == 0)))
      return -EINVAL;
  }
  return mul_checked(v, (int64_t)1 << shift, out);
}

int cfg_parse_duration_ms(const char *s, int64_t *out) {
  int64_t v;
  if (*s == '-') return -EINVAL;
  int rc = parse_digits(&s, &v);
  if (rc) return rc;
  int64_t unit;
  if (*s == '\0' || strcmp(s, "s") == 0) unit = 1000;
  else if (strcmp(s, "ms") == 0) unit = 1;
  else if (strcmp(s, "m") == 0) unit = 60 * 1000;
  else if (strcmp(s, "h") == 0) unit = 3600 * 1000;
  else return -EINVAL;
  return mul_checked(v, unit, out);
}

int cfg_parse_bool(const char *s, bool *out) {
  static const char *const yes[] = {"true", "yes", "on", "1"};
  static const char *const no[] = {"false", "no", "off", "0"};
  for (int i = 0; i < 4; i++) {
    if (strcasecmp(s, yes[i]) == 0) return *out = true, 0;
    if (strcasecmp(s, no[i]) == 0) return *out = false, 0;
  }
  return -EINVAL;
}

int cfg_parse_enum(const char *s, const char *const *choices) {
  for (int i = 0; choices[i]; i++)
    if (strcmp(s, choices[i]) == 0) return i;
  return -1;
}

char *cfg_format_size(int64_t bytes, char *buf, size_t len) {
  static const char units[] = "KMGT";
  int u = -1;
  int64_t v = bytes;
  while (u < 3 && v != 0 && v % 1024 == 0) v /= 1024, u++;
  if (u < 0) snprintf(buf, len, "%lld", (long long)v);
  else snprintf(buf, len, "%lld%c", (long long)v, units[u]);
  return buf;
}

char *cfg_format_duration(int64_t ms, char *buf, size_t len) {
  if (ms == 0) snprintf(buf, len, "0");
  else if (ms % 3600000 == 0) snprintf(buf, len, "%lldh", (long long)(ms / 3600000));
  else if (ms % 60000 == 0) snprintf(buf, len, "%lldm", (long long)(ms / 60000));
  else if (ms % 1000 == 0) snprintf(buf, len, "%llds", (long long)(ms / 1000));
  else snprintf(buf, len, "%lldms", (long long)ms);
  return buf;
}
