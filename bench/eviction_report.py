#!/usr/bin/env python3
"""Runs kvlab_bench_eviction once and prints the table for docs/PERFORMANCE.md: the H2O
simulation over the synthetic llama3-8b preset (32 layers, 4K prompt, 256 decode steps) with its
wall time against the one-minute target, and its matrix-product GFLOP/s beside Eigen GEMMs of the
same shape on the same cores in the same run (target: at least 50% of the GEMM).

usage: bench/eviction_report.py BUILD_DIR [extra benchmark args]"""
import json
import subprocess
import sys


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
    exe = f"{build}/bench/kvlab_bench_eviction"
    out = subprocess.run([exe, "--benchmark_format=json", *sys.argv[2:]], check=True,
                         capture_output=True, text=True).stdout
    rows = {r["name"].split("/")[0]: r for r in json.loads(out)["benchmarks"]}
    sim, gemm = rows["BM_EvictionH2O"], rows["BM_EigenGemm"]
    if sim.get("error_occurred"):
        sys.exit(f"eviction bench failed: {sim.get('error_message')}")
    ratio = sim["gflops"] / gemm["gflops"]
    print(f"threads: {int(sim['threads'])}\n")
    print("| run | seconds | target | GFLOP/s | × Eigen GEMM | target |")
    print("|---|---:|---|---:|---:|---|")
    print(f"| H2O, llama3-8b, 32 layers, 4K prompt + 256 steps | {sim['seconds']:.1f} | < 60 s: "
          f"{'met' if sim['seconds'] < 60 else 'not met'} | {sim['gflops']:.1f} | {ratio:.2f}× | "
          f"≥ 0.50×: {'met' if ratio >= 0.5 else 'not met'} |")
    print(f"| Eigen GEMM 1024×128 · 128×4352, one per core |  |  | {gemm['gflops']:.1f} | 1.00× | "
          "baseline |")


if __name__ == "__main__":
    main()
