#!/usr/bin/env python3
"""The planner's memory and latency model written again, plainly, from its specification
(planners/include/kvlab/planners/latency.h and kv_memory.h), for every model of the catalogue,
and compared with what `kvlab plan --json` prints. Only the catalogue files are shared; each
rule is re-derived here from the comments, not from the C++.

Usage: planner_reference.py --kvlab PATH --assets DIR
"""
import argparse
import json
import math
import os
import subprocess
import sys

PAGE = 16
RESERVE = 1 << 30
UTIL = 0.9
BW_EFF, COMPUTE_EFF = 0.8, 0.6
HEADER = 16  # bytes per stored tensor of a quantized scheme (engine's kTensorHeaderBytes)
SCALE = 4    # one float scale per tensor

# The default decompression rates: the H100 runs in docs/PERFORMANCE.md, two tensors of
# 32,768 × 8 × 128 fp16 values in the K and V kernels' times.
VALUES = 32768 * 8 * 128
RATES = {"fp8": 2 * VALUES / ((16.4 + 19.3) * 1e-6),
         "huffman": 2 * VALUES / ((81.4 + 134.0) * 1e-6)}
ENCODE = 100.47680812690689e9 / 2
H100_FP32 = 67.0
KVCOMP_BITS = 5.03


def kinds(m):
    n = m["layers"]
    if "layer_types" in m:
        return [k.replace("_attention", "") for k in m["layer_types"]]
    if "layer_pattern" in m:
        p = m["layer_pattern"]
        return [p[i % len(p)] for i in range(n)]
    if m.get("sliding_pattern") in ("even", "odd"):
        even = m["sliding_pattern"] == "even"
        return ["sliding" if (i % 2 == 0) == even else "full" for i in range(n)]
    return ["sliding" if m.get("sliding_window") else "full"] * n


def kept(m, kind, context):
    if kind == "linear":
        return 0
    if kind == "sliding":
        return min(context, m["sliding_window"])
    if kind == "chunked":
        return min(context, m["chunk_size"])
    return context


def pairs(m, kind, p):
    tri = lambda n: n * (n + 1) / 2
    if kind == "linear":
        return 0.0
    if kind == "sliding":
        w = m["sliding_window"]
        return tri(p) if p <= w else tri(w) + (p - w) * w
    if kind == "chunked":
        c = m["chunk_size"]
        full = p // c
        return full * tri(c) + tri(p - full * c)
    return tri(p)


def tensor_bytes(scheme, values):
    if scheme == "fp16":
        return 2 * values
    if scheme == "fp8":
        return values + SCALE + HEADER
    if scheme == "kvcomp":
        return math.ceil(values * KVCOMP_BITS / 8)
    raise ValueError(scheme)


def dtype_bytes(d):
    return {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5, "fp4": 0.5}[d]


