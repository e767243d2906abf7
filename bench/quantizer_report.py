#!/usr/bin/env python3
"""Runs kvlab_bench_quantizers once and prints the throughput table for docs/PERFORMANCE.md:
GB/s of fp16 input per method and direction, the ratio to the 1 GB/s target, and the ratio to
the fp16->float conversion floor measured in the same run; then KVQuant's offline calibration
time apart (its online quantization is a row of the table). With --results FILE it also writes
today's numbers of issue 2's and issue 22's targets there (bench/bench_results.py).

usage: bench/quantizer_report.py BUILD_DIR [--results FILE] [extra benchmark args]"""
import bench_results as br

# Issue 2's methods: quantize and dequantize both count. Every other row is issue 22's, whose
# target is the online quantize (llama.cpp's types dequantize through the inverse rotation, and
# `kvquant` itself calibrates inside every call: its online step is the `kvquant-B online` rows).
ISSUE2 = {"int8", "int4", "kivi", "fp8-e4m3", "fp8-e5m2", "tiered", "kvcomp"}
OFFLINE = {"kvquant"}


def parse(results):
    """(floor GB/s, {label: {"quantize": GB/s, "dequantize": GB/s}}, [(label, calibration ms)])"""
    floor = next(r for r in results if r["name"].startswith("BM_Fp16ToFloat"))
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
    return floor["bytes_per_second"] / 1e9, rows, calibration


def targets(floor_gbs, rows, command):
    """Issue 2's and issue 22's targets from one run's rows."""
    def method(label):
        return label.rsplit("/", 1)[0]

    out = []
    floor = br.number("fp16 → float floor", floor_gbs, "GB/s")
    issue2 = [(v, f"{label} {d}") for label, ds in rows.items() if method(label) in ISSUE2
              for d, v in ds.items()]
    if issue2:
        slowest, where = min(issue2)
        out.append(br.target(
            "issue2", 2, "every issue 2 method ≥ 1 GB/s of fp16 input per core, quantize and "
            "dequantize", br.met(slowest >= 1.0),
            [br.number(f"slowest, {where}", slowest, "GB/s"), floor], command))
    issue22 = [(ds["quantize"], label) for label, ds in rows.items()
               if method(label) not in ISSUE2 | OFFLINE and "quantize" in ds]
    if issue22:
        slowest, where = min(issue22)
        below = sum(1 for v, _ in issue22 if v < 1.0)
        out.append(br.target(
            "issue22", 22, "every issue 22 method ≥ 1 GB/s of fp16 input per core, online "
            "quantize (calibration apart)", br.met(slowest >= 1.0),
            [br.number(f"slowest, {where} quantize", slowest, "GB/s"),
             br.number("rows under 1 GB/s", below, f"of {len(issue22)}", 0), floor], command))
    return out


def main():
    args, extra = br.parse_args(__doc__)
    floor_gbs, rows, calibration = parse(br.run_benchmark(
        args.build, "kvlab_bench_quantizers", "--benchmark_min_time=0.2", *extra))
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
    br.write_results(args, "quantizers", targets(floor_gbs, rows, br.command_line()))


if __name__ == "__main__":
    main()
