#!/usr/bin/env python3
"""kvlab's prefill eviction policies ("presses") against a NumPy reference written from their rules.

`kvlab capture` runs the stories260K llama2.c model (5 layers, 8 query heads, 4 KV heads,
head_dim 8, RoPE theta 10000) on a fixed story of 354 tokens and continues it 16 tokens; the
.safetensors it writes (keys and queries after RoPE, a query for every position, the RoPE
frequencies in kvlab.key_rope) is read here with a small reader of our own. For every press
`kvlab evict --source file:CAPTURE --steps 16 --budget 25% --json --maps` compresses the
prompt (the first 354 tokens) once; its eviction map says, per layer and KV head, which prompt
positions the press dropped (left at step 0, evicted). The same decisions are computed here in
float64 NumPy from the rules (P prompt tokens, D head_dim, G query heads per KV head,
B = round(P / 4) half away from zero = 89 tokens per head; top-k takes the k highest scores,
ties to the lower position):

  snapkv       attention of the last w = min(32, P) prompt queries (causal), summed over the
               prompt before the window, averaged over the window and the group, average-pooled
               over 5 positions (zero padding, divided by 5); the window is kept and counts
               against B. Also with --obs-window 8 --pool 3.
  pyramidkv    SnapKV's scores; KVCache-Factory's pyramid (pyramidkv_utils.py) in real
               arithmetic: with B' = B - w, min_n = B' / beta, max_n = 2 B' - min_n (if max_n >=
               P - w: max_n = P - w, min_n = 2 B' - max_n), layer l keeps the window plus
               round_half_away(max_n - l (max_n - min_n) / (L - 1)) (budget_tokens in the JSON is
               that plus the 16 steps). Also beta 2 and a 60% budget, where max_n is clamped.
  knorm        minus the key's L2 norm.
  keydiff      minus the cosine similarity of the key to the mean unit key.
  expected-attention
               the window's queries turned back by RoPE at their own positions; their mean and
               centred rows turned by the mean RoPE rotation over positions P .. P+511;
               z = mu'.k / sqrt(D) + |C'k|^2 / (2 w D) over the keys after the 4 sinks, softmax,
               mean over the group, times |v|; the sinks are kept.
  adakv        SnapKV's scores (safeguard 0.2, never binding here: every head keeps at least 43)
               and KNorm's (safeguard 0.5, binding: heads keep 44 to 219); each head's best
               int(safeguard B) positions forced, then the layer's best 4 B (head, position)
               pairs, ties to the lower head-major index.
  chunkkv      SnapKV's (and KNorm's, chunks of 7) scores summed over heads, chunks of 10 scored
               by their mean, max(1, int(chunks B / P)) best chunks kept by every head.
  think        per KV head, key channel d scores sum(q_d^2) over the window and the group times
               sum(k_d^2) over the prompt; the int(D / 2) lowest are pruned: compared with the
               JSON's channel_masks and key_channels; every token kept, memory below the full
               cache's.
  minicache    layers (2, 3) share directions: per (token, KV head), separately for K and V,
               d = arccos(cos(a, b)) / pi; retained when d >= d_min + 0.95 (d_max - d_min) over
               the pair, else both become their own norm times the normalized SLERP (t = 0.6)
               of the unit vectors. Checked: the JSON's merged flags (layers 2 and 3 only), its
               retained share (a token retained in K or in V), and the attention-output relative
               error of every decode step of the merged layers (the full cache against the
               merged prompt, query heads pooled: sqrt(sum |o - o'|^2 / sum |o|^2)) against the
               per-step numbers of the JSON, to a relative 1e-4.

kvlab's scores are double (presses.h), ranked with ties to the lower position, as here. That
matters for Expected Attention: on this model its attention is so peaked that most scores of
layer 1 heads 1-3 lie between 1e-70 and 1e-120, zeros in float32 (kvlab's first version ranked
float32 scores, and those heads then filled their budget with the lowest positions). Kept
sets must agree exactly, except near-ties: positions that scores moved by a relative 1e-4 could carry across
the cut-off; they are counted and reported (chunkkv:
decided per chunk; adakv: a near-tie at a head's safeguard cut may or may not be forced). Every
per-head prompt_kept must equal the map's count and, where the head has no near-tie, the
reference's.

Measured with the stories260K capture (20 heads of 354 positions per press): 0 mismatches in
every press; near-ties: knorm 18 (layer 0's keys of repeated tokens have equal norms), keydiff 8,
pyramidkv 4, adakv 2, adakv knorm 4, all others 0. MiniCache: 12 of 1,416 (token, head) retained
on layers 2 and 3; attention errors 0.47 .. 1.97 per step, matched to 2e-7. ThinK: 36,036 of
47,360 bytes per layer.

Usage: press_reference.py --kvlab PATH --model stories260K.bin [--workdir DIR]
Exit codes: 0 agreement, 1 disagreement or error, 77 the model is missing (skipped).
"""
import argparse
import base64
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

