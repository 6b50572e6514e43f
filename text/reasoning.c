/* text/reasoning.c — the reasoning splitter (see reasoning.h).
 *
 * A small state machine fed one byte at a time. Each state has the tags it
 * looks for and a side its other bytes go to (reasoning, answer, or none:
 * harmony's headers). Bytes that are a prefix of one of the state's tags
 * are held; once they complete a tag the state moves on, once they cannot
 * the first of them is text and the rest are looked at again. The start
 * states decide on the first byte that is neither whitespace nor a tag's
 * beginning. */
#include "text/reasoning.h"

#include <string.h>

enum {
  ST_START,     /* think tags: before the output shows whether it opens <think> */
  ST_THINK,     /* think tags: reasoning until </think> */
  ST_ANSWER,    /* the answer, to the end */
  ST_H_START,   /* harmony: before the output shows whether it opens <|channel|> */
  ST_H_HEAD,    /* harmony: a message's header (or between messages): dropped */
  ST_H_THINK,   /* harmony: the analysis channel's body */
  ST_H_FINAL,   /* harmony: the final channel's body */
  ST_H_OTHER,   /* harmony: another channel's body (commentary) */
  ST_H_CALL,    /* harmony: the body of a message with a recipient (a tool call) */
};

#define OPEN "<think>"
#define CLOSE "</think>"
#define H_CHANNEL "<|channel|>"
#define H_MESSAGE "<|message|>"
#define H_OPEN H_CHANNEL "analysis" H_MESSAGE
#define H_CLOSE "<|end|><|start|>assistant" H_CHANNEL "final" H_MESSAGE

static const char *const T_OPEN[] = {OPEN};
static const char *const T_CLOSE[] = {CLOSE};
#define H_TO " to="
#define H_CALL "<|call|>"
static const char *const T_H_START[] = {H_CHANNEL, H_TO};
static const char *const T_H_HEAD[] = {H_CHANNEL, H_MESSAGE, "<|start|>", "<|constrain|>", "<|end|>"};
static const char *const T_H_BODY[] = {"<|end|>", H_CALL, "<|return|>"};
enum { HEAD_CHANNEL = 0, HEAD_MESSAGE, HEAD_START, HEAD_CONSTRAIN, HEAD_END }; /* T_H_HEAD's order */
enum { MARK_CHANNEL = 1, MARK_CONSTRAIN = 2 }; /* the tags kept in a header's bytes */

enum { SIDE_NONE, SIDE_THINK, SIDE_ANSWER };

typedef struct state_rule {
  const char *const *tags;
  int n_tags;
  int side;
} state_rule_t;

static const state_rule_t RULES[] = {
    [ST_START] = {T_OPEN, 1, SIDE_NONE},
    [ST_THINK] = {T_CLOSE, 1, SIDE_THINK},
    [ST_ANSWER] = {NULL, 0, SIDE_ANSWER},
    [ST_H_START] = {T_H_START, 2, SIDE_NONE},
    [ST_H_HEAD] = {T_H_HEAD, 5, SIDE_NONE},
    [ST_H_THINK] = {T_H_BODY, 3, SIDE_THINK},
    [ST_H_FINAL] = {T_H_BODY, 3, SIDE_ANSWER},
    [ST_H_OTHER] = {T_H_BODY, 3, SIDE_ANSWER},
    [ST_H_CALL] = {T_H_BODY, 3, SIDE_ANSWER}, /* only with reason_split_t.calls: side_of */
};

/* Pieces of one side, coalesced before they go to the caller. */
typedef struct out {
  reason_emit_fn emit;
  void *ctx;
  bool thinking;
  size_t n;
  char buf[256];
} out_t;

static void flush(out_t *o) {
  if (o->n && o->emit) o->emit(o->ctx, o->thinking, o->buf, o->n);
  o->n = 0;
}

static void put(out_t *o, bool thinking, char c) {
  if (o->n && (o->thinking != thinking || o->n == sizeof o->buf)) flush(o);
  o->thinking = thinking;
  o->buf[o->n++] = c;
}

static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

enum { NO_TAG = -1, PREFIX = -2 };

/* The tag s[n] is (its index), PREFIX when it begins one, else NO_TAG. */
static int match(const state_rule_t *ru, const char *s, size_t n) {
  int m = NO_TAG;
  for (int i = 0; i < ru->n_tags; i++) {
    const size_t len = strlen(ru->tags[i]);
    if (n > len || memcmp(ru->tags[i], s, n) != 0) continue;
    if (n == len) return i;
    m = PREFIX;
  }
  return m;
}

/* The side of the current state's text. */
static int side_of(const reason_split_t *r) {
  return r->st == ST_H_CALL && !r->calls ? SIDE_NONE : RULES[r->st].side;
}

static void put_str(out_t *o, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) put(o, false, s[i]);
}

/* A header's byte: kept while the header fits (then it names nothing). */
static void head_put(reason_split_t *r, char c) {
  if (r->n_head < REASON_MAX_HEAD) r->head[r->n_head] = c;
  if (r->n_head <= REASON_MAX_HEAD) r->n_head++;
}

