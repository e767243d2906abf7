#!/usr/bin/env python3
"""Runs kvlab_bench_model_runner once and prints the table for docs/PERFORMANCE.md: prefill and
decode tokens/s of the Llama runner on stories260K, and the share issue 6 asks for (target: at
least 50%): the runner's matrix products at the runner's achieved FLOP rate against Eigen GEMMs
of the same shapes in the same run.

The runner's FLOP rate is the FLOPs of all its matrix products (projections, MLP, attention's
scores and weighted values, classifier: forward_matmul_shapes()) over its whole forward time, so
everything else it does (RMSNorm, RoPE, softmax, SwiGLU, cache appends) counts against it. The
GEMM rate is the same FLOPs over the time Eigen takes for those products alone. The share is
their ratio, i.e. GEMM time / runner time. The "weight products only" row is the earlier
definition (projections and MLP over the whole prefill time, attention's products counted in the
time but not in the work), kept for comparison. With --results FILE it also writes today's
numbers of issue 6's targets there (bench/bench_results.py).

usage: bench/model_runner_report.py BUILD_DIR [--results FILE] [extra benchmark args]"""
import sys

import bench_results as br

UNIT = {"ms": 1e-3, "us": 1e-6, "ns": 1e-9, "s": 1.0}


def seconds(row):
    return row["cpu_time"] * UNIT[row["time_unit"]]


def targets(pre, dec, gemm_all, gemm_dec, command):
    """Issue 6's targets: tokens/s and the share (GEMM time / runner time), prefill and decode."""
    out = []
    for tid, label, row, gemm in (("prefill", "prefill, 256 tokens in one batch", pre, gemm_all),
                                  ("decode", "decode, 256 tokens one at a time", dec, gemm_dec)):
        share = seconds(gemm) / seconds(row)
        out.append(br.target(
            tid, 6, f"{tid} tokens/s, with the matrix products at ≥ 50% of an Eigen GEMM of "
            "the same shapes", br.met(share >= 0.5),
            [br.number(label, row["items_per_second"], "tokens/s", 0),
             br.number("share", share, "× Eigen GEMM")], command))
    return out


def main():
    args, extra = br.parse_args(__doc__)
    results = br.run_benchmark(args.build, "kvlab_bench_model_runner", "--benchmark_min_time=0.5",
                               "--benchmark_repetitions=5",
                               "--benchmark_report_aggregates_only=true", *extra)
    # Medians of 5 repetitions, CPU time (as Google Benchmark's items_per_second): the machine
    # may be shared.
    rows = {r["run_name"]: r for r in results
            if r.get("aggregate_name", "median") == "median"}
    if any(r.get("error_occurred") for r in rows.values()):
        sys.exit("model runner bench skipped: " + next(r["error_message"] for r in rows.values()
                                                       if r.get("error_occurred")))
    pre, dec = rows["BM_Prefill"], rows["BM_Decode"]
    gemm_all, gemm_w = rows["BM_PrefillGemms/0"], rows["BM_PrefillGemms/1"]
    gemm_dec = rows["BM_DecodeGemms"]

    def row(label, tokens_s, flops, runner_s, gemm_s, target):
        runner_gf, gemm_gf = flops / runner_s / 1e9, flops / gemm_s / 1e9
        share = gemm_s / runner_s
        verdict = f"≥ 0.50×: {'met' if share >= 0.5 else 'not met'}" if target else "(info)"
        tok = f"{tokens_s:,.0f}" if tokens_s else ""
        print(f"| {label} | {tok} | {runner_s * 1e3:.2f} | {gemm_s * 1e3:.2f} | {runner_gf:.2f} | "
              f"{gemm_gf:.2f} | {share:.2f}× | {verdict} |")

    print("| path | tokens/s | runner ms | Eigen GEMMs ms | runner GFLOP/s | GEMM GFLOP/s | "
          "share | target |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    row("prefill, 256 tokens in one batch", pre["items_per_second"], pre["matmul_flops"],
        seconds(pre), seconds(gemm_all), True)
    row("decode, 256 tokens one at a time", dec["items_per_second"], dec["matmul_flops"],
        seconds(dec), seconds(gemm_dec), True)
    row("prefill, weight products only (earlier definition)", None, pre["weight_matmul_flops"],
        seconds(pre), seconds(gemm_w), False)
    br.write_results(args, "model_runner",
                     targets(pre, dec, gemm_all, gemm_dec, br.command_line()))


if __name__ == "__main__":
    main()
