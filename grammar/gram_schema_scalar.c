/* grammar/gram_schema_scalar.c — JSON Schema numbers and strings into the
 * expression builder: integer ranges written out exactly as digit
 * automata, number bounds (the integers within and k.ddd decimals), string
 * lengths, pattern and format (see gram_schema.c for the keyword list). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_schema_int.h"

/* ---- numbers -------------------------------------------------------------------- */

/* Fixed-length decimal strings between lo and hi (same length, digits). */
static int32_t fixed_range(sc_t *c, const char *lo, const char *hi, int n) {
  gx_build_t *b = c->b;
  if (n == 0) return gx_empty(b);
  if (lo[0] == hi[0]) return gx_seq2(b, gx_byte(b, (unsigned char)lo[0]), fixed_range(c, lo + 1, hi + 1, n - 1));
  int lo_zero = 1, hi_nine = 1;
  for (int i = 1; i < n; i++) lo_zero &= lo[i] == '0', hi_nine &= hi[i] == '9';
  int32_t any = gx_repeat(b, gram__sc_set_of(c, "", '0', '9'), n - 1, n - 1);
  if (lo_zero && hi_nine) return gx_seq2(b, gram__sc_set_of(c, "", (unsigned char)lo[0], (unsigned char)hi[0]), any);
  char nines[24], zeros[24];
  memset(nines, '9', sizeof nines), memset(zeros, '0', sizeof zeros);
  int32_t a = gx_alt(b);
  gx_add(b, a, gx_seq2(b, gx_byte(b, (unsigned char)lo[0]), fixed_range(c, lo + 1, nines, n - 1)));
  if (hi[0] - lo[0] >= 2)
    gx_add(b, a, gx_seq2(b, gram__sc_set_of(c, "", (unsigned char)lo[0] + 1, (unsigned char)hi[0] - 1),
                         gx_repeat(b, gram__sc_set_of(c, "", '0', '9'), n - 1, n - 1)));
  gx_add(b, a, gx_seq2(b, gx_byte(b, (unsigned char)hi[0]), fixed_range(c, zeros, hi + 1, n - 1)));
  return a;
}

/* Decimal naturals in [a, b] (b < 0: unbounded), no leading zeros. The
 * lengths whose every number is in (those strictly between a's and b's)
 * are one [1-9][0-9]{m,n}, not one alternative per length. */
static int32_t nat_range(sc_t *c, int64_t a, int64_t b) {
  gx_build_t *bb = c->b;
  int32_t alt = gx_alt(bb);
  char la[24], lb[24];
  int na = snprintf(la, sizeof la, "%lld", (long long)a);
  int nb = b < 0 ? 19 : snprintf(lb, sizeof lb, "%lld", (long long)b);
  const int top = b < 0 ? 18 : 19; /* the longest length written out here */
  for (int len = na; len <= nb && len <= top; len++) {
    int64_t p10 = 1;
    for (int i = 1; i < len; i++) p10 *= 10;
    int64_t x = len == na ? a : p10, y = (b >= 0 && len == nb) ? b : p10 * 10 - 1;
    if (len == 1 && len != na) x = 0;
    if (len > 1 && len > na && (b < 0 || len < nb)) { /* whole lengths len..last */
      int last = len;
      while (last + 1 <= top && (b < 0 || last + 1 < nb)) last++;
      gx_add(bb, alt, gx_seq2(bb, gram__sc_set_of(c, "", '1', '9'),
                              gx_repeat(bb, gram__sc_set_of(c, "", '0', '9'), len - 1, last - 1)));
      len = last;
      continue;
    }
    char lo[40], hi[40];
    const int w = len & 31; /* len <= 19: the mask only tells the compiler the width is small */
    snprintf(lo, sizeof lo, "%0*lld", w, (long long)x);
    snprintf(hi, sizeof hi, "%0*lld", w, (long long)y);
    gx_add(bb, alt, fixed_range(c, lo, hi, len));
  }
  if (b < 0) /* longer than 18 digits: any */
    gx_add(bb, alt, gx_seq2(bb, gram__sc_set_of(c, "", '1', '9'), gx_repeat(bb, gram__sc_set_of(c, "", '0', '9'), 18, -1)));
  return alt;
}

