/* text/tokenizer.h — text ⇄ token ids, built from a GGUF file's tokenizer
 * metadata (or from plain arrays, for tests).
 *
 * Two kinds of tokenizer, named by `tokenizer.ggml.model`:
 *
 *   "gpt2"   byte-level BPE (SmolLM2, Llama 3, Qwen2). The text is split into
 *            words by the regexes that `tokenizer.ggml.pre` names (PCRE2 with
 *            Unicode properties), each word's UTF-8 bytes become the initial
 *            symbols, and the merges (`tokenizer.ggml.merges`, rank = index)
 *            are applied lowest rank first, leftmost first among equals, with
 *            a priority queue. Bytes the vocabulary has no token for are
 *            dropped, as Hugging Face's `tokenizers` drops them.
 *   "llama"  SentencePiece-style BPE (Llama 2, Mistral): spaces become "▁",
 *            a space is put in front of the text (add_space_prefix), the
 *            characters are merged highest `tokenizer.ggml.scores` first, and
 *            characters without a token fall back to <0xXX> byte tokens. With
 *            `tokenizer.ggml.merges` (what hf/ writes for tokenizer.json's
 *            BPE with byte_fallback) the characters, or the byte tokens of
 *            those without a token, are merged lowest rank first instead, as
 *            Hugging Face's BPE model does.
 *
 * Special and added tokens (token types 3 control, 4 user-defined, 2
 * unknown): user-defined tokens are always recognised in the text; control
 * and unknown ones only with TOK_ENC_PARSE_SPECIAL (the chat template's
 * output), else they are plain text. Matching is leftmost-longest (as HF's
 * added tokens). For "llama" models the space prefix goes at the start of
 * the text and after each control token (as llama.cpp does), not after a
 * user-defined token (as SentencePiece does).
 *
 * Bytes the vocabulary has no token for (SmolLM2 lacks 0x04 0x06 0x13 0x14
 * 0x16 0x1D, and the unassigned-plane lead bytes F1 F2) are dropped, so
 * decode(encode(x)) == x holds for text without them; tok_create logs them.
 *
 * Input that is not valid UTF-8: each maximal ill-formed subsequence is
 * replaced by U+FFFD (the same result as Python's
 * bytes.decode("utf-8", "replace")) before tokenizing, or, with
 * TOK_ENC_STRICT, encoding fails with -EILSEQ. Never a crash.
 *
 * Decoding gives each token's bytes (byte-level reverse mapping; "▁" → " "
 * and <0xXX> → the byte for SentencePiece), skipping control tokens unless
 * TOK_DEC_SPECIAL. The streaming detokenizer (tok_stream_*) is fed one token
 * at a time and returns only complete UTF-8: it holds back an incomplete
 * multi-byte character until it completes and replaces what can never
 * become valid by U+FFFD, so its output is always valid UTF-8.
 *
 * A tok_t is immutable after creation: encode/decode may run on any number
 * of threads at once. It copies everything it keeps (the GGUF context may be
 * closed after tok_create_from_gguf). */
#ifndef TRAM_TOKENIZER_H
#define TRAM_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct gguf_str gguf_str_t; /* gguf/gguf.h: views into the model file */
typedef struct gguf_ctx gguf_ctx_t;

typedef struct tok tok_t;

typedef enum tok_model {
  TOK_MODEL_BPE = 0, /* "gpt2": byte-level BPE with merges */
  TOK_MODEL_SPM = 1, /* "llama": SentencePiece-style BPE with scores */
} tok_model_t;

/* Token types, as `tokenizer.ggml.token_type` stores them. */
typedef enum tok_type {
  TOK_TYPE_UNDEFINED = 0,
  TOK_TYPE_NORMAL = 1,
  TOK_TYPE_UNKNOWN = 2,
  TOK_TYPE_CONTROL = 3,
  TOK_TYPE_USER_DEFINED = 4,
  TOK_TYPE_UNUSED = 5,
  TOK_TYPE_BYTE = 6,
} tok_type_t;

/* A tokenizer described by plain arrays (what the GGUF keys hold). Nothing
 * is kept: tok_create copies what it needs. */
