/* hf/hf_tokenizer.c — tokenizer.json's byte-level BPE read into
 * llama.cpp's tokenizer.ggml.* keys (see hf.h), for text/'s tokenizer.
 *
 *   model          BPE without continuing_subword_prefix or
 *                  end_of_word_suffix → tokenizer.ggml.model "gpt2";
 *                  vocab → tokens by id, merges ("a b" or ["a", "b"]);
 *                  with byte_fallback (Llama 2, Mistral, Gemma) → "llama"
 *                  with merges (text/ then merges by rank), the <0xXX>
 *                  tokens of type byte (6), unk_token, and
 *                  add_space_prefix from the normalizer: Prepend "▁" and
 *                  Replace " " by "▁" (or a Metaspace pre-tokenizer that
 *                  does not split); decoders Replace/ByteFallback/Fuse/
 *                  Strip or Metaspace
 *   added_tokens   special → control (3), others user-defined (4)
 *   normalizer     none or NFC for byte-level BPE (Qwen) → tram's own key
 *                  tram.tokenizer.normalizer "nfc" (any other is refused)
 *   pre_tokenizer  ByteLevel, or a Sequence of Split (Isolated) / Digits
 *                  (individual) / ByteLevel, matched against text/'s table
 *                  (tok_pre_name_of) → tokenizer.ggml.pre; ignore_merges
 *                  must agree with it
 *   decoder        ByteLevel
 * Ids with no token up to config.json's vocab_size (embedding rows
 * converters pad) become "[PAD<id>]" of type unused (5), as llama.cpp's
 * converter writes them. Special tokens: tokenizer_config.json's
 * bos_token / eos_token (a string or {"content"}), else config.json's
 * bos_token_id / eos_token_id (the first of a list; a second one becomes
 * the end-of-turn id); add_bos_token / add_eos_token; chat_template (a
 * string, or the entry named "default" of a list). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "hf/hf_internal.h"
#include "text/tokenizer.h"

static const cJSON *field(const cJSON *o, const char *name) { return cJSON_GetObjectItemCaseSensitive(o, name); }

static int is_type(const cJSON *o, const char *type) {
  const cJSON *t = field(o, "type");
  return cJSON_IsString(t) && strcmp(t->valuestring, type) == 0;
}

/* One pre-tokenizer step as text/'s regex list entry; NULL if tram has none. */
static const char *step_regex(const cJSON *p) {
  if (is_type(p, "ByteLevel")) return cJSON_IsFalse(field(p, "use_regex")) ? "" : TOK_PRE_BYTELEVEL;
  if (is_type(p, "Digits")) return cJSON_IsTrue(field(p, "individual_digits")) ? TOK_PRE_DIGITS : NULL;
  if (is_type(p, "Split")) {
    const cJSON *pat = field(field(p, "pattern"), "Regex"), *beh = field(p, "behavior");
    if (!cJSON_IsString(pat) || !cJSON_IsString(beh) || strcmp(beh->valuestring, "Isolated") != 0 ||
        cJSON_IsTrue(field(p, "invert")))
      return NULL;
    return pat->valuestring;
  }
  return NULL;
}

/* The pre-tokenizer name for tokenizer.json's pre_tokenizer. */
static int pre_name(const cJSON *tok, const char **name, char *err, size_t err_len) {
  const cJSON *pre = field(tok, "pre_tokenizer");
  const char *res[8];
  int n = 0, ok = cJSON_IsObject(pre);
  if (ok && is_type(pre, "Sequence")) {
    const cJSON *steps = field(pre, "pretokenizers");
    ok = cJSON_IsArray(steps) && cJSON_GetArraySize(steps) <= 8;
    for (const cJSON *s = ok ? steps->child : NULL; s && ok; s = s->next) {
      const char *r = step_regex(s);
      ok = r != NULL;
      if (ok && r[0]) res[n++] = r; /* a ByteLevel without regex only maps bytes */
    }
  } else if (ok) {
    const char *r = step_regex(pre);
    ok = r && r[0];
    if (ok) res[n++] = r;
  }
  int ignore_merges = 0;
  *name = ok && n ? tok_pre_name_of(res, n, &ignore_merges) : NULL;
  if (!*name) {
    snprintf(err, err_len, "tokenizer.json: pre_tokenizer %s is not one tram runs (ByteLevel, or the Split/Digits + "
             "ByteLevel sequences of GPT-2, SmolLM, Llama 3, Qwen 2)",
             cJSON_IsObject(pre) && cJSON_IsString(field(pre, "type")) ? field(pre, "type")->valuestring : "(none)");
    return -EINVAL;
  }
  const cJSON *im = field(field(tok, "model"), "ignore_merges");
  if ((im && cJSON_IsTrue(im)) != (ignore_merges != 0)) {
    snprintf(err, err_len, "tokenizer.json: model.ignore_merges is %s, tram's \"%s\" pre-tokenizer %s", 
             cJSON_IsTrue(im) ? "true" : "false", *name, ignore_merges ? "ignores merges" : "applies them");
    return -EINVAL;
  }
  return 0;
}

