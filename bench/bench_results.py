"""The results files of bench/results/ that scripts/perf_doc.py turns into docs/PERFORMANCE.md.

One file per benchmark and device, `bench/results/<bench>_<device>.json` (bench in snake_case,
device a short slug such as `xeon-2c` or `h100`), holding today's number of every target that
benchmark measures on that device, not a log (git keeps the history):

  {"schema": "kvlab-results/1", "bench": "quantizers", "device": "xeon-2c",
   "machine": {"name": ..., "cpu": ..., "gpu": ..., "cores": 2, "memory": ..., "os": ...,
               "compiler": ..., "flags": ...},
   "targets": [{"id": "issue2", "issue": 2, "target": "every method >= 1 GB/s ...",
                "status": "met" | "not met" | "reported" | "not measured yet",
                "measured": [{"what": "slowest", "value": 1.6 or [lo, hi], "unit": "GB/s",
                              "digits": 2}],
                "date": "2026-11-26", "command": "python3 bench/...", "note": "optional prose"}],
   "raw": ["bench/results/other_file.json"]}   (optional: raw outputs kept beside it)

The report scripts in bench/ build their targets with `number` and `target` and write them with
`update`, which keeps what a run cannot know (the notes, the machine's name, targets the run did
not measure) from the file already there.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import re
import shlex
import shutil
import subprocess
import sys

SCHEMA = "kvlab-results/1"
STATUSES = ("met", "not met", "reported", "not measured yet")
MACHINE_KEYS = ("name", "cpu", "gpu", "cores", "memory", "os", "compiler", "flags")


def number(what, value, unit, digits=2):
    """One measured number (or [low, high] of several) with its unit and how many decimals to
    print; kept to three decimals more than that, so a file changes only where a number does."""
    keep = lambda v: round(v, digits + 3) if isinstance(v, float) else v
    if isinstance(value, (list, tuple)):
        lo, hi = min(value), max(value)
        value = [keep(lo), keep(hi)] if round(lo, digits) != round(hi, digits) else keep(lo)
    else:
        value = keep(value)
    return {"what": what, "value": value, "unit": unit, "digits": digits}


def span(values, digits):
    """`low–high` of several numbers, or the one number when they print the same."""
    lo, hi = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return lo if lo == hi else f"{lo}–{hi}"


def target(id, issue, text, status, measured, command, date=None, note=None):
    """One target's row; the date is today's unless given, and none for 'not measured yet'."""
    if status not in STATUSES:
        raise ValueError(f"target {id}: status '{status}' is not one of {', '.join(STATUSES)}")
    if status != "not measured yet":
        date = date or datetime.date.today().isoformat()
    t = {"id": id, "issue": issue, "target": text, "status": status, "measured": measured,
         "date": date, "command": command}
    if note:
        t["note"] = note
    return t


def met(ok):
    return "met" if ok else "not met"


def split_name(path):
    """(bench, device) from bench/results/<bench>_<device>.json; the device has no underscore."""
    stem = pathlib.Path(path).name.removesuffix(".json")
    bench, sep, device = stem.rpartition("_")
    if not sep or not bench or not device:
        raise ValueError(f"{path}: a results file is named <bench>_<device>.json")
    return bench, device


def command_line(argv=None, drop=("--results",)):
    """The command that ran this script, as one shell line, without the options in `drop`."""
    argv = list(sys.argv if argv is None else argv)
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in drop:
            skip = True
            continue
        if any(a.startswith(d + "=") for d in drop):
            continue
        out.append(a)
    if out and out[0].endswith(".py"):
        out = ["python3", os.path.relpath(out[0]) if os.path.isabs(out[0]) else out[0], *out[1:]]
    home = os.path.expanduser("~") + "/"
    return " ".join("~/" + shlex.quote(a[len(home):]) if a.startswith(home) else shlex.quote(a)
                    for a in out)


def _read(path, key, sep=":"):
    """The value of the first line of a `key SEP value` file that starts with `key`."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key) and sep in line:
                    return line.split(sep, 1)[1].strip()
    except OSError:
        pass
    return None


def _cmake_value(cache, name):
    try:
        for line in pathlib.Path(cache).read_text().splitlines():
            if line.startswith(name + ":"):
                return line.split("=", 1)[1]
    except OSError:
        pass
    return None


