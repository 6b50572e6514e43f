#!/usr/bin/env python3
"""Writes a Llama-shaped GGUF model with random weights: by default the
shape of Llama 3 / 3.1 8B (32 layers, dim 4096, 32 query / 8 KV heads of
128, MLP 14336, vocabulary 128256, Llama 3.1 RoPE scaling), for timing
tram where no real model can be downloaded (the GPU machine has no
network). About 8.5 GB at the default shape; every option shrinks it.

    scripts/make-random-llama.py OUT.gguf [--layers 32 --dim 4096 ...]
    scripts/make-random-llama.py --dry-run        (the tensor table as JSON)

What is in the file:
- `llama` metadata: block_count, context_length, embedding_length,
  feed_forward_length, attention.head_count(_kv), rope.freq_base 500000,
  rope.dimension_count, layer_norm_rms_epsilon, vocab_size, and the
  `rope.scaling.*` keys of Llama 3.1 (type llama3, factor 8, low/high
  frequency factors 1 and 4, original context 8192);
- a byte-level BPE tokenizer (`tokenizer.ggml.model` gpt2, pre llama-bpe):
  the 256 byte symbols, then tokens made by random merges of earlier tokens
  (each with its merge rule), then control tokens named as Llama 3's
  (<|begin_of_text|> = BOS, <|end_of_text|> = EOS, <|eot_id|>);
- weights: every matrix Q8_0 (d = f16 scale, 32 int8; the smallest type
  tram's backends load, dequantized to bf16 on the GPU), random int8 and
  scales such that the weights have standard deviation --std; norms F32
  near 1; an untied output.weight, as Llama 3 8B has.

Random data is seeded (--seed): tensor i draws from SFC64 seeded with
(seed, i), so the file's bytes depend only on the options; the vocabulary
from --vocab-seed when given (two models of other seeds and shapes then
share a vocabulary: a target and its draft). The tensors are
written by --jobs processes at their final offsets (numpy only: no `gguf`
package needed, so this runs on a bare GPU machine; the tests read the file
back with the `gguf` package).
"""
import argparse
import json
import multiprocessing
import os
import struct
import sys

import numpy as np

ALIGN = 32  # general.alignment's default
GGML_F32, GGML_Q8_0 = 0, 8
Q8_0_BLOCK, Q8_0_BYTES = 32, 34
# GGUF metadata value types
U32, I32, F32, BOOL, STR, ARR = 4, 5, 6, 7, 8, 9
INT8_STD = np.sqrt((256.0**2 - 1) / 12)  # std of a uniform int8 in [-128, 127]