typedef struct tok_spec {
  tok_model_t model;
  const char *pre;           /* pre-tokenizer name (see tok_pre_supported); NULL: "default" */
  int32_t n_tokens;          /* vocabulary size, >= 1 */
  const gguf_str_t *tokens;  /* [n_tokens] token texts as stored (byte-level or "▁" form) */
  const int32_t *types;      /* [n_tokens] tok_type_t values, or NULL: all normal */
  const float *scores;       /* [n_tokens] SPM merge scores (higher first); NULL: all 0 */
  int32_t n_merges;          /* BPE; SPM: optional (> 0: merged by rank, not score) */
  const gguf_str_t *merges;  /* [n_merges] "left right"; rank = index */
  int32_t bos_id, eos_id, eot_id, eom_id, unk_id, pad_id; /* -1: none */
  int add_bos;               /* 1/0, or -1: the model's default */
  int add_eos;               /* 1/0, or -1: 0 */
  int add_space_prefix;      /* SPM only: 1/0, or -1: 1 */
  int nfc;                   /* 1: text between special tokens is NFC-normalized first
                                (tokenizer.json's NFC normalizer; GGUF key
                                tram.tokenizer.normalizer = "nfc") */
  int prefix_pieces;         /* SPM: where the prefix goes around added tokens: 0, at the start
                                and after control tokens (llama.cpp); TOK_PREFIX_EVERY_PIECE or
                                TOK_PREFIX_FIRST_PIECE, before every piece between them or the
                                first only (tokenizer.json's Prepend or Metaspace "always", and
                                Metaspace "first"; GGUF key tram.tokenizer.prefix_pieces) */
  int prefix_unless_space;   /* SPM: 1: no prefix before text that starts with a space (Hugging
                                Face's Metaspace; GGUF key tram.tokenizer.prefix_unless_space) */
  int newline_runs;          /* SPM: 1: the text cut into runs of newlines and runs of other
                                characters, each merged alone, a newline run that is a token taken
                                whole (llama.cpp's "gemma4" tokenizer model) */
} tok_spec_t;

enum { TOK_PREFIX_EVERY_PIECE = 1, TOK_PREFIX_FIRST_PIECE = 2 }; /* tok_spec_t.prefix_pieces */

/* A spec with no tokens, every id -1 and every flag -1 (the defaults). */
tok_spec_t tok_spec_default(void);

/* Builds a tokenizer. Returns NULL and writes one line into err (err_len
 * bytes, always terminated) on a bad spec: an unknown pre-tokenizer name, an
 * id out of range, a merge that is not two tokens, a regex PCRE2 rejects. */
tok_t *tok_create(const tok_spec_t *spec, char *err, size_t err_len);

/* Builds a tokenizer from a GGUF file's tokenizer.ggml.* keys (model, pre,
 * tokens, token_type, scores, merges, the special ids, add_bos_token,
 * add_eos_token, add_space_prefix; and tram.tokenizer.prefix_unless_space,
 * prefix_pieces and normalizer, which hf/ writes). Same errors as tok_create, plus a
 * missing or mistyped key. */
tok_t *tok_create_from_gguf(const gguf_ctx_t *g, char *err, size_t err_len);

/* Frees. NULL is a no-op. */
void tok_destroy(tok_t *tok);

/* Whether a pre-tokenizer name is known: "default", "gpt2"/"gpt-2", "smollm"
 * (and the other Digits + GPT-2 ones: "starcoder", "refact", "command-r",
 * "codeshell", "exaone", "minerva-7b"), "llama3"/"llama-bpe"/"llama-v3",
 * "qwen2". */
int tok_pre_supported(const char *name);

/* The pre-tokenizer name whose regex list is res[0..n) exactly: each a
 * tokenizer.json Split step's regex, or TOK_PRE_DIGITS (tokenizers' Digits
 * with individual_digits) or TOK_PRE_BYTELEVEL (ByteLevel with use_regex:
 * GPT-2's regex). *ignore_merges: whether that pre-tokenizer's models
 * ignore merges. NULL when tram has none. */
#define TOK_PRE_DIGITS "<Digits>"
#define TOK_PRE_BYTELEVEL "<ByteLevel>"
const char *tok_pre_name_of(const char *const *res, int n, int *ignore_merges);

/* ---- vocabulary --------------------------------------------------------- */

int32_t tok_n_vocab(const tok_t *tok);
tok_model_t tok_model(const tok_t *tok);
int32_t tok_bos(const tok_t *tok); /* -1 if none */
int32_t tok_eos(const tok_t *tok);
int32_t tok_eot(const tok_t *tok);
/* Whether encoding with TOK_ENC_ADD_SPECIAL puts BOS in front (EOS at the
 * end): the model's add_bos_token (add_eos_token), when it has that token. */
int tok_adds_bos(const tok_t *tok);
int tok_adds_eos(const tok_t *tok);

/* End of generation: eos, eot, eom, and the tokens whose text is one of
 * <|im_end|>, <|eot_id|>, <|endoftext|>, <|end_of_text|>, <|eom_id|>,
 * <|end|>, <end_of_turn>, <EOT>, <|return|>, <|call|>; except <|end|> in a
 * harmony vocabulary (one with <|return|> and <|call|>: gpt-oss), where it
 * only closes a message. The scheduler stops a request on any. */
int tok_is_eog(const tok_t *tok, int32_t id);
/* The end-of-generation ids, ascending; returns their count. The array
 * belongs to the tokenizer. */
int32_t tok_eog_ids(const tok_t *tok, const int32_t **ids);

/* A token's type (TOK_TYPE_*), or -EINVAL for an id out of range. */
int tok_type(const tok_t *tok, int32_t id);
/* A token's text as stored in the vocabulary ("Ġthe", "▁the", "<0x0A>"), not
 * terminated; NULL for an id out of range. Owned by the tokenizer. */
const char *tok_text(const tok_t *tok, int32_t id, size_t *len);
/* The bytes a token decodes to (" the", "\n"; a control token's own text),
 * not terminated and not necessarily valid UTF-8 on its own; NULL for an id
 * out of range. Owned by the tokenizer. */
