#!/usr/bin/env python3
"""An independent check of kvlab's GGUF runner on SmolLM2-135M-Instruct.

The weights come from the `gguf` package (llama.cpp's own Python reader and dequantizers, PyPI),
and the forward is written here in plain NumPy, in float64, as simply as the architecture allows
(Llama: RMSNorm, RoPE, grouped-query attention, SwiGLU). Nothing of kvlab is used but its
command line, whose logits are compared:

  1. after a batched prefill of a fixed prompt (kvlab's tiled matrix products),
  2. at every position when the same prompt goes one token at a time (kvlab's decode path,
     dot products on the quantized rows),
  3. the greedy continuation of the prompt for 8 tokens,
  4. after a batched prefill of a prompt of LONG_TOKENS ids, longer than one pass of kvlab's
     feed-forward (1024 rows) and than its attention's blocks of queries.

Logits must agree to 1e-3 relative (max |kvlab - reference| / max |reference|).

Usage: smollm2_reference.py --kvlab PATH --model PATH.gguf [--workdir DIR]
Exit codes: 0 agreement, 1 disagreement or error.
"""
import argparse
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

# A fixed prompt as token ids (BOS, then ordinary words of SmolLM2's vocabulary), so that
# tokenization plays no part in this check.
PROMPT = [1, 504, 1492, 288, 253, 1123, 17469, 314, 2216, 28, 1305, 357, 2287, 30, 378, 3390]
TOLERANCE = 1e-3
# Ids of ordinary vocabulary entries in a fixed order, after BOS.
LONG_TOKENS = 1100
LONG_PROMPT = [1] + [200 + (i * 7919) % 40000 for i in range(LONG_TOKENS - 1)]


def field(reader, key):
    f = reader.fields[key]
    return f.contents()


def load(path):
    r = GGUFReader(path)
    arch = field(r, "general.architecture")
    assert arch == "llama", arch
    cfg = {
        "layers": int(field(r, "llama.block_count")),
        "dim": int(field(r, "llama.embedding_length")),
        "heads": int(field(r, "llama.attention.head_count")),
        "kv_heads": int(field(r, "llama.attention.head_count_kv")),
        "eps": float(field(r, "llama.attention.layer_norm_rms_epsilon")),
        "theta": float(field(r, "llama.rope.freq_base")),
    }
    weights = {}
    for t in r.tensors:
        # gguf's dequantize returns rows x columns (numpy order: the innermost ggml dim last).
        w = dequantize(t.data, t.tensor_type).astype(np.float64)
        shape = [int(d) for d in reversed(t.shape)]
        weights[t.name] = w.reshape(shape)
    return cfg, weights


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, positions, theta):
    """GGML's normal RoPE: adjacent pairs (x[2i], x[2i+1]) turn by pos * theta^(-2i/d).

    llama.cpp's converter permuted the q and k rows of this llama-architecture model so that
    this layout gives Hugging Face's results."""
    d = x.shape[-1]
    freqs = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    ang = positions[:, None] * freqs[None, :]  # [T, d/2]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = a * sin + b * cos
    return out