def byte_symbols():
    """GPT-2's byte-level alphabet: byte b -> one printable character."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    sym, extra = {}, 0
    for b in range(256):
        if b in keep:
            sym[b] = chr(b)
        else:
            sym[b] = chr(256 + extra)
            extra += 1
    return [sym[b] for b in range(256)]


def make_vocab(n_vocab, seed):
    """(tokens, types, merges, special ids) of a byte-level BPE vocabulary."""
    n_special = min(256, (n_vocab - 256) // 2)
    n_regular = n_vocab - n_special
    tokens = byte_symbols()
    seen = set(tokens)
    merges = []
    rng = np.random.Generator(np.random.SFC64([seed, 1 << 20]))
    while len(tokens) < n_regular:
        # pairs drawn among the tokens made so far, a batch at a time
        for i, j in rng.integers(0, len(tokens), (1 << 14, 2)).tolist():
            a, b = tokens[i], tokens[j]
            if len(a) + len(b) > 16 or a + b in seen:
                continue
            tokens.append(a + b)
            seen.add(a + b)
            merges.append(f"{a} {b}")
            if len(tokens) == n_regular:
                break
    names = {0: "<|begin_of_text|>", 1: "<|end_of_text|>", 6: "<|start_header_id|>", 7: "<|end_header_id|>",
             9: "<|eot_id|>"}
    reserved = 0
    for i in range(n_special):
        if i in names:
            tokens.append(names[i])
        else:
            tokens.append(f"<|reserved_special_token_{reserved}|>")
            reserved += 1
    types = [1] * n_regular + [3] * n_special  # normal, control
    special = {"bos": n_regular, "eos": n_regular + 1, "eot": n_regular + 9 if n_special > 9 else None}
    return tokens, types, merges, special


# --- GGUF encoding (version 3, little-endian) ---------------------------------


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value, sub=None):
    out = [gstr(key), struct.pack("<I", vtype)]
    if vtype == ARR:
        out.append(struct.pack("<IQ", sub, len(value)))
        if sub == STR:
            out.extend(gstr(v) for v in value)
        elif sub == U32:
            out.append(np.asarray(value, dtype="<u4").tobytes())
        elif sub == I32:
            out.append(np.asarray(value, dtype="<i4").tobytes())
        else:
            raise ValueError(sub)
    elif vtype == STR:
        out.append(gstr(value))
    elif vtype == U32:
        out.append(struct.pack("<I", value))
    elif vtype == F32:
        out.append(struct.pack("<f", value))
    elif vtype == BOOL:
        out.append(struct.pack("<?", value))
    else:
        raise ValueError(vtype)
    return b"".join(out)


def tensor_table(a):
    """[(name, ggml type, ne (GGUF order: innermost first), kind)]."""
    q_dim, kv_dim = a.heads * a.head_dim, a.kv_heads * a.head_dim
    t = [("token_embd.weight", GGML_Q8_0, [a.dim, a.vocab], "matrix")]
    for i in range(a.layers):
        p = f"blk.{i}."
        t += [
            (p + "attn_norm.weight", GGML_F32, [a.dim], "norm"),
            (p + "attn_q.weight", GGML_Q8_0, [a.dim, q_dim], "matrix"),
            (p + "attn_k.weight", GGML_Q8_0, [a.dim, kv_dim], "matrix"),
            (p + "attn_v.weight", GGML_Q8_0, [a.dim, kv_dim], "matrix"),
            (p + "attn_output.weight", GGML_Q8_0, [q_dim, a.dim], "matrix"),
            (p + "ffn_norm.weight", GGML_F32, [a.dim], "norm"),
            (p + "ffn_gate.weight", GGML_Q8_0, [a.dim, a.ff], "matrix"),
            (p + "ffn_up.weight", GGML_Q8_0, [a.dim, a.ff], "matrix"),
            (p + "ffn_down.weight", GGML_Q8_0, [a.ff, a.dim], "matrix"),
        ]
    t += [("output_norm.weight", GGML_F32, [a.dim], "norm"), ("output.weight", GGML_Q8_0, [a.dim, a.vocab], "matrix")]
    return t


def nbytes(ggml_type, ne):
    n = int(np.prod(ne))
    return n * 4 if ggml_type == GGML_F32 else n // Q8_0_BLOCK * Q8_0_BYTES


def header(a, table, offsets):
    tokens, types, merges, special = make_vocab(a.vocab, a.seed if a.vocab_seed is None else a.vocab_seed)
    m = [
        kv("general.architecture", STR, "llama"),
        kv("general.name", STR, f"tram random llama ({a.layers} layers, dim {a.dim}, seed {a.seed})"),
        kv("general.file_type", U32, 7),  # mostly Q8_0
        kv("llama.block_count", U32, a.layers),
        kv("llama.context_length", U32, a.ctx),
        kv("llama.embedding_length", U32, a.dim),
        kv("llama.feed_forward_length", U32, a.ff),
        kv("llama.attention.head_count", U32, a.heads),
        kv("llama.attention.head_count_kv", U32, a.kv_heads),
        kv("llama.attention.key_length", U32, a.head_dim),
        kv("llama.attention.value_length", U32, a.head_dim),
        kv("llama.rope.freq_base", F32, a.rope_base),
        kv("llama.rope.dimension_count", U32, a.head_dim),
        kv("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
        kv("llama.vocab_size", U32, a.vocab),
    ]
    if not a.no_rope_scaling:
        m += [
            kv("llama.rope.scaling.type", STR, "llama3"),
            kv("llama.rope.scaling.factor", F32, 8.0),
            kv("llama.rope.scaling.low_freq_factor", F32, 1.0),
            kv("llama.rope.scaling.high_freq_factor", F32, 4.0),
            kv("llama.rope.scaling.original_context_length", U32, 8192),
        ]
    m += [
        kv("tokenizer.ggml.model", STR, "gpt2"),
        kv("tokenizer.ggml.pre", STR, "llama-bpe"),
        kv("tokenizer.ggml.tokens", ARR, tokens, STR),
        kv("tokenizer.ggml.token_type", ARR, types, I32),  # INT32, as llama.cpp writes and reads it
        kv("tokenizer.ggml.merges", ARR, merges, STR),
        kv("tokenizer.ggml.bos_token_id", U32, special["bos"]),
        kv("tokenizer.ggml.eos_token_id", U32, special["eos"]),
        kv("tokenizer.ggml.add_bos_token", BOOL, True),
    ]
    if special["eot"] is not None:
        m.append(kv("tokenizer.ggml.eot_token_id", U32, special["eot"]))
    out = [b"GGUF", struct.pack("<IQQ", 3, len(table), len(m))] + m
    for (name, gtype, ne, _), off in zip(table, offsets):
        out += [gstr(name), struct.pack("<I", len(ne)), struct.pack(f"<{len(ne)}Q", *ne), struct.pack("<IQ", gtype, off)]
    h = b"".join(out)
    return h + b"\0" * (-len(h) % ALIGN)


def write_tensor(job):
    """Writes tensor i of the table at its offset: runs in a worker process."""
    path, seed, std, i, (name, gtype, ne, kind), where = job
    rng = np.random.SFC64([seed, i])
    fd = os.open(path, os.O_WRONLY)
    try:
        if kind == "norm":
            g = np.random.Generator(rng)
            os.pwrite(fd, g.uniform(0.8, 1.2, ne[0]).astype("<f4").tobytes(), where)
            return
        blocks = int(np.prod(ne)) // Q8_0_BLOCK
        step = 1 << 20  # blocks per write (34 MiB)
        for b0 in range(0, blocks, step):
            nb = min(step, blocks - b0)
            buf = np.empty((nb, Q8_0_BYTES), dtype=np.uint8)
            raw = rng.random_raw((nb * Q8_0_BLOCK + 7) // 8).view(np.uint8)
            buf[:, 2:] = raw[: nb * Q8_0_BLOCK].reshape(nb, Q8_0_BLOCK)
            # scale d: std / std(int8) times U(0.75, 1.25) per block, as f16
            u = (rng.random_raw(nb) >> 11).astype(np.float64) / float(1 << 53)
            d = (std / INT8_STD * (0.75 + 0.5 * u)).astype("<f2")
            buf[:, :2] = d.view(np.uint8).reshape(nb, 2)
            os.pwrite(fd, buf.tobytes(), where + b0 * Q8_0_BYTES)
    finally:
        os.close(fd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", help="the GGUF file to write")
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--dim", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=0, help="0: dim / heads")
    ap.add_argument("--ff", type=int, default=14336)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--ctx", type=int, default=131072, help="context_length")
    ap.add_argument("--rope-base", type=float, default=500000.0)
    ap.add_argument("--std", type=float, default=0.02, help="weights' standard deviation")
    ap.add_argument("--no-rope-scaling", action="store_true",
                    help="no rope.scaling.* keys (llama.cpp refuses type llama3 there; bench/cpu_decode.py)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab-seed", type=int, default=None,
                    help="seed of the vocabulary alone (default: --seed): models that share it share their vocabulary")
    ap.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1))
    ap.add_argument("--dry-run", action="store_true", help="print the tensor table as JSON, write nothing")
    a = ap.parse_args()
    a.head_dim = a.head_dim or a.dim // max(a.heads, 1)
    bad = []
    if min(a.layers, a.dim, a.heads, a.kv_heads, a.head_dim, a.ff) < 1:
        bad.append("every size must be positive")
    elif a.heads % a.kv_heads:
        bad.append("--kv-heads must divide --heads")
    if a.head_dim % 2:
        bad.append("the head dimension must be even (RoPE pairs)")
    for name, v in (("--dim", a.dim), ("--ff", a.ff), ("heads x head_dim", a.heads * a.head_dim)):
        if v % Q8_0_BLOCK:
            bad.append(f"{name} ({v}) must be a multiple of {Q8_0_BLOCK} (Q8_0 blocks)")
    if a.vocab < 512:
        bad.append("--vocab must be at least 512 (256 byte tokens, merges, control tokens)")
    if not a.out and not a.dry_run:
        bad.append("name the output file (or --dry-run)")
    if bad:
        ap.error("; ".join(bad))

    table = tensor_table(a)
    offsets, off = [], 0
    for _, gtype, ne, _ in table:
        offsets.append(off)
        off += nbytes(gtype, ne)
        off += -off % ALIGN
    if a.dry_run:
        params = sum(int(np.prod(ne)) for _, _, ne, _ in table)
        json.dump({"tensors": [[n, t, ne] for n, t, ne, _ in table], "params": params, "data_bytes": off}, sys.stdout)
        print()
        return

    h = header(a, table, offsets)
    with open(a.out, "wb") as f:
        f.write(h)
        f.truncate(len(h) + off)
    jobs = [(a.out, a.seed, a.std, i, t, len(h) + o) for i, (t, o) in enumerate(zip(table, offsets))]
    jobs.sort(key=lambda j: -nbytes(j[4][1], j[4][2]))  # largest first: the pool ends evenly
    if a.jobs > 1:
        with multiprocessing.Pool(a.jobs) as pool:
            for _ in pool.imap_unordered(write_tensor, jobs):
                pass
    else:
        for j in jobs:
            write_tensor(j)
    params = sum(int(np.prod(ne)) for _, _, ne, _ in table)
    print(f"make-random-llama: {a.out}: {a.layers} layers, dim {a.dim}, {a.heads}/{a.kv_heads} heads of "
          f"{a.head_dim}, MLP {a.ff}, vocabulary {a.vocab}: {params / 1e9:.2f} B parameters, "
          f"{(len(h) + off) / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