const char *tok_piece(const tok_t *tok, int32_t id, size_t *len);
/* The id of the token whose stored text is exactly text[len], or -1. */
int32_t tok_find(const tok_t *tok, const char *text, size_t len);

/* ---- encoding ----------------------------------------------------------- */

enum {
  TOK_ENC_ADD_SPECIAL = 1 << 0,   /* BOS (and EOS) as the model's add_bos/add_eos say */
  TOK_ENC_PARSE_SPECIAL = 1 << 1, /* control tokens' texts in the input become their ids */
  TOK_ENC_STRICT = 1 << 2,        /* invalid UTF-8 → -EILSEQ instead of U+FFFD */
  TOK_ENC_MARKED = 1 << 3,        /* the text holds TOK_MARK bytes (see tok_mark_specials) */
};

/* ---- text from users inside a template's markup ----------------------------
 *
 * A chat template wraps request text (message contents, tool definitions)
 * in control tokens;
 * the rendered text is then encoded with TOK_ENC_PARSE_SPECIAL. For the
 * control tokens' texts inside the request text to stay plain text, that
 * text is marked before rendering: tok_mark_specials puts a TOK_MARK byte
 * after each character of each control (or unknown) token's text in it, and
 * encoding with TOK_ENC_MARKED recognises no special token whose first byte
 * is followed by a mark, so that none matches there; encoding with TOK_ENC_MARKED
 * drops the marks from the plain text between the real control tokens
 * before tokenizing it. TOK_MARK (0xFF) never occurs in UTF-8; a 0xFF byte
 * already in the text becomes U+FFFD, as encoding would make it anyway.
 * A mark is a byte inside a string: templates that measure or cut message
 * text (length, slices) see one more byte per control-token text. Not
 * covered: a control token's text that starts in the template's own text
 * and ends in the request's (or the other way round); templates put whole
 * control tokens around message text, so none arises with them. */
#define TOK_MARK 0xFF

/* Writes s[len] with the marks to out (tok_mark_cap(len) bytes at least) and
 * returns the length written. User-defined tokens are left alone (they are
 * always recognised, in any text). */
size_t tok_mark_specials(const tok_t *tok, const char *s, size_t len, char *out);
/* The output capacity tok_mark_specials needs for len bytes. */
static inline size_t tok_mark_cap(size_t len) { return 4 * len + 1; }

/* Encodes text[len] (any bytes; NUL is an ordinary byte). Writes the first
 * min(n, cap) ids to ids[] and returns n, the full count, which may exceed
 * cap: call again with a larger array then. Returns -EILSEQ (TOK_ENC_STRICT
 * and invalid UTF-8), -EINVAL (NULL text with len > 0), or -ENOMEM when a
 * PCRE2 match fails for lack of memory. */
int64_t tok_encode(const tok_t *tok, const char *text, size_t len, int flags, int32_t *ids,
                   size_t cap);

/* ---- decoding ----------------------------------------------------------- */

enum {
  TOK_DEC_SPECIAL = 1 << 0,      /* render control/unknown tokens' text (default: skip) */
  TOK_DEC_STRIP_PREFIX = 1 << 1, /* drop the space add_space_prefix put in front of the
                                    text: decode(encode(x)) == x */
  TOK_DEC_VALID_UTF8 = 1 << 2,   /* replace ill-formed UTF-8 in the output by U+FFFD */
};

/* Decodes ids[n] to bytes, snprintf-style: writes at most cap bytes plus a
 * terminating NUL when cap > 0 (out[min(len, cap - 1)] = 0) and returns the
 * full length (excluding the NUL), or -EINVAL for an id out of range. */
int64_t tok_decode(const tok_t *tok, const int32_t *ids, size_t n, int flags, char *out,
                   size_t cap);

/* Streaming detokenizer for one sequence: caller-allocated, no resources to
 * free. Fields are private. */
typedef struct tok_stream {
  const tok_t *tok;
  int flags;        /* TOK_DEC_SPECIAL honoured; output is always valid UTF-8 */
  uint8_t pend[4];  /* bytes of an incomplete UTF-8 character held back */
  uint8_t n_pend;
} tok_stream_t;

/* Starts a stream over tok with TOK_DEC_* flags. */
void tok_stream_init(tok_stream_t *s, const tok_t *tok, int flags);

/* The output capacity that always suffices for one tok_stream_push or
 * tok_stream_flush on this tokenizer. */
size_t tok_stream_max_out(const tok_t *tok);

/* Feeds one token. Writes the text that became printable (complete UTF-8
 * characters, possibly none) to out and returns its length; nothing is
 * terminated. Returns -EINVAL for an id out of range and -ENOSPC if cap is
 * below what this call needs (tok_stream_max_out always suffices); the
 * stream is unchanged by a failed call. */
int tok_stream_push(tok_stream_t *s, int32_t id, char *out, size_t cap);

/* Ends the stream: an incomplete character still held back is written as
 * U+FFFD. Returns the length written (0 or 3), or -ENOSPC. */
int tok_stream_flush(tok_stream_t *s, char *out, size_t cap);

#endif