def forward(cfg, w, ids, cache):
    """Logits [len(ids), vocab] of the new tokens `ids`, at the positions after those in `cache`
    (a dict of the keys and values of every layer so far, extended here)."""
    T, D, H, KVH = len(ids), cfg["dim"], cfg["heads"], cfg["kv_heads"]
    hd = D // H
    start = cache.get("tokens", 0)
    x = w["token_embd.weight"][ids]
    pos = np.arange(start, start + T, dtype=np.float64)
    # Causal: new token i sees positions 0..start + i.
    mask = np.triu(np.full((T, start + T), -np.inf), k=start + 1)
    for l in range(cfg["layers"]):
        p = f"blk.{l}."
        h = rms_norm(x, w[p + "attn_norm.weight"], cfg["eps"])
        q = (h @ w[p + "attn_q.weight"].T).reshape(T, H, hd)
        k = (h @ w[p + "attn_k.weight"].T).reshape(T, KVH, hd)
        v = (h @ w[p + "attn_v.weight"].T).reshape(T, KVH, hd)
        q, k = rope(q, pos, cfg["theta"]), rope(k, pos, cfg["theta"])
        if l in cache:
            k = np.concatenate([cache[l][0], k])
            v = np.concatenate([cache[l][1], v])
        cache[l] = (k, v)
        out = np.empty((T, H, hd))
        for head in range(H):
            kv = head // (H // KVH)
            s = q[:, head, :] @ k[:, kv, :].T / np.sqrt(hd) + mask
            s = np.exp(s - s.max(axis=1, keepdims=True))
            s /= s.sum(axis=1, keepdims=True)
            out[:, head, :] = s @ v[:, kv, :]
        x = x + out.reshape(T, D) @ w[p + "attn_output.weight"].T
        h = rms_norm(x, w[p + "ffn_norm.weight"], cfg["eps"])
        gate = h @ w[p + "ffn_gate.weight"].T
        up = h @ w[p + "ffn_up.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ w[p + "ffn_down.weight"].T
    cache["tokens"] = start + T
    x = rms_norm(x, w["output_norm.weight"], cfg["eps"])
    out_w = w.get("output.weight", w["token_embd.weight"])
    return x @ out_w.T


def relative(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def kvlab(args, *extra, prompt=PROMPT):
    cmd = [args.kvlab, "generate", "--model", args.model,
           "--ids", ",".join(map(str, prompt)), *extra]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()}")
    return res.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kvlab", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="kvlab-smollm2-")
    os.makedirs(work, exist_ok=True)
    print(f"gguf {importlib.metadata.version('gguf')}, numpy {np.__version__}; reference "
          f"forward of {args.model}")
    cfg, w = load(args.model)
    vocab = w["token_embd.weight"].shape[0]
    cache = {}
    ref = forward(cfg, w, PROMPT, cache)
    failures = []

    batched = os.path.join(work, "batched.f32")
    kvlab(args, "--tokens", "0", "--logits-out", batched)
    got = np.fromfile(batched, dtype=np.float32).astype(np.float64)
    err = relative(got, ref[-1])
    print(f"batched prefill, last position: max relative difference {err:.2e}")
    if got.size != vocab or not err <= TOLERANCE:
        failures.append(f"batched prefill logits differ by {err:.2e}")

    stepwise = os.path.join(work, "stepwise.f32")
    kvlab(args, "--tokens", "0", "--stepwise", "--logits-out", stepwise)
    got = np.fromfile(stepwise, dtype=np.float32).astype(np.float64).reshape(-1, vocab)
    errs = [relative(got[i], ref[i]) for i in range(len(PROMPT))]
    print(f"one token at a time, {len(PROMPT)} positions: worst {max(errs):.2e}")
    if got.shape[0] != len(PROMPT) or not max(errs) <= TOLERANCE:
        failures.append(f"stepwise logits differ by up to {max(errs):.2e}")

    gen = json.loads(kvlab(args, "--tokens", "8", "--json"))["generated_ids"]
    want = [int(np.argmax(ref[-1]))]
    while len(want) < 8:
        want.append(int(np.argmax(forward(cfg, w, [want[-1]], cache)[-1])))
    print(f"greedy continuation: kvlab {gen}, reference {want}")
    if gen != want:
        failures.append(f"greedy continuation {gen} != reference {want}")

    long_ref = forward(cfg, w, LONG_PROMPT, {})[-1]
    long_out = os.path.join(work, "long.f32")
    kvlab(args, "--tokens", "0", "--logits-out", long_out, prompt=LONG_PROMPT)
    got = np.fromfile(long_out, dtype=np.float32).astype(np.float64)
    err = relative(got, long_ref)
    print(f"batched prefill of {LONG_TOKENS} tokens, last position: max relative difference "
          f"{err:.2e}")
    if got.size != vocab or not err <= TOLERANCE:
        failures.append(f"the {LONG_TOKENS}-token prefill's logits differ by {err:.2e}")

    if failures:
        print("FAILED: " + "; ".join(failures))
        return 1
    print("kvlab agrees with the NumPy reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
