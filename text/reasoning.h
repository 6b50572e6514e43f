/* text/reasoning.h — the reasoning splitter: a thinking model's output
 * split, as it streams, into its reasoning (the "thinking") and its answer
 * (the content), in the formats of vLLM's reasoning parsers:
 *
 *   deepseek_r1  <think> reasoning </think> answer. The output is reasoning
 *                until </think> even when no <think> opens it (R1 distills
 *                often leave it out: the template opens the turn);
 *   qwen3        the same tags, but an output that does not open with
 *                <think> (after whitespace) is all answer (Qwen3 with
 *                enable_thinking false, non-thinking templates);
 *   gpt_oss      OpenAI's harmony channels (rendered with their special
 *                tokens' text): <|channel|>analysis<|message|> reasoning
 *                <|end|><|start|>assistant<|channel|>final<|message|>
 *                answer. The analysis channel is reasoning, final (and
 *                commentary's preambles) is answer; the headers are
 *                dropped. A message with a recipient (a tool call:
 *                `<|channel|>commentary to=functions.NAME <|constrain|>json
 *                <|message|>ARGS<|call|>`, or ` to=NAME` in the role header
 *                before <|channel|>) is no side's text: dropped, or, with
 *                reason_split_t.calls set, written on the answer side in one
 *                form for the tool-call parser (api/oai_tool_parse.h,
 *                OAI_TOOLS_HARMONY):
 *                  <|channel|>CHANNEL to=RECIPIENT[ <|constrain|>TYPE]
 *                  <|message|>BODY<|call|>
 *                (no line breaks; <|call|> only once the message ended). An
 *                output that does not open with <|channel|> or " to=" is all
 *                answer.
 *
 * Where the output starts is read from the rendered prompt's end
 * (reason_split_init): a template that opens the turn with <think> (DeepSeek
 * R1's, Qwen3-Thinking's) starts it inside the reasoning; one that closes an
 * empty block (<think>\n\n</think>\n\n: Qwen3's enable_thinking false)
 * starts it in the answer.
 *
 * Tags may arrive split at any byte across feeds (tokens, stream chunks):
 * the bytes that may begin a tag are held until they can be told apart;
 * the held bytes are at most a tag's length. Whitespace right after a tag
 * (the model's "\n" after <think>, "\n\n" after </think>) is dropped, as
 * llama.cpp does; everything else comes out in order, once, each byte on
 * its side. A reasoning cut short (max_tokens) simply ends: what came is
 * the reasoning, the answer is empty.
 *
 * Users: the server (the thinking into message.reasoning_content and the
 * stream's delta.reasoning_content, server/srv_reasoning.c) and the engine
 * (structured output applies to the answer only, the thinking budget:
 * scheduler/sched_think.c). Pure: no allocation, no I/O; a reason_split_t
 * is a plain value the caller owns. */
#ifndef TRAM_REASONING_H
#define TRAM_REASONING_H

#include <stdbool.h>
#include <stddef.h>

typedef enum reason_fmt {
  REASON_NONE = 0,     /* no splitting: everything is answer */
  REASON_DEEPSEEK_R1,
  REASON_QWEN3,
  REASON_GPT_OSS,
} reason_fmt_t;

/* Where the output is now. */
typedef enum reason_phase {
  REASON_START = 0, /* nothing decided yet (only whitespace or a tag's first bytes seen) */
  REASON_THINK,     /* inside the reasoning */
  REASON_OTHER,     /* gpt_oss: a header, or a channel other than analysis and final */
  REASON_CALL,      /* gpt_oss: the body of a message with a recipient (a tool call's arguments) */
  REASON_ANSWER,    /* the answer */
} reason_phase_t;

#define REASON_MAX_HELD 32 /* bytes held at most: the longest tag */
#define REASON_MAX_HEAD 112 /* gpt_oss: a message header's bytes kept at most (a longer one names no recipient) */

typedef struct reason_split {
  reason_fmt_t fmt;
  int st;                     /* private: the state */
  bool skip_ws;               /* private: whitespace right after a tag is dropped */
  char held[REASON_MAX_HELD]; /* private: bytes that may begin a tag */
  size_t n_held;
  bool calls;                 /* gpt_oss: messages with a recipient go to the answer side in the parser's
                               * form (set by the caller after init; false: they are dropped) */
  char head[REASON_MAX_HEAD]; /* private: gpt_oss, the header being read (tags as one byte each) */
  size_t n_head;              /* private: its length; > REASON_MAX_HEAD: too long, names nothing */
} reason_split_t;

/* Receives one piece of output: thinking (true: reasoning; false: answer)
 * and its bytes s[n] (n > 0), valid for the call. */
typedef void (*reason_emit_fn)(void *ctx, bool thinking, const char *s, size_t n);

/* A splitter for format f whose output follows the rendered prompt
 * prompt[n] (only its end is read; NULL: none). REASON_NONE: everything is
 * answer. */
void reason_split_init(reason_split_t *r, reason_fmt_t f, const char *prompt, size_t n);

/* Feeds output bytes s[n]; emit (may be NULL: the phase is all the caller
 * wants) gets what is decided, in order, pieces of one side coalesced. */
void reason_split_feed(reason_split_t *r, const char *s, size_t n, reason_emit_fn emit, void *ctx);

/* The output ended: the held bytes go out on the side they were on (a tag
 * never completed is text). */
void reason_split_end(reason_split_t *r, reason_emit_fn emit, void *ctx);

/* The output ended at an end-of-generation token whose text is not output
 * (harmony's <|call|> and <|return|>): a gpt_oss message open at the end
 * ended there, as if the token's text had come (a call's <|call|> is
 * written). Call it before reason_split_end; other formats: nothing. */
void reason_split_stopped(reason_split_t *r, reason_emit_fn emit, void *ctx);

reason_phase_t reason_split_phase(const reason_split_t *r);

/* What ends the reasoning when a thinking budget is spent (the engine
 * forces its tokens): "\n</think>\n\n" (as Qwen3 and R1 write it), or harmony's
 * "<|end|><|start|>assistant<|channel|>final<|message|>"; "" for NONE. */
const char *reason_close_text(reason_fmt_t f);
/* What opens it: "<think>", "<|channel|>analysis<|message|>"; "" for NONE. */
const char *reason_open_text(reason_fmt_t f);

/* The format a chat template's source teaches (the `auto` setting):
 * harmony's <|channel|> → gpt_oss; DeepSeek's <｜Assistant｜> with <think>
 * → deepseek_r1; <think> → qwen3; else NONE (a template that does not
 * think). */
reason_fmt_t reason_fmt_of_template(const char *src);

/* "deepseek_r1", "qwen3", "gpt_oss", "none". */
const char *reason_fmt_name(reason_fmt_t f);

#endif
