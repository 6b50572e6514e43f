#!/usr/bin/env python3
"""Writes the serving-benchmark report from compare.py's results JSON:
OUT/README.md (tables, goals, commands, machine, versions, sanity checks) and
three PNG plots, each held against its physical bound (bench/bounds.py):
  serving-throughput.png  output tokens/s vs concurrency   (decode bound)
  serving-ttft.png        TTFT p50 / p99 vs concurrency     (prefill bound)
  serving-itl.png         ITL p50 / p99 vs concurrency      (step-time bound)

  bench/report.py docs/benchmarks/results.json [OUT]   re-renders a report
"""
from __future__ import annotations

import json
import math
import pathlib
import sys

import bounds
import workloads as W

FIGS = {"throughput": "serving-throughput.png", "ttft": "serving-ttft.png", "itl": "serving-itl.png"}
COLORS = {"tram": "tab:blue", "llamacpp": "tab:orange"}
GOALS = [  # key, text, target ratio, higher is better
    ("decode1", "single-stream decode tokens/s (1000 / mean TPOT, c=1)", 1.2, True),
    ("agg32", "aggregate output tokens/s at 32 streams (fixed 128/128)", 2.0, True),
    ("prefill512", "prefill tokens/s of a 512-token prompt (512 / mean TTFT, fixed 512/64, c=1)", 1.0, True),
    ("ttft16", "TTFT p99 at 16 concurrent, ms (fixed 128/128); goal: tram <= llama.cpp", 1.0, False),
]


def _cost(meta) -> bounds.ModelCost:
    return bounds.ModelCost(**meta["cost"])


def _mach(meta) -> bounds.Machine:
    p = meta.get("machine_probe") or {}
    return bounds.Machine(p.get("bandwidth_gbs"), p.get("peak_gflops"), p.get("notes", []), p.get("outputs", {}))


def _find(runs, server, workload, level):
    return next((r for r in runs if r["server"] == server and r["workload"] == workload
                 and r["concurrency"] == level), None)


def _lens(run) -> tuple[float, float]:
    """Mean prompt and output tokens of a run's completed requests."""
    m = run["metrics"]
    n = max(1, m["completed"])
    return m["total_input_tokens"] / n, m["total_output_tokens"] / n


def _ctx(run) -> float:
    """Mean context length while decoding: prompt + half the output."""
    p, o = _lens(run)
    return p + o / 2


def _cached(spec: str) -> int:
    """Prompt tokens a prefix cache can serve: the shared prefix, else 0."""
    wl = W.parse(spec)
    return wl.a if wl.kind == "prefix" else 0


def _grid(levels):
    """Concurrencies to draw a bound at: dense between the first and last level."""
    import numpy as np
    return list(np.geomspace(min(levels), max(levels), 64)) if len(levels) > 1 else list(levels)


def goal_values(results) -> dict:
    """goal key -> {server: value or None}."""
    runs, names = results["runs"], results["meta"]["servers"]
    specs = results["meta"]["workloads"]
    decode_wl = "fixed:32:256" if "fixed:32:256" in specs else next((s for s in specs if s.startswith("fixed")), "")
    out = {}
    for key, *_ in GOALS:
        out[key] = {}
        for n in names:
            v = None
            if key == "decode1" and (r := _find(runs, n, decode_wl, 1)) and r["metrics"]["tpot_ms"]["mean"] > 0:
                v = 1000.0 / r["metrics"]["tpot_ms"]["mean"]
            elif key == "agg32" and (r := _find(runs, n, "fixed:128:128", 32)):
                v = r["metrics"]["output_throughput"]
            elif key == "prefill512" and (r := _find(runs, n, "fixed:512:64", 1)) and r["metrics"]["ttft_ms"]["mean"] > 0:
                v = 512 * 1000.0 / r["metrics"]["ttft_ms"]["mean"]
            elif key == "ttft16" and (r := _find(runs, n, "fixed:128:128", 16)):
                v = r["metrics"]["ttft_ms"]["p99"]
            out[key][n] = v
    return out


def _fmt(v, digits=1):
    return "—" if v is None else f"{v:,.{digits}f}"


