/* hf/hf.h — Hugging Face checkpoints (a folder, as `huggingface-cli
 * download` leaves it: config.json, model.safetensors or
 * model.safetensors.index.json and its shards, tokenizer.json,
 * tokenizer_config.json, optionally generation_config.json) read as a GGUF
 * context: the hyper-parameters of config.json under llama.cpp's
 * `<arch>.*` keys, the tensors under llama.cpp's names (viewed in the
 * mapped safetensors, or converted copies where GGUF's conventions differ:
 * F32 norm weights, Gemma's 1 + w, Llama's Q/K row order), and
 * tokenizer.json's byte-level BPE as `tokenizer.ggml.*`, generation_config.json's
 * sampling as `general.sampling.*` (and `tram.sampling.max_new_tokens`), a
 * sentence-transformers folder's pooling (modules.json, 1_Pooling/config.json)
 * as `<arch>.pooling_type` and its Normalize module as
 * `tram.pooling.normalize`. The model loader
 * and the tokenizer then read it as they read a GGUF file, so a checkpoint
 * and its GGUF conversion give the same model.
 *
 * What is refused, with one line naming it: a model_type, activation, RoPE
 * scaling, normalizer or pre-tokenizer tram does not run, a tensor with no
 * GGUF counterpart, a malformed JSON file. */
#ifndef TRAM_HF_H
#define TRAM_HF_H

#include <stddef.h>

#include "gguf/gguf.h"

/* 1 when path names a Hugging Face checkpoint (a folder, a .safetensors
 * file or a .json index) rather than a GGUF file. */
int hf_is_checkpoint(const char *path);

/* Opens the checkpoint at path (a folder, or a file inside one: the other
 * files are looked for beside it). NULL with one line in err on failure. */
gguf_ctx_t *hf_open(const char *path, char *err, size_t err_len);

#endif
