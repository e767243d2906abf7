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
                                          [--results FILE]
Prints a Markdown table for docs/PERFORMANCE.md; with --results FILE it also writes today's
numbers of issue 20's speed target there (bench/bench_results.py).
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

import bench_results as br

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


def load_llama(model, **kwargs):
    """llama_cpp.Llama on `model` without ggml's AMX matrix kernels (an "extra buffer type").
    They die with SIGILL on KVM guests whose CPUID lists AMX without the kernel granting its tile
    state, as on the 2-core Xeon of docs/PERFORMANCE.md; without them llama.cpp runs its
    AVX-512/AVX2 kernels there. On a CPU without AMX this changes nothing."""
    import llama_cpp  # optional
    import llama_cpp.llama_cpp as low
    default_params = low.llama_model_default_params

    def params_without_extra_buffers():
        p = default_params()
        p.use_extra_bufts = False
        return p

    low.llama_model_default_params = params_without_extra_buffers
    try:
        return llama_cpp.Llama(model_path=model, verbose=False, **kwargs)
    finally:
        low.llama_model_default_params = default_params


def llama_cpp_run(model, ids, threads):
    import numpy as np
    llm = load_llama(model, n_ctx=2048, n_threads=threads, n_threads_batch=threads,
                     n_batch=PROMPT_TOKENS)
    n_vocab = llm.n_vocab()

    def next_token():
        # The logits of the last token evaluated (Llama.scores is only filled with
        # logits_all=True, which would make llama.cpp compute logits for every prompt token).
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,))
        return int(np.argmax(logits))

    best = None
    generated = []
    for _ in range(REPEATS):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids)
        t1 = time.perf_counter()
        out = []
        for _ in range(DECODE_TOKENS):
            tok = next_token()
            out.append(tok)
            llm.eval([tok])
        t2 = time.perf_counter()
        row = (len(ids) / (t1 - t0), DECODE_TOKENS / (t2 - t1))
        best = row if best is None else (max(best[0], row[0]), max(best[1], row[1]))
        generated = out
    return best, generated


def teacher_forced_comparison(kvlab, model, ids, kv_tokens, count=32):
    """Both runners read the same tokens, the prompt then kvlab's first `count` greedy tokens;
    at each of those positions: does llama.cpp's top token equal kvlab's, and how far apart are
    the two logit vectors. Greedy paths alone diverge at the first near-tie and stay apart."""
    import tempfile
    import numpy as np
    seq = list(ids) + list(kv_tokens[:count])
    with tempfile.NamedTemporaryFile(suffix=".f32") as f:
        subprocess.run([kvlab, "generate", "--model", model, "--ids", ",".join(map(str, seq)),
                        "--tokens", "0", "--stepwise", "--logits-out", f.name, "--json"],
                       capture_output=True, text=True, check=True)
        kv = np.fromfile(f.name, dtype="<f4").reshape(len(seq), -1)
    llm = load_llama(model, n_ctx=2048, n_batch=len(seq), logits_all=True)
    llm.eval(seq)
    ll = np.array(llm.scores[:len(seq)], dtype=np.float64)
    rows = range(len(ids) - 1, len(seq) - 1)  # the positions that predict kvlab's tokens
    same, worst_rel, margins = 0, 0.0, []
    for p in rows:
        a, b = kv[p].astype(np.float64), ll[p]
        same += int(np.argmax(a) == np.argmax(b))
        worst_rel = max(worst_rel, float(np.max(np.abs(a - b)) / np.max(np.abs(b))))
        if np.argmax(a) != np.argmax(b):
            top2 = np.sort(a)[-2:]
            margins.append((p - len(ids) + 1, float(top2[1] - top2[0]),
                            float(b[np.argmax(b)] - b[np.argmax(a)])))
    return same, len(rows), worst_rel, margins


def targets(kvlab, llama, command):
    """kvlab, llama: {threads: (prefill tokens/s, decode tokens/s)}, llama empty without it."""
    out = []
    for phase, i in (("decode", 1), ("prefill", 0)):
        measured = [br.number(f"{runner} {t} thread{'s' * (t > 1)}", rows[t][i], "tokens/s", 1)
                    for runner, rows in (("kvlab", kvlab), ("llama.cpp", llama))
                    for t in sorted(rows)]
        out.append(br.target(
            phase, 20, f"{phase} tokens/s of SmolLM2-135M-Instruct Q4_1 beside llama.cpp (same "
            "machine, threads and GGUF)", "reported", measured, command))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("model")
    ap.add_argument("--threads", default="1,2")
    br.add_option(ap)
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
    kvlab_rows, llama_rows = {}, {}
    for threads in [int(t) for t in args.threads.split(",")]:
        best = None
        for _ in range(REPEATS):
            r = kvlab_generate(kvlab, args.model, ids, DECODE_TOKENS + 1, threads)
            row = (r["prefill_tokens_per_second"], r["decode_tokens_per_second"])
            best = row if best is None else (max(best[0], row[0]), max(best[1], row[1]))
            kv_tokens = r["generated_ids"]
        print(f"| kvlab | {threads} | {best[0]:.1f} | {best[1]:.1f} |")
        kvlab_rows[threads] = best
        if have_llama:
            lbest, l_tokens = llama_cpp_run(args.model, ids, threads)
            llama_rows[threads] = lbest
            print(f"| llama.cpp (llama-cpp-python) | {threads} | {lbest[0]:.1f} | {lbest[1]:.1f} |")
            same = sum(1 for a, b in zip(kv_tokens[:32], l_tokens[:32]) if a == b)
            first_diff = next((i for i, (a, b) in enumerate(zip(kv_tokens, l_tokens)) if a != b),
                              None)
            print(f"\n(greedy tokens: {same}/32 of the first 32 agree with llama.cpp; first "
                  f"difference at {first_diff})\n", file=sys.stderr)
    if have_llama:
        same, n, worst_rel, margins = teacher_forced_comparison(kvlab, args.model, ids, kv_tokens)
        print(f"\nSame inputs (the prompt, then kvlab's first {n} greedy tokens), each position "
              f"read by both: llama.cpp's top token is kvlab's at {same}/{n} positions; the "
              f"largest logit difference is {worst_rel:.2%} of the largest logit.")
        for step, kv_margin, ll_margin in margins:
            print(f"- generated token {step}: a near-tie, kvlab's top two logits {kv_margin:.3f} "
                  f"apart, llama.cpp's {ll_margin:.3f}")
    if not have_llama:
        print("\nllama.cpp: not measured (llama_cpp cannot be imported by this Python)")
    if args.results:
        command = br.command_line()
        if have_llama:  # the Python that has llama_cpp (a virtual environment outside the tree)
            python = sys.executable.replace(os.path.expanduser("~"), "~", 1)
            command = command.replace("python3 ", f"{python} ", 1)
        br.write_results(args, "gguf_runner", targets(kvlab_rows, llama_rows, command))


if __name__ == "__main__":
    main()
