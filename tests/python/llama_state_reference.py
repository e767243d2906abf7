#!/usr/bin/env python3
"""kvlab's reader of llama.cpp state files against files written by llama.cpp itself.

llama-cpp-python (llama.cpp's own build, PyPI) runs SmolLM2-135M-Instruct on the token ids of a
fixed prompt with caches of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 and iq4_nl, with and
without flash attention (V stored as rows, or transposed), and with llama.cpp's Hadamard rotation
of quantized caches switched off once (LLAMA_ATTN_ROT_DISABLE=1); each sequence is saved with
llama_state_seq_save_file. Then, through kvlab's command line only:

  1. `kvlab sources info --source file:X --model M --json` describes each file: 30 layers, 3 KV
     heads, head_dim 64, the tokens, the K/V types, the V layout and the rotation;
  2. `kvlab sources export` writes what kvlab reads (heads split, rotation undone) to
     .safetensors, compared in NumPy:
     a. layer 0 against llama.cpp's own f32 cache. Layer 0's K and V do not depend on the cache
        (they come from the embeddings), so the only difference is the stored type: both are
        rotated here with the same Walsh-Hadamard blocks as llama.cpp (64 values) when the file
        is rotated, and every value must lie within the format's bound of its 32-value block
        whose largest magnitude is A (STEP below: half a step for round-to-nearest types, a
        whole step on the side where the code range is one short, plus the f16 rounding of the
        scale); f32 must be equal to 1e-6 of A;
     b. every layer against `kvlab capture` of the same tokens (kvlab's own forward, keys after
        RoPE): max |K - K_capture| / max |K_capture| per layer at most FLOOR + 3 x STEP[type]
        (FLOOR: kvlab's and llama.cpp's forwards differ this much with an f32 cache, since
        llama.cpp quantizes activations to 8 bits in its products with Q4_1 weights; later
        layers also see the error of earlier layers' cached K and V, hence 3 steps, not 1);
  3. the RoPE kvlab attaches to what it reads (the export's kvlab.key_rope metadata, which
     KVQuant uses to quantize keys before RoPE): its frequencies equal theta^(-2i/64) with theta
     the GGUF's rope.freq_base (read here with the gguf package), adjacent pairs, positions from
     0; and llama.cpp's f32 keys turned back by that RoPE written here in NumPy match
     `kvlab capture --pre-rope` (keys before RoPE) as closely as the post-RoPE keys match the
     post-RoPE capture (a rotation of pairs: at most sqrt(2) x FLOOR).

Measured with llama-cpp-python 0.3.36 (layer 0 error / bound; K vs capture): f32 0 / 2.4e-2,
f16 0.91 / 2.9e-2, bf16 0.93 / 2.4e-2, q8_0 0.94 / 2.7e-2, q4_0 0.99 / 0.28, q4_1 0.99 / 0.17,
q5_0 0.98 / 0.11, q5_1 0.96 / 0.090, iq4_nl 0.89 / 0.18, q8_0 unrotated 0.93 / 3.8e-2.

Usage: llama_state_reference.py --kvlab PATH --model PATH.gguf --llama-python PATH [--workdir DIR]
(the comparison runs in the gguf/numpy environment, llama.cpp in a child process of
llama-python, the llamacpp-venv of scripts/test_data.sh)
Exit codes: 0 agreement, 1 disagreement or error, 77 llama-cpp-python unusable (skipped).
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

PROMPT = ("The history of the printing press begins in the fifteenth century, when Johannes "
          "Gutenberg combined movable metal type, oil-based ink and a wooden press.")
LAYERS, KV_HEADS, HEAD_DIM = 30, 3, 64

# Per-value error bound as a fraction of the block's largest magnitude A (32-value blocks).
HALF = 2.0 ** -11  # f16 rounding, of a value or of a block scale
STEP = {
    "F32": 1e-6,
    "F16": HALF,
    "BF16": 2.0 ** -8,
    "Q8_0": 1 / 254 + HALF,        # d = A/127, round to nearest
    "Q4_0": 1 / 8 + HALF,          # d = A/8, codes -8..7: a whole step on the short side
    "Q4_1": 1 / 15 + 2 * HALF,     # d = (max-min)/15 <= 2A/15, half of it; f16 d and min
    "Q5_0": 1 / 16 + HALF,         # d = A/16, codes -16..15
    "Q5_1": 1 / 31 + 2 * HALF,     # d = (max-min)/31 <= 2A/31, half of it
    "IQ4_NL": 1 / 8 + HALF,        # levels -127..113 of d = A/127: 14 levels short on one side
}
# ggml type ids (ggml.h)
TYPES = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8,
         "IQ4_NL": 20, "BF16": 30}
# name, K type, V type, flash attention, rotation disabled
CONFIGS = [
    ("f32", "F32", "F32", False, False),
    ("f16", "F16", "F16", False, False),
    ("f16-fa", "F16", "F16", True, False),
    ("bf16-fa", "BF16", "BF16", True, False),
    ("q8_0-k-f16-v", "Q8_0", "F16", False, False),
    ("q8_0", "Q8_0", "Q8_0", True, False),
    ("q4_0", "Q4_0", "Q4_0", True, False),
    ("q4_1", "Q4_1", "Q4_1", True, False),
    ("q5_0", "Q5_0", "Q5_0", True, False),
    ("q5_1", "Q5_1", "Q5_1", True, False),
    ("iq4_nl", "IQ4_NL", "IQ4_NL", True, False),
    ("q8_0-norot", "Q8_0", "Q8_0", True, True),
]
FLOOR = 0.03


def skip(reason):
    # Skipped even with KVLAB_REQUIRE_TEST_DATA=1: scripts/test_data.sh goes on without the
    # llama.cpp environment when llama-cpp-python does not build on the machine.
    print(f"kvlab: skipped: {reason}")
    sys.exit(77)


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def rope_back(k, freq):
    """Turns keys [tokens, heads, dim] at positions 0, 1, ... back by RoPE, adjacent pairs."""
    pos = np.arange(k.shape[0], dtype=np.float64)[:, None, None]
    ang = pos * np.asarray(freq)[None, None, :]
    a, b = k[..., 0::2], k[..., 1::2]
    out = np.empty_like(k)
    out[..., 0::2] = a * np.cos(ang) + b * np.sin(ang)
    out[..., 1::2] = -a * np.sin(ang) + b * np.cos(ang)
    return out


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    dtypes = {"F32": np.float32, "F16": np.float16, "I32": np.int32}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        raw = data[a:b]
        if t["dtype"] == "BF16":
            arr = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(raw, dtypes[t["dtype"]])
        out[name] = arr.reshape(t["shape"]).astype(np.float64)
    return out


def hadamard(n):
    h = np.array([[1.0]])
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / np.sqrt(n)


def rotate(x, n=64):
    """llama.cpp's attn_rot on [..., head_dim] vectors: blocks of n values times H_n."""
    shape = x.shape
    return (x.reshape(-1, n) @ hadamard(n)).reshape(shape)