PROMPT = (
    "Once upon a time, there was a little girl named Lily. She liked to play in the park with "
    "her big red ball. One day, she saw a small dog near the tree. The dog was sad because it "
    "was lost. Lily said, \"Do not be sad, little dog. I will help you find your home.\" They "
    "walked and walked until they saw a big house with a blue door. A kind old man came out and "
    "smiled. \"Thank you, Lily!\" he said. \"My dog was lost all day.\" Lily was happy. She went "
    "home and told her mom about the dog. Her mom gave her a hug and a cookie. The next day, "
    "Lily went back to the park. She played with her ball and ran in the grass. Then she saw a "
    "bird in a tree. The bird was singing a happy song. Lily sang with the bird. They were "
    "friends. When the sun went down, Lily went home. She ate her dinner and went to bed. She "
    "dreamed about the dog, the bird and the park.")
STEPS = 16
FRACTION = 0.25
REL = 1e-4            # scores computed to this relative precision (near-ties)
ATTN_REL = 1e-4       # minicache attention error: reference vs kvlab, relative

# name, kvlab options, what the reference computes
RUNS = [
    ("snapkv", ["--policy", "snapkv"], dict(kind="topk", scorer="snapkv")),
    ("snapkv w8 pool3", ["--policy", "snapkv", "--obs-window", "8", "--pool", "3"],
     dict(kind="topk", scorer="snapkv", window=8, pool=3)),
    ("pyramidkv", ["--policy", "pyramidkv"], dict(kind="topk", scorer="snapkv", beta=20.0)),
    ("pyramidkv beta2", ["--policy", "pyramidkv", "--beta", "2"],
     dict(kind="topk", scorer="snapkv", beta=2.0)),
    ("pyramidkv 60%", ["--policy", "pyramidkv"],
     dict(kind="topk", scorer="snapkv", beta=20.0, fraction=0.6)),
    ("knorm", ["--policy", "knorm"], dict(kind="topk", scorer="knorm")),
    ("keydiff", ["--policy", "keydiff"], dict(kind="topk", scorer="keydiff")),
    ("expected-attention", ["--policy", "expected-attention"],
     dict(kind="topk", scorer="expected-attention")),
    ("adakv", ["--policy", "adakv"], dict(kind="adakv", scorer="snapkv")),
    ("adakv knorm", ["--policy", "adakv", "--scorer", "knorm", "--safeguard", "0.5"],
     dict(kind="adakv", scorer="knorm", safeguard=0.5)),
    ("chunkkv", ["--policy", "chunkkv"], dict(kind="chunkkv", scorer="snapkv")),
    ("chunkkv knorm c7", ["--policy", "chunkkv", "--scorer", "knorm", "--chunk", "7"],
     dict(kind="chunkkv", scorer="knorm", chunk=7)),
    ("think", ["--policy", "think"], dict(kind="think")),
    ("minicache", ["--policy", "minicache"], dict(kind="minicache")),
]
DEFAULTS = dict(fraction=FRACTION, window=32, pool=5, beta=None, future=512, sinks=4,
                safeguard=0.2, chunk=10, key_channels=0.5, merge_t=0.6, retain=0.05)


