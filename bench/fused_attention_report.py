#!/usr/bin/env python3
"""Runs kvlab_bench_fused_attention once and prints, per context, the table for
docs/PERFORMANCE.md: per path (fp16, Huffman, 4-bit packed) the time of q.K and of softmax.V for
one decode step (32 query heads over one llama3-8b layer; CPU time, median of 3 runs), each with its speed relative to the
fp16 path in the same run, and whether the issue 3 target for that path is met (packed >= 1.0x
the fp16 speed, Huffman >= 0.5x).

usage: bench/fused_attention_report.py BUILD_DIR [extra benchmark args]"""
import json
import os
import subprocess
import sys

TARGETS = {"huffman": 0.5, "huffman-rel0.1": 0.5, "huffman-rel0.2": 0.5, "bitpack4": 1.0}


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
    exe = f"{build}/bench/kvlab_bench_fused_attention"
    # The median of three repetitions, so a burst of other work on a shared machine moves no row.
    args = [exe, "--benchmark_format=json", "--benchmark_min_time=0.3",
            "--benchmark_repetitions=3", "--benchmark_report_aggregates_only=true", *sys.argv[2:]]
    # Other people's work on a shared machine moves the times: the load average goes with them.
    load_before = os.getloadavg()[0]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    load_after = os.getloadavg()[0]
    print(f"load average (1 min): {load_before:.2f} before, {load_after:.2f} after")
    # times[context][path][op] = CPU microseconds per decode step; tps = tokens per second
    times = {}
    for r in json.loads(out)["benchmarks"]:
        if "label" not in r or r.get("error_occurred"):
            continue
        if r.get("run_type") == "aggregate" and r.get("aggregate_name") != "median":
            continue
        op = "logits" if "Logits" in r["name"] else "values"
        ctx = int(r["context"])
        cell = times.setdefault(ctx, {}).setdefault(r["label"], {})
        cell[op] = (r["cpu_time"], r["items_per_second"])
    for ctx in sorted(times):
        paths = times[ctx]
        base = paths.get("fp16", {})
        print(f"\n{ctx // 1024}K context ({ctx} tokens):\n")
        print("| path | q·K µs | q·K Mtok/s | q·K × fp16 speed | softmax·V µs | softmax·V Mtok/s "
              "| softmax·V × fp16 speed | target |")
        print("|---|---:|---:|---:|---:|---:|---:|---|")
        for path, ops in paths.items():
            cells = []
            met = []
            for op in ("logits", "values"):
                if op not in ops:
                    cells += ["n/a"] * 3
                    continue
                us, tps = ops[op]
                ratio = base[op][0] / us if op in base else float("nan")
                cells += [f"{us:.0f}", f"{tps / 1e6:.1f}", f"{ratio:.2f}×"]
                if path in TARGETS:
                    met.append(ratio >= TARGETS[path])
            if path in TARGETS:
                goal = f"≥ {TARGETS[path]:.1f}×: " + ("met" if all(met) else
                                                     "q·K " + ("met" if met[0] else "not met") +
                                                     ", softmax·V " + ("met" if met[1] else "not met"))
            else:
                goal = "baseline"
            print(f"| {path} | " + " | ".join(cells) + f" | {goal} |")


if __name__ == "__main__":
    main()
