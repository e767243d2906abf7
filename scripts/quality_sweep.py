#!/usr/bin/env python3
"""Runs one of bench/quality's sweeps sharded over this machine's cores and writes its rows as JSON
lines for docs/QUALITY.md's generated tables (issue 48, part 4).

A sweep (docs/GUIDES.md) is run as `kvlab sweep FILE --shard I/N --db WORK/part-I.sqlite`, one
process per part, each pinned to a core of its own (taskset). A part run again skips what its
database holds, so an interrupted run resumes where it stopped. The parts are merged with `kvlab
runs import --sweep`, and every run of the merged database is written to --out as JSON lines (the
run's metrics, its uid and its sweep item), which scripts/quality_doc.py draws as a table.

A sweep file may name the model and the text as placeholders, {model} and {text}: {model} becomes
--model (SmolLM2-135M-Instruct from the test data cache by default) and {text} the GPL text
(GPL-3 then GPL-2 from base-files), written into WORK with the resolved sweep file.

Defaults follow the sweep's name: bench/quality/NAME.json runs in ~/.cache/kvlab/sweeps/NAME and
writes bench/results/quality_NAME.jsonl.

Usage: quality_sweep.py --kvlab PATH [--sweep FILE] [--model M] [--work DIR] [--parts N]
                        [--out FILE.jsonl] [--only-merge]
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CACHE = pathlib.Path(os.environ.get("KVLAB_TEST_CACHE", pathlib.Path.home() / ".cache" / "kvlab"))
LICENCES = [pathlib.Path("/usr/share/common-licenses/GPL-3"),
            pathlib.Path("/usr/share/common-licenses/GPL-2")]


def resolved_sweep(template, work, model):
    spec = json.loads(pathlib.Path(template).read_text())
    text = work / "gpl.txt"
    if "{text}" in spec["texts"]:
        write_if_changed(text, b"".join(p.read_bytes() for p in LICENCES))
    spec["models"] = [str(model) if m == "{model}" else m for m in spec["models"]]
    spec["texts"] = [str(text) if t == "{text}" else t for t in spec["texts"]]
    path = work / "sweep.json"
    write_if_changed(path, (json.dumps(spec, indent=1) + "\n").encode())
    return path


def write_if_changed(path, data):
    """Parts still running read these files: leave them alone when they already say this."""
    if not path.exists() or path.read_bytes() != data:
        path.write_bytes(data)


def run(cmd, **kw):
    print("$ " + " ".join(str(c) for c in cmd), flush=True)
    return subprocess.run([str(c) for c in cmd], **kw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kvlab", required=True)
    ap.add_argument("--sweep", default=str(ROOT / "bench" / "quality" / "smollm2_gpl.json"))
    ap.add_argument("--model", default=str(CACHE / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--work", help="default: ~/.cache/kvlab/sweeps/NAME")
    ap.add_argument("--parts", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", help="default: bench/results/quality_NAME.jsonl")
    ap.add_argument("--only-merge", action="store_true", help="merge and export what the parts hold")
    a = ap.parse_args()
    name = pathlib.Path(a.sweep).stem
    work = pathlib.Path(a.work or CACHE / "sweeps" / name)
    a.out = a.out or str(ROOT / "bench" / "results" / f"quality_{name}.jsonl")
    work.mkdir(parents=True, exist_ok=True)
    if not pathlib.Path(a.model).is_file():
        sys.exit(f"quality_sweep.py: {a.model}: no such model (scripts/test_data.sh fetches SmolLM2)")
    sweep = resolved_sweep(a.sweep, work, a.model)
    parts = [work / f"part-{i}.sqlite" for i in range(1, a.parts + 1)]
    if not a.only_merge:
        # One core per part where taskset can pin it (the parts otherwise share every core).
        cores = os.cpu_count() or 1
        pin = (lambda i: ["taskset", "-c", str((i - 1) % cores)]) if shutil.which("taskset") \
            else (lambda i: [])
        procs = [subprocess.Popen(pin(i) + [a.kvlab, "sweep", str(sweep), "--shard",
                                            f"{i}/{a.parts}", "--db", str(db)])
                 for i, db in enumerate(parts, start=1)]
        print(f"{a.parts} parts running (logs on standard error)", flush=True)
        failed = [p.args for p in procs if p.wait() != 0]
        for f in failed:
            print("failed: " + " ".join(f), file=sys.stderr)
    merged = work / "merged.sqlite"
    present = [p for p in parts if p.exists()]
    r = run([a.kvlab, "runs", "import", "--db", merged, "--sweep", sweep, "--parts", a.parts]
            + present)
    complete = r.returncode == 0
    listing = run([a.kvlab, "runs", "list", "--db", merged, "--json"],
                  capture_output=True, text=True, check=True)
    rows = []
    for summary in json.loads(listing.stdout):
        shown = run([a.kvlab, "runs", "show", str(summary["id"]), "--db", merged, "--json"],
                    capture_output=True, text=True, check=True)
        full = json.loads(shown.stdout)
        row = dict(full["metrics"])
        row["uid"] = full.get("uid")
        row["params"] = full.get("params")
        rows.append(row)
    order = {item["uid"]: item["item"] for item in sweep_items(a.kvlab, sweep)}
    rows.sort(key=lambda r: order.get(r["uid"], len(order)))
    with open(a.out, "w") as f:
        for row in rows:
            f.write(json.dumps(row, sort_keys=True) + "\n")
    print(f"wrote {a.out}: {len(rows)} of {len(order)} rows" + ("" if complete else
          " (the sweep is not finished: run this again to resume)"))


def sweep_items(kvlab, sweep):
    out = subprocess.run([kvlab, "sweep", str(sweep), "--dry-run", "--json"], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)["items"]


if __name__ == "__main__":
    main()