def run(cmd):
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()}")
    return res.stdout


def save_states(model, ids, work):
    """One llama.cpp context per config; returns {name: path}."""
    try:
        import llama_cpp
        import llama_cpp.llama_cpp as low
    except Exception as e:  # noqa: BLE001 - any failure to load the library means "skip"
        skip(f"llama-cpp-python does not load: {e}")
    print(f"llama-cpp-python {llama_cpp.__version__}")
    default_params = low.llama_model_default_params

    def without_extra_buffers():
        # ggml's AMX kernels die with SIGILL on KVM guests that list AMX without granting it
        # (bench/gguf_runner_report.py); the AVX2/AVX-512 kernels run everywhere.
        p = default_params()
        p.use_extra_bufts = False
        return p

    paths = {}
    for name, tk, tv, fa, norot in CONFIGS:
        if norot:
            os.environ["LLAMA_ATTN_ROT_DISABLE"] = "1"
        low.llama_model_default_params = without_extra_buffers
        try:
            llm = llama_cpp.Llama(model_path=model, n_ctx=64, n_batch=64, n_threads=2,
                                  type_k=TYPES[tk], type_v=TYPES[tv], flash_attn=fa,
                                  verbose=False)
        finally:
            low.llama_model_default_params = default_params
            os.environ.pop("LLAMA_ATTN_ROT_DISABLE", None)
        llm.eval(ids)
        path = os.path.join(work, f"{name}.bin")
        arr = (low.llama_token * len(ids))(*ids)
        n = low.llama_state_seq_save_file(llm.ctx, path.encode(), 0, arr, len(ids))
        if n == 0:
            sys.exit(f"llama_state_seq_save_file failed for {name}")
        paths[name] = path
        del llm
    return paths


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--save-states":
        # Run by the llama.cpp environment's Python: model, workdir, token ids.
        model, work, ids = sys.argv[2], sys.argv[3], [int(t) for t in sys.argv[4].split(",")]
        print(json.dumps(save_states(model, ids, work)))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kvlab", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--llama-python", required=True,
                    help="the Python of scripts/test_data.sh's llamacpp-venv")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    if not os.access(args.llama_python, os.X_OK):
        skip(f"no llama.cpp environment at {args.llama_python} (scripts/test_data.sh builds it)")
    work = args.workdir or tempfile.mkdtemp(prefix="kvlab-llama-state-")
    os.makedirs(work, exist_ok=True)

    ref_path = os.path.join(work, "capture.safetensors")
    run([args.kvlab, "capture", "--model", args.model, "--prompt", PROMPT, "--max-tokens", "0",
         "--out", ref_path])
    ref = read_safetensors(ref_path)
    ids = [int(t) for t in ref["tokens"]]
    print(f"kvlab capture: {len(ids)} tokens")
    res = subprocess.run([args.llama_python, os.path.abspath(__file__), "--save-states",
                          args.model, work, ",".join(map(str, ids))],
                         capture_output=True, text=True)
    if res.returncode == 77:
        skip(res.stdout.strip())
    if res.returncode != 0:
        sys.exit(f"llama.cpp ({args.llama_python}) failed ({res.returncode}): "
                 f"{res.stdout.strip()} {res.stderr.strip()}")
    lines = res.stdout.strip().splitlines()
    print(lines[0])
    paths = json.loads(lines[-1])

    failures = []
    caches = {}
    for name, tk, tv, fa, norot in CONFIGS:
        path = paths[name]
        rot_opt = ["--llama-rotation", "off"] if norot else []
        info = json.loads(run([args.kvlab, "sources", "info", "--source", f"file:{path}",
                               "--model", args.model, "--json", *rot_opt]))
        k_rot = tk in STEP and TYPES[tk] not in (0, 1, 30) and not norot
        v_rot = tv in STEP and TYPES[tv] not in (0, 1, 30) and not norot
        want = {"layers": LAYERS, "kv_heads": KV_HEADS, "head_dim": HEAD_DIM,
                "tokens": len(ids), "k_type": tk, "v_type": tv, "v_transposed": not fa,
                "k_rotation": "Hadamard 64, undone" if k_rot else "none",
                "v_rotation": "Hadamard 64, undone" if v_rot else "none"}
        got = {k: info.get(k) for k in want}
        if got != want:
            failures.append(f"{name}: sources info {got} != {want}")
        out = os.path.join(work, f"{name}.safetensors")
        run([args.kvlab, "sources", "export", "--source", f"file:{path}", "--model", args.model,
             "--out", out, *rot_opt])
        caches[name] = (read_safetensors(out), tk, tv, k_rot, v_rot)

    base = caches["f32"][0]
    print(f"{'cache':<14} {'layer 0 K/bound':>15} {'layer 0 V/bound':>15} "
          f"{'K vs capture':>13} {'tolerance':>10}")
    floor = 0.0
    for name, (c, tk, tv, k_rot, v_rot) in caches.items():
        ratios = []
        for kind, typ, rot in (("key", tk, k_rot), ("value", tv, v_rot)):
            x = c[f"layers.0.{kind}"]
            r = base[f"layers.0.{kind}"]
            if rot:  # compare where llama.cpp quantized: in the rotated frame
                x, r = rotate(x), rotate(r)
            blocks_r = r.reshape(-1, 32)
            amax = np.abs(blocks_r).max(axis=1, keepdims=True)
            bound = STEP[typ] * amax + 1e-5 * amax + 1e-7
            ratios.append(float(np.max(np.abs(x.reshape(-1, 32) - blocks_r) / bound)))
        rel = 0.0
        for layer in range(LAYERS):
            k = c[f"layers.{layer}.key"]
            kr = ref[f"layers.{layer}.key"]
            rel = max(rel, float(np.max(np.abs(k - kr)) / np.max(np.abs(kr))))
        if name == "f32":
            floor = rel
        tol = FLOOR + 3 * STEP[tk]
        print(f"{name:<14} {ratios[0]:>15.3f} {ratios[1]:>15.3f} {rel:>13.2e} {tol:>10.2e}")
        if max(ratios) > 1.0:
            failures.append(f"{name}: layer 0 off its format's bound by x{max(ratios):.2f}")
        if not rel <= tol:
            failures.append(f"{name}: keys differ from kvlab capture by {rel:.2e} > {tol:.2e}")
    print(f"floor (f32 cache vs kvlab capture): {floor:.2e}")

    # 3. The RoPE kvlab attaches, against the GGUF's theta and kvlab's pre-RoPE capture.
    from gguf import GGUFReader
    reader = GGUFReader(args.model)
    theta = float(reader.fields["llama.rope.freq_base"].parts[-1][0])
    freq = theta ** (-2.0 * np.arange(HEAD_DIM // 2) / HEAD_DIM)
    meta = read_header(os.path.join(work, "f32.safetensors"))["__metadata__"]
    rope = json.loads(meta.get("kvlab.key_rope", "null") or "null")
    if not rope:
        failures.append("the export of the f32 state carries no kvlab.key_rope")
    else:
        got_freq = np.asarray(rope["frequencies"])
        if (rope["rotary_dims"] != HEAD_DIM or rope["half_split"] or rope["first_position"] != 0
                or "positions" in rope or got_freq.shape != freq.shape
                or np.max(np.abs(got_freq / freq - 1)) > 1e-12):
            failures.append(f"kvlab.key_rope {rope} is not theta={theta}'s RoPE of {HEAD_DIM} "
                            "dims, adjacent pairs, from position 0")
        if meta.get("kvlab.keys_pre_rope") != "false":
            failures.append("the export says its keys are before RoPE")
    pre_path = os.path.join(work, "capture_pre_rope.safetensors")
    run([args.kvlab, "capture", "--model", args.model, "--prompt", PROMPT, "--max-tokens", "0",
         "--pre-rope", "--out", pre_path])
    pre = read_safetensors(pre_path)
    rel_pre = 0.0
    for layer in range(LAYERS):
        k = rope_back(base[f"layers.{layer}.key"], freq)
        kr = pre[f"layers.{layer}.key"]
        rel_pre = max(rel_pre, float(np.max(np.abs(k - kr)) / np.max(np.abs(kr))))
    print(f"f32 keys turned back by RoPE (theta {theta:g}) vs kvlab capture --pre-rope: "
          f"{rel_pre:.2e} (tolerance {np.sqrt(2) * FLOOR:.2e})")
    if not rel_pre <= np.sqrt(2) * FLOOR:
        failures.append(f"pre-RoPE keys differ from kvlab capture --pre-rope by {rel_pre:.2e}")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("all agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