#define NUM_LIMIT 1e15

/* Integers in [lo, hi]; has_lo/has_hi say which bounds exist. */
static int32_t int_range(sc_t *c, int has_lo, int64_t lo, int has_hi, int64_t hi) {
  gx_build_t *b = c->b;
  if (has_lo && has_hi && lo > hi) return gram__sc_fail(c, "json schema: %s bounds leave no integer (at %s)", "minimum/maximum");
  int32_t alt = gx_alt(b);
  if (!has_lo || lo < 0) { /* negative part: -(k) for k in [max(1, -hi), -lo] */
    int64_t k0 = has_hi ? (hi >= 0 ? 1 : -hi) : 1;
    int32_t mag = nat_range(c, k0, !has_lo ? -1 : lo == INT64_MIN ? INT64_MAX : -lo);
    if (has_lo && lo == INT64_MIN) mag = gx_alt2(b, mag, gram__sc_lit(c, "9223372036854775808")); /* -2^63 */
    gx_add(b, alt, gx_seq2(b, gram__sc_lit(c, "-"), mag));
  }
  if (!has_hi || hi >= 0) gx_add(b, alt, nat_range(c, has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1));
  return alt;
}

/* The bound keyword key of s: the integer bound in *out (rounded inward,
 * exclusive made inclusive), the raw value in *raw; 1 if present, 0 if not,
 * -1 after an error. */
static int bound(sc_t *c, const cJSON *s, const char *key, int up, int64_t *out, double *raw) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
  if (!v) return 0;
  size_t old = gram__sc_path_push(c, key);
  int rc = 0;
  if (!cJSON_IsNumber(v)) rc = gram__sc_fail(c, "json schema: '%s' must be a number (at %s)", key);
  else if (fabs(v->valuedouble) > NUM_LIMIT) rc = gram__sc_fail(c, "json schema: '%s' beyond 1e15 is not supported (at %s)", key);
  gram__sc_path_pop(c, old);
  if (rc) return -1;
  double d = v->valuedouble;
  *raw = d;
  int excl = strncmp(key, "exclusive", 9) == 0;
  double r = up ? floor(d) : ceil(d);
  if (excl && r == d) r += up ? -1 : 1;
  *out = (int64_t)r;
  return 1;
}

/* A non-negative decimal bound k.D: the integer part, the fraction's digits
 * (no trailing zeros), and whether the bound itself is allowed. */
typedef struct dec {
  int64_t ip;
  char fd[24];
  int nfd;
  int incl;
} dec_t;

/* x >= 0 as the shortest decimal that reads back as x (what the schema's
 * text most likely said: 0.1, not 0.1000000000000000055...). -1 if it needs
 * more than 17 fraction digits. */
static int to_dec(double x, int incl, dec_t *d) {
  char buf[64];
  for (int f = 0; f <= 17; f++) {
    snprintf(buf, sizeof buf, "%.*f", f, x);
    if (strtod(buf, NULL) != x) continue;
    const char *dot = strchr(buf, '.');
    d->ip = (int64_t)strtoll(buf, NULL, 10);
    d->nfd = 0;
    if (dot)
      for (const char *q = dot + 1; *q; q++) d->fd[d->nfd++] = *q;
    while (d->nfd && d->fd[d->nfd - 1] == '0') d->nfd--;
    d->incl = incl;
    return 0;
  }
  return -1;
}

/* Fraction digit strings f (at least one digit, any trailing zeros) with
 * lo < 0.f < hi as values (<= where the bound is inclusive); lo/hi NULL: no
 * bound on that side. A small automaton over (digit index, still equal to
 * lo's digits, still equal to hi's): one rule per state, the states past
 * both bounds' digits looping on themselves. */