def plots(results, out: pathlib.Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda v, _: f"{v:g}")
    plain_minor = FuncFormatter(lambda v, _: f"{v:g}" if v > 0 and round(v / 10 ** math.floor(math.log10(v))) in (2, 5)
                                else "")
    meta, runs = results["meta"], results["runs"]
    cost, mach = _cost(meta), _mach(meta)
    specs, names, labels = meta["workloads"], meta["servers"], meta["labels"]
    ncol = min(3, len(specs))
    nrow = -(-len(specs) // ncol)

    def grid(title):
        fig, axes = plt.subplots(nrow, ncol, figsize=(5.2 * ncol, 3.9 * nrow), squeeze=False)
        fig.suptitle(title)
        for ax in axes.flat[len(specs):]:
            ax.set_visible(False)
        return fig, axes.flat

    def series(name, spec):
        rs = sorted((r for r in runs if r["server"] == name and r["workload"] == spec), key=lambda r: r["concurrency"])
        return [r["concurrency"] for r in rs], rs

    fig, axes = grid("Output tokens/s vs concurrency (dashed: bound from measured bandwidth and peak FLOP/s)")
    for ax, spec in zip(axes, specs):
        for n in names:
            xs, rs = series(n, spec)
            ax.plot(xs, [r["metrics"]["output_throughput"] for r in rs], "o-", color=COLORS.get(n), label=labels[n])
        xs, rs = series(names[0], spec)
        if rs:
            p, o = _lens(rs[-1])
            gx = _grid(xs)
            bnd = [bounds.decode_bound(cost, mach, c, p, o, _cached(spec)) for c in gx]
            if all(b is not None for b in bnd):
                ax.plot(gx, bnd, "k--", lw=1, label="bound")
        ax.set(title=W.parse(spec).name, xscale="log", xlabel="concurrent streams", ylabel="output tokens/s")
        ax.set_ylim(bottom=0)
        ax.set_xticks(meta["concurrency"], [str(c) for c in meta["concurrency"]])
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / FIGS["throughput"], dpi=90)
    plt.close(fig)

    for key, metric, title in (("ttft", "ttft_ms", "TTFT (ms) vs concurrency: p50 solid, p99 dotted"),
                               ("itl", "itl_ms", "ITL (ms) vs concurrency: p50 solid, p99 dotted")):
        fig, axes = grid(title + " (dashed: lower bound)")
        for ax, spec in zip(axes, specs):
            for n in names:
                xs, rs = series(n, spec)
                ax.plot(xs, [r["metrics"][metric]["median"] for r in rs], "o-", color=COLORS.get(n),
                        label=f"{labels[n]} p50")
                ax.plot(xs, [r["metrics"][metric]["p99"] for r in rs], "s:", color=COLORS.get(n),
                        label=f"{labels[n]} p99")
            xs, rs = series(names[0], spec)
            gx = _grid(xs) if rs else []
            if key == "itl":
                bnd = [bounds.step_time_bound(cost, mach, c, _ctx(rs[-1])) for c in gx]
            else:
                bnd = [bounds.prefill_time_bound(cost, mach, round(_lens(rs[-1])[0])) for c in gx]
            if gx and all(b is not None for b in bnd):
                ax.plot(gx, [b * 1000 for b in bnd], "k--", lw=1, label="bound")
            ax.set(title=W.parse(spec).name, xscale="log", yscale="log", xlabel="concurrent streams", ylabel="ms")
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain_minor)
            ax.set_xticks(meta["concurrency"], [str(c) for c in meta["concurrency"]])
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / FIGS[key], dpi=90)
        plt.close(fig)


