#!/usr/bin/env python3
"""Runs kvlab_bench_model_runner once and prints the table for docs/PERFORMANCE.md: prefill and
decode tokens/s of the Llama runner on stories260K, and the prefill's matrix-product GFLOP/s
(the products' work over the whole prefill time, attention included) as a share of Eigen GEMMs
of the same shapes in the same run (issue 6 target: at least 50%).

usage: bench/model_runner_report.py BUILD_DIR [extra benchmark args]"""
import json
import subprocess
import sys


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
    out = subprocess.run([f"{build}/bench/kvlab_bench_model_runner", "--benchmark_format=json",
                          "--benchmark_min_time=0.5", *sys.argv[2:]],
                         check=True, capture_output=True, text=True).stdout
    rows = {r["name"]: r for r in json.loads(out)["benchmarks"]}
    if any(r.get("error_occurred") for r in rows.values()):
        sys.exit("model runner bench skipped: " + next(r["error_message"] for r in rows.values()
                                                       if r.get("error_occurred")))
    pre, dec, gemm = rows["BM_Prefill"], rows["BM_Decode"], rows["BM_PrefillGemms"]
    unit = {"ms": 1e-3, "us": 1e-6, "ns": 1e-9, "s": 1.0}
    pre_s = pre["real_time"] * unit[pre["time_unit"]]
    gemm_s = gemm["real_time"] * unit[gemm["time_unit"]]
    runner_gflops = pre["matmul_flops"] / pre_s / 1e9
    gemm_gflops = gemm["matmul_flops"] / gemm_s / 1e9
    ratio = runner_gflops / gemm_gflops
    print("| path | tokens/s | matmul GFLOP/s | × Eigen GEMMs | target |")
    print("|---|---:|---:|---:|---|")
    print(f"| prefill, 256 tokens in one batch | {pre['items_per_second']:.0f} | "
          f"{runner_gflops:.2f} | {ratio:.2f}× | ≥ 0.50×: {'met' if ratio >= 0.5 else 'not met'} |")
    print(f"| decode, one token at a time (256) | {dec['items_per_second']:.0f} |  |  |  |")
    print(f"| Eigen GEMMs of the prefill's shapes |  | {gemm_gflops:.2f} | 1.00× | baseline |")


if __name__ == "__main__":
    main()
