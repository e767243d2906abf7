#!/usr/bin/env python3
"""Runs kvlab_bench_eviction once and prints the table for docs/PERFORMANCE.md: every policy's
simulation over the synthetic llama3-8b preset (32 layers, 4K prompt, 256 decode steps) with its
wall time against the one-minute target, and its matrix-product GFLOP/s beside Eigen GEMMs of the
same shape on the same cores in the same run (issue 4's target for H2O: at least 50% of the GEMM).

usage: bench/eviction_report.py BUILD_DIR [extra benchmark args]"""
import json
import subprocess
import sys


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
    exe = f"{build}/bench/kvlab_bench_eviction"
    out = subprocess.run([exe, "--benchmark_format=json", *sys.argv[2:]], check=True,
                         capture_output=True, text=True).stdout
    rows = [r for r in json.loads(out)["benchmarks"] if r["name"].startswith("BM_Eviction/")]
    gemm = next(r for r in json.loads(out)["benchmarks"] if r["name"].startswith("BM_EigenGemm"))
    print(f"threads: {int(gemm['threads'])}\n")
    print("| policy (20% budget), llama3-8b, 32 layers, 4K prompt + 256 steps | seconds | "
          "< 60 s | GFLOP/s | × Eigen GEMM |")
    print("|---|---:|---|---:|---:|")
    for r in rows:
        if r.get("error_occurred"):
            sys.exit(f"{r['name']} failed: {r.get('error_message')}")
        name = r["name"].split("/")[1]
        print(f"| {name} | {r['seconds']:.1f} | {'met' if r['seconds'] < 60 else 'not met'} | "
              f"{r['gflops']:.1f} | {r['gflops'] / gemm['gflops']:.2f}× |")
    print(f"| Eigen GEMM 1024×128 · 128×4352, one per core |  |  | {gemm['gflops']:.1f} | 1.00× |")


if __name__ == "__main__":
    main()
