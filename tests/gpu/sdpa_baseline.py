#!/usr/bin/env python3
"""tests/gpu/sdpa_baseline.py — PyTorch's attention on the shapes of tram's
kernel benchmark (tests/gpu/bench.cu), for the device script's table: the
baseline a user would compare tram's CUDA attention with.

Shapes (bf16, as bench.cu times them):
  decode   64 sequences x 4,096 cached keys (+1), 32 query / 8 KV heads, d128
           (contiguous K/V: no paging, which only flatters the baseline)
  prefill  causal, 8 sequences x 2,048 tokens, 32 / 8 heads, d128

Each shape runs through torch.nn.functional.scaled_dot_product_attention
under each SDPA backend that accepts it (flash, cuDNN, memory-efficient,
math), timed with CUDA events (median of --reps after warm-up). GQA uses
enable_gqa where this torch has it, else K/V repeated per query head
beforehand (outside the timing). Rates count the same bytes and FLOPs as
bench.cu. Prints a markdown table (and writes it to --table).

--dry checks the script and prints the plan without importing torch (the
CPU-side dry run of tests/gpu/run-on-device.sh)."""
import argparse
import statistics
import sys

SHAPES = [
    # name, batch, q_len, k_len, heads, kv heads, d, causal
    ("decode 64x4096, 32/8 heads, D128", 64, 1, 4097, 32, 8, 128, False),
    ("prefill causal 8x2048, 32/8 heads, D128", 8, 2048, 2048, 32, 8, 128, True),
]


def rates(b, q, k, h, hkv, d, causal):
    """Bytes (decode: K/V read in bf16 + q/out in f32, as bench.cu) or FLOPs."""
    if q == 1:
        return b * k * hkv * d * 2 * 2 + 2.0 * b * h * d * 4, 0.0
    return 0.0, 4.0 * d * h * b * (q * (q + 1) / 2 if causal else q * k)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--table", help="also write the markdown table here")
    ap.add_argument("--dry", action="store_true", help="print the plan; no torch, no GPU")
    args = ap.parse_args()
    head = "| PyTorch SDPA baseline | backend | median | rate |\n|---|---|---:|---:|"
    if args.dry:
        print(head)
        for s in SHAPES:
            print(f"| {s[0]} | (dry run) | - | - |")
        return 0

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dev = torch.device("cuda")
    gqa_kw = {}
    try:  # torch >= 2.5
        one_kv = torch.zeros(1, 1, 1, 8, device=dev)
        F.scaled_dot_product_attention(torch.zeros(1, 2, 1, 8, device=dev), one_kv, one_kv, enable_gqa=True)
        gqa_kw = {"enable_gqa": True}
    except (TypeError, RuntimeError):
        pass
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                ("math", SDPBackend.MATH)]
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        backends.insert(1, ("cudnn", SDPBackend.CUDNN_ATTENTION))
    lines = [head]
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(dev)}, GQA: "
          f"{'enable_gqa' if gqa_kw else 'K/V repeated'}", file=sys.stderr)
    for name, b, q_len, k_len, h, hkv, d, causal in SHAPES:
        g = torch.Generator(device=dev).manual_seed(0)
        q = torch.randn(b, h, q_len, d, device=dev, dtype=torch.bfloat16, generator=g)
        k = torch.randn(b, hkv, k_len, d, device=dev, dtype=torch.bfloat16, generator=g)
        v = torch.randn(b, hkv, k_len, d, device=dev, dtype=torch.bfloat16, generator=g)
        kw = dict(gqa_kw)
        if not gqa_kw:
            k, v = k.repeat_interleave(h // hkv, dim=1), v.repeat_interleave(h // hkv, dim=1)
        nbytes, flops = rates(b, q_len, k_len, h, hkv, d, causal)
        for bname, be in backends:
            try:
                with sdpa_kernel(be):
                    run = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, **kw)
                    for _ in range(3):
                        run()
                    torch.cuda.synchronize()
                    times = []
                    for _ in range(args.reps):
                        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        e0.record()
                        run()
                        e1.record()
                        e1.synchronize()
                        times.append(e0.elapsed_time(e1) * 1e3)  # us
            except RuntimeError as e:  # this backend does not take the shape
                lines.append(f"| {name} | {bname} | not supported | {str(e).splitlines()[0][:60]} |")
                continue
            us = statistics.median(times)
            rate = f"{nbytes / us / 1e3:.0f} GB/s" if nbytes else f"{flops / us / 1e6:.0f} TFLOP/s"
            lines.append(f"| {name} | {bname} | {us:.1f} us | {rate} |")
    text = "\n".join(lines)
    print(text)
    if args.table:
        with open(args.table, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
