#!/usr/bin/env python3
"""The quality loop's two ways of holding a compressed cache, side by side (issue 47, part 5):
`kvlab quality` as it always ran (the whole prefix quantized and dequantized again after every
token, so per-tensor scales and KIVI's fp16 window follow the prefix) and `kvlab quality --stored`
(the cache `kvlab generate --method` holds: scales fixed from the prompt, KIVI's groups sealed as
they fill, llama.cpp's rows quantized as written, KVComp's buffer flushed a block at a time).

Both on SmolLM2-135M over the GPL text of docs/QUALITY.md, windows of 512 positions whose first
128 are the prompt (a stored cache fixes its scales from it; no tokens of it are scored), the
runs spread over the machine's cores, one process per core. Writes the runs' JSON to --out (JSON
lines: one object per method with "simulated" and "stored") and prints a markdown table.

Usage: stored_vs_simulated.py --kvlab PATH [--model M.gguf] [--max-tokens N] [--out FILE]
"""
import argparse
import concurrent.futures
import json
import math
import os
import pathlib
import subprocess
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
CACHE = pathlib.Path(os.environ.get("KVLAB_TEST_CACHE", pathlib.Path.home() / ".cache" / "kvlab"))
LICENCES = [pathlib.Path("/usr/share/common-licenses/GPL-3"),
            pathlib.Path("/usr/share/common-licenses/GPL-2")]
METHODS = [
    ("int8 per-tensor", ["--method", "int8"]),
    ("fp8-e4m3 per-tensor", ["--method", "fp8-e4m3"]),
    ("nvfp4", ["--method", "nvfp4"]),
    ("kivi-4 G=32 R=128", ["--method", "kivi", "--bits", "4"]),
    ("kivi-2 G=32 R=128", ["--method", "kivi", "--bits", "2"]),
    ("q8_0", ["--method", "q8_0"]),
    ("q4_0", ["--method", "q4_0"]),
    ("kvcomp + huffman", ["--method", "kvcomp", "--codec", "huffman"]),
]


def run_one(kvlab, model, text, max_tokens, args, stored, cpu):
    cmd = [kvlab, "quality", "--model", model, "--text-file", text, "--window", "512",
           "--prompt", "128", "--max-tokens", str(max_tokens), "--json"] + args
    if stored:
        cmd.append("--stored")
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        cmd = ["taskset", "-c", str(cpu)] + cmd
    out = subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kvlab", required=True)
    ap.add_argument("--model", default=str(CACHE / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--max-tokens", type=int, default=4088)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" /
                                         "quality_stored_vs_simulated_smollm2.jsonl"))
    a = ap.parse_args()
    work = tempfile.TemporaryDirectory()
    text = pathlib.Path(work.name) / "gpl.txt"
    text.write_bytes(b"".join(p.read_bytes() for p in LICENCES))
    cores = os.cpu_count() or 1
    jobs = [(name, args, stored) for name, args in METHODS for stored in (False, True)]
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=cores) as pool:
        futures = {pool.submit(run_one, a.kvlab, a.model, str(text), a.max_tokens, args, stored,
                               i % cores): (name, stored)
                   for i, (name, args, stored) in enumerate(jobs)}
        for f in concurrent.futures.as_completed(futures):
            name, stored = futures[f]
            results.setdefault(name, {})["stored" if stored else "simulated"] = f.result()
            print(f"done: {name} {'stored' if stored else 'simulated'}", flush=True)
    rows = [{"method": name, **results[name]} for name, _ in METHODS]
    pathlib.Path(a.out).write_text("".join(json.dumps(r) + "\n" for r in rows))
    print("| method | tokens | simulated: change ± s.e. | stored: change ± s.e. | stored − "
          "simulated | bits/value held (stored) | same greedy token, simulated / stored |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        s, t = r["simulated"], r["stored"]
        diff = t["perplexity_change"] - s["perplexity_change"]
        # The two runs share the exact run and the text, so their errors are correlated: the
        # root of the summed squares bounds the difference's own standard error from above.
        se = math.hypot(s["perplexity_change_se"], t["perplexity_change_se"])
        print(f"| {r['method']} | {t['tokens']:,} | {100 * s['perplexity_change']:+.2f}% ± "
              f"{100 * s['perplexity_change_se']:.2f} | {100 * t['perplexity_change']:+.2f}% ± "
              f"{100 * t['perplexity_change_se']:.2f} | {100 * diff:+.2f} points"
              f"{' (within noise)' if abs(diff) < 2 * se else ''} | {t['bits_per_value']:.2f} | "
              f"{100 * s['next_token_agreement']:.1f}% / {100 * t['next_token_agreement']:.1f}% |")


if __name__ == "__main__":
    main()
