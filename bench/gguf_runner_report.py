#!/usr/bin/env python3
"""Prefill and decode speed of kvlab's runner on a GGUF model, beside llama.cpp when it is there.

For each thread count, kvlab generate runs a prompt of PROMPT_TOKENS tokens (the start of the
GPL-3 text that Debian's base-files package ships) as one batch, then decodes DECODE_TOKENS
tokens greedily; the best of REPEATS runs is kept. When the Python that runs this script can
import llama_cpp (PyPI llama-cpp-python, which builds llama.cpp from source: too slow for the
test suite, so it is not installed by scripts/test_data.sh), llama.cpp runs the same GGUF with
the same threads, the same prompt tokens and greedy sampling, and the first 32 generated tokens
of both are compared.

Usage: python3 bench/gguf_runner_report.py build/release MODEL.gguf [--threads 1,2]
Prints a Markdown table for docs/PERFORMANCE.md.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

PROMPT_TOKENS = 512
DECODE_TOKENS = 128
REPEATS = 3
TEXT = "/usr/share/common-licenses/GPL-3"


def kvlab_generate(kvlab, model, ids, tokens, threads):
    cmd = [kvlab, "generate", "--model", model, "--ids", ",".join(map(str, ids)),
           "--tokens", str(tokens), "--threads", str(threads), "--json"]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(res.stdout)


def prompt_ids(kvlab, model):
    res = subprocess.run([kvlab, "generate", "--model", model, "--prompt-file", TEXT,
                          "--tokens", "0", "--json"], capture_output=True, text=True, check=True)
    return json.loads(res.stdout)["prompt_ids"][:PROMPT_TOKENS]


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def llama_cpp_run(model, ids, threads):
    import llama_cpp  # optional
    import numpy as np
    llm = llama_cpp.Llama(model_path=model, n_ctx=2048, n_threads=threads,
                          n_threads_batch=threads, n_batch=PROMPT_TOKENS, verbose=False)
    best = None
    generated = []
    for _ in range(REPEATS):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids)
        t1 = time.perf_counter()
        out = []
        for _ in range(DECODE_TOKENS):
            tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            out.append(tok)
            llm.eval([tok])
        t2 = time.perf_counter()
        row = (len(ids) / (t1 - t0), DECODE_TOKENS / (t2 - t1))
        best = row if best is None else (max(best[0], row[0]), max(best[1], row[1]))
        generated = out
    return best, generated


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("model")
    ap.add_argument("--threads", default="1,2")
    args = ap.parse_args()
    kvlab = os.path.join(args.build, "app", "cli", "kvlab")
    ids = prompt_ids(kvlab, args.model)
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores; model {os.path.basename(args.model)}; "
          f"prompt {len(ids)} tokens of {TEXT}, then {DECODE_TOKENS} greedy tokens; best of "
          f"{REPEATS}\n")
    print("| runner | threads | prefill tokens/s | decode tokens/s |")
    print("|---|---:|---:|---:|")
    have_llama = True
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        have_llama = False
    for threads in [int(t) for t in args.threads.split(",")]:
        best = None
        for _ in range(REPEATS):
            r = kvlab_generate(kvlab, args.model, ids, DECODE_TOKENS + 1, threads)
            row = (r["prefill_tokens_per_second"], r["decode_tokens_per_second"])
            best = row if best is None else (max(best[0], row[0]), max(best[1], row[1]))
            kv_tokens = r["generated_ids"]
        print(f"| kvlab | {threads} | {best[0]:.1f} | {best[1]:.1f} |")
        if have_llama:
            lbest, l_tokens = llama_cpp_run(args.model, ids, threads)
            print(f"| llama.cpp (llama-cpp-python) | {threads} | {lbest[0]:.1f} | {lbest[1]:.1f} |")
            same = sum(1 for a, b in zip(kv_tokens[:32], l_tokens[:32]) if a == b)
            first_diff = next((i for i, (a, b) in enumerate(zip(kv_tokens, l_tokens)) if a != b),
                              None)
            print(f"\n(greedy tokens: {same}/32 of the first 32 agree with llama.cpp; first "
                  f"difference at {first_diff})\n", file=sys.stderr)
    if not have_llama:
        print("\nllama.cpp: not measured (llama_cpp cannot be imported by this Python)")


if __name__ == "__main__":
    main()