/* The content of a special-token field: a string or {"content": string}. */
static const char *token_content(const cJSON *v) {
  if (cJSON_IsString(v)) return v->valuestring;
  const cJSON *c = field(v, "content");
  return cJSON_IsString(c) ? c->valuestring : NULL;
}

typedef struct vocab {
  char **text; /* [n] owned copies, NULL for a hole */
  int32_t *type;
  int n;
} vocab_t;

static int32_t find_token(const vocab_t *v, const char *s) {
  for (int i = 0; s && i < v->n; i++)
    if (v->text[i] && strcmp(v->text[i], s) == 0) return i;
  return -1;
}

/* A token id: tokenizer_config's token text, else config.json's id (item
 * `which` of a list), else -1. */
static int32_t special_id(const vocab_t *v, const cJSON *tcfg, const char *tname, const cJSON *cfg, const char *cname,
                          int which) {
  const int32_t id = find_token(v, token_content(field(tcfg, tname)));
  if (id >= 0) return id;
  const cJSON *c = field(cfg, cname);
  if (cJSON_IsArray(c)) c = cJSON_GetArrayItem(c, which);
  else if (which > 0) c = NULL;
  return cJSON_IsNumber(c) && c->valuedouble >= 0 && c->valuedouble < v->n ? (int32_t)c->valuedouble : -1;
}

static int set_token(vocab_t *v, long long id, const char *s, int32_t type, char *err, size_t err_len) {
  if (id < 0 || id >= v->n) {
    snprintf(err, err_len, "tokenizer.json: token '%.40s' has id %lld, outside the vocabulary of %d (config.json "
             "vocab_size)", s, id, v->n);
    return -EINVAL;
  }
  if (v->text[id] && strcmp(v->text[id], s) != 0) {
    snprintf(err, err_len, "tokenizer.json: id %lld is both '%.40s' and '%.40s'", id, v->text[id], s);
    return -EINVAL;
  }
  if (!v->text[id]) v->text[id] = strcpy(xmalloc(strlen(s) + 1), s);
  v->type[id] = type;
  return 0;
}

static int read_vocab(vocab_t *v, const cJSON *tok, char *err, size_t err_len) {
  const cJSON *model = field(tok, "model"), *vocab = field(model, "vocab");
  if (!cJSON_IsObject(vocab)) {
    snprintf(err, err_len, "tokenizer.json: model.vocab is not an object");
    return -EINVAL;
  }
  for (const cJSON *e = vocab->child; e; e = e->next) {
    long long id;
    char what[96];
    snprintf(what, sizeof what, "tokenizer.json: the id of '%.40s'", e->string);
    if (hf__int(e, what, -1, 0, INT32_MAX, &id, err, err_len) ||
        set_token(v, id, e->string, TOK_TYPE_NORMAL, err, err_len))
      return -EINVAL;
  }
  const cJSON *added = field(tok, "added_tokens");
  for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; e; e = e->next) {
    long long id;
    const cJSON *content = field(e, "content");
    if (!cJSON_IsString(content) ||
        hf__int(field(e, "id"), "tokenizer.json: an added token's id", -1, 0, INT32_MAX, &id, err, err_len)) {
      if (!cJSON_IsString(content)) snprintf(err, err_len, "tokenizer.json: an added token has no content");
      return -EINVAL;
    }
    const int32_t type = cJSON_IsTrue(field(e, "special")) ? TOK_TYPE_CONTROL : TOK_TYPE_USER_DEFINED;
    if (set_token(v, id, content->valuestring, type, err, err_len)) return -EINVAL;
  }
  for (int i = 0; i < v->n; i++)
    if (!v->text[i]) {
      char pad[32];
      snprintf(pad, sizeof pad, "[PAD%d]", i);
      v->text[i] = strcpy(xmalloc(strlen(pad) + 1), pad);
      v->type[i] = TOK_TYPE_UNUSED;
    }
  return 0;
}

/* The byte-fallback tokens "<0xXX>" of the vocabulary become byte tokens (6),
 * which text/ decodes to their byte. */