static int32_t frac_digits(sc_t *c, const dec_t *lo, const dec_t *hi) {
  gx_build_t *b = c->b;
  const int nl = lo ? lo->nfd : 0, nh = hi ? hi->nfd : 0, M = (nl > nh ? nl : nh) + 1;
  int32_t rule[25][2][2];
  for (int i = 0; i <= M; i++)
    for (int tl = 0; tl < 2; tl++)
      for (int th = 0; th < 2; th++) rule[i][tl][th] = -1;
  /* the states reachable from (0, lo != NULL, hi != NULL), made as needed */
  int32_t stack[25 * 4][3], sp = 0;
  const int tl0 = lo != NULL, th0 = hi != NULL;
  rule[0][tl0][th0] = gx_rule_new(b, "frac");
  stack[sp][0] = 0, stack[sp][1] = tl0, stack[sp][2] = th0, sp++;
  while (sp && !b->failed) {
    sp--;
    const int i = stack[sp][0], tl = stack[sp][1], th = stack[sp][2];
    int32_t alt = gx_alt(b);
    const int end_ok = i > 0 && (!tl || (i >= nl && lo->incl)) && (!th || i < nh || hi->incl);
    if (end_ok) gx_add(b, alt, gx_empty(b));
    const int dl = tl ? (i < nl ? lo->fd[i] - '0' : 0) : 0, dh = th ? (i < nh ? hi->fd[i] - '0' : 0) : 9;
    /* digits dl..dh, grouped by the state they lead to */
    for (int ntl = 0; ntl < 2; ntl++)
      for (int nth = 0; nth < 2; nth++) {
        gram_set_t set = {{0}};
        int any = 0;
        for (int d = dl; d <= dh; d++)
          if ((tl && d == dl) == ntl && (th && d == dh) == nth) gram__set_add(&set, (unsigned)('0' + d)), any = 1;
        if (!any) continue;
        const int ni = i + 1 < M ? i + 1 : M;
        if (rule[ni][ntl][nth] < 0) {
          rule[ni][ntl][nth] = gx_rule_new(b, "frac");
          stack[sp][0] = ni, stack[sp][1] = ntl, stack[sp][2] = nth, sp++;
        }
        gx_add(b, alt, gx_seq2(b, gx_set(b, &set), gx_ref(b, rule[ni][ntl][nth])));
      }
    if (b->nodes[alt].first < 0) gx_add(b, alt, gx_nothing(b));
    gx_define(b, rule[i][tl][th], alt, -1);
  }
  return b->failed ? -1 : gx_ref(b, rule[0][tl0][th0]);
}

/* Magnitudes k.f (f at least one digit) with lo < k.f < hi (<= where
 * inclusive; NULL: unbounded that side, k >= 0 always), or -1 when there
 * are none. */
static int32_t decimals(sc_t *c, const dec_t *lo, const dec_t *hi) {
  gx_build_t *b = c->b;
  const int64_t kl = lo ? lo->ip : 0, kh = hi ? hi->ip : -1;
  if (hi && kh < kl) return -1;
  int32_t alt = gx_alt(b);
  if (hi && kh == kl) /* one integer part: both bounds on the fraction */
    gx_add(b, alt, gx_seq3(b, nat_range(c, kl, kl), gram__sc_lit(c, "."), frac_digits(c, lo, hi)));
  else {
    gx_add(b, alt, gx_seq3(b, nat_range(c, kl, kl), gram__sc_lit(c, "."), frac_digits(c, lo, NULL)));
    if (!hi || kh > kl + 1) /* integer parts strictly between: any fraction */
      gx_add(b, alt, gx_seq3(b, nat_range(c, kl + 1, hi ? kh - 1 : -1), gram__sc_lit(c, "."), frac_digits(c, NULL, NULL)));
    if (hi) gx_add(b, alt, gx_seq3(b, nat_range(c, kh, kh), gram__sc_lit(c, "."), frac_digits(c, NULL, hi)));
  }
  return b->failed ? -1 : alt;
}

/* Numbers with a fraction part within [L, H] (either side open, absent, or
 * exclusive): the positive magnitudes and the negative ones, each a digit
 * automaton exact to the bounds' shortest decimal forms. -1 when there are
 * none (or after an error). */
