#!/usr/bin/env python3
"""Runs kvlab_bench_planner once and prints the table for docs/PERFORMANCE.md: a sweep of one
million scenarios with the latency model (issue 21's target: at least 1M scenarios/s on one core)
beside one quick_plan() call per scenario, the path a sweep avoids. Pin it to one core, as the
target speaks of one: `taskset -c 1 python3 bench/planner_report.py build/release`. With
--results FILE it also writes today's number of the target there (bench/bench_results.py).

usage: bench/planner_report.py BUILD_DIR [--results FILE] [extra benchmark args]"""
import os

import bench_results as br

UNIT = {"ms": 1e-3, "us": 1e-6, "ns": 1e-9, "s": 1.0}


def targets(sweep, command):
    """sweep: the BM_SweepMillion row (CPU time per iteration, items_per_second)."""
    ms = sweep["cpu_time"] * UNIT[sweep["time_unit"]] * 1e3
    rate = sweep["items_per_second"] / 1e6
    return [br.target(
        "sweep", 21, "≥ 1M scenarios/s on one core with the latency model", br.met(rate >= 1.0),
        [br.number(f"sweep of {sweep['scenarios']:,.0f} scenarios ({ms:.1f} ms)", rate,
                   "M scenarios/s", 1)], command)]


def main():
    args, extra = br.parse_args(__doc__)
    rows = {r["name"].split("/")[0]: r
            for r in br.run_benchmark(args.build, "kvlab_bench_planner", *extra)}
    cpus = sorted(os.sched_getaffinity(0))
    print(f"CPUs this ran on: {','.join(map(str, cpus))}\n")
    print("| benchmark | CPU time per million scenarios | scenarios/s | target |")
    print("|---|---:|---:|---|")
    for name, label in (("BM_SweepMillion", "`sweep`, 1,000,000 scenarios"),
                        ("BM_QuickPlanMillion", "one `quick_plan()` per scenario")):
        if name not in rows:
            continue
        r = rows[name]
        per_million = r["cpu_time"] * UNIT[r["time_unit"]] * 1e3 * 1e6 / r["scenarios"]
        rate = r["items_per_second"] / 1e6
        goal = (f"≥ 1 M/s: {'met' if rate >= 1 else 'not met'} ({rate:.1f}×)"
                if name == "BM_SweepMillion" else "(for comparison)")
        print(f"| {label} | {per_million:,.1f} ms | {rate:.2f} M/s | {goal} |")
    if "BM_SweepMillion" in rows:
        command = br.command_line()
        if len(cpus) == 1:
            command = f"taskset -c {cpus[0]} {command}"
        br.write_results(args, "planner", targets(rows["BM_SweepMillion"], command))


if __name__ == "__main__":
    main()