static void mark_bytes(vocab_t *v) {
  for (int i = 0; i < v->n; i++) {
    const char *t = v->text[i];
    if (v->type[i] == TOK_TYPE_NORMAL && strlen(t) == 6 && !strncmp(t, "<0x", 3) && t[5] == '>' &&
        strchr("0123456789ABCDEF", t[3]) && strchr("0123456789ABCDEF", t[4]) && t[3] && t[4])
      v->type[i] = TOK_TYPE_BYTE;
  }
}

/* model.merges → "a b" strings in b. */
static int read_merges(gguf_build_t *b, const cJSON *tok, char *err, size_t err_len) {
  const cJSON *merges = field(field(tok, "model"), "merges");
  if (!cJSON_IsArray(merges)) {
    snprintf(err, err_len, "tokenizer.json: model.merges is not a list");
    return -EINVAL;
  }
  const int n = cJSON_GetArraySize(merges);
  char **s = xcalloc((size_t)(n ? n : 1), sizeof *s);
  size_t *lens = xcalloc((size_t)(n ? n : 1), sizeof *lens);
  int i = 0, rc = 0;
  for (const cJSON *m = merges->child; m && rc == 0; m = m->next, i++) {
    const char *a = NULL, *c = NULL;
    if (cJSON_IsString(m)) {
      const char *sp = strchr(m->valuestring, ' ');
      if (sp && sp != m->valuestring && sp[1] && !strchr(sp + 1, ' ')) a = m->valuestring, c = "";
    } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
               cJSON_IsString(m->child->next)) {
      a = m->child->valuestring, c = m->child->next->valuestring;
    }
    if (!a || (c[0] == 0 && cJSON_IsArray(m))) {
      snprintf(err, err_len, "tokenizer.json: merge %d is not \"a b\" or [\"a\", \"b\"]", i);
      rc = -EINVAL;
      break;
    }
    const size_t la = strlen(a), lc = strlen(c);
    s[i] = xmalloc(la + lc + 2);
    memcpy(s[i], a, la);
    if (lc) {
      s[i][la] = ' ';
      memcpy(s[i] + la + 1, c, lc);
    }
    lens[i] = lc ? la + 1 + lc : la;
    s[i][lens[i]] = 0;
  }
  if (rc == 0) gguf_build_arr_str(b, "tokenizer.ggml.merges", (const char *const *)s, lens, (size_t)n);
  for (int k = 0; k < n; k++) free(s[k]);
  free(s);
  free(lens);
  return rc;
}

static const char *type_of(const cJSON *o) {
  return cJSON_IsString(field(o, "type")) ? field(o, "type")->valuestring : "?";
}

/* A Replace step of " " by "▁" (a normalizer's or a decoder's inverse). */
static int is_replace(const cJSON *o, const char *from, const char *to) {
  const cJSON *pat = field(field(o, "pattern"), "String"), *content = field(o, "content");
  return is_type(o, "Replace") && cJSON_IsString(pat) && strcmp(pat->valuestring, from) == 0 &&
         cJSON_IsString(content) && strcmp(content->valuestring, to) == 0;
}

#define META "\xE2\x96\x81" /* "▁", SentencePiece's space */

/* tokenizer.json's BPE with byte_fallback (Llama 2, Mistral, Gemma): spaces
 * become "▁" (a Replace normalizer, or a Metaspace pre-tokenizer that does
 * not split) and one "▁" goes first (a Prepend normalizer, or Metaspace's
 * prepend_scheme first/always) — text/'s "llama" tokenizer, with merges.
 * *prefix: whether "▁" goes first: 0 no; 1 before every piece between added
 * tokens (Prepend); 2 the same unless the piece starts with a space
 * (Metaspace "always"); 3 only before the text's first piece, unless it
 * starts with a space (Metaspace "first"). Added tokens are matched in the
 * text as it is: `tokenizers` matches those marked "normalized" in the
 * normalized text (after Prepend and Replace), which tram does not do. */