static int32_t fractions(sc_t *c, int has_lo, double L, int lo_excl, int has_hi, double H, int hi_excl) {
  gx_build_t *b = c->b;
  int32_t alt = gx_alt(b);
  int n = 0;
  dec_t dl, dh;
  /* positive: L < m < H */
  if (!has_hi || H >= 0) {
    const int lo_on = has_lo && L >= 0;
    if ((lo_on && to_dec(L, !lo_excl, &dl)) || (has_hi && to_dec(H, !hi_excl, &dh)))
      return gram__sc_fail(c, "json schema: a %s needing more than 17 fraction digits is not supported (at %s)", "bound");
    int32_t x = decimals(c, lo_on ? &dl : NULL, has_hi ? &dh : NULL);
    if (x >= 0) gx_add(b, alt, x), n++;
  }
  /* negative: -m in [L, H], that is -H < m < -L */
  if (!has_lo || L <= 0) {
    const int lo_on = has_hi && H <= 0;
    if ((lo_on && to_dec(-H, !hi_excl, &dl)) || (has_lo && to_dec(-L, !lo_excl, &dh)))
      return gram__sc_fail(c, "json schema: a %s needing more than 17 fraction digits is not supported (at %s)", "bound");
    int32_t x = decimals(c, lo_on ? &dl : NULL, has_lo ? &dh : NULL);
    if (x >= 0) gx_add(b, alt, gx_seq2(b, gram__sc_lit(c, "-"), x)), n++;
  }
  return b->failed ? -1 : n ? alt : -1;
}

int32_t gram__sc_int64(sc_t *c) { return int_range(c, 1, INT64_MIN, 1, INT64_MAX); }

int32_t gram__sc_number(sc_t *c, const cJSON *s, int integer) {
  int64_t lo = 0, hi = 0, x;
  double L = 0, H = 0, raw;
  int has_lo = 0, has_hi = 0, lo_excl = 0, hi_excl = 0, k;
  static const char *const lows[] = {"minimum", "exclusiveMinimum"}, *const highs[] = {"maximum", "exclusiveMaximum"};
  for (int i = 0; i < 2; i++) { /* the tighter bound of each side; at equal values the exclusive one */
    if ((k = bound(c, s, lows[i], 0, &x, &raw)) < 0) return -1;
    if (k && (!has_lo || raw > L || (raw == L && i))) L = raw, lo_excl = i;
    if (k && (!has_lo || x > lo)) lo = x;
    has_lo |= k;
    if ((k = bound(c, s, highs[i], 1, &x, &raw)) < 0) return -1;
    if (k && (!has_hi || raw < H || (raw == H && i))) H = raw, hi_excl = i;
    if (k && (!has_hi || x < hi)) hi = x;
    has_hi |= k;
  }
  if (!has_lo && !has_hi && integer && c->r_int < 0) { /* once: every int64, and JSON's -0 */
    c->r_int = gx_rule_named(c->b, "integer", 7, -1);
    if (c->r_int < 0 || gx_define(c->b, c->r_int, gx_alt2(c->b, gram__sc_int64(c), gram__sc_lit(c, "-0")), -1))
      return -1;
  }
  if (!has_lo && !has_hi) return gx_ref(c->b, integer ? c->r_int : c->r_number);
  /* the side the schema leaves open is closed at the int64 range (an
   * integer) or at 1e15 (a number: 16 integer digits at most, as
   * llama.cpp's integral-part), so that greedy decoding cannot write digits
   * until max_tokens */
  if (integer) return int_range(c, 1, has_lo ? lo : INT64_MIN, 1, has_hi ? hi : INT64_MAX);
  if (!has_lo) L = -NUM_LIMIT, lo = (int64_t)-NUM_LIMIT, lo_excl = 0, has_lo = 1;
  if (!has_hi) H = NUM_LIMIT, hi = (int64_t)NUM_LIMIT, hi_excl = 0, has_hi = 1;
  if (has_lo && has_hi && (L > H || (L == H && (lo_excl || hi_excl))))
    return gram__sc_fail(c, "json schema: %s bounds leave no number (at %s)", "minimum/maximum");
  int32_t frac = fractions(c, has_lo, L, lo_excl, has_hi, H, hi_excl);
  if (c->b->failed) return -1;
  if (has_lo && has_hi && lo > hi) { /* no integer inside */
    if (frac < 0) return gram__sc_fail(c, "json schema: %s bounds leave no number (at %s)", "minimum/maximum");
    return frac;
  }
  int32_t ints = int_range(c, has_lo, lo, has_hi, hi);
  return frac < 0 ? ints : gx_alt2(c->b, ints, frac);
}