typedef struct span {
  const char *s;
  size_t n;
} span_t;

static bool head_sep(char c) { return is_ws(c) || c == MARK_CHANNEL || c == MARK_CONSTRAIN; }

/* The header's words: the channel (the first word after <|channel|>), the
 * recipient (a word "to=R", in the role header or after the channel) and
 * the content type (after <|constrain|>, or another word after the
 * channel's name). */
static void head_read(const reason_split_t *r, span_t *chan, span_t *to, span_t *type) {
  *chan = *to = *type = (span_t){"", 0};
  if (r->n_head > REASON_MAX_HEAD) return;
  int after = 0; /* 0: the role header, MARK_CHANNEL, MARK_CONSTRAIN */
  bool named = false;
  for (size_t i = 0; i < r->n_head;) {
    const char c = r->head[i];
    if (c == MARK_CHANNEL || c == MARK_CONSTRAIN) {
      after = c;
      named = false;
      i++;
      continue;
    }
    if (is_ws(c)) {
      i++;
      continue;
    }
    size_t j = i;
    while (j < r->n_head && !head_sep(r->head[j])) j++;
    const span_t w = {r->head + i, j - i};
    if (w.n > 3 && memcmp(w.s, "to=", 3) == 0) *to = (span_t){w.s + 3, w.n - 3};
    else if (after == MARK_CHANNEL && !named) *chan = w, named = true;
    else if (after) *type = w; /* <|constrain|>json, or "commentary json" */
    i = j;
  }
}

static bool is(span_t w, const char *s) { return w.n == strlen(s) && memcmp(w.s, s, w.n) == 0; }

/* <|message|>: the body of the message the header names. A message with a
 * recipient, kept (r->calls), opens in the parser's form. */
static void head_done(reason_split_t *r, out_t *o) {
  span_t chan, to, type;
  head_read(r, &chan, &to, &type);
  r->n_head = 0;
  if (to.n) {
    r->st = ST_H_CALL;
    if (!r->calls) return;
    put_str(o, H_CHANNEL, strlen(H_CHANNEL));
    put_str(o, chan.s, chan.n);
    put_str(o, H_TO, strlen(H_TO));
    put_str(o, to.s, to.n);
    if (type.n) {
      put_str(o, " <|constrain|>", 14);
      put_str(o, type.s, type.n);
    }
    put_str(o, H_MESSAGE, strlen(H_MESSAGE));
    return;
  }
  r->st = is(chan, "analysis") ? ST_H_THINK : is(chan, "final") ? ST_H_FINAL : ST_H_OTHER;
}

/* A harmony body ended (its end tag, or the output's end-of-generation). */
static void body_end(reason_split_t *r, out_t *o) {
  if (r->st == ST_H_CALL && r->calls) put_str(o, H_CALL, strlen(H_CALL));
  r->st = ST_H_HEAD;
  r->n_head = 0;
}

static void on_tag(reason_split_t *r, int tag, out_t *o) {
  switch (r->st) {
  case ST_START:
    r->st = ST_THINK;
    r->skip_ws = true;
    break;
  case ST_THINK:
    r->st = ST_ANSWER;
    r->skip_ws = true;
    break;
  case ST_H_START: /* <|channel|>, or " to=" in the role header */
    r->st = ST_H_HEAD;
    r->n_head = 0;
    if (tag == 0) head_put(r, MARK_CHANNEL);
    else
      for (const char *p = H_TO; *p; p++) head_put(r, *p);
    break;
  case ST_H_HEAD:
    if (tag == HEAD_CHANNEL) head_put(r, MARK_CHANNEL);
    else if (tag == HEAD_CONSTRAIN) head_put(r, MARK_CONSTRAIN);
    else if (tag == HEAD_MESSAGE) head_done(r, o);
    else r->n_head = 0; /* <|start|>, <|end|>: a new message's header */
    break;
  default: body_end(r, o); break;
  }
}

/* One byte of text in the current state. Returns false when the state
 * changed instead (a start state decided): c is then looked at again. */
static bool text(reason_split_t *r, char c, out_t *o) {
  switch (r->st) {
  case ST_START:
    if (is_ws(c)) return true;
    r->st = r->fmt == REASON_DEEPSEEK_R1 ? ST_THINK : ST_ANSWER;
    return false;
  case ST_H_START:
    r->st = ST_ANSWER;
    return false;
  case ST_H_HEAD: /* the header's text: never mistaken for the tag marks kept with it */
    head_put(r, c == MARK_CHANNEL || c == MARK_CONSTRAIN ? 0x7f : c);
    return true;
  default:
    if (r->skip_ws && is_ws(c)) return true;
    r->skip_ws = false;
    if (side_of(r) != SIDE_NONE) put(o, side_of(r) == SIDE_THINK, c);
    return true;
  }
}

static void step(reason_split_t *r, char c, out_t *o);

/* The held bytes, looked at again from the start (the state changed). */
static void refeed(reason_split_t *r, out_t *o) {
  char again[REASON_MAX_HELD];
  const size_t n = r->n_held;
  memcpy(again, r->held, n);
  r->n_held = 0;
  for (size_t i = 0; i < n; i++) step(r, again[i], o);
}