static int check_sentencepiece(const cJSON *tok, int *prefix, char *err, size_t err_len) {
  const cJSON *norm = field(tok, "normalizer"), *pre = field(tok, "pre_tokenizer"), *dec = field(tok, "decoder");
  int replace = 0;
  *prefix = 0;
  const cJSON *steps = is_type(norm, "Sequence") ? field(norm, "normalizers") : NULL;
  const cJSON *one = steps ? steps->child : norm && !cJSON_IsNull(norm) ? norm : NULL;
  for (const cJSON *n = one; n; n = steps ? n->next : NULL) {
    const cJSON *p = field(n, "prepend");
    if (is_replace(n, " ", META) && !replace) replace = 1;
    else if (is_type(n, "Prepend") && cJSON_IsString(p) && strcmp(p->valuestring, META) == 0 && !replace && !*prefix)
      *prefix = 1;
    else {
      snprintf(err, err_len, "tokenizer.json: normalizer %s is not one tram runs with byte_fallback (Prepend \"▁\" "
               "then Replace \" \" by \"▁\")", type_of(n));
      return -EINVAL;
    }
  }
  if (is_type(pre, "Metaspace")) {
    const cJSON *rep = field(pre, "replacement"), *scheme = field(pre, "prepend_scheme");
    const char *sc = cJSON_IsString(scheme) ? scheme->valuestring
                     : cJSON_IsFalse(field(pre, "add_prefix_space")) ? "never" : "always";
    if (!cJSON_IsString(rep) || strcmp(rep->valuestring, META) != 0 || cJSON_IsTrue(field(pre, "split")) ||
        (strcmp(sc, "first") && strcmp(sc, "always") && strcmp(sc, "never")) || *prefix) {
      snprintf(err, err_len, "tokenizer.json: a Metaspace pre-tokenizer that splits, or replaces by something "
               "other than \"▁\", is not one tram runs");
      return -EINVAL;
    }
    replace = 1;
    *prefix = !strcmp(sc, "first") ? 3 : !strcmp(sc, "always") ? 2 : 0; /* not before a space already there */
  } else if (pre && !cJSON_IsNull(pre)) {
    snprintf(err, err_len, "tokenizer.json: pre_tokenizer %s with byte_fallback is not one tram runs (none, or "
             "Metaspace)", type_of(pre));
    return -EINVAL;
  }
  if (!replace) {
    snprintf(err, err_len, "tokenizer.json: byte_fallback BPE without spaces replaced by \"▁\" is not one tram "
             "runs");
    return -EINVAL;
  }
  const cJSON *dsteps = is_type(dec, "Sequence") ? field(dec, "decoders") : NULL;
  for (const cJSON *d = dsteps ? dsteps->child : NULL; d; d = d->next)
    if (!is_replace(d, META, " ") && !is_type(d, "ByteFallback") && !is_type(d, "Fuse") && !is_type(d, "Strip")) {
      snprintf(err, err_len, "tokenizer.json: decoder step %s: tram decodes SentencePiece-style BPE", type_of(d));
      return -EINVAL;
    }
  if (dec && !cJSON_IsNull(dec) && !dsteps && !is_type(dec, "Metaspace") && !is_type(dec, "ByteFallback")) {
    snprintf(err, err_len, "tokenizer.json: decoder %s: tram decodes SentencePiece-style BPE", type_of(dec));
    return -EINVAL;
  }
  if (cJSON_IsString(field(field(tok, "model"), "continuing_subword_prefix")) ||
      cJSON_IsString(field(field(tok, "model"), "end_of_word_suffix"))) {
    snprintf(err, err_len, "tokenizer.json: BPE with word affixes (continuing_subword_prefix, end_of_word_suffix) "
             "is not something tram runs");
    return -EINVAL;
  }
  if (cJSON_IsTrue(field(field(tok, "model"), "ignore_merges"))) {
    snprintf(err, err_len, "tokenizer.json: model.ignore_merges with byte_fallback is not something tram runs");
    return -EINVAL;
  }
  return 0;
}

/* The checks on tokenizer.json's model, normalizer and decoder. */
static int check_kinds(const cJSON *tok, char *err, size_t err_len) {
  const cJSON *model = field(tok, "model"), *norm = field(tok, "normalizer"), *dec = field(tok, "decoder");
  if (!is_type(model, "BPE")) {
    snprintf(err, err_len, "tokenizer.json: model type %s: tram reads BPE",
             cJSON_IsString(field(model, "type")) ? field(model, "type")->valuestring : "(none)");
    return -EINVAL;
  }
  if (cJSON_IsString(field(model, "continuing_subword_prefix")) ||
      cJSON_IsString(field(model, "end_of_word_suffix"))) {
    snprintf(err, err_len, "tokenizer.json: BPE with word affixes (continuing_subword_prefix, end_of_word_suffix) "
             "is not something tram runs");
    return -EINVAL;
  }
  if (norm && !cJSON_IsNull(norm) && !is_type(norm, "NFC")) {
    snprintf(err, err_len, "tokenizer.json: normalizer %s is not something tram runs (none, or NFC)",
             cJSON_IsString(field(norm, "type")) ? field(norm, "type")->valuestring : "?");
    return -EINVAL;
  }
  if (dec && !cJSON_IsNull(dec) && !is_type(dec, "ByteLevel")) {
    snprintf(err, err_len, "tokenizer.json: decoder %s: tram decodes byte-level BPE",
             cJSON_IsString(field(dec, "type")) ? field(dec, "type")->valuestring : "?");
    return -EINVAL;
  }
  return 0;
}

