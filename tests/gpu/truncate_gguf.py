#!/usr/bin/env python3
"""Writes a copy of a Llama-family GGUF file that keeps only its first K
transformer blocks: every metadata key (tokenizer and chat template
included) is copied unchanged except `<arch>.block_count`, and every tensor
outside blocks K.. is copied byte for byte, in its stored type.

Why: the GPU machine is reached through a 64 MiB carry limit, and the
default model (98 MB) does not fit, compressed or not (zstd -9 keeps 94 %).
Its first layers do: the same weights, tokenizer, shapes and kernels, with
the logits read after layer K ("early exit"). tests/gpu/prepare-carry.sh
calls this; docs/benchmarks/cuda.md says what the check on it means.

Usage: truncate_gguf.py IN.gguf OUT.gguf --layers K
Uses the `gguf` package (reader and writer); runs where the test venv is.
"""
import argparse
import re
import sys

import gguf
import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--layers", type=int, required=True, help="blocks to keep (the first K)")
    args = ap.parse_args()

    r = gguf.GGUFReader(args.src)
    arch = r.fields["general.architecture"].contents()
    n_layers = r.fields[f"{arch}.block_count"].contents()
    if not 1 <= args.layers <= n_layers:
        sys.exit(f"truncate_gguf: --layers must be in 1..{n_layers}")

    w = gguf.GGUFWriter(args.dst, arch)
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue  # the header's own counts; the writer adds the architecture
        value = field.contents()
        if key == f"{arch}.block_count":
            value = args.layers
        sub = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(key, value, field.types[0], sub_type=sub)

    block = re.compile(r"^blk\.(\d+)\.")
    kept = 0
    for t in r.tensors:
        m = block.match(t.name)
        if m and int(m.group(1)) >= args.layers:
            continue
        # t.data: rows of stored bytes (quantized types) or of values; the
        # writer derives the element shape from it and raw_dtype.
        w.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
        kept += 1

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"truncate_gguf: {args.dst}: {args.layers} of {n_layers} blocks, {kept} tensors")


if __name__ == "__main__":
    main()