def _bound_text(meta) -> dict[str, str]:
    cost, mach = _cost(meta), _mach(meta)
    wb = cost.weight_bytes / 1e6
    bw = f"{mach.bandwidth_gbs:.2f} GB/s" if mach.bandwidth_gbs else None
    pk = f"{mach.peak_gflops:.1f} GFLOP/s" if mach.peak_gflops else None
    f0 = cost.flops(0) / 1e6
    fk = 4 * cost.layers * cost.heads * cost.head_dim / 1e3
    t = {}
    if bw:
        t["throughput"] = (f"Decode bound: B streams × {bw} ÷ {wb:.1f} MB of weights per step = "
                           f"{mach.bandwidth_gbs * 1e3 / wb:,.0f} × B tokens/s")
    else:
        t["throughput"] = "Decode bandwidth bound: not measured (no membw probe)"
    if pk:
        t["throughput"] += (f"; compute bound: {pk} ÷ FLOPs per output token, counting its share of the "
                            f"prompt's prefill (FLOPs per token: {f0:.0f} MFLOP + {fk:.0f} kFLOP × context).")
    else:
        t["throughput"] += "; compute bound: not measured (no flops probe)."
    t["ttft"] = ("Prefill bound (TTFT of one prompt of P tokens, alone): P × FLOPs per token at context P/2 "
                 f"÷ {pk or 'peak FLOP/s (not measured)'}, and at least one read of the weights "
                 f"({wb:.1f} MB ÷ {bw or 'bandwidth (not measured)'}). At higher concurrency TTFT also "
                 "includes queueing, so the line is a floor, not a target.")
    t["itl"] = (f"Step-time bound (ITL with B streams): max({wb:.1f} MB ÷ {bw or 'bandwidth (not measured)'}, "
                f"B × FLOPs per token ÷ {pk or 'peak FLOP/s (not measured)'}).")
    return t


