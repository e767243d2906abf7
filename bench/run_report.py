#!/usr/bin/env python3
"""Times whole compression runs with `kvlab bench run --json` (or reads such a run, or the
runs.jsonl of bench/gpu_session.sh) and prints the table for docs/PERFORMANCE.md: per context,
method and backend the run's wall time, the memory floor measured in the same program, the run
as a multiple of it, and the peak resident memory. With --results FILE it also writes today's
numbers there (bench/bench_results.py): issue 24's targets into run_<device>.json (32 layers at
32K in <= 10 s and <= 5x the floor on 2 cores, 128K within 24 GiB), issue 44's into
gpu_run_<device>.json (32K in <= 1 s and 128K in <= 4 s on the GPU for six methods, and cuda no
slower than cpu at every context from 1K).

usage: bench/run_report.py BUILD_DIR [--results FILE] [kvlab bench run options]
       bench/run_report.py --from-json FILE [--command TEXT] [--results FILE]"""
import argparse
import json
import subprocess

import bench_results as br

GiB = 2**30
NAMES = {"int8": "int8", "kivi-2": "KIVI-2", "kvcomp-huffman": "KVComp + Huffman",
         "fp8-e4m3": "FP8 E4M3", "q4_0": "q4_0", "nvfp4": "NVFP4"}
GPU_METHODS = ["int8", "kivi-2", "fp8-e4m3", "q4_0", "nvfp4", "kvcomp-huffman"]


def method_id(label):
    """`kvlab bench run`'s method id for a run's method_label ("kivi-2 G=32 R=128": kivi-2)."""
    if label.startswith("kvcomp") and "huffman" in label:
        return "kvcomp-huffman"
    if label.startswith("turboquant"):  # "turboquant-3 qjl hadamard": its variants apart
        return label.replace(" ", "-")
    return label.split()[0] if label else label


def rows_of(text):
    """Runs as dicts of context, method, backend, run_s, floor_s (or None), peak_bytes, in_memory,
    from `kvlab bench run --json` output or from gpu_session.sh's runs.jsonl."""
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and "runs" in whole:
        return [dict(r) for r in whole["runs"]]
    rows = []
    for line in text.splitlines():
        r = json.loads(line) if line.strip() else {"failed": ""}
        if "failed" in r:  # a run gpu_session.sh could not make
            continue
        rows.append({"context": r["ctx"], "method": method_id(r["method"]), "backend": r["backend"],
                     "run_s": r["compress_s"], "floor_s": None, "peak_bytes": r.get("host_peak"),
                     "in_memory": True})
    return rows


def name(method):
    return NAMES.get(method, method)


def per_method(rows, key, digits, unit):
    by = {}
    for r in rows:
        by.setdefault(r["method"], []).append(r[key])
    return [br.number(name(m), v, unit, digits) for m, v in by.items()]


def cpu_targets(rows, command):
    """Issue 24's targets from the runs on the CPU."""
    out = []
    at32 = [r for r in rows if r["backend"] == "cpu" and r["context"] == 32768]
    if at32:
        out.append(br.target(
            "32k-10s", 24, "32 layers at 32K in ≤ 10 s wall on 2 cores, for int8, KIVI-2 and "
            "KVComp + Huffman", br.met(max(r["run_s"] for r in at32) <= 10),
            per_method(at32, "run_s", 2, "s"), command))
        floors = [r for r in at32 if r.get("floor_s")]
        if floors:
            out.append(br.target(
                "32k-5x-floor", 24, "the same runs in ≤ 5× the memory floor (the source read "
                "once, the output written once)",
                br.met(max(r["run_s"] / r["floor_s"] for r in floors) <= 5),
                per_method([{**r, "x_floor": r["run_s"] / r["floor_s"]} for r in floors],
                           "x_floor", 1, "× floor") +
                [br.number("floors", [r["floor_s"] for r in floors], "s")], command))
    at128 = [r for r in rows if r["backend"] == "cpu" and r["context"] == 131072
             and not r.get("in_memory") and r.get("peak_bytes")]
    if at128:
        peak = [r["peak_bytes"] / GiB for r in at128]
        out.append(br.target(
            "128k-24gib", 24, "128K (16 GiB of fp16 from a file on disk) within 24 GiB of memory",
            br.met(max(peak) <= 24), [br.number("peak resident", peak, "GiB"),
                                      br.number("run", [r["run_s"] for r in at128], "s", 1)],
            command))
    return out