def machine_here(build=None, gpu=False):
    """What this machine and build can say about themselves; the rest stays as the file has it."""
    m = {"cpu": _read("/proc/cpuinfo", "model name") or platform.processor() or None,
         "cores": os.cpu_count()}
    if gpu and shutil.which("nvidia-smi"):
        names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                               capture_output=True, text=True).stdout.split("\n")
        m["gpu"] = names[0].strip() or None
    mem = _read("/proc/meminfo", "MemTotal")
    if mem:
        m["memory"] = f"{int(mem.split()[0]) / 2**20:.0f} GiB"
    pretty = _read("/etc/os-release", "PRETTY_NAME", "=")
    if pretty:
        m["os"] = pretty.strip('"')
    if build:
        compiler = sorted(pathlib.Path(build).glob("CMakeFiles/*/CMakeCXXCompiler.cmake"))
        if compiler:
            text = compiler[-1].read_text()
            cid = re.search(r'set\(CMAKE_CXX_COMPILER_ID "([^"]*)"\)', text)
            ver = re.search(r'set\(CMAKE_CXX_COMPILER_VERSION "([^"]*)"\)', text)
            if cid and ver:
                m["compiler"] = f"{cid.group(1).replace('GNU', 'GCC')} {ver.group(1)}"
        cache = pathlib.Path(build) / "CMakeCache.txt"
        build_type = _cmake_value(cache, "CMAKE_BUILD_TYPE")
        if build_type:
            flags = _cmake_value(cache, f"CMAKE_CXX_FLAGS_{build_type.upper()}") or ""
            if _cmake_value(cache, "KVLAB_NATIVE") in ("ON", "TRUE", "1"):
                flags += " -march=native"
            m["flags"] = flags.strip()
    return {k: v for k, v in m.items() if v is not None}


def load(path):
    with open(path) as f:
        return json.load(f)


def update(path, benches, targets, machine, raw=None):
    """Writes `targets` into the results file at `path`, creating it or replacing the targets of
    the same id; the file's other targets, each target's note and the machine's name stay.
    `benches`: the bench names the caller measures (the file's name must start with one)."""
    bench, device = split_name(path)
    benches = (benches,) if isinstance(benches, str) else tuple(benches)
    if bench not in benches:
        raise ValueError(f"{path}: this script writes {' or '.join(benches)}_<device>.json")
    if not targets:
        print(f"{path}: this run measured none of its targets; nothing written", file=sys.stderr)
        return None
    old = load(path) if os.path.exists(path) else {}
    if old and (old.get("bench"), old.get("device")) != (bench, device):
        raise ValueError(f"{path}: holds {old.get('bench')}_{old.get('device')}, not its name")
    old_machine = old.get("machine", {})
    was, now = old_machine.get("cpu"), machine.get("cpu")
    if was and now and was.startswith(now):  # the same CPU, described by hand at more length
        machine = {**machine, "cpu": was}
    elif was and now and not now.startswith(was):
        print(f"{path}: measured on '{was}', this is '{now}': "
              "name the file after this device if it is another", file=sys.stderr)
        old_machine = {}
    merged = {**old_machine, **machine}
    merged.setdefault("name", f"{merged.get('gpu') or merged.get('cpu') or device}")
    merged_machine = {k: merged[k] for k in MACHINE_KEYS if k in merged}
    by_id = {t["id"]: t for t in old.get("targets", [])}  # in the file's order; new ones last
    for t in targets:
        if "note" not in t and "note" in by_id.get(t["id"], {}):
            t = {**t, "note": by_id[t["id"]]["note"]}
            print(f"{path}: kept the note of target '{t['id']}': check it still holds",
                  file=sys.stderr)
        by_id[t["id"]] = t
    data = {"schema": SCHEMA, "bench": bench, "device": device, "machine": merged_machine,
            "targets": list(by_id.values())}
    if raw or old.get("raw"):
        data["raw"] = sorted(set(old.get("raw", [])) | set(raw or []))
    write(path, data)
    return data


def write(path, data):
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def add_option(parser):
    parser.add_argument("--results", metavar="FILE",
                        help="also write today's numbers into this results file "
                             "(bench/results/<bench>_<device>.json; then scripts/perf_doc.py "
                             "--out docs/PERFORMANCE.md)")


def parse_args(doc):
    """(args, extra) of a report script: BUILD_DIR [--results FILE] [extra benchmark args]."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0], allow_abbrev=False)
    ap.add_argument("build", nargs="?", default="build/release")
    add_option(ap)
    return ap.parse_known_args()


def run_benchmark(build, program, *args):
    """The rows of one run of a Google Benchmark program of BUILD/bench, as JSON."""
    out = subprocess.run([f"{build}/bench/{program}", "--benchmark_format=json", *args],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["benchmarks"]


def write_results(args, benches, targets, gpu=False, here=True):
    """With --results, `update` that file with this run's targets and this machine (here=False:
    measured elsewhere, e.g. on a lent GPU machine, so the file's machine stays as it is)."""
    machine = machine_here(args.build, gpu) if here else {}
    if args.results and update(args.results, benches, targets, machine) is not None:
        print(f"\nwrote {args.results}")