static void step(reason_split_t *r, char c, out_t *o) {
  const state_rule_t *ru = &RULES[r->st];
  if (!ru->n_tags) {
    text(r, c, o);
    return;
  }
  r->held[r->n_held++] = c;
  for (;;) {
    const int m = match(ru, r->held, r->n_held);
    if (m == PREFIX) return;
    if (m >= 0) {
      r->n_held = 0;
      on_tag(r, m, o);
      return;
    }
    const char first = r->held[0];
    memmove(r->held, r->held + 1, --r->n_held);
    const int before = r->st;
    if (!text(r, first, o) || r->st != before) { /* decided: this byte and the rest in the new state */
      char again[REASON_MAX_HELD];
      const size_t n = r->n_held;
      memcpy(again, r->held, n);
      r->n_held = 0;
      step(r, first, o);
      for (size_t i = 0; i < n; i++) step(r, again[i], o);
      return;
    }
    if (!r->n_held) return;
  }
}

/* Whether text[n] ends with tag, whitespace after it aside. */
static bool ends_with(const char *text, size_t n, const char *tag) {
  while (n && is_ws(text[n - 1])) n--;
  const size_t len = strlen(tag);
  return n >= len && memcmp(text + n - len, tag, len) == 0;
}

void reason_split_init(reason_split_t *r, reason_fmt_t f, const char *prompt, size_t n) {
  memset(r, 0, sizeof *r);
  r->fmt = f;
  switch (f) {
  case REASON_DEEPSEEK_R1:
  case REASON_QWEN3:
    r->skip_ws = true;
    r->st = prompt && ends_with(prompt, n, OPEN) ? ST_THINK : prompt && ends_with(prompt, n, CLOSE) ? ST_ANSWER : ST_START;
    break;
  case REASON_GPT_OSS: r->st = ST_H_START; break;
  default: r->st = ST_ANSWER; break;
  }
}

void reason_split_feed(reason_split_t *r, const char *s, size_t n, reason_emit_fn emit, void *ctx) {
  out_t o = {.emit = emit, .ctx = ctx};
  for (size_t i = 0; i < n; i++) step(r, s[i], &o);
  flush(&o);
}

void reason_split_end(reason_split_t *r, reason_emit_fn emit, void *ctx) {
  out_t o = {.emit = emit, .ctx = ctx};
  if (r->n_held && (r->st == ST_START || r->st == ST_H_START)) { /* a tag never completed: the start is decided */
    r->st = r->st == ST_H_START ? ST_ANSWER : r->fmt == REASON_DEEPSEEK_R1 ? ST_THINK : ST_ANSWER;
    refeed(r, &o);
  }
  for (size_t i = 0; i < r->n_held; i++) /* the rest of a tag never completed is text of its side */
    if (side_of(r) != SIDE_NONE) put(&o, side_of(r) == SIDE_THINK, r->held[i]);
  r->n_held = 0;
  flush(&o);
}

void reason_split_stopped(reason_split_t *r, reason_emit_fn emit, void *ctx) {
  if (r->fmt != REASON_GPT_OSS || r->st < ST_H_THINK) return; /* not inside a harmony body */
  out_t o = {.emit = emit, .ctx = ctx};
  for (size_t i = 0; i < r->n_held; i++) /* a tag's beginning the end cut: the body's text */
    if (side_of(r) != SIDE_NONE) put(&o, side_of(r) == SIDE_THINK, r->held[i]);
  r->n_held = 0;
  body_end(r, &o);
  flush(&o);
}

reason_phase_t reason_split_phase(const reason_split_t *r) {
  switch (r->st) {
  case ST_START:
  case ST_H_START: return REASON_START;
  case ST_THINK:
  case ST_H_THINK: return REASON_THINK;
  case ST_ANSWER:
  case ST_H_FINAL: return REASON_ANSWER;
  case ST_H_CALL: return REASON_CALL;
  default: return REASON_OTHER;
  }
}

const char *reason_close_text(reason_fmt_t f) {
  return f == REASON_GPT_OSS ? H_CLOSE : f == REASON_NONE ? "" : "\n" CLOSE "\n\n"; /* as Qwen3 and R1 write it */
}

const char *reason_open_text(reason_fmt_t f) { return f == REASON_GPT_OSS ? H_OPEN : f == REASON_NONE ? "" : OPEN; }

reason_fmt_t reason_fmt_of_template(const char *src) {
  if (!src) return REASON_NONE;
  if (strstr(src, H_CHANNEL)) return REASON_GPT_OSS;
  if (!strstr(src, OPEN)) return REASON_NONE;
  return strstr(src, "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>") ? REASON_DEEPSEEK_R1 : REASON_QWEN3;
}

const char *reason_fmt_name(reason_fmt_t f) {
  switch (f) {
  case REASON_DEEPSEEK_R1: return "deepseek_r1";
  case REASON_QWEN3: return "qwen3";
  case REASON_GPT_OSS: return "gpt_oss";
  default: return "none";
  }
}