def markdown(results, out: pathlib.Path) -> str:
    meta, runs = results["meta"], results["runs"]
    names, labels, mi = meta["servers"], meta["labels"], meta["machine"]
    cost, mach = _cost(meta), _mach(meta)
    L = [f"# {meta['title']}", ""]
    L += [f"> {n}" for n in meta.get("notes", [])]
    if meta.get("notes"):
        L.append("")
    L += ["Written by `bench/compare.py` (`make bench`); the definitions of every number are in "
          "[methodology.md](methodology.md). Raw numbers: [results.json](results.json).", "",
          "## Machine, versions, commands", "", "| | |", "| --- | --- |",
          f"| date | {mi.get('date')} |",
          f"| CPU | {mi.get('Model name', '?')}: {mi.get('cpus')} logical CPUs ({mi.get('Socket(s)', '?')} socket × "
          f"{mi.get('Core(s) per socket', '?')} cores × {mi.get('Thread(s) per core', '?')} thread(s) per core), "
          f"L3 {mi.get('L3 cache', '?')}; {mi.get('Flags', '')} |",
          f"| memory | {mi.get('memory_gib', '?')} GiB; kernel {mi.get('kernel')} |",
          f"| load average (1, 5, 15 min) | at start {meta['load_start']}; at end {meta.get('load_end', '?')} |",
          f"| memory bandwidth | {_fmt(mach.bandwidth_gbs, 2) + ' GB/s (build/bench/membw, read)' if mach.bandwidth_gbs else 'not measured'} |",
          f"| peak compute | {_fmt(mach.peak_gflops) + ' GFLOP/s (build/bench/flops)' if mach.peak_gflops else 'not measured'} |",
          f"| model | `{meta['model']}`: {cost.weight_bytes / 1e6:.1f} MB of weights read per decode step; "
          f"{cost.flops(0) / 1e6:.0f} MFLOP + {4 * cost.layers * cost.heads * cost.head_dim / 1e3:.0f} kFLOP × context per token |",
          f"| threads | {meta['threads']} for every server |"]
    L += [f"| {labels[n]} | {meta['versions'][n]} |" for n in names]
    L += [f"| run time | {meta.get('elapsed_s', 0) / 60:.1f} min |", "",
          f"Invocation: `{meta['invocation']}`", ""]
    for n in names:
        ex = next((r for r in runs if r["server"] == n), None)
        if ex:
            L += [f"{labels[n]} command (`{ex['workload']}`, concurrency {ex['concurrency']}; every run starts a "
                  "fresh server with the slot / sequence count equal to its concurrency):", "",
                  f"    {ex['command']}", ""]
    for note in mach.notes:
        L += [f"- {note}"]
    if mach.notes:
        L.append("")

    gv = goal_values(results)
    L += ["## Goals (reported, not asserted)", ""]
    if "tram" in names and "llamacpp" in names:
        L += ["| goal | tram | llama.cpp | tram ÷ llama.cpp | target | met |", "| --- | ---: | ---: | ---: | ---: | --- |"]
        for key, text, target, higher in GOALS:
            t, p = gv[key]["tram"], gv[key]["llamacpp"]
            ratio = t / p if t and p else None
            met = "—" if ratio is None else ("yes" if (ratio >= target if higher else ratio <= target) else
                                             f"no ({(ratio / target - 1) * 100:+.0f}%)" if higher else
                                             f"no ({(ratio - 1) * 100:+.0f}% slower)")
            L.append(f"| {text} | {_fmt(t)} | {_fmt(p)} | {_fmt(ratio, 2)} | {'≥' if higher else '≤'} {target} | {met} |")
    else:
        L += ["Only " + ", ".join(labels[n] for n in names) + " ran, so there are no ratios; its values:", "",
              "| goal | " + " | ".join(labels[n] for n in names) + " |", "| --- |" + " ---: |" * len(names)]
        for key, text, *_ in GOALS:
            L.append(f"| {text} | " + " | ".join(_fmt(gv[key][n]) for n in names) + " |")
    L.append("")
    if (out / "analysis.md").exists():
        L += ["Where tram falls short of a goal, by how much and where its time goes (profiles): "
              "[analysis.md](analysis.md).", ""]

    bt = _bound_text(meta)
    L += ["## Figures", "", f"![output tokens/s]({FIGS['throughput']})", "", bt["throughput"], "",
          f"![TTFT]({FIGS['ttft']})", "", bt["ttft"], "", f"![ITL]({FIGS['itl']})", "", bt["itl"], ""]

    L += ["## Results", "",
          "Times in ms; throughputs per second; `bound` is the upper bound on output tokens/s at that "
          "concurrency (see Figures and methodology.md).", ""]
    for spec in meta["workloads"]:
        L += [f"### {W.parse(spec).name} (`{spec}`)", "",
              "| server | conc | req/s | out tok/s | total tok/s | TTFT mean / p50 / p99 | TPOT mean / p50 / p99 "
              "| ITL mean / p50 / p99 | E2E mean / p50 / p99 | ok / failed | bound |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for level in meta["concurrency"]:
            for n in names:
                r = _find(runs, n, spec, level)
                if not r:
                    continue
                m = r["metrics"]

                def trio(k):
                    return f"{m[k]['mean']:.1f} / {m[k]['median']:.1f} / {m[k]['p99']:.1f}"
                b = bounds.decode_bound(cost, mach, level, *_lens(r), _cached(spec))
                L.append(f"| {labels[n]} | {level} | {m['request_throughput']:.2f} | {m['output_throughput']:.1f} | "
                         f"{m['total_token_throughput']:.1f} | {trio('ttft_ms')} | {trio('tpot_ms')} | "
                         f"{trio('itl_ms')} | {trio('e2el_ms')} | {m['completed']} / {m['failed']} | {_fmt(b, 0)} |")
        L.append("")

    L += ["## Sanity checks", "",
          "Every request is checked: it succeeded, 0 < TTFT ≤ E2E, TTFT + ΣITL = E2E, the output token count "
          "equals max_tokens (ignore_eos), and the server's prompt_tokens equals the workload's prompt length.", ""]
    probs = [(r, p) for r in runs for p in r["problems"]]
    if probs:
        for r, p in probs[:40]:
            L.append(f"- {labels[r['server']]} {r['workload']} c={r['concurrency']}: {p}")
        if len(probs) > 40:
            L.append(f"- … and {len(probs) - 40} more (results.json)")
    else:
        L.append("All runs passed.")
    counted = sum(r["usage_counted"] for r in runs)
    total = sum(r["metrics"]["completed"] + r["metrics"]["failed"] for r in runs)
    L += ["", f"Output tokens were counted from the servers' usage for {counted} of {total} requests "
          "(the rest by re-tokenizing the text, vLLM's fallback).", ""]

    others = sorted(p.name for p in out.glob("*.md") if p.name not in ("README.md", "methodology.md", "analysis.md"))
    if others:
        L += ["## Micro-benchmarks", ""] + [f"- [{o}]({o})" for o in others] + [""]
    return "\n".join(L)


def write(results, out: pathlib.Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    plots(results, out)
    (out / "README.md").write_text(markdown(results, out))


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    src = pathlib.Path(sys.argv[1])
    write(json.loads(src.read_text()), pathlib.Path(sys.argv[2]) if len(sys.argv) == 3 else src.parent)