/* ---- strings -------------------------------------------------------------------- */

static const struct {
  const char *name, *re;
} FORMATS[] = {
    {"date", "[1-9][0-9]{3}-((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)"},
    {"time", "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
    {"date-time", "[1-9][0-9]{3}-((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)"
                  "T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
    {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
    {"email", "[a-zA-Z0-9][a-zA-Z0-9._+-]{0,63}@[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*\\.[a-zA-Z]{2,24}"},
    {"ipv4", "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}"},
};

int gram__sc_count(sc_t *c, const cJSON *s, const char *key, int32_t *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
  if (!v) return 0;
  if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble)) {
    size_t old = gram__sc_path_push(c, key);
    gram__sc_fail(c, "json schema: '%s' must be a non-negative integer (at %s)", key);
    gram__sc_path_pop(c, old);
    return -1;
  }
  if (v->valuedouble > c->b->lim.max_repeat) {
    size_t old = gram__sc_path_push(c, key);
    gx_fail(c->b, -1, GRAM_ELIMIT, "json schema: '%s' above %d is not supported (bound: max_repeat) (at %s)", key,
            c->b->lim.max_repeat, c->path);
    gram__sc_path_pop(c, old);
    return -1;
  }
  *out = (int32_t)v->valuedouble;
  return 1;
}

int32_t gram__sc_string(sc_t *c, const cJSON *s) {
  gx_build_t *b = c->b;
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
  const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
  int32_t mn = 0, mx = -1;
  int k1 = gram__sc_count(c, s, "minLength", &mn), k2 = gram__sc_count(c, s, "maxLength", &mx);
  if (k1 < 0 || k2 < 0) return -1;
  if (k2 && mx < mn) return gram__sc_fail(c, "json schema: %s below minLength (at %s)", "maxLength");
  int32_t body;
  if (fmt || pat) {
    const char *key = fmt ? "format" : "pattern";
    size_t old = gram__sc_path_push(c, key);
    if ((fmt && pat) || k1 || k2) {
      gram__sc_fail(c, "json schema: '%s' together with pattern/minLength/maxLength is not supported (at %s)", key);
      gram__sc_path_pop(c, old);
      return -1;
    }
    const cJSON *v = fmt ? fmt : pat;
    if (!cJSON_IsString(v)) {
      gram__sc_fail(c, "json schema: '%s' must be a string (at %s)", key);
      gram__sc_path_pop(c, old);
      return -1;
    }
    if (fmt) {
      const char *re = NULL;
      for (size_t i = 0; i < sizeof FORMATS / sizeof *FORMATS; i++)
        if (!strcmp(FORMATS[i].name, v->valuestring)) re = FORMATS[i].re;
      if (!re) {
        gx_fail(b, -1, GRAM_EINVAL, "json schema: format '%s' is not supported (at %s)", v->valuestring, c->path);
        gram__sc_path_pop(c, old);
        return -1;
      }
      body = gram__sc_regex_js(c, re);
    } else {
      body = gram__regex_expr(b, v->valuestring, strlen(v->valuestring), true, false);
      if (body < 0 && c->b->err && !strstr(c->b->err->msg, " (at ")) {
        size_t l = strlen(c->b->err->msg);
        snprintf(c->b->err->msg + l, sizeof c->b->err->msg - l, " (at %s)", c->path);
      }
    }
    gram__sc_path_pop(c, old);
  } else {
    body = gx_repeat(b, gx_ref(b, c->r_char), mn, mx);
  }
  return gx_seq3(b, gram__sc_lit(c, "\""), body, gram__sc_lit(c, "\""));
}
