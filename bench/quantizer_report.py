#!/usr/bin/env python3
"""Runs kvlab_bench_quantizers once and prints the throughput table for docs/PERFORMANCE.md:
GB/s of fp16 input per method and direction, the ratio to the 1 GB/s target, and the ratio to
the fp16->float conversion floor measured in the same run.

usage: bench/quantizer_report.py BUILD_DIR [extra benchmark args]"""
import json
import subprocess
import sys


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
    exe = f"{build}/bench/kvlab_bench_quantizers"
    out = subprocess.run([exe, "--benchmark_format=json", "--benchmark_min_time=0.2", *sys.argv[2:]],
                         check=True, capture_output=True, text=True).stdout
    results = json.loads(out)["benchmarks"]
    floor = next(r for r in results if r["name"].startswith("BM_Fp16ToFloat"))
    floor_gbs = floor["bytes_per_second"] / 1e9
    rows = {}
    for r in results:
        if "label" not in r:
            continue
        direction = "quantize" if r["name"].startswith("BM_Quantize") else "dequantize"
        rows.setdefault(r["label"], {})[direction] = r["bytes_per_second"] / 1e9
    print(f"fp16 -> float conversion floor: {floor_gbs:.2f} GB/s\n")
    print("| method / tensor | quantize GB/s | x target | dequantize GB/s | x target | quantize / floor |")
    print("|---|---:|---:|---:|---:|---:|")
    worst = float("inf")
    for label, d in rows.items():
        q, dq = d.get("quantize", 0), d.get("dequantize", 0)
        worst = min(worst, q, dq)
        print(f"| {label} | {q:.2f} | {q:.2f}x | {dq:.2f} | {dq:.2f}x | {q / floor_gbs:.2f} |")
    print(f"\nslowest: {worst:.2f} GB/s ({'meets' if worst >= 1.0 else 'misses'} the 1 GB/s target)")


if __name__ == "__main__":
    main()
