#!/usr/bin/env python3
"""Runs kvlab_bench_quantizers once and prints the throughput table for docs/PERFORMANCE.md:
GB/s of fp16 input per method and direction, the ratio to the 1 GB/s target, and the ratio to
the fp16->float conversion floor measured in the same run; then KVQuant's offline calibration
time apart (its online quantization is a row of the table).

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
    calibration = []
    for r in results:
        if "label" not in r:
            continue
        if r["name"].startswith("BM_KvQuantCalibrate"):  # offline: a time, not a rate
            calibration.append((r["label"], r["cpu_time"]))
            continue
        direction = "dequantize" if r["name"].startswith("BM_Dequantize") else "quantize"
        rows.setdefault(r["label"], {})[direction] = r["bytes_per_second"] / 1e9
    print(f"fp16 -> float conversion floor: {floor_gbs:.2f} GB/s\n")
    print("| method / tensor | quantize GB/s | x target | dequantize GB/s | x target | quantize / floor |")
    print("|---|---:|---:|---:|---:|---:|")
    worst = float("inf")
    below = []
    for label, d in rows.items():
        q, dq = d.get("quantize"), d.get("dequantize")
        for v in (q, dq):
            if v is not None:
                worst = min(worst, v)
        if q is not None and q < 1.0:
            below.append(label)
        cell = lambda v: f"{v:.2f} | {v:.2f}x" if v is not None else " | "
        ratio = f"{q / floor_gbs:.2f}" if q is not None else ""
        print(f"| {label} | {cell(q)} | {cell(dq)} | {ratio} |")
    print(f"\nslowest: {worst:.2f} GB/s ({'meets' if worst >= 1.0 else 'misses'} the 1 GB/s target)")
    if below:
        print("quantize below 1 GB/s: " + ", ".join(below))
    if calibration:
        print("\n| offline calibration | ms |\n|---|---:|")
        for label, ms in calibration:
            print(f"| {label} | {ms:.1f} |")


if __name__ == "__main__":
    main()