def run(cmd):
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()}")
    return res.stdout


def read_safetensors(path):
    """The tensors as float64 (ints as int64) and the metadata of a .safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    dtypes = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I32": "<i4", "I64": "<i8"}
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        if t["dtype"] == "BF16":
            arr = (np.frombuffer(data[a:b], "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(data[a:b], dtypes[t["dtype"]])
        arr = arr.reshape(t["shape"])
        out[name] = arr.astype(np.int64 if t["dtype"].startswith("I") else np.float64)
    return out, header.get("__metadata__", {})


def round_half_away(x):
    return int(np.sign(x) * np.floor(abs(x) + 0.5))


def f32_bounds(score):
    """The values a score may take when computed to a relative REL: [lo, hi]."""
    a, b = score * (1 - REL), score * (1 + REL)
    return np.minimum(a, b), np.maximum(a, b)


def top_k(score, k, lo=None, hi=None):
    """The k best scores as kvlab ranks them (ties to the lower index), and the near-ties: the
    positions that scores within their bounds [lo, hi] (a relative REL) could move across the
    cut-off."""
    n = len(score)
    k = max(0, min(k, n))
    if lo is None:
        lo, hi = f32_bounds(score)
    s32 = score
    order = np.lexsort((np.arange(n), -s32))
    keep = np.zeros(n, bool)
    keep[order[:k]] = True
    idx = np.arange(n)
    before = idx[:, None] < idx[None, :]                # [q, p]: q ranks first on equal scores
    maybe = (hi[:, None] > lo[None, :]) | ((hi[:, None] == lo[None, :]) & before)
    np.fill_diagonal(maybe, False)
    surely = (lo[:, None] > hi[None, :]) | ((lo[:, None] == hi[None, :]) & before)
    sure_in = maybe.sum(axis=0) < k                     # fewer than k can outrank it
    sure_out = surely.sum(axis=0) >= k                  # k or more surely outrank it
    amb = ~(sure_in | sure_out)
    return keep, amb


# ---- scores: [kv_heads, P] per layer --------------------------------------------------------

def snapkv_scores(K, Q, P, G, window, pool):
    """K [T, H, D], Q [T, Hq, D] -> [H, P]."""
    D = K.shape[2]
    w = min(window, P)
    start = P - w
    q = Q[start:P]                                   # [w, Hq, D]
    k = np.repeat(K[:P], G, axis=1)                  # [P, Hq, D]
    logits = np.einsum("ihd,thd->hit", q, k) / np.sqrt(D)
    pos = np.arange(start, P)[:, None]
    logits = np.where(np.arange(P)[None, :] <= pos, logits, -np.inf)
    logits -= logits.max(axis=2, keepdims=True)
    prob = np.exp(logits)
    prob /= prob.sum(axis=2, keepdims=True)          # [Hq, w, P]
    acc = prob[:, :, :start].reshape(-1, G, w, start).mean(axis=(1, 2))  # [H, start]
    c = np.concatenate([np.zeros((acc.shape[0], 1)), np.cumsum(acc, axis=1)], axis=1)
    t = np.arange(start)
    lo, hi = np.maximum(0, t - pool // 2), np.minimum(start - 1, t + pool // 2)
    score = np.full((acc.shape[0], P), np.inf)
    score[:, :start] = (c[:, hi + 1] - c[:, lo]) / pool
    return score


def knorm_scores(K, P):
    return -np.linalg.norm(K[:P], axis=2).T


def keydiff_scores(K, P):
    k = K[:P]
    n = np.linalg.norm(k, axis=2, keepdims=True)
    unit = np.divide(k, n, out=np.zeros_like(k), where=n > 0)
    anchor = unit.mean(axis=0)                       # [H, D]
    an = np.linalg.norm(anchor, axis=1)
    return -(np.einsum("thd,hd->ht", unit, anchor) / an[:, None])


def rope_pairs(rope, D):
    half = rope["rotary_dims"] // 2
    i = np.arange(half)
    if rope["half_split"]:
        return i, i + half
    return 2 * i, 2 * i + 1


def expected_attention_scores(K, V, Q, P, G, rope, window, future, sinks):
    D = K.shape[2]
    w = min(window, P)
    sinks = min(sinks, P)
    a_idx, b_idx = rope_pairs(rope, D)
    freq = np.asarray(rope["frequencies"], np.float64)
    pos = np.arange(P - w, P, dtype=np.float64) + rope.get("first_position", 0)
    q = Q[P - w:P].copy()                            # [w, Hq, D]
    ang = (pos[:, None] * freq[None, :])[:, None, :]  # [w, 1, pairs]
    x, y = q[..., a_idx], q[..., b_idx]
    q[..., a_idx] = x * np.cos(ang) + y * np.sin(ang)   # RoPE turned back
    q[..., b_idx] = -x * np.sin(ang) + y * np.cos(ang)
    fut = (P + np.arange(future, dtype=np.float64))[:, None] * freq[None, :]
    cbar, sbar = np.cos(fut).mean(axis=0), np.sin(fut).mean(axis=0)

    def turn(v):
        v = v.copy()
        x, y = v[..., a_idx], v[..., b_idx]
        v[..., a_idx] = cbar * x - sbar * y
        v[..., b_idx] = sbar * x + cbar * y
        return v
    mu = q.mean(axis=0)                              # [Hq, D]
    C = turn(q - mu)                                 # [w, Hq, D]
    mu = turn(mu)
    k = np.repeat(K[sinks:P], G, axis=1)             # [n, Hq, D]
    z = np.einsum("hd,thd->ht", mu, k) / np.sqrt(D)
    z += (np.einsum("ihd,thd->hit", C, k) ** 2).sum(axis=1) / (w * 2.0 * D)
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)                # [Hq, n]
    acc = p.reshape(-1, G, p.shape[1]).mean(axis=1)  # [H, n]
    score = np.full((acc.shape[0], P), np.inf)
    score[:, sinks:] = acc * np.linalg.norm(V[sinks:P], axis=2).T
    return score


def scores_for(scorer, layer, P, G, rope, opt):
    K, V, Q = layer
    if scorer == "snapkv":
        return snapkv_scores(K, Q, P, G, opt["window"], opt["pool"])
    if scorer == "knorm":
        return knorm_scores(K, P)
    if scorer == "keydiff":
        return keydiff_scores(K, P)
    if scorer == "expected-attention":
        return expected_attention_scores(K, V, Q, P, G, rope, opt["window"], opt["future"],
                                         opt["sinks"])
    raise ValueError(scorer)


def layer_budget(B, P, L, l, opt):
    """PyramidKV's budget of layer l: KVCache-Factory's pyramid (the window kept on top of it),
    in real arithmetic as kvpress computes it."""
    if opt["beta"] is None or L < 2:
        return B
    w = min(opt["window"], P)
    rest = B - w
    if rest <= 0:
        return B
    min_n = rest / opt["beta"]
    max_n = 2 * rest - min_n
    if max_n >= P - w:
        max_n = P - w
        min_n = 2 * rest - max_n
    steps = (max_n - min_n) / (L - 1)
    return min(max(round_half_away(max_n - l * steps) + w, 1), P)


# ---- the presses: kept [H, P] and near-ties [H, P] ------------------------------------------

def reference_kept(spec, layer, P, G, rope, B, opt):
    H = layer[0].shape[1]
    kind = spec["kind"]
    if kind == "topk":
        s = scores_for(spec["scorer"], layer, P, G, rope, opt)
        res = [top_k(s[h], B) for h in range(H)]
        return np.array([r[0] for r in res]), np.array([r[1] for r in res])
    if kind == "adakv":
        s = scores_for(spec["scorer"], layer, P, G, rope, opt)
        safe = int(B * opt["safeguard"])
        lo, hi = f32_bounds(s)
        for h in range(H):
            forced, a = top_k(s[h], safe)
            s[h, forced] = np.inf
            lo[h, forced & ~a] = np.inf
            hi[h, forced | a] = np.inf          # a near-tie may or may not be forced
        keep, a = top_k(s.reshape(-1), H * B, lo.reshape(-1), hi.reshape(-1))
        return keep.reshape(H, P), a.reshape(H, P)
    if kind == "chunkkv":
        s = scores_for(spec["scorer"], layer, P, G, rope, opt).sum(axis=0)
        c = opt["chunk"]
        n = -(-P // c)
        cs = np.array([s[i * c:(i + 1) * c].mean() for i in range(n)])
        keep_c, amb_c = top_k(cs, max(1, int(n * B / P)))
        keep = np.repeat(keep_c, c)[:P]
        amb = np.repeat(amb_c, c)[:P]
        return np.tile(keep, (H, 1)), np.tile(amb, (H, 1))
    if kind in ("think", "minicache"):
        return np.ones((H, P), bool), np.zeros((H, P), bool)
    raise ValueError(kind)


def think_masks(layer, P, G, opt):
    """Kept key channels [H, D] and near-ties, from the window's queries and the prompt's keys."""
    K, _, Q = layer
    H, D = K.shape[1], K.shape[2]
    w = min(opt["window"], P)
    qn = (Q[P - w:P] ** 2).sum(axis=0).reshape(H, G, D).sum(axis=1)
    kn = (K[:P] ** 2).sum(axis=0)
    score = qn * kn
    pruned = int(D * (1 - opt["key_channels"]) + 1e-9)
    res = [top_k(-score[h], pruned) for h in range(H)]
    return ~np.array([r[0] for r in res]), np.array([r[1] for r in res])


def slerp_merge(a, b, t, retain):
    """One pair's K or V [P, H, D]: the merged lower and upper, the retained mask and near-ties."""
    na = np.linalg.norm(a, axis=2, keepdims=True)
    nb = np.linalg.norm(b, axis=2, keepdims=True)
    ua, ub = a / na, b / nb
    cos = np.clip((ua * ub).sum(axis=2), -1, 1)
    d = np.arccos(cos) / np.pi
    cut = d.min() + (1 - retain) * (d.max() - d.min())
    retained = (d >= cut) if (retain > 0 and d.max() > d.min()) else np.zeros_like(d, bool)
    amb = np.abs(d - cut) <= REL * abs(cut)
    om = (d * np.pi)[..., None]
    with np.errstate(invalid="ignore", divide="ignore"):
        e = (np.sin((1 - t) * om) * ua + np.sin(t * om) * ub) / np.sin(om)
    e = np.where(np.sin(om) < 1e-6, (1 - t) * ua + t * ub, e)
    e /= np.linalg.norm(e, axis=2, keepdims=True)
    keep = retained[..., None]
    return np.where(keep, a, e * na), np.where(keep, b, e * nb), retained, amb