def expect(m, g, scheme, context, batch, tp):
    mla = "mla" in m
    latent = m["mla"]["kv_lora_rank"] + m["mla"]["qk_rope_head_dim"] if mla else 0
    heads = 1 if mla else (m["kv_heads"] // tp if m["kv_heads"] >= tp else 1)
    dim = latent if mla else m["head_dim"]
    ks = kinds(m)
    # One sequence on one GPU (PP 1): pages of 16 per layer, K and V (MLA: one latent).
    seq = 0
    layer_tokens = 0
    for k in ks:
        t = kept(m, k, context)
        if t == 0:
            continue
        pages = -(-t // PAGE) * PAGE
        per = tensor_bytes(scheme, pages * heads * dim)
        seq += per if mla else 2 * per
        layer_tokens += t
    total = round(m["params_billion"] * 1e9 * dtype_bytes(m.get("weights_dtype", "bf16")))
    weights = -(-total // tp)  # the whole model's bytes, split over TP rounded up
    usable = int(g["memory_bytes"] * UTIL)
    capacity = max(0, usable - weights - RESERVE)
    active = m.get("active_params_billion", m["params_billion"]) * 1e9
    wdt = m.get("weights_dtype", "bf16")
    t = g["tflops"]
    dense_peak = (t.get("fp8", 0) if wdt == "fp8" and t.get("fp8", 0) > 0 else
                  t.get("fp4", 0) if wdt == "fp4" and t.get("fp4", 0) > 0 else t["bf16"]) * 1e12 * COMPUTE_EFF
    attn_peak = t["bf16"] * 1e12 * COMPUTE_EFF
    bw = g["bandwidth_gbs"] * 1e9 * BW_EFF
    q_heads = math.ceil(m["q_heads"] / tp)
    per_token_flops = (lambda qh: qh * 2.0 * (dim + m["mla"]["kv_lora_rank"]) if mla else qh * 4.0 * dim)
    # Mixture of experts: the always-on part and the experts a batch of n tokens routes to.
    def read_fraction(n):
        moe = m.get("moe")
        if not moe or active >= m["params_billion"] * 1e9:
            return 1.0
        share = moe["experts_per_token"] / moe["experts"]
        p, a = m["params_billion"], active / 1e9
        routed = min(p, (p - a) / (1 - share))
        return (p - routed + routed * (1 - (1 - share) ** n)) / p
    # Prefill of one prompt.
    total_pairs = sum(pairs(m, k, context) for k in ks)
    pre_dense = 2 * active * context
    pre_attn = per_token_flops(m["q_heads"]) * total_pairs
    t_compute = (pre_dense / dense_peak + pre_attn / attn_peak) / tp
    t_memory = (weights * read_fraction(context) + seq) / bw
    values = layer_tokens * (dim if mla else 2 * heads * dim)
    t_compress = 0.0
    rate = 0.0
    if scheme != "fp16":
        fp16_bytes = values * 2
        encode = 0.0
        if scheme == "kvcomp":
            encode = values / (ENCODE * (g["tflops"]["fp32"] / H100_FP32 if g["id"] != "h100-sxm" else 1))
        t_compress = max((fp16_bytes + seq) / bw, encode)
        base = RATES["fp8" if scheme == "fp8" else "huffman"]
        rate = base * (g["tflops"]["fp32"] / H100_FP32 if g["id"] != "h100-sxm" else 1)
    ttft = max(t_compute, t_memory) + t_compress
    # Decode step of the batch.
    t_w = weights * read_fraction(batch) / bw
    t_d = 2 * active * batch / tp / dense_peak
    t_kv = seq * batch / bw
    t_a = per_token_flops(q_heads) * layer_tokens * batch / attn_peak
    t_x = values * batch / rate if rate > 0 else 0.0
    # The decompression rate is a fused kernel's, arithmetic included: weighed, not added.
    tpot = max(t_w, t_d) + max(t_kv, t_a, t_x)
    return {"kv_bytes_per_sequence_per_gpu": seq, "kv_capacity_bytes_per_gpu": capacity,
            "max_batch": capacity // seq if seq else 0, "ttft_ms": ttft * 1e3, "tpot_ms": tpot * 1e3,
            "tokens_per_s_per_gpu": batch / tpot / tp}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvlab", required=True)
    ap.add_argument("--assets", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    models = json.load(open(os.path.join(a.assets, "models.json")))["models"]
    gpus = {g["id"]: g for g in json.load(open(os.path.join(a.assets, "gpus.json")))["gpus"]}
    os.makedirs(a.workdir, exist_ok=True)
    env = dict(os.environ, KVLAB_DB=os.path.join(a.workdir, "none.sqlite"))
    checked, failures = 0, []
    for m in models:
        for gpu_id, tp in (("h100-sxm", 1), ("b200", 8), ("l40s", 2)):
            if "mla" not in m and m["kv_heads"] % tp and tp % m["kv_heads"]:
                continue
            context = min(m["max_context"], 8192 if gpu_id != "b200" else 32768)
            batch = 4
            out = subprocess.run(
                [a.kvlab, "plan", "--model", m["id"], "--gpu", gpu_id, "--tp", str(tp),
                 "--context", str(context), "--batch", str(batch), "--scheme", "fp16,fp8,kvcomp",
                 "--json"], capture_output=True, text=True, env=env)
            if out.returncode != 0:
                failures.append(f"{m['id']} on {gpu_id}: kvlab failed: {out.stdout}{out.stderr}")
                continue
            got = json.loads(out.stdout)
            for row in got["schemes"]:
                want = expect(m, gpus[gpu_id], row["scheme"], context, batch, tp)
                for key, value in want.items():
                    have = row[key]
                    ok = abs(have - value) <= 1e-9 * max(1.0, abs(value)) if isinstance(value, float) else have == value
                    checked += 1
                    if not ok:
                        failures.append(f"{m['id']} on {gpu_id} TP {tp}, {row['scheme']}, {context} tokens x {batch}: "
                                        f"{key} is {have}, the reference says {value}")
    for f in failures[:40]:
        print("MISMATCH", f)
    print(f"{checked} numbers compared over {len(models)} models, {len(failures)} mismatches")
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
