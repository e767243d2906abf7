#!/usr/bin/env python3
"""Reference bytes for kvlab's FP4 KV quantizers (engine/src/quant/fp4_quantizer.cpp), made
without any kvlab code, then (with --engine-tests) kvlab_engine_tests' Fp4Reference test run on
them, which requires byte equality.

  MXFP4: gguf.quants.quantize(x, GGMLQuantizationType.MXFP4) from the `gguf` package (0.19,
         llama.cpp's own Python quantizer; the rule of quantize_row_mxfp4_ref), rows of head_dim.
  NVFP4: gguf-py's NVFP4 class has no quantize_blocks, so the formula of TensorRT-LLM's
         cvt_warp_fp16_to_fp4 / vLLM's nvfp4_quant_kernels.cu is written here in NumPy, with its
         own round-to-nearest-even onto the E4M3 and E2M1 grids (exact float64 distances):
           global = float32(448 * 6) / amax(|x|)        (1 where amax is 0)
           sf     = global * (block_amax * float32(1 / 6)),   blocks of 16 along head_dim
           sf8    = e4m3(sf), saturating at 448
           out    = 1 / (float(sf8) * (1 / global)), 0 where sf8 is 0
           code   = e2m1(x * out), saturating at 6, sign kept
         bytes: all nibbles (element 2i low, 2i+1 high), then all sf8 bytes.

  OUT_DIR/<case>.f32           the input, [tokens, heads, dim] float32 little-endian
  OUT_DIR/<case>.mxfp4         gguf's block_mxfp4 bytes
  OUT_DIR/<case>.nvfp4         nibbles then block scales
  OUT_DIR/<case>.nvfp4_global  the fp32 global scale
  OUT_DIR/cases.txt            "<case> <tokens> <heads> <dim> <fp16-exact 0|1>" per case

Usage: fp4_reference.py OUT_DIR [--engine-tests PATH] [--seed N]
"""
import argparse
import os
import sys

import numpy as np

from engine_reference import run_engine_test
from gguf import GGMLQuantizationType
from gguf.quants import quantize


def e4m3_grid():
    """Non-negative finite E4M3 (fn) values, codes 0..0x7e, ascending (float64, exact)."""
    codes = np.arange(0x7F)
    e, m = codes >> 3, codes & 7
    return np.where(e == 0, m * 2.0**-9, (1 + m / 8.0) * 2.0 ** (e - 7.0))


E4M3 = e4m3_grid()
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float64)


def nearest_even(grid, a):
    """Index of the nearest grid value to a >= 0, ties to the even index, beyond the top clamped."""
    a = np.asarray(a, dtype=np.float64)
    hi = np.clip(np.searchsorted(grid, a, side="left"), 0, len(grid) - 1)
    lo = np.clip(hi - 1, 0, len(grid) - 1)
    d_lo, d_hi = a - grid[lo], grid[hi] - a
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    idx = np.where(pick_hi, hi, lo)
    return np.where(a >= grid[-1], len(grid) - 1, idx)


def nvfp4_reference(x):
    flat = x.reshape(-1).astype(np.float32)
    amax = np.float32(np.abs(flat).max()) if flat.size else np.float32(0)
    g = np.float32(448.0 * 6.0) / amax if amax > 0 else np.float32(1.0)
    blocks = flat.reshape(-1, 16)
    bmax = np.abs(blocks).max(axis=1)
    sf = g * (bmax * (np.float32(1.0) / np.float32(6.0)))
    sf8 = nearest_even(E4M3, sf).astype(np.uint8)
    narrow = E4M3[sf8].astype(np.float32)
    inv_g = np.float32(1.0) / g
    with np.errstate(divide="ignore"):
        out = np.where(narrow != 0, np.float32(1.0) / (narrow * inv_g), np.float32(0.0))
    v = blocks * out.astype(np.float32)[:, None]
    assert v.dtype == np.float32
    codes = nearest_even(E2M1, np.abs(v)).astype(np.uint8) | (np.signbit(v).astype(np.uint8) << 3)
    nibbles = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    return nibbles.tobytes() + sf8.tobytes(), g


def self_check():
    """The worked example of tests/engine/test_fp4.cpp (Nvfp4BlockScalesFollowTheKernelFormula)."""
    x = np.zeros(48, dtype=np.float32)
    x[[0, 1, 2, 16, 17, 32, 33]] = [3, 1, -0.4, 12, 5, 1, 0.1]
    data, g = nvfp4_reference(x)
    assert g == 224, g
    assert list(data[24:]) == [0x6E, 0x7E, 0x61], data[24:].hex()
    assert data[0] == 0x47 and data[1] == 0x0A and data[8] == 0x47 and data[16] == 0x17, data.hex()


def make_cases(rng):
    cases = []
    # fp16 keys-like data: normal with outlier channels.
    t, h, d = 37, 3, 64
    x = rng.standard_normal((t, h, d)).astype(np.float32)
    x[:, :, 3] *= 20
    x[:, :, 1] += 4
    cases.append(("kv_f16", x.astype(np.float16).astype(np.float32), True))
    # Ties: each 32-block has amax 3 (MXFP4 d = 0.25; NVFP4 16-blocks with amax 3 get out = 2) and
    # values on multiples of 1/16, many exactly between two grid points.
    t, h, d = 4, 2, 64
    x = (rng.integers(-48, 49, size=(t, h, d)) / 16.0).astype(np.float32)
    x.reshape(-1, 16)[:, 0] = 3.0
    cases.append(("ties", x, True))
    # float32 values of widely spread magnitudes (not fp16-exact).
    t, h, d = 16, 2, 128
    mag = np.exp2(rng.uniform(-20, 10, size=(t, h, d)))
    x = (mag * rng.choice([-1.0, 1.0], size=(t, h, d))).astype(np.float32)
    x.reshape(-1, 16)[::5] *= np.float32(1e-3)
    cases.append(("wide_f32", x, False))
    # Whole zero blocks, lone values and negative zeros.
    t, h, d = 3, 1, 64
    x = np.zeros((t, h, d), dtype=np.float32)
    x[0, 0, 5] = -2.5
    x[1, 0, 40] = 0.75
    x[2, 0, 0:16] = -0.0
    cases.append(("sparse", x, True))
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--engine-tests", help="kvlab_engine_tests to run on the files")
    ap.add_argument("--seed", type=int, default=20260522)
    args = ap.parse_args()
    self_check()
    os.makedirs(args.out_dir, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    lines = []
    for name, x, f16 in make_cases(rng):
        t, h, d = x.shape
        base = os.path.join(args.out_dir, name)
        with open(base + ".f32", "wb") as f:
            f.write(x.astype("<f4").tobytes())
        mx = quantize(x.reshape(-1, d), GGMLQuantizationType.MXFP4)
        with open(base + ".mxfp4", "wb") as f:
            f.write(np.ascontiguousarray(mx).tobytes())
        nv, g = nvfp4_reference(x)
        with open(base + ".nvfp4", "wb") as f:
            f.write(nv)
        with open(base + ".nvfp4_global", "wb") as f:
            f.write(np.float32(g).astype("<f4").tobytes())
        lines.append(f"{name} {t} {h} {d} {int(f16)}")
    with open(os.path.join(args.out_dir, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"fp4_reference: {len(lines)} cases written to {args.out_dir}")
    if not args.engine_tests:
        return 0
    return run_engine_test(args.engine_tests, "Fp4Reference.*", "KVLAB_FP4_REFERENCE_DIR",
                           args.out_dir,
                           "fp4_reference")


if __name__ == "__main__":
    sys.exit(main())
