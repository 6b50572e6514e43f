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
};

#define OPEN "<think>"
#define CLOSE "</think>"
#define H_CHANNEL "<|channel|>"
#define H_MESSAGE "<|message|>"
#define H_OPEN H_CHANNEL "analysis" H_MESSAGE
#define H_CLOSE "<|end|><|start|>assistant" H_CHANNEL "final" H_MESSAGE

static const char *const T_OPEN[] = {OPEN};
static const char *const T_CLOSE[] = {CLOSE};
static const char *const T_H_START[] = {H_CHANNEL};
static const char *const T_H_HEAD[] = {H_CHANNEL, H_MESSAGE, "<|start|>", "<|constrain|>", "<|end|>"};
static const char *const T_H_BODY[] = {"<|end|>", "<|call|>", "<|return|>"};

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
    [ST_H_START] = {T_H_START, 1, SIDE_NONE},
    [ST_H_HEAD] = {T_H_HEAD, 5, SIDE_NONE},
    [ST_H_THINK] = {T_H_BODY, 3, SIDE_THINK},
    [ST_H_FINAL] = {T_H_BODY, 3, SIDE_ANSWER},
    [ST_H_OTHER] = {T_H_BODY, 3, SIDE_ANSWER},
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

static void on_tag(reason_split_t *r, int tag) {
  switch (r->st) {
  case ST_START:
    r->st = ST_THINK;
    r->skip_ws = true;
    break;
  case ST_THINK:
    r->st = ST_ANSWER;
    r->skip_ws = true;
    break;
  case ST_H_START:
    r->st = ST_H_HEAD;
    r->n_chan = 0;
    r->chan[0] = 1; /* naming: the channel's name follows */
    break;
  case ST_H_HEAD:
    if (tag == 0) { /* <|channel|> */
      r->n_chan = 0;
      r->chan[0] = 1;
    } else if (tag == 1) { /* <|message|>: the body of the channel named */
      const size_t n = r->n_chan;
      r->st = n == 8 && memcmp(r->chan + 1, "analysis", 8) == 0 ? ST_H_THINK
              : n == 5 && memcmp(r->chan + 1, "final", 5) == 0  ? ST_H_FINAL
                                                                 : ST_H_OTHER;
      r->chan[0] = 0;
    } else {
      r->chan[0] = 0;
    }
    break;
  default: /* a harmony body's end */
    r->st = ST_H_HEAD;
    r->chan[0] = 0;
    r->n_chan = 0;
    break;
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
  case ST_H_HEAD: /* chan[0]: naming; chan[1..n_chan]: the name */
    if (r->chan[0] && (is_ws(c) || r->n_chan + 1 >= sizeof r->chan)) r->chan[0] = 0;
    else if (r->chan[0]) r->chan[1 + r->n_chan++] = c;
    return true;
  default:
    if (r->skip_ws && is_ws(c)) return true;
    r->skip_ws = false;
    put(o, RULES[r->st].side == SIDE_THINK, c);
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
      on_tag(r, m);
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
    if (RULES[r->st].side != SIDE_NONE) put(&o, RULES[r->st].side == SIDE_THINK, r->held[i]);
  r->n_held = 0;
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