def attn_rel_errors(K, V, Km, Vm, Q, P, S, G):
    """Per decode step s: the query at P+s over tokens 0..P+s, full vs merged, heads pooled."""
    D = K.shape[2]
    out = []
    for s in range(S):
        T = P + s + 1
        q = Q[P + s]                                  # [Hq, D]
        err2 = out2 = 0.0
        for kk, vv, acc in ((K, V, "full"), (Km, Vm, "merged")):
            k = np.repeat(kk[:T], G, axis=1)
            v = np.repeat(vv[:T], G, axis=1)
            z = np.einsum("hd,thd->ht", q, k) / np.sqrt(D)
            p = np.exp(z - z.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            o = np.einsum("ht,thd->hd", p, v)
            if acc == "full":
                o_full = o
            else:
                err2 = ((o_full - o) ** 2).sum()
                out2 = (o_full ** 2).sum()
        out.append(np.sqrt(err2 / out2))
    return np.array(out)


def decode_maps(maps, L, H):
    """The prompt positions each (layer, head) kept, from the --maps JSON: [L, H, prompt]."""
    P = maps["prompt"]
    kept = np.zeros((L, H, P), bool)
    for l in range(L):
        for h in range(H):
            cells = np.frombuffer(base64.b64decode(maps["layers"][l][h]), "<u2")
            left, how = cells & 0x3FFF, cells >> 14
            kept[l, h] = ~((left[:P] == 0) & (how[:P] == 1))
    return kept


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kvlab", required=True)
    ap.add_argument("--model", required=True, help="stories260K.bin (tok512.bin beside it)")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    if not os.path.isfile(args.model):
        print(f"kvlab: skipped: the model {args.model} is missing")
        return 77
    work = args.workdir or tempfile.mkdtemp(prefix="kvlab_press_")
    os.makedirs(work, exist_ok=True)
    capture = os.path.join(work, "capture.safetensors")
    run([args.kvlab, "capture", "--model", args.model, "--prompt", PROMPT,
         "--max-tokens", str(STEPS), "--out", capture, "--json"])
    tensors, meta = read_safetensors(capture)
    L, Hq, H, D = (int(meta[f"kvlab.{k}"]) for k in ("layers", "q_heads", "kv_heads", "head_dim"))
    G = Hq // H
    rope = json.loads(meta["kvlab.key_rope"])
    if meta.get("kvlab.keys_pre_rope", "false") != "false":
        sys.exit("the capture's keys are before RoPE")
    layers = [tuple(tensors[f"layers.{l}.{n}"] for n in ("key", "value", "query"))
              for l in range(L)]
    T = layers[0][0].shape[0]
    P = T - STEPS
    B = min(max(round_half_away(FRACTION * P), 1), P)
    print(f"capture: {T} tokens, {L} layers, {Hq} query heads, {H} KV heads, head_dim {D}; "
          f"prompt {P}, budget {B} per head at {FRACTION:.0%}; RoPE {rope}")
    failures = []
    if not 200 <= P <= 480 or layers[0][2].shape[0] != T:
        failures.append(f"unexpected capture: prompt {P}, {layers[0][2].shape[0]} queries")

    rows = []
    for name, cli, spec in RUNS:
        opt = dict(DEFAULTS, **{k: v for k, v in spec.items() if k in DEFAULTS})
        out = json.loads(run([args.kvlab, "evict", "--source", f"file:{capture}", "--steps",
                              str(STEPS), "--budget", f"{opt['fraction'] * 100:g}%", "--json",
                              "--maps", *cli]))
        B = min(max(round_half_away(opt["fraction"] * P), 1), P)
        if out["prompt"] != P or out["maps"]["prompt"] != P:
            failures.append(f"{name}: prompt {out['prompt']}, expected {P}")
            continue
        cpp = decode_maps(out["maps"], L, H)
        mism = amb_n = 0
        for l in range(L):
            lj = out["per_layer"][l]
            Bl = layer_budget(B, P, L, l, opt)
            ref, amb = reference_kept(spec, layers[l], P, G, rope, Bl, opt)
            bad = (ref != cpp[l]) & ~amb
            mism += int(bad.sum())
            amb_n += int(amb.sum())
            for h in range(H):
                if bad[h].any():
                    extra = np.flatnonzero(cpp[l, h] & ~ref[h] & ~amb[h]).tolist()
                    missing = np.flatnonzero(ref[h] & ~cpp[l, h] & ~amb[h]).tolist()
                    failures.append(f"{name} layer {l} head {h}: kvlab keeps {extra} and drops "
                                    f"{missing} against the reference")
                pk = lj["per_head"][h]["prompt_kept"]
                if pk != int(cpp[l, h].sum()):
                    failures.append(f"{name} layer {l} head {h}: prompt_kept {pk}, "
                                    f"the map keeps {int(cpp[l, h].sum())}")
                if not amb[h].any() and pk != int(ref[h].sum()):
                    failures.append(f"{name} layer {l} head {h}: prompt_kept {pk}, "
                                    f"reference {int(ref[h].sum())}")
            kind = spec["kind"]
            if kind in ("topk", "adakv", "chunkkv") and lj["budget_tokens"] != Bl + STEPS:
                failures.append(f"{name} layer {l}: budget_tokens {lj['budget_tokens']}, "
                                f"expected {Bl} + {STEPS}")
            if kind == "think":
                mask, camb = think_masks(layers[l], P, G, opt)
                got = np.array([[c == "1" for c in m] for m in lj["channel_masks"]])
                cbad = (got != mask) & ~camb
                mism += int(cbad.sum())
                amb_n += int(camb.sum())
                if cbad.any():
                    failures.append(f"think layer {l}: channel_masks {lj['channel_masks']}, "
                                    f"reference {[''.join('01'[c] for c in m) for m in mask]}")
                if lj["key_channels"] != D - int(D * (1 - opt["key_channels"])):
                    failures.append(f"think layer {l}: key_channels {lj['key_channels']}")
                if not lj["memory_bytes"] < lj["full_memory_bytes"]:
                    failures.append(f"think layer {l}: memory {lj['memory_bytes']} not below "
                                    f"the full cache's {lj['full_memory_bytes']}")
        if spec["kind"] == "minicache":
            m, a = minicache_check(out, layers, P, G, L, H, opt, failures)
            mism += m
            amb_n += a
        rows.append((name, f"{L} x {H}", mism, amb_n))

    print(f"{'press':<20} {'layers x heads':>14} {'mismatches':>11} {'ambiguous':>10}")
    for name, lh, m, a in rows:
        print(f"{name:<20} {lh:>14} {m:>11} {a:>10}")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("all agree")
    return 0


def minicache_check(out, layers, P, G, L, H, opt, failures):
    """Merged flags, retained shares and per-step attention errors of the merged layers."""
    mism = amb_n = 0
    pairs = [(lo, lo + 1) for lo in range(L // 2, L - 1, 2)]
    paired = {l for p in pairs for l in p}
    for l in range(L):
        lj = out["per_layer"][l]
        if bool(lj.get("merged", False)) != (l in paired):
            failures.append(f"minicache layer {l}: merged {lj.get('merged', False)}, "
                            f"expected {l in paired}")
            mism += 1
    for lo, hi in pairs:
        (Ka, Va, Qa), (Kb, Vb, Qb) = layers[lo], layers[hi]
        Kma, Kmb, rk, ak = slerp_merge(Ka[:P], Kb[:P], opt["merge_t"], opt["retain"])
        Vma, Vmb, rv, av = slerp_merge(Va[:P], Vb[:P], opt["merge_t"], opt["retain"])
        retained, amb = rk | rv, ak | av
        amb_n += int(amb.sum())
        merged = {lo: (np.concatenate([Kma, Ka[P:]]), np.concatenate([Vma, Va[P:]])),
                  hi: (np.concatenate([Kmb, Kb[P:]]), np.concatenate([Vmb, Vb[P:]]))}
        for l in (lo, hi):
            lj = out["per_layer"][l]
            got = round(lj.get("retained", -1) * P * H)
            want = int(retained.sum())
            print(f"minicache layer {l}: retained {got} of {P * H} (reference {want}, "
                  f"{int(amb.sum())} near the cut)")
            if abs(got - want) > int(amb.sum()):
                failures.append(f"minicache layer {l}: retained {got}, reference {want}")
                mism += abs(got - want)
            K, V, Q = layers[l]
            ref = attn_rel_errors(K, V, *merged[l], Q, P, STEPS, G)
            cpp = np.array(lj["per_step"]["attn_output_rel_error"])
            dev = np.max(np.abs(cpp - ref) / ref)
            print(f"minicache layer {l}: attention error per step {cpp.min():.4f} .. "
                  f"{cpp.max():.4f}, largest relative difference from the reference {dev:.1e}")
            if not dev <= ATTN_REL and not amb.any():
                failures.append(f"minicache layer {l}: attention errors {cpp.tolist()}, "
                                f"reference {ref.tolist()}")
    return mism, amb_n


if __name__ == "__main__":
    sys.exit(main())