int hf__tokenizer(gguf_build_t *b, const cJSON *tok, const cJSON *tcfg, const cJSON *cfg, int n_vocab, char *err,
                  size_t err_len) {
  const char *pre = NULL;
  if (!cJSON_IsObject(tok)) {
    snprintf(err, err_len, "tokenizer.json: not a JSON object");
    return -EINVAL;
  }
  const int byte_fallback = cJSON_IsTrue(field(field(tok, "model"), "byte_fallback"));
  int prefix = 0;
  if (byte_fallback ? check_sentencepiece(tok, &prefix, err, err_len)
                    : check_kinds(tok, err, err_len) || pre_name(tok, &pre, err, err_len))
    return -EINVAL;
  vocab_t v = {xcalloc((size_t)n_vocab, sizeof(char *)), xcalloc((size_t)n_vocab, sizeof(int32_t)), n_vocab};
  int rc = read_vocab(&v, tok, err, err_len);
  if (rc == 0) rc = read_merges(b, tok, err, err_len);
  if (rc == 0) {
    size_t *lens = xmalloc((size_t)n_vocab * sizeof *lens);
    for (int i = 0; i < n_vocab; i++) lens[i] = strlen(v.text[i]);
    if (byte_fallback) {
      gguf_build_str(b, "tokenizer.ggml.model", "llama", 5);
      gguf_build_bool(b, "tokenizer.ggml.add_space_prefix", prefix != 0);
      if (prefix >= 2) gguf_build_bool(b, "tram.tokenizer.prefix_unless_space", 1);
      if (prefix) gguf_build_str(b, "tram.tokenizer.prefix_pieces", prefix == 3 ? "first" : "every", 5);
      mark_bytes(&v);
      const int32_t unk = find_token(&v, token_content(field(field(tok, "model"), "unk_token")));
      if (unk >= 0) gguf_build_u32(b, "tokenizer.ggml.unknown_token_id", (uint32_t)unk);
    } else {
      gguf_build_str(b, "tokenizer.ggml.model", "gpt2", 4);
      gguf_build_str(b, "tokenizer.ggml.pre", pre, strlen(pre));
      if (is_type(field(tok, "normalizer"), "NFC")) gguf_build_str(b, "tram.tokenizer.normalizer", "nfc", 3);
    }
    gguf_build_arr_str(b, "tokenizer.ggml.tokens", (const char *const *)v.text, lens, (size_t)n_vocab);
    gguf_build_arr_i32(b, "tokenizer.ggml.token_type", v.type, (size_t)n_vocab);
    free(lens);
    const int32_t bos = special_id(&v, tcfg, "bos_token", cfg, "bos_token_id", 0);
    const int32_t eos = special_id(&v, tcfg, "eos_token", cfg, "eos_token_id", 0);
    const int32_t eot = special_id(&v, NULL, "", cfg, "eos_token_id", 1);
    if (bos >= 0) gguf_build_u32(b, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    if (eos >= 0) gguf_build_u32(b, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
    if (eot >= 0 && eot != eos) gguf_build_u32(b, "tokenizer.ggml.eot_token_id", (uint32_t)eot);
    const char *flags[] = {"add_bos_token", "add_eos_token"};
    for (int i = 0; i < 2; i++) {
      const cJSON *f = field(tcfg, flags[i]);
      char key[64];
      snprintf(key, sizeof key, "tokenizer.ggml.%s", flags[i]);
      if (cJSON_IsBool(f)) gguf_build_bool(b, key, cJSON_IsTrue(f));
    }
    const cJSON *tpl = field(tcfg, "chat_template");
    for (const cJSON *e = cJSON_IsArray(tpl) ? tpl->child : NULL; e; e = e->next)
      if (cJSON_IsString(field(e, "name")) && strcmp(field(e, "name")->valuestring, "default") == 0)
        tpl = field(e, "template");
    if (cJSON_IsString(tpl)) gguf_build_str(b, "tokenizer.chat_template", tpl->valuestring, strlen(tpl->valuestring));
  }
  for (int i = 0; i < n_vocab; i++) free(v.text[i]);
  free(v.text);
  free(v.type);
  return rc;
}