def gpu_targets(rows, command):
    """Issue 44's targets from the runs with --backend cuda beside --backend cpu."""
    out = []
    for tid, ctx, limit in (("32k-1s", 32768, 1.0), ("128k-4s", 131072, 4.0)):
        runs = [r for r in rows
                if r["backend"] == "cuda" and r["context"] == ctx and r["method"] in GPU_METHODS]
        if not runs:
            continue
        methods = {r["method"] for r in runs}
        every = set(GPU_METHODS) <= methods
        label = f"{ctx // 1024}K"
        out.append(br.target(
            tid, 44, f"llama3-8b, 32 layers, every metric, source in memory: {label} in ≤ "
            f"{limit:g} s on the GPU for int8, KIVI-2, FP8, q4_0, NVFP4 and KVComp + Huffman",
            br.met(every and max(r["run_s"] for r in runs) <= limit),
            [br.number("methods measured", len(methods), f"of {len(GPU_METHODS)}", 0)] *
            (not every) + per_method(runs, "run_s", 2, "s"), command))
    times = {(r["method"], r["context"], r["backend"]): r["run_s"] for r in rows}
    pairs = [(m, c, times[(m, c, "cpu")] / t) for (m, c, b), t in times.items()
             if b == "cuda" and c >= 1024 and (m, c, "cpu") in times]
    if pairs:
        slowest = min(pairs, key=lambda p: p[2])
        methods = {m for m, _, _ in pairs} & set(GPU_METHODS)
        every = set(GPU_METHODS) <= methods
        out.append(br.target(
            "cuda-vs-cpu", 44, "every method at every context ≥ 1K: `--backend cuda` no slower "
            "than `--backend cpu` on the same machine", br.met(every and slowest[2] >= 1.0),
            [br.number("methods measured", len(methods), f"of {len(GPU_METHODS)}", 0)] *
            (not every) +
            [br.number(f"cpu time over cuda time, {len(pairs)} method × context pairs",
                       [p[2] for p in pairs], "×"),
             br.number(f"least, {name(slowest[0])} at {slowest[1] // 1024}K", slowest[2], "×")],
            command))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("build", nargs="?", default="build/release")
    ap.add_argument("--from-json", metavar="FILE",
                    help="read this output of `kvlab bench run --json` (or gpu_session.sh's "
                         "runs.jsonl) instead of running")
    ap.add_argument("--measured-here", action="store_true",
                    help="with --from-json: the rows were measured on this machine (as "
                         "bench/gpu_session.sh runs it on the GPU machine), so the results file "
                         "records this machine; otherwise it keeps the file's")
    ap.add_argument("--command", help="the command to record as the one that measured it")
    br.add_option(ap)
    args, extra = ap.parse_known_args()
    if args.from_json:
        with open(args.from_json) as f:
            text = f.read()
    else:
        text = subprocess.run([f"{args.build}/app/cli/kvlab", "bench", "run", "--json", *extra],
                              check=True, capture_output=True, text=True).stdout
    rows = rows_of(text)
    print("| context | method | backend | run s | floor s | × floor | peak resident |\n"
          "|---:|---|---|---:|---:|---:|---:|")
    for r in rows:
        floor = r.get("floor_s")
        floor_cells = f"{floor:.3f} | {r['run_s'] / floor:.0f}×" if floor else "— | —"
        peak = f"{r['peak_bytes'] / GiB:.2f} GiB" if r.get("peak_bytes") else "—"
        ctx = f"{r['context'] // 1024}K" if r["context"] >= 1024 else str(r["context"])
        print(f"| {ctx} | {name(r['method'])} | {r['backend']} | "
              f"{r['run_s']:.2f} | {floor_cells} | {peak} |")
    if args.results:
        bench, _ = br.split_name(args.results)
        command = args.command or br.command_line(drop=("--results", "--command"))
        found = gpu_targets(rows, command) if bench == "gpu_run" else cpu_targets(rows, command)
        # The machine is this one only when it ran here: rows read --from-json were measured
        # where they were written, unless --measured-here says that is this machine (whose
        # build, if any, is not the one named here).
        if args.from_json:
            args.build = None
        br.write_results(args, ("run", "gpu_run"), found, gpu=bench == "gpu_run",
                         here=not args.from_json or args.measured_here)


if __name__ == "__main__":
    main()
