#!/usr/bin/env python3
"""Runs kvlab_bench_eviction once and prints the table for docs/PERFORMANCE.md: every policy's
simulation over the synthetic llama3-8b preset (32 layers, 4K prompt, 256 decode steps) with its
wall time against the one-minute target, and its matrix-product GFLOP/s beside Eigen GEMMs of the
same shape on the same cores in the same run (issue 4's target for H2O: at least 50% of the GEMM).
With --results FILE it also writes today's numbers of issue 4's and issue 23's targets there
(bench/bench_results.py).

usage: bench/eviction_report.py BUILD_DIR [--results FILE] [extra benchmark args]"""
import sys

import bench_results as br


def targets(rows, gemm, command):
    """rows: {policy: {"seconds", "gflops"}}; gemm: the Eigen GEMM's GFLOP/s in the same run."""
    out = []
    if "h2o" in rows:
        h2o = rows["h2o"]
        out.append(br.target(
            "h2o-minute", 4, "H2O on llama3-8b (32 layers, 4K prompt + 256 steps) in under a "
            "minute on 2 cores", br.met(h2o["seconds"] < 60),
            [br.number("H2O at a 20% budget", h2o["seconds"], "s", 1)], command))
        out.append(br.target(
            "h2o-gemm", 4, "H2O's matrix products at ≥ 50% of an Eigen GEMM of the same shape",
            br.met(h2o["gflops"] / gemm >= 0.5),
            [br.number(f"H2O ({h2o['gflops']:.1f} against {gemm:.1f} GFLOP/s)",
                       h2o["gflops"] / gemm, "× Eigen GEMM")], command))
    if len(rows) > 1:
        slowest = max(rows, key=lambda p: rows[p]["seconds"])
        out.append(br.target(
            "every-policy", 23, "any policy over llama3-8b (32 layers, 4K prompt + 256 steps) "
            "interactive on 2 cores: under a minute", br.met(rows[slowest]["seconds"] < 60),
            [br.number(f"{len(rows)} policies", [r["seconds"] for r in rows.values()], "s", 1),
             br.number(f"slowest, {slowest}", rows[slowest]["seconds"], "s", 1)], command))
    return out


def main():
    args, extra = br.parse_args(__doc__)
    results = br.run_benchmark(args.build, "kvlab_bench_eviction", *extra)
    rows = [r for r in results if r["name"].startswith("BM_Eviction/")]
    gemm = next(r for r in results if r["name"].startswith("BM_EigenGemm"))
    print(f"threads: {int(gemm['threads'])}\n")
    print("| policy (20% budget), llama3-8b, 32 layers, 4K prompt + 256 steps | seconds | "
          "< 60 s | GFLOP/s | × Eigen GEMM |")
    print("|---|---:|---|---:|---:|")
    policies = {}
    for r in rows:
        if r.get("error_occurred"):
            sys.exit(f"{r['name']} failed: {r.get('error_message')}")
        name = r["name"].split("/")[1]
        policies[name] = {"seconds": r["seconds"], "gflops": r["gflops"]}
        print(f"| {name} | {r['seconds']:.1f} | {'met' if r['seconds'] < 60 else 'not met'} | "
              f"{r['gflops']:.1f} | {r['gflops'] / gemm['gflops']:.2f}× |")
    print(f"| Eigen GEMM 1024×128 · 128×4352, one per core |  |  | {gemm['gflops']:.1f} | 1.00× |")
    br.write_results(args, "eviction", targets(policies, gemm["gflops"], br.command_line()))


if __name__ == "__main__":
    main()
